"""Leakage audit: how much of a conditional-perplexity gain survives without future tag information.

Hexatags are computed from the whole sentence, so in p(x | T(x)) (``conditional``) the tags on the
words before x_t also describe words after t: a non-terminal says how the next word attaches, a
non-eos non-terminal says that more words follow, eos says that none do (docs/design.md §1, §4).
The audit scores the same texts with the same SiPE model under tag conditions that remove that
information, and sets the perplexities against the model's ``full`` condition and a baseline p(x):

``full``              tags of the parse of the whole text (the paper's convention; leaks).
``untagged``          no tags at all (the prior is zero everywhere; the model never saw this in
                      training, so it is a floor rather than an estimate).
``no_eos``            full-text tags with the last tagged word's pair withheld: the only tag that
                      states "the sentence ends here". Still leaks every other non-terminal.
``prefix``            strictly causal: token t is predicted with tags from the parser's parse of the
                      text *before* t (its characters up to the end of token t-1), aligned to the
                      prefix's tokens exactly as in ``full``. Every tag used is a function of x_<t.
                      The prefix's last word gets the parser's tags for a complete sentence (eos),
                      which the model only ever saw on a sentence's last word.
``prefix_drop_last``  as ``prefix`` but the prefix's last word is untagged (its eos and its possibly
                      incomplete analysis removed; loses that word's causal information too).
``causal``            word i carries the tags of word i in the parse of words 1..i
                      (:class:`structpe.parser.tag_controls.PrefixParser`): causal over words, one
                      forward per text. The tags the ``position_causal`` control is trained on, so
                      for that model it is the matched, leak-free condition.

Both causal conditions are leak-free ways of feeding the model parses, and the model was trained
on leaky ones, so the gain they keep is a lower bound on what a leak-free conditioning keeps; the
reported ``leaked_share_upper`` = 1 - (best causal gain) / (full gain) is an upper bound on the share
of the full-parse gain that is leakage. The honest likelihoods (``joint``, ``marginal`` in
:mod:`structpe.eval.scoring.likelihood`) answer the same question by paying for the tags instead.

Cost: the causal conditions parse every prefix (one parse per token) and run one forward per token.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from structpe.choices import LEAKAGE_DEFAULT, LEAKAGE_VARIANTS
from structpe.eval.scoring.inputs import parse_texts
from structpe.eval.scoring.rows import Row, run_rows
from structpe.eval.scoring.scorer import CausalScorer
from structpe.eval.scoring.types import Parser, uses_tags
from structpe.parser.tag_controls import PrefixParser, parse_prefixes
from structpe.syntax.alignment import align_tags_by_offsets, get_field
from structpe.syntax.hexatags import IGNORE_INDEX as IGNORE

CAUSAL = ("prefix", "prefix_drop_last")


def _ppl(nll: float, n_tokens: int, n_words: int) -> dict[str, Any]:
    return {
        "nll_sum": nll,
        "n_tokens": n_tokens,
        "n_words": n_words,
        "token_ppl": math.exp(nll / n_tokens),
        "word_ppl": math.exp(nll / n_words),
    }


def _drop_last(terms: list[int], nts: list[int]) -> tuple[list[int], list[int]]:
    tagged = [i for i, t in enumerate(terms) if t != IGNORE]
    if tagged:
        terms, nts = list(terms), list(nts)
        terms[tagged[-1]] = nts[tagged[-1]] = IGNORE
    return terms, nts


def leakage_audit(
    model: Any,
    tokenizer: Any,
    texts: Sequence[str],
    parser: Parser | None = None,
    *,
    parses: list[Any] | None = None,
    baseline: Any | None = None,
    variants: Sequence[str] = LEAKAGE_DEFAULT,
    batch_size: int = 32,
    per_token: bool = False,
) -> dict[str, Any]:
    """Perplexity of ``texts`` under each tag condition of ``variants`` (module docstring).

    ``parses`` (one per text) give the ``full`` / ``no_eos`` tags; otherwise ``parser`` parses the
    texts. The causal variants need ``parser`` (the same one, so that parser error is not counted as
    leakage). ``baseline`` (a model that reads no tags, e.g. injection ``none`` trained on the same
    data) gives the reference p(x) for the gains; the ``untagged`` condition is reported besides.
    Word-level perplexities use the number of words of the full parse of each text.
    ``per_token`` adds each condition's per-token log-probs (one list per text) to the report.
    """
    texts = list(texts)
    if not texts:
        raise ValueError("no texts to audit")
    if not uses_tags(model):
        raise ValueError("the leakage audit needs a model that reads tags (injection other than 'none')")
    unknown = [v for v in variants if v not in LEAKAGE_VARIANTS]
    if unknown:
        raise ValueError(f"unknown audit variants {unknown}; choose from {LEAKAGE_VARIANTS}")
    if any(v in (*CAUSAL, "causal") for v in variants) and parser is None:
        raise ValueError(
            "the causal variants (prefix, prefix_drop_last, causal) need a parser to parse each prefix"
        )
    if parses is None:
        if parser is None:
            raise ValueError("give parses or a parser for the full-text tags")
        parses = parse_texts(parser, texts)
    scorer = CausalScorer(model, tokenizer, parser, batch_size=batch_size)
    enc = scorer.encode(texts, parses)
    n_tokens = sum(len(e.ids) for e in enc)
    n_words = sum(len(get_field(p, "words")) for p in parses)
    results: dict[str, Any] = {}

    def full_rows(kind: str) -> list[Row]:
        rows = []
        # `causal`: the same texts and tokens, each word's tags from the parse of its word prefix
        encoded = scorer.encode(texts, PrefixParser(parser).retag(parses)) if kind == "causal" else enc
        for e in encoded:
            t, n = list(e.terminals), list(e.nonterminals)
            if kind == "untagged":
                t, n = [IGNORE] * len(t), [IGNORE] * len(n)
            elif kind == "no_eos":
                t, n = _drop_last(t, n)
            rows.append(Row([scorer.bos_id, *e.ids], [IGNORE, *t], [IGNORE, *n]))
        return rows

    for v in variants:
        if v in CAUSAL:
            continue
        outs = run_rows(scorer, full_rows(v))
        results[v] = _ppl(-sum(sum(o.token_lp) for o in outs), n_tokens, n_words)
        if per_token:
            results[v]["token_logprobs"] = [o.token_lp for o in outs]

    causal = [v for v in variants if v in CAUSAL]
    if causal:
        # one parse per distinct prefix: the text up to the end of each token but the last
        prefixes = sorted({e.text[: e.offsets[j][1]] for e in enc for j in range(len(e.ids) - 1)})
        parsed = parse_prefixes(parser, prefixes)
        rows: dict[str, list[Row]] = {v: [] for v in causal}
        for e in enc:
            for t in range(1, len(e.ids) + 1):  # predict token t (1-based) from tokens < t
                ids = [scorer.bos_id, *e.ids[:t]]
                terms = [IGNORE] * (t + 1)
                nts = [IGNORE] * (t + 1)
                if t > 1:
                    prefix = e.text[: e.offsets[t - 2][1]]
                    pt, pn, _ = align_tags_by_offsets(prefix, e.offsets[: t - 1], parsed[prefix])
                    terms[1:t], nts[1:t] = pt, pn
                for v in causal:
                    tv, nv = (terms, nts) if v == "prefix" else _drop_last(terms, nts)
                    rows[v].append(Row(ids, tv, nv, logits_from=t - 1))  # only token t
        for v in causal:
            outs = run_rows(scorer, rows[v])
            lps = [o.token_lp[-1] for o in outs]
            results[v] = _ppl(-sum(lps), n_tokens, n_words)
            if per_token:
                it = iter(lps)
                results[v]["token_logprobs"] = [[next(it) for _ in e.ids] for e in enc]

    report: dict[str, Any] = {
        "benchmark": "leakage",
        "scoring": "conditional log-likelihood p(x | tags) under each tag condition, BOS-conditioned",
        "n_sentences": len(texts),
        "variants": results,
    }
    if baseline is not None:
        if uses_tags(baseline):
            raise ValueError("baseline must be a model that reads no tags (its p(x) is the reference)")
        base = CausalScorer(baseline, tokenizer, batch_size=batch_size).score(texts)
        ref = _ppl(-sum(s.total for s in base), n_tokens, n_words)
        report["baseline"] = ref
        gains = {v: 1.0 - r["word_ppl"] / ref["word_ppl"] for v, r in results.items()}
        report["gain_vs_baseline"] = gains
        share = leaked_share_upper(gains)
        if share is not None:
            report["leaked_share_upper"] = share
    return report


def leaked_share_upper(gains: dict[str, float]) -> float | None:
    """1 - (best causal gain) / (full gain): an upper bound on the share of the full-parse gain that
    is leakage (module docstring); None without a positive full gain or a causal condition."""
    if "full" in gains and any(v in gains for v in CAUSAL) and gains["full"] > 0:
        best = max(gains[v] for v in CAUSAL if v in gains)
        return 1.0 - max(best, 0.0) / gains["full"]
    return None


def format_results(result: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows for a Markdown table: one per condition (and the baseline)."""
    rows = []
    gains = result.get("gain_vs_baseline", {})
    for v, r in result["variants"].items():
        rows.append(
            {
                "condition": v,
                "token_ppl": r["token_ppl"],
                "word_ppl": r["word_ppl"],
                "gain_vs_baseline": gains.get(v, ""),
            }
        )
    if "baseline" in result:
        b = result["baseline"]
        rows.append(
            {
                "condition": "baseline p(x)",
                "token_ppl": b["token_ppl"],
                "word_ppl": b["word_ppl"],
                "gain_vs_baseline": 0.0,
            }
        )
    return rows, ["condition", "token_ppl", "word_ppl", "gain_vs_baseline"]

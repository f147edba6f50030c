"""Perplexity on tagged text, conditioned on its fixed parse (docs/design.md §4; SiPE §4 "PPL").

Input: JSON lines from ``structpe tag`` (``words``, ``terminals``, ``nonterminals``, optional
``text``) or TaggedSentence objects. The text scored is the ``text`` field when present (``structpe
tag`` writes it), else the words detokenized by the training rule (never joined with spaces; the
count is ``texts_detokenized``), and the tags are the given ones — so the number is p(x | T(x)) for
a model that reads tags (the paper's convention; `joint` and `marginal` are the honest alternatives) and plain
p(x) for one that does not. Encoders give a *pseudo*-perplexity from PLL, labelled as such.

token-level PPL = exp(-sum log p / #tokens); word-level PPL = exp(-sum log p / #words), with the
same summed log-probability (every token belongs to some word), so the two are comparable across
tokenizers only at the word level. ``append_eos`` counts an end-of-sentence token in both.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from structpe.errors import StructpeError
from structpe.eval.scoring.masked import MaskedScorer
from structpe.eval.scoring.scorer import CausalScorer, ScoringSpec, describe_scoring, make_scorer, spec_with
from structpe.eval.scoring.smc_views import SMC_SYSTEMS, convergence, view_scores, views
from structpe.models.validate import position_limit
from structpe.syntax.alignment import get_field


def check_positions(model: Any, lengths: list[tuple[int, int]], sents: list[Any], slack: int = 0) -> None:
    """Refuse, before scoring, a sentence of more tokens (BOS and EOS included) than the model has
    positions, naming it, the limit and the way out (``--max-length`` skips longer sentences; it
    counts ``slack`` tokens fewer than the model needs, e.g. an encoder's SEP)."""
    limit = position_limit(model)
    if limit is None:
        return
    for i, n in lengths:
        if n > limit:
            s = sents[i]
            sid = s.get("sent_id") if isinstance(s, Mapping) else getattr(s, "sent_id", None)
            name = f"sentence {i + 1}" + (f" ({sid})" if sid else "")
            raise StructpeError(
                f"{name} has {n:,} tokens, over the model's {limit:,} positions (max_position_embeddings); "
                f"pass --max-length {limit - slack} to skip longer sentences, or split the sentence"
            )


def read_tagged_jsonl(path: str | Path, limit: int | None = None) -> list[Any]:
    """TaggedSentence objects from a JSON-lines file; errors name the file and line."""
    from structpe.errors import StructpeError, reading
    from structpe.io import open_text
    from structpe.syntax.tagged import TaggedSentence

    path = Path(path)
    out = []
    with open_text(path, "--data file") as f, reading(path):
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                out.append(TaggedSentence.from_dict(json.loads(line)))
            except (ValueError, KeyError, TypeError) as err:
                raise StructpeError(f"{path}:{line_no}: {err}") from err
            if limit is not None and len(out) >= limit:
                break
    if not out:
        raise StructpeError(f"{path}: no tagged sentences (the file is empty or blank)")
    return out


def raw_text(sent: Any) -> str | None:
    """The raw ``text`` a sentence carries (dict key or ``meta["text"]``), else None."""
    if isinstance(sent, dict):
        meta = sent.get("meta") or {}
        return sent.get("text", meta.get("text"))
    return (getattr(sent, "meta", None) or {}).get("text")


def sentence_text(sent: Any) -> str:
    """The ``text`` of a sentence, else its words detokenized by the training rule (sacremoses'
    English rules, :func:`structpe.train.corpus.detokenize_words`, words kept as they are), never
    joined with spaces: the model was trained on raw text (``videos.``, not ``videos .``)."""
    text = raw_text(sent)
    if text is not None:
        return text
    from structpe.train.corpus import detokenize_words

    return detokenize_words(get_field(sent, "words"), brown=False)[1]


def evaluate_ppl(
    model: Any,
    tokenizer: Any,
    sentences: Iterable[Any],
    *,
    progress: bool = True,
    spec: ScoringSpec | None = None,
    scorer: CausalScorer | MaskedScorer | None = None,
    **scoring: Any,
) -> dict[str, Any]:
    """Token- and word-level perplexity of ``sentences`` (tagged) under ``model``.

    A tagged decoder's ``marginal`` also reports ``by_k``: the perplexity of the sentence bound at
    each beam width of ``MARGINAL_LADDER`` up to k (``nll_sum``, ``token_ppl``, ``word_ppl``); its
    ``smc`` reports ``particles``, ``stderr`` (of ``word_ppl``, the jackknife over the replicates)
    and ``word_ppl_at_n`` (one system of N particles; ``structpe.eval.scoring.smc_views.convergence``).

    How sentences are scored: ``spec`` (a ScoringSpec), or its fields as keywords (``likelihood=``,
    ``append_eos=`` ...), which override the spec. Sentences longer than its ``max_length`` tokens
    are skipped and counted (``skipped``).
    """
    sents = list(sentences)
    if not sents:
        raise StructpeError("no sentences to score")
    spec = spec_with(spec, **scoring)
    # perplexity sums whole sentences: the smc mode needs only its sentence systems
    spec = spec if spec.smc_parts else dataclasses.replace(spec, smc_parts="sentence")
    max_length, append_eos = spec.max_length, spec.append_eos  # texts over max_length are skipped below
    scorer = scorer or make_scorer(model, tokenizer, None, spec, progress=progress)
    texts = [sentence_text(s) for s in sents]
    keep = list(range(len(sents)))
    skipped = 0
    lens = [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
    extra = 1 + int(append_eos)
    if max_length is not None:
        keep = [i for i in keep if lens[i] + extra <= max_length]
        skipped = len(sents) - len(keep)
    specials = 2 if isinstance(scorer, MaskedScorer) else extra  # an encoder's CLS and SEP
    check_positions(model, [(i, lens[i] + specials) for i in keep], sents, specials - extra)
    if not keep:
        raise StructpeError(f"every sentence is longer than max_length {max_length} tokens: nothing to score")
    texts_k = [texts[i] for i in keep]
    parses = [sents[i] for i in keep] if scorer.tagged else None
    scores = scorer.score(texts_k, parses)
    total_lp = 0.0
    n_tokens = 0
    n_words = 0
    for i, sc in zip(keep, scores, strict=True):
        total_lp += sc.total
        n_tokens += len(sc.logprobs) + int(sc.eos_logprob is not None)
        n_words += len(get_field(sents[i], "words")) + int(sc.eos_logprob is not None)
    if not math.isfinite(total_lp):
        raise StructpeError(
            f"the model scores these sentences {total_lp} (not a finite log-probability): "
            "its weights or inputs hold NaN or infinite values"
        )
    pseudo = isinstance(scorer, MaskedScorer)
    result: dict[str, Any] = {
        "benchmark": "ppl",
        "scoring": describe_scoring(scorer),
        "likelihood": scorer.likelihood,
        "pseudo_perplexity": pseudo,
        "n_sentences": len(keep),
        "skipped": skipped,
        "n_tokens": n_tokens,
        "n_words": n_words,
        "nll_sum": -total_lp,
        "token_ppl": math.exp(-total_lp / n_tokens),
        "word_ppl": math.exp(-total_lp / n_words),
        "bits_per_token": -total_lp / n_tokens / math.log(2),
        "unaligned_words": sum(s.unaligned_words for s in scores),
        "texts_detokenized": sum(raw_text(sents[i]) is None for i in keep),
        "append_eos": append_eos,
    }
    if scorer.likelihood == "smc" and scorer.tagged:  # budgets N and 4N; the word ppl's standard error
        names = views(SMC_SYSTEMS)

        def word_ppl(view: str) -> tuple[float, list[bool]]:
            lp = sum(view_scores(sc, names[view]).total for sc in scores)
            return math.exp(-lp / n_words), []

        result.update(convergence(word_ppl, scorer.particles, SMC_SYSTEMS))
        result["proposal"] = scorer.proposal
        result["word_ppl_at_n"] = result.pop("score_at_n")
    if scorer.likelihood == "marginal" and scorer.tagged:  # the bound at every width of the ladder
        widths = scores[0].meta["bound_by_k"] if scores else {}
        result["by_k"] = {
            w: _ppl(sum(sc.meta["bound_by_k"][w] for sc in scores), n_tokens, n_words) for w in widths
        }
    return result


def _ppl(total_lp: float, n_tokens: int, n_words: int) -> dict[str, float]:
    return {
        "nll_sum": -total_lp,
        "token_ppl": math.exp(-total_lp / n_tokens),
        "word_ppl": math.exp(-total_lp / n_words),
    }


def format_results(result: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    row = {
        k: result[k] for k in ("n_sentences", "n_tokens", "n_words", "token_ppl", "word_ppl", "likelihood")
    }
    return [row], list(row)

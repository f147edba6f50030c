"""SyntaxGym targeted syntactic evaluation (Hu et al., ACL 2020; docs/design.md §4).

Pipeline, as in ``syntaxgym-core`` + LM-Zoo (docs/design.md §7; the data's PROVENANCE.md):

1. a condition's sentence is its non-empty regions joined by single spaces, then (``text="raw"``,
   the default) detokenized like our training text: the suites are PTB-tokenized (``book .``);
2. token surprisal in bits, -log2 p(x_t | x_<t), from the shared scorer (BOS-conditioned for
   decoders, PLL-word-l2r for encoders); a token belongs to the region whose character span holds
   the token's start offset (the joining space before a region belongs to that region, so GPT-2's
   leading-space tokens land on the word they start); region value = sum of its tokens' surprisals.
   A tagged decoder in ``marginal`` mode uses the prefix marginal instead: region value =
   -log2 p^(text up to the region's end) + log2 p^(text before it), each bound a function of its
   own text alone (``structpe.eval.scoring.prefix_marginal.prefix_bounds``, docs/likelihoods.md);
3. each suite's prediction formulas are evaluated per item; an item is correct iff prediction 0 is
   True (the paper's protocol; ``protocol="conjunction"`` gives Brain-Score's all-predictions
   variant);
4. suite accuracy = mean item correctness; SG score = unweighted mean over the paper's 31 suites
   (``fgd-embed3/4`` and ``nn-nv-rpl`` excluded); circuit score = mean of its suites' accuracies.

The formula parser lives in ``structpe.eval.syntaxgym.formula`` and the suite loading in
``structpe.eval.syntaxgym.suites``; this module holds the scoring protocol and the report.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from structpe.eval.scoring.masked import MaskedScorer
from structpe.eval.scoring.prefix_marginal import prefix_sources
from structpe.eval.scoring.scorer import CausalScorer, ScoringSpec, describe_scoring, make_scorer, spec_with
from structpe.eval.scoring.smc_budget import Budgets, settle
from structpe.eval.scoring.smc_views import SMC_SYSTEMS, convergence, view_scores, views
from structpe.eval.scoring.types import LN2, Parser, TokenScores
from structpe.eval.syntaxgym.suites import (
    Suite,
    load_suites,
    sentence_and_spans,
    suites_dir,
)

EXCLUDE_RE = re.compile(r"^fgd-embed[34]|^gardenpath|^nn-nv")


def paper_suites(data_dir: str | Path | None) -> list[str]:
    """The paper's 31 SyntaxGym suites among the stored ones (the SG score's suites)."""
    names = (p.name.removesuffix(".json") for p in suites_dir(data_dir).glob("*.json"))
    return sorted(n for n in names if not EXCLUDE_RE.match(n))


def suite_names(suites: str | list[str], data_dir: str | Path | None) -> list[str] | None:
    """Suites named as a study spec names them: ``paper31``, ``all`` (None: every stored suite) or a
    list."""
    if suites == "paper31":
        return paper_suites(data_dir)
    return None if suites == "all" else list(suites)

CIRCUITS: dict[str, list[str]] = {
    "Agreement": ["number"],
    "Licensing": ["npi", "reflexive"],
    "Garden-Path Effects": ["npz", "mvrr"],
    "Gross Syntactic State": ["subordination"],
    "Center Embedding": ["center"],
    "Long-Distance Dependencies": ["fgd", "cleft"],
}
PROTOCOLS = ("prediction0", "conjunction")


def region_surprisals(
    scores: TokenScores, spans: Sequence[tuple[int, int] | None], include_eos: bool = True
) -> list[float]:
    """Sum of token surprisals (bits) per region; tokens go to the region holding their start."""
    out = [0.0] * len(spans)
    bounds = [(i, s) for i, s in enumerate(spans) if s is not None]
    for (start, _end), lp in zip(scores.offsets, scores.logprobs, strict=True):
        region = None
        for i, (a, b) in bounds:
            if a <= start < b:
                region = i
                break
        if region is None:
            raise ValueError(f"token at character {start} of {scores.text!r} falls in no region")
        out[region] += -lp / LN2
    if include_eos and scores.eos_logprob is not None and bounds:
        out[bounds[-1][0]] += -scores.eos_logprob / LN2  # LM-Zoo puts P(EOS) in the last region
    return out


def prefix_region_surprisals(
    scores: TokenScores,
    spans: Sequence[tuple[int, int] | None],
    bounds: Sequence[float],
    include_eos: bool = True,
) -> list[float]:
    """Region surprisals (bits) from open prefix bounds: -log p^(prefix + region) + log p^(prefix).

    ``bounds`` holds log p^(text[:end]) at the end of each non-empty region (``prefix_bounds``), so
    a region's value depends on the text up to its end only. With an appended EOS, the end of the
    sentence (the EOS and the tree's closing) goes to the last region, as LM-Zoo puts P(EOS) there.
    """
    out = [0.0] * len(spans)
    ends = iter(bounds)
    prev, last = 0.0, None
    for i, span in enumerate(spans):
        if span is not None:
            b = next(ends)
            out[i], prev, last = -(b - prev) / LN2, b, i
    if include_eos and scores.eos_logprob is not None and last is not None:
        out[last] += -(scores.total - prev) / LN2
    return out


def _prefix_marginal(scorer: CausalScorer | MaskedScorer) -> bool:
    """Whether regions are scored by the prefix marginal (a tagged decoder in ``marginal`` or ``smc``
    mode)."""
    return isinstance(scorer, CausalScorer) and scorer.tagged and scorer.likelihood in ("marginal", "smc")


def _smc(scorer: CausalScorer | MaskedScorer) -> bool:
    """Whether the scores are particle estimates whose budgets N and 4N are compared."""
    return isinstance(scorer, CausalScorer) and scorer.tagged and scorer.likelihood == "smc"


def _view_regions(
    spans: list, scores: list[TokenScores], sources: list | None, systems: list[int] | None
) -> list[list[float]]:
    """Region surprisals of every text: from prefix estimates when ``sources`` are given (pooled over
    ``systems`` for smc scores, None: the scores as they are), else summed token surprisals."""
    if sources is None:
        return [region_surprisals(sc, sp) for sc, sp in zip(scores, spans, strict=True)]
    seen: dict[int, TokenScores] = {}

    def view(ts: TokenScores) -> TokenScores:
        if systems is None:
            return ts
        if id(ts) not in seen:
            seen[id(ts)] = view_scores(ts, systems)
        return seen[id(ts)]

    out = []
    for sc, sp, row in zip(scores, spans, sources, strict=True):
        bounds = [float(sum(view(ts).logprobs[:m])) if ts is not None else 0.0 for ts, m in row]
        out.append(prefix_region_surprisals(view(sc), sp, bounds))
    return out


# ----------------------------------------------------------------------------------------------
# protocol


def circuit_of(suite: str) -> str | None:
    tag = re.split(r"[-_0-9]", suite)[0]
    for circuit, tags in CIRCUITS.items():
        if tag in tags:
            return circuit
    return None


def aggregate(suite_accuracy: Mapping[str, float]) -> dict[str, Any]:
    """SG score over the paper's suites present (unweighted), circuit means, and which were used."""
    used = {s: a for s, a in suite_accuracy.items() if not EXCLUDE_RE.match(s)}
    circuits: dict[str, list[float]] = {}
    for s, a in used.items():
        c = circuit_of(s)
        if c is not None:
            circuits.setdefault(c, []).append(a)
    return {
        "sg_score": float(np.mean(list(used.values()))) if used else math.nan,
        "n_suites": len(used),
        "circuits": {c: float(np.mean(v)) for c, v in circuits.items()},
        "excluded": sorted(s for s in suite_accuracy if EXCLUDE_RE.match(s)),
    }


def sg_score_from_reference(csv_path: str | Path) -> dict[str, Any]:
    """Recompute the SG score from a per-item reference file (``model,suite,item,correct``)."""
    csv_path = Path(csv_path)
    per_suite: dict[str, list[bool]] = {}
    with csv_path.open(newline="") as f:
        reader = csv.DictReader(f)
        for line, row in enumerate(reader, start=2):
            val = row["correct"]
            if val not in ("True", "False"):
                raise ValueError(f"{csv_path}:{line}: 'correct' is {val!r}, expected True/False")
            per_suite.setdefault(row["suite"], []).append(val == "True")
    acc = {s: float(np.mean(v)) for s, v in sorted(per_suite.items())}
    return {"suite_accuracy": acc, **aggregate(acc)}


def evaluate_item(suite: Suite, values: Mapping[tuple[str, int | None], float]) -> list[bool]:
    return [p.evaluate(values) for p in suite.predictions]


def _item_weights(per_suite: Mapping[str, Any]) -> list[float]:
    """Each item's weight in the SG score (the mean over the counted suites of their accuracy), in
    the order the items were scored; 0 for a suite the score leaves out."""
    counted = [s for s in per_suite if not EXCLUDE_RE.match(s)]
    return [
        1 / (len(counted) * d["n_items"]) if s in counted else 0.0
        for s, d in per_suite.items()
        for _ in range(d["n_items"])
    ]


def _cuts(spans: list) -> list[list[int]]:
    """Each text's region ends (characters): where its prefix estimates are read."""
    return [[b for _, b in (x for x in sp if x is not None)] for sp in spans]


def _item_values(
    conds: Sequence[str], regions: Sequence[Sequence[float]]
) -> dict[tuple[str, int | None], float]:
    """One item's surprisal per (condition, region), and per condition the sum (region None)."""
    values: dict[tuple[str, int | None], float] = {}
    for cond, regs in zip(conds, regions, strict=True):
        values.update({(cond, r): x for r, x in enumerate(regs, start=1)})
        values[(cond, None)] = float(sum(regs))
    return values


def _settled(
    scorer: CausalScorer,
    suite: Suite,
    items: Sequence[Any],
    texts: list[str],
    spans: list,
    protocol: str,
    particles_max: int,
) -> tuple[list[TokenScores], list, Budgets]:
    """A suite's texts scored to prefix estimates with per-item particle budgets (``smc_budget``): an
    item's margin is the slack of its prediction (``prediction0``) or the smallest slack of all
    (``conjunction``). Returns the texts' scores and prefix sources in ``texts``' order (item by
    item, each item's conditions in order)."""
    preds = suite.predictions[:1] if protocol == "prediction0" else suite.predictions
    decisions, k = [], 0
    for item in items:  # per item: (text, spans, condition) of each of its conditions
        decisions.append([(texts[k + j], spans[k + j], c) for j, c in enumerate(item.conditions)])
        k += len(item.conditions)

    def score(at: CausalScorer, batch: list[tuple[str, list, str]]) -> list[tuple]:
        sc, src = prefix_sources(at, [t for t, _, _ in batch], _cuts([sp for _, sp, _ in batch]))
        return [(s, r, sp, c) for s, r, (_, sp, c) in zip(sc, src, batch, strict=True)]

    def margin(scored: Sequence[tuple], systems: Sequence[int]) -> float:
        scores, sources, spans_ = ([x[k] for x in scored] for k in range(3))
        regions = _view_regions(spans_, scores, sources, list(systems))
        values = _item_values([x[3] for x in scored], regions)
        return min(p.slack(values) for p in preds)

    scored, budget = settle(scorer, decisions, margin, particles_max, score=score)
    flat = [x for item in scored for x in item]
    return [x[0] for x in flat], [x[1] for x in flat], budget


def chance_scores(
    suites: Sequence[Suite], *, draws: int = 100, seed: int = 0, protocol: str = "prediction0"
) -> dict[str, Any]:
    """Expected scores of a model whose surprisals carry no information: the chance row.

    Every (condition, region) surprisal of every item is an independent draw from Exponential(1)
    (non-negative, like a surprisal; an empty region has none, so 0), and the suite's predictions
    are evaluated on it exactly as for a model. ``draws`` Monte Carlo draws per item with a fixed
    ``seed``; returns per-suite accuracy, circuit means and the SG score like a model's result.
    Chance is not 0.5 everywhere: a prediction that compares one region with a sum of two, or
    that conjoins several comparisons, is met by chance more or less often than half the time.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}")
    rng = np.random.default_rng(seed)
    acc: dict[str, float] = {}
    for suite in suites:
        hits = 0
        for item in suite.items:
            conds = list(item.conditions.items())
            n_regions = len(conds[0][1])
            empty = np.array([[not c.strip() for c in contents] for _, contents in conds])
            for x in rng.exponential(size=(draws, len(conds), n_regions)):
                x[empty] = 0.0
                values: dict[tuple[str, int | None], float] = {}
                for (cond, _), row in zip(conds, x, strict=True):
                    values.update({(cond, r): float(v) for r, v in enumerate(row, start=1)})
                    values[(cond, None)] = float(row.sum())
                preds = evaluate_item(suite, values)
                hits += bool(preds[0] if protocol == "prediction0" else all(preds))
        acc[suite.name] = hits / (draws * len(suite.items)) if suite.items else math.nan
    return {
        "benchmark": "syntaxgym-chance",
        "distribution": "independent Exponential(1) surprisal per (condition, region)",
        "draws_per_item": draws,
        "seed": seed,
        "protocol": protocol,
        "suite_accuracy": acc,
        **aggregate(acc),
    }


def evaluate_syntaxgym(
    model: Any,
    tokenizer: Any,
    parser: Parser | None = None,
    data_dir: str | Path | None = None,
    suites: Sequence[str] | None = None,
    *,
    protocol: str = "prediction0",
    spec: ScoringSpec | None = None,
    max_items: int | None = None,
    progress: bool = True,
    scorer: CausalScorer | MaskedScorer | None = None,
    text: str = "raw",
    **scoring: Any,
) -> dict[str, Any]:
    """Run SyntaxGym suites on a model; returns per-item results, suite accuracy, SG score, circuits.

    ``text`` = ``raw`` scores the detokenized sentences (the form LMs are trained on; see
    :func:`sentence_and_spans`), ``as_written`` the suites' PTB-tokenized text.

    Decoders: BOS-conditioned surprisal (``likelihood`` as in :class:`CausalScorer`); encoders:
    PLL (``pll_metric``, word-l2r by default as docs/design.md §7 explains). How items are scored:
    ``spec`` (a ScoringSpec), or its fields as keywords, which override the spec.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}")
    spec = spec_with(spec, **scoring)
    if not spec.smc_parts:  # regions are prefix estimates; the sentence's only with an EOS to score
        spec = dataclasses.replace(spec, smc_parts="both" if spec.append_eos else "prefix")
    scorer = scorer or make_scorer(model, tokenizer, parser, spec)
    loaded = load_suites(data_dir, suites)
    it = loaded
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(loaded, desc="SyntaxGym suites")
    per_suite: dict[str, Any] = {}
    smc = _smc(scorer)
    names: dict[str, list[int] | None] = views(SMC_SYSTEMS) if smc else {"score": None}  # type: ignore[assignment]
    view_acc: dict[str, dict[str, float]] = {v: {} for v in names}  # smc: suite accuracy per view
    view_dec: dict[str, list[bool]] = {v: [] for v in names}
    budgets: list[Budgets] = []  # smc with particles_max: each suite's per-item budgets
    for suite in it:
        items = suite.items[:max_items] if max_items else suite.items
        keys, texts, spans = [], [], []
        for item in items:
            for cond, contents in item.conditions.items():
                s, sp = sentence_and_spans(contents, text)
                keys.append((item.number, cond))
                texts.append(s)
                spans.append(sp)
        budget = None
        if smc and spec.particles_max is not None:  # more particles for the items near a tie
            scores, sources, budget = _settled(
                scorer, suite, items, texts, spans, protocol, spec.particles_max
            )
            budgets.append(budget)
        elif _prefix_marginal(scorer):  # leak-free: each region from the text up to its end
            scores, sources = prefix_sources(scorer, texts, _cuts(spans))  # type: ignore[arg-type]
        else:
            scores, sources = scorer.score(texts), None
        for view, systems in names.items():
            regions = _view_regions(spans, scores, sources, systems)
            values: dict[int, dict[tuple[str, int | None], float]] = {}
            for (num, cond), regs in zip(keys, regions, strict=True):
                values.setdefault(num, {}).update(_item_values([cond], [regs]))
            item_rows = []
            for i, item in enumerate(items):
                preds = evaluate_item(suite, values[item.number])
                correct = preds[0] if protocol == "prediction0" else all(preds)
                item_rows.append({"item": item.number, "predictions": preds, "correct": bool(correct)})
                if budget is not None:
                    item_rows[-1]["particles"] = budget.final[i]
            acc = float(np.mean([r["correct"] for r in item_rows])) if item_rows else math.nan
            view_acc[view][suite.name] = acc
            view_dec[view].extend(r["correct"] for r in item_rows)
            if view != "score":
                continue
            per_suite[suite.name] = {
                "accuracy": acc,
                "n_items": len(item_rows),
                "circuit": circuit_of(suite.name),
                "in_paper_31": not bool(EXCLUDE_RE.match(suite.name)),
                "items": item_rows,
                "region_surprisal_bits": {
                    str(n): {f"{c}:{r}": x for (c, r), x in v.items() if r is not None}
                    for n, v in values.items()
                },
            }
    acc = {s: d["accuracy"] for s, d in per_suite.items()}
    agg = aggregate(acc)
    extra: dict[str, Any] = {}
    if smc:  # budgets N and 4N of the particle estimate: decisions that flip, standard error
        weights = _item_weights(per_suite) if budgets else None
        extra = convergence(
            lambda v: (aggregate(view_acc[v])["sg_score"], view_dec[v]),
            scorer.particles,
            SMC_SYSTEMS,
            weights,
        )
        extra["proposal"] = scorer.proposal
        if budgets:
            extra.update(Budgets.joined(budgets).record())
    return {
        "benchmark": "syntaxgym",
        "scoring": describe_scoring(scorer),
        "likelihood": scorer.likelihood,
        "protocol": protocol,
        "text": text,
        "suite_accuracy": acc,
        **agg,
        "complete_31": agg["n_suites"] == 31,
        **extra,
        "suites": per_suite,
    }


def format_results(result: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows for the Markdown table: one per suite, then circuits and the SG score."""
    rows = []
    chance = result.get("chance")
    for s, d in result["suites"].items() if "suites" in result else []:
        rows.append(
            {"suite": s, "circuit": d["circuit"] or "-", "items": d["n_items"], "accuracy": d["accuracy"]}
        )
        if chance:
            rows[-1]["chance"] = chance["suite_accuracy"].get(s, math.nan)
    for c, v in result["circuits"].items():
        rows.append({"suite": f"**{c}**", "circuit": "circuit mean", "items": "", "accuracy": v})
        if chance:
            rows[-1]["chance"] = chance["circuits"].get(c, math.nan)
    rows.append(
        {
            "suite": "**SG score**",
            "circuit": f"{result['n_suites']} suites",
            "items": "",
            "accuracy": result["sg_score"],
        }
    )
    if chance:
        rows[-1]["chance"] = chance["sg_score"]
    return rows, ["suite", "circuit", "items", "accuracy", *(["chance"] if chance else [])]


def chance_row(
    data_dir: str | Path | None,
    suites: Sequence[str] | None,
    protocol: str = "prediction0",
    max_items: int | None = None,
    *,
    draws: int = 100,
    seed: int = 0,
) -> dict[str, Any]:
    """The chance row of an evaluation: :func:`chance_scores` on the same suites (None: every one)
    and items; the one chance row of ``structpe eval syntaxgym``, the studies and the quickstart."""
    loaded = [
        dataclasses.replace(s, items=s.items[:max_items] if max_items else s.items)
        for s in load_suites(data_dir, suites)
    ]
    sg = chance_scores(loaded, draws=draws, seed=seed, protocol=protocol)
    return {
        "sg_score": sg["sg_score"],
        "suite_accuracy": sg["suite_accuracy"],
        "circuits": sg["circuits"],
        "method": f"{sg['distribution']}, {sg['draws_per_item']} draws per item, seed {sg['seed']}",
    }



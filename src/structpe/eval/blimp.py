"""BLiMP minimal pairs (Warstadt et al., TACL 2020; docs/design.md §4).

A pair is correct iff log P(good) > log P(bad) (strict: ties and the 7 upstream pairs whose two
sentences are identical count as wrong, as in data/blimp/PROVENANCE.md). Decoders: summed
next-token log-probs conditioned on a BOS (lm-eval-harness: each sentence scored as " " +
sentence after the BOS); encoders: pseudo-log-likelihood (``original`` or ``within_word_l2r``).
Both sentences are hexatagged with the chosen parser when the model reads tags.

Reported: accuracy per paradigm, per field (``syntax/semantics`` in ``principle_A_case_2`` folded
into ``syntax_semantics``), per phenomenon (the paper's 12: ``s-selection`` -> ``argument_structure``)
and overall (mean over pairs = mean over paradigms when all have 1,000 pairs).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from structpe.errors import StructpeError
from structpe.eval.scoring.exact import ExactScorer
from structpe.eval.scoring.masked import MaskedScorer
from structpe.eval.scoring.scorer import CausalScorer, ScoringSpec, describe_scoring, make_scorer, spec_with
from structpe.eval.scoring.smc_budget import Budgets, settle
from structpe.eval.scoring.smc_views import SMC_SYSTEMS, convergence, view_scores, views
from structpe.eval.scoring.types import Parser

FIELD_FIX = {"syntax/semantics": "syntax_semantics"}
PHENOMENON_FIX = {"s-selection": "argument_structure"}


@dataclass(frozen=True)
class BlimpPair:
    paradigm: str
    pair_id: str
    good: str
    bad: str
    field: str
    phenomenon: str


CHANCE = 0.5  # two sentences per pair, one of them preferred: every BLiMP result's chance row


def blimp_dir(data_dir: str | Path | None = None) -> Path:
    from structpe.data.paths import data_root

    if data_dir is not None and any(Path(data_dir).glob("*.jsonl.gz")):
        return Path(data_dir)
    return data_root(data_dir, sub="blimp")


def list_paradigms(data_dir: str | Path | None = None) -> list[str]:
    d = blimp_dir(data_dir)
    return sorted(p.name[: -len(".jsonl.gz")] for p in d.glob("*.jsonl.gz"))


def load_paradigm(path: str | Path, limit: int | None = None) -> list[BlimpPair]:
    """Read one ``<UID>.jsonl.gz`` (or plain ``.jsonl``) with the field/phenomenon fixes applied."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    pairs = []
    with opener(path, "rt", encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
                pairs.append(
                    BlimpPair(
                        paradigm=d["UID"],
                        pair_id=str(d["pairID"]),
                        good=d["sentence_good"],
                        bad=d["sentence_bad"],
                        field=FIELD_FIX.get(d["field"], d["field"]),
                        phenomenon=PHENOMENON_FIX.get(d["linguistics_term"], d["linguistics_term"]),
                    )
                )
            except (json.JSONDecodeError, KeyError) as err:
                raise StructpeError(f"{path}:{line_no}: bad BLiMP row ({err!r})") from err
            if limit is not None and len(pairs) >= limit:
                break
    return pairs


def load_blimp(
    data_dir: str | Path | None = None,
    paradigms: Sequence[str] | None = None,
    limit: int | None = None,
    *,
    fields: Sequence[str] | None = None,
    phenomena: Sequence[str] | None = None,
) -> list[BlimpPair]:
    """Pairs of the chosen paradigms (all 67 by default), at most ``limit`` per paradigm.

    ``fields`` / ``phenomena`` keep only paradigms of those fields (after the ``syntax/semantics``
    fix) or phenomena (the paper's 12, after the ``s-selection`` fix).
    """
    d = blimp_dir(data_dir)
    available = list_paradigms(d)
    chosen = list(paradigms) if paradigms else available
    unknown = [p for p in chosen if p not in available]
    if unknown:
        raise StructpeError(f"unknown BLiMP paradigms {unknown}; {len(available)} available in {d}")
    out: list[BlimpPair] = []
    for p in chosen:
        pairs = load_paradigm(d / f"{p}.jsonl.gz", limit)
        if fields and pairs[0].field not in fields:
            continue
        if phenomena and pairs[0].phenomenon not in phenomena:
            continue
        out.extend(pairs)
    if not out:
        raise StructpeError(
            f"no BLiMP paradigm matches paradigms={paradigms} fields={fields} phenomena={phenomena}"
        )
    return out


def blimp_dataset(paradigm: str, **_: Any) -> Any:
    """The ``test`` split of one BLiMP paradigm from structpe's data folder (``STRUCTPE_DATA``):
    the ``custom_dataset`` of the offline lm-eval tasks ``structpe.lm_eval`` ships
    (resources/lm_eval_tasks); lm-eval also passes the model_args and the task's metadata."""
    from datasets import Dataset, DatasetDict

    rows = [{"sentence_good": p.good, "sentence_bad": p.bad} for p in load_blimp(paradigms=[paradigm])]
    return DatasetDict({"test": Dataset.from_list(rows)})


def _mean(xs: Sequence[float]) -> float:
    return float(np.mean(xs)) if len(xs) else math.nan


def evaluate_blimp(
    model: Any,
    tokenizer: Any,
    parser: Parser | None = None,
    data_dir: str | Path | None = None,
    paradigms: Sequence[str] | None = None,
    *,
    limit: int | None = None,
    fields: Sequence[str] | None = None,
    phenomena: Sequence[str] | None = None,
    leading_space: bool | None = None,
    spec: ScoringSpec | None = None,
    progress: bool = True,
    keep_pairs: bool = False,
    scorer: CausalScorer | MaskedScorer | None = None,
    pairs: Sequence[BlimpPair] | None = None,
    exact_max_words: int | None = None,
    **scoring: Any,
) -> dict[str, Any]:
    """BLiMP accuracy per paradigm, field, phenomenon and overall.

    Subset selection: ``paradigms``, ``fields``, ``phenomena``; ``limit`` takes the first pairs of
    each paradigm.
    ``leading_space`` (default: True for decoders, False for encoders) prefixes each sentence with
    a space as lm-eval-harness does. ``pairs`` overrides loading (tests, custom sets).
    How sentences are scored: ``spec`` (a ScoringSpec), or its fields as keywords (``likelihood=``,
    ``k=`` ...), which override the spec.
    ``exact_max_words`` (causal models, in place of a likelihood mode): only the pairs whose two
    sentences have at most that many words (the parser's; a parser is needed for any model, so a
    tag-reading model and its baseline keep the same pairs), scored by the exact p(x), every tree of
    a sentence summed (``structpe.eval.scoring.exact``).
    """
    spec = spec_with(spec, **scoring)
    # pairs compare whole sentences: the smc mode needs only its sentence systems
    spec = spec if spec.smc_parts else dataclasses.replace(spec, smc_parts="sentence")
    scorer = scorer or make_scorer(model, tokenizer, parser, spec)
    if leading_space is None:
        leading_space = isinstance(scorer, CausalScorer)
    if pairs is None:
        pairs = load_blimp(data_dir, paradigms, limit, fields=fields, phenomena=phenomena)
    pairs = list(pairs)
    if not pairs:
        raise ValueError("no BLiMP pairs selected")
    prefix = " " if leading_space else ""
    exact, considered, parse_of = None, len(pairs), {}
    if exact_max_words is not None:
        if not isinstance(scorer, CausalScorer) or spec.likelihood != "conditional":
            raise ValueError(
                "exact_max_words: the exact p(x) of a causal model, in place of a likelihood mode"
            )
        exact = ExactScorer(
            model, tokenizer, parser, exact_max_words, batch_size=spec.batch_size, append_eos=spec.append_eos
        )
        pairs, parse_of = _short_pairs(exact, pairs, prefix)
    # score paradigm by paradigm so the progress bar moves and memory stays flat
    by_paradigm: dict[str, list[BlimpPair]] = {}
    for p in pairs:
        by_paradigm.setdefault(p.paradigm, []).append(p)
    it: Any = by_paradigm.items()
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(list(it), desc="BLiMP paradigms")
    rows: list[dict[str, Any]] = []
    unaligned = 0
    smc = isinstance(scorer, CausalScorer) and scorer.tagged and scorer.likelihood == "smc"
    names = views(SMC_SYSTEMS) if smc else {}
    view_dec: dict[str, list[bool]] = {v: [] for v in names}  # smc: every pair's decision per view
    budgets: list[Budgets] = []  # smc with particles_max: each paradigm's per-pair budgets
    for _paradigm, group in it:
        budget = None
        if exact is not None:
            totals = exact.totals(
                [prefix + p.good for p in group] + [prefix + p.bad for p in group],
                [parse_of[p.paradigm, p.pair_id][0] for p in group]
                + [parse_of[p.paradigm, p.pair_id][1] for p in group],
            )
        elif smc and spec.particles_max is not None:
            per_pair, budget = settle(
                scorer, [(prefix + p.good, prefix + p.bad) for p in group], pair_margin, spec.particles_max
            )
            budgets.append(budget)
            scores = [s[0] for s in per_pair] + [s[1] for s in per_pair]
        else:
            scores = scorer.score([prefix + p.good for p in group] + [prefix + p.bad for p in group])
        if exact is None:
            unaligned += sum(s.unaligned_words for s in scores)
            totals = [s.total for s in scores]
        n = len(group)
        for v, systems in names.items():
            view_totals = [view_scores(sc, systems).total for sc in scores]
            view_dec[v].extend(view_totals[i] > view_totals[n + i] for i in range(n))
        for i, p in enumerate(group):
            rows.append(_row(p, totals[i], totals[n + i], budget.final[i] if budget is not None else None))
    result: dict[str, Any] = {
        "benchmark": "blimp",
        "scoring": describe_scoring(scorer),
        "likelihood": scorer.likelihood,
        "leading_space": leading_space,
        **_accuracies(rows),
        "unaligned_words": unaligned,
    }
    if exact is not None:
        result.update(_exact_record(len(rows), considered, exact.max_words))
    if smc:  # budgets N and 4N of the particle estimate: pair decisions that flip, standard error
        weights = [1 / len(rows)] * len(rows) if budgets else None  # overall: the mean over pairs
        result.update(
            convergence(lambda v: (_mean(view_dec[v]), view_dec[v]), scorer.particles, SMC_SYSTEMS, weights)
        )
        result["proposal"] = scorer.proposal
        if budgets:
            result.update(Budgets.joined(budgets).record())
    if keep_pairs:
        result["pairs"] = rows
    return result


def _short_pairs(
    exact: ExactScorer, pairs: Sequence[BlimpPair], prefix: str
) -> tuple[list[BlimpPair], dict[tuple[str, str], tuple[Any, Any]]]:
    """The pairs whose two sentences the exact scorer can enumerate, and their parses."""
    parses = exact.parse([prefix + s for p in pairs for s in (p.good, p.bad)])
    parse_of = {}
    for p, good, bad in zip(pairs, parses[::2], parses[1::2], strict=True):
        if exact.fits(prefix + p.good, good) and exact.fits(prefix + p.bad, bad):
            parse_of[p.paradigm, p.pair_id] = (good, bad)
    if not parse_of:
        raise ValueError(f"no BLiMP pair has both sentences within {exact.max_words} words")
    return [p for p in pairs if (p.paradigm, p.pair_id) in parse_of], parse_of


def _row(p: BlimpPair, logp_good: float, logp_bad: float, particles: Any = None) -> dict[str, Any]:
    """One pair's record (``particles``: the budget it ended at, under per-pair budgets)."""
    return {
        "paradigm": p.paradigm,
        "pair_id": p.pair_id,
        "field": p.field,
        "phenomenon": p.phenomenon,
        "logp_good": logp_good,
        "logp_bad": logp_bad,
        "correct": logp_good > logp_bad,
        **({"particles": particles} if particles is not None else {}),
    }


def _exact_record(scored: int, considered: int, max_words: int) -> dict[str, Any]:
    """What a result scored by the exact p(x) says of itself (in place of the likelihood mode's)."""
    return {
        "likelihood": "exact",
        "scoring": (
            "exact p(x): the joint p(x, T) summed over every well-formed tag sequence of each sentence, "
            f"BOS-conditioned; only the {scored} of {considered} pairs whose two sentences have at "
            f"most {max_words} words, each on a token of its own"
        ),
        "max_words": max_words,
        "n_pairs_considered": considered,
    }


def _accuracies(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Accuracy overall (mean over pairs), per paradigm, and per field and phenomenon (means over
    their paradigms)."""
    per_paradigm: dict[str, list[bool]] = {}
    meta: dict[str, tuple[str, str]] = {}
    for r in rows:
        per_paradigm.setdefault(r["paradigm"], []).append(r["correct"])
        meta[r["paradigm"]] = (r["field"], r["phenomenon"])
    para_acc = {k: _mean(v) for k, v in per_paradigm.items()}
    fields: dict[str, list[float]] = {}
    phen: dict[str, list[float]] = {}
    for k, a in para_acc.items():
        fields.setdefault(meta[k][0], []).append(a)
        phen.setdefault(meta[k][1], []).append(a)
    return {
        "n_pairs": len(rows),
        "n_paradigms": len(para_acc),
        "overall": _mean([r["correct"] for r in rows]),
        "paradigm_mean": _mean(list(para_acc.values())),
        "per_paradigm": para_acc,
        "per_field": {k: _mean(v) for k, v in sorted(fields.items())},
        "per_phenomenon": {k: _mean(v) for k, v in sorted(phen.items())},
    }


def pair_margin(scores: Sequence[Any], systems: Sequence[int]) -> float:
    """A pair's margin log p^(good) - log p^(bad) from its (good, bad) smc scores pooled over
    ``systems``: positive = correct."""
    return view_scores(scores[0], systems).total - view_scores(scores[1], systems).total


def format_results(result: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    rows: list[dict[str, Any]] = [
        {"group": "paradigm", "name": k, "accuracy": v} for k, v in sorted(result["per_paradigm"].items())
    ]
    rows += [{"group": "field", "name": k, "accuracy": v} for k, v in result["per_field"].items()]
    rows += [{"group": "phenomenon", "name": k, "accuracy": v} for k, v in result["per_phenomenon"].items()]
    rows.append({"group": "overall", "name": f"{result['n_pairs']} pairs", "accuracy": result["overall"]})
    rows.append({"group": "chance", "name": "one of two sentences", "accuracy": CHANCE})
    return rows, ["group", "name", "accuracy"]

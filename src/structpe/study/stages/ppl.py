"""The ``ppl`` stage: perplexity of each cell on the study's test sentences, every likelihood mode on
the same ones (``structpe eval ppl``); metrics ``ppl.<mode>.<score>`` and, for the marginal, its
bound at each width of the ladder as ``ppl.marginal_k<w>.<score>``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from structpe.choices import DEFAULT_PARTICLES, DEFAULT_PROPOSAL

from . import likelihood
from .cell import Cell

KEY = "ppl"
COUNT = ("n_sentences", "sentences")  # what its n_* score counts (the report's column headers)
COLUMNS = (  # its columns of the report's recipes table
    ("word PPL", "ppl.conditional.word_ppl"),
    ("word PPL", "ppl.joint.word_ppl"),
    ("word PPL", "ppl.marginal_k1.word_ppl"),
    ("word PPL", "ppl.marginal_k10.word_ppl"),
    ("word PPL", "ppl.marginal_k100.word_ppl"),
    ("word PPL", "ppl.marginal.word_ppl"),
)


@dataclass
class PplSpec:
    """Perplexity on the corpus's test sentences, every mode on the same ones; ``k``: the marginal
    bound's beam width (its bounds at k = 1, 10, 100 up to k are reported too); ``particles``: the
    smc estimate's N (scored at N and 4N, docs/likelihoods.md)."""

    likelihoods: list[str] = field(default_factory=lambda: ["conditional", "joint", "marginal"])
    k: int = 10
    particles: int = DEFAULT_PARTICLES
    proposal: str = DEFAULT_PROPOSAL  # the smc estimate's proposal (prior | adapted)
    sentences: int | None = None  # None = dataset.test_sentences


SPEC = PplSpec  # the class of its section in a study spec's ``evaluations``


check = likelihood.check  # its checks are the likelihood settings


def cache_keys(sub: PplSpec, own: str, baseline: str, trained: str) -> dict[str, str]:
    """``ppl-<mode>``: the model and test sentences (``own``) and the settings of that mode."""
    return likelihood.cache_keys(KEY, sub, own)


def ppl_scores(r: dict[str, Any]) -> dict[str, float]:
    """Perplexities and counts; a marginal's bound at each width w of its ladder as ``k<w>.*``; an
    smc estimate's ``particles``, ``stderr`` and ``word_ppl_at_n``."""
    out = {k: float(r[k]) for k in ("token_ppl", "word_ppl", "n_sentences", "n_tokens")}
    out.update(likelihood.smc_scores(r))
    for w, b in (r.get("by_k") or {}).items():
        out.update({f"k{w}.{k}": float(b[k]) for k in ("token_ppl", "word_ppl")})
        out.update({f"k{w}.{k}": float(r[k]) for k in ("n_sentences", "n_tokens")})
    return out


def run(sub: PplSpec, cell: Cell) -> None:
    """Every mode on the same test sentences (the data stage's stratified sample)."""
    from structpe.eval.ppl import evaluate_ppl

    sents = cell.test_sentences[: sub.sentences or cell.spec.dataset.test_sentences]

    def score(mode: str) -> dict[str, float]:
        r = evaluate_ppl(
            cell.model,
            cell.tokenizer,
            sents,
            likelihood=mode,
            **likelihood.options(sub, cell),
        )
        return ppl_scores(r)

    likelihood.run_modes(cell, KEY, sub, score)
    if "marginal" in sub.likelihoods and cell.causal:
        file_ladder(cell, sub.k)


def file_ladder(cell: Cell, k: int) -> None:
    """The marginal's bound at each width of the ladder as ``ppl.marginal_k<w>.*``; a model that
    reads no tags has its plain p(x) there too."""
    from structpe.eval.scoring.likelihood import MARGINAL_LADDER

    scores = cell.scores
    for w in (x for x in MARGINAL_LADDER if x <= k):
        for key, v in list(scores.items()):
            if cell.tagged and key.startswith(f"ppl.marginal.k{w}."):
                scores[key.replace(f".marginal.k{w}.", f".marginal_k{w}.", 1)] = scores.pop(key)
            elif not cell.tagged and key.startswith("ppl.marginal.") and not key.startswith("ppl.marginal.k"):
                scores[key.replace(".marginal.", f".marginal_k{w}.", 1)] = v


def planned(sub: PplSpec, parts: list[str]) -> bool:
    """``ppl.<mode>.<score>``, and ``ppl.marginal_k<w>.<score>`` at a width of the ladder up to k."""
    if len(parts) >= 3 and parts[1].startswith("marginal_k"):
        from structpe.eval.scoring.likelihood import MARGINAL_LADDER

        w = parts[1].removeprefix("marginal_k")
        return "marginal" in sub.likelihoods and w in {str(x) for x in MARGINAL_LADDER if x <= sub.k}
    return likelihood.planned(sub, parts)

"""The ``syntaxgym`` stage: SyntaxGym suites per likelihood mode (``structpe eval syntaxgym``);
metrics ``syntaxgym.<mode>.sg_score``, ``.n_suites``, ``.circuit.<name>``, ``.suite.<name>``. Its
chance row (with BLiMP's) is the study report's *chance* line."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from structpe.choices import DEFAULT_PARTICLES, DEFAULT_PROPOSAL

from . import likelihood
from .cell import Cell

KEY = "syntaxgym"
READS_DATA = True  # it reads the study's data root (Cell.data_root)
COUNT = ("n_suites", "suites")  # what its n_* score counts (the report's column headers)
COLUMNS = tuple(("SG", f"syntaxgym.{m}.sg_score") for m in ("conditional", "joint", "marginal"))
# the report's plot of it per mode: (group, title, total score)
GROUP_PLOT = ("circuit", "SyntaxGym per circuit", "sg_score")
# its own words for two modes (docs/likelihoods.md): the joint's region surprisals leak (earlier
# words' tags come from the whole-sentence parse); the prefix marginal does not
MODE_NOTES = {"joint": "joint*: region surprisals leak", "marginal": "prefix marginal: leak-free"}


@dataclass
class SyntaxGymSpec:
    """SyntaxGym: ``suites: paper31`` is the paper's 31 suites (with circuits), ``all`` every stored one."""

    suites: str | list[str] = "paper31"
    likelihoods: list[str] = field(default_factory=lambda: ["conditional", "joint"])
    k: int = 10  # beam width of the marginal (prefix marginal, docs/likelihoods.md)
    particles: int = DEFAULT_PARTICLES  # the smc estimate's N (scored at N and 4N)
    proposal: str = DEFAULT_PROPOSAL  # the smc estimate's proposal (prior | adapted)
    # smc: an item within a few standard errors of a tie is scored again at 4N, up to this N
    # (structpe.eval.scoring.smc_budget); None: every item at ``particles``
    particles_max: int | None = None


SPEC = SyntaxGymSpec  # the class of its section in a study spec's ``evaluations``


check = likelihood.check  # its checks are the likelihood settings


def cache_keys(sub: SyntaxGymSpec, own: str, baseline: str, trained: str) -> dict[str, str]:
    """``syntaxgym-<mode>``: the model (``own``) and the settings of that mode."""
    return likelihood.cache_keys(KEY, sub, own)


def sg_scores(r: dict[str, Any]) -> dict[str, float]:
    """The SG score, the suite count, per circuit and per suite, smc's convergence."""
    return likelihood.result_scores(
        r, ("sg_score", "n_suites"), {"circuit": "circuits", "suite": "suite_accuracy"}
    )


def run(sub: SyntaxGymSpec, cell: Cell) -> None:
    """Every mode on the spec's suites."""
    from structpe.eval.syntaxgym.evaluate import evaluate_syntaxgym, suite_names

    root = cell.shared_data("syntaxgym")
    suites = suite_names(sub.suites, root)

    def score(mode: str) -> dict[str, float]:
        r = evaluate_syntaxgym(
            cell.model,
            cell.tokenizer,
            cell.cell_parser,
            root,
            suites,
            likelihood=mode,
            **likelihood.options(sub, cell),
        )
        return sg_scores(r)

    likelihood.run_modes(cell, KEY, sub, score)


def planned(sub: SyntaxGymSpec, parts: list[str]) -> bool:
    """``syntaxgym.<mode>.<score>`` for a mode it runs."""
    return likelihood.planned(sub, parts)


def chance(sub: SyntaxGymSpec, row: dict[str, Any], data_root: Path | None) -> dict[str, Any] | None:
    """Its part of the study's chance row, once per study folder (``row``: the folder's
    ``chance.json``); None without the suites' data."""
    if "syntaxgym" in row or data_root is None:
        return None
    from structpe.eval.syntaxgym.evaluate import suite_names

    root = data_root / "syntaxgym"
    try:
        return benchmark_chance(root, suite_names(sub.suites, root))
    except FileNotFoundError:
        return None


def chance_bars(chance: dict[str, Any] | None, circuits: list[str]) -> list[float] | None:
    """The chance of each circuit, as bars beside the recipes' in the per-circuit plots (SyntaxGym's
    chance is not 0.5 everywhere); None without a chance row."""
    if not chance or "syntaxgym" not in chance:
        return None
    return [chance["syntaxgym_circuits"].get(c, math.nan) for c in circuits]


def benchmark_chance(
    root: Path, suites: list[str] | None, *, draws: int = 100, seed: int = 0, per_suite: bool = False
) -> dict[str, Any]:
    """What a model without information scores, as a study's ``chance.json`` (and the quickstart's
    results) hold it: BLiMP's 0.5 (``structpe.eval.blimp.CHANCE``) and SyntaxGym by Monte Carlo
    per circuit (``per_suite``: per suite too) from ``structpe.eval.syntaxgym.evaluate.chance_row``."""
    from structpe.eval.blimp import CHANCE as BLIMP_CHANCE
    from structpe.eval.syntaxgym.evaluate import chance_row

    sg = chance_row(root, suites, draws=draws, seed=seed)
    row = {"blimp": BLIMP_CHANCE, "syntaxgym": sg["sg_score"], "syntaxgym_circuits": sg["circuits"]}
    if per_suite:
        row["syntaxgym_suites"] = sg["suite_accuracy"]
    row["syntaxgym_method"] = sg["method"]
    return row

"""The ``blimp`` stage: BLiMP minimal pairs per likelihood mode (``structpe eval blimp``); metrics
``blimp.<mode>.overall``, ``.n_pairs``, ``.phenomenon.<name>``, ``.paradigm.<name>``; with
``exact_max_words``, ``blimp.exact.*`` too: the pairs short enough for the exact p(x)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from structpe.choices import DEFAULT_PARTICLES, DEFAULT_PROPOSAL, EXACT_MAX_WORDS
from structpe.io import stable_hash
from structpe.study.spec_checks import StudySpecError

from . import likelihood
from .cell import Cell

KEY = "blimp"
READS_DATA = True  # it reads the study's data root (Cell.data_root)
COUNT = ("n_pairs", "pairs")  # what its n_* score counts (the report's column headers)
COLUMNS = tuple(("BLiMP", f"blimp.{m}.overall") for m in ("conditional", "joint", "marginal"))
# the report's plot of it per mode: (group, title, total score)
GROUP_PLOT = ("phenomenon", "BLiMP per phenomenon", "overall")


@dataclass
class BlimpSpec:
    """BLiMP: ``paradigms: all`` is the 67; ``limit`` pairs per paradigm (None = all 1,000).

    ``marginal_limit`` caps the leak-free modes alone (``marginal`` and ``smc``; None = ``limit``):
    they cost a multiple of a plain pass, so a profile can score every pair in the cheap modes and
    the first N of each paradigm in the leak-free ones (the baseline is scored on the same pairs)."""

    paradigms: str | list[str] = "all"
    limit: int | None = None
    likelihoods: list[str] = field(default_factory=lambda: ["conditional", "joint"])
    k: int = 10  # beam width of the marginal (prefix marginal, docs/likelihoods.md)
    marginal_limit: int | None = None
    particles: int = DEFAULT_PARTICLES  # the smc estimate's N (scored at N and 4N)
    proposal: str = DEFAULT_PROPOSAL  # the smc estimate's proposal (prior | adapted)
    # smc: a pair within a few standard errors of a tie is scored again at 4N, up to this N
    # (structpe.eval.scoring.smc_budget); None: every pair at ``particles``
    particles_max: int | None = None
    # causal models: the pairs (of the first ``limit``) whose sentences have at most this many
    # words, scored by the exact p(x), every tree summed (``blimp.exact.*``; structpe.eval.scoring.exact);
    # None: not run
    exact_max_words: int | None = None

    def limit_for(self, mode: str) -> int | None:
        """Pairs per paradigm that ``mode`` scores."""
        leak_free = mode in ("marginal", "smc")
        return self.marginal_limit if leak_free and self.marginal_limit is not None else self.limit


SPEC = BlimpSpec  # the class of its section in a study spec's ``evaluations``


def check(sub: BlimpSpec, where: str) -> None:
    """The likelihood settings, and a ``marginal_limit`` only with a leak-free mode, within ``limit``."""
    likelihood.check(sub, where)
    n = sub.exact_max_words
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= EXACT_MAX_WORDS):
        raise StudySpecError(f"{where}.exact_max_words must be an integer 1..{EXACT_MAX_WORDS}, got {n!r}")
    if sub.marginal_limit is not None:
        at = f"{where}.marginal_limit"
        if "marginal" not in sub.likelihoods and "smc" not in sub.likelihoods:
            raise StudySpecError(f"{at} is set but neither 'marginal' nor 'smc' is a likelihood")
        if sub.limit is not None and sub.marginal_limit > sub.limit:
            raise StudySpecError(f"{at} {sub.marginal_limit} exceeds limit {sub.limit}")


def cache_keys(sub: BlimpSpec, own: str, baseline: str, trained: str) -> dict[str, str]:
    """``blimp-<mode>``: the model (``own``) and the settings of that mode; ``blimp-exact`` the
    pairs it may choose from and its word limit."""
    keys = likelihood.cache_keys(KEY, sub, own)
    if sub.exact_max_words is not None:
        keys["blimp-exact"] = stable_hash([own, KEY, "exact", sub.paradigms, sub.limit, sub.exact_max_words])
    return keys


def blimp_scores(r: dict[str, Any]) -> dict[str, float]:
    """Accuracy overall, per phenomenon and per paradigm, the pair count, smc's convergence."""
    return likelihood.result_scores(
        r, ("overall", "n_pairs"), {"phenomenon": "per_phenomenon", "paradigm": "per_paradigm"}
    )


def run(sub: BlimpSpec, cell: Cell) -> None:
    """Every mode; a mode whose own pair limit differs (``marginal_limit``) runs even for a model
    that reads no tags, so that the baseline is scored on the same pairs."""
    from structpe.eval.blimp import evaluate_blimp

    paradigms = None if sub.paradigms == "all" else list(sub.paradigms)
    own = tuple(m for m in sub.likelihoods if sub.limit_for(m) != sub.limit)

    def score(mode: str) -> dict[str, float]:
        r = evaluate_blimp(
            cell.model,
            cell.tokenizer,
            cell.cell_parser,
            cell.shared_data("blimp"),
            paradigms,
            limit=sub.limit_for(mode),
            likelihood=mode,
            **likelihood.options(sub, cell),
        )
        return blimp_scores(r)

    likelihood.run_modes(cell, KEY, sub, score, own)
    if sub.exact_max_words is not None and cell.causal:
        # every causal model, tags or none: the study's parser counts the words, so that a recipe and
        # its baseline keep the same pairs
        def exact() -> dict[str, float]:
            return blimp_scores(
                evaluate_blimp(
                    cell.model,
                    cell.tokenizer,
                    cell.parser,
                    cell.shared_data("blimp"),
                    paradigms,
                    limit=sub.limit,
                    exact_max_words=sub.exact_max_words,
                    progress=cell.progress,
                )
            )

        cell.record("blimp-exact", exact, "blimp.exact")


def planned(sub: BlimpSpec, parts: list[str]) -> bool:
    """``blimp.<mode>.<score>`` for a mode it runs (``exact`` where a word limit is set)."""
    if len(parts) >= 3 and parts[1] == "exact":
        return sub.exact_max_words is not None
    return likelihood.planned(sub, parts)

"""A study spec's claims: what each claim compares (``recipe`` vs ``against``), on which metrics and
in which role, and the checks that every metric is one the spec's evaluations produce."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from structpe.study.spec_checks import StudySpecError, check_keys
from structpe.study.stages import STAGES, metric_planned

CLAIM_KEYS = ("id", "claim", "recipe", "against", "metrics", "honest", "show", "better", "paper", "cost")
BETTER = ("higher", "lower")
STAGE_KEYS = tuple(s.KEY for s in STAGES)


@dataclass
class Claim:
    """One claim: ``recipe`` vs ``against`` on ``metrics`` (the replication verdict), ``honest``
    (a second verdict on leak-free likelihoods) and ``show`` (reported, not tested)."""

    id: str
    claim: str
    recipe: str
    against: str
    metrics: list[str]
    better: str
    show: list[str] = field(default_factory=list)
    paper: dict[str, Any] = field(default_factory=dict)
    honest: list[str] = field(default_factory=list)
    # a cost check (the paper's small BLiMP drop): reported with the largest cost its interval
    # allows, never a verdict, never in the Holm family (structpe.study.aggregate)
    cost: bool = False


def parse_claim(
    c: Any, cw: str, prof: dict[str, Any], baseline: str, labels: list[str], evals: Any
) -> Claim | None:
    """One claim of a spec (``cw``: where it is, for the error), checked; None for a claim this
    profile does not make (a recipe it does not run,
    or metrics only from evaluations it switches off, e.g. GLUE)."""
    c = check_keys(c, CLAIM_KEYS, cw)
    if "recipes" in prof and not {c.get("recipe"), c.get("against", baseline)} <= set(labels):
        return None
    for key in ("id", "claim", "recipe", "metrics", "better"):
        if key not in c:
            raise StudySpecError(f"{cw}: '{key}' is required")
    claim = Claim(
        id=str(c["id"]),
        claim=str(c["claim"]),
        recipe=str(c["recipe"]),
        against=str(c.get("against", baseline)),
        metrics=list(c["metrics"]),
        better=str(c["better"]),
        show=list(c.get("show") or []),
        paper=dict(c.get("paper") or {}),
        honest=list(c.get("honest") or []),
        cost=c.get("cost", False),
    )
    if not isinstance(claim.cost, bool):
        raise StudySpecError(f"{cw} ({claim.id}): cost must be true or false, got {claim.cost!r}")
    _check_paper_tasks(claim.paper.get("tasks"), f"{cw} ({claim.id}): paper.tasks")
    if _all_switched_off([*claim.metrics, *claim.honest, *claim.show], evals):
        return None
    for lab in (claim.recipe, claim.against):
        if lab not in labels:
            raise StudySpecError(f"{cw} ({claim.id}): unknown recipe {lab!r}; recipes: {', '.join(labels)}")
    if claim.better not in BETTER:
        raise StudySpecError(f"{cw} ({claim.id}): better must be one of {BETTER}, got {claim.better!r}")
    for m in [*claim.metrics, *claim.honest, *claim.show]:
        if not metric_planned(m, evals):
            raise StudySpecError(
                f"{cw} ({claim.id}): metric {m!r} is not produced by this spec's evaluations"
            )
    return claim


def _all_switched_off(metrics: list[str], evals: Any) -> bool:
    """Whether every metric comes from an evaluation this profile does not run (absent or null)."""
    benches = {str(m).split(".")[0] for m in metrics}
    return bool(benches) and all(b in STAGE_KEYS and getattr(evals, b) is None for b in benches)


def _check_paper_tasks(tasks: Any, where: str) -> None:
    """The paper's per-task GLUE scores: ``{task: [comparison, recipe]}``, two numbers each."""
    if tasks is None:
        return

    def pair(v: Any) -> bool:
        return (
            isinstance(v, list)
            and len(v) == 2
            and all(isinstance(x, int | float) and not isinstance(x, bool) for x in v)
        )

    if not isinstance(tasks, dict) or not all(pair(v) for v in tasks.values()):
        raise StudySpecError(f"{where}: expected {{task: [comparison, recipe]}} with two numbers each")

"""What the likelihood stages (``ppl``, ``blimp``, ``syntaxgym``) share: their spec checks, their
cache keys per likelihood mode, which modes a model runs, and how one p(x) run is filed under
every mode for a decoder that reads no tags (docs/likelihoods.md)."""

from __future__ import annotations

import dataclasses
from typing import Any

from structpe.choices import DEFAULT_PROPOSAL, LIKELIHOODS, PROPOSALS
from structpe.eval.scoring.smc import SMC_SYSTEMS
from structpe.io import stable_hash
from structpe.study.spec_checks import StudySpecError, check_choices

from .cell import Cell, flat

# what an smc result records about its budgets N and 4N (structpe.eval.scoring.smc_views.convergence):
# the share of decisions that flip between them, N, the 4N score's standard error, the score at N
SMC_FIELDS = ("flip_share", "particles", "stderr", "score_at_n", "word_ppl_at_n", "decisions")
# and with per-decision budgets (structpe.eval.scoring.smc_budget): the largest N, the mean N a
# decision ended at, the decisions still within z standard errors of a tie at the largest N
SMC_BUDGET_FIELDS = ("particles_max", "particles_mean", "unsettled")

# the settings that shape one mode's scores alone: the beam width k (and BLiMP's marginal_limit)
# marginal scores only, the particles (and the proposal) smc scores only, BLiMP's exact word limit
# its exact scores only
MODE_SETTINGS = ("k", "marginal_limit", "particles", "proposal", "particles_max", "exact_max_words")


def smc_scores(r: dict[str, Any]) -> dict[str, float]:
    """The smc convergence fields of a result (none for the other modes)."""
    return {k: float(r[k]) for k in (*SMC_FIELDS, *SMC_BUDGET_FIELDS) if r.get(k) is not None}


def result_scores(r: dict[str, Any], head: tuple[str, ...], groups: dict[str, str]) -> dict[str, float]:
    """A benchmark result as a stage caches it: its ``head`` numbers as they are, smc's convergence
    fields, and each per-group mapping ``groups[name]`` of the result flat under ``name``."""
    out = {k: r[k] for k in head}
    out.update(smc_scores(r))
    for name, key in groups.items():
        out.update(flat(name, r[key]))
    return out


def options(sub: Any, cell: Cell) -> dict[str, Any]:
    """The keyword options every likelihood evaluation takes from its section and the cell."""
    return {
        "k": sub.k,
        "particles": sub.particles,
        "proposal": sub.proposal,
        "particles_max": getattr(sub, "particles_max", None),  # per-decision budgets (no ppl)
        "progress": cell.progress,
    }


def check(sub: Any, where: str) -> None:
    """Known likelihood modes and proposal, positive beam width and particles, and a largest budget
    (``particles_max``, the benches with decisions) only with smc and not below the particles."""
    check_choices(sub.likelihoods, LIKELIHOODS, f"{where}.likelihoods")
    for key in ("k", "particles"):
        v = getattr(sub, key)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise StudySpecError(f"{where}.{key} must be an integer >= 1, got {v!r}")
    check_choices([sub.proposal], PROPOSALS, f"{where}.proposal")
    largest = getattr(sub, "particles_max", None)
    if largest is not None:
        if "smc" not in sub.likelihoods:
            raise StudySpecError(f"{where}.particles_max is set but 'smc' is not a likelihood")
        if not isinstance(largest, int) or isinstance(largest, bool) or largest < sub.particles:
            raise StudySpecError(
                f"{where}.particles_max must be an integer >= particles ({sub.particles}), got {largest!r}"
            )


def cache_keys(bench: str, sub: Any, own: str) -> dict[str, str]:
    """One key per mode (``<bench>-<mode>``) from the model's key ``own`` and the bench's settings.

    Changing a mode's own setting (:data:`MODE_SETTINGS`) re-runs that mode alone; an unset
    ``marginal_limit``, adding smc, the default proposal or no ``particles_max`` keeps the keys from
    before they existed."""
    settings = {f: v for f, v in dataclasses.asdict(sub).items() if f not in MODE_SETTINGS}
    settings["likelihoods"] = [m for m in sub.likelihoods if m != "smc"]
    keys = {}
    for mode in sub.likelihoods:
        beam: list[Any] = [sub.k] if mode == "marginal" else []
        if mode == "smc":
            beam.append({"particles": sub.particles, "systems": SMC_SYSTEMS})
            if sub.proposal != DEFAULT_PROPOSAL:
                beam.append({"proposal": sub.proposal})
            if getattr(sub, "particles_max", None) is not None:
                beam.append({"particles_max": sub.particles_max})
        if mode in ("marginal", "smc") and getattr(sub, "marginal_limit", None) is not None:
            beam.append({"marginal_limit": sub.marginal_limit})
        keys[f"{bench}-{mode}"] = stable_hash([own, bench, mode, settings, *beam])
    return keys


def modes(cell: Cell, likelihoods: list[str], own: tuple[str, ...] = ()) -> list[str]:
    """The modes ``cell``'s model runs: every one for a decoder that reads tags; a decoder that
    reads no tags scores p(x) in every mode, so it runs once (filed as ``conditional``, see
    :func:`file_under_all`) plus the modes in ``own`` that score other items (BLiMP's
    ``marginal_limit``); a masked LM has only its PLL (filed as conditional, no joint / marginal)."""
    if cell.tagged and cell.causal:
        return list(likelihoods)
    return ["conditional", *(m for m in own if m in likelihoods)] if cell.causal else ["conditional"]


def file_under_all(cell: Cell, bench: str, sub: Any, likelihoods: list[str]) -> None:
    """A decoder that reads no tags: its one p(x) run under each mode's name (its smc is exact:
    nothing flips between N and 4N, no Monte Carlo error)."""
    if not cell.causal or cell.tagged:
        return
    scores = cell.scores
    for m in likelihoods:
        for k, v in list(scores.items()):
            if k.startswith(f"{bench}.conditional."):
                scores[k.replace(".conditional.", f".{m}.", 1)] = v
    if "smc" in likelihoods:
        scores[f"{bench}.smc.particles"] = float(sub.particles)
        scores[f"{bench}.smc.stderr"] = 0.0
        if bench != "ppl":
            scores[f"{bench}.smc.flip_share"] = 0.0


def run_modes(cell: Cell, bench: str, sub: Any, score: Any, own: tuple[str, ...] = ()) -> None:
    """Each mode of :func:`modes` through ``score(mode) -> flat scores``, cached, filed as
    ``<bench>.<mode>.*``; then :func:`file_under_all` for the modes not in ``own``."""
    for mode in modes(cell, sub.likelihoods, own):
        cell.record(f"{bench}-{mode}", lambda m=mode: score(m), f"{bench}.{mode}")
    file_under_all(cell, bench, sub, [m for m in sub.likelihoods if m not in own])


def planned(sub: Any, parts: list[str]) -> bool:
    """Whether ``<bench>.<mode>.<score>`` is among the scores the bench writes."""
    return len(parts) >= 3 and parts[1] in sub.likelihoods

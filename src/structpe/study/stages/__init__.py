"""The evaluation stages of a study cell: one module per evaluation.

Each stage module owns everything about its evaluation, so that adding one touches its module,
its key in :class:`structpe.study.spec.EvaluationsSpec` (and :data:`STAGES`) and its test:

``KEY``                       its section name under ``evaluations:`` and its metrics' prefix
``SPEC``                      the dataclass of that section (defaults, types checked on load)
``build(raw, where)``         optional: the section from its YAML mapping (default: typed fields)
``check(sub, where)``         validation beyond types, one line naming the file and key per mistake
``cache_keys(sub, own, baseline, trained)``
                              its evaluations' cache keys (``evals/<name>.json``) from the model's
                              key with the test sentences (``own``), the same seed's baseline's
                              training hash and the cell's training hash (``trained``)
``run(sub, cell)``            runs it on a :class:`~structpe.study.stages.cell.Cell` (cached per
                              key) and files its flat scores into ``metrics.json``
``planned(sub, parts)``       whether a claim's metric (split at ``.``) is among its scores
``chance(sub, row, root)``    optional: its part of the report's chance row (``chance.json``)
``section(agg, spec, cells, chance)`` / ``plot(out, agg, spec, chance)``
                              optional: its own section / plot of ``study.md``
``COLUMNS`` / ``COUNT`` / ``MODE_NOTES`` / ``GROUP_PLOT`` / ``note(metric, cells)``
                              optional: its columns of the recipes table, what its ``n_*`` score
                              counts, its own words for a mode or a score, its accuracy per group

The likelihood stages (``ppl``, ``blimp``, ``syntaxgym``) share :mod:`.likelihood`: one cache key
and one run per likelihood mode, and the filing of a no-tag decoder's p(x) under every mode.
"""

from __future__ import annotations

from types import ModuleType

from . import blimp, glue, leakage, ppl, syntaxgym

# the order a cell runs them (and so the order of its metrics.json scores and wall times)
STAGES: tuple[ModuleType, ...] = (ppl, blimp, syntaxgym, leakage, glue)
# the order of the stages' own sections in study.md, and of their plots per group (``GROUP_PLOT``)
REPORT_SECTIONS: tuple[ModuleType, ...] = (glue, leakage)
REPORT_PLOTS: tuple[ModuleType, ...] = (syntaxgym, blimp)


def stage(key: str) -> ModuleType:
    """The stage module of ``evaluations.<key>``."""
    return next(s for s in STAGES if key == s.KEY)


def build(key: str, raw: object, where: str) -> object:
    """The spec section of stage ``key`` from its YAML mapping."""
    from structpe.study.spec_checks import build_spec

    module = stage(key)
    return module.build(raw, where) if hasattr(module, "build") else build_spec(module.SPEC, raw, where)


def metric_planned(metric: str, evals: object) -> bool:
    """Whether ``metric`` (``bench.mode.name``) is among the scores the spec's evaluations write."""
    parts = metric.split(".")
    if parts[0] == "val_lm_loss":
        return True
    sub = getattr(evals, parts[0], None) if any(parts[0] == s.KEY for s in STAGES) else None
    return sub is not None and stage(parts[0]).planned(sub, parts)

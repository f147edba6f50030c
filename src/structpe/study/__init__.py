"""Replication studies: a YAML spec of recipes x seeds x evaluations, run resumably cell by cell,
aggregated into mean ± sd, paired t-tests with Holm-adjusted verdicts per paper claim."""

import importlib

# name -> module; imported on first use, so `structpe --help` (which imports study.commands) stays fast
_LAZY = {
    "StudySpecError": "structpe.study.spec",
    "aggregate": "structpe.study.aggregate",
    "holm": "structpe.study.aggregate",
    "load_spec": "structpe.study.spec",
    "paired_test": "structpe.study.aggregate",
    "run_study": "structpe.study.runner",
}
__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'structpe.study' has no attribute {name!r}")

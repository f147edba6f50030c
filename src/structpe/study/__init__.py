"""Replication studies: a YAML spec of recipes x seeds x evaluations, run resumably cell by cell,
aggregated into mean ± sd, paired differences with bootstrap CIs and a verdict per paper claim."""

import importlib

# name -> module; imported on first use, so `structpe --help` (which imports study.commands) stays fast
_LAZY = {
    "StudySpecError": "structpe.study.spec",
    "aggregate": "structpe.study.aggregate",
    "bootstrap_ci": "structpe.study.aggregate",
    "load_spec": "structpe.study.spec",
    "run_study": "structpe.study.runner",
    "verdict": "structpe.study.aggregate",
}
__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'structpe.study' has no attribute {name!r}")

"""Replication studies: a YAML spec of recipes x seeds x evaluations, run resumably cell by cell,
aggregated into mean ± sd, paired differences with bootstrap CIs and a verdict per paper claim."""

from structpe.study.aggregate import aggregate, bootstrap_ci, verdict
from structpe.study.runner import run_study
from structpe.study.spec import StudySpecError, load_spec

__all__ = ["StudySpecError", "aggregate", "bootstrap_ci", "load_spec", "run_study", "verdict"]

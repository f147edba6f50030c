"""Replication studies: a YAML spec of recipes x seeds x evaluations, run resumably cell by cell,
aggregated into mean ± sd, paired t-tests with Holm-adjusted verdicts per paper claim."""

from structpe.study.aggregate import aggregate, holm, paired_test
from structpe.study.runner import run_study
from structpe.study.spec import StudySpecError, load_spec

__all__ = ["StudySpecError", "aggregate", "holm", "load_spec", "paired_test", "run_study"]

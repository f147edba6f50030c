"""SyntaxGym: suites, their prediction formulas, and the scoring protocol (docs/evaluation.md)."""

from structpe.exports import lazy_exports

_WHERE = {  # public name -> the module that defines it
    "evaluate_syntaxgym": "evaluate",
    "load_suites": "suites",
    "load_suite": "suites",
}
__all__ = list(_WHERE)
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)

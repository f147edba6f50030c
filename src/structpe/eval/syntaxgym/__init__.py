"""SyntaxGym: suites, their prediction formulas, and the scoring protocol (docs/evaluation.md)."""

from structpe.exports import lazy_exports

# each module -> the public names it defines, imported when first asked for
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "evaluate": ("evaluate_syntaxgym",), "suites": ("load_suites", "load_suite"),
})

"""Dependency parsers that produce hexatags: the ``Parser`` interface, spaCy, and structpe's own
hexatagger (model, training, evaluation, the shipped default); ``structpe tag`` and ``structpe parser``."""

from structpe.exports import lazy_exports

# each module -> the public names it defines, imported when first asked for
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "base": ("Parser", "GoldParser"), "registry": ("get_parser", "available_parsers", "register_parser"),
})

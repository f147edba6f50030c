"""Dependency parsers that produce hexatags: the ``Parser`` interface, spaCy, and structpe's own
hexatagger (model, training, evaluation, the shipped default); ``structpe tag`` and ``structpe parser``."""

from structpe.exports import lazy_exports

_WHERE = {  # public name -> the module that defines it
    "Parser": "base",
    "GoldParser": "base",
    "get_parser": "registry",
    "available_parsers": "registry",
    "register_parser": "registry",
}
__all__ = list(_WHERE)
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)

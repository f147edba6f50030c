"""``structpe quickstart``: the study harness's ``quickstart`` profile at one seed, and its short report."""

from structpe.exports import lazy_exports

_WHERE = {  # public name -> the module that defines it
    "run_quickstart": "run",
    "QuickstartConfig": "config",
}
__all__ = list(_WHERE)
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)

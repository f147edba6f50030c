"""``structpe quickstart``: the study harness's ``quickstart`` profile at one seed, and its short report."""

from structpe.exports import lazy_exports

# each module -> the public names it defines, imported when first asked for
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "run": ("run_quickstart",), "config": ("QuickstartConfig",),
})

"""Dataset registry, ``structpe data fetch`` and the shared-data root (every loader takes a local
directory): ``structpe.data.paths.data_root``."""

from structpe.exports import lazy_exports

# each module -> the public names it defines, imported when first asked for
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "paths": ("data_root", "DataNotFoundError"), "fetch": ("verify", "DataFetchError"),
})

"""Dataset registry, ``structpe data fetch`` and the shared-data root (every loader takes a local
directory): ``structpe.data.paths.data_root``."""

from structpe.exports import lazy_exports

_WHERE = {  # public name -> the module that defines it
    "data_root": "paths",
    "DataNotFoundError": "paths",
    "verify": "fetch",
    "DataFetchError": "fetch",
}
__all__ = list(_WHERE)
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)

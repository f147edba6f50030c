"""Joint text + tree generation from a SiPE decoder on its key/value cache, and ``structpe generate``."""

from structpe.exports import lazy_exports

_WHERE = {  # public name -> the module that defines it
    "generate": "decoding",
}
__all__ = list(_WHERE)
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)

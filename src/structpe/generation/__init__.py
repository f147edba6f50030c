"""Joint text + tree generation from a SiPE decoder on its key/value cache, and ``structpe generate``."""

from structpe.exports import lazy_exports

# each module -> the public names it defines, imported when first asked for
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "decoding": ("generate",),
})

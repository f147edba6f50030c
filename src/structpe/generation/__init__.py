"""Joint text + tree generation from a SiPE decoder on its key/value cache, and ``structpe generate``."""

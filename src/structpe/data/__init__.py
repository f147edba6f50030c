"""Dataset registry, ``structpe data fetch`` and the shared-data root (every loader takes a local
directory): ``structpe.data.paths.data_root``."""

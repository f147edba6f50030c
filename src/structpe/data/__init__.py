"""Dataset loaders and the shared-data root (every loader takes a local directory)."""

from structpe.data.paths import DataNotFoundError, data_root

__all__ = ["DataNotFoundError", "data_root"]

"""Shared fixtures. Tests that need ../shared/data skip locally when it is absent and FAIL in CI."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from structpe.data.paths import DataNotFoundError, data_root


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The shared data root (``$STRUCTPE_DATA`` or ``../shared/data``)."""
    try:
        return data_root()
    except DataNotFoundError as err:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI needs the shared data: {err}")
        pytest.skip(str(err))

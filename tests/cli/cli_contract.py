"""The CLI's contract for bad input, checked by the tests of tests/cli: exit status 2, exactly one
line on stderr (``structpe <command>: error: ...``), no traceback."""

from __future__ import annotations

import pytest

from structpe.cli import main


def fails(argv: list[str], capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    """Run the CLI in-process; it must exit 2 with one line containing every needle (returned)."""
    capsys.readouterr()
    rc = main(argv)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert rc == 2, err
    assert len(lines) == 1 and ": error: " in lines[0] and "Traceback" not in err, err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]

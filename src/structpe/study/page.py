"""A committed study page: a hand-written header (what the cells rest on, the machines, the
reading of the numbers) above the report that ``structpe study report`` generates from the cells.

The header is prose a person keeps; the report is never edited by hand. ``splice_report`` replaces
everything below the page's report heading with the folder's ``study.md``, so a page is rebuilt
from its cells by one command (``structpe study report FOLDER --page PAGE``) and a reader can
check that it was.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from structpe.errors import StructpeError
from structpe.io import atomic_write_text

REPORT_HEADING = "## The report"
_IMAGE = re.compile(r"(!\[[^\]]*\]\()([^)/]+\.png\))")


def page_header(page: Path) -> list[str]:
    """The hand-written lines of ``page``, through its report heading: read before the report is
    written, so that a wrong ``--page`` is refused before anything changes."""
    try:
        lines = page.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise StructpeError(
            f"--page {page}: not found (a study page with a '{REPORT_HEADING}' heading)"
        ) from None
    heading = next((i for i, line in enumerate(lines) if line.startswith(REPORT_HEADING)), None)
    if heading is None:
        raise StructpeError(
            f"--page {page}: no line starting with '{REPORT_HEADING}' (the report goes below it; "
            "the hand-written header above it stays)"
        )
    return lines[: heading + 1]


def splice_report(page: Path, header: list[str], report: str, folder: Path) -> None:
    """Write ``page`` as ``header`` (:func:`page_header`) and ``report`` (a ``study.md``) below it:
    the report's title line is dropped (the page has its own) and its images, which sit in
    ``folder``, are linked from the page's own folder."""
    body = report.splitlines()
    if body and body[0].startswith("# "):
        body = body[1:]
    while body and not body[0].strip():
        body = body[1:]
    prefix = Path(os.path.relpath(folder, page.parent)).as_posix()
    body = [_IMAGE.sub(lambda m: f"{m.group(1)}{prefix}/{m.group(2)}", line) for line in body]
    atomic_write_text(page, "\n".join([*header, "", *body]) + "\n")

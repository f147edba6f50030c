"""`structpe study report FOLDER --page PAGE`: the generated report replaces what follows the
page's report heading; the hand-written header above it stays, the report's title goes, its images
are linked from the page's folder; a page without the heading is refused before anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from structpe.cli import main
from structpe.study.page import page_header, splice_report

REPORT = "# Study `x` at profile `p`\n\nintro\n\n![ppl](ppl_modes.png)\n![remote](https://h/a.png)\n"


def test_the_report_goes_below_the_heading_and_the_header_stays(tmp_path: Path) -> None:
    page = tmp_path / "docs" / "x.md"
    page.parent.mkdir()
    page.write_text("# Page\n\nhand-written\n\n## The report (generated)\n\nold report\n![o](x/o.png)\n")
    splice_report(page, page_header(page), REPORT, tmp_path / "docs" / "x")
    assert page.read_text() == (
        "# Page\n\nhand-written\n\n## The report (generated)\n\nintro\n\n![ppl](x/ppl_modes.png)\n"
        "![remote](https://h/a.png)\n"
    )
    header = page_header(page)
    splice_report(page, header, REPORT, tmp_path / "docs" / "x")  # rebuilding changes nothing
    assert page_header(page) == header and page.read_text().count("intro") == 1


def test_a_page_without_the_heading_is_refused_before_the_report_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "x.md"
    page.write_text("# Page\n\nno heading\n")
    folder = tmp_path / "study"
    folder.mkdir()
    assert main(["study", "report", str(folder), "--page", str(page)]) == 2
    err = capsys.readouterr().err.strip()
    assert f"--page {page}: no line starting with '## The report'" in err and "\n" not in err
    assert page.read_text() == "# Page\n\nno heading\n" and not list(folder.iterdir())
    assert main(["study", "report", str(folder), "--page", str(tmp_path / "missing.md")]) == 2
    assert "missing.md: not found" in capsys.readouterr().err

"""Numbers as the study report's table cells, and Markdown tables: the formatting every report
section uses (``structpe.study.wording`` words them, the stages' sections and ``report`` lay them out)."""

from __future__ import annotations

import math
from typing import Any


def pm(s: dict[str, Any] | None, scale: float = 1.0) -> str:
    """``mean ± sd`` of a score summary (``-`` for none), scaled by ``scale``."""
    if not s or s.get("n", 0) == 0 or s["mean"] is None or math.isnan(s["mean"]):
        return "-"
    prec = 3 if abs(s["mean"] * scale) < 10 else 1
    sd = s.get("sd")
    tail = "" if sd is None or math.isnan(sd) else f" ± {sd * scale:.{prec}f}"
    return f"{s['mean'] * scale:.{prec}f}{tail}"


def fmt_num(x: float | None, prec: int = 3) -> str:
    """A signed number for the tables (``-`` for none / NaN)."""
    return "-" if x is None or math.isnan(x) else f"{x:+.{prec}f}"


def md_table(rows: list[list[str]], header: list[str]) -> list[str]:
    """A Markdown table; a ``|`` inside a cell is escaped."""

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"  # p(x | T) inside a cell

    return [line(header), "|" + "|".join("---" for _ in header) + "|", *(line(r) for r in rows)]


def zero_nan(x: float | None) -> float:
    """0 for a missing or NaN spread (an error bar of one seed)."""
    return 0.0 if x is None or math.isnan(x) else float(x)


def fmt_p(x: float | None) -> str:
    """A p-value for the tables (``-`` for none / NaN)."""
    if x is None or math.isnan(x):
        return "-"
    return f"{x:.2g}" if x < 0.001 else f"{x:.3f}"

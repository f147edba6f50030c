"""Writing evaluation results: JSON + a Markdown table + PNG plots (every evaluation writes all three).

Kept dependency-light: matplotlib with the Agg backend (no display), plain JSON (never pickle).
"""

from __future__ import annotations

import json
import math
import platform
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from structpe.io import atomic_write_text, save_figure


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.4f}" if abs(v) < 1000 else f"{v:.1f}"
    return str(v)


def markdown_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """A GitHub Markdown table of ``rows`` (dicts) over ``columns``."""
    head = "| " + " | ".join(columns) + " |"
    sep = "|" + "|".join("---" for _ in columns) + "|"
    body = ["| " + " | ".join(_fmt(r.get(c, "")) for c in columns) + " |" for r in rows]
    return "\n".join([head, sep, *body])


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, float) and (math.isnan(obj) or math.isinf(obj)):
        return None
    if hasattr(obj, "item") and callable(obj.item):  # numpy / torch scalars
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    return obj


def write_json(path: str | Path, data: Any) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(_jsonable(data), indent=2) + "\n")
    return path


def write_report(
    out_dir: str | Path,
    name: str,
    result: Mapping[str, Any],
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str],
    *,
    title: str,
    notes: Sequence[str] = (),
    plots: Sequence[Path] = (),
    provenance: Mapping[str, Any] | None = None,
    sections: Sequence[str] = (),
) -> dict[str, Path]:
    """Write ``<name>.json`` (full result + run metadata) and ``<name>.md`` (notes + table + plots,
    then ``sections``: further Markdown lines, e.g. a section of its own with a heading).

    ``provenance``: the block of :func:`structpe.provenance.provenance` (version, command, model and
    data hashes, parser, scoring settings, hardware, wall time), stored under ``provenance``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    meta = {
        "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": platform.python_version(),
    }
    extra = {"provenance": dict(provenance)} if provenance is not None else {}
    jpath = write_json(out / f"{name}.json", {**result, **extra, "_meta": meta})
    lines = [f"# {title}", ""]
    lines += [f"- {n}" for n in notes]
    if notes:
        lines.append("")
    lines += [markdown_table(rows, columns), ""]
    for p in plots:
        lines.append(f"![{Path(p).stem}]({Path(p).name})")
    if sections:
        lines += ["", *sections]
    mpath = out / f"{name}.md"
    atomic_write_text(mpath, "\n".join(lines) + "\n")
    return {"json": jpath, "markdown": mpath, **{f"plot{i}": Path(p) for i, p in enumerate(plots)}}


def import_pyplot() -> Any:
    """matplotlib's pyplot on the file-only Agg backend (no display needed); imported on first use
    because matplotlib costs a second."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def bar_plot(
    path: str | Path,
    labels: Sequence[str],
    series: Mapping[str, Sequence[float]],
    *,
    title: str,
    ylabel: str,
    hline: float | None = None,
    errors: Mapping[str, Sequence[float]] | None = None,
) -> Path:
    """Grouped horizontal-label bar chart (one group per label, one bar per series).

    ``errors`` (same keys as ``series``) draws symmetric error bars, e.g. the sd over seeds.
    """
    plt = import_pyplot()
    n = len(labels)
    k = max(1, len(series))
    width = 0.8 / k
    fig, ax = plt.subplots(figsize=(max(6.0, 0.28 * n * k + 2), 4.5))
    for j, (name, vals) in enumerate(series.items()):
        xs = [i + (j - (k - 1) / 2) * width for i in range(n)]
        yerr = list(errors[name]) if errors and name in errors else None
        ax.bar(xs, list(vals), width=width, label=name, yerr=yerr, capsize=2 if yerr else 0)
    if hline is not None:
        ax.axhline(hline, color="grey", lw=0.8, ls="--")
    ax.set_xticks(range(n))
    ax.set_xticklabels(labels, rotation=75, ha="right", fontsize=7)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if len(series) > 1:  # beside the axes: many groups of tall bars leave no free corner inside
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return save_figure(fig, path)


def line_plot(
    path: str | Path,
    x: Sequence[float],
    series: Mapping[str, Sequence[float]],
    *,
    title: str,
    xlabel: str,
    ylabel: str,
) -> Path:
    plt = import_pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, ys in series.items():
        ax.plot(list(x), list(ys), marker="o", label=name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def hist_plot(path: str | Path, values: Sequence[float], *, title: str, xlabel: str, bins: int = 40) -> Path:
    plt = import_pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.hist(list(values), bins=bins)
    ax.axvline(0.0, color="grey", lw=0.8, ls="--")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("pairs")
    ax.set_title(title)
    return save_figure(fig, path)

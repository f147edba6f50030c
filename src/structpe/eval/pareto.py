"""The Pareto view of the SiPE paper's Figure 1, rebuilt from our own runs (docs/design.md §4).

x: parse trees evaluated per sentence at inference (log scale, 0 included via a symlog axis):
0 for a model that reads no parse, 1 for one fixed parse (``conditional`` p(x | T) and ``joint``
p(x, T)), k for the k-best ``marginal`` bound. y: SyntaxGym score (%). Our points come from
``structpe.eval.syntaxgym.evaluate.evaluate_syntaxgym`` result JSON files (as written by the report writer);
the published points of other methods are drawn as reference marks, and the output JSON lists
every point with its source.

Published points (SiPE paper, shared/papers/000_84fab5e440bdfc75.txt): y from Table 2 (text
lines ~929-1003: SyntaxGym column), x from Figure 1 (lines ~60-91: "parser-free" at 0, "single
parse" at 1, joint syntactic LMs "recover p(x) by marginalizing over ≈300 candidate parses").
Figure 1 shows one TPT point without naming the variant; we use TPT [dep.], the best TPT variant in
Table 2, and say so in its note. Those numbers are at the paper's scale (16-layer TXL on BLLIP-LG)
and are not comparable in absolute terms with tiny models: they mark the shape of the frontier.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from structpe.io import read_json, save_figure

PAPER = "SiPE paper (shared/papers/000_84fab5e440bdfc75.txt)"
PUBLISHED: tuple[dict[str, Any], ...] = (
    {
        "label": "Transformer-XL (paper)",
        "x": 0,
        "y": 73.09,
        "source": f"{PAPER}, Table 2 'Transformer-XL (tokens)' SyntaxGym; Fig. 1 x = 0",
    },
    {
        "label": "TPT [dep.] (paper)",
        "x": 0,
        "y": 77.10,
        "source": f"{PAPER}, Table 2 'TPT [dep.]' SyntaxGym; Fig. 1 x = 0",
        "note": "Figure 1 does not name the TPT variant; [dep.] is the best TPT row of Table 2",
    },
    {
        "label": "TreeReg (paper)",
        "x": 0,
        "y": 80.00,
        "source": f"{PAPER}, Table 2 'TreeReg (GPT-2)' SyntaxGym; Fig. 1 x = 0",
    },
    {
        "label": "SiPE position (paper)",
        "x": 1,
        "y": 80.60,
        "source": f"{PAPER}, Table 2 'Position-pathway Injection' SyntaxGym; Fig. 1 x = 1 (conditional)",
    },
    {
        "label": "PLM (paper)",
        "x": 300,
        "y": 80.20,
        "source": f"{PAPER}, Table 2 'PLM (GPT-2)' SyntaxGym; Fig. 1 x ≈ 300",
    },
    {
        "label": "Pushdown LM (paper)",
        "x": 300,
        "y": 82.30,
        "source": f"{PAPER}, Table 2 'Pushdown LM (GPT-2)' SyntaxGym; Fig. 1 x ≈ 300",
    },
    {
        "label": "TG (paper)",
        "x": 300,
        "y": 82.50,
        "source": f"{PAPER}, Table 2 'Transformer Grammar (Transformer-XL)' SyntaxGym; Fig. 1 x ≈ 300",
    },
)

_K_RE = re.compile(r"k = (\d+)")


def parses_per_sentence(result: Mapping[str, Any]) -> int:
    """0 (no parse read), 1 (conditional / joint: one parse), k (marginal) or 4N sampled sequences
    (smc), from a result's fields."""
    likelihood = result.get("likelihood", "")
    scoring = str(result.get("scoring", ""))
    if likelihood == "plain" or "reads no tags" in scoring:
        return 0
    if likelihood == "marginal":
        if "k" in result:
            return int(result["k"])
        m = _K_RE.search(scoring)
        if not m:
            raise ValueError(
                "a marginal result must name its beam width (a 'k' field or 'k = N' in 'scoring')"
            )
        return int(m.group(1))
    if likelihood in ("conditional", "joint"):
        return 1
    if likelihood == "smc" and "particles" in result:  # the score pools 4 systems of N particles
        from structpe.eval.scoring.smc_views import SMC_REPLICATES

        return int(result["particles"]) * SMC_REPLICATES
    raise ValueError(f"cannot place likelihood {likelihood!r} on the parses-per-sentence axis")


def _load(item: str | Path | Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    if isinstance(item, Mapping):
        return dict(item), str(item.get("model", "run"))
    path = Path(item)
    return read_json(path), path.stem


def our_points(
    results: Sequence[str | Path | Mapping[str, Any]], labels: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """One point per SyntaxGym result: label, x (parses per sentence), y (SG score %), likelihood."""
    if labels is not None and len(labels) != len(results):
        raise ValueError(f"{len(labels)} labels for {len(results)} results")
    points = []
    for i, item in enumerate(results):
        res, stem = _load(item)
        if res.get("benchmark") != "syntaxgym" or "sg_score" not in res:
            raise ValueError(f"{stem}: not a SyntaxGym result (needs benchmark='syntaxgym' and 'sg_score')")
        sg = float(res["sg_score"])
        y = 100.0 * sg if sg <= 1.0 else sg
        x = parses_per_sentence(res)
        likelihood = "plain" if x == 0 else res.get("likelihood", "")  # a tagless model: p(x) in any mode
        label = labels[i] if labels is not None else str(res.get("model", stem))
        points.append(
            {
                "label": label,
                "x": x,
                "y": y,
                "likelihood": likelihood,
                "scoring": res.get("scoring", ""),
                "n_suites": res.get("n_suites"),
                "source": str(item) if not isinstance(item, Mapping) else "in-memory result",
            }
        )
    return points


_MARKERS = {"plain": "s", "conditional": "o", "joint": "D", "marginal": "^"}


def pareto_figure(
    results: Sequence[str | Path | Mapping[str, Any]],
    out_png: str | Path,
    out_json: str | Path | None = None,
    *,
    labels: Sequence[str] | None = None,
    published: bool = True,
    title: str = "Parses evaluated per sentence vs SyntaxGym (cf. SiPE Fig. 1)",
) -> dict[str, Any]:
    """Draw the figure (PNG) and write its points (JSON, default: next to the PNG); returns the JSON."""
    from structpe.eval.report import import_pyplot, write_json

    ours = our_points(results, labels)
    refs = [dict(p) for p in PUBLISHED] if published else []
    plt = import_pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    placed: dict[float, int] = {}  # labels already at this x: stagger them vertically

    def label(x: float, y: float, text: str, **kw: Any) -> None:
        n = placed.get(x, 0)
        placed[x] = n + 1
        ax.annotate(text, (x, y), textcoords="offset points", xytext=(6, 4 - 10 * n), **kw)

    for p in sorted(refs, key=lambda p: -p["y"]):
        ax.scatter(p["x"], p["y"], marker="x", color="0.45", zorder=2)
        label(p["x"], p["y"], p["label"], fontsize=7, color="0.35")
    for p in ours:
        ax.scatter(p["x"], p["y"], marker=_MARKERS.get(p["likelihood"], "o"), s=45, zorder=3)
    placed.clear()
    for p in sorted(ours, key=lambda p: -p["y"]):
        label(p["x"], p["y"], f"{p['label']} [{p['likelihood']}] {p['y']:.1f}", fontsize=8)
    ax.set_xscale("symlog", linthresh=1.0)
    ticks = sorted({0, 1, 10, 100, 300, *(int(p["x"]) for p in ours)})
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(t) for t in ticks])
    ax.set_xlim(-0.3, max(ticks) * 2.0)
    ax.set_xlabel("parse trees evaluated per sentence (symlog)")
    ax.set_ylabel("SyntaxGym score (%)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    out_png = save_figure(fig, out_png, dpi=130)
    data = {
        "x": "parse trees evaluated per sentence (0: no parse read; 1: one fixed parse; k: k-best marginal)",
        "y": "SyntaxGym score (%)",
        "ours": ours,
        "published": refs,
        "png": str(out_png),
    }
    write_json(Path(out_json) if out_json is not None else out_png.with_suffix(".json"), data)
    return data

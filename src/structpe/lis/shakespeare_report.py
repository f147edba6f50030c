"""Reporting the Tiny Shakespeare runs (LIS paper App. F.1, Table 3): the models' names, merged
results, the Markdown tables (perplexity by context, training curves, provenance) and the plot.

Pure functions of the result JSON written by ``structpe.lis.shakespeare.run``, so a report can be
rebuilt from earlier runs without a model.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from structpe.io import atomic_savefig
from structpe.lis.training import merge_results

MODEL_LABELS = {
    "lis": "LISformer (content line addresses)",
    "rope": "continuous RoPE",
    "alibi": "ALiBi",
    "random": "random line addresses",
    "lis-alibi": "LISformer + ALiBi over line distance (extension)",
    "lis-qprev": "LISformer, query rotated by the previous line's address (ablation)",
    "random-qprev": "random line addresses, query rotated by the previous line's (ablation)",
}


def merge(folders: list[str | Path], out: str | Path) -> dict:
    """Combine results.json of runs that trained different models (e.g. in parallel processes)."""
    return merge_results(folders, out, ("config",), markdown_table, plot, "ppl.png")


def markdown_table(results: dict) -> str:
    ctxs = list(next(iter(results["models"].values()))["ppl"].keys())
    head = "| model | params | " + " | ".join(f"PPL@{c}" for c in ctxs) + f" | {ctxs[-1]}/{ctxs[0]} |"
    lines = [head, "|" + "---|" * (len(ctxs) + 3)]
    for r in results["models"].values():
        p = r["ppl"]
        ratio = p[ctxs[-1]] / p[ctxs[0]]
        lines.append(
            f"| {_row_label(r)} | {r['params']:,} | "
            + " | ".join(f"{p[c]:.3f}" for c in ctxs)
            + f" | {ratio:.3f} |"
        )
    for runs in _seed_groups(results).values():  # runs merged from several seeds: their spread
        ppl = {c: [r["ppl"][c] for r in runs] for c in ctxs}
        ratios = [r["ppl"][ctxs[-1]] / r["ppl"][ctxs[0]] for r in runs]
        lines.append(
            f"| {runs[0]['label']}, mean ± sd over {len(runs)} seeds | {runs[0]['params']:,} | "
            + " | ".join(_mean_sd(ppl[c]) for c in ctxs)
            + f" | {_mean_sd(ratios)} |"
        )
    with_mass = [r for r in results["models"].values() if "own_line_mass" in r]
    if with_mass:
        lines += [
            "",
            "Attention mass on the query's own line (last 128 queries of a window; per layer, head mean):",
            "",
            "| model | " + " | ".join(f"@{c}" for c in ctxs) + " |",
            "|" + "---|" * (len(ctxs) + 1),
        ]
        for r in with_mass:
            m = r["own_line_mass"]
            cells = [" / ".join(f"{v:.2f}" for v in m[c]) if c in m else "-" for c in ctxs]
            lines.append(f"| {_row_label(r)} | " + " | ".join(cells) + " |")
    return "\n".join(lines + curve_table(results) + provenance_table(results)) + "\n"


def curve_table(results: dict) -> list[str]:
    """Validation PPL at the training context every ``eval_every`` updates (models that recorded one)."""
    runs = {
        _row_label(r): {p["updates"]: p["val_ppl"] for p in r["curve"]}
        for r in results["models"].values()
        if r.get("curve")
    }
    if not runs:
        return []
    steps = sorted({u for points in runs.values() for u in points})
    lines = [
        "",
        f"Validation PPL at the training context ({results['config']['train_ctx']} characters), "
        "during training:",
        "",
        "| updates | " + " | ".join(runs) + " |",
        "|" + "---|" * (len(runs) + 1),
    ]
    for u in steps:
        lines.append(
            f"| {u:,} | " + " | ".join(f"{p[u]:.3f}" if u in p else "-" for p in runs.values()) + " |"
        )
    return lines


def provenance_table(results: dict) -> list[str]:
    """Per trained model: revision (``+dirty``: uncommitted code), device, torch build and command."""
    rows = [(r, r["provenance"]) for r in results["models"].values() if "provenance" in r]
    if not rows:
        return []
    lines = [
        "",
        "Provenance of each run:",
        "",
        "| model | revision | device | torch | command |",
        "|---|---|---|---|---|",
    ]
    for r, prov in rows:
        dev, build = prov.get("device") or {}, prov.get("torch_build") or {}
        torch_s = f"{build.get('version')}" + (f" (CUDA {build['cuda']})" if build.get("cuda") else "")
        lines.append(
            f"| {_row_label(r)} | `{prov.get('git_revision')}` | {dev.get('type')}: {dev.get('name')}, "
            f"{dev.get('threads')} threads | {torch_s} | `{prov.get('command')}` |"
        )
    return lines


def _row_label(record: dict) -> str:
    return f"{record['label']} (seed {record['seed']})" if "seed" in record else record["label"]


def _seed_groups(results: dict) -> dict[str, list[dict]]:
    """The models that ``merge`` keyed by seed, grouped by model, where a model has two seeds or more."""
    groups: dict[str, list[dict]] = {}
    for r in results["models"].values():
        if "seed" in r:
            groups.setdefault(r["model"], []).append(r)
    return {m: runs for m, runs in groups.items() if len(runs) > 1}


def _mean_sd(values: list[float]) -> str:
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f}"


def plot(results: dict, path: Path) -> None:
    """PPL against context on a log axis (all models), the same without the models whose PPL
    explodes past the training length (RoPE) on a linear axis, so a rise of a few percent stays
    visible, and the validation curves during training where runs recorded them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = list(results["models"].values())
    bounded = [r for r in records if _label_model(r) != "rope"]
    curves = [r for r in records if r.get("curve")]
    panels = 2 + bool(curves)
    fig, axes = plt.subplots(1, panels, figsize=(4.6 * panels, 3.6))
    for ax, group, title in ((axes[0], records, "all models (log PPL)"), (axes[1], bounded, "without RoPE")):
        for r in group:
            ctx = [int(c) for c in r["ppl"]]
            ax.plot(ctx, list(r["ppl"].values()), marker="o", label=_row_label(r))
        ax.set_xscale("log", base=2)
        ax.set_xlabel("evaluation context (characters)")
        ax.set_ylabel("all-token validation PPL")
        ax.set_title(f"{title}; trained at {results['config']['train_ctx']}", fontsize=9)
        ax.legend(fontsize=6)
    axes[0].set_yscale("log")
    if curves:
        ax = axes[2]
        for r in curves:
            ax.plot(
                [p["updates"] for p in r["curve"]],
                [p["val_ppl"] for p in r["curve"]],
                marker=".",
                label=_row_label(r),
            )
        ax.set_xlabel("updates")
        ax.set_ylabel(f"validation PPL @{results['config']['train_ctx']}")
        ax.set_title("during training", fontsize=9)
        ax.legend(fontsize=6)
    fig.tight_layout()
    atomic_savefig(fig, path, dpi=120)
    plt.close(fig)


def _label_model(record: dict) -> str:
    """The model name of a record (merged records carry ``model``; else matched by label)."""
    return record.get("model") or next((m for m, lab in MODEL_LABELS.items() if lab == record["label"]), "")

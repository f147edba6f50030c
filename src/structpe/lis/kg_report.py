"""Reporting the template-diverse KG runs (LIS paper App. F.4): merged results, Markdown tables, plot.

Pure functions of the result JSON written by ``structpe.lis.kg.run``, so a report can be rebuilt
from earlier runs without a model.
"""

from __future__ import annotations

from pathlib import Path

from structpe.io import save_figure
from structpe.lis.training import merge_results


def merge(
    folders: list[str | Path], out: str | Path, render=None, draw=None, figure: str = "hit5.png"
) -> dict:
    """Combine results.json of runs that trained different models (e.g. in parallel processes);
    ``render`` / ``draw`` / ``figure`` replace the Markdown table and plot of the template diagnostic."""
    plot_fn = None if draw is False else (draw or plot)
    return merge_results(folders, out, ("config", "data"), render or markdown_tables, plot_fn, figure)


def markdown_tables(results: dict) -> str:
    models = list(results["models"])
    head = "| setting | names | facts | " + " | ".join(f"{m} h@1 / h@5 / PPL" for m in models) + " |"
    lines = [head, "|" + "---|" * (3 + len(models))]
    first = results["models"][models[0]]["scores"]
    for key in first:
        setting, split = key.split("/")
        for arity in sorted(first[key]):
            cells = []
            for m in models:
                r = results["models"][m]["scores"][key].get(arity)
                cells.append(f"{r['hit@1']:.3f} / {r['hit@5']:.3f} / {r['ppl']:.2f}" if r else "-")
            lines.append(f"| {setting} | {split} | {arity} | " + " | ".join(cells) + " |")
    params = ", ".join(
        f"{m}: {results['models'][m]['params']:,} params, {results['models'][m]['train_seconds']} s"
        for m in models
    )
    return "\n".join(lines) + f"\n\n{params}\n"


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(results["models"])
    keys = list(results["models"][models[0]]["scores"])
    fig, ax = plt.subplots(figsize=(7, 3.5))
    w = 0.8 / len(models)
    for k, m in enumerate(models):
        vals = [results["models"][m]["scores"][key]["all"]["hit@5"] for key in keys]
        ax.bar([i + k * w for i in range(len(keys))], vals, w, label=results["models"][m]["label"])
    ax.set_xticks([i + 0.4 - w / 2 for i in range(len(keys))])
    ax.set_xticklabels(keys, rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("hit@5 (target entities)")
    ax.legend(fontsize=7)
    save_figure(fig, path, dpi=120)

"""Reporting the template-diverse KG runs (LIS paper App. F.4): merged results, Markdown tables, plot.

Pure functions of the result JSON written by ``structpe.lis.kg.run``, so a report can be rebuilt
from earlier runs without a model.
"""

from __future__ import annotations

import json
from pathlib import Path

from structpe.io import atomic_savefig, atomic_write_text, earlier_results
from structpe.lis.lisformer import OLD_FIELD_NAMES


def merge(folders: list[str | Path], out: str | Path, render=None, draw=None) -> dict:
    """Combine results.json of runs that trained different models (e.g. in parallel processes);
    ``render`` / ``draw`` replace the Markdown table and plot of the template diagnostic."""
    merged: dict = {"config": None, "data": None, "models": {}, "merged_from": [str(f) for f in folders]}
    for f in folders:
        res = json.loads((Path(f) / "results.json").read_text())
        merged["config"] = merged["config"] or res["config"]
        merged["data"] = merged["data"] or res["data"]
        merged["models"].update(res["models"])
    out = Path(out)
    kept = earlier_results(
        out / "results.json", merged["config"], ignore=("threads", "device"), old_names=OLD_FIELD_NAMES
    )
    merged["models"] = {**kept, **merged["models"]}
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "results.json", json.dumps(merged, indent=2))
    atomic_write_text(out / "results.md", (render or markdown_tables)(merged))
    if draw is not False:
        (draw or plot)(merged, out / "hit5.png")
    return merged


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
    fig.tight_layout()
    atomic_savefig(fig, path, dpi=120)
    plt.close(fig)

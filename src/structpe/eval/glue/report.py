"""GLUE reporting: per-seed epoch selection, mean (± sd) over seeds and the macro average.

As the SiPE paper's GLUE tables do (tables 4-6, 9-10): one number per task, mean (± sd) over
seeds, and the macro average = the plain mean of those numbers over the tasks run. Per seed the
*best dev epoch* by the task's main metric is reported (the paper fine-tunes 20 epochs, table 11)
and the last epoch beside it; the selection is on the dev split that is also reported, as in the
papers it follows, so ``best`` is optimistic; ``last`` involves no selection. Pure functions of the
recorded results, kept apart from the fine-tuning loop (``structpe.eval.glue.finetune``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


def best_epoch(history: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The epoch with the highest ``main`` (the first one on ties), as a copy of its row."""
    if not history:
        raise ValueError("no epochs to choose from")
    return dict(max(history, key=lambda h: (h["main"], -h["epoch"])))


def sample_sd(values: Sequence[float]) -> float | None:
    """Sample standard deviation (n - 1) over seeds; None for a single seed."""
    return float(np.std(values, ddof=1)) if len(values) > 1 else None


def summarize(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Mean and sample sd over seeds of every metric of the given per-seed epoch rows."""
    names = [k for k in rows[0] if k not in ("epoch", "train_loss")]
    return {
        "mean": {m: float(np.mean([r[m] for r in rows])) for m in names},
        "sd": {m: sample_sd([r[m] for r in rows]) for m in names},
        "epochs": [int(r["epoch"]) for r in rows],
    }


def macro_average(
    per_task: Mapping[str, Mapping[str, Any]], which: str = "best"
) -> tuple[float, float | None]:
    """Mean over tasks of the seed-mean main score, and the sd over seeds of the per-seed macro."""
    macro = float(np.mean([r["summary"][which]["mean"]["main"] for r in per_task.values()]))
    seeds = [list(r["seeds"]) for r in per_task.values()]
    if any(s != seeds[0] for s in seeds):
        return macro, None  # per-seed macros need the same seeds on every task
    runs = [r["runs"] for r in per_task.values()]
    per_seed = [np.mean([task_runs[i][which]["main"] for task_runs in runs]) for i in range(len(seeds[0]))]
    return macro, sample_sd(per_seed)


def _pm(mean: float, sd: float | None) -> str:
    """``72.30 ± 0.33`` in points (x100), as the paper's tables print scores."""
    return f"{100 * mean:.2f}" + (f" ± {100 * sd:.2f}" if sd is not None else "")


def format_results(result: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """The combined table: per task the paper's metric at the best and at the last dev epoch."""
    rows = []
    for t, r in result["tasks"].items():
        best, last = r["summary"]["best"], r["summary"]["last"]
        rows.append(
            {
                "task": t,
                "metric": r["metric"],
                "best epoch": _pm(best["mean"]["main"], best["sd"]["main"]),
                "last epoch": _pm(last["mean"]["main"], last["sd"]["main"]),
                "best epochs": " ".join(str(e) for e in best["epochs"]),
                "other metrics (best)": ", ".join(
                    f"{k} {100 * v:.2f}" for k, v in best["mean"].items() if k not in ("main", r["metric"])
                ),
                "seeds": len(r["seeds"]),
            }
        )
    rows.append(
        {
            "task": "**macro**",
            "metric": "mean of the tasks",
            "best epoch": _pm(result["macro"], result.get("macro_sd")),
            "last epoch": _pm(result["macro_last"], result.get("macro_last_sd")),
            "best epochs": "",
            "other metrics (best)": "",
            "seeds": "",
        }
    )
    return rows, list(rows[0])

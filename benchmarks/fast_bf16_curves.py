"""``train.fast_bf16`` against bf16 autocast: the same recipe, seed and batches through ``pretrain``.

    python benchmarks/fast_bf16_curves.py --dataset <prepared folder> --steps 200 \\
        --out benchmarks/results/fast_bf16_curves-cpu-epyc.json      # + the .png beside it

Trains ``--recipe`` (default ``txl/position-tiny``) with the ``cpu-mini`` profile's overrides (lr
3e-3, no dropout, batch 16 x 128; the study's 1,200 steps cut to ``--steps``, warmup scaled alike)
once under bf16 autocast (float32 parameters) and once with ``train.fast_bf16`` (bf16 parameters,
float32 master weights), one thread each, and writes JSON: both training-loss curves (the
Trainer's logged LM loss every ``--log-every`` steps), their largest relative gap, the validation LM
losses, and CPU seconds per step of each run; and a PNG of the two curves. Same seed, so the
same initial weights and batch order: the gap is what the precision path changes.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import torch

from structpe.io import atomic_write_text, save_figure
from structpe.train.pretrain import pretrain
from structpe.train.trainer import read_metrics, val_lm_loss

CPU_MINI = ["train.batch_size=16", "train.lr=3e-3", "model.dropout=0", "model.attention_dropout=0"]
PATHS = {"bf16": ["train.bf16=true"], "fast_bf16": ["train.bf16=true", "train.fast_bf16=true"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", required=True, help="a folder written by `structpe prepare` (seq_len 128)")
    ap.add_argument("--recipe", default="txl/position-tiny")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--eval-batches", type=int, default=20)
    ap.add_argument("--out", required=True, help="JSON path; the PNG gets the same name")
    args = ap.parse_args()
    torch.set_num_threads(1)
    work = Path(tempfile.mkdtemp(prefix="fast-bf16-"))
    common = [*CPU_MINI, f"train.dataset={args.dataset}", f"train.max_steps={args.steps}",
              f"train.warmup={max(1, args.steps // 12)}",  # cpu-mini: 100 of 1,200 steps
              f"train.eval_every={args.steps // 2}", f"train.eval_batches={args.eval_batches}",
              f"train.log_every={args.log_every}", "train.threads=1", "train.progress=false",
              "train.save_total_limit=1"]
    curves, valid, step_cpu = {}, {}, {}
    for name, extra in PATHS.items():
        t0 = time.process_time()
        run = pretrain(args.recipe, [*common, *extra, f"train.output_dir={work / name}"])
        step_cpu[name] = round((time.process_time() - t0) / args.steps, 4)
        rows = read_metrics(run / "metrics.csv")
        curves[name] = {int(r["step"]): round(r["lm_loss"], 4) for r in rows if "lm_loss" in r}
        valid[name] = [round(val_lm_loss(r), 4) for r in rows if val_lm_loss(r) is not None]
    a, b = curves["bf16"], curves["fast_bf16"]
    steps = sorted(set(a) & set(b))
    gaps = {s: abs(b[s] - a[s]) / a[s] for s in steps}
    late = [gaps[s] for s in steps if s > args.steps // 4]  # after the first quarter (the steep drop)
    result = {
        "benchmark": "fast_bf16_curves",
        "recipe": args.recipe,
        "overrides": common,
        "dataset": args.dataset,
        "torch": torch.__version__,
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "train_lm_loss": {k: {str(s): v for s, v in c.items()} for k, c in curves.items()},
        "max_rel_gap": round(max(gaps.values()), 4),
        "mean_rel_gap_after_first_quarter": round(sum(late) / len(late), 4),
        "valid_lm_loss": valid,
        "cpu_s_per_step_incl_eval": step_cpu,
    }
    out = Path(args.out)
    atomic_write_text(out, json.dumps(result, indent=2) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for name, c in curves.items():
        ax.plot(list(c), list(c.values()), label=f"{name} (valid {valid[name][-1]:.3f})")
    ax.set_xlabel("step")
    ax.set_ylabel("training LM loss (nats)")
    ax.set_title(f"{args.recipe}, cpu-mini settings: bf16 autocast vs fast_bf16")
    ax.legend()
    ax.grid(alpha=0.3)
    save_figure(fig, out.with_suffix(".png"), dpi=100)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

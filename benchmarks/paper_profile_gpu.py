"""Measured training cost of a study profile on a GPU (the spec's `paper` profile states its cost
from FLOPs; this measures it).

    python benchmarks/paper_profile_gpu.py > benchmarks/results/paper_profile-h200.json
    python benchmarks/paper_profile_gpu.py --device cpu --steps 1 --warmup 1 --batch-size 2   # a smoke check

One training step as the Trainer takes it for each listed recipe of the profile: the recipe with the
profile's overrides, a forward under bf16 autocast, backward, grad-norm clipping, AdamW, on random
ids and tags shaped like a packed batch (``random_batch`` of train_throughput.py; the profile's
batch size and ``dataset.seq_len``, its ``dataset.vocab_size``). Reported per recipe: the median
step time over ``--steps`` timed steps after ``--warmup``, tokens/s, peak memory, the model
TFLOP/s that implies (6 x weights FLOPs per token, the usual estimate; attention left out), and the
projected training wall time of ``train.max_steps`` per cell; then all of the profile's
cells (each recipe's seed count times the measured step of its recipe, `none`'s where a recipe was
not timed). Training only: evaluation and data preparation are not in it.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from typing import Any

import torch
from train_throughput import random_batch

from structpe.models import SiPEConfig, build_model
from structpe.study.spec import load_spec
from structpe.train.recipe import load_recipe


def time_recipe(spec, label: str, args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    recipe = load_recipe(spec.recipe_name(label), spec.cell_overrides(label))
    cfg = SiPEConfig(**{**recipe.model, "vocab_size": spec.dataset.vocab_size})
    batch_size = args.batch_size or recipe.train.batch_size
    seq = spec.dataset.seq_len
    torch.manual_seed(0)
    model = build_model(cfg).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=recipe.train.lr, weight_decay=recipe.train.weight_decay)
    batch = {k: v.to(device) for k, v in random_batch(batch_size, seq, cfg.vocab_size, seed=1).items()}
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times = []
    for i in range(args.warmup + args.steps):
        sync()
        t0 = time.perf_counter()
        with torch.autocast(device.type, dtype=torch.bfloat16):
            out = model(**batch)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync()
        if i >= args.warmup:
            times.append(time.perf_counter() - t0)
    step_s = statistics.median(times)
    params = sum(p.numel() for p in model.parameters())
    tokens = batch_size * seq
    flops_per_token = 6 * params
    return {
        "recipe": spec.recipe_name(label),
        "layers_x_width": f"{cfg.n_layers} x {cfg.d_model}",
        "parameters": params,
        "batch": [batch_size, seq],
        "step_s": round(step_s, 4),
        "step_s_all": [round(t, 4) for t in times],
        "tokens_per_s": round(tokens / step_s),
        "peak_memory_gib": (
            round(torch.cuda.max_memory_allocated() / 2**30, 2) if device.type == "cuda" else None
        ),
        "model_tflops_per_s": round(flops_per_token * tokens / step_s / 1e12, 1),
        "max_steps": recipe.train.max_steps,
        "train_hours_per_cell": round(step_s * recipe.train.max_steps / 3600, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default="sipe-txl")
    ap.add_argument("--profile", default="paper")
    ap.add_argument("--recipes", nargs="+", default=["none", "position"])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--steps", type=int, default=10, help="timed steps per recipe")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=None, help="default: the profile's")
    args = ap.parse_args()
    device = torch.device(args.device)
    spec = load_spec(args.spec, args.profile)
    timed = {label: time_recipe(spec, label, args, device) for label in args.recipes}
    base = timed[spec.baseline] if spec.baseline in timed else next(iter(timed.values()))
    cells = {r.label: len(spec.recipe_seeds(r.label)) for r in spec.recipes}
    total_h = sum(n * timed.get(label, base)["train_hours_per_cell"] for label, n in cells.items())
    print(json.dumps({
        "spec": args.spec,
        "profile": args.profile,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor(),
        "torch": torch.__version__,
        "precision": "bf16 autocast",
        "recipes": timed,
        "cells": cells,
        "train_hours_all_cells": round(total_h, 1),
    }, indent=1))


if __name__ == "__main__":
    main()

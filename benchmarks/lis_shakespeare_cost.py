"""CPU cost per update and per learning-curve point of `structpe lis shakespeare --profile paper`.

The paper profile's real path (``shakespeare.train_model``'s loop: `train_steps` on Tiny Shakespeare
batches, AdamW, clip, bf16 autocast where native) for a few updates per model, timed with this
process's CPU time (one thread: other jobs on a shared machine do not count), after one warm-up
update; plus one validation-curve point (PPL at 256 over ``eval_chars``). Multiply by 5,000 updates
and 20 curve points to size a run (docs/lis.md, "The deciding runs").

    OMP_NUM_THREADS=1 python benchmarks/lis_shakespeare_cost.py --updates 3 --models lis alibi random
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time

import torch

from structpe.lis.commands import load_profile
from structpe.lis.shakespeare import CharData, ShakespeareConfig, curve_point, load_corpus, new_model
from structpe.lis.training import configure_optimizer, train_steps
from structpe.provenance import hardware


def cost(cfg: ShakespeareConfig, data: CharData, name: str, updates: int) -> dict:
    model = new_model(cfg, data, name)
    opt = configure_optimizer(model, cfg.lr, cfg.weight_decay)
    gen = torch.Generator().manual_seed(cfg.seed)
    times: list[float] = []

    def tick(done: int, losses: list[float]) -> None:
        times.append(time.process_time())

    run_cfg = dataclasses.replace(cfg, iters=updates + 1)
    times.append(time.process_time())
    train_steps(
        model,
        opt,
        run_cfg,
        lambda: (*data.batch(cfg.train_ctx, cfg.batch_size, gen), None),
        autocast_bf16=cfg.resolved_bf16(),
        after_step=tick,
    )
    per_update = [b - a for a, b in zip(times[1:], times[2:], strict=False)]  # the first is warm-up
    t0 = time.process_time()
    curve_point(model, data, dataclasses.replace(cfg, eval_every=1), 1, [0.0])
    return {
        "cpu_s_per_update": [round(t, 3) for t in per_update],
        "cpu_s_per_update_mean": round(sum(per_update) / len(per_update), 3),
        "cpu_s_per_curve_point": round(time.process_time() - t0, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["lis", "alibi", "random"])
    ap.add_argument("--dropout", nargs="+", type=float, default=[0.0, 0.1])
    ap.add_argument("--updates", type=int, default=3)
    ap.add_argument("--bf16", default="auto", choices=["auto", "true", "false"])
    args = ap.parse_args()
    torch.set_num_threads(1)
    values = load_profile("shakespeare", "paper", None)
    values["autocast_bf16"] = {"auto": "auto", "true": True, "false": False}[args.bf16]
    cfg = ShakespeareConfig(**values)
    data = CharData(load_corpus(), cfg.n_chars, cfg.train_frac)
    out = {
        "profile": "paper",
        "batch_size": cfg.batch_size,
        "d_model": cfg.d_model,
        "bf16": cfg.resolved_bf16(),
        "threads": 1,
        "clock": "process",
        "hardware": hardware(),
        "torch": torch.__version__,
        "load_before": os.getloadavg(),
        "runs": {},
    }
    for name in args.models:
        for p in args.dropout:
            out["runs"][f"{name}/dropout-{p}"] = cost(
                dataclasses.replace(cfg, dropout=p), data, name, args.updates
            )
    out["load_after"] = os.getloadavg()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

"""CPU cost per update and per learning-curve point of `structpe lis shakespeare --profile paper`.

The paper profile's real path (``shakespeare.train_model``'s loop: `train_steps` on Tiny Shakespeare
batches, AdamW, clip, bf16 autocast where native) for a few updates per model, timed with this
process's CPU time (one thread: other jobs on a shared machine do not count), after one warm-up
update; plus one validation-curve point (PPL at 256 over ``eval_chars``). Multiply by 5,000 updates
and 20 curve points to size a run (docs/lis.md, "The deciding runs"). ``attention`` times one
attention layer's forward + backward at the profile's shapes (SDPA with a causal mask, as the
models call it) with and without dropout, and the Bernoulli draw of its dropout mask alone: where
dropout's extra cost per update comes from.

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


def attention_cost(cfg: ShakespeareConfig, dropouts: list[float], rounds: int = 3) -> dict:
    """CPU seconds of one attention layer's forward + backward (the fastest of ``rounds``) at the
    profile's batch, heads and context, per dropout; and of drawing its Bernoulli mask alone."""
    import torch.nn.functional as F

    shape = (cfg.batch_size, cfg.n_heads, cfg.train_ctx, cfg.d_model // cfg.n_heads)
    q, k, v = (torch.randn(shape, requires_grad=True) for _ in range(3))
    out: dict[str, float] = {}
    for p in dropouts:
        times = []
        for _ in range(rounds):
            t0 = time.process_time()
            F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=p).sum().backward()
            times.append(time.process_time() - t0)
        out[f"sdpa_fwd_bwd_s/dropout-{p}"] = round(min(times), 3)
    t0 = time.process_time()
    torch.empty(*shape[:3], cfg.train_ctx).bernoulli_(0.9)
    out["bernoulli_mask_s"] = round(time.process_time() - t0, 3)
    return out


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
    out["attention"] = attention_cost(cfg, args.dropout)
    for name in args.models:
        for p in args.dropout:
            out["runs"][f"{name}/dropout-{p}"] = cost(
                dataclasses.replace(cfg, dropout=p), data, name, args.updates
            )
    out["load_after"] = os.getloadavg()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

"""Cost of each SiPE injection site in the Transformer-XL decoder, relative to ``none``.

    OMP_NUM_THREADS=2 python benchmarks/txl_injection.py                 # JSON on stdout
    python benchmarks/txl_injection.py --lengths 256 512 --batch 4 --reps 5 --device cuda

What is measured, per variant and sequence length, for one training step (forward + backward of
``loss`` with labels and tags, train mode, dropout on, optimizer excluded):

* ``step_ms``: median over ``--reps`` repetitions of the step time. Repetitions are interleaved
  (rep 1 of every variant, then rep 2 ...) so that machine-load drift hits all variants alike. On
  CPU this is the *process CPU time* (``time.process_time``, all threads of this process): on a
  shared machine wall time mostly measures the neighbours (we saw 2-3x swings between identical
  steps), CPU time does not count time spent descheduled. ``wall_ms`` is reported next to it. On
  CUDA it is wall time with the step bracketed by ``torch.cuda.synchronize``.
* ``peak_mib``: peak of live tensor memory allocated *during* the step, above what was live
  before it (model weights and inputs excluded). On CUDA: ``torch.cuda.max_memory_allocated``
  after ``reset_peak_memory_stats``. On CPU (no caching allocator stats): the step is run once
  under ``torch.profiler`` with ``profile_memory=True``; every allocation/free event is summed in
  time order and the maximum of that running total is the peak.
* ``largest_alloc_mib``: the largest single allocation (CPU profiler run / not tracked on CUDA),
  compared with the size one [B, H, L, L, d_head] tensor would have: ``no_BHLLd_tensor`` is true
  when no allocation of the step reaches it.

Ratios are variant / ``none`` at the same length. Issue-4 targets: input <= 1.03x, position <= 1.15x.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import torch
from torch.profiler import ProfilerActivity, profile

from structpe.models import SiPEConfig, build_model
from structpe.models.config import FAMILY_INJECTIONS

VARIANTS = FAMILY_INJECTIONS["txl"]


def make_model(injection: str, args, device: torch.device):
    torch.manual_seed(0)
    cfg = SiPEConfig(
        family="txl",
        injection=injection,
        vocab_size=args.vocab,
        d_model=args.d_model,
        n_layers=args.layers,
        n_heads=args.heads,
        dropout=0.1,
        attention_dropout=0.1,
    )
    return build_model(cfg).to(device).train()


def make_batch(length: int, args, device: torch.device):
    g = torch.Generator().manual_seed(length)
    ids = torch.randint(0, args.vocab, (args.batch, length), generator=g)
    t = torch.randint(0, 2, (args.batch, length), generator=g)
    n = torch.randint(0, 5, (args.batch, length), generator=g)
    cont = torch.rand(args.batch, length, generator=g) < 0.25  # ~25% continuation subwords
    t[cont], n[cont] = -100, -100
    return ids.to(device), t.to(device), n.to(device)


_autocast = {"bf16": False}


def step(model, data) -> None:
    ids, t, n = data
    model.zero_grad(set_to_none=True)
    with torch.autocast(ids.device.type, dtype=torch.bfloat16, enabled=_autocast["bf16"]):
        loss = model(ids, terminal_ids=t, nonterminal_ids=n, labels=ids).loss
    loss.backward()


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def cpu_memory(model, data) -> tuple[int, int]:
    """(peak bytes above the start, largest single allocation) of one step, from profiler events."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step(model, data)
    events = sorted(
        (e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"
    )
    live = peak = largest = 0
    for _, nbytes in events:
        live += nbytes
        peak = max(peak, live)
        largest = max(largest, nbytes)
    return peak, largest


def cuda_memory(model, data, device) -> tuple[int, int]:
    model.zero_grad(set_to_none=True)
    sync(device)
    base = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    step(model, data)
    sync(device)
    return torch.cuda.max_memory_allocated(device) - base, -1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[256, 512])
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--reps", type=int, default=5, help="timed repetitions per variant (interleaved)")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS))
    ap.add_argument(
        "--precision", choices=["fp32", "bf16"], default="fp32", help="bf16: autocast the forward"
    )
    args = ap.parse_args()
    _autocast["bf16"] = args.precision == "bf16"
    device = torch.device(args.device)
    variants = ["none"] + [v for v in args.variants if v != "none"]
    models = {v: make_model(v, args, device) for v in variants}
    d_head = args.d_model // args.heads
    results = []
    for length in args.lengths:
        data = make_batch(length, args, device)
        for _ in range(args.warmup):
            for v in variants:
                step(models[v], data)
        times = {v: [] for v in variants}
        walls = {v: [] for v in variants}
        clock = time.perf_counter if device.type == "cuda" else time.process_time
        for _ in range(args.reps):
            for v in variants:  # interleaved: rep r of every variant before rep r + 1
                sync(device)
                start, wall = clock(), time.perf_counter()
                step(models[v], data)
                sync(device)
                times[v].append(clock() - start)
                walls[v].append(time.perf_counter() - wall)
        bhlld = args.batch * args.heads * length * length * d_head * 4  # bytes of one fp32 [B,H,L,L,d]
        mem = {
            v: cuda_memory(models[v], data, device) if device.type == "cuda" else cpu_memory(models[v], data)
            for v in variants
        }
        base_t, base_m = statistics.median(times["none"]), mem["none"][0]
        for v in variants:
            t_med = statistics.median(times[v])
            row = {
                "length": length,
                "variant": v,
                "step_ms": round(1e3 * t_med, 2),
                "step_ms_all": [round(1e3 * t, 2) for t in times[v]],
                "wall_ms": round(1e3 * statistics.median(walls[v]), 2),
                "time_ratio": round(t_med / base_t, 3),
                "peak_mib": round(mem[v][0] / 2**20, 2),
                "peak_ratio": round(mem[v][0] / base_m, 3),
            }
            if mem[v][1] >= 0:
                row["largest_alloc_mib"] = round(mem[v][1] / 2**20, 2)
                row["no_BHLLd_tensor"] = mem[v][1] < bhlld
            results.append(row)
    print(
        json.dumps(
            {
                "benchmark": "txl_injection",
                "device": str(device) if device.type == "cpu" else torch.cuda.get_device_name(device),
                "threads": torch.get_num_threads(),
                "precision": args.precision,
                "step_clock": "wall (cuda.synchronize)" if device.type == "cuda" else "process CPU time",
                "torch": torch.__version__,
                "python": platform.python_version(),
                "config": {
                    "batch": args.batch,
                    "d_model": args.d_model,
                    "layers": args.layers,
                    "heads": args.heads,
                    "vocab": args.vocab,
                    "reps": args.reps,
                    "BHLLd_fp32_mib": {
                        L: round(args.batch * args.heads * L * L * d_head * 4 / 2**20, 1)
                        for L in args.lengths
                    },
                },
                "targets": {"input": "<= 1.03x time", "position": "<= 1.15x time"},
                "results": results,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()

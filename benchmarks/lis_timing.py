"""Training-step time: LISformer (J) vs the continuous-RoPE baseline (B) at context 1024.

LIS paper App. F.2 / Table 4 protocol: torch.manual_seed(42), dropout 0, one fixed batch, one warmup
step, then timed steps of forward + backward + AdamW update + zero_grad (clip 1.0). Here B and J
steps are *interleaved* and the median is reported, so load from other processes hits both alike.
J includes the content-derived line addresses and the causal two-term score (2L stacked keys).

``--backend flex`` gives J the block-sparse FlexAttention path (``structpe.lis.flex``) where it can
run: training on CUDA; on a CPU FlexAttention has no backward, so CPU training steps stay on SDPA
(``J_train_backend`` says which ran). Forward-only (inference) steps are timed too: B, J on SDPA
and J on compiled FlexAttention, interleaved, with the one-off compile time reported separately
(``flex_compile_s``) and the largest logit difference between J's two paths (``flex_max_abs_diff``).

Two overheads are reported per size:
* ``overhead_pct``          J's whole training step vs B's (the issue's figure);
* ``address_overhead_pct``  forward + backward of the address computation alone (line structure,
  local angles, content-derived line angles) as a share of B's step: the quantity the paper's F.2
  timings measure ("address-computation benchmarks, not training-step measurements of the
  corrected causal runs"). The rest of J's overhead is the causal two-term attention.

    python benchmarks/lis_timing.py                     # CPU defaults
    python benchmarks/lis_timing.py --device cuda --batch 16 --steps 10 --backend flex
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch

from structpe.lis.flex import use_flex
from structpe.lis.lisformer import LISformer, LISformerConfig
from structpe.lis.training import configure_optimizer

SIZES = {"d128-L4": (128, 4, 4), "d256-L4": (256, 4, 4), "d512-L6": (512, 6, 8)}


def make(pe: str, d: int, n_layers: int, n_heads: int, device: str, backend: str = "sdpa"):
    torch.manual_seed(42)
    cfg = LISformerConfig(
        vocab_size=65, n_layers=n_layers, n_heads=n_heads, d_model=d, dropout=0.0, pe=pe, attn_backend=backend
    )
    model = LISformer(cfg, newline_id=0).to(device)
    return model, configure_optimizer(model, 3e-4, 0.1)


CLOCKS = {"wall": time.perf_counter, "process": time.process_time}
_clock = {"fn": time.perf_counter}


def clock() -> float:
    """Wall time, or with ``--clock process`` this process's CPU time: on a shared CPU with one
    thread the latter does not count the time other jobs hold the cores."""
    return _clock["fn"]()


def step(model, opt, x, y, device: str) -> float:
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = clock()
    loss = model(x, y).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    if device == "cuda":
        torch.cuda.synchronize()
    return clock() - t0


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


@torch.no_grad()
def forward_step(model, x, device: str) -> tuple[float, torch.Tensor]:
    """One inference forward (no gradients): where FlexAttention runs on a CPU."""
    sync(device)
    t0 = clock()
    logits = model(x).logits
    sync(device)
    return clock() - t0, logits


def address_step(model, x, device: str) -> float:
    """Forward + backward of the address computation alone (what the paper's F.2 times)."""
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = clock()
    st = model.default_structure(x)
    _, _, k_addr, _ = model.addresses(model.tok_emb(x), st)
    k_addr.sum().backward()
    if device == "cuda":
        torch.cuda.synchronize()
    dt = clock() - t0
    model.zero_grad(set_to_none=True)
    return dt


def forward_timings(d: int, n_layers: int, n_heads: int, x, args) -> dict:
    """Inference forwards of B, J (SDPA) and J (compiled FlexAttention, same weights), interleaved."""
    fwd = {
        "rope": make("rope", d, n_layers, n_heads, args.device)[0].eval(),
        "lis": make("lis", d, n_layers, n_heads, args.device)[0].eval(),
        "lis_flex": make("lis", d, n_layers, n_heads, args.device, "flex")[0].eval(),
    }
    with torch.no_grad():
        if not use_flex("flex", torch.device(args.device)):
            return {"flex_forward": "unavailable (torch.compile of FlexAttention failed here)"}
    compile_s, flex_logits = forward_step(fwd["lis_flex"], x, args.device)  # compiles
    _, sdpa_logits = forward_step(fwd["lis"], x, args.device)
    times: dict[str, list[float]] = {k: [] for k in fwd}
    for m in fwd.values():
        forward_step(m, x, args.device)  # warmup
    for _ in range(args.steps):
        for k, m in fwd.items():
            times[k].append(forward_step(m, x, args.device)[0])
    b, j, jf = (statistics.median(times[k]) for k in ("rope", "lis", "lis_flex"))
    return {
        "fwd_B_ms": round(1000 * b, 1),
        "fwd_J_sdpa_ms": round(1000 * j, 1),
        "fwd_J_flex_ms": round(1000 * jf, 1),
        "fwd_J_sdpa_over_B": round(j / b, 3),
        "fwd_J_flex_over_B": round(jf / b, 3),
        "flex_compile_s": round(compile_s, 1),
        "flex_max_abs_diff": float((flex_logits - sdpa_logits).abs().max()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--output", default=None, help="also write the JSON here")
    ap.add_argument("--clock", default="wall", choices=list(CLOCKS), help="process: CPU time (shared CPUs)")
    ap.add_argument("--backend", default="sdpa", choices=["sdpa", "flex"], help="J's attention path")
    ap.add_argument("--no-forward", dest="forward", action="store_false", help="skip the inference timings")
    ap.add_argument("--line-every", type=int, default=40, help="a newline every N chars (Shakespeare ~ 40)")
    args = ap.parse_args()
    _clock["fn"] = CLOCKS[args.clock]
    if args.threads:
        torch.set_num_threads(args.threads)
    g = torch.Generator().manual_seed(42)
    x = torch.randint(1, 65, (args.batch, args.ctx + 1), generator=g)
    x[:, :: args.line_every] = 0  # newline id 0
    x, y = x[:, :-1].to(args.device), x[:, 1:].to(args.device)
    rows = {}
    load_before = os.getloadavg()
    for name in args.sizes:
        d, n_layers, n_heads = SIZES[name]
        models = {
            "rope": make("rope", d, n_layers, n_heads, args.device),
            "lis": make("lis", d, n_layers, n_heads, args.device, args.backend),
        }
        times: dict[str, list[float]] = {"rope": [], "lis": [], "address": []}
        for m, o in models.values():
            step(m, o, x, y, args.device)  # warmup
        address_step(models["lis"][0], x, args.device)
        for _ in range(args.steps):
            for pe, (m, o) in models.items():
                times[pe].append(step(m, o, x, y, args.device))
            times["address"].append(address_step(models["lis"][0], x, args.device))
        b, j, a = (statistics.median(times[k]) for k in ("rope", "lis", "address"))
        rows[name] = {
            "params_B": models["rope"][0].num_params(),
            "params_J": models["lis"][0].num_params(),
            "B_ms": round(1000 * b, 1),
            "J_ms": round(1000 * j, 1),
            "overhead_pct": round(100 * (j / b - 1), 1),
            "address_ms": round(1000 * a, 1),
            "address_overhead_pct": round(100 * a / b, 1),
            "J_train_backend": "flex" if use_flex(args.backend, torch.device(args.device)) else "sdpa",
        }
        if args.forward:
            rows[name].update(forward_timings(d, n_layers, n_heads, x, args))
        del models
    text = json.dumps(
        {
            "ctx": args.ctx,
            "batch": args.batch,
            "steps": args.steps,
            "device": args.device,
            "threads": args.threads,
            "torch": torch.__version__,
            "backend": args.backend,
            "clock": args.clock,
            "loadavg_before": [round(v, 2) for v in load_before],
            "loadavg_after": [round(v, 2) for v in os.getloadavg()],
            "machine": platform.processor() or platform.machine(),
            "results": rows,
        },
        indent=2,
    )
    print(text)
    if args.output:
        Path(args.output).write_text(text + "\n")


if __name__ == "__main__":
    main()

"""Training-step time: LISformer (J) vs the continuous-RoPE baseline (B) at context 1024.

LIS paper App. F.2 / Table 4 protocol: torch.manual_seed(42), dropout 0, one fixed batch, one warmup
step, then timed steps of forward + backward + AdamW update + zero_grad (clip 1.0). Here B and J
steps are *interleaved* and the median is reported, so load from other processes hits both alike.
J includes the content-derived line addresses and the causal two-term score (2L stacked keys).

Two overheads are reported per size:
* ``overhead_pct``          J's whole training step vs B's (the issue's figure);
* ``address_overhead_pct``  forward + backward of the address computation alone (line structure,
  local angles, content-derived line angles) as a share of B's step: the quantity the paper's F.2
  timings measure ("address-computation benchmarks, not training-step measurements of the
  corrected causal runs"). The rest of J's overhead is the causal two-term attention.

    python benchmarks/lis_timing.py                     # CPU defaults
    python benchmarks/lis_timing.py --device cuda --batch 16 --steps 10
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch

from structpe.lis.lisformer import LISformer, LISformerConfig, configure_optimizer

SIZES = {"d128-L4": (128, 4, 4), "d256-L4": (256, 4, 4), "d512-L6": (512, 6, 8)}


def make(pe: str, d: int, n_layer: int, n_head: int, device: str):
    torch.manual_seed(42)
    cfg = LISformerConfig(vocab_size=65, n_layer=n_layer, n_head=n_head, d_model=d, dropout=0.0, pe=pe)
    model = LISformer(cfg, newline_id=0).to(device)
    return model, configure_optimizer(model, 3e-4, 0.1)


def step(model, opt, x, y, device: str) -> float:
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    _, loss = model(x, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def address_step(model, x, device: str) -> float:
    """Forward + backward of the address computation alone (what the paper's F.2 times)."""
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    st = model.default_structure(x)
    _, _, k_addr = model.addresses(model.tok_emb(x), st)
    k_addr.sum().backward()
    if device == "cuda":
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    model.zero_grad(set_to_none=True)
    return dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--output", default=None, help="also write the JSON here")
    ap.add_argument("--line-every", type=int, default=40, help="a newline every N chars (Shakespeare ~ 40)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    g = torch.Generator().manual_seed(42)
    x = torch.randint(1, 65, (args.batch, args.ctx + 1), generator=g)
    x[:, :: args.line_every] = 0  # newline id 0
    x, y = x[:, :-1].to(args.device), x[:, 1:].to(args.device)
    rows = {}
    for name in args.sizes:
        d, n_layer, n_head = SIZES[name]
        models = {pe: make(pe, d, n_layer, n_head, args.device) for pe in ("rope", "lis")}
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
        }
        del models
    text = json.dumps(
        {
            "ctx": args.ctx,
            "batch": args.batch,
            "steps": args.steps,
            "device": args.device,
            "threads": args.threads,
            "torch": torch.__version__,
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

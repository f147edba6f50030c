"""Is bf16 autocast accurate for the LIS Shakespeare models? fp32 against bf16, same init and batches.

    python benchmarks/lis_bf16_check.py --model lis --updates 100 --threads 1 > out.json

Trains the paper-size model (LIS App. F.1: 4 layers, 4 heads, d 128, batch 64 x 256, AdamW 3e-4,
weight decay 0.1, clip 1.0) twice from the same initial weights on the same batches through the
training loop the diagnostic uses (``structpe.lis.training.train_steps``), once in float32 and
once under bf16 autocast, and prints JSON: the largest relative gap between the two loss curves
(means over windows of ``--window`` updates), validation PPL at 256 characters after training,
and CPU seconds per update of each. docs/lis.md reports it; the ``paper`` profile's
``autocast_bf16: auto`` rests on it.
"""

from __future__ import annotations

import argparse
import json
import time
import types

import torch

from structpe.lis.lisformer import LISformer, LISformerConfig
from structpe.lis.shakespeare import MODEL_SCHEMES, CharData, evaluate_ppl, load_corpus
from structpe.lis.training import train_steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="lis", choices=list(MODEL_SCHEMES))
    ap.add_argument("--updates", type=int, default=100)
    ap.add_argument("--window", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--data", default=None, help="data root (default $STRUCTPE_DATA / shared/data)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    data = CharData(load_corpus(args.data), 1_000_000, 0.9)
    cfg = types.SimpleNamespace(iters=args.updates, lr=3e-4, warmup=0, grad_clip=1.0)
    pe, instance_alibi = MODEL_SCHEMES[args.model]
    runs = {}
    for bf16 in (False, True):
        torch.manual_seed(0)
        mcfg = LISformerConfig(vocab_size=data.vocab_size, pe=pe, instance_alibi=instance_alibi)
        model = LISformer(mcfg, newline_id=data.newline_id)
        opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.1)
        gen = torch.Generator().manual_seed(0)
        c0 = time.process_time()
        batches = lambda gen=gen: (*data.batch(256, 64, gen), None)  # noqa: E731
        losses = train_steps(model, opt, cfg, batches, autocast_bf16=bf16)
        cpu = time.process_time() - c0
        model.eval()
        with torch.no_grad():
            ppl = evaluate_ppl(model, data.val, 256, 16384, 8)
        runs["bf16" if bf16 else "fp32"] = {
            "losses": losses, "cpu_s_per_update": cpu / args.updates, "val_ppl_256": ppl
        }
    a, b, w = runs["fp32"]["losses"], runs["bf16"]["losses"], args.window
    gaps = [abs(sum(b[i : i + w]) - sum(a[i : i + w])) / sum(a[i : i + w])
            for i in range(0, len(a) - w + 1, w)]
    print(json.dumps({
        "model": args.model,
        "updates": args.updates,
        "threads": args.threads,
        "max_window_relative_gap": max(gaps),
        "final_window_loss": {k: sum(r["losses"][-w:]) / w for k, r in runs.items()},
        "val_ppl_256": {k: r["val_ppl_256"] for k, r in runs.items()},
        "cpu_s_per_update": {k: r["cpu_s_per_update"] for k, r in runs.items()},
    }, indent=1))


if __name__ == "__main__":
    main()

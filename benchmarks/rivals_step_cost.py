"""Training step cost of the parser-free rivals (gpt2, tpt, treereg) against `none`, at a study
profile's model size, on real prepared batches (their tags drive the tpt / treereg losses).

    nice -n 15 env OMP_NUM_THREADS=1 python benchmarks/rivals_step_cost.py \\
        --dataset runs/sipe-txl-cpu-mini/data/merged --profile cpu-mini --steps 10 \\
        > benchmarks/results/rivals_step_cost-cpu-mini.json

One step = forward (training mode, labels and tags), backward, AdamW, float32 eager, one thread.
The recipes are the study's cells (``structpe.study.spec``: recipe, profile and per-recipe
overrides; the vocabulary from the prepared data's tokenizer). Rounds are interleaved (step i of
every recipe, then step i + 1) so that load from the machine's other users hits all alike; the
JSON holds each recipe's median seconds per step and its ratio to `none`'s, and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch

from structpe.models import SiPEConfig, build_model
from structpe.provenance import hardware
from structpe.study.spec import load_spec
from structpe.train.collators import collator_for
from structpe.train.prepare import load_prepared
from structpe.train.recipe import load_recipe

RECIPES = ("none", "gpt2", "tpt", "treereg")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", required=True, help="a `structpe prepare` folder (the study's data/merged)")
    ap.add_argument("--profile", default="cpu-mini", help="sipe-txl profile whose model size is timed")
    ap.add_argument("--steps", type=int, default=10, help="timed steps per recipe (after one warm-up)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    spec = load_spec("sipe-txl", args.profile)
    dd, meta = load_prepared(args.dataset)
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast.from_pretrained(meta["tokenizer"])
    vocab = len(tok)
    batch_size = None
    models, opts = {}, {}
    for label in RECIPES:
        r = load_recipe(spec.recipe_name(label), spec.cell_overrides(label))
        batch_size = r.train.batch_size
        ids = {"pad_token_id": tok.pad_token_id, "bos_token_id": meta.get("bos_token_id"),
               "eos_token_id": meta.get("eos_token_id")}
        cfg = SiPEConfig(**{**r.model, "vocab_size": vocab, **ids})
        torch.manual_seed(0)
        models[label] = build_model(cfg).train()
        opts[label] = torch.optim.AdamW(models[label].parameters(), lr=1e-3)
    collate = collator_for("causal", tok, 0.15, vocab, seed=0)
    rows = dd["train"]
    keep = ("input_ids", "terminal_ids", "nonterminal_ids")  # no DEPREL table in these recipes
    batches = [collate([{k: rows[i][k] for k in keep} for i in range(b * batch_size, (b + 1) * batch_size)])
               for b in range(args.steps + 1)]
    times: dict[str, list[float]] = {label: [] for label in RECIPES}
    load_before = os.getloadavg()
    for i, batch in enumerate(batches):
        for label in RECIPES:
            t0 = time.perf_counter()
            out = models[label](**batch)
            out.loss.backward()
            opts[label].step()
            opts[label].zero_grad(set_to_none=True)
            if i:  # the first step warms up
                times[label].append(time.perf_counter() - t0)
    med = {label: statistics.median(ts) for label, ts in times.items()}
    json.dump({
        "profile": args.profile,
        "batch": [batch_size, int(batches[0]["input_ids"].shape[1])],
        "steps": args.steps,
        "seconds_per_step": med,
        "relative_to_none": {label: med[label] / med["none"] for label in RECIPES},
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "hardware": hardware(),
        "torch": torch.__version__,
    }, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())

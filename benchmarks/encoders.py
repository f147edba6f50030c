"""Forward+backward throughput of the SiPE encoders, printed as JSON.

Two questions, each answered inside one run so both sides see the same machine state:

1. ours vs transformers: our encoder with ``injection="none"`` against the ``transformers`` model
   it was converted from (same config, same weights), MLM loss on the same batch.
   ``ratio = ours_tokens_per_s / hf_tokens_per_s`` (target >= 1.0).
2. SiPE overhead: each SiPE variant against its own family's ``none`` base, with tags on ~70 % of
   the tokens and 15 % MLM masking, so the prior, the projections and the auxiliary tag loss all
   run. ``overhead = variant_seconds / base_seconds`` (target <= 1.05).

Timing: every model is warmed up, then the models of one family are timed in interleaved rounds
(one step each per round, so drift hits all of them alike). On CPU the clock is the process CPU
time (``time.process_time``; run with OMP_NUM_THREADS=1 so one thread does all the work): on a
machine shared with other jobs, wall time mostly measures the scheduler, CPU time the work.
On CUDA it is wall time after a synchronize. Ratios use the fastest step of each model; the
ratios of medians are printed next to them so the spread is visible.

    OMP_NUM_THREADS=1 python benchmarks/encoders.py                 # all families, CPU defaults
    python benchmarks/encoders.py --family deberta --device cuda --batch-size 32 --seq-len 512
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time

import torch

from structpe.models.config import INPUT_VARIANTS
from structpe.models.deberta import from_hf as deberta_from_hf
from structpe.models.modernbert import from_hf as modernbert_from_hf
from structpe.models.roberta import from_hf as roberta_from_hf

N_DEPRELS = 40


def hf_model(family: str, args):
    """A randomly initialised transformers MLM of the benchmark size, dropout off."""
    import transformers as tf

    common = dict(
        vocab_size=args.vocab,
        hidden_size=args.d_model,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        intermediate_size=args.d_ff,
    )
    if family == "roberta":
        cfg = tf.RobertaConfig(
            **common,
            max_position_embeddings=args.seq_len + 2,
            pad_token_id=1,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
        )
        return tf.RobertaForMaskedLM(cfg)
    if family == "deberta":
        cfg = tf.DebertaV2Config(
            **common,
            max_position_embeddings=512,
            relative_attention=True,
            position_buckets=256,
            max_relative_positions=-1,
            pos_att_type=["p2c", "c2p"],
            share_att_key=True,
            norm_rel_ebd="layer_norm",
            position_biased_input=False,
            type_vocab_size=0,
            pad_token_id=0,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
        )
        return tf.DebertaV2ForMaskedLM(cfg)
    cfg = tf.ModernBertConfig(
        **common, pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2
    )
    return tf.ModernBertForMaskedLM(cfg)


def variants(family: str) -> dict[str, dict]:
    if family == "roberta":
        out = {}
        for name, kw in INPUT_VARIANTS.items():
            kw = {"injection": "input", **kw}
            if "dr" in kw["prior_parts"]:
                kw["n_deprels"] = N_DEPRELS
            out[name] = kw
        return out
    return {"input": {"injection": "input"}, "position": {"injection": "position"}}


def batch(args, device) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    shape = (args.batch_size, args.seq_len)
    ids = torch.randint(5, args.vocab, shape, generator=g)
    tagged = torch.rand(shape, generator=g) < 0.7
    masked = torch.rand(shape, generator=g) < 0.15
    out = {
        "input_ids": ids,
        "attention_mask": torch.ones(shape, dtype=torch.long),
        "labels": torch.where(masked, ids, -100),
        "terminal_ids": torch.where(tagged, torch.randint(0, 2, shape, generator=g), -100),
        "nonterminal_ids": torch.where(tagged, torch.randint(0, 5, shape, generator=g), -100),
        "deprel_ids": torch.where(tagged, torch.randint(0, N_DEPRELS, shape, generator=g), -100),
    }
    return {k: v.to(device) for k, v in out.items()}


def step_fn(model, inputs: dict, device: str):
    def step() -> None:
        model.zero_grad(set_to_none=True)
        model(**inputs).loss.backward()
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    return step


def time_interleaved(steps: dict, warmup: int, repeats: int, clock) -> dict[str, dict[str, float]]:
    """Fastest and median seconds per step of each function, timed in interleaved rounds."""
    for fn in steps.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {name: [] for name in steps}
    order = list(steps.items())
    for r in range(repeats):
        for name, fn in order if r % 2 == 0 else order[::-1]:  # alternate the order: no position bias
            start = clock()
            fn()
            times[name].append(clock() - start)
    return {name: {"min": min(t), "median": statistics.median(t)} for name, t in times.items()}


def bench_family(family: str, args, device: str) -> dict:
    from_hf = {"roberta": roberta_from_hf, "deberta": deberta_from_hf, "modernbert": modernbert_from_hf}[
        family
    ]
    torch.manual_seed(0)
    hf = hf_model(family, args).to(device).train()
    data = batch(args, device)
    plain = {k: data[k] for k in ("input_ids", "attention_mask", "labels")}
    tokens = args.batch_size * args.seq_len

    # 1. ours (injection none, same weights) vs transformers
    ours = from_hf(hf).to(device).train()
    with torch.no_grad():
        hf.eval(), ours.eval()
        diff = (hf(**plain).logits - ours(**plain).logits).abs().max().item()
        hf.train(), ours.train()
    clock = time.perf_counter if device.startswith("cuda") else time.process_time
    t = time_interleaved(
        {"transformers": step_fn(hf, plain, device), "ours": step_fn(ours, plain, device)},
        args.warmup,
        args.repeats,
        clock,
    )
    vs_hf = {
        "hf_attn_implementation": hf.config._attn_implementation,
        "max_abs_logit_diff": diff,
        "transformers_tokens_per_s": tokens / t["transformers"]["min"],
        "ours_tokens_per_s": tokens / t["ours"]["min"],
        "ratio": t["transformers"]["min"] / t["ours"]["min"],
        "ratio_of_medians": t["transformers"]["median"] / t["ours"]["median"],
    }

    # 2. every SiPE variant vs the none base, with tags and the auxiliary loss
    models = {"none": ours}
    for name, kw in variants(family).items():
        models[name] = from_hf(hf, **kw).to(device).train()
    steps = {}
    for name, model in models.items():
        inputs = dict(data)
        if not model.config.n_deprels:
            inputs.pop("deprel_ids")
        steps[name] = step_fn(model, inputs, device)
    t = time_interleaved(steps, args.warmup, args.repeats, clock)
    overhead = {
        name: {
            "tokens_per_s": tokens / t[name]["min"],
            "overhead": t[name]["min"] / t["none"]["min"],
            "overhead_of_medians": t[name]["median"] / t["none"]["median"],
        }
        for name in models
        if name != "none"
    }
    return {
        "vs_transformers": vs_hf,
        "base_tokens_per_s": tokens / t["none"]["min"],
        "sipe_variants": overhead,
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--family", choices=["roberta", "deberta", "modernbert", "all"], default="all")
    p.add_argument("--device", default="cpu")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--d-ff", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeats", type=int, default=12)
    args = p.parse_args(argv)
    families = ["roberta", "deberta", "modernbert"] if args.family == "all" else [args.family]
    report = {
        "benchmark": "encoders forward+backward (MLM loss), fastest of interleaved steps",
        "device": args.device,
        "clock": "wall (perf_counter, synchronized)"
        if args.device.startswith("cuda")
        else "CPU (process_time)",
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "shape": {
            k: getattr(args, k)
            for k in ("batch_size", "seq_len", "d_model", "layers", "heads", "d_ff", "vocab")
        },
        "timing": {"warmup": args.warmup, "repeats": args.repeats},
        "families": {},
    }
    for family in families:
        report["families"][family] = bench_family(family, args, args.device)
        print(f"done {family}", file=sys.stderr)
    json.dump(report, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()

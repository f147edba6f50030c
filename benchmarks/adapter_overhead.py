"""Step-time overhead and extra parameters of the SiPE adapter on Hugging Face rotary LMs, as JSON.

For Llama and GPT-NeoX of the benchmark size (random weights, built here): forward + backward of
the causal LM loss for

  base       the ``transformers`` model alone (its own loss), tags not used
  none       + the adapter with ``injection="none"``: the adapter's forward path without SiPE
             (a control: ``position / none`` is the cost of SiPE itself)
  position   + SiPE adapter, rotary phase offset, tags on ~70 % of the tokens, LM + tag losses
  input      + SiPE adapter, prior on the embeddings, same tags and losses

each twice: every base weight trainable (``full``) and with PEFT LoRA on the base (``lora``,
r = 8 on every linear layer; the base of that pair is the LoRA model). ``overhead = adapted / base``
seconds per step (target <= 1.05). ``extra_parameters`` counts the adapter's own parameters
(tag tables, W_delta, tag head) against the base's.

Timing as in ``encoders.py`` (same ``time_interleaved``): warm-up, then interleaved rounds so drift
hits every model alike; on CPU the clock is process CPU time (run with OMP_NUM_THREADS=1 on a shared
machine), on CUDA wall time after a synchronize. Ratios use the fastest step; ratios of medians
are printed beside them.

    OMP_NUM_THREADS=1 python benchmarks/adapter_overhead.py --out benchmarks/results/adapter_overhead-cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import torch
from encoders import time_interleaved  # the shared interleaved timer (benchmarks/encoders.py)

from structpe.adapters.sipe import add_sipe, apply_lora


def base_model(arch: str, args):
    import transformers as tf

    common = dict(
        vocab_size=args.vocab,
        hidden_size=args.d_model,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        intermediate_size=args.d_ff,
        max_position_embeddings=max(512, args.seq_len),
    )
    torch.manual_seed(0)
    if arch == "llama":
        return tf.LlamaForCausalLM(tf.LlamaConfig(**common, tie_word_embeddings=True))
    return tf.GPTNeoXForCausalLM(tf.GPTNeoXConfig(**common, attention_dropout=0.0, hidden_dropout=0.0))


def batch(args, device: str) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    shape = (args.batch_size, args.seq_len)
    ids = torch.randint(0, args.vocab, shape, generator=g)
    tagged = torch.rand(shape, generator=g) < 0.7
    t = torch.where(tagged, torch.randint(0, 2, shape, generator=g), -100)
    n = torch.where(tagged, torch.randint(0, 5, shape, generator=g), -100)
    return {k: v.to(device) for k, v in {"input_ids": ids, "terminal_ids": t, "nonterminal_ids": n}.items()}


def step_fn(model, inputs: dict, device: str, hf: bool):
    ids = inputs["input_ids"]

    def step() -> None:
        model.zero_grad(set_to_none=True)
        out = model(input_ids=ids, labels=ids) if hf else model(**inputs, labels=ids)
        out.loss.backward()
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    return step


def bench(arch: str, args, device: str) -> dict:
    data = batch(args, device)
    clock = time.perf_counter if device.startswith("cuda") else time.process_time
    out: dict = {}
    for training in ("full", "lora"):
        models, steps = {}, {}
        for name in ("base", "none", "position", "input"):
            base = base_model(arch, args)
            if name == "base":
                model = base
                if training == "lora":
                    from peft import LoraConfig, get_peft_model

                    model = get_peft_model(base, LoraConfig(r=8, lora_alpha=16, target_modules="all-linear"))
            else:
                model = add_sipe(base, name)
                if training == "lora":
                    model = apply_lora(model, {"r": 8, "lora_alpha": 16})
            models[name] = model.to(device).train()
            steps[name] = step_fn(models[name], data, device, hf=name == "base")
        t = time_interleaved(steps, args.warmup, args.repeats, clock)
        tokens = args.batch_size * args.seq_len
        out[training] = {
            "base_tokens_per_s": tokens / t["base"]["min"],
            "trainable_parameters": {
                n: sum(p.numel() for p in m.parameters() if p.requires_grad) for n, m in models.items()
            },
            **{
                name: {
                    "overhead": t[name]["min"] / t["base"]["min"],
                    "overhead_of_medians": t[name]["median"] / t["base"]["median"],
                }
                for name in ("none", "position", "input")
            },
            "position_over_none": t["position"]["min"] / t["none"]["min"],
        }
    n_base = sum(p.numel() for p in base_model(arch, args).parameters())
    extra = {}
    for name in ("position", "input"):
        adapted = add_sipe(base_model(arch, args), name)
        n = sum(p.numel() for p in adapted.adapter_state_dict().values())
        extra[name] = {"parameters": n, "fraction_of_base": n / n_base}
    out["base_parameters"] = n_base
    out["extra_parameters"] = extra
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arch", choices=["llama", "gpt_neox", "all"], default="all")
    p.add_argument("--device", default="cpu")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--d-ff", type=int, default=688)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--out", help="also write the JSON here (atomically)")
    args = p.parse_args(argv)
    archs = ["llama", "gpt_neox"] if args.arch == "all" else [args.arch]
    report = {
        "benchmark": "SiPE adapter vs base: forward+backward (causal LM loss), fastest of interleaved steps",
        "device": args.device,
        "clock": "wall (perf_counter, synchronized)"
        if args.device.startswith("cuda")
        else "CPU (process_time)",
        "torch": torch.__version__,
        "transformers": __import__("transformers").__version__,
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "load_average": os.getloadavg(),
        "shape": {
            k: getattr(args, k)
            for k in ("batch_size", "seq_len", "d_model", "layers", "heads", "d_ff", "vocab")
        },
        "timing": {"warmup": args.warmup, "repeats": args.repeats},
        "archs": {},
    }
    for arch in archs:
        report["archs"][arch] = bench(arch, args, args.device)
        print(f"done {arch}", file=sys.stderr)
    text = json.dumps(report, indent=2) + "\n"
    if args.out:
        tmp = Path(args.out + ".tmp")
        tmp.write_text(text)
        tmp.replace(args.out)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()

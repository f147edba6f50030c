"""CPU training throughput of the Transformer-XL recipes: precision, torch.compile and threads.

    nice -n 10 python benchmarks/train_throughput.py > benchmarks/results/train_throughput-cpu.json
    python benchmarks/train_throughput.py --models quickstart --settings fp32 bf16 --loss-steps 0
    python benchmarks/train_throughput.py --precision bf16 --threads 1 --rounds 5 --loss-steps 0 \
        --injections none position input lis_tree gpt2      # the injections' cost and the anchor

Every (model, injection, setting) has its own model and optimizer, built first; then round 1 runs
each of them in turn, then round 2 ..., so that the machine's other users hit every injection and
setting alike (a slow minute cannot land on one injection only). ``gpt2`` is transformers'
``GPT2LMHeadModel`` at the TXL's size (layers, d_model, heads, d_ff, vocabulary, no dropout, tied
head), trained by the same step: the anchor that says whether the eager code is on par. The JSON's
``tokens_per_cpu_s`` (per injection, of the ``--precision`` setting at the quickstart size) divides
tokens by this process's CPU time, which other processes on the machine do not inflate;
``matmul_peak_gflops`` is a bf16 (fp32 for ``--precision fp32``) 2048 x 256 x 1024 matmul timed in
this process at ``--threads``, and ``achieved_gflops.none`` the `none` step's matmul FLOPs (forward
and backward, ``torch.utils.flop_counter``) over its median CPU time: the share of the peak a step
reaches. ``injection_over_none`` is the median over rounds of each injection's step time over
`none`'s in the same round.

One training step = what the ``Trainer`` does per step: forward under ``torch.autocast`` (bf16
settings), backward, grad-norm clipping, AdamW. Inputs are random ids and tags of the packed
length with an all-ones attention mask, or, with ``--real-batches``, the quickstart (or ``tiny``)
model steps through the first batches of ``--dataset`` (packed rows with their padding and tags). The two
disagree for ``torch.compile``: on the quickstart's prepared Brown the compiled bf16 step was
much slower than on random batches (docs/pretraining.md). The data path (reading prepared rows
from Arrow and collating them) is timed per batch in the loss check.

Settings (``--settings``; ``--precision P`` alone runs just ``P``): ``fp32`` (eager, float32), ``bf16``
(autocast to bfloat16: native on CPUs with AVX-512 BF16 / AMX, emulated elsewhere; ``native_bf16`` in
the JSON says which), ``bf16-fast`` (``train.fast_bf16``: bf16 parameters and activations, float32
master weights in a fused AdamW, no autocast), ``compile`` /
``compile-bf16`` (``torch.compile``, inductor; compile time reported apart), each at ``--threads``
intra-op threads (``-t1`` suffix: 1 thread); ``prev``: fp32 eager with the dropout (0.1) and
vocabulary (8,192) that the quickstart used before, so ``1 / speedup_vs_fp32`` of ``prev`` is what
the current defaults gained (ids are drawn below ``--vocab``, valid for both). Every setting has its
own model (same initial weights); the rounds are interleaved (round 1 of every setting, then round 2
...) so that load from the machine's other users hits all settings alike. Reported per setting:
tokens/s from wall time (median over rounds) and the ratio to ``fp32`` at ``--threads``, measured in
the same round; and the load average before and after. ``--clock process`` times this process's
CPU time instead of the wall clock (on a machine shared with other jobs).

Models: ``quickstart`` (the size ``structpe quickstart`` trains), ``tiny`` (the packaged
``txl/*-tiny`` recipe) and ``txl/position-small`` (batch 4 x 512 here: tokens/s barely depends on
the batch, and a 32 x 512 step takes minutes on 2 cores).

Accuracy (``--loss-steps N``): for the quickstart model, fp32 and each ``--loss-settings`` (default
bf16 and compile-bf16) train N steps from the same
weights on the same batches of real prepared data (``--dataset``, else a small UD EWT gold set
built on the fly) with the quickstart's learning-rate schedule; the JSON holds both loss curves
(means over windows of 25 steps), their largest relative gap and the relative gap of the final
validation loss. bf16 is a default only where that gap stays within 1%.

Which ops run in bfloat16: the JSON lists the output dtype of every module type in one autocast
forward (``autocast_dtypes``): CPU autocast runs linear / matmul / attention in bf16 and keeps
layer norm, softmax and the losses (logits are upcast before cross-entropy) in float32.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from structpe.hardware import native_bf16
from structpe.models import SiPEConfig, build_model
from structpe.quickstart.config import QuickstartConfig
from structpe.syntax.hexatags import N_NONTERMINALS, N_TERMINALS
from structpe.train.master_weights import MasterWeightAdamW
from structpe.train.recipe import load_recipe

QS = QuickstartConfig()
MODELS = {
    # name: (recipe, model overrides, batch size, sequence length)
    "quickstart": (
        "txl/{injection}-tiny",
        {"d_model": QS.d_model, "n_layers": QS.n_layers, "n_heads": QS.n_heads, "d_ff": QS.d_ff,
         "dropout": QS.dropout, "attention_dropout": QS.dropout},
        QS.batch_size,
        QS.seq_len,
    ),
    "tiny": ("txl/{injection}-tiny", {}, 16, 128),  # the recipe as packaged (the old quickstart size)
    "position-small": ("txl/position-small", {}, 4, 512),
}
SETTINGS = ("fp32", "bf16", "bf16-fast", "compile", "compile-bf16", "fp32-t1", "bf16-t1", "prev")
PRECISIONS = ("fp32", "bf16", "bf16-fast")  # ``--precision``: the setting the summary keys report
ANCHOR = "gpt2"  # transformers' GPT-2 at the TXL's size, in place of an injection
PREV = {"dropout": 0.1, "attention_dropout": 0.1, "vocab_size": 8192}  # ``prev``: the earlier quickstart


def model_config(name: str, injection: str, vocab: int) -> tuple[SiPEConfig, int, int]:
    recipe_name, extra, batch, seq = MODELS[name]
    recipe = load_recipe(recipe_name.format(injection=injection))
    kw = {**recipe.model, **extra, "vocab_size": vocab, "injection": injection}
    return SiPEConfig(**kw), batch, seq


def real_batches(dataset: str, batch: int, n: int) -> tuple[list[dict[str, torch.Tensor]], int]:
    """The first ``n`` batches of a prepared dataset's train split, collated as the Trainer does
    (packed rows, their padding and tags): what a real step sees, unlike ``random_batch``; and the
    dataset's vocabulary size."""
    from structpe.train.collators import CausalCollator
    from structpe.train.prepare import load_prepared

    dd, meta = load_prepared(dataset)
    collate = CausalCollator(pad_token_id=meta["pad_token_id"])
    rows = [collate([dd["train"][j] for j in range(i * batch, (i + 1) * batch)]) for i in range(n)]
    return rows, meta["vocab_size"]


def random_batch(batch: int, seq: int, vocab: int, seed: int) -> dict[str, torch.Tensor]:
    """Ids and tags shaped like a packed batch: tags on about 3 of 4 positions (first subwords)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (batch, seq), generator=g)
    tagged = torch.rand(batch, seq, generator=g) < 0.75
    term = torch.where(tagged, torch.randint(0, N_TERMINALS, (batch, seq), generator=g), -100)
    nonterm = torch.where(tagged, torch.randint(0, N_NONTERMINALS, (batch, seq), generator=g), -100)
    return {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "terminal_ids": term,
        "nonterminal_ids": nonterm,
        "labels": ids.clone(),
    }


def gpt2_model(cfg: SiPEConfig, seq: int) -> torch.nn.Module:
    """transformers' GPT-2 with the TXL's layers, width, heads, MLP, vocabulary and dropout (tied head)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    return GPT2LMHeadModel(GPT2Config(
        vocab_size=cfg.vocab_size, n_positions=seq, n_embd=cfg.d_model, n_layer=cfg.n_layers,
        n_head=cfg.n_heads, n_inner=cfg.d_ff, resid_pdrop=cfg.dropout, embd_pdrop=cfg.dropout,
        attn_pdrop=cfg.attention_dropout, activation_function="relu", bos_token_id=None, eos_token_id=None,
    ))


class Runner:
    """One model + optimizer trained with one setting (``gpt2``: the anchor model, same step)."""

    def __init__(self, cfg: SiPEConfig, setting: str, threads: int, lr: float = 1e-3,
                 anchor_seq: int | None = None) -> None:
        if setting == "prev":
            cfg = SiPEConfig(**{**cfg.to_dict(), **PREV})
        torch.manual_seed(0)
        self.anchor = anchor_seq is not None
        self.model = (gpt2_model(cfg, anchor_seq) if self.anchor else build_model(cfg)).train()
        self.fast = setting == "bf16-fast"
        if self.fast:  # train.fast_bf16: the model in bf16, float32 masters in the optimizer
            self.model.to(torch.bfloat16)
            self.opt = MasterWeightAdamW(self.model.parameters(), lr=lr, weight_decay=0.01, fused=True)
        else:
            self.opt = torch.optim.AdamW(self.model.parameters(), lr=lr, weight_decay=0.01)
        self.bf16 = "bf16" in setting and not self.fast
        self.threads = 1 if setting.endswith("-t1") else threads
        self.forward = torch.compile(self.model) if setting.startswith("compile") else self.model
        self.compile_s = 0.0

    def loss(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """(training loss, LM loss); the anchor sees the ids, mask and labels only."""
        if self.anchor:
            keys = ("input_ids", "attention_mask", "labels")
            out = self.forward(**{k: batch[k] for k in keys})
            return out.loss, out.loss
        out = self.forward(**batch)
        return out.loss, out.lm_loss

    def step(self, batch: dict[str, torch.Tensor]) -> float:
        torch.set_num_threads(self.threads)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16):
            loss, lm_loss = self.loss(batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.model.zero_grad(set_to_none=True)  # bf16-fast: the model's own gradients
        return float(lm_loss.detach())

    def matmul_flops(self, batch: dict[str, torch.Tensor]) -> int:
        """FLOPs of one step's forward and backward (matmuls, attention), counted by torch."""
        from torch.utils.flop_counter import FlopCounterMode

        counter = FlopCounterMode(display=False)
        with counter, torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16):
            loss, _ = self.loss(batch)
            loss.backward()
        self.model.zero_grad(set_to_none=True)
        return counter.get_total_flops()


def matmul_peak_gflops(threads: int, dtype: torch.dtype, repeats: int = 30) -> float:
    """A 2048 x 256 x 1024 matmul (the quickstart's MLP shape, batch x tokens folded) in ``dtype``:
    the best GFLOP/s over ``repeats`` calls, timed by this process's CPU time."""
    torch.set_num_threads(threads)
    a, b = torch.randn(2048, 256, dtype=dtype), torch.randn(256, 1024, dtype=dtype)
    for _ in range(5):
        a @ b
    best = float("inf")
    for _ in range(repeats):
        t0 = time.process_time()
        for _ in range(5):
            a @ b
        best = min(best, (time.process_time() - t0) / 5)
    return 2 * 2048 * 256 * 1024 / best / 1e9


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo) and whether it has AVX-512 BF16 / AMX-BF16."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor()
    name = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")), "?")
    flags = next((ln.split(":", 1)[1].split() for ln in info.splitlines() if ln.startswith("flags")), [])
    return f"{name} ({', '.join(f for f in ('avx512_bf16', 'amx_bf16') if f in flags) or 'no native bf16'})"


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def throughput(name: str, injections: list[str], args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every injection (and ``gpt2``) x setting of one model size, interleaved round by round."""
    cfgs = {inj: model_config(name, "none" if inj == ANCHOR else inj, args.vocab) for inj in injections}
    _, batch, seq = cfgs[injections[0]]
    if args.real_batches and name in ("quickstart", "tiny"):
        batches, vocab = real_batches(args.dataset, batch, args.warmup + args.steps)
        cfgs = {k: (SiPEConfig(**{**c[0].to_dict(), "vocab_size": vocab}), *c[1:]) for k, c in cfgs.items()}
    else:
        batches = [random_batch(batch, seq, args.vocab, seed=1)]
    settings = [s for s in args.settings if name in args.compile_models or not s.startswith("compile")]
    settings = [s for s in settings if s not in args.skip.get(name, ())]
    runners: dict[tuple[str, str], Runner] = {}
    for inj in injections:
        for s in settings:
            r = Runner(cfgs[inj][0], s, args.threads, anchor_seq=seq if inj == ANCHOR else None)
            t0 = time.perf_counter()
            for i in range(args.warmup):  # first steps: compilation, allocator and oneDNN warm-up
                r.step(batches[i % len(batches)])
            r.compile_s = round(time.perf_counter() - t0, 1)
            runners[inj, s] = r
    wall: dict[tuple[str, str], list[float]] = {k: [] for k in runners}
    cpu: dict[tuple[str, str], list[float]] = {k: [] for k in runners}
    for _ in range(args.rounds):
        for key, r in runners.items():
            t0, c0 = time.perf_counter(), time.process_time()
            for i in range(args.steps):
                r.step(batches[(args.warmup + i) % len(batches)])
            wall[key].append((time.perf_counter() - t0) / args.steps)
            cpu[key].append((time.process_time() - c0) / args.steps)
    times = cpu if args.clock == "process" else wall

    def ratios(key: tuple[str, str], ref: tuple[str, str]) -> float | None:
        if ref not in times:
            return None
        return round(statistics.median(a / b for a, b in zip(times[ref], times[key], strict=True)), 3)

    tokens = batch * seq
    out = []
    for inj in injections:
        first = runners[inj, settings[0]]
        row: dict[str, Any] = {
            "model": name,
            "injection": inj,
            "parameters": sum(p.numel() for p in first.model.parameters()),
            "batch": batch,
            "seq_len": seq,
            "settings": {},
        }
        for s in settings:
            key = (inj, s)
            row["settings"][s] = {
                "step_s": round(statistics.median(times[key]), 4),
                "tokens_per_s": round(tokens / statistics.median(wall[key]), 1),
                "tokens_per_cpu_s": round(tokens / statistics.median(cpu[key]), 1),
                "speedup_vs_fp32": ratios(key, (inj, "fp32")),
                # this injection's step over `none`'s in the same round (median over rounds)
                "over_none_step": ratios(("none", s), key) if ("none", s) in times else None,
                "warmup_s": runners[key].compile_s,
                "cpu_step_s_rounds": [round(t, 4) for t in cpu[key]],
            }
        if inj == "none" and args.precision in settings:
            r = runners[inj, args.precision]
            flops = r.matmul_flops(batches[0])
            row["step_gflop"] = round(flops / 1e9, 2)
            row["achieved_gflops"] = round(flops / statistics.median(cpu[inj, args.precision]) / 1e9, 1)
        out.append(row)
    return out


def autocast_dtypes(cfg: SiPEConfig, batch: dict[str, torch.Tensor]) -> dict[str, list[str]]:
    """Output dtype of every module type in one autocast forward: what runs in bf16, what stays fp32."""
    torch.manual_seed(0)
    model = build_model(cfg).train()
    seen: dict[str, set[str]] = {}

    def hook(mod: torch.nn.Module, _inp: Any, out: Any) -> None:
        outs = out if isinstance(out, tuple) else (out,)
        for o in outs:
            if torch.is_tensor(o) and o.is_floating_point():
                seen.setdefault(type(mod).__name__, set()).add(str(o.dtype).replace("torch.", ""))

    handles = [m.register_forward_hook(hook) for m in model.modules() if m is not model]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(**batch)
    for h in handles:
        h.remove()
    result = {k: sorted(v) for k, v in sorted(seen.items())}
    result["lm_loss (cross-entropy)"] = [str(out.lm_loss.dtype).replace("torch.", "")]
    return result


def ewt_dataset(work: Path) -> Path:
    """A small prepared dataset (UD EWT train, gold trees, raw text form) for the loss check."""
    from structpe.train.prepare import prepare
    from structpe.train.prepare_settings import PrepareSettings, corpus_splits
    from structpe.train.tokenizer import train_tokenizer

    splits, _ = corpus_splits("ud-ewt", None, ("train", "validation"))
    tok = work / "tokenizer"
    if not (tok / "tokenizer.json").is_file():
        train_tokenizer(splits["train"], tok, kind="bpe", vocab_size=8192, show_progress=False)
    return prepare(splits, tok, work / "ewt-gold", settings=PrepareSettings(parser="gold", seq_len=128))


def loss_curves(injection: str, args: argparse.Namespace) -> dict[str, Any]:
    """fp32 vs each of ``--loss-settings`` from the same weights on the same real batches (the
    accuracy check)."""
    from structpe.train.collators import CausalCollator
    from structpe.train.prepare import load_prepared

    work = Path(args.work or tempfile.mkdtemp(prefix="throughput-"))
    with contextlib.redirect_stdout(sys.stderr):  # stdout is the JSON
        dataset = Path(args.dataset) if args.dataset else ewt_dataset(work)
    dd, meta = load_prepared(dataset)
    recipe = load_recipe(f"txl/{injection}-tiny")
    cfg, batch, _ = model_config("quickstart", injection, meta["vocab_size"])
    cfg.pad_token_id, cfg.bos_token_id, cfg.eos_token_id = (
        meta["pad_token_id"], meta["bos_token_id"], meta["eos_token_id"])
    collate = CausalCollator(pad_token_id=meta["pad_token_id"])
    order = torch.randperm(len(dd["train"]), generator=torch.Generator().manual_seed(0)).tolist()
    t0 = time.perf_counter()  # the data path: rows read from Arrow + collated, as the Trainer's loader does
    batches = [
        collate([dd["train"][j] for j in order[(i * batch) % len(order) :][:batch]])
        for i in range(args.loss_steps)
    ]
    data_path_s = (time.perf_counter() - t0) / max(1, args.loss_steps)
    valid = [collate(list(dd["validation"].select(range(k, min(k + batch, len(dd["validation"]))))))
             for k in range(0, min(len(dd["validation"]), 8 * batch), batch)]
    warmup = min(int(recipe.train.warmup), args.loss_steps // 4)
    curves: dict[str, list[float]] = {}
    final: dict[str, float] = {}
    for setting in ("fp32", *args.loss_settings):
        r = Runner(cfg, setting, args.threads, lr=float(recipe.train.lr))
        sched = torch.optim.lr_scheduler.LambdaLR(r.opt, lambda s, w=warmup: min(1.0, (s + 1) / max(1, w)))
        torch.manual_seed(1)  # same dropout masks for both
        losses = []
        for b in batches:
            losses.append(r.step(b))
            sched.step()
        curves[setting] = [round(statistics.fmean(losses[i:i + 25]), 4) for i in range(0, len(losses), 25)]
        r.model.eval()
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=r.bf16):
            final[setting] = statistics.fmean(float(r.model(**v).lm_loss) for v in valid)
    train_gap = {s: max(abs(b - a) / a for a, b in zip(curves["fp32"], curves[s], strict=True))
                 for s in args.loss_settings}
    valid_gap = {s: abs(final[s] - final["fp32"]) / final["fp32"] for s in args.loss_settings}
    return {
        "injection": injection,
        "dataset": str(dataset),
        "steps": args.loss_steps,
        "batch": batch,
        "data_path_s_per_batch": round(data_path_s, 5),
        "train_loss_window_means": curves,
        "max_rel_gap_train_curve": {s: round(g, 4) for s, g in train_gap.items()},
        "valid_loss": {k: round(v, 4) for k, v in final.items()},
        "rel_gap_valid_loss": {s: round(g, 4) for s, g in valid_gap.items()},
        "within_1pct": {s: train_gap[s] <= 0.01 and valid_gap[s] <= 0.01 for s in args.loss_settings},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=["quickstart", "position-small"], choices=list(MODELS))
    ap.add_argument("--settings", nargs="+", choices=SETTINGS,
                    help="default: every setting, or --precision's alone")
    ap.add_argument("--injections", nargs="+", default=["none", "position", "input", "lis_tree", ANCHOR],
                    help=f"TXL injections to interleave; {ANCHOR!r}: transformers' GPT-2 of the same size")
    ap.add_argument("--precision", choices=PRECISIONS,
                    help="the setting the summary keys report; alone (no --settings) the only one run "
                         "(default: bf16 where native, else fp32)")
    ap.add_argument("--compile-models", nargs="*", default=["quickstart"],
                    help="models that get the compile settings (compiling the 8-layer model takes minutes)")
    ap.add_argument("--threads", type=int, default=2, help="intra-op threads of the non -t1 settings")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=3, help="timed steps per setting per round")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=QS.vocab_size)
    ap.add_argument("--loss-steps", type=int, default=150, help="0: skip the fp32 vs bf16 loss check")
    ap.add_argument("--loss-settings", nargs="+", default=["bf16", "compile-bf16"],
                    choices=[s for s in SETTINGS if s != "fp32"], help="compared with fp32 in the loss check")
    ap.add_argument("--loss-injections", nargs="+", default=["position"],
                    help="models of the loss check (position runs every op that none runs, and the prior)")
    ap.add_argument("--dataset", help="prepared dataset for the loss check (default: UD EWT gold)")
    ap.add_argument("--work", help="folder for the on-the-fly dataset (default: a temporary folder)")
    ap.add_argument("--real-batches", action="store_true",
                    help="time quickstart / tiny on --dataset's first batches instead of random ones")
    ap.add_argument("--clock", choices=["wall", "process"], default="wall",
                    help="step time from the wall clock or this process's CPU time (a shared machine)")
    ap.add_argument("--skip", nargs="*", default=[], metavar="MODEL:SETTING",
                    help="settings not run for a model, e.g. position-small:bf16 (emulated bf16 is slow)")
    args = ap.parse_args()
    skip: dict[str, list[str]] = {}
    for item in args.skip:
        model, _, setting = item.partition(":")
        skip.setdefault(model, []).append(setting)
    args.skip = skip
    if args.real_batches and not args.dataset:
        ap.error("--real-batches needs --dataset (a folder written by `structpe prepare`)")
    if args.settings is None:
        args.settings = [args.precision] if args.precision else list(SETTINGS)
    if args.precision is None:
        args.precision = "bf16" if native_bf16() else "fp32"
    if "fp32" in args.settings:  # the reference comes first in every round
        args.settings = ["fp32"] + [s for s in args.settings if s != "fp32"]
    result: dict[str, Any] = {
        "benchmark": "train_throughput",
        "torch": torch.__version__,
        "cpu": platform.processor() or platform.machine(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "loadavg_before": loadavg(),
        "args": vars(args),
        "throughput": [],
        "native_bf16": native_bf16(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }
    peak_dtype = torch.float32 if args.precision == "fp32" else torch.bfloat16
    result["precision"] = args.precision
    result["matmul_peak_gflops"] = round(matmul_peak_gflops(args.threads, peak_dtype), 1)
    for name in args.models:
        injections = args.injections if name != "position-small" else ["position"]
        for row in throughput(name, injections, args):
            result["throughput"].append(row)
            print(json.dumps(row), flush=True, file=sys.stderr)
    qs = {r["injection"]: r for r in result["throughput"] if r["model"] == "quickstart"}
    prec = {k: r["settings"][args.precision] for k, r in qs.items() if args.precision in r["settings"]}
    result["tokens_per_cpu_s"] = {k: v["tokens_per_cpu_s"] for k, v in prec.items()}
    result["injection_over_none"] = {k: v["over_none_step"] for k, v in prec.items() if k != "none"}
    result["load_note"] = "loadavg_before / loadavg_after: the machine's other users during the rounds"
    if "achieved_gflops" in qs.get("none", {}):
        result["achieved_gflops"] = {"none": qs["none"]["achieved_gflops"]}
        share = qs["none"]["achieved_gflops"] / result["matmul_peak_gflops"]
        result["share_of_peak"] = {"none": round(share, 3)}
    cfg, batch, seq = model_config("quickstart", "position", args.vocab)
    result["autocast_dtypes"] = autocast_dtypes(cfg, random_batch(2, seq, args.vocab, seed=2))
    if args.loss_steps:
        result["loss_check"] = [loss_curves(inj, args) for inj in args.loss_injections]
    result["loadavg_after"] = loadavg()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

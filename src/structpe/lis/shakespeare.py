"""Tiny Shakespeare context-growth diagnostic (LIS paper App. F.1, Table 3).

Train character LMs at context 256 and measure all-token validation perplexity in windows of
256..4096 characters: LISformer (line instances + content-derived line addresses), continuous RoPE,
ALiBi and random line addresses. Paper (4 layers, 4 heads, d 128, 5,000 iterations, batch 64):
LISformer 4.81 -> 4.86 from 256 to 4096 while continuous RoPE degrades.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tqdm.auto import tqdm

from structpe.data.paths import data_root
from structpe.io import atomic_write_text, earlier_results, read_json
from structpe.lis.lisformer import (
    LISformer,
    LISformerConfig,
)
from structpe.lis.shakespeare_report import MODEL_LABELS, markdown_table, plot
from structpe.lis.training import (
    SITTING_KEYS,
    Bf16Option,
    configure_optimizer,
    train_steps,
)
from structpe.provenance import hardware, provenance

# model name -> the LISformerConfig fields that make it. The paper's four come first; the rest are
# opt-in with --models: "lis-alibi" is an extension, "*-qprev" the query-side ablation (docs/lis.md)
MODEL_SCHEMES: dict[str, dict] = {
    "lis": {"pe": "lis"},
    "rope": {"pe": "rope"},
    "alibi": {"pe": "alibi"},
    "random": {"pe": "random"},
    "lis-alibi": {"pe": "lis", "instance_alibi": True},
    "lis-qprev": {"pe": "lis", "query_address": "previous"},
    "random-qprev": {"pe": "random", "query_address": "previous"},
}


@dataclass
class ShakespeareConfig(Bf16Option):
    models: list[str] = field(default_factory=lambda: ["lis", "rope", "alibi", "random"])
    n_chars: int = 1_000_000  # first 1M characters, 90/10 split (paper)
    train_frac: float = 0.9
    train_ctx: int = 256
    eval_ctx: list[int] = field(default_factory=lambda: [256, 512, 1024, 2048, 4096])
    eval_chars: int = 16384  # the same validation span is scored at every context length
    n_layers: int = 4
    n_heads: int = 4
    d_model: int = 128
    dropout: float = 0.0
    iters: int = 5000
    batch_size: int = 64
    lr: float = 3e-4
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    warmup: int = 0
    eval_batch: int = 4
    seed: int = 0
    threads: int = 0  # 0: leave torch's default
    save_checkpoints: bool = True
    device: str = "auto"  # auto: cuda when available
    # resumable training (long runs over several sittings): every ``checkpoint_every`` updates the
    # model, AdamW state, data-sampler state and loss curve go to out/checkpoints/<model>-partial;
    # a rerun resumes there, and a model whose final results exist is skipped. ``max_minutes`` > 0
    # ends a sitting after that much training time (checkpointed; rerun to continue)
    checkpoint_every: int = 0
    max_minutes: float = 0.0
    attn_backend: str = "sdpa"  # sdpa | flex | auto (LISformerConfig.attn_backend)
    # > 0: validation PPL at ``train_ctx`` over ``eval_chars`` every this many updates (a learning
    # curve in results.json / results.md / ppl.png). Scored from a forked RNG in eval mode, so the
    # trained model is the same with or without it (random addresses and dropout draw from that RNG)
    eval_every: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.eval_every < 0:
            raise ValueError(f"eval_every must be >= 0 (0: no learning curve), got {self.eval_every}")


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def load_corpus(data_dir: str | Path | None = None) -> str:
    path = data_root(data_dir, sub="tinyshakespeare") / "input.txt"
    if not path.is_file():
        raise FileNotFoundError(f"Tiny Shakespeare not found at {path}")
    return path.read_text(encoding="utf-8")


class CharData:
    """Character vocabulary (65 symbols on Tiny Shakespeare) and the train/val split."""

    def __init__(self, text: str, n_chars: int, train_frac: float):
        text = text[:n_chars]
        self.chars = sorted(set(text))
        self.stoi = {c: i for i, c in enumerate(self.chars)}
        data = torch.tensor([self.stoi[c] for c in text], dtype=torch.long)
        n = int(len(data) * train_frac)
        self.train, self.val = data[:n], data[n:]
        self.newline_id = self.stoi["\n"]

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def batch(self, ctx: int, batch_size: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        ix = torch.randint(len(self.train) - ctx - 1, (batch_size,), generator=gen)
        x = torch.stack([self.train[i : i + ctx] for i in ix])
        y = torch.stack([self.train[i + 1 : i + ctx + 1] for i in ix])
        return x, y


class Unfinished(Exception):
    """A sitting ended (``max_minutes``) before training finished; the checkpoint holds the state."""


def train_model(
    model: LISformer, data: CharData, cfg: ShakespeareConfig, desc: str = "", resume: Path | None = None
) -> tuple[list[float], float, list[dict]]:
    """AdamW + cosine schedule + clipping at 1.0 (F.1); returns the training-loss curve, the
    training seconds (summed over sittings) and the validation curve (``cfg.eval_every``).

    ``resume``: a folder for periodic checkpoints (``cfg.checkpoint_every``); training continues
    from the last one found there and raises ``Unfinished`` when ``cfg.max_minutes`` runs out.
    """
    gen = torch.Generator().manual_seed(cfg.seed)
    opt = configure_optimizer(model, cfg.lr, cfg.weight_decay)
    losses: list[float] = []
    curve: list[dict] = []
    start, before = 0, 0.0
    if resume is not None and (resume / LATEST).is_file():
        start, losses, before, curve = load_training_state(resume, model, opt, gen)
    t0 = time.time()

    def sitting(done: int, losses: list[float]) -> None:  # curve, checkpoints, the time limit of a sitting
        if cfg.eval_every and done % cfg.eval_every == 0:
            curve.append(curve_point(model, data, cfg, done, losses))
        out_of_time = cfg.max_minutes > 0 and time.time() - t0 > 60 * cfg.max_minutes
        if (
            resume is not None
            and done < cfg.iters
            and (out_of_time or (cfg.checkpoint_every and done % cfg.checkpoint_every == 0))
        ):
            save_training_state(resume, done, losses, before + time.time() - t0, model, opt, gen, curve)
        if out_of_time and done < cfg.iters:
            raise Unfinished(f"{desc}: {done}/{cfg.iters} updates after {cfg.max_minutes} min; rerun resumes")

    def next_batch():
        return (*data.batch(cfg.train_ctx, cfg.batch_size, gen), None)

    train_steps(
        model,
        opt,
        cfg,
        next_batch,
        start=start,
        losses=losses,
        desc=desc,
        log_every=10,
        autocast_bf16=cfg.resolved_bf16(),
        after_step=sitting,
    )
    return losses, before + time.time() - t0, curve


def curve_point(
    model: LISformer, data: CharData, cfg: ShakespeareConfig, done: int, losses: list[float]
) -> dict:
    """One learning-curve point: mean training loss since the last point and validation PPL at the
    training context. The RNG is forked (the random-address model draws angles at evaluation too)
    and the model goes back to training mode, so training continues exactly as without the curve."""
    devices = [next(model.parameters()).device] if next(model.parameters()).is_cuda else []
    with torch.random.fork_rng(devices=devices):
        ppl = evaluate_ppl(model, data.val, cfg.train_ctx, cfg.eval_chars, cfg.eval_batch)
    model.train()
    window = losses[-cfg.eval_every :]
    return {"updates": done, "train_loss": round(sum(window) / len(window), 5), "val_ppl": round(ppl, 5)}


def run_provenance(device: torch.device, started: float, cfg: ShakespeareConfig, corpus: Path) -> dict:
    """Provenance of one trained model (a merge carries it per model): revision (``+dirty`` with
    local changes), command, the device it trained on and the torch build (CUDA / CPU wheel)."""
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else hardware()["cpu"]
    return provenance(
        started=started,
        data=[corpus],
        seed=cfg.seed,
        limits={"n_chars": cfg.n_chars},
        device={"type": device.type, "name": where, "threads": torch.get_num_threads()},
        torch_build={"version": torch.__version__, "cuda": torch.version.cuda, "debug": torch.version.debug},
    )


LATEST = "latest.json"


def save_training_state(
    folder: Path, step: int, losses, seconds: float, model, opt, gen: torch.Generator, curve: list[dict]
) -> None:
    """Model (safetensors), AdamW state (safetensors + JSON), sampler state, losses and curve in
    ``folder/step-<n>``; ``latest.json`` is replaced atomically only when that folder is complete."""
    from safetensors.torch import save_file

    sub = folder / f"step-{step}"
    model.save_pretrained(sub)
    state = opt.state_dict()
    tensors = {f"{i}.{k}": v for i, st in state["state"].items() for k, v in st.items()}
    tensors["generator"] = gen.get_state()
    # the global RNG too: dropout and the random-address model draw from it, so a resumed run
    # continues the one run's draws
    tensors["torch_rng"] = torch.get_rng_state()
    if torch.cuda.is_available():
        tensors["cuda_rng"] = torch.cuda.get_rng_state()
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(sub / "optimizer.safetensors"))
    meta = {
        "step": step,
        "losses": losses,
        "seconds": seconds,
        "param_groups": state["param_groups"],
        "curve": curve,
    }
    (sub / "training_state.json").write_text(json.dumps(meta))
    tmp = folder / f".{LATEST}.tmp"
    tmp.write_text(json.dumps({"folder": sub.name, "step": step}))
    os.replace(tmp, folder / LATEST)
    for old in folder.glob("step-*"):
        if old != sub:
            shutil.rmtree(old)


def load_training_state(
    folder: Path, model, opt, gen: torch.Generator
) -> tuple[int, list[float], float, list[dict]]:
    from safetensors.torch import load_file

    sub = folder / read_json(folder / LATEST)["folder"]
    model.load_state_dict(LISformer.from_pretrained(sub).state_dict())
    tensors = load_file(str(sub / "optimizer.safetensors"))
    gen.set_state(tensors.pop("generator"))
    if "torch_rng" in tensors:
        torch.set_rng_state(tensors.pop("torch_rng"))
    if "cuda_rng" in tensors:
        cuda_rng = tensors.pop("cuda_rng")
        if torch.cuda.is_available():
            torch.cuda.set_rng_state(cuda_rng)
    meta = read_json(sub / "training_state.json")
    state: dict = {}
    for key, v in tensors.items():
        i, k = key.split(".", 1)
        state.setdefault(int(i), {})[k] = v
    opt.load_state_dict({"state": state, "param_groups": meta["param_groups"]})
    return meta["step"], meta["losses"], meta["seconds"], meta.get("curve", [])


@torch.no_grad()
def evaluate_ppl(model: LISformer, val: torch.Tensor, ctx: int, eval_chars: int, batch: int = 4) -> float:
    """All-token perplexity over non-overlapping windows of ``ctx`` characters covering the first
    ``eval_chars`` validation characters (each window is scored from its first token)."""
    n_win = eval_chars // ctx
    if n_win < 1 or n_win * ctx + 1 > len(val):
        raise ValueError(f"eval_chars={eval_chars} / val={len(val)} cannot hold a window of {ctx}")
    model.eval()
    nll, count = 0.0, 0
    for s in range(0, n_win, batch):
        starts = range(s * ctx, min(n_win, s + batch) * ctx, ctx)
        x = torch.stack([val[i : i + ctx] for i in starts])
        y = torch.stack([val[i + 1 : i + ctx + 1] for i in starts])
        dev = next(model.parameters()).device
        loss = model(x.to(dev), y.to(dev)).loss
        nll += loss.item() * y.numel()
        count += y.numel()
    return math.exp(nll / count)


def own_line_mass(
    model: LISformer, val: torch.Tensor, ctx: int, eval_chars: int, n_windows: int = 4, last: int = 128
) -> list[float]:
    """Per layer, the attention mass the last ``last`` queries of a window put on their own line
    (mean over heads and the first ``n_windows`` evaluation windows). Falling mass at longer
    contexts means earlier lines, which carry no distance signal, draw attention away."""
    model.eval()
    dev = next(model.parameters()).device
    n = max(1, min(n_windows, eval_chars // ctx))
    x = torch.stack([val[i * ctx : (i + 1) * ctx] for i in range(n)]).to(dev)
    mass = model.own_instance_attention(x)[..., -min(last, ctx) :]  # [layers, B, H, last]
    return [round(float(m), 4) for m in mass.mean(dim=(1, 2, 3))]


def new_model(cfg: ShakespeareConfig, data: CharData, name: str) -> LISformer:
    """Model ``name`` (``MODEL_SCHEMES``) at the profile's size, initialised from ``cfg.seed``."""
    torch.manual_seed(cfg.seed)
    mcfg = LISformerConfig(
        vocab_size=data.vocab_size,
        n_layers=cfg.n_layers,
        n_heads=cfg.n_heads,
        d_model=cfg.d_model,
        dropout=cfg.dropout,
        attn_backend=cfg.attn_backend,
        **MODEL_SCHEMES[name],
    )
    return LISformer(mcfg, newline_id=data.newline_id)


def run(
    cfg: ShakespeareConfig, out: str | Path, data_dir: str | Path | None = None, eval_only: bool = False
) -> dict:
    """Train every model in ``cfg.models`` and write results.json, results.md and ppl.png.

    ``eval_only``: load ``out/checkpoints/<model>`` (safetensors) instead of training.
    """
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    data = CharData(load_corpus(data_dir), cfg.n_chars, cfg.train_frac)

    corpus = data_root(data_dir, sub="tinyshakespeare") / "input.txt"

    def record() -> str:  # results.json with the provenance of this sitting
        prov = provenance(started=started, data=[corpus], seed=cfg.seed, limits={"n_chars": cfg.n_chars})
        return json.dumps({**results, "provenance": prov}, indent=2)

    # models an earlier sitting finished are kept (same configuration only; how a sitting runs may change)
    kept = earlier_results(out / "results.json", cfg.__dict__, ignore=SITTING_KEYS)
    results: dict = {"config": cfg.__dict__, "models": kept}
    for name in tqdm(cfg.models, desc="models"):
        if name not in MODEL_LABELS:
            raise ValueError(f"unknown model {name!r}; choose from {list(MODEL_LABELS)}")
        done = results["models"].get(name, {})
        if not eval_only and done.get("updates") == cfg.iters and (out / "checkpoints" / name).is_dir():
            continue  # finished in an earlier sitting
        partial = out / "checkpoints" / f"{name}-partial"
        t0 = time.time()
        curve: list[dict] = []
        if eval_only:
            model = LISformer.from_pretrained(out / "checkpoints" / name).to(pick_device(cfg.device))
            losses = [float("nan")]
            prev = out / "results.json"
            trained = read_json(prev)["models"].get(name, {}) if prev.is_file() else {}
        else:
            trained = {}
            model = new_model(cfg, data, name).to(pick_device(cfg.device))
            resumable = cfg.checkpoint_every > 0 or cfg.max_minutes > 0
            try:
                losses, train_s, curve = train_model(model, data, cfg, name, partial if resumable else None)
            except Unfinished as stop:
                results["unfinished"] = str(stop)
                atomic_write_text(out / "results.json", record())
                break
        if eval_only:
            train_s = time.time() - t0
        torch.manual_seed(cfg.seed + 1)  # the random-address model samples at evaluation too
        ppl = {}
        for ctx in tqdm(cfg.eval_ctx, desc=f"eval {name}", leave=False):
            ppl[str(ctx)] = evaluate_ppl(model, data.val, ctx, cfg.eval_chars, cfg.eval_batch)
        results["models"][name] = {
            "label": MODEL_LABELS[name],
            "params": model.num_params(),
            "train_seconds": round(train_s, 1),
            "final_train_loss": sum(losses[-20:]) / len(losses[-20:]),
            "updates": cfg.iters,
            "ppl": ppl,
        }
        if not eval_only:
            results["models"][name]["bf16"] = cfg.resolved_bf16()
            results["models"][name]["provenance"] = run_provenance(
                next(model.parameters()).device, t0, cfg, corpus
            )
        if curve:
            results["models"][name]["curve"] = curve
        if model.cfg.pe in ("lis", "random"):
            results["models"][name]["own_line_mass"] = {
                str(ctx): own_line_mass(model, data.val, ctx, cfg.eval_chars) for ctx in cfg.eval_ctx
            }
        # eval-only keeps the training record of the run that made the checkpoint
        results["models"][name].update(
            {
                k: trained[k]
                for k in ("train_seconds", "final_train_loss", "updates", "bf16", "curve", "provenance")
                if k in trained
            }
        )
        if cfg.save_checkpoints and not eval_only:
            model.save_pretrained(out / "checkpoints" / name)
        if partial.is_dir():
            shutil.rmtree(partial)
        atomic_write_text(out / "results.json", record())
    if not results["models"]:
        return results
    atomic_write_text(out / "results.md", markdown_table(results))
    plot(results, out / "ppl.png")
    return results

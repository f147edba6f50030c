"""Role-addressing KG/text diagnostics (LIS paper App. F.3: Tables 5, 6 and 7).

The data - the 57 relation types, the KG and text forms of a fact for the serialized model B and
the LIS model J, the three settings (transfer, kg2text, bidirectional) and Table 5's tiers - is
built and described in ``kg_roles_data``; this module holds the configs, models,
runs and tables.

Metrics (F.3): hit@1 / hit@5: every character of the target entity is the argmax / in the top 5
at its prediction step; averaged over target entities. PPL: per-character geometric mean over the
same characters (``kg.score``).
"""

from __future__ import annotations

import json
import math
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from tqdm.auto import tqdm

from structpe.io import atomic_write_text, earlier_results, save_figure
from structpe.lis.kg import score, train_loop
from structpe.lis.kg_encode import Example
from structpe.lis.kg_roles_data import (
    MODELS,
    N_SLOTS,
    RELATIONS,
    Vocab,
    paired,
    single,
    transfer_data,
    zero_shot_data,
)
from structpe.lis.lisformer import LISformer, LISformerConfig
from structpe.lis.training import SITTING_KEYS, Bf16Option
from structpe.provenance import provenance

SETTINGS = ("transfer", "kg2text", "bidirectional")


# --- config, models, runs ------------------------------------------------------------------------------
@dataclass
class RoleKGConfig(Bf16Option):
    setting: str = "kg2text"
    models: list[str] = field(default_factory=lambda: ["B", "J"])
    n_train_names: int = 1000
    n_test_names: int = 100  # zero-shot settings only
    n_layers: int = 3
    n_heads: int = 1
    d_model: int = 60
    block_size: int = 192
    dropout: float = 0.2
    iters: int = 100_000
    batch_size: int = 32
    lr: float = 5e-4
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    warmup: int = 0
    n_eval: int = 500  # evaluation entities per (tier or split, form or direction)
    eval_batch: int = 100
    eval_every: int = 0  # > 0: score the evaluation sets every this many updates (a learning curve)
    seed: int = 0
    threads: int = 0
    device: str = "auto"
    save_checkpoints: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.eval_every < 0:
            raise ValueError(f"eval_every must be >= 0 (0: no learning curve), got {self.eval_every}")
        if self.setting not in SETTINGS:
            raise ValueError(f"setting must be one of {SETTINGS}, got {self.setting!r}")
        bad = [m for m in self.models if m not in MODELS]
        if bad:
            raise ValueError(f"unknown KG models {bad}; choose from {list(MODELS)}")


def build_model(kind: str, cfg: RoleKGConfig, vocab: Vocab) -> LISformer:
    """Single-head pre-norm ReLU Transformer with RoPE; J adds the 57 x 4 x d/2 slot-angle table."""
    return LISformer(
        LISformerConfig(
            vocab_size=len(vocab),
            n_layers=cfg.n_layers,
            n_heads=cfg.n_heads,
            d_model=cfg.d_model,
            dropout=cfg.dropout,
            pe="rope",
            n_roles=len(RELATIONS) * N_SLOTS if kind == "J" else 0,
            null_role_row=False,
            activation="relu",
        )
    )


def _check_len(ex: Example, cfg: RoleKGConfig) -> Example:
    if len(ex.ids) > cfg.block_size:
        raise ValueError(f"sequence of {len(ex.ids)} tokens exceeds block_size {cfg.block_size}")
    return ex


def training_sampler(kind: str, cfg: RoleKGConfig, vocab: Vocab, data, rng: random.Random):
    """make_batch() for ``kg.train_loop``: the setting's training sequences."""

    def one() -> Example:
        if cfg.setting == "transfer":
            fact, form = rng.choice(data.train)
            return single(kind, vocab, fact, form, rng, None)
        direction = "kg2text" if cfg.setting == "kg2text" or rng.random() < 0.5 else "text2kg"
        return paired(kind, vocab, rng.choice(data.train_facts), direction, rng)

    return lambda: [_check_len(one(), cfg) for _ in range(cfg.batch_size)]


def evaluation_sets(cfg: RoleKGConfig, data) -> dict[str, list]:
    """Fixed evaluation items shared by both models: key -> [(fact, target or direction, seed)]."""
    rng = random.Random(cfg.seed + 2)
    out = {}
    if cfg.setting == "transfer":
        for tier, items in data.tiers.items():
            chosen = rng.sample(items, min(cfg.n_eval, len(items)))
            for form in ("text", "kg"):
                out[f"{tier}/{form}"] = [(f, t, rng.randrange(2**31)) for f, t in chosen]
        return out
    directions = ["kg2text"] if cfg.setting == "kg2text" else ["kg2text", "text2kg"]
    for split, facts in (("train", data.train_facts), ("test", data.test_facts)):
        chosen = rng.sample(facts, min(cfg.n_eval, len(facts)))
        for d in directions:
            out[f"{d}/{split}"] = [(f, d, rng.randrange(2**31)) for f in chosen]
    return out


def eval_examples(kind: str, cfg: RoleKGConfig, vocab: Vocab, key: str, items: list) -> list[Example]:
    if cfg.setting == "transfer":
        form = key.split("/")[1]
        return [single(kind, vocab, f, form, random.Random(s), t) for f, t, s in items]
    return [paired(kind, vocab, f, d, random.Random(s)) for f, d, s in items]


def run(cfg: RoleKGConfig, out: str | Path, eval_only: bool = False) -> dict:
    """Train (or load ``out/checkpoints/<model>``) and score every model; writes results.json and
    results.md into ``out``."""
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    if cfg.setting == "transfer":
        data = transfer_data(cfg.n_train_names, cfg.seed)
        stats = {"train_sequences": len(data.train), **{t: len(v) for t, v in data.tiers.items()}}
    else:
        data = zero_shot_data(cfg.n_train_names, cfg.n_test_names, cfg.seed)
        stats = {"train_facts": len(data.train_facts), "test_facts": len(data.test_facts)}
    vocab = Vocab()
    sets = evaluation_sets(cfg, data)
    stats.update(relations=len(RELATIONS), vocab=len(vocab), data_seconds=round(time.time() - t0, 1))
    dev = torch.device(
        ("cuda" if torch.cuda.is_available() else "cpu") if cfg.device == "auto" else cfg.device
    )
    # earlier results of other models in this folder are kept (same configuration only)
    kept = earlier_results(out / "results.json", asdict(cfg), ignore=SITTING_KEYS)
    results = {"config": asdict(cfg), "data": stats, "models": kept}
    for kind in cfg.models:
        torch.manual_seed(cfg.seed)
        t1 = time.time()
        ckpt = out / "checkpoints" / kind
        if eval_only:
            model = LISformer.from_pretrained(ckpt).to(dev)
            rec = results["models"].get(kind, {})
        else:
            model = build_model(kind, cfg, vocab).to(dev)
            curve: list[dict] = []
            losses = train_loop(
                model,
                training_sampler(kind, cfg, vocab, data, random.Random(cfg.seed + 1)),
                vocab.pad,
                cfg,
                kind,
                after_step=_curve_recorder(model, kind, cfg, vocab, sets, curve),
            )
            rec = {
                "train_seconds": round(time.time() - t1, 1),
                "final_train_loss": sum(losses[-50:]) / len(losses[-50:]),
                "updates": cfg.iters,
                "bf16": cfg.resolved_bf16(),
            }
            if curve:
                rec["curve"] = curve
            if cfg.save_checkpoints:
                model.save_pretrained(ckpt)
        rec.update(label=MODELS[kind], params=model.num_params(), scores={})
        if model.addresses.roles is not None:
            rec["slot_angle_params"] = model.addresses.roles.table.numel()
        for key, items in tqdm(sets.items(), desc=f"eval {kind}", leave=False):
            rec["scores"][key] = score(
                model, eval_examples(kind, cfg, vocab, key, items), vocab.pad, cfg.eval_batch
            )
        results["models"][kind] = rec
        prov = provenance(started=t0, seed=cfg.seed, data_generated=f"synthetic, seed {cfg.seed}")
        atomic_write_text(out / "results.json", json.dumps({**results, "provenance": prov}, indent=2))
    atomic_write_text(out / "results.md", markdown_table(results))
    plot_curve(results, out / "curve.png")
    return results


def _curve_recorder(model: LISformer, kind: str, cfg: RoleKGConfig, vocab: Vocab, sets: dict, curve: list):
    """``after_step`` that scores every evaluation set (all arities) each ``cfg.eval_every`` updates
    into ``curve``; the points are of the one run, whose cosine schedule spans all ``cfg.iters``."""
    if not cfg.eval_every:
        return None

    def record(done: int, losses: list[float]) -> None:
        if done % cfg.eval_every:
            return
        scores = {
            key: score(model, eval_examples(kind, cfg, vocab, key, items), vocab.pad, cfg.eval_batch)["all"]
            for key, items in sets.items()
        }
        window = losses[-cfg.eval_every :]
        curve.append({"updates": done, "train_loss": sum(window) / len(window), "scores": scores})
        model.train()  # ``score`` left the model in eval mode

    return record


def markdown_table(results: dict) -> str:
    """One row per (tier or split, form or direction): h@1 / h@5 / PPL of every model."""
    models = list(results["models"])
    keys = list(results["models"][models[0]]["scores"])
    lines = [
        "| tier / names | form | " + " | ".join(f"{m} h@1 / h@5 / PPL" for m in models) + " |",
        "|" + "---|" * (2 + len(models)),
    ]
    for key in keys:
        a, b = key.split("/")
        if a in ("kg2text", "text2kg"):  # zero-shot keys are direction/names
            a, b = b, a
        cells = []
        for m in models:
            r = results["models"][m]["scores"].get(key, {}).get("all")
            cells.append(f"{r['hit@1']:.3f} / {r['hit@5']:.3f} / {_fmt(r['ppl'])}" if r else "-")
        lines.append(f"| {a} | {b} | " + " | ".join(cells) + " |")
    foot = ", ".join(
        f"{m}: {r['params']:,} params, {r.get('updates', '?')} updates, {r.get('train_seconds', '?')} s"
        for m, r in results["models"].items()
    )
    return "\n".join(lines) + f"\n\n{foot}\n" + curve_table(results)


def curve_table(results: dict) -> str:
    """The learning curves (``eval_every``): h@5 / PPL over all target entities per set and model."""
    models = [m for m, r in results["models"].items() if r.get("curve")]
    if not models:
        return ""
    keys = list(results["models"][models[0]]["curve"][0]["scores"])
    cols = [f"{m} {key} h@5 / PPL" for m in models for key in keys]
    lines = [
        "",
        "Learning curve (every target entity of each evaluation set; one run, its cosine schedule "
        "over all updates):",
        "",
        "| updates | " + " | ".join(cols) + " |",
        "|" + "---|" * (1 + len(cols)),
    ]
    points = {m: {p["updates"]: p["scores"] for p in results["models"][m]["curve"]} for m in models}
    for n in sorted({u for m in models for u in points[m]}):
        cells = []
        for m in models:
            for key in keys:
                r = points[m].get(n, {}).get(key)
                cells.append(f"{r['hit@5']:.3f} / {_fmt(r['ppl'])}" if r else "-")
        lines.append(f"| {n:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot_curve(results: dict, path: Path) -> None:
    """Entity PPL and hit@5 against updates, one line per (model, evaluation set); nothing is written
    when no model recorded a curve."""
    if not any(r.get("curve") for r in results["models"].values()):
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_ppl, ax_hit) = plt.subplots(1, 2, figsize=(9, 3.5))
    for m, rec in results["models"].items():
        points = rec.get("curve") or []
        if not points:
            continue
        x = [p["updates"] for p in points]
        for key in points[0]["scores"]:
            style = "-" if key.endswith("/train") else "--"
            ax_ppl.plot(x, [p["scores"][key]["ppl"] for p in points], style, marker=".", label=f"{m} {key}")
            ax_hit.plot(x, [p["scores"][key]["hit@5"] for p in points], style, marker=".", label=f"{m} {key}")
    ax_ppl.set_yscale("log")
    ax_ppl.set_ylabel("entity PPL (per character)")
    ax_hit.set_ylabel("hit@5 (target entities)")
    for ax in (ax_ppl, ax_hit):
        ax.set_xlabel("updates")
        ax.grid(alpha=0.3)
    ax_hit.legend(fontsize=6)
    save_figure(fig, path, dpi=120)


def _fmt(ppl: float) -> str:
    return f"{ppl:.2f}" if ppl < 1000 and math.isfinite(ppl) else f"{ppl:.3g}"



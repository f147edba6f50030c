"""Template-diverse KG -> text (LIS paper App. F.4): synthetic facts over random names.

The role-addressing diagnostics of App. F.3 (57 relation types, Tables 5-7) are in ``kg_roles``.
This module holds the models, training, scoring and runs; the data generator is in ``kg_data``, the
encoding of examples in ``kg_encode`` and the reports in ``kg_report``.

Data (seeded, ``generate``):
  * ``template`` variant (F.4): 5 domains x 6 ordered roles; each domain chains a random permutation
    of the names; every consecutive pair carries all 5 chain2 relations (roles r, r+1) and every
    consecutive triple all 4 chain3 relations (r, r+1, r+2) -- 25 + 20 relation types. Each fact is
    rendered by one of 12 sentence templates (3 clause forms x 4 frames, our own wording) with the
    entities in any order (24 text variants per chain2 relation, 72 per chain3 relation).
  Training names and unseen test names are disjoint random lowercase strings of length 2-8.

Models (one causal character Transformer, ``LISformer``, three ways to address the KG prefix): B
serialized (role-marker tokens, continuous RoPE), Bl its content-addressing control, J LIS (slot
angles and content-derived fact addresses); how each one encodes an example is described in
``kg_encode``.

Evaluation: teacher-forced; only the characters of the *target* entities of the text (all text
entities after the first, which is given) are scored. hit@1 / hit@5: every character of an
entity is the argmax / in the top 5; averaged over target entities. PPL: geometric mean over the
scored characters. Settings: single fact; same_entities (+4 distractor facts with the same names
under other relations); same_rel (+4 distractors with the same relation, other names).
"""

from __future__ import annotations

import json
import math
import random
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tqdm.auto import tqdm

from structpe.io import atomic_write_text, earlier_results, read_json
from structpe.lis.kg_data import (
    Fact,
    KGData,
    generate,
)
from structpe.lis.kg_encode import SETTINGS, Distractors, Example, Vocab, collate, sample_example
from structpe.lis.kg_report import markdown_tables, plot
from structpe.lis.lisformer import LISformer, LISformerConfig
from structpe.lis.training import SITTING_KEYS, Bf16Option, configure_optimizer, train_steps
from structpe.provenance import provenance

MODELS = {
    "B": "serialized (role tokens, RoPE)",
    "Bl": "serialized + content segment addr.",
    "J": "LIS (slot + content fact addr.)",
}


@dataclass
class KGConfig(Bf16Option):
    variant: str = "template"
    models: list[str] = field(default_factory=lambda: ["B", "Bl", "J"])
    n_train_names: int = 3000
    n_test_names: int = 100
    n_layers: int = 3
    n_heads: int = 2
    d_model: int = 64
    dropout: float = 0.0
    iters: int = 100_000
    batch_size: int = 32
    lr: float = 5e-4
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    warmup: int = 100
    n_eval: int = 300  # evaluation facts per (setting, name split)
    eval_batch: int = 64
    settings: list[str] = field(default_factory=lambda: list(SETTINGS))
    seed: int = 0
    threads: int = 0
    device: str = "auto"
    save_checkpoints: bool = True


def build_model(kind: str, cfg: KGConfig, vocab: Vocab, data: KGData) -> LISformer:
    if kind not in MODELS:
        raise ValueError(f"unknown KG model {kind!r}; choose from {list(MODELS)}")
    mcfg = LISformerConfig(
        vocab_size=len(vocab),
        n_layers=cfg.n_layers,
        n_heads=cfg.n_heads,
        d_model=cfg.d_model,
        dropout=cfg.dropout,
        pe="rope" if kind == "B" else "lis",
        n_roles=len(data.role_names) if kind == "J" else 0,
    )
    return LISformer(mcfg)


def train_kg(model: LISformer, kind: str, data: KGData, vocab: Vocab, cfg: KGConfig) -> list[float]:
    """Single-fact KG | text sequences, causal LM loss over the whole sequence (F.4)."""
    rng = random.Random(cfg.seed + 1)

    def batch() -> list[Example]:
        return [
            sample_example(kind, data, vocab, rng.choice(data.train_facts), rng)
            for _ in range(cfg.batch_size)
        ]

    return train_loop(model, batch, vocab.pad, cfg, desc=kind)


def train_loop(
    model: LISformer,
    make_batch,
    pad: int,
    cfg,
    desc: str = "",
    after_step: Callable[[int, list[float]], None] | None = None,
) -> list[float]:
    """``training.train_steps`` over batches of ``Example`` from ``make_batch()`` (AdamW, cosine
    schedule, clipping, bf16 autocast; ``cfg``: a ``Bf16Option`` with iters, lr, weight_decay, warmup
    and grad_clip); ``after_step(done, losses)`` runs after each update."""
    opt = configure_optimizer(model, cfg.lr, cfg.weight_decay)
    return train_steps(
        model,
        opt,
        cfg,
        lambda: collate(make_batch(), pad),
        desc=desc,
        autocast_bf16=cfg.resolved_bf16(),
        after_step=after_step,
    )


@torch.no_grad()
def score(model: LISformer, examples: list[Example], pad: int, batch: int = 64) -> dict[str, dict]:
    """hit@1, hit@5 and per-character PPL over target entity characters, per arity and overall."""
    dev = next(model.parameters()).device
    model.eval()
    acc: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for s in range(0, len(examples), batch):
        chunk = examples[s : s + batch]
        ids, _, st = collate(chunk, pad)
        logits = model(ids.to(dev), structure=st.to(dev)).logits
        logp = torch.log_softmax(logits.float(), -1).cpu()
        top5 = logp.topk(5, dim=-1).indices
        for b, e in enumerate(chunk):
            for key in (f"chain{e.arity}", "all"):
                for a, z in e.targets:
                    gold = ids[b, a:z]
                    pred_rows = slice(a - 1, z - 1)  # logits at t predict token t+1
                    lp = logp[b, pred_rows].gather(-1, gold[:, None]).squeeze(-1)
                    acc[key]["nll"] -= lp.sum().item()
                    acc[key]["chars"] += z - a
                    acc[key]["h1"] += float((top5[b, pred_rows, 0] == gold).all())
                    acc[key]["h5"] += float((top5[b, pred_rows] == gold[:, None]).any(-1).all())
                    acc[key]["entities"] += 1
    out = {}
    for key, v in acc.items():
        out[key] = {
            "hit@1": v["h1"] / v["entities"],
            "hit@5": v["h5"] / v["entities"],
            "ppl": math.exp(v["nll"] / v["chars"]),
            "entities": int(v["entities"]),
        }
    return out


def eval_sets(data: KGData, cfg: KGConfig) -> dict[tuple[str, str], list[tuple[Fact, list[Fact], int]]]:
    """Fixed evaluation facts + distractors + a per-item seed, shared by every model."""
    rng = random.Random(cfg.seed + 2)
    out = {}
    for split, facts in (("train", data.train_facts), ("test", data.test_facts)):
        pool = Distractors(facts)
        chosen = rng.sample(facts, min(cfg.n_eval, len(facts)))
        for setting in cfg.settings:
            out[(setting, split)] = [(f, pool.sample(setting, f, rng), rng.randrange(2**31)) for f in chosen]
    return out


def run(cfg: KGConfig, out: str | Path, eval_only: bool = False) -> dict:
    """Train (or, with ``eval_only``, load ``out/checkpoints/<model>``) and evaluate every model;
    writes results.json, results.md and hit5.png."""
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    data = generate(cfg.variant, cfg.n_train_names, cfg.n_test_names, cfg.seed)
    vocab = Vocab(data)
    sets = eval_sets(data, cfg)
    dev = torch.device(
        "cuda"
        if cfg.device == "auto" and torch.cuda.is_available()
        else ("cpu" if cfg.device == "auto" else cfg.device)
    )
    results: dict = {
        "config": cfg.__dict__,
        "data": {
            "relations": len(data.relations),
            "train_facts": len(data.train_facts),
            "test_facts": len(data.test_facts),
            "vocab": len(vocab),
        },
        # earlier results of other models in this folder are kept (same configuration only)
        "models": earlier_results(
            out / "results.json", cfg.__dict__, ignore=SITTING_KEYS
        ),
    }
    for kind in tqdm(cfg.models, desc="models"):
        torch.manual_seed(cfg.seed)
        t0 = time.time()
        if eval_only:
            model = LISformer.from_pretrained(out / "checkpoints" / kind).to(dev)
            losses = [float("nan")]
            prev = out / "results.json"
            trained = read_json(prev)["models"].get(kind, {}) if prev.is_file() else {}
        else:
            trained = {}
            model = build_model(kind, cfg, vocab, data).to(dev)
            losses = train_kg(model, kind, data, vocab, cfg)
        res = {
            "label": MODELS[kind],
            "params": model.num_params(),
            "train_seconds": round(time.time() - t0, 1),
            "final_train_loss": sum(losses[-50:]) / len(losses[-50:]),
            "scores": {},
        }
        if not eval_only:
            res["bf16"] = cfg.resolved_bf16()
        # eval-only keeps the training record of the run that made the checkpoint
        res.update({k: trained[k] for k in ("train_seconds", "final_train_loss", "bf16") if k in trained})
        for (setting, split), items in sets.items():
            exs = [sample_example(kind, data, vocab, f, random.Random(seed), d) for f, d, seed in items]
            res["scores"][f"{setting}/{split}"] = score(model, exs, vocab.pad, cfg.eval_batch)
        results["models"][kind] = res
        if cfg.save_checkpoints and not eval_only:
            model.save_pretrained(out / "checkpoints" / kind)
        prov = provenance(started=started, seed=cfg.seed, data_generated=f"synthetic, seed {cfg.seed}")
        atomic_write_text(out / "results.json", json.dumps({**results, "provenance": prov}, indent=2))
    atomic_write_text(out / "results.md", markdown_tables(results))
    plot(results, out / "hit5.png")
    return results



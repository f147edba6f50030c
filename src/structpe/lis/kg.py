"""Template-diverse KG -> text (LIS paper App. F.4): synthetic facts over random names.

The role-addressing diagnostics of App. F.3 (57 relation types, Tables 5-7) are in ``kg_roles``.

Data (seeded, ``generate``):
  * ``template`` variant (F.4): 5 domains x 6 ordered roles; each domain chains a random permutation
    of the names; every consecutive pair carries all 5 chain2 relations (roles r, r+1) and every
    consecutive triple all 4 chain3 relations (r, r+1, r+2) -- 25 + 20 relation types. Each fact is
    rendered by one of 12 sentence templates (3 clause forms x 4 frames, our own wording) with the
    entities in any order (24 text variants per chain2 relation, 72 per chain3 relation).
  Training names and unseen test names are disjoint random lowercase strings of length 2-8.

Models (one causal character Transformer, ``LISformer``, three ways to address the KG prefix):
  B   serialized: role-marker tokens before each entity, continuous RoPE over the whole sequence.
  Bl  serialized content-addressing control: same tokens as B, positions reset per segment (each
      fact; the text), every completed fact segment gets a content-derived angle (F.4, Table 11).
  J   LIS: no role tokens; each KG entity character gets A = R_pos^p R_s R_e with p its position
      inside the entity, s its relation slot (learned angle table) and e a content-derived fact
      address (rotate by slot angle, mean-pool per fact, LayerNorm + Linear).
Bl and J use the causal two-term score of ``lisformer`` (a segment is addressed only for queries
in later segments).

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
import string
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tqdm.auto import tqdm

from structpe.io import atomic_savefig, atomic_write_text, earlier_results
from structpe.lis.lisformer import (
    OLD_FIELD_NAMES,
    LISformer,
    LISformerConfig,
    TokenStructure,
    configure_optimizer,
)
from structpe.lis.training import train_steps

TEMPLATE_DOMAINS = {
    "family": ["great-grandson", "grandson", "son", "father", "grandfather", "great-grandfather"],
    "work": ["intern", "employee", "boss", "superboss", "director", "executive"],
    "military": ["recruit", "private", "sergeant", "captain", "major", "colonel"],
    "school": ["freshman", "sophomore", "junior", "senior", "graduate", "alumnus"],
    "church": ["acolyte", "deacon", "priest", "bishop", "archbishop", "cardinal"],
}
CLAUSES = ["{n} is the {r}", "the {r} is {n}", "{n} acts as the {r}"]
MODELS = {
    "B": "serialized (role tokens, RoPE)",
    "Bl": "serialized + content segment addr.",
    "J": "LIS (slot + content fact addr.)",
}
SETTINGS = ("single", "same_entities", "same_rel")
CHARS = string.ascii_lowercase + " .,;:|-"


@dataclass(frozen=True)
class Relation:
    name: str
    domain: str
    roles: tuple[str, ...]  # role names in slot order
    role_ids: tuple[int, ...]  # global role ids (1-based; 0 = no role)


@dataclass(frozen=True)
class Fact:
    rel: int
    names: tuple[str, ...]


@dataclass
class KGData:
    variant: str
    relations: list[Relation]
    role_names: list[str]  # index = role id; [0] = "<none>"
    train_names: list[str]
    test_names: list[str]
    train_facts: list[Fact]
    test_facts: list[Fact]
    n_templates: int


def random_names(n: int, rng: random.Random, exclude: set[str] = frozenset()) -> list[str]:
    """n distinct random lowercase strings of length 2-8, none in ``exclude``."""
    out: list[str] = []
    seen = set(exclude)
    while len(out) < n:
        s = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 8)))
        if s not in seen:
            seen.add(s)
            out.append(s)
    return out


def _relations(variant: str) -> tuple[list[Relation], list[str], list[tuple[int, ...]], int]:
    """Relations, role names, slot offsets of each relation inside its window, window size."""
    role_names = ["<none>"]
    rels: list[Relation] = []
    offsets: list[tuple[int, ...]] = []
    if variant == "template":
        domains, window = TEMPLATE_DOMAINS, 3
        subsets = [(r, r + 1) for r in range(5)] + [(r, r + 1, r + 2) for r in range(4)]
    else:
        raise ValueError(f"unknown KG variant {variant!r} (template; App. F.3's chains: kg_roles)")
    for dom, roles in domains.items():
        base = len(role_names)
        role_names += [f"{dom}:{r}" for r in roles]
        for sub in subsets:
            rels.append(
                Relation(
                    f"{dom}:" + "-".join(roles[s] for s in sub),
                    dom,
                    tuple(roles[s] for s in sub),
                    tuple(base + s for s in sub),
                )
            )
            lo = sub[0]
            offsets.append(tuple(s - lo for s in sub))
    return rels, role_names, offsets, window


def _facts(names: list[str], rels: list[Relation], offsets, rng: random.Random) -> list[Fact]:
    """Each domain chains its own permutation of ``names``; every window position x relation."""
    facts: list[Fact] = []
    by_domain: dict[str, list[int]] = defaultdict(list)
    for k, r in enumerate(rels):
        by_domain[r.domain].append(k)
    for _dom, rel_ids in by_domain.items():
        chain = names[:]
        rng.shuffle(chain)
        for k in rel_ids:
            span = offsets[k][-1]
            for start in range(len(chain) - span):
                facts.append(Fact(k, tuple(chain[start + o] for o in offsets[k])))
    return facts


def generate(
    variant: str = "template", n_train_names: int = 3000, n_test_names: int = 100, seed: int = 0
) -> KGData:
    """Deterministic per (variant, sizes, seed); train and test names are disjoint."""
    rng = random.Random(seed)
    rels, role_names, offsets, _ = _relations(variant)
    train_names = random_names(n_train_names, rng)
    test_names = random_names(n_test_names, rng, exclude=set(train_names))
    train_facts = _facts(train_names, rels, offsets, rng)
    test_facts = _facts(test_names, rels, offsets, rng)
    return KGData(
        variant,
        rels,
        role_names,
        train_names,
        test_names,
        train_facts,
        test_facts,
        n_templates=12,
    )


def render_text(
    data: KGData, fact: Fact, order: list[int], template: int
) -> tuple[str, list[tuple[int, int]]]:
    """Sentence for ``fact`` with entities in slot ``order``; returns text and the character
    span of each entity in text order."""
    rel = data.relations[fact.rel]
    pieces: list[str | tuple[str, int]] = []  # str literal or (name, slot)
    clause_form, frame = CLAUSES[template % 3], template // 3
    clauses = []
    for s in order:
        pre, post = clause_form.split("{n}")
        clauses.append([pre.format(r=rel.roles[s]), (fact.names[s], s), post.format(r=rel.roles[s])])
    given, last = clauses[:-1], clauses[-1]
    joined: list = []
    for k, c in enumerate(given):
        if k:
            joined.append(" and ")
        joined += c
    if frame == 0:
        pieces = joined + [" and " if len(given) == 1 else ", and "] + last + ["."]
    elif frame == 1:
        pieces = ["if "] + joined + [", then "] + last + ["."]
    elif frame == 2:
        pieces = [f"in the {rel.domain}, if "] + joined + [", then "] + last + ["."]
    else:
        pieces = ["we know that "] + joined + ["; so "] + last + ["."]
    text, spans = "", []
    for p in pieces:
        if isinstance(p, tuple):
            spans.append((len(text), len(text) + len(p[0])))
            text += p[0]
        else:
            text += p
    return text, spans


class Vocab:
    """Characters + one marker token per role (used by the serialized models only)."""

    def __init__(self, data: KGData):
        self.itos = list(CHARS) + [f"<{r}>" for r in data.role_names[1:]] + ["<pad>"]
        self.stoi = {s: i for i, s in enumerate(self.itos)}
        self.role_token = {
            rid: self.stoi[f"<{data.role_names[rid]}>"] for rid in range(1, len(data.role_names))
        }
        self.pad = self.stoi["<pad>"]

    def __len__(self) -> int:
        return len(self.itos)


@dataclass
class Example:
    ids: list[int]
    position: list[int]
    instance: list[int]
    address: list[int]
    role: list[int]
    targets: list[tuple[int, int]]  # sequence spans of the scored (target) entities
    arity: int


def encode(
    kind: str,
    data: KGData,
    vocab: Vocab,
    prefix: list[Fact],
    text: str,
    text_spans: list[tuple[int, int]],
    rng: random.Random,
) -> Example:
    """One token sequence: KG prefix (facts joined by ';') | text. See the module docstring."""
    ids: list[int] = []
    pos: list[int] = []
    inst: list[int] = []
    addr: list[int] = []
    role: list[int] = []

    def emit(tok: int, p: int, g: int, a: int, r: int = 0) -> None:
        ids.append(tok)
        pos.append(p)
        inst.append(g)
        addr.append(a)
        role.append(r)

    for g, f in enumerate(prefix):
        rel = data.relations[f.rel]
        units = list(range(len(f.names)))
        rng.shuffle(units)  # entity-role units in random order: roles must come from markers/angles
        a = g if kind in ("Bl", "J") else -1
        seg = 0  # position inside the segment (Bl)
        for u, s in enumerate(units):
            if kind == "J":
                if u:
                    emit(vocab.stoi[" "], 0, g, a)
                for p, c in enumerate(f.names[s]):
                    emit(vocab.stoi[c], p, g, a, rel.role_ids[s])
            else:
                emit(vocab.role_token[rel.role_ids[s]], seg, g, a)
                seg += 1
                for c in f.names[s]:
                    emit(vocab.stoi[c], seg, g, a)
                    seg += 1
        emit(vocab.stoi[";"], 0 if kind == "J" else seg, g, a)
    g_text = len(prefix)
    start = len(ids)
    emit(vocab.stoi["|"], 0, g_text, -1)
    for k, c in enumerate(text):
        emit(vocab.stoi[c], k + 1, g_text, -1)
    if kind == "B":  # continuous positions over the whole sequence
        pos = list(range(len(ids)))
    off = start + 1
    targets = [(off + s, off + e) for s, e in text_spans[1:]]
    return Example(ids, pos, inst, addr, role, targets, arity=len(text_spans))


def collate(examples: list[Example], pad: int) -> tuple[torch.Tensor, torch.Tensor, TokenStructure]:
    """Right-pad to the longest example; padding is its own (never addressed) final instance."""
    L = max(len(e.ids) for e in examples)
    B = len(examples)
    ids = torch.full((B, L), pad, dtype=torch.long)
    tgt = torch.full((B, L), -100, dtype=torch.long)
    pos = torch.zeros(B, L, dtype=torch.long)
    inst = torch.zeros(B, L, dtype=torch.long)
    addr = torch.full((B, L), -1, dtype=torch.long)
    role = torch.zeros(B, L, dtype=torch.long)
    for b, e in enumerate(examples):
        n = len(e.ids)
        ids[b, :n] = torch.tensor(e.ids)
        tgt[b, : n - 1] = ids[b, 1:n]
        pos[b, :n] = torch.tensor(e.position)
        inst[b, :n] = torch.tensor(e.instance)
        inst[b, n:] = e.instance[-1] + 1
        addr[b, :n] = torch.tensor(e.address)
        role[b, :n] = torch.tensor(e.role)
    return ids, tgt, TokenStructure(position=pos, instance=inst, address=addr, role=role)


def sample_example(
    kind: str, data: KGData, vocab: Vocab, fact: Fact, rng: random.Random, distractors: list[Fact] = ()
) -> Example:
    order = list(range(len(fact.names)))
    rng.shuffle(order)
    template = rng.randrange(data.n_templates)
    text, spans = render_text(data, fact, order, template)
    prefix = [fact, *distractors]
    rng.shuffle(prefix)
    return encode(kind, data, vocab, prefix, text, spans, rng)


class Distractors:
    """Qualifying distractor facts within one name split (same names / same relation)."""

    def __init__(self, facts: list[Fact]):
        self.facts = facts
        self.by_rel: dict[int, list[Fact]] = defaultdict(list)
        self.by_name: dict[str, list[Fact]] = defaultdict(list)
        for f in facts:
            self.by_rel[f.rel].append(f)
            for n in set(f.names):
                self.by_name[n].append(f)

    def sample(self, setting: str, fact: Fact, rng: random.Random, k: int = 4) -> list[Fact]:
        if setting == "single":
            return []
        if setting == "same_rel":
            pool = [f for f in self.by_rel[fact.rel] if f.names != fact.names]
            return rng.sample(pool, min(k, len(pool)))
        if setting == "same_entities":
            # facts over exactly the same entities under other relations first; when fewer than k
            # exist (chain3: 3 per domain), those sharing the most entities next
            cand = {f for n in fact.names for f in self.by_name[n] if f != fact}
            tiers: dict[tuple[bool, int], list[Fact]] = defaultdict(list)
            for f in cand:
                shared = set(f.names) & set(fact.names)
                tiers[(set(f.names) == set(fact.names), len(shared))].append(f)
            out: list[Fact] = []
            for overlap in sorted(tiers, reverse=True):
                tier = sorted(tiers[overlap], key=lambda f: (f.rel, f.names))
                out += rng.sample(tier, min(k - len(out), len(tier)))
                if len(out) == k:
                    break
            return out
        raise ValueError(f"unknown setting {setting!r}; choose from {SETTINGS}")


@dataclass
class KGConfig:
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


def train_loop(model: LISformer, make_batch, pad: int, cfg, desc: str = "") -> list[float]:
    """``training.train_steps`` over batches of ``Example`` from ``make_batch()`` (AdamW, cosine
    schedule, clipping; ``cfg`` needs iters, lr, weight_decay, warmup and grad_clip)."""
    opt = configure_optimizer(model, cfg.lr, cfg.weight_decay)
    return train_steps(model, opt, cfg, lambda: collate(make_batch(), pad), desc=desc)


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
            out / "results.json", cfg.__dict__, ignore=("threads", "device"), old_names=OLD_FIELD_NAMES
        ),
    }
    for kind in tqdm(cfg.models, desc="models"):
        torch.manual_seed(cfg.seed)
        t0 = time.time()
        if eval_only:
            model = LISformer.from_pretrained(out / "checkpoints" / kind).to(dev)
            losses = [float("nan")]
            prev = out / "results.json"
            trained = json.loads(prev.read_text())["models"].get(kind, {}) if prev.is_file() else {}
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
        # eval-only keeps the training record of the run that made the checkpoint
        res.update({k: trained[k] for k in ("train_seconds", "final_train_loss") if k in trained})
        for (setting, split), items in sets.items():
            exs = [sample_example(kind, data, vocab, f, random.Random(seed), d) for f, d, seed in items]
            res["scores"][f"{setting}/{split}"] = score(model, exs, vocab.pad, cfg.eval_batch)
        results["models"][kind] = res
        if cfg.save_checkpoints and not eval_only:
            model.save_pretrained(out / "checkpoints" / kind)
        atomic_write_text(out / "results.json", json.dumps(results, indent=2))
    atomic_write_text(out / "results.md", markdown_tables(results))
    plot(results, out / "hit5.png")
    return results


def merge(folders: list[str | Path], out: str | Path, render=None, draw=None) -> dict:
    """Combine results.json of runs that trained different models (e.g. in parallel processes);
    ``render`` / ``draw`` replace the Markdown table and plot of the template diagnostic."""
    merged: dict = {"config": None, "data": None, "models": {}, "merged_from": [str(f) for f in folders]}
    for f in folders:
        res = json.loads((Path(f) / "results.json").read_text())
        merged["config"] = merged["config"] or res["config"]
        merged["data"] = merged["data"] or res["data"]
        merged["models"].update(res["models"])
    out = Path(out)
    kept = earlier_results(
        out / "results.json", merged["config"], ignore=("threads", "device"), old_names=OLD_FIELD_NAMES
    )
    merged["models"] = {**kept, **merged["models"]}
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "results.json", json.dumps(merged, indent=2))
    atomic_write_text(out / "results.md", (render or markdown_tables)(merged))
    if draw is not False:
        (draw or plot)(merged, out / "hit5.png")
    return merged


def markdown_tables(results: dict) -> str:
    models = list(results["models"])
    head = "| setting | names | facts | " + " | ".join(f"{m} h@1 / h@5 / PPL" for m in models) + " |"
    lines = [head, "|" + "---|" * (3 + len(models))]
    first = results["models"][models[0]]["scores"]
    for key in first:
        setting, split = key.split("/")
        for arity in sorted(first[key]):
            cells = []
            for m in models:
                r = results["models"][m]["scores"][key].get(arity)
                cells.append(f"{r['hit@1']:.3f} / {r['hit@5']:.3f} / {r['ppl']:.2f}" if r else "-")
            lines.append(f"| {setting} | {split} | {arity} | " + " | ".join(cells) + " |")
    params = ", ".join(
        f"{m}: {results['models'][m]['params']:,} params, {results['models'][m]['train_seconds']} s"
        for m in models
    )
    return "\n".join(lines) + f"\n\n{params}\n"


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(results["models"])
    keys = list(results["models"][models[0]]["scores"])
    fig, ax = plt.subplots(figsize=(7, 3.5))
    w = 0.8 / len(models)
    for k, m in enumerate(models):
        vals = [results["models"][m]["scores"][key]["all"]["hit@5"] for key in keys]
        ax.bar([i + k * w for i in range(len(keys))], vals, w, label=results["models"][m]["label"])
    ax.set_xticks([i + 0.4 - w / 2 for i in range(len(keys))])
    ax.set_xticklabels(keys, rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("hit@5 (target entities)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    atomic_savefig(fig, path, dpi=120)
    plt.close(fig)

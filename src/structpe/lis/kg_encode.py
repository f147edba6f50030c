"""Encoding KG examples for the LISformer (LIS paper App. F.4): character vocabulary, KG prefix + text.

An example is the KG prefix (facts joined by ';') then the text; only the characters of the
*target* entities are scored. ``Distractors`` adds the facts of the evaluation settings
(same_entities, same_rel). Kept apart from the data generator (``structpe.lis.kg_data``) and the
training and scoring runs (``structpe.lis.kg``).

Models (one causal character Transformer, ``LISformer``, three ways to address the KG prefix):
  B   serialized: role-marker tokens before each entity, continuous RoPE over the whole sequence.
  Bl  serialized content-addressing control: same tokens as B, positions reset per segment (each
      fact; the text), every completed fact segment gets a content-derived angle (F.4, Table 11).
  J   LIS: no role tokens; each KG entity character gets A = R_pos^p R_s R_e with p its position
      inside the entity, s its relation slot (learned angle table) and e a content-derived fact
      address (rotate by slot angle, mean-pool per fact, LayerNorm + Linear).
Bl and J use the causal two-term score of ``lisformer`` (a segment is addressed only for queries
in later segments).
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass

import torch

from structpe.lis.kg_data import CHARS, Fact, KGData, render_text
from structpe.lis.token_structure import TokenStructure

SETTINGS = ("single", "same_entities", "same_rel")


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

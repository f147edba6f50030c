"""Synthetic template-diverse KG data (LIS paper App. F.4): random names, chained facts, rendered text.

``template`` variant: 5 domains x 6 ordered roles; each domain chains a random permutation of the
names; every consecutive pair carries all 5 chain2 relations (roles r, r+1) and every consecutive
triple all 4 chain3 relations (r, r+1, r+2) -- 25 + 20 relation types. Each fact is rendered by
one of 12 sentence templates (3 clause forms x 4 frames, our own wording) with the entities in any
order. Training names and unseen test names are disjoint random lowercase strings of length 2-8.
Seeded and model-free, so it lives apart from encoding (``structpe.lis.kg_encode``) and the runs
(``structpe.lis.kg``).
"""

from __future__ import annotations

import random
import string
from collections import defaultdict
from dataclasses import dataclass

TEMPLATE_DOMAINS = {
    "family": ["great-grandson", "grandson", "son", "father", "grandfather", "great-grandfather"],
    "work": ["intern", "employee", "boss", "superboss", "director", "executive"],
    "military": ["recruit", "private", "sergeant", "captain", "major", "colonel"],
    "school": ["freshman", "sophomore", "junior", "senior", "graduate", "alumnus"],
    "church": ["acolyte", "deacon", "priest", "bishop", "archbishop", "cardinal"],
}


CLAUSES = ["{n} is the {r}", "the {r} is {n}", "{n} acts as the {r}"]


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

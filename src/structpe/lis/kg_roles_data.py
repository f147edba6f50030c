"""The data of the role-addressing KG/text diagnostics (LIS paper App. F.3: Tables 5, 6 and 7).

Data (seeded, ``generate``). Random lowercase names of length 2-8 form one chain per domain
(family / work / military: a random permutation of all names). A relation type names the
canonical chain slots of its arguments, in argument order, inside a 4-slot window (family: son,
father, grandfather, great grandfather). The paper gives the count (57), the arities (2, 3), the
three granularities (base 2-ary, base 3-ary, derived 2-ary) and the 4 slots, but not the list; ours,
per domain (19 x 3 = 57):
  * base 2-ary     every ordered pair of adjacent slots          (0,1) (1,0) (1,2) (2,1) (2,3) (3,2)
  * derived 2-ary  every ordered pair of non-adjacent slots      (0,2) (2,0) (1,3) (3,1) (0,3) (3,0)
  * base 3-ary     the two consecutive triples, named from the lower end, the upper end or the
                   middle: (0,1,2) (2,1,0) (1,0,2) (1,2,3) (3,2,1) (2,1,3)
  * derived 3-ary  (0,1,3)
This is the unique split into 2- and 3-ary types that gives the paper's 175-token vocabulary with one
role token per (relation, argument): 39 characters + 135 role tokens + the separator "|".
A fact is a relation type at one window start of its domain's chain.

Forms. KG: one unit per argument, in random order (the paper permutes entity-role units), ending in
".". The serialized model B writes each unit as <relation.argument> name; the LIS model J writes
" name" (space-delimited, no role tokens) and rotates every token of the unit, including the leading
space, by the slot angle of (relation, canonical slot): A(i) = R_pos^t R_s, continuous RoPE
positions times the learned slot factor, Prop. 4.7 with no instance factor. The leading space
carries the angle so the target role is specified before the entity's first character is predicted
(B's role token plays that part). Text: "son to father means x is the son and y is the father."
(only characters of the 39-character set; clauses in argument order for the zero-shot tables, any
order for Table 5); text tokens get no slot angle in either model.

Settings:
  transfer       (Table 5) KG-form and text-form facts as independent sequences, 3,000 names,
                 d 500; tiers below, scored in both forms.
  kg2text        (Table 6) paired "KG | text" sequences; condition on KG, score the text entities.
  bidirectional  (Table 7) 50/50 "KG | text" and "text | KG"; score both directions.
Tables 6 and 7 use 1,000 training names and 100 unseen test names (own chains).

Table 5 tiers (the paper names them; the exact split rule is ours). 10 % of the names are kg_excl
(their facts are trained in KG form only) and 10 % txt_excl (text form only); facts with both kinds
are not trained. Every base fact is trained. Derived facts are grouped by their entity set (e.g.
grandson / grandfather over the same two names, and the same pair seen from the next window): with
probability 0.15 the whole group is held out (generalization: no fact over these entities is
trained, only the base facts along the chain), with probability 0.15 one fact of a group of >= 2
is held out (transfer: other facts over the same entities were trained), otherwise all are trained.
  memorization   trained facts without exclusive names
  transfer / generalization   held-out derived facts as above, without exclusive names
  kg_excl_mem / txt_excl_mem  trained facts over an exclusive name (target: that name)
  kg_excl_gen / txt_excl_gen  held-out derived facts over an exclusive name (target: that name)
A query puts the target argument last (KG unit or text clause) and scores its characters only.

Seeded and model-free, so it lives apart from the configs, models and runs (``structpe.lis.kg_roles``).
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass

from structpe.lis.kg_data import random_names
from structpe.lis.kg_encode import Example

DOMAINS = {
    "family": ["son", "father", "grandfather", "great grandfather"],
    "work": ["employee", "boss", "superboss", "director"],
    "military": ["private", "sergeant", "captain", "major"],
}


N_SLOTS = 4


BASE_2 = [(0, 1), (1, 0), (1, 2), (2, 1), (2, 3), (3, 2)]


DERIVED_2 = [(0, 2), (2, 0), (1, 3), (3, 1), (0, 3), (3, 0)]


BASE_3 = [(0, 1, 2), (2, 1, 0), (1, 0, 2), (1, 2, 3), (3, 2, 1), (2, 1, 3)]


DERIVED_3 = [(0, 1, 3)]


CHARS = string.ascii_lowercase + " .'" + string.digits  # 39 characters (F.3)


SEP = "|"


MODELS = {"B": "serialized (role tokens, RoPE)", "J": "LIS slot angles (no instance factor)"}


TIERS = (
    "memorization",
    "transfer",
    "generalization",
    "kg_excl_mem",
    "kg_excl_gen",
    "txt_excl_mem",
    "txt_excl_gen",
)


@dataclass(frozen=True)
class RelationType:
    domain: str
    slots: tuple[int, ...]  # canonical chain slot of each argument, in argument order
    kind: str  # "base" | "derived"

    @property
    def name(self) -> str:
        return f"{self.domain}: " + " to ".join(DOMAINS[self.domain][s] for s in self.slots)


def relation_types() -> list[RelationType]:
    """The 57 relation types (module docstring), in a fixed order: index = relation id."""
    out = []
    for dom in DOMAINS:
        out += [RelationType(dom, s, "base") for s in BASE_2]
        out += [RelationType(dom, s, "derived") for s in DERIVED_2]
        out += [RelationType(dom, s, "base") for s in BASE_3]
        out += [RelationType(dom, s, "derived") for s in DERIVED_3]
    return out


RELATIONS = relation_types()


@dataclass(frozen=True)
class Fact:
    rel: int
    names: tuple[str, ...]  # in argument order
    start: int  # window start in the domain's chain


def chain_facts(names: list[str], rng: random.Random) -> list[Fact]:
    """Every relation type at every window start of its domain's chain (a permutation of names)."""
    facts = []
    chains = {}
    for dom in DOMAINS:
        chains[dom] = names[:]
        rng.shuffle(chains[dom])
    for r, rel in enumerate(RELATIONS):
        chain = chains[rel.domain]
        lo = min(rel.slots)
        span = max(rel.slots) - lo
        for w in range(len(chain) - span):
            facts.append(Fact(r, tuple(chain[w + s - lo] for s in rel.slots), w - lo))
    return facts


class Vocab:
    """The 175-token vocabulary of F.3: characters, one role token per (relation, argument), "|"."""

    def __init__(self) -> None:
        roles = [f"<{r}.{a}>" for r, rel in enumerate(RELATIONS) for a in range(len(rel.slots))]
        self.itos = list(CHARS) + roles + [SEP]
        self.stoi = {s: i for i, s in enumerate(self.itos)}
        self.pad = self.stoi[" "]  # padding follows the sequence and is never a target

    def role_token(self, rel: int, arg: int) -> int:
        return self.stoi[f"<{rel}.{arg}>"]

    def __len__(self) -> int:
        return len(self.itos)


def slot_role(rel: int, arg: int) -> int:
    """Row of the slot-angle table: (relation type, canonical slot of the argument)."""
    return rel * N_SLOTS + RELATIONS[rel].slots[arg]


class Builder:
    """Token sequences for model ``kind`` (B or J): KG / text pieces with per-token roles."""

    def __init__(self, kind: str, vocab: Vocab):
        if kind not in MODELS:
            raise ValueError(f"unknown KG model {kind!r}; choose from {list(MODELS)}")
        self.kind, self.vocab = kind, vocab
        self.ids: list[int] = []
        self.role: list[int] = []
        self.spans: dict[int, tuple[int, int]] = {}  # (argument) -> span of the last piece

    def _emit(self, text: str, role: int = -1) -> tuple[int, int]:
        a = len(self.ids)
        self.ids += [self.vocab.stoi[c] for c in text]
        self.role += [role] * len(text)
        return a, len(self.ids)

    def kg(self, fact: Fact, order: list[int]) -> dict[int, tuple[int, int]]:
        """KG form, units in ``order``; returns the span of every argument's name."""
        spans = {}
        for u, arg in enumerate(order):
            if self.kind == "B":
                if u:
                    self._emit(" ")
                self.ids.append(self.vocab.role_token(fact.rel, arg))
                self.role.append(-1)
                spans[arg] = self._emit(fact.names[arg])
            else:
                r = slot_role(fact.rel, arg)
                self._emit(" ", r)
                spans[arg] = self._emit(fact.names[arg], r)
        self._emit(".")
        return spans

    def text(self, fact: Fact, order: list[int]) -> dict[int, tuple[int, int]]:
        """Text form: relation phrase, then one clause per argument in ``order``."""
        rel = RELATIONS[fact.rel]
        roles = DOMAINS[rel.domain]
        self._emit(" to ".join(roles[s] for s in rel.slots) + " means ")
        spans = {}
        for u, arg in enumerate(order):
            if u:
                self._emit(" and ")
            spans[arg] = self._emit(fact.names[arg])
            self._emit(f" is the {roles[rel.slots[arg]]}")
        self._emit(".")
        return spans

    def sep(self) -> None:
        self._emit(SEP)

    def example(self, targets: list[tuple[int, int]], arity: int) -> Example:
        n = len(self.ids)
        return Example(
            ids=self.ids,
            position=list(range(n)),
            instance=[0] * n,
            address=[-1] * n,
            role=self.role,
            targets=targets,
            arity=arity,
        )


def paired(kind: str, vocab: Vocab, fact: Fact, direction: str, rng: random.Random) -> Example:
    """'KG | text' (kg2text) or 'text | KG' (text2kg); targets: every entity of the second part."""
    b = Builder(kind, vocab)
    n = len(fact.names)
    kg_order = rng.sample(range(n), n)
    if direction == "kg2text":
        b.kg(fact, kg_order)
        b.sep()
        spans = b.text(fact, list(range(n)))
    elif direction == "text2kg":
        b.text(fact, list(range(n)))
        b.sep()
        spans = b.kg(fact, kg_order)
    else:
        raise ValueError(f"unknown direction {direction!r} (kg2text | text2kg)")
    return b.example(sorted(spans.values()), n)


def single(kind: str, vocab: Vocab, fact: Fact, form: str, rng: random.Random, target: int | None) -> Example:
    """One fact in one form (Table 5); ``target`` (an argument) goes last and is the only scored
    entity; None: random order, nothing scored (training)."""
    n = len(fact.names)
    order = rng.sample(range(n), n)
    if target is not None:
        order = [a for a in order if a != target] + [target]
    b = Builder(kind, vocab)
    spans = b.kg(fact, order) if form == "kg" else b.text(fact, order)
    return b.example([spans[target]] if target is not None else [], n)


# --- data of the three settings ----------------------------------------------------------------------
@dataclass
class ZeroShotData:
    train_names: list[str]
    test_names: list[str]
    train_facts: list[Fact]
    test_facts: list[Fact]


def zero_shot_data(n_train: int, n_test: int, seed: int) -> ZeroShotData:
    """Tables 6/7: chains over training names and, separately, over disjoint unseen names."""
    rng = random.Random(seed)
    train = random_names(n_train, rng)
    test = random_names(n_test, rng, exclude=set(train))
    return ZeroShotData(train, test, chain_facts(train, rng), chain_facts(test, rng))


@dataclass
class TransferData:
    names: list[str]
    kg_excl: set[str]
    txt_excl: set[str]
    train: list[tuple[Fact, str]]  # (fact, form) training sequences
    tiers: dict[str, list[tuple[Fact, int]]]  # tier -> (fact, target argument) candidates


def transfer_data(
    n_names: int, seed: int, excl_frac: float = 0.1, p_gen: float = 0.15, p_transfer: float = 0.15
) -> TransferData:
    """Table 5's data and tiers (module docstring)."""
    rng = random.Random(seed)
    names = random_names(n_names, rng)
    facts = chain_facts(names, rng)
    shuffled = rng.sample(names, len(names))
    k = int(excl_frac * n_names)
    kg_excl, txt_excl = set(shuffled[:k]), set(shuffled[k : 2 * k])

    groups: dict[tuple[str, frozenset], list[Fact]] = {}
    for f in facts:
        if RELATIONS[f.rel].kind == "derived":
            groups.setdefault((RELATIONS[f.rel].domain, frozenset(f.names)), []).append(f)
    held: dict[Fact, str] = {}  # held-out derived fact -> "transfer" | "generalization"
    for key in sorted(groups, key=lambda g: (g[0], sorted(g[1]))):
        group = sorted(groups[key], key=lambda f: (f.rel, f.start))
        u = rng.random()
        if u < p_gen:
            held.update({f: "generalization" for f in group})
        elif u < p_gen + p_transfer and len(group) >= 2:
            held[rng.choice(group)] = "transfer"

    train: list[tuple[Fact, str]] = []
    tiers: dict[str, list[tuple[Fact, int]]] = {t: [] for t in TIERS}
    for f in facts:
        in_kg = [a for a, n in enumerate(f.names) if n in kg_excl]
        in_txt = [a for a, n in enumerate(f.names) if n in txt_excl]
        if in_kg and in_txt:
            continue  # could be trained in neither form
        excl = "kg_excl" if in_kg else "txt_excl" if in_txt else None
        forms = ["kg"] if in_kg else ["text"] if in_txt else ["kg", "text"]
        if f not in held:
            train += [(f, form) for form in forms]
        if excl is None:
            tier = held.get(f, "memorization")
            tiers[tier].append((f, rng.randrange(len(f.names))))
        else:
            tier = f"{excl}_{'gen' if f in held else 'mem'}"
            tiers[tier].append((f, rng.choice(in_kg or in_txt)))
    return TransferData(names, kg_excl, txt_excl, train, tiers)

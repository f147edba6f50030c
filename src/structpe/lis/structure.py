"""Labeled incidence structures (LIS paper §4.1, Definition 4.1) and their batched tensor form.

An LIS is (C, V, E, S, tau, I, sigma): content ids C, token occurrences V, instances E (hyperedges),
role labels S, the content map tau: V -> C, the incidence relation I ⊆ V x E and the role map
sigma: I -> S. A model never sees the sets; it sees one row per *endpoint* (an incidence (v, e)):
its content id tau(v), a local position (the within-role position the paper folds into the role
label), its role sigma(v, e) and its instance e. ``LISTensors`` is that form, and ``collate``
pads several structures into [B, n] tensors.

Builders cover the paper's examples (§4.1 items 1-5): sequences, KG triples (HEAD_r, TAIL_r),
rooted trees (PARENT, CHILD per edge), N-d grids and n-ary hyperedges.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class Incidence:
    """One endpoint: token occurrence ``token`` plays ``role`` in ``instance`` at ``position``.

    ``position`` is the within-role coordinate (a tuple: one entry per axis; () when unused).
    """

    token: int
    instance: int
    role: int
    position: tuple[int, ...] = ()


@dataclass
class IncidenceStructure:
    """(C, V, E, S, tau, I, sigma) with V = range(len(content)), E = instances, S = roles.

    ``content[v]`` is tau(v) (an id into ``content_vocab`` when one is given), ``instances`` and
    ``roles`` name the elements of E and S, ``incidences`` lists I with sigma and local positions.
    """

    content: list[int]
    instances: list[Hashable]
    roles: list[Hashable]
    incidences: list[Incidence]
    content_vocab: list[Hashable] | None = None
    n_axes: int = 1
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError when an incidence points outside V, E or S, or repeats a (v, e) pair."""
        seen: set[tuple[int, int]] = set()
        for inc in self.incidences:
            if not 0 <= inc.token < len(self.content):
                raise ValueError(f"incidence {inc} names token {inc.token}; |V| = {len(self.content)}")
            if not 0 <= inc.instance < len(self.instances):
                raise ValueError(
                    f"incidence {inc} names instance {inc.instance}; |E| = {len(self.instances)}"
                )
            if not 0 <= inc.role < len(self.roles):
                raise ValueError(f"incidence {inc} names role {inc.role}; |S| = {len(self.roles)}")
            if len(inc.position) not in (0, self.n_axes):
                raise ValueError(f"incidence {inc} has {len(inc.position)} position axes, want {self.n_axes}")
            key = (inc.token, inc.instance)
            if key in seen:
                raise ValueError(f"(token, instance) = {key} appears twice; I is a relation, sigma a map")
            seen.add(key)
        if self.content_vocab is not None:
            bad = [c for c in self.content if not 0 <= c < len(self.content_vocab)]
            if bad:
                raise ValueError(f"content ids {bad[:5]} outside the content vocabulary")

    # views of the relation -------------------------------------------------------------------
    def tau(self, v: int) -> int:
        return self.content[v]

    def sigma(self, v: int, e: int) -> Hashable:
        for inc in self.incidences:
            if inc.token == v and inc.instance == e:
                return self.roles[inc.role]
        raise KeyError(f"({v}, {e}) is not an incidence")

    def endpoints_of(self, e: int) -> list[Incidence]:
        return [inc for inc in self.incidences if inc.instance == e]

    def to_tensors(self) -> LISTensors:
        """One row per incidence, in the order of ``incidences``."""
        n = len(self.incidences)
        pos = torch.zeros(n, self.n_axes, dtype=torch.long)
        for k, inc in enumerate(self.incidences):
            if inc.position:
                pos[k] = torch.tensor(inc.position)
        return LISTensors(
            content=torch.tensor([self.content[i.token] for i in self.incidences], dtype=torch.long),
            token=torch.tensor([i.token for i in self.incidences], dtype=torch.long),
            position=pos if self.n_axes > 1 else pos[:, 0],
            role=torch.tensor([i.role for i in self.incidences], dtype=torch.long),
            instance=torch.tensor([i.instance for i in self.incidences], dtype=torch.long),
        )


@dataclass
class LISTensors:
    """Per-endpoint tensors: content (tau), token (v), position ([n] or [n, axes]), role, instance.

    After ``collate`` every field gains a leading batch dim and ``mask`` marks real endpoints;
    padded rows hold 0 (content, position, role) and -1 (token, instance).
    """

    content: torch.Tensor
    token: torch.Tensor
    position: torch.Tensor
    role: torch.Tensor
    instance: torch.Tensor
    mask: torch.Tensor | None = None

    def __len__(self) -> int:
        return self.content.shape[-1]


def collate(items: Sequence[LISTensors]) -> LISTensors:
    """Pad a list of unbatched ``LISTensors`` into one batch [B, n_max]."""
    if not items:
        raise ValueError("collate needs at least one structure")
    n = max(len(t) for t in items)
    B = len(items)
    extra = items[0].position.shape[1:]
    out = LISTensors(
        content=torch.zeros(B, n, dtype=torch.long),
        token=torch.full((B, n), -1, dtype=torch.long),
        position=torch.zeros(B, n, *extra, dtype=torch.long),
        role=torch.zeros(B, n, dtype=torch.long),
        instance=torch.full((B, n), -1, dtype=torch.long),
        mask=torch.zeros(B, n, dtype=torch.bool),
    )
    for b, t in enumerate(items):
        if t.position.shape[1:] != extra:
            raise ValueError("all structures in a batch need the same number of position axes")
        k = len(t)
        out.content[b, :k] = t.content
        out.token[b, :k] = t.token
        out.position[b, :k] = t.position
        out.role[b, :k] = t.role
        out.instance[b, :k] = t.instance
        out.mask[b, :k] = True
    return out


# builders (§4.1 items 1-5) ---------------------------------------------------------------------
def from_sequence(content: Sequence[int], *, roles_as_positions: bool = False) -> IncidenceStructure:
    """Item 1: one instance e_seq. The paper's roles S = {1..T} with sigma(v_t) = t are kept as the
    local *position* t (roles_as_positions=False: one role "tok") -- the factored form A(p, s, e)
    of Prop. 4.7 -- or literally as T role labels (roles_as_positions=True)."""
    T = len(content)
    if roles_as_positions:
        incs = [Incidence(t, 0, t, (t,)) for t in range(T)]
        roles: list[Hashable] = list(range(1, T + 1))
    else:
        incs = [Incidence(t, 0, 0, (t,)) for t in range(T)]
        roles = ["tok"]
    return IncidenceStructure(list(content), ["seq"], roles, incs)


def from_kg_triples(
    triples: Sequence[tuple[Sequence[int], str, Sequence[int]]],
    relations: Sequence[str] | None = None,
) -> IncidenceStructure:
    """Item 2: each (h, r, t) is an instance with roles HEAD_r and TAIL_r.

    Entities are content-id sequences (e.g. characters of a name); every character is a token
    occurrence, its local position is its index inside the entity string. ``relations`` fixes the
    role vocabulary (so two structures share role ids); by default it is the relations seen.
    """
    rels = list(relations) if relations is not None else sorted({r for _, r, _ in triples})
    roles: list[Hashable] = [f"{kind}_{r}" for r in rels for kind in ("HEAD", "TAIL")]
    role_id = {name: k for k, name in enumerate(roles)}
    content: list[int] = []
    incs: list[Incidence] = []
    instances: list[Hashable] = []
    for e, (h, r, t) in enumerate(triples):
        if r not in rels:
            raise ValueError(f"relation {r!r} not in the relation vocabulary")
        instances.append((tuple(h), r, tuple(t)))
        for kind, ent in (("HEAD", h), ("TAIL", t)):
            if not ent:
                raise ValueError(f"empty entity in triple {e}")
            for p, c in enumerate(ent):
                incs.append(Incidence(len(content), e, role_id[f"{kind}_{r}"], (p,)))
                content.append(int(c))
    return IncidenceStructure(content, instances, roles, incs)


def from_tree(parents: Sequence[int], content: Sequence[int]) -> IncidenceStructure:
    """Item 3: each parent-child edge is an instance with roles {PARENT, CHILD}.

    ``parents[v]`` is the parent of node v (-1 for the root). A node with children takes part in
    several edges, so it has several endpoints (one per incidence). Position = depth of the node,
    which makes the tree's level a coordinate (HIBERT/HiRoPE style) when a model wants it.
    """
    if len(parents) != len(content):
        raise ValueError("parents and content must have one entry per node")
    roots = [v for v, p in enumerate(parents) if p < 0]
    if len(roots) != 1:
        raise ValueError(f"a rooted tree has exactly one root, got {len(roots)}")
    depth = [-1] * len(parents)
    for v in range(len(parents)):
        chain, u = [], v
        while depth[u] < 0 and parents[u] >= 0:
            chain.append(u)
            u = parents[u]
            if len(chain) > len(parents):
                raise ValueError("parents contain a cycle")
        if parents[u] < 0:
            depth[u] = 0
        for w in reversed(chain):
            depth[w] = depth[parents[w]] + 1
    incs: list[Incidence] = []
    instances: list[Hashable] = []
    for v, p in enumerate(parents):
        if p < 0:
            continue
        e = len(instances)
        instances.append((p, v))
        incs.append(Incidence(p, e, 0, (depth[p],)))
        incs.append(Incidence(v, e, 1, (depth[v],)))
    return IncidenceStructure(list(content), instances, ["PARENT", "CHILD"], incs)


def from_grid(content: torch.Tensor) -> IncidenceStructure:
    """Item 4: an N-d grid (e.g. image patches) is one instance; each cell's coordinates
    (i_1..i_N) are its multi-axis position (RoPE-2D when N = 2)."""
    shape = tuple(content.shape)
    if not shape:
        raise ValueError("a grid needs at least one axis")
    coords = torch.cartesian_prod(*[torch.arange(s) for s in shape]).reshape(-1, len(shape))
    flat = content.reshape(-1).tolist()
    incs = [Incidence(v, 0, 0, tuple(int(c) for c in coords[v])) for v in range(len(flat))]
    return IncidenceStructure(flat, ["grid"], ["cell"], incs, n_axes=len(shape))


def from_hyperedges(
    edges: Sequence[tuple[str, Sequence[tuple[str, Sequence[int]]]]],
) -> IncidenceStructure:
    """Item 5: n-ary facts. Each edge is (relation, [(role, entity content ids), ...]); role labels
    are "relation:role" so a drug in one relation and a drug in another are different roles."""
    roles: list[Hashable] = []
    role_id: dict[Hashable, int] = {}
    content: list[int] = []
    incs: list[Incidence] = []
    instances: list[Hashable] = []
    for e, (rel, parts) in enumerate(edges):
        names = [r for r, _ in parts]
        if len(set(names)) != len(names):
            raise ValueError(f"hyperedge {e} ({rel}) repeats a role: {names}")
        instances.append(rel)
        for r, ent in parts:
            label = f"{rel}:{r}"
            if label not in role_id:
                role_id[label] = len(roles)
                roles.append(label)
            for p, c in enumerate(ent):
                incs.append(Incidence(len(content), e, role_id[label], (p,)))
                content.append(int(c))
    return IncidenceStructure(content, instances, roles, incs)

"""KG/text generator and sequence encodings (LIS App. F.3-F.4)."""

import random

import pytest
import torch

from structpe.lis import kg, kg_data
from structpe.lis.lisformer import LISformerConfig


def test_generator_deterministic_and_names_disjoint():
    a = kg.generate("template", 60, 20, seed=3)
    b = kg.generate("template", 60, 20, seed=3)
    c = kg.generate("template", 60, 20, seed=4)
    assert a.train_names == b.train_names and a.train_facts == b.train_facts and a.test_facts == b.test_facts
    assert a.train_names != c.train_names
    assert not set(a.train_names) & set(a.test_names)
    assert all(2 <= len(n) <= 8 and n.isalpha() and n.islower() for n in a.train_names + a.test_names)
    train_ents = {n for f in a.train_facts for n in f.names}
    test_ents = {n for f in a.test_facts for n in f.names}
    assert train_ents <= set(a.train_names) and test_ents <= set(a.test_names)
    # 5 domains x (5 chain2 + 4 chain3) relations; every consecutive pair/triple carries all of them
    assert len(a.relations) == 45
    assert len(a.train_facts) == 5 * (59 * 5 + 58 * 4)  # paper: 3,000 names -> 134,935 facts
    with pytest.raises(ValueError, match="kg_roles"):  # App. F.3's chains live in kg_roles
        kg.generate("chains", 30, 10, seed=0)


def test_template_variants_and_spans():
    d = kg.generate("template", 30, 10, seed=0)
    f2 = next(f for f in d.train_facts if len(f.names) == 2)
    f3 = next(f for f in d.train_facts if len(f.names) == 3)
    for f, n_variants in ((f2, 24), (f3, 72)):
        texts = set()
        orders = (
            [[0, 1], [1, 0]]
            if len(f.names) == 2
            else [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]]
        )
        for order in orders:
            for t in range(12):
                text, spans = kg_data.render_text(d, f, order, t)
                assert [text[a:b] for a, b in spans] == [f.names[s] for s in order]
                texts.add(text)
        assert len(texts) == n_variants


def test_encodings_and_targets():
    d = kg.generate("template", 30, 10, seed=0)
    v = kg.Vocab(d)
    f = next(f for f in d.train_facts if len(f.names) == 3)
    for kind in ("B", "Bl", "J"):
        e = kg.sample_example(kind, d, v, f, random.Random(0))
        has_roles = any(i in v.role_token.values() for i in e.ids)
        assert has_roles == (kind != "J")  # LIS: roles live in the address, not in the tokens
        assert len(e.targets) == 2  # the first text entity is given, the others are scored
        decoded = ["".join(v.itos[i] for i in e.ids[a:b]) for a, b in e.targets]
        assert all(n in f.names for n in decoded)
        if kind == "J":
            assert max(e.role) > 0 and all(a in (-1, 0) for a in e.address)
        if kind == "B":
            assert e.position == list(range(len(e.ids)))


def test_distractors():
    d = kg.generate("template", 40, 10, seed=0)
    pool = kg.Distractors(d.train_facts)
    rng = random.Random(0)
    f = d.train_facts[7]
    same_rel = pool.sample("same_rel", f, rng)
    assert len(same_rel) == 4 and all(x.rel == f.rel and x.names != f.names for x in same_rel)
    same_ent = pool.sample("same_entities", f, rng)
    assert len(same_ent) == 4 and all(x != f and set(x.names) & set(f.names) for x in same_ent)
    if len(f.names) == 2:  # chain2: the 4 other relations over the same pair
        assert all(set(x.names) == set(f.names) and x.rel != f.rel for x in same_ent)


def test_kg_models_train_and_score():
    torch.manual_seed(0)
    cfg = kg.KGConfig(
        n_train_names=30,
        n_test_names=10,
        iters=6,
        batch_size=8,
        d_model=32,
        n_layers=1,
        lr=3e-3,
        warmup=0,
        threads=0,
        device="cpu",
    )
    d = kg.generate("template", 30, 10, seed=0)
    v = kg.Vocab(d)
    for kind in ("B", "Bl", "J"):
        m = kg.build_model(kind, cfg, v, d)
        assert m.cfg.pe == ("rope" if kind == "B" else "lis")
        losses = kg.train_kg(m, kind, d, v, cfg)
        assert losses[-1] < losses[0]
        exs = [kg.sample_example(kind, d, v, f, random.Random(i)) for i, f in enumerate(d.test_facts[:6])]
        s = kg.score(m, exs, v.pad)
        assert 0 <= s["all"]["hit@1"] <= s["all"]["hit@5"] <= 1 and s["all"]["ppl"] > 1
    assert LISformerConfig(n_roles=len(d.role_names)).n_roles == 31

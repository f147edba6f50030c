"""Role-addressing KG/text diagnostics (LIS App. F.3: Tables 5-7): inventory, sizes, splits,
causality and a tiny end-to-end run of every setting."""

import argparse
import json
import random
from collections import Counter

import pytest
import torch
import yaml

from structpe.lis import kg_roles as K
from structpe.lis import kg_roles_data as KD
from structpe.lis.commands import load_profile, register
from structpe.lis.kg_encode import collate
from structpe.lis.token_structure import TokenStructure


def test_relation_inventory():
    rels = K.RELATIONS
    assert len(rels) == 57 and len(set(rels)) == 57
    assert Counter(len(r.slots) for r in rels) == {2: 36, 3: 21}
    assert Counter(r.domain for r in rels) == {"family": 19, "work": 19, "military": 19}
    per_kind = Counter((len(r.slots), r.kind) for r in rels)
    assert per_kind == {(2, "base"): 18, (2, "derived"): 18, (3, "base"): 18, (3, "derived"): 3}
    for r in rels:
        assert all(0 <= s < K.N_SLOTS for s in r.slots) and len(set(r.slots)) == len(r.slots)
        adjacent = len(r.slots) == 2 and abs(r.slots[0] - r.slots[1]) == 1
        consecutive = len(r.slots) == 3 and max(r.slots) - min(r.slots) == 2
        assert (r.kind == "base") == (adjacent or consecutive)
    assert len(K.Vocab()) == 175  # 39 characters + 135 role tokens + "|" (F.3)


@pytest.mark.parametrize("d_model, table", [(60, 6840), (500, 57000)])
def test_slot_angle_table_size(d_model, table):
    cfg = K.RoleKGConfig(d_model=d_model, n_layers=1)
    b = K.build_model("B", cfg, K.Vocab())
    j = K.build_model("J", cfg, K.Vocab())
    assert j.addresses.roles.table.numel() == table  # 57 x 4 x d/2, no unused row
    assert j.num_params() - b.num_params() == table
    if d_model == 60:  # the paper: about 153K and 160K with three layers
        cfg3 = K.RoleKGConfig()
        assert abs(K.build_model("B", cfg3, K.Vocab()).num_params() - 153_000) < 500


def test_chain_facts_and_zero_shot_names():
    z = K.zero_shot_data(40, 12, seed=1)
    assert not set(z.train_names) & set(z.test_names)
    for facts, names in ((z.train_facts, z.train_names), (z.test_facts, z.test_names)):
        assert {n for f in facts for n in f.names} <= set(names)
        assert {f.rel for f in facts} == set(range(57))
        # every relation type at every window start: 40 - span facts of each
        for r, rel in enumerate(K.RELATIONS):
            span = max(rel.slots) - min(rel.slots)
            assert sum(f.rel == r for f in facts) == len(names) - span
    assert K.zero_shot_data(40, 12, seed=1) == z


def test_transfer_tiers_are_disjoint_as_defined():
    d = K.transfer_data(200, seed=0)
    assert not d.kg_excl & d.txt_excl and len(d.kg_excl) == len(d.txt_excl) == 20
    trained = {f for f, _ in d.train}
    for f, form in d.train:
        if form == "text":
            assert not set(f.names) & d.kg_excl  # kg_excl names never in text-form training facts
        else:
            assert not set(f.names) & d.txt_excl
    trained_sets = Counter((K.RELATIONS[f.rel].domain, frozenset(f.names)) for f in trained)
    for tier, items in d.tiers.items():
        assert items, tier
        for f, target in items:
            excl = set(f.names) & (d.kg_excl | d.txt_excl)
            if tier.endswith("_gen") or tier in ("transfer", "generalization"):
                assert f not in trained and K.RELATIONS[f.rel].kind == "derived"
            else:
                assert f in trained
            if tier.startswith("kg_excl"):
                assert f.names[target] in d.kg_excl
            elif tier.startswith("txt_excl"):
                assert f.names[target] in d.txt_excl
            else:
                assert not excl
            key = (K.RELATIONS[f.rel].domain, frozenset(f.names))
            if tier == "generalization":
                assert trained_sets[key] == 0  # nothing over these entities was trained
            if tier == "transfer":
                assert trained_sets[key] > 0  # another fact over the same entities was
    assert K.transfer_data(200, seed=0).tiers == d.tiers


def test_sequences_roles_and_targets():
    v = K.Vocab()
    f = next(f for f in K.zero_shot_data(30, 5, seed=0).train_facts if len(f.names) == 3)
    for kind in ("B", "J"):
        for direction in ("kg2text", "text2kg"):
            e = K.paired(kind, v, f, direction, random.Random(0))
            assert len(e.ids) <= 192
            got = sorted("".join(v.itos[i] for i in e.ids[a:b]) for a, b in e.targets)
            assert got == sorted(f.names)
            sep = e.ids.index(v.stoi["|"])
            assert all((a > sep) for a, _ in e.targets)  # only the conditioned-on side's partner
            has_role_tokens = any(v.itos[i].startswith("<") for i in e.ids)
            assert has_role_tokens == (kind == "B")
            if kind == "J":  # KG names and their leading spaces carry slot rows; "." and text none
                kg_part = range(0, sep - 1) if direction == "kg2text" else range(sep + 1, len(e.ids) - 1)
                assert all(e.role[t] >= 0 for t in kg_part)
                text_part = range(sep, len(e.ids)) if direction == "kg2text" else range(0, sep + 1)
                assert all(e.role[t] == -1 for t in text_part)
        for form in ("kg", "text"):
            e = K.single(kind, v, f, form, random.Random(1), target=1)
            ((a, b),) = e.targets
            assert "".join(v.itos[i] for i in e.ids[a:b]) == f.names[1]
            rel = K.RELATIONS[f.rel]
            tail = "." if form == "kg" else f" is the {KD.DOMAINS[rel.domain][rel.slots[1]]}."
            assert "".join(v.itos[i] for i in e.ids[b:]) == tail  # the target comes last


@pytest.mark.parametrize("kind", ["B", "J"])
def test_models_are_causal(kind):
    """Changing any token never changes a logit at an earlier position (both models)."""
    torch.manual_seed(0)
    v = K.Vocab()
    model = K.build_model(kind, K.RoleKGConfig(d_model=12, n_layers=2, dropout=0.0), v).eval()
    if model.addresses.roles is not None:
        with torch.no_grad():
            model.addresses.roles.table.normal_(0, 2.0)
    f = next(f for f in K.zero_shot_data(20, 5, seed=0).train_facts if len(f.names) == 3)
    e = K.paired(kind, v, f, "kg2text", random.Random(0))
    ids, _, st = collate([e], v.pad)
    base = model(ids, structure=st).logits
    for t in range(0, ids.shape[1], 7):
        ids2, role2 = ids.clone(), st.role.clone()
        ids2[0, t] = (ids2[0, t] + 5) % len(v)
        role2[0, t:] = (role2[0, t:] + 3) % 228  # later roles change too
        out = model(ids2, structure=TokenStructure(st.position, st.instance, st.address, role2)).logits
        assert torch.allclose(out[0, :t], base[0, :t], atol=1e-5)
        assert not torch.allclose(out[0, t:], base[0, t:], atol=1e-5)


def _parser():
    p = argparse.ArgumentParser(prog="structpe")
    register(p.add_subparsers(dest="command", required=True))
    return p


def test_profiles():
    for setting in ("transfer", "kg2text", "bidirectional"):
        for profile in ("cpu", "paper"):
            cfg = K.RoleKGConfig(**load_profile(f"kg_{setting}", profile, None))
            assert cfg.setting == setting and cfg.n_heads == 1 and cfg.n_layers == 3
            assert cfg.d_model == (500 if setting == "transfer" else 60)
            assert (cfg.iters == 100_000) == (profile == "paper")


@pytest.mark.parametrize("setting", ["transfer", "kg2text", "bidirectional"])
def test_end_to_end(tmp_path, setting):
    cfg = dict(setting=setting, n_train_names=30, n_test_names=8, iters=2, batch_size=4, d_model=8, n_eval=4)
    cfg.update(eval_batch=8, device="cpu", n_layers=1, threads=0)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    argv = ["lis", "kg", "--setting", setting, "--config", str(path), "--out", str(tmp_path / "o")]
    args = _parser().parse_args(argv)
    assert args.func(args) == 0
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    assert set(res["models"]) == {"B", "J"} and res["data"]["relations"] == 57
    keys = set(res["models"]["J"]["scores"])
    if setting == "transfer":
        assert keys == {f"{t}/{form}" for t in KD.TIERS for form in ("text", "kg")}
    else:
        dirs = ["kg2text"] + (["text2kg"] if setting == "bidirectional" else [])
        assert keys == {f"{d}/{s}" for d in dirs for s in ("train", "test")}
    assert res["models"]["J"]["slot_angle_params"] == 57 * 4 * 4
    # eval-only re-scores the checkpoints and keeps the training record
    args = _parser().parse_args([*argv, "--eval-only"])
    assert args.func(args) == 0
    again = json.loads((tmp_path / "o" / "results.json").read_text())
    assert again["models"]["B"]["scores"] == res["models"]["B"]["scores"]
    assert again["models"]["B"]["train_seconds"] == res["models"]["B"]["train_seconds"]
    # B and J trained in separate processes combine with --merge
    args = _parser().parse_args(
        ["lis", "kg", "--setting", setting, "--merge", str(tmp_path / "o"), "--out", str(tmp_path / "m")]
    )
    assert args.func(args) == 0
    assert json.loads((tmp_path / "m" / "results.json").read_text())["models"].keys() == {"B", "J"}
    # a profile that contradicts --setting is refused
    bad = _parser().parse_args(
        ["lis", "kg", "--setting", "kg2text", "--config", str(path), "--out", str(tmp_path / "x")]
    )
    if setting != "kg2text":
        with pytest.raises(ValueError, match="setting"):
            bad.func(bad)


def test_learning_curve(tmp_path):
    """--eval-every scores every evaluation set at those updates and leaves the training itself
    unchanged (the same final scores as a run without the curve)."""
    cfg = dict(setting="kg2text", n_train_names=30, n_test_names=8, iters=4, batch_size=4, d_model=8)
    cfg.update(n_eval=4, eval_batch=8, device="cpu", n_layers=1, threads=0, models=["J"])
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    base = ["lis", "kg", "--setting", "kg2text", "--config", str(path)]
    args = _parser().parse_args([*base, "--eval-every", "2", "--out", str(tmp_path / "curve")])
    assert args.func(args) == 0
    res = json.loads((tmp_path / "curve" / "results.json").read_text())
    curve = res["models"]["J"]["curve"]
    assert [p["updates"] for p in curve] == [2, 4]
    assert set(curve[0]["scores"]) == {"kg2text/train", "kg2text/test"}
    # the last point is the final model: the same numbers as the final scores
    assert curve[-1]["scores"]["kg2text/test"] == res["models"]["J"]["scores"]["kg2text/test"]["all"]
    assert "Learning curve" in (tmp_path / "curve" / "results.md").read_text()
    assert (tmp_path / "curve" / "curve.png").is_file()
    args = _parser().parse_args([*base, "--out", str(tmp_path / "plain")])
    assert args.func(args) == 0
    plain = json.loads((tmp_path / "plain" / "results.json").read_text())["models"]["J"]
    assert "curve" not in plain and not (tmp_path / "plain" / "curve.png").exists()
    assert plain["scores"] == res["models"]["J"]["scores"]


def test_eval_every_refused_where_it_means_nothing(tmp_path):
    from structpe.errors import StructpeError

    args = _parser().parse_args(["lis", "kg", "--eval-every", "5", "--out", str(tmp_path / "t")])
    with pytest.raises(StructpeError, match="--eval-every"):
        args.func(args)
    argv = ["lis", "kg", "--setting", "kg2text", "--eval-every", "-1", "--out", str(tmp_path / "n")]
    args = _parser().parse_args(argv)
    with pytest.raises(StructpeError, match="--eval-every must be >= 0"):
        args.func(args)

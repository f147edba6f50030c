"""``structpe lis`` command line: help texts and tiny end-to-end runs."""

import argparse
import json

import pytest
import torch
import yaml

from structpe.io import sha256_file
from structpe.lis.commands import load_profile, register


def _parser():
    p = argparse.ArgumentParser(prog="structpe")
    register(p.add_subparsers(dest="command", required=True))
    return p


@pytest.mark.parametrize(
    "argv", [["lis", "--help"], ["lis", "shakespeare", "--help"], ["lis", "kg", "--help"]]
)
def test_help(argv, capsys):
    with pytest.raises(SystemExit) as e:
        _parser().parse_args(argv)
    assert e.value.code == 0
    assert "usage" in capsys.readouterr().out


def test_profiles_exist():
    for diag in ("shakespeare", "kg"):
        for prof in ("tiny", "gpu"):
            assert load_profile(diag, prof, None)
    with pytest.raises(FileNotFoundError):
        load_profile("kg", "huge", None)


@pytest.mark.parametrize(
    "argv", [["lis", "shakespeare"], ["lis", "kg"], ["lis", "kg", "--setting", "transfer"]]
)
def test_autocast_bf16_takes_true_false_or_auto(argv, tmp_path, capsys, monkeypatch):
    from structpe import hardware
    from structpe.cli import main
    from structpe.lis.kg import KGConfig
    from structpe.lis.kg_roles import RoleKGConfig
    from structpe.lis.shakespeare import ShakespeareConfig

    bad = tmp_path / "bad.yaml"
    bad.write_text("iters: 2\nautocast_bf16: maybe\n")
    assert main([*argv, "--config", str(bad), "--out", str(tmp_path / "out")]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(bad) in err and "true, false or auto" in err
    assert not (tmp_path / "out").exists()
    for cls in (ShakespeareConfig, KGConfig, RoleKGConfig):
        for native in (True, False):
            monkeypatch.setattr(hardware, "native_bf16", lambda native=native: native)
            assert cls(autocast_bf16="auto").resolved_bf16() is native
        assert cls(autocast_bf16=True).resolved_bf16() is True
        assert cls().resolved_bf16() is False


@pytest.mark.parametrize("bf16", [True, False])
def test_kg_training_runs_under_the_configured_autocast(bf16, monkeypatch):
    """The KG diagnostics hand their config's bf16 switch to the one training loop."""
    from structpe.lis import kg

    seen = {}

    def fake_train_steps(model, opt, cfg, next_batch, **kw):
        seen.update(kw)
        return []

    monkeypatch.setattr(kg, "train_steps", fake_train_steps)
    model = torch.nn.Linear(2, 2)
    kg.train_loop(model, lambda: [], 0, kg.KGConfig(autocast_bf16=bf16))
    assert seen["autocast_bf16"] is bf16


def test_dropout_and_ablation_models_from_the_command_line(capsys):
    from structpe.cli import main
    from structpe.lis.commands import build_config
    from structpe.lis.shakespeare import ShakespeareConfig

    args = _parser().parse_args(
        ["lis", "shakespeare", "--models", "lis-qprev", "random-qprev", "--dropout", "0.2"]
    )
    cfg = build_config(ShakespeareConfig, "shakespeare", args)
    assert cfg.dropout == 0.2 and cfg.models == ["lis-qprev", "random-qprev"]
    tiny = build_config(ShakespeareConfig, "shakespeare", _parser().parse_args(["lis", "shakespeare"]))
    assert tiny.dropout == 0.0  # without the flag: the profile's
    assert main(["lis", "shakespeare", "--dropout", "1.5", "--out", "unused"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--dropout must be in [0, 1)" in err


def test_kg_end_to_end(tmp_path):
    cfg = {
        "n_train_names": 20,
        "n_test_names": 8,
        "iters": 2,
        "batch_size": 4,
        "d_model": 32,
        "n_layers": 1,
        "n_eval": 4,
        "eval_batch": 4,
        "device": "cpu",
        "save_checkpoints": True,
    }
    path = tmp_path / "kg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    args = _parser().parse_args(["lis", "kg", "--config", str(path), "--out", str(tmp_path / "out")])
    assert args.func(args) == 0
    res = json.loads((tmp_path / "out" / "results.json").read_text())
    assert set(res["models"]) == {"B", "Bl", "J"}
    assert res["provenance"]["seed"] == res["config"]["seed"]
    assert res["provenance"]["data_generated"].startswith("synthetic")
    assert (tmp_path / "out" / "hit5.png").is_file() and (tmp_path / "out" / "results.md").is_file()
    assert (tmp_path / "out" / "checkpoints" / "J" / "model.safetensors").is_file()


@pytest.mark.data
def test_shakespeare_end_to_end(tmp_path, shared_data):
    cfg = {
        "n_chars": 20000,
        "eval_ctx": [64, 128],
        "eval_chars": 256,
        "iters": 2,
        "batch_size": 2,
        "train_ctx": 64,
        "d_model": 32,
        "n_layers": 1,
        "device": "cpu",
        "save_checkpoints": False,
    }
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(cfg))
    args = _parser().parse_args(
        [
            "lis",
            "shakespeare",
            "--config",
            str(path),
            "--out",
            str(tmp_path / "o"),
            "--data",
            str(shared_data),
        ]
    )
    assert args.func(args) == 0
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    assert set(res["models"]) == {"lis", "rope", "alibi", "random"}
    corpus = shared_data / "tinyshakespeare" / "input.txt"
    assert res["provenance"]["data"] == [{"path": str(corpus.resolve()), "sha256": sha256_file(corpus)}]
    assert all(set(r["ppl"]) == {"64", "128"} for r in res["models"].values())
    for name in ("lis", "random"):  # the dilution diagnostic: one mass per layer and context
        mass = res["models"][name]["own_line_mass"]
        assert set(mass) == {"64", "128"} and all(len(m) == 1 and 0 <= m[0] <= 1 for m in mass.values())
    assert "own line" in (tmp_path / "o" / "results.md").read_text()


def test_kg_eval_only_and_merge(tmp_path):
    cfg = {
        "n_train_names": 20,
        "n_test_names": 8,
        "iters": 1,
        "batch_size": 4,
        "d_model": 32,
        "n_layers": 1,
        "n_eval": 4,
        "eval_batch": 4,
        "device": "cpu",
        "settings": ["single"],
    }
    path = tmp_path / "kg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    p = _parser()
    for m in ("B", "J"):
        a = p.parse_args(["lis", "kg", "--config", str(path), "--models", m, "--out", str(tmp_path / m)])
        assert a.func(a) == 0
    res = json.loads((tmp_path / "J" / "results.json").read_text())
    first = res["models"]["J"]["scores"]
    assert res["models"]["J"]["bf16"] is False
    del res["models"]["J"]["bf16"]  # a record from before models recorded their precision
    (tmp_path / "J" / "results.json").write_text(json.dumps(res))
    a = p.parse_args(
        ["lis", "kg", "--config", str(path), "--models", "J", "--out", str(tmp_path / "J"), "--eval-only"]
    )
    assert a.func(a) == 0
    again = json.loads((tmp_path / "J" / "results.json").read_text())["models"]["J"]
    assert again["scores"] == first  # same checkpoint, same seeded evaluation set
    assert "bf16" not in again  # re-scoring does not claim how the checkpoint was trained
    a = p.parse_args(
        ["lis", "kg", "--merge", str(tmp_path / "B"), str(tmp_path / "J"), "--out", str(tmp_path / "all")]
    )
    assert a.func(a) == 0
    assert set(json.loads((tmp_path / "all" / "results.json").read_text())["models"]) == {"B", "J"}


def test_merge_refuses_runs_of_another_configuration(tmp_path, capsys):
    """One table holds one configuration: runs that differ in what was trained do not merge; runs
    that differ only in how a sitting ran (threads, bf16 autocast) do."""
    from structpe.cli import main

    base = {
        "n_train_names": 20,
        "n_test_names": 8,
        "iters": 1,
        "batch_size": 4,
        "d_model": 16,
        "n_layers": 1,
        "n_eval": 4,
        "eval_batch": 4,
        "device": "cpu",
        "settings": ["single"],
    }
    runs = {"B": {}, "J": {"threads": 1, "autocast_bf16": True}, "J-lr": {"lr": 1e-3}}
    for name, change in runs.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump({**base, **change}))
        argv = ["lis", "kg", "--config", str(path), "--models", name[0], "--out", str(tmp_path / name)]
        assert main(argv) == 0
    assert json.loads((tmp_path / "J" / "results.json").read_text())["models"]["J"]["bf16"] is True
    ok = ["lis", "kg", "--merge", str(tmp_path / "B"), str(tmp_path / "J"), "--out", str(tmp_path / "ok")]
    assert main(ok) == 0
    capsys.readouterr()
    bad = ["lis", "kg", "--merge", str(tmp_path / "B"), str(tmp_path / "J-lr"), "--out", str(tmp_path / "no")]
    assert main(bad) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(tmp_path / "J-lr") in err and "'lr'" in err
    assert not (tmp_path / "no").exists()


def test_shakespeare_merge_of_seeds_keys_models_by_seed_and_shows_the_spread(tmp_path, shared_data, capsys):
    """Runs that differ only in their seed merge into one table: one row per model and seed, and a
    mean ± sd row per model with two seeds or more; a run that differs in anything else still does not."""
    from structpe.cli import main

    cfg = {"n_chars": 20000, "eval_ctx": [64, 128], "eval_chars": 256, "iters": 2, "batch_size": 2,
           "train_ctx": 64, "d_model": 32, "n_layers": 1, "device": "cpu", "save_checkpoints": False}
    runs = {"s0": ("lis", {"seed": 0}), "s1": ("lis", {"seed": 1}), "a0": ("alibi", {"seed": 0}),
            "lr": ("lis", {"seed": 2, "lr": 1e-2})}
    for name, (model, change) in runs.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump({**cfg, **change}))
        argv = ["lis", "shakespeare", "--config", str(path), "--models", model, "--out", str(tmp_path / name),
                "--data", str(shared_data)]
        assert main(argv) == 0
    folders = [str(tmp_path / n) for n in ("s0", "s1", "a0")]
    assert main(["lis", "shakespeare", "--merge", *folders, "--out", str(tmp_path / "m")]) == 0
    res = json.loads((tmp_path / "m" / "results.json").read_text())
    assert set(res["models"]) == {"lis/seed-0", "lis/seed-1", "alibi/seed-0"}
    assert res["config"]["seed"] == [0, 1] and res["models"]["lis/seed-1"]["seed"] == 1
    ppl = [res["models"][f"lis/seed-{s}"]["ppl"]["128"] for s in (0, 1)]
    table = (tmp_path / "m" / "results.md").read_text()
    (spread,) = [line for line in table.splitlines() if "mean ± sd over 2 seeds" in line]
    mean = (ppl[0] + ppl[1]) / 2
    assert spread.startswith("| LISformer") and f"{mean:.3f} ± " in spread
    assert "ALiBi (seed 0)" in table and "ALiBi, mean" not in table  # one seed: no spread row
    capsys.readouterr()
    bad = ["lis", "shakespeare", "--merge", folders[0], str(tmp_path / "lr"), "--out", str(tmp_path / "no")]
    assert main(bad) == 2
    assert "'lr'" in capsys.readouterr().err and not (tmp_path / "no").exists()


def test_kg_roles_run_keeps_only_results_of_its_configuration(tmp_path, capsys):
    from structpe.cli import main

    cfg = {
        "setting": "kg2text",
        "n_train_names": 30,
        "n_test_names": 8,
        "iters": 1,
        "batch_size": 4,
        "d_model": 8,
        "n_eval": 4,
        "eval_batch": 8,
        "device": "cpu",
        "n_layers": 1,
    }
    out = tmp_path / "o"
    for models, d_model, ok in ((["B"], 8, True), (["J"], 8, True), (["J"], 12, False)):
        path = tmp_path / "c.yaml"
        path.write_text(yaml.safe_dump({**cfg, "models": models, "d_model": d_model}))
        capsys.readouterr()
        rc = main(["lis", "kg", "--setting", "kg2text", "--config", str(path), "--out", str(out)])
        assert (rc == 0) is ok
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "another configuration" in err[0] and "d_model" in err[0]
    assert set(json.loads((out / "results.json").read_text())["models"]) == {"B", "J"}


def test_require_clean_refuses_a_dirty_checkout(tmp_path, capsys, monkeypatch):
    from structpe import provenance
    from structpe.cli import main

    monkeypatch.setattr(provenance, "git_revision", lambda: "abc123+dirty")
    assert main(["lis", "shakespeare", "--require-clean", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "abc123+dirty" in err
    assert not (tmp_path / "o").exists()
    assert main(["lis", "shakespeare", "--eval-every", "-1", "--out", str(tmp_path / "o")]) == 2

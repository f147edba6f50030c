"""Resumable Shakespeare training: sittings cut by ``max_minutes`` continue where they stopped and
end where an uninterrupted run ends; finished models are skipped."""

import json

import pytest
import torch

from structpe.lis.shakespeare import ShakespeareConfig, run


def _cfg(**kw) -> ShakespeareConfig:
    base = dict(
        models=["lis", "rope"],
        n_chars=20000,
        eval_ctx=[64, 128],
        eval_chars=256,
        iters=5,
        batch_size=2,
        train_ctx=64,
        d_model=16,
        n_layers=1,
        n_heads=2,
        device="cpu",
        threads=0,
    )
    return ShakespeareConfig(**{**base, **kw})


@pytest.mark.data
def test_sittings_resume_and_match_one_run(tmp_path, shared_data):
    whole = run(_cfg(), tmp_path / "whole", shared_data)
    out = tmp_path / "sittings"
    sittings = 0
    while True:  # every sitting stops after its first update (max_minutes ~ 0) and checkpoints
        sittings += 1
        res = run(_cfg(max_minutes=1e-9, checkpoint_every=2), out, shared_data)
        if "unfinished" not in res:
            break
        assert sittings < 20
        assert (out / "checkpoints" / "lis-partial" / "latest.json").is_file() or "rope" in res["unfinished"]
    # each model: 4 sittings of one update each, its 5th update finishes it in the next sitting
    assert sittings == 9
    assert not (out / "checkpoints" / "lis-partial").exists()
    for name in ("lis", "rope"):
        a, b = whole["models"][name], res["models"][name]
        assert b["updates"] == 5
        assert b["final_train_loss"] == pytest.approx(a["final_train_loss"], abs=1e-5)
        assert b["ppl"] == pytest.approx(a["ppl"], rel=1e-5)
    again = run(_cfg(), out, shared_data)  # finished models are skipped, their records kept
    assert json.dumps(again["models"]) == json.dumps(res["models"])


@pytest.mark.data
def test_learning_curve_leaves_training_unchanged_and_survives_sittings(tmp_path, shared_data):
    """``eval_every`` scores validation PPL beside training: the models (random addresses and dropout
    draw from the global RNG) train as without it, and a curve cut into sittings equals one run's."""
    kw = dict(models=["random"], dropout=0.1, iters=4)
    plain = run(_cfg(**kw), tmp_path / "plain", shared_data)["models"]["random"]
    curved = run(_cfg(**kw, eval_every=2), tmp_path / "curve", shared_data)["models"]["random"]
    assert "curve" not in plain
    assert [p["updates"] for p in curved["curve"]] == [2, 4]
    assert curved["final_train_loss"] == plain["final_train_loss"]
    assert curved["ppl"] == plain["ppl"]
    out = tmp_path / "sittings"
    while "unfinished" in (
        res := run(_cfg(**kw, eval_every=2, max_minutes=1e-9, checkpoint_every=1), out, shared_data)
    ):
        pass
    assert res["models"]["random"]["curve"] == curved["curve"]
    prov = curved["provenance"]
    assert prov["device"]["type"] == "cpu" and prov["torch_build"]["version"] == torch.__version__
    table = (tmp_path / "curve" / "results.md").read_text()
    assert "during training" in table and "Provenance of each run" in table

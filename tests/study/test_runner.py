"""run_study on a tiny synthetic study: every cell's metrics.json, resume of an interrupted cell
from its checkpoint, skipping of finished cells, refusal to mix configurations, the report, and
parallel workers sharing one study folder through cell locks."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from transformers import TrainerCallback

import structpe.train.pretrain as pretrain_module
from structpe.cli import main
from structpe.io import sha256_file
from structpe.study.aggregate import VERDICTS
from structpe.study.cells import StudyError, await_baseline, cell_dir, cells, claim
from structpe.study.data import StudyData
from structpe.study.progress import progress_lines
from structpe.study.runner import cell_config_hash, eval_keys, run_study, train_config
from structpe.study.spec import load_spec
from structpe.study.stages.leakage import leakage_summary


class Interrupt(TrainerCallback):
    """Stop the first training run after step 4 (its step-3 checkpoint is complete)."""

    def __init__(self) -> None:
        self.fired = False

    def on_step_end(self, args, state, control, **kw):  # noqa: D102
        if not self.fired and state.global_step == 4:
            self.fired = True
            raise KeyboardInterrupt


def test_study_runs_resumes_and_skips(
    tiny_spec: Path, tiny_data: StudyData, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = load_spec(tiny_spec, "test")
    out = tmp_path / "study"
    with pytest.raises(KeyboardInterrupt):
        run_study(spec, out, data=tiny_data, callbacks=[Interrupt()])
    first = cell_dir(out, "none", 1)
    assert (first / "run" / "checkpoint-3").is_dir() and not (first / "metrics.json").exists()

    paths = run_study(spec, out, data=tiny_data, command="structpe study run tiny")
    assert [p.parent for p in paths] == [
        cell_dir(out, lab, s) for s in (1, 2) for lab in ("none", "position")
    ]
    summary = json.loads((first / "run" / "summary.json").read_text())
    assert summary["resumed_from"].endswith("checkpoint-3") and summary["steps"] == 6
    m = json.loads((cell_dir(out, "position", 2) / "metrics.json").read_text())
    assert m["seed"] == 2 and m["data_fingerprint"] == "synthetic-1" and len(m["config_hash"]) == 64
    s = m["scores"]
    assert s["ppl.joint.word_ppl"] > 1.0 and s["ppl.conditional.word_ppl"] > 1.0 and "val_lm_loss" in s
    assert {"train", "ppl-conditional", "ppl-joint", "total"} <= set(m["wall_s"])
    prov = m["provenance"]  # reporting only: no hash covers it
    # the precision this machine trained in, recorded beside the CPU (claims pair only cells that share both)
    assert m["precision"] == ("bf16" if summary["bf16"] else "fp32") and "cpu" in prov["hardware"]
    final = cell_dir(out, "position", 2) / "run" / "final"
    assert prov["seed"] == 2 and prov["model"]["weights_sha256"] == sha256_file(final / "model.safetensors")
    assert prov["data"][0]["path"].endswith("structpe_prepare.json") and prov["wall_s"] > 0
    base = json.loads((first / "metrics.json").read_text())["scores"]
    # the baseline reads no tags: its p(x) is filed under every mode, computed once
    assert base["ppl.joint.word_ppl"] == base["ppl.conditional.word_ppl"]
    assert not (first / "evals" / "ppl-joint.json").exists()

    def no_training(*a, **k):
        raise AssertionError("a finished cell was trained again")

    monkeypatch.setattr(pretrain_module, "pretrain", no_training)
    run_study(spec, out, data=tiny_data)  # every cell finished: nothing trains, nothing changes
    assert json.loads((cell_dir(out, "position", 2) / "metrics.json").read_text()) == m

    study = json.loads((out / "study.json").read_text())
    assert study["cells_finished"] == 4 and study["claims"][0]["verdict"] in VERDICTS
    md = (out / "study.md").read_text()
    assert "Verdict rule" in md and "structpe study run tiny" in md and "fixed parse" in md
    assert (out / "ppl_modes.png").stat().st_size > 0
    (out / "study.md").unlink()
    assert main(["study", "report", str(out)]) == 0  # the report alone, from the saved spec
    assert "structpe study run tiny" in (out / "study.md").read_text()


def test_report_of_a_non_study_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["study", "report", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "spec.json not found (not a study folder)" in err and "\n" not in err


def test_changed_evaluations_rerun_without_training(
    tiny_spec: Path, tiny_data: StudyData, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = load_spec(tiny_spec, "test")
    spec.seeds = [1]
    out = tmp_path / "study"
    run_study(spec, out, data=tiny_data, report=False)
    metrics = cell_dir(out, "position", 1) / "metrics.json"
    assert json.loads(metrics.read_text())["scores"]["ppl.joint.n_sentences"] == 12

    def no_training(*a, **k):
        raise AssertionError("an evaluation change must not retrain the model")

    monkeypatch.setattr(pretrain_module, "pretrain", no_training)
    spec.evaluations.ppl.sentences = 6  # an evaluation setting: the models are reused
    hashes = {(lab, s): cell_config_hash(spec, lab, s, tiny_data) for lab, s in cells(spec)}
    lines = progress_lines(spec, out, hashes=hashes)  # what --dry-run prints before the rerun
    assert lines[0] == f"state of {out}: 2 stale of 2 planned cells"
    assert (
        "  position/seed-1: finished under other evaluation settings or test data; its changed "
        "evaluations run again" in lines
    )
    run_study(spec, out, data=tiny_data, report=False)
    assert json.loads(metrics.read_text())["scores"]["ppl.joint.n_sentences"] == 6
    assert progress_lines(spec, out, hashes=hashes)[0] == f"state of {out}: 2 finished of 2 planned cells"

    spec.profile_overrides = [*spec.profile_overrides, "train.max_steps=7"]  # another model
    with pytest.raises(StudyError, match="trained under another configuration"):
        run_study(spec, out, data=tiny_data, report=False)


def test_leakage_summary_share() -> None:
    report = {
        "n_sentences": 50,
        "variants": {
            "full": {"word_ppl": 80.0, "token_ppl": 40.0},
            "prefix": {"word_ppl": 95.0, "token_ppl": 47.0},
            "prefix_drop_last": {"word_ppl": 99.0, "token_ppl": 49.0},
        },
        "baseline": {"word_ppl": 100.0},
        "gain_vs_baseline": {"full": 0.2, "prefix": 0.05, "prefix_drop_last": 0.01},
        "leaked_share_upper": 0.75,
    }
    s = leakage_summary(report)
    assert s["summary.surviving_share"] == pytest.approx(0.25)
    assert s["full.gain"] == 0.2 and s["baseline.word_ppl"] == 100.0 and s["summary.n_sentences"] == 50
    # causal tags worse than the baseline: the share is negative, not clipped to 0
    report["gain_vs_baseline"] = {"full": 0.2, "prefix": -3.0, "prefix_drop_last": -1.0}
    assert leakage_summary(report)["summary.surviving_share"] == pytest.approx(-5.0)
    # no full-parse gain: a ratio of two losses means nothing, so no share
    report["gain_vs_baseline"] = {"full": -0.1, "prefix": -3.0, "prefix_drop_last": -1.0}
    assert "summary.surviving_share" not in leakage_summary(report)


def test_encoder_cells_score_by_pll(tiny_spec: Path, tiny_data: StudyData, tmp_path: Path) -> None:
    text = tiny_spec.read_text()
    for old, new in (
        ("{recipe: txl/none}", "{recipe: roberta/none}"),
        ("{recipe: txl/position}", "{recipe: roberta/input}"),
        ("[conditional, joint], sentences: 12", "[conditional], sentences: 12"),
        ("[ppl.joint.word_ppl]", "[ppl.conditional.word_ppl]"),
        ("    show: [ppl.conditional.word_ppl]\n", ""),
        ("seeds: [1, 2]", "seeds: [1]"),
    ):
        assert old in text
        text = text.replace(old, new)
    p = tmp_path / "encoders.yaml"
    p.write_text(text)
    spec = load_spec(p, "test")
    out = tmp_path / "study"
    run_study(spec, out, data=tiny_data)
    m = json.loads((cell_dir(out, "position", 1) / "metrics.json").read_text())
    assert set(m["scores"]) >= {"ppl.conditional.word_ppl", "val_lm_loss"}
    assert not any(".joint." in k for k in m["scores"])  # a masked LM has no joint likelihood
    md = (out / "study.md").read_text()  # the page says what a masked LM's scores are
    assert "a masked LM has no p(x)" in md and "`joint` = p(x, T)" not in md


def test_parallel_workers_skip_a_claimed_cell(
    tiny_spec: Path, tiny_data: StudyData, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = load_spec(tiny_spec, "test")
    spec.seeds = [1]
    out = tmp_path / "study"
    with claim(out, "position", 1) as mine:  # another worker is running position/seed-1
        assert mine
        with claim(out, "position", 1) as again:  # a second claim on a held cell fails
            assert not again
        paths = run_study(spec, out, data=tiny_data, report=False)
    assert [p.parent for p in paths] == [cell_dir(out, "none", 1)]
    assert not (cell_dir(out, "position", 1) / "metrics.json").exists()
    assert "position/seed-1]: another worker is running it" in capsys.readouterr().out
    paths = run_study(spec, out, data=tiny_data, report=False)  # the claim is gone: it runs now
    assert (cell_dir(out, "position", 1) / "metrics.json").is_file() and len(paths) == 2


def test_leakage_waits_for_a_baseline_in_another_worker(tiny_spec: Path, tmp_path: Path) -> None:
    spec = load_spec(tiny_spec, "test")
    out = tmp_path / "study"
    run_dir = cell_dir(out, "none", 1) / "run"
    with pytest.raises(StudyError, match="needs the baseline none/seed-1, which is not trained"):
        await_baseline(out, spec, 1, print, poll_s=0.01)

    def other_worker(started: threading.Event) -> None:
        with claim(out, "none", 1):
            started.set()
            (run_dir / "final").mkdir(parents=True)
            (run_dir / "final" / "config.json").write_text("{}")
            threading.Event().wait(0.2)
            (run_dir / "summary.json").write_text("{}")

    started = threading.Event()
    worker = threading.Thread(target=other_worker, args=(started,))
    worker.start()
    started.wait()
    logged: list[str] = []
    assert await_baseline(out, spec, 1, logged.append, poll_s=0.02) == run_dir / "final"
    worker.join()
    assert len(logged) == 1 and "waiting for another worker to finish none/seed-1" in logged[0]


def test_a_killed_workers_claim_is_released(tmp_path: Path) -> None:
    """The claim is an OS file lock: SIGKILL of its holder frees the cell, nothing stale is left."""
    out = tmp_path / "study"
    code = (
        "import sys, time; from pathlib import Path; from structpe.study.cells import claim\n"
        f"with claim(Path({str(out)!r}), 'position', 1) as mine:\n"
        "    print(mine, flush=True); time.sleep(60)\n"
    )
    worker = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert worker.stdout.readline().strip() == "True"
        with claim(out, "position", 1) as mine:
            assert not mine  # held by the other process
    finally:
        worker.kill()
        worker.wait()
    with claim(out, "position", 1) as mine:
        assert mine


def test_smc_and_its_particles_key_only_smc_evaluations(tiny_spec: Path) -> None:
    """Adding the smc likelihood (and changing its particles) adds and changes its own keys only:
    the other modes' keys and the training hash stay as they were, so nothing else re-runs."""
    from structpe.study.spec import BlimpSpec

    spec = load_spec(tiny_spec, "test")
    spec.evaluations.blimp = BlimpSpec(likelihoods=["conditional", "marginal"], marginal_limit=3, limit=5)
    data = StudyData(Path("tok"), Path("ds"), "fp", [], train_fingerprint="train-fp")
    before = eval_keys(spec, "position", 1, data)
    trained = train_config(spec, "position", 1, "train-fp")
    for name in ("ppl", "blimp"):
        getattr(spec.evaluations, name).likelihoods.append("smc")
    with_smc = eval_keys(spec, "position", 1, data)
    assert {k: v for k, v in with_smc.items() if not k.endswith("-smc")} == before
    assert {"ppl-smc", "blimp-smc"} <= set(with_smc)
    assert train_config(spec, "position", 1, "train-fp") == trained
    spec.evaluations.blimp.particles *= 4
    more = eval_keys(spec, "position", 1, data)
    assert more["blimp-smc"] != with_smc["blimp-smc"] and more["ppl-smc"] == with_smc["ppl-smc"]
    assert spec.evaluations.blimp.limit_for("smc") == 3  # the leak-free modes score the same pairs


def test_the_smc_proposal_keys_only_smc_evaluations(tiny_spec: Path) -> None:
    """The adapted proposal changes its own bench's smc key only; a spec that names the default
    proposal keeps the keys it had (committed smc results stay valid); score_settings keeps the
    proposal for smc scores alone."""
    from structpe.study.spec import BlimpSpec, score_settings

    spec = load_spec(tiny_spec, "test")
    spec.evaluations.blimp = BlimpSpec(likelihoods=["conditional", "smc"])
    spec.evaluations.ppl.likelihoods = ["conditional", "smc"]
    data = StudyData(Path("tok"), Path("ds"), "fp", [], train_fingerprint="train-fp")
    before = eval_keys(spec, "position", 1, data)
    spec.evaluations.blimp.proposal = "prior"
    assert eval_keys(spec, "position", 1, data) == before
    spec.evaluations.blimp.proposal = "adapted"
    after = eval_keys(spec, "position", 1, data)
    assert after["blimp-smc"] != before["blimp-smc"]
    assert {k: v for k, v in after.items() if k != "blimp-smc"} == {
        k: v for k, v in before.items() if k != "blimp-smc"
    }
    saved = spec.to_dict()
    assert score_settings(saved, "blimp.smc.overall")["evaluations.blimp.proposal"] == "adapted"
    assert "evaluations.blimp.proposal" not in score_settings(saved, "blimp.conditional.overall")


def test_per_pair_budgets_key_only_blimps_smc(tiny_spec: Path) -> None:
    """BLiMP's particles_max changes its smc key alone; unset it keeps the keys from before it existed."""
    from structpe.study.spec import BlimpSpec, score_settings

    spec = load_spec(tiny_spec, "test")
    spec.evaluations.blimp = BlimpSpec(likelihoods=["conditional", "smc"])
    data = StudyData(Path("tok"), Path("ds"), "fp", [], train_fingerprint="train-fp")
    before = eval_keys(spec, "position", 1, data)
    spec.evaluations.blimp.particles_max = 128
    after = eval_keys(spec, "position", 1, data)
    assert [k for k in after if after[k] != before[k]] == ["blimp-smc"]
    saved = spec.to_dict()
    assert score_settings(saved, "blimp.smc.overall")["evaluations.blimp.particles_max"] == 128
    assert "evaluations.blimp.particles_max" not in score_settings(saved, "blimp.conditional.overall")


def test_the_exact_word_limit_keys_only_blimps_exact(tiny_spec: Path) -> None:
    """BLiMP's exact_max_words adds its own key (blimp-exact) and changes no other; unset, the keys
    are those from before it existed; only the exact scores carry it among their settings."""
    from structpe.study.spec import BlimpSpec, score_settings

    spec = load_spec(tiny_spec, "test")
    spec.evaluations.blimp = BlimpSpec(likelihoods=["conditional", "smc"])
    data = StudyData(Path("tok"), Path("ds"), "fp", [], train_fingerprint="train-fp")
    before = eval_keys(spec, "position", 1, data)
    spec.evaluations.blimp.exact_max_words = 5
    after = eval_keys(spec, "position", 1, data)
    assert {k: v for k, v in after.items() if k != "blimp-exact"} == before and "blimp-exact" in after
    spec.evaluations.blimp.exact_max_words = 6
    assert eval_keys(spec, "position", 1, data)["blimp-exact"] != after["blimp-exact"]
    saved = spec.to_dict()
    assert score_settings(saved, "blimp.exact.overall")["evaluations.blimp.exact_max_words"] == 6
    assert "evaluations.blimp.exact_max_words" not in score_settings(saved, "blimp.smc.overall")


def test_the_beam_width_keys_only_marginal_evaluations(tiny_spec: Path) -> None:
    """Raising a benchmark's marginal k re-runs that benchmark's marginal, nothing else."""
    from structpe.study.spec import BlimpSpec

    spec = load_spec(tiny_spec, "test")
    spec.evaluations.blimp = BlimpSpec(likelihoods=["conditional", "marginal"])
    spec.evaluations.ppl.likelihoods = ["conditional", "marginal"]
    data = StudyData(Path("tok"), Path("ds"), "fp", [], train_fingerprint="train-fp")
    before = eval_keys(spec, "position", 1, data)
    spec.evaluations.ppl.k = spec.evaluations.ppl.k * 10
    after = eval_keys(spec, "position", 1, data)
    assert after["ppl-marginal"] != before["ppl-marginal"]
    assert after["ppl-conditional"] == before["ppl-conditional"]
    assert after["blimp-marginal"] == before["blimp-marginal"]  # BLiMP's beam has its own k
    spec.evaluations.blimp.k = 3
    again = eval_keys(spec, "position", 1, data)
    assert again["blimp-marginal"] != after["blimp-marginal"]
    assert again["blimp-conditional"] == before["blimp-conditional"]
    assert again["ppl-marginal"] == after["ppl-marginal"]


def test_blimp_marginal_limit_scores_the_same_fewer_pairs_for_every_recipe(
    tiny_spec: Path, tiny_data: StudyData, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BLiMP's marginal_limit: the marginal mode scores the first N pairs of each paradigm, for the
    tagged recipe and the baseline alike (the baseline runs it on its own rather than filing its
    p(x) over every pair under that name); the other modes keep ``limit``; unset, the keys and the
    single baseline run are as before."""
    import structpe.eval.blimp as blimp_module
    from structpe.eval.scoring.types import uses_tags
    from structpe.study.spec import BlimpSpec

    calls: list[tuple[bool, str, int]] = []

    def scored(model, *args, limit: int, likelihood: str, **kw) -> dict:
        calls.append((uses_tags(model), likelihood, limit))
        return {"overall": 0.5 + limit / 100, "n_pairs": 2 * limit, "per_phenomenon": {}, "per_paradigm": {}}

    monkeypatch.setattr(blimp_module, "evaluate_blimp", scored)
    spec = load_spec(tiny_spec, "test")
    spec.seeds = [1]
    modes = ["conditional", "joint", "marginal"]
    spec.evaluations.blimp = BlimpSpec(paradigms=["p1", "p2"], limit=8, likelihoods=modes)
    data = StudyData(Path("tok"), Path("ds"), "fp", [], train_fingerprint="train-fp")
    unset = eval_keys(spec, "position", 1, data)
    spec.evaluations.blimp.marginal_limit = 3
    capped = eval_keys(spec, "position", 1, data)
    assert capped["blimp-marginal"] != unset["blimp-marginal"]
    assert all(capped[f"blimp-{m}"] == unset[f"blimp-{m}"] for m in ("conditional", "joint"))

    run_study(spec, tmp_path / "study", data=tiny_data, report=False)
    tagged = [(True, m, 3 if m == "marginal" else 8) for m in modes]
    assert sorted(calls) == sorted([(False, "conditional", 8), (False, "marginal", 3), *tagged])
    for label in ("none", "position"):
        s = json.loads((cell_dir(tmp_path / "study", label, 1) / "metrics.json").read_text())["scores"]
        assert [s[f"blimp.{m}.n_pairs"] for m in modes] == [16, 16, 6]


def test_blimp_exact_runs_for_every_causal_cell_with_the_studys_parser(
    tiny_spec: Path, tiny_data: StudyData, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``exact_max_words``: the tagged recipe and the baseline each score the short pairs once by
    the exact p(x), their words counted by the study's parser (so both keep the same pairs), filed
    as ``blimp.exact.*`` beside the modes."""
    import structpe.eval.blimp as blimp_module
    from structpe.eval.scoring.types import uses_tags
    from structpe.study.spec import BlimpSpec

    calls: list[tuple[bool, str, bool]] = []

    def scored(model, tokenizer, parser, *args, limit: int, exact_max_words=None, **kw) -> dict:
        mode = "exact" if exact_max_words is not None else kw["likelihood"]
        calls.append((uses_tags(model), mode, parser is not None))
        score = 0.6 if mode == "exact" else 0.5
        return {"overall": score, "n_pairs": 4, "per_phenomenon": {}, "per_paradigm": {}}

    monkeypatch.setattr(blimp_module, "evaluate_blimp", scored)
    spec = load_spec(tiny_spec, "test")
    spec.seeds = [1]
    spec.evaluations.blimp = BlimpSpec(
        paradigms=["p1"], limit=8, likelihoods=["conditional"], exact_max_words=5
    )
    run_study(spec, tmp_path / "study", data=tiny_data, report=False)
    assert sorted(c for c in calls if c[1] == "exact") == [(False, "exact", True), (True, "exact", True)]
    for label in ("none", "position"):
        s = json.loads((cell_dir(tmp_path / "study", label, 1) / "metrics.json").read_text())["scores"]
        assert s["blimp.exact.overall"] == 0.6 and s["blimp.conditional.overall"] == 0.5


def test_every_ppl_mode_on_the_same_sentences_with_the_marginal_ladder(
    tiny_spec: Path, tiny_data: StudyData, tmp_path: Path
) -> None:
    """Conditional, joint, marginal and smc perplexity of a cell share their sentences; the marginal
    is also reported at k = 1 and 10 (ppl.marginal = the largest k), the smc estimate with its N and
    standard error; a model that reads no tags has its plain p(x) under every one of these names
    (its smc exact: standard error 0)."""
    spec = load_spec(tiny_spec, "test")
    spec.seeds = [1]
    spec.evaluations.ppl.likelihoods = ["conditional", "joint", "marginal", "smc"]
    spec.evaluations.ppl.particles = 4
    spec.evaluations.ppl.k = 12
    out = tmp_path / "study"
    run_study(spec, out, data=tiny_data, report=False)
    s = json.loads((cell_dir(out, "position", 1) / "metrics.json").read_text())["scores"]
    names = ("conditional", "joint", "marginal", "marginal_k1", "marginal_k10", "smc")
    assert {s[f"ppl.{m}.n_sentences"] for m in names} == {12.0}
    assert s["ppl.smc.particles"] == 4 and s["ppl.smc.stderr"] > 0 and s["ppl.smc.word_ppl_at_n"] > 0
    assert "ppl.marginal_k100.word_ppl" not in s and "ppl.marginal.k1.word_ppl" not in s
    # wider beams never lower the bound; the marginal sum holds the parse, so it beats the joint
    assert s["ppl.marginal_k1.word_ppl"] >= s["ppl.marginal_k10.word_ppl"] >= s["ppl.marginal.word_ppl"]
    assert s["ppl.marginal_k1.word_ppl"] <= s["ppl.joint.word_ppl"] * (1 + 1e-9)
    base = json.loads((cell_dir(out, "none", 1) / "metrics.json").read_text())["scores"]
    assert {base[f"ppl.{m}.word_ppl"] for m in names} == {base["ppl.conditional.word_ppl"]}
    assert base["ppl.smc.stderr"] == 0.0 and base["ppl.smc.particles"] == 4


def test_a_new_test_set_re_evaluates_but_never_retrains(tiny_spec: Path) -> None:
    """The trained model belongs to the training data alone: drawing other test sentences changes
    every evaluation's key and leaves the training hash as it was."""
    spec = load_spec(tiny_spec, "test")
    old = StudyData(Path("tok"), Path("ds"), "train+test-a", [], train_fingerprint="train-fp")
    new = StudyData(Path("tok"), Path("ds"), "train+test-b", [], train_fingerprint="train-fp")
    assert train_config(spec, "position", 1, old.train_fingerprint) == train_config(
        spec, "position", 1, new.train_fingerprint
    )
    before, after = eval_keys(spec, "position", 1, old), eval_keys(spec, "position", 1, new)
    assert all(before[k] != after[k] for k in before)


def test_report_of_a_copied_folder_uses_the_shipped_spec(tmp_path: Path) -> None:
    """A study folder copied to another machine (docs/studies/...) still reports: the recorded
    spec file path is gone, so the shipped spec is found by its name."""
    out = tmp_path / "copied"
    out.mkdir()
    saved = {"source": "/nowhere/sipe-txl.yaml", "profile": "smoke", "spec": {"name": "sipe-txl"}}
    (out / "spec.json").write_text(json.dumps(saved))
    assert main(["study", "report", str(out)]) == 0
    assert "Study `sipe-txl` at profile `smoke`" in (out / "study.md").read_text()


def test_a_study_run_in_slices_plans_and_reports_every_slice(tmp_path: Path) -> None:
    """cpu-small runs over several sittings in slices of recipes and seeds; each command adds its
    selection to spec.json's `runs`, and the folder plans (and the report counts) the union of their
    cells, which no single recipes x seeds selection expresses (input: seeds 1-3, position: 1-5)."""
    from structpe.study.cells import cells
    from structpe.study.report import write_study_report
    from structpe.study.runner import spec_record
    from structpe.study.selection import folder_commands, folder_spec, select

    full = load_spec("sipe-txl", "cpu-small")
    out = tmp_path / "study"
    out.mkdir()
    slices = [
        (["none", "position"], [1, 2, 3]),
        (["position"], [4, 5]),
        (["input", "position_shuffled"], [1, 2, 3]),
        (["position"], [4, 5]),  # a second worker with the same command adds nothing
    ]
    commands = []
    for recipes, seeds in slices:
        command = f"structpe study run sipe-txl --recipes {' '.join(recipes)} --seeds {seeds}"
        earlier = json.loads((out / "spec.json").read_text()) if (out / "spec.json").is_file() else None
        record = spec_record(select(full, recipes, seeds), command, "fp", earlier)
        (out / "spec.json").write_text(json.dumps(record))
        commands.append(command)
    assert folder_commands(out) == list(dict.fromkeys(commands))
    assert record["command"] == commands[-1] and record["seeds"] == [1, 2, 3, 4, 5]
    # the spec as it ran keeps every slice's recipes (a reader compares their settings), in order
    labels = [r["label"] for r in record["spec"]["recipes"]]
    assert labels == ["none", "position", "input", "position_shuffled"]
    def settings(r: dict) -> tuple:
        return r["recipe"], r["overrides"], r["tags"]

    ran = {r["label"]: settings(r) for r in full.to_dict()["recipes"]}
    assert all(settings(r) == ran[r["label"]] for r in record["spec"]["recipes"])
    planned = folder_spec(out)
    assert sorted(cells(planned)) == sorted(
        [("none", s) for s in range(1, 6)]
        + [("position", s) for s in range(1, 6)]
        + [(r, s) for r in ("input", "position_shuffled") for s in (1, 2, 3)]
    )
    assert {c.recipe for c in planned.claims} | {c.against for c in planned.claims} == {
        "none", "input", "position", "position_shuffled"
    }
    write_study_report(out, planned)
    study = json.loads((out / "study.json").read_text())
    # "cells finished" counts the profile's cells, not the slices run so far: cpu-small plans five
    # seeds of none, input, position, position_shuffled and none_wide
    assert study["cells_planned"] == 25 and study["commands"] == folder_commands(out)
    md = (out / "study.md").read_text()
    assert "Cells finished: 0 of the 25 the profile plans" in md and all(c in md for c in commands)


def test_a_folder_written_before_runs_keeps_its_one_selection(tmp_path: Path) -> None:
    """spec.json without `runs` (the committed study folders of earlier sittings) is one selection:
    the next command adds its own beside it instead of replacing it."""
    from structpe.study.cells import cells
    from structpe.study.runner import spec_record
    from structpe.study.selection import folder_commands, folder_spec, select

    full = load_spec("sipe-txl", "cpu-small")
    out = tmp_path / "old"
    out.mkdir()
    old = {k: v for k, v in spec_record(select(full, ["none"], [1]), "first", "fp").items() if k != "runs"}
    (out / "spec.json").write_text(json.dumps(old))
    assert cells(folder_spec(out)) == [("none", 1)] and folder_commands(out) == ["first"]
    new = spec_record(select(full, ["none"], [2]), None, "fp", old)  # a resume without a command
    assert new["runs"] == [
        {"recipes": ["none"], "seeds": [1], "command": "first"},
        {"recipes": ["none"], "seeds": [2], "command": "first"},
    ]

"""`structpe study collect`: a run folder's finished cells land in a study's results folder as
primary cells or as re-runs of another machine, a mismatch is refused before anything is written,
and the report of the collected folder pairs the re-runs (synthetic cells, no training)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from structpe.cli import main
from structpe.io import write_json_atomic
from structpe.study.cell_metrics import load_cell_metrics, load_rerun_cells


def _spec_json(name: str = "tiny-study", profile: str = "test", runs: list | None = None) -> dict:
    runs = runs or [{"recipes": ["none", "position"], "seeds": [1, 2], "command": "structpe study run a"}]
    return {"source": "tiny-study.yaml", "profile": profile, "recipes": ["none", "position"], "seeds": [1, 2],
            "command": runs[-1]["command"], "runs": runs, "data_fingerprint": "data-1",
            "spec": {"name": name}}  # fmt: skip


def _run_folder(root: Path, cpu: str, cells: dict[tuple[str, int], float], runs: list | None = None) -> Path:
    """A run folder as `structpe study run` leaves it: spec.json, chance.json, and per cell its
    metrics.json, cell.json and weights (which collect must leave behind)."""
    write_json_atomic(root / "spec.json", _spec_json(runs=runs))
    write_json_atomic(root / "chance.json", {"blimp": 0.5})
    for (label, seed), score in cells.items():
        d = root / "cells" / label / f"seed-{seed}"
        metrics = {"recipe_label": label, "seed": seed, "precision": "fp32",
                   "provenance": {"hardware": {"cpu": cpu, "cpu_count": 2}},
                   "scores": {"syntaxgym.conditional.sg_score": score}}  # fmt: skip
        write_json_atomic(d / "metrics.json", metrics)
        write_json_atomic(d / "cell.json", {"recipe_label": label, "seed": seed})
        (d / "run" / "final").mkdir(parents=True)
        (d / "run" / "final" / "model.safetensors").write_bytes(b"weights")
    return root


def _files(folder: Path) -> dict[str, bytes]:
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in files}


def test_new_cells_become_primary_and_a_second_collect_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run_folder(tmp_path / "run", "CPU A", {("none", 1): 0.5, ("position", 1): 0.6})
    study = tmp_path / "study"
    assert main(["study", "collect", str(run), str(study)]) == 0
    assert "position/seed-1: new -> cells/position/seed-1" in capsys.readouterr().out
    assert sorted(_files(study)) == [
        "cells/none/seed-1/cell.json",
        "cells/none/seed-1/metrics.json",
        "cells/position/seed-1/cell.json",
        "cells/position/seed-1/metrics.json",
        "chance.json",
        "spec.json",
    ]  # no weights
    assert [c["recipe_label"] for c in load_cell_metrics(study)] == ["none", "position"]
    (study / "spec.json").write_text(json.dumps(json.loads((study / "spec.json").read_text()), indent=1))
    before = _files(study)
    assert main(["study", "collect", str(run), str(study)]) == 0
    assert "collected 2 cells into" in (out := capsys.readouterr().out) and "(0 new or updated)" in out
    assert _files(study) == before  # not even spec.json's layout changes
    # a re-evaluation on the same machine updates the cell
    f = run / "cells" / "position" / "seed-1" / "metrics.json"
    m = json.loads(f.read_text())
    m["scores"]["blimp.smc.overall"] = 0.7
    write_json_atomic(f, m)
    assert main(["study", "collect", str(run), str(study), "--recipes", "position"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "position/seed-1: updated -> cells/position/seed-1"


def test_a_cell_of_another_machine_is_a_rerun_or_a_replacement_never_silent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    study = tmp_path / "study"
    first = _run_folder(tmp_path / "a", "CPU A", {("none", 1): 0.5, ("position", 1): 0.6})
    assert main(["study", "collect", str(first), str(study)]) == 0
    # seed 2 of `none` and a re-run of seed 1, both on CPU B, with a new selection
    runs = [{"recipes": ["none"], "seeds": [1, 2], "command": "structpe study run b"}]
    second = _run_folder(tmp_path / "b", "CPU B", {("none", 1): 0.55, ("none", 2): 0.52}, runs)
    before = _files(study)
    capsys.readouterr()
    assert main(["study", "collect", str(second), str(study)]) == 2
    err = capsys.readouterr().err.strip()
    assert "none/seed-1: ran on CPU B, fp32, but" in err and "(--machine NAME)" in err and "\n" not in err
    assert _files(study) == before  # seed 2 was not written either: checked before any write
    assert main(["study", "collect", str(second), str(study), "--machine", "cpu-b-fp32"]) == 0
    reruns = load_rerun_cells(study)
    assert [(c["rerun_folder"], c["recipe_label"], c["seed"]) for c in reruns] == [
        ("machines/cpu-b-fp32", "none", 1),
        ("machines/cpu-b-fp32", "none", 2),
    ]
    saved = json.loads((study / "spec.json").read_text())
    assert [r["command"] for r in saved["runs"]] == ["structpe study run a", "structpe study run b"]
    # one machine folder holds one machine: cells of CPU A cannot join it
    assert main(["study", "collect", str(first), str(study), "--machine", "cpu-b-fp32"]) == 2
    err = capsys.readouterr().err
    assert "holds cells of CPU B, fp32 (one machine folder per machine and precision)" in err
    assert main(["study", "collect", str(second), str(study), "--machine", "CPU B"]) == 2
    assert "--machine 'CPU B': a folder name of lower-case letters" in capsys.readouterr().err
    # --replace: CPU B's cell becomes seed 1's primary
    assert main(["study", "collect", str(second), str(study), "--replace"]) == 0
    primary = json.loads((study / "cells" / "none" / "seed-1" / "metrics.json").read_text())
    assert primary["provenance"]["hardware"]["cpu"] == "CPU B"


def test_another_study_or_profile_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    study = tmp_path / "study"
    run = _run_folder(tmp_path / "a", "CPU A", {("none", 1): 0.5})
    assert main(["study", "collect", str(run), str(study)]) == 0
    other = _spec_json(profile="cpu-small")
    write_json_atomic(run / "spec.json", other)
    assert main(["study", "collect", str(run), str(study)]) == 2
    assert "profile 'cpu-small', but" in capsys.readouterr().err
    assert main(["study", "collect", str(tmp_path / "nowhere"), str(study)]) == 2
    assert "no spec.json (not a study folder" in capsys.readouterr().err


def test_recipes_new_to_the_study_folder_join_its_spec_as_they_ran(tmp_path: Path) -> None:
    # the study folder's spec ran none / position; a later run's spec ran the rivals: the kept spec
    # stays and gains the rival's entry (a reader compares its settings), never loses position's
    def entry(label: str) -> dict:
        return {"label": label, "recipe": f"txl/{label}", "overrides": [], "tags": None, "seeds": None}

    run = _run_folder(tmp_path / "run", "CPU A", {("none", 1): 0.5, ("gpt2", 1): 0.4})
    saved = json.loads((run / "spec.json").read_text())
    saved["spec"] = {"name": "tiny-study", "recipes": [entry("none"), entry("gpt2")],
                     "profile_recipe_overrides": {"gpt2": ["model.d_ff=1089"]}}  # fmt: skip
    write_json_atomic(run / "spec.json", saved)
    study = tmp_path / "study"
    kept = _spec_json()
    kept["spec"] = {"name": "tiny-study", "recipes": [entry("none"), entry("position")],
                    "profile_recipe_overrides": {}}  # fmt: skip
    write_json_atomic(study / "spec.json", kept)
    assert main(["study", "collect", str(run), str(study)]) == 0
    spec = json.loads((study / "spec.json").read_text())["spec"]
    assert [r["label"] for r in spec["recipes"]] == ["none", "position", "gpt2"]
    assert spec["profile_recipe_overrides"] == {"gpt2": ["model.d_ff=1089"]}


def test_adopt_spec_takes_the_runs_evaluations_and_keeps_earlier_recipes(tmp_path: Path) -> None:
    # a run re-evaluated the folder's none cell under a newer spec (another evaluation): with
    # --adopt-spec the folder's spec is the run's, and the recipes of earlier slices stay
    def entry(label: str) -> dict:
        return {"label": label, "recipe": f"txl/{label}", "overrides": [], "tags": None, "seeds": None}

    run = _run_folder(tmp_path / "run", "CPU A", {("none", 1): 0.5})
    saved = json.loads((run / "spec.json").read_text())
    newer = {"blimp": {"exact_max_words": 5}}
    saved["spec"] = {"name": "tiny-study", "recipes": [entry("none")], "evaluations": newer}
    saved["source"] = "newer/tiny-study.yaml"
    write_json_atomic(run / "spec.json", saved)
    study = tmp_path / "study"
    kept = _spec_json()
    kept["spec"] = {"name": "tiny-study", "recipes": [entry("none"), entry("gpt2")],
                    "evaluations": {"blimp": {}}}  # fmt: skip
    write_json_atomic(study / "spec.json", kept)
    assert main(["study", "collect", str(run), str(study)]) == 0
    assert json.loads((study / "spec.json").read_text())["spec"]["evaluations"] == {"blimp": {}}
    assert main(["study", "collect", str(run), str(study), "--adopt-spec"]) == 0
    spec = json.loads((study / "spec.json").read_text())["spec"]
    assert spec["evaluations"] == newer
    assert json.loads((study / "spec.json").read_text())["source"] == saved["source"]
    assert [r["label"] for r in spec["recipes"]] == ["none", "gpt2"]

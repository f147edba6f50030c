"""The shipped spec's `paper` profile: its 16-layer recipe builds and trains a step on CPU
with tiny data (the full run is for a GPU; this checks that the recipe and overrides load)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from structpe.study.data import StudyData
from structpe.study.spec import load_spec
from structpe.train.pretrain import pretrain


@pytest.mark.slow  # a 16-layer, d_model 512 model: ~30 s of CPU (build, one step, save)
def test_paper_recipe_runs_a_few_steps(tiny_data: StudyData, tmp_path: Path) -> None:
    spec = load_spec("sipe-txl", "paper")
    run = pretrain(
        spec.recipe_name("position"),
        [
            *spec.cell_overrides("position"),
            f"train.dataset={tiny_data.dataset_dir}",
            f"train.output_dir={tmp_path / 'run'}",
            "train.max_steps=1",
            "train.batch_size=2",
            "train.seq_len=64",
            "train.eval_every=1",
            "train.eval_batches=1",
            "train.warmup=0",
            "train.progress=false",
        ],
    )
    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == 1 and summary["final_eval"]["eval_lm_loss"] > 0
    cfg = json.loads((run / "final" / "config.json").read_text())
    assert cfg["n_layers"] == 16 and cfg["d_model"] == 512 and cfg["injection"] == "position"

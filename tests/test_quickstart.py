"""The README's first command, end to end at smoke scale (real data, real spaCy parses)."""

from __future__ import annotations

import json

from structpe.cli import main


def test_quickstart_smoke(shared_data, tmp_path):
    out = tmp_path / "qs"
    rc = main(
        [
            "quickstart",
            "--out",
            str(out),
            "--data-dir",
            str(shared_data),
            "--max-steps",
            "2",
            "--train-sentences",
            "120",
            "--valid-sentences",
            "20",
            "--ppl-sentences",
            "8",
            "--blimp-limit",
            "3",
            "--blimp-paradigms",
            "causative",
            "--syntaxgym-suites",
            "number_prep",
            "--vocab-size",
            "600",
            "--no-progress",
            "train.eval_every=2",
            "train.batch_size=4",
        ]
    )
    assert rc == 0
    report = json.loads((out / "report.json").read_text())
    assert set(report["variants"]) == {"none", "position"}
    pos = report["variants"]["position"]["eval"]
    assert set(pos) == {"conditional", "joint"}
    # paying for the tags can only cost probability: p(x, T) <= p(x | T) is not guaranteed per model,
    # but both must be finite, positive perplexities computed on the same sentences
    for mode in pos.values():
        assert mode["token_ppl"] > 1.0 and mode["token_ppl"] < 1e6
        assert 0.0 <= mode["blimp"] <= 1.0
    md = (out / "report.md").read_text()
    assert "| txl-position | joint |" in md and "| txl-none |" in md
    assert (out / "val_loss.png").stat().st_size > 0

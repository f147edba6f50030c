"""The README's first command, end to end at smoke scale (real data, real spaCy parses)."""

from __future__ import annotations

import json

from structpe.cli import main
from structpe.quickstart.reference import SECTION_TITLE


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
            "--d-model",
            "32",
            "--n-layers",
            "1",
            "--k",
            "1",
            "--leakage-sentences",
            "3",
            "--chance-draws",
            "5",
            "--compile",  # compiling 2 steps costs more than it saves (test_pretrain covers compile)
            "off",
            "--no-progress",
            "train.eval_every=2",
            "train.batch_size=4",
        ]
    )
    assert rc == 0
    report = json.loads((out / "report.json").read_text())
    assert set(report["variants"]) == {"none", "position"}
    pos = report["variants"]["position"]["eval"]
    assert set(pos) == {"conditional", "joint", "marginal"}
    # the chance row: BLiMP 0.5 and a Monte Carlo SyntaxGym score for the suite that was run
    chance = report["chance"]
    assert chance["blimp"] == 0.5 and set(chance["syntaxgym_suites"]) == {"number_prep"}
    assert 0.0 <= chance["syntaxgym"] <= 1.0
    prov = report["provenance"]
    assert prov["command"].startswith("structpe quickstart") and prov["parser"]["name"] == "spacy"
    assert set(prov["models"]) == {"none", "position"} and prov["models"]["none"]["weights_sha256"]
    assert prov["data"][0]["path"].endswith("structpe_prepare.json") and prov["wall_s"] > 0
    assert "leakage audit" in report["variants"]["position"]["leakage"]["verdict"]
    assert report["timings"]["total_s"] > 0
    assert report["variants"]["none"]["eval"]["conditional"]["syntaxgym"] >= 0.0
    # paying for the tags can only cost probability: p(x, T) <= p(x | T) is not guaranteed per model,
    # but both must be finite, positive perplexities computed on the same sentences
    for mode in pos.values():
        assert mode["token_ppl"] > 1.0 and mode["token_ppl"] < 1e6
        assert 0.0 <= mode["blimp"] <= 1.0
    md = (out / "report.md").read_text()
    assert "| txl-position | joint p(x, T) |" in md and "| txl-none |" in md and "| chance |" in md
    assert "leakage audit" in md
    # the run among the profile's seeds: no committed reference, or one of the default sizes (not these)
    assert report["reference"]["status"] in ("none", "other settings")
    assert md.rstrip().endswith(report["reference"]["note"]) and SECTION_TITLE in md
    assert (out / "val_loss.png").stat().st_size > 0
    assert (out / "syntaxgym_circuits.png").stat().st_size > 0


def test_quickstart_with_the_packaged_hexatagger(shared_data, tmp_path):
    """``--parser hexatagger`` tags Brown with the packaged model, and the prepared data records
    which weights tagged it (so a retrained default parser re-prepares instead of reusing)."""
    from structpe.io import sha256_file
    from structpe.parser.default import default_model_dir
    from structpe.train.prepare_settings import METADATA_FILE

    out = tmp_path / "qs"
    args = ["quickstart", "--out", str(out), "--data-dir", str(shared_data), "--parser", "hexatagger",
            "--variants", "position", "--likelihoods", "conditional", "--max-steps", "1",
            "--train-sentences", "40", "--valid-sentences", "8", "--ppl-sentences", "4",
            "--blimp-limit", "2", "--blimp-paradigms", "causative", "--syntaxgym-suites", "number_prep",
            "--vocab-size", "400", "--d-model", "32", "--n-layers", "1", "--leakage-sentences", "0",
            "--chance-draws", "2", "--no-progress", "train.batch_size=2"]
    assert main(args) == 0
    meta = json.loads((out / "data" / "merged" / METADATA_FILE).read_text())
    assert meta["settings"]["parser"] == "hexatagger"
    weights = sha256_file(default_model_dir() / "model.safetensors")
    assert meta["parser_identity"]["files"]["model.safetensors"] == weights
    assert "packaged hexatagger" in (out / "report.md").read_text()


def test_quickstart_is_the_study_profile_at_one_seed():
    """`structpe quickstart` trains the `quickstart` profile's models of the sipe-txl study: its
    defaults and the profile agree on the model, data, budget and leakage audit; only the seeds
    differ (one vs 1-5). Its BLiMP / SyntaxGym / PPL evaluation is its own smaller sample (20 minutes
    on 2 cores), while the profile scores the study's one protocol, the same as cpu-mini's."""
    import dataclasses

    from structpe.quickstart.config import QuickstartConfig, study_spec
    from structpe.study.spec import load_spec

    profile = load_spec("sipe-txl", "quickstart")
    ours = study_spec(QuickstartConfig())
    assert profile.seeds == [1, 2, 3, 4, 5] and ours.seeds == [42]
    # the profile also plans the widened baseline and the parser-free rivals (docs/studies/README.md,
    # "Rivals"); the quickstart runs its own two
    assert [r.label for r in profile.recipes] == ["none", "position", "none_wide", "gpt2", "tpt", "treereg"]
    assert [r.label for r in ours.recipes] == ["none", "position"]
    assert profile.profile_overrides == ours.profile_overrides
    assert profile.dataset == ours.dataset
    assert profile.evaluations.leakage == ours.evaluations.leakage and ours.evaluations.glue is None
    protocol = load_spec("sipe-txl", "cpu-mini").evaluations
    for bench in ("ppl", "blimp", "syntaxgym"):
        assert getattr(profile.evaluations, bench) == getattr(protocol, bench)
    assert dataclasses.asdict(ours.evaluations.blimp)["limit"] == QuickstartConfig().blimp_limit
    assert {c.id for c in ours.claims} == {"pp-ppl", "pp-sg", "pp-blimp"}
    rivals = {c.id for c in profile.claims} - {c.id for c in ours.claims} - {"pp-not-params"}
    assert rivals and all({c.recipe, c.against} & {"gpt2", "tpt", "treereg"} for c in profile.claims
                          if c.id in rivals)
    # the other profiles are untouched by it: every recipe of the spec, with its own seeds
    cpu_mini = load_spec("sipe-txl", "cpu-mini")
    assert len(cpu_mini.recipes) > 2 and cpu_mini.seeds == [1, 2, 3]
    assert cpu_mini.recipe_seeds("none") == [1, 2, 3, 4, 5]
    assert cpu_mini.recipe_seeds("position_k2") == [1, 2, 3]

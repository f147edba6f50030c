"""The decision family on synthetic cells: only tests that can reach a verdict enter Holm (bounds,
unchecked or unconverged estimates and cost checks are shown, not counted), the particle
estimator's convergence rule, cells counted against the profile's plan, and pages without the
machine's absolute paths."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from structpe.eval.scoring.smc_views import FLIP_SHARE_MAX
from structpe.io import write_json_atomic
from structpe.study.aggregate import aggregate
from structpe.study.cell_metrics import load_cell_metrics, load_rerun_cells
from structpe.study.report import write_study_report
from structpe.study.spec import Claim, load_spec

# SyntaxGym per seed: position beats none by about 0.1 on every seed (a clear effect, 5 seeds)
SG_GAIN = {1: 0.10, 2: 0.12, 3: 0.09, 4: 0.11, 5: 0.10}


def _cell(label: str, seed: int, scores: dict[str, float]) -> dict:
    """A finished cell's metrics.json on one machine (CPU A, float32): every seed pairs."""
    hardware = {"cpu": "CPU A", "cpu_count": 2}
    return dict(study="tiny-study", recipe_label=label, recipe=f"txl/{label}-tiny", seed=seed,
                config_hash=f"{label}{seed}".ljust(64, "0"), data_fingerprint="x", precision="fp32",
                train={"steps": 6, "bf16": False}, wall_s={"total": 12.0}, scores=scores,
                provenance={"hardware": hardware})  # fmt: skip


def _write(out: Path, flip: dict[tuple[str, int], float | None] | None = None) -> None:
    """5 seeds of none and position: conditional and smc SyntaxGym, joint / marginal PPL, BLiMP.
    ``flip``: (label, seed) -> the smc flip share (None: not recorded); default 0.01 everywhere."""
    for seed, gain in SG_GAIN.items():
        for label, d in (("none", 0.0), ("position", gain)):
            share = (flip or {}).get((label, seed), 0.01)
            scores = {
                "syntaxgym.conditional.sg_score": 0.6 + d + 0.01 * seed,
                "syntaxgym.smc.sg_score": 0.55 + d + 0.01 * seed,
                "syntaxgym.smc.particles": 64.0,
                "syntaxgym.smc.stderr": 0.004,
                "syntaxgym.marginal.sg_score": 0.5 + d / 2 + 0.01 * seed,
                "ppl.joint.word_ppl": 300.0 - 10 * d - seed,
                "ppl.marginal.word_ppl": 900.0 + seed + 500 * d,
                "blimp.conditional.overall": 0.7 - d / 10 + 0.001 * seed,
            }
            if share is not None:
                scores["syntaxgym.smc.flip_share"] = share
            write_json_atomic(
                out / "cells" / label / f"seed-{seed}" / "metrics.json", _cell(label, seed, scores)
            )


def _claim(cid: str, metrics: list[str], honest: list[str] | None = None, **kw) -> Claim:
    return Claim(
        id=cid,
        claim=f"claim {cid}",
        recipe="position",
        against="none",
        metrics=metrics,
        honest=honest or [],
        better=kw.pop("better", "higher"),
        **kw,
    )


@pytest.fixture
def spec(tiny_spec: Path):
    s = load_spec(tiny_spec, "test")
    s.seeds = [1, 2, 3, 4, 5]
    s.claims = [_claim("sg", ["syntaxgym.conditional.sg_score"], ["syntaxgym.smc.sg_score"])]
    return s


def _claims(agg: dict) -> dict[str, dict]:
    return {c["id"]: c for c in agg["claims"]}


def test_bound_only_tests_do_not_move_another_claims_adjusted_p(spec, tmp_path: Path) -> None:
    _write(tmp_path)
    cells = load_cell_metrics(tmp_path)
    alone = _claims(aggregate(cells, spec))["sg"]
    p_alone = [r["p_adj"] for r in (*alone["metrics"], *alone["honest"])]
    assert not any(math.isnan(p) for p in p_alone)
    # an unrelated claim whose every test is a bound (PPL of a tagged model) or a k-best marginal
    # accuracy (a lower bound, no convergence check): shown, not counted
    spec.claims.append(
        _claim(
            "ppl",
            ["ppl.joint.word_ppl", "ppl.marginal.word_ppl"],
            ["syntaxgym.marginal.sg_score"],
            better="lower",
        )
    )
    agg = aggregate(cells, spec)
    with_bounds = _claims(agg)["sg"]
    assert [r["p_adj"] for r in (*with_bounds["metrics"], *with_bounds["honest"])] == pytest.approx(p_alone)
    assert agg["holm_family"]["paper_direction"] == 2
    assert agg["holm_family"]["tests"] == ["sg: syntaxgym.conditional.sg_score", "sg: syntaxgym.smc.sg_score"]
    ppl = _claims(agg)["ppl"]
    assert [r["verdict"] for r in ppl["metrics"]] == ["bound, not counted"] * 2
    assert all(math.isnan(r["p_adj"]) and not math.isnan(r["p"]) for r in ppl["metrics"])  # shown with its p
    assert ppl["verdict"] == "no verdict (bounds only)"
    assert ppl["honest_verdict"] == "lower bound, no convergence check"
    # the rule can fail: a second deciding test does move the first claim's adjusted p
    spec.claims.append(_claim("sg2", ["syntaxgym.conditional.sg_score"]))
    moved = _claims(aggregate(cells, spec))["sg"]
    assert moved["metrics"][0]["p_adj"] > alone["metrics"][0]["p_adj"]


def test_a_converged_estimator_decides_an_unconverged_one_says_so(spec, tmp_path: Path) -> None:
    _write(tmp_path)
    c = _claims(aggregate(load_cell_metrics(tmp_path), spec))["sg"]
    honest = c["honest"][0]
    assert honest["standing"] == "decides" and honest["convergence"]["max_flip_share"] == 0.01
    # the estimator's own error of the mean difference: `position`'s 5 stderrs of 0.004 (`none` reads
    # no tags: exact), sqrt(5 x 0.004^2) / 5
    assert honest["convergence"]["mc_se"] == pytest.approx(0.004 / math.sqrt(5))
    assert c["honest_verdict"] == "replicates"
    # one involved cell flips more than the threshold: no honest verdict, and the page says why
    _write(tmp_path, {("position", 3): FLIP_SHARE_MAX + 0.01})
    agg = aggregate(load_cell_metrics(tmp_path), spec)
    c = _claims(agg)["sg"]
    assert c["honest"][0]["standing"] == "not converged" and math.isnan(c["honest"][0]["p_adj"])
    assert c["honest_verdict"] == "estimator not converged at N = 64"
    assert agg["holm_family"]["tests"] == ["sg: syntaxgym.conditional.sg_score"]
    # exactly at the threshold still converges; the baseline reads no tags: its share is not read
    _write(tmp_path, {("position", 3): FLIP_SHARE_MAX, ("none", 1): 0.5})
    assert _claims(aggregate(load_cell_metrics(tmp_path), spec))["sg"]["honest_verdict"] == "replicates"
    # cells without the check (older cells): no honest verdict
    _write(tmp_path, {("position", 2): None})
    c = _claims(aggregate(load_cell_metrics(tmp_path), spec))["sg"]
    assert c["honest_verdict"] == "estimate, no convergence check"
    write_study_report(tmp_path, spec, command="structpe study run tiny-study")
    md = (tmp_path / "study.md").read_text()
    assert "Monte Carlo se of the mean 0.002" in md
    assert "honest **estimate, no convergence check**" in md
    assert "**The family** (the tests Holm counts): `sg: syntaxgym.conditional.sg_score`." in md
    assert "`sg: syntaxgym.smc.sg_score` (estimate, no convergence check)" in md


def test_the_exact_blimp_decides_beside_an_unconverged_estimate(spec, tmp_path: Path) -> None:
    """``blimp.exact.*`` (every tree summed on the short pairs) needs no convergence check: it
    decides and enters the family while the particle estimate on every pair is not converged."""
    _write(tmp_path)
    for seed, gain in SG_GAIN.items():
        for label, d in (("none", 0.0), ("position", gain)):
            path = tmp_path / "cells" / label / f"seed-{seed}" / "metrics.json"
            m = json.loads(path.read_text())
            m["scores"].update(
                {"blimp.smc.overall": 0.6 + 0.001 * seed, "blimp.smc.flip_share": 0.3,
                 "blimp.smc.particles": 8.0, "blimp.exact.overall": 0.62 - d / 2 + 0.002 * seed}
            )  # fmt: skip
            write_json_atomic(path, m)
    honest = ["blimp.smc.overall", "blimp.exact.overall"]
    spec.claims = [_claim("blimp", ["blimp.conditional.overall"], honest, better="lower")]
    agg = aggregate(load_cell_metrics(tmp_path), spec)
    c = _claims(agg)["blimp"]
    assert [r["standing"] for r in c["honest"]] == ["not converged", "decides"]
    assert c["honest_verdict"] == "replicates"
    assert "blimp: blimp.exact.overall" in agg["holm_family"]["tests"]
    assert "blimp: blimp.smc.overall" not in agg["holm_family"]["tests"]


def test_a_tagged_sides_rerun_pairs_and_its_own_convergence_is_checked(spec, tmp_path: Path) -> None:
    # `position` trained on CPU B; its re-run on CPU A (machines/a) stands in for every seed against
    # `none` (CPU A), and the convergence check reads the re-run's flip share, not the primary's
    _write(tmp_path, {("position", s): 0.5 for s in SG_GAIN})  # the primaries never converged
    for seed in SG_GAIN:
        cell = tmp_path / "cells" / "position" / f"seed-{seed}" / "metrics.json"
        m = json.loads(cell.read_text())
        rerun = dict(m, scores={**m["scores"], "syntaxgym.smc.flip_share": 0.01})
        write_json_atomic(
            tmp_path / "machines" / "a" / "cells" / "position" / f"seed-{seed}" / "metrics.json", rerun
        )
        m["provenance"] = {"hardware": {"cpu": "CPU B", "cpu_count": 2}}
        write_json_atomic(cell, m)
    spec.claims = [_claim("sg", ["syntaxgym.conditional.sg_score"], ["syntaxgym.smc.sg_score"])]
    assert _claims(aggregate(load_cell_metrics(tmp_path), spec))["sg"]["honest_verdict"] == "no pairs"
    agg = aggregate(load_cell_metrics(tmp_path), spec, reruns=load_rerun_cells(tmp_path))
    c = _claims(agg)["sg"]
    assert c["honest"][0]["seeds"] == [1, 2, 3, 4, 5] and c["missing_pairs"] == []
    assert c["honest"][0]["convergence"]["max_flip_share"] == 0.01
    assert c["honest_verdict"] == "replicates"
    assert c["reruns"] == [(s, "position", "machines/a") for s in SG_GAIN]
    # the re-run's own check fails on one seed: not converged, whatever the primary says
    f = tmp_path / "machines" / "a" / "cells" / "position" / "seed-3" / "metrics.json"
    m = json.loads(f.read_text())
    m["scores"]["syntaxgym.smc.flip_share"] = FLIP_SHARE_MAX + 0.01
    write_json_atomic(f, m)
    c = _claims(aggregate(load_cell_metrics(tmp_path), spec, reruns=load_rerun_cells(tmp_path)))["sg"]
    assert c["honest_verdict"] == "estimator not converged at N = 64"


def test_per_decision_budgets_are_named_in_the_verdict(spec, tmp_path: Path) -> None:
    _write(tmp_path, {("position", 3): FLIP_SHARE_MAX + 0.01})
    f = tmp_path / "cells" / "position" / "seed-3" / "metrics.json"
    m = json.loads(f.read_text())
    m["scores"]["syntaxgym.smc.particles_max"] = 256.0
    write_json_atomic(f, m)
    c = _claims(aggregate(load_cell_metrics(tmp_path), spec))["sg"]
    assert c["honest"][0]["convergence"]["particles_max"] == [256]
    assert c["honest_verdict"] == "estimator not converged at N = 64 (per decision up to 256)"


def test_a_cost_check_is_shown_not_decided(spec, tmp_path: Path) -> None:
    _write(tmp_path)
    spec.claims.append(
        _claim("blimp", ["blimp.conditional.overall"], better="lower", cost=True, paper={"baseline": 75.3})
    )
    agg = aggregate(load_cell_metrics(tmp_path), spec)
    c = _claims(agg)["blimp"]
    row = c["metrics"][0]
    # position's BLiMP is lower on every seed (the paper's way), yet no verdict: a cost, not a finding
    assert row["n_positive"] == 5 and row["p"] < 0.01 and math.isnan(row["p_adj"])
    assert row["verdict"] == c["verdict"] == "cost check"
    assert "blimp: blimp.conditional.overall" not in agg["holm_family"]["tests"]
    write_study_report(tmp_path, spec, command="structpe study run tiny-study")
    md = (tmp_path / "study.md").read_text()
    assert "- **blimp** (claim blimp; `position` vs `none`): **cost check**." in md
    assert f"the largest cost its interval allows {row['ci95'][1]:+.3f}" in md


def test_cells_finished_counts_the_profiles_plan(tiny_spec: Path, tmp_path: Path) -> None:
    # the folder ran one slice (seeds 1-2 of 5); the profile plans 5 seeds of both recipes
    _write(tmp_path)
    for label in ("none", "position"):
        for seed in (3, 4, 5):
            (tmp_path / "cells" / label / f"seed-{seed}" / "metrics.json").unlink()
    text = tiny_spec.read_text().replace("seeds: [1, 2]", "seeds: [1, 2, 3, 4, 5]")
    tiny_spec.write_text(text)
    command = f"structpe study run {tiny_spec} --profile test --output {tmp_path} --seeds 1 2"
    saved = {
        "source": str(tiny_spec),
        "profile": "test",
        "runs": [{"recipes": ["none", "position"], "seeds": [1, 2], "command": command}],
        "command": command,
        "spec": {"name": "tiny-study"},
    }
    write_json_atomic(tmp_path / "spec.json", saved)
    from structpe.study.selection import folder_spec

    write_study_report(tmp_path, folder_spec(tmp_path))
    data = json.loads((tmp_path / "study.json").read_text())
    assert (data["cells_finished"], data["cells_planned"]) == (4, 10)
    md = (tmp_path / "study.md").read_text()
    assert "Cells finished: 4 of the 10 the profile plans (not yet run: none/seed-3, " in md
    # no absolute machine path on the page: the command's paths are shortened
    assert str(tmp_path) not in md and str(tiny_spec.parent) not in md
    assert f"--output {tmp_path.name} --seeds 1 2" in md


def test_pairs_need_the_same_hardware_and_precision() -> None:
    from structpe.study.aggregate import paired
    from structpe.study.cell_metrics import pair_key

    def cell(label: str, seed: int, **hw: str) -> dict:
        c = _cell(label, seed, {"m": 1.0 if label == "r" else 0.0})
        c["provenance"]["hardware"].update(hw)
        return c

    cells = [
        cell("a", 1), cell("r", 1),  # same CPU, same precision: a pair
        cell("a", 2, gpu="GPU X"), cell("r", 2, gpu="GPU Y"),  # trained on other GPUs
        cell("a", 3, cpu_capability="AVX2"), cell("r", 3, cpu_capability="AVX512"),  # other SIMD level
        cell("a", 4), {**cell("r", 4), "precision": "bf16"},  # other precision
    ]  # fmt: skip
    row = paired(cells, "r", "a", "m", "higher")
    assert row["seeds"] == [1] and [m["seed"] for m in row["missing"]] == [2, 3, 4]
    assert row["missing"][0]["why"] == "`r` CPU A, GPU Y, fp32; `a` CPU A, GPU X, fp32"
    assert pair_key(cells[0]) == ("CPU A", None, None, "fp32")

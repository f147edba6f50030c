"""Aggregation on synthetic cell metrics: mean ± sd, the paired tests against scipy and hand
computations, Holm, the verdict rule (bounds included), and the report written from them."""

from __future__ import annotations

import itertools
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from structpe.io import write_json_atomic
from structpe.study.aggregate import (
    adjust,
    aggregate,
    bound_of,
    combine,
    diff_bound,
    holm,
    mean_sd,
    paired,
    paired_test,
)
from structpe.study.cell_metrics import load_cell_metrics, load_rerun_cells, machine_of
from structpe.study.report import write_study_report
from structpe.study.spec import SyntaxGymSpec, load_spec
from structpe.study.tables import md_table


def test_paired_test_matches_scipy_on_synthetic_pairs() -> None:
    rng = np.random.default_rng(7)
    base = rng.normal(50.0, 5.0, size=8)
    rec = base + rng.normal(0.8, 1.0, size=8)  # paired: the seed effect cancels
    for better, sign in (("higher", 1.0), ("lower", -1.0)):
        t = paired_test(sign * (rec - base))
        alt = "greater" if better == "higher" else "less"
        ref = stats.ttest_rel(rec, base, alternative=alt)
        opp = stats.ttest_rel(rec, base, alternative="less" if alt == "greater" else "greater")
        assert t["p"] == pytest.approx(ref.pvalue) and t["p_against"] == pytest.approx(opp.pvalue)
    t = paired_test(rec - base)
    ci = stats.ttest_rel(rec, base).confidence_interval(0.95)
    assert t["ci95"] == pytest.approx([ci.low, ci.high])
    assert t["mean"] == pytest.approx(float(np.mean(rec - base))) and t["n"] == 8


def test_paired_test_by_hand() -> None:
    # d = 1, 2, 3: mean 2, sd 1, t = 2 / (1 / sqrt 3) = 2 sqrt 3 on 2 df, where the t survival
    # function has the closed form 1/2 (1 - t / sqrt(t^2 + 2))
    t_stat = 2 * math.sqrt(3)
    p = 0.5 * (1 - t_stat / math.sqrt(t_stat**2 + 2))
    half = 4.302652729911275 / math.sqrt(3)  # t_{0.975, 2} * se
    r = paired_test([1.0, 2.0, 3.0])
    assert r["p"] == pytest.approx(p) and r["p"] == pytest.approx(0.0370899501)
    assert r["p_against"] == pytest.approx(1 - p)
    assert r["ci95"] == pytest.approx([2 - half, 2 + half])
    # the exact sign-flip p: only the all-positive pattern of 8 reaches the observed mean
    assert r["p_perm"] == pytest.approx(1 / 8) and r["p_perm_min"] == 1 / 8
    assert (r["n_positive"], r["n_negative"]) == (3, 0)


def test_sign_flip_p_enumerates_every_pattern() -> None:
    d = np.array([3.0, -1.0, 2.0, 0.5, 1.5])
    flips = [np.mean(np.array(s) * d) for s in itertools.product((1, -1), repeat=d.size)]
    by_hand = sum(m >= d.mean() - 1e-12 for m in flips) / 2**d.size
    r = paired_test(d)
    assert r["p_perm"] == pytest.approx(by_hand) and r["p_perm_min"] == 2.0**-5


def test_all_same_sign_three_seeds_does_not_replicate() -> None:
    # every seed moves the paper's way (the old bootstrap rule said "replicates"), but the spread is
    # large: the t-test does not reject, and the sign-flip p cannot go below 2^-3 = 0.125
    rows = [paired_rows([0.01, 0.5, 0.02])]
    adjust(rows)
    assert rows[0]["p"] > 0.05 and rows[0]["p_perm"] == pytest.approx(0.125)
    assert rows[0]["verdict"] == "not shown"


def paired_rows(signed: list[float], bound: str | None = None) -> dict:
    """A decision row as :func:`paired` builds it, from signed differences (better = higher)."""
    cells = [
        {"recipe_label": lab, "seed": s, "scores": {"m": v}}
        for s, d in enumerate(signed, start=1)
        for lab, v in (("a", 10.0), ("r", 10.0 + d))
    ]
    return paired(cells, "r", "a", "m", "higher", bound)


def test_holm_by_hand() -> None:
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04 -> running max
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    adj = holm([math.nan, 0.01, 0.02, 0.9])  # nan: no test, not counted (m = 3)
    assert math.isnan(adj[0]) and adj[1:] == pytest.approx([0.03, 0.04, 0.9])
    assert holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert holm([]) == []


@pytest.mark.parametrize(
    ("signed", "bound", "expect"),
    [
        ([1.0, 1.1, 0.9, 1.05], None, "replicates"),
        ([-1.0, -1.1, -0.9, -1.05], None, "contradicts"),
        ([1.0, -1.0, 0.5, -0.2], None, "not shown"),
        ([3.0], None, "not shown"),  # one seed: no test
        # a perplexity bound is shown, never counted, whichever way it points
        ([1.0, 1.1, 0.9, 1.05], "lower", "bound, not counted"),
        ([-1.0, -1.1, -0.9, -1.05], "lower", "bound, not counted"),
        ([1.0, 1.1, 0.9, 1.05], "upper", "bound, not counted"),
        ([-1.0, -1.1, -0.9, -1.05], "upper", "bound, not counted"),
        ([1.0, 1.1, 0.9, 1.05], "both", "bound, not counted"),
    ],
)
def test_verdict_rule(signed: list[float], bound: str | None, expect: str) -> None:
    rows = [paired_rows(signed, bound)]
    family = adjust(rows)
    assert rows[0]["verdict"] == expect
    assert family["paper_direction"] == (0 if bound or len(signed) < 2 else 1)


def test_holm_decides_over_the_family() -> None:
    # p = 0.0094 alone replicates; beside nine null metrics Holm multiplies it by 10
    strong = paired_rows([0.5, 0.8, 0.6])
    nulls = [paired_rows([0.3, -0.2, 0.1]) for _ in range(9)]
    assert 0.005 < strong["p"] < 0.01
    alone = [dict(strong)]
    adjust(alone)
    assert alone[0]["verdict"] == "replicates"
    rows = [strong, *nulls]
    assert adjust(rows) == {"paper_direction": 10, "against": 10}
    assert strong["p_adj"] == pytest.approx(10 * strong["p"]) and strong["verdict"] == "not shown"


def test_missing_metric_is_not_run() -> None:
    row = paired([], "r", "a", "m", "higher")
    adjust([row])
    assert row["verdict"] == "not run" and math.isnan(row["p_adj"])


def test_bounds() -> None:
    assert bound_of("ppl.joint.word_ppl", reads_tags=True) == "upper"
    assert bound_of("ppl.marginal.token_ppl", reads_tags=True) == "upper"
    assert bound_of("ppl.marginal_k10.word_ppl", reads_tags=True) == "upper"
    assert bound_of("ppl.joint.word_ppl", reads_tags=False) is None  # exact p(x)
    assert bound_of("ppl.conditional.word_ppl", reads_tags=True) is None  # not a likelihood of x
    assert bound_of("ppl.joint.n_sentences", reads_tags=True) is None
    assert bound_of("blimp.joint.overall", reads_tags=True) is None
    # "X lowers PPL" with X's PPL an upper bound: the observed gain is a lower bound on the true one
    assert diff_bound("lower", "upper", None) == "lower"
    assert diff_bound("lower", None, "upper") == "upper"  # the comparison's bound flatters X
    assert diff_bound("higher", "upper", None) == "upper"
    assert diff_bound("higher", None, "upper") == "lower"
    assert diff_bound("lower", "upper", "upper") == "both" and diff_bound("lower", None, None) is None


def test_combine() -> None:
    assert combine(["replicates", "not shown"]) == "replicates"
    assert combine(["contradicts", "not run"]) == "contradicts"
    assert combine(["replicates", "contradicts"]) == "not shown"
    assert combine(["not shown", "not shown"]) == "not shown"
    assert combine(["not run", "not run"]) == "not run"
    assert combine([]) == "-"


def test_mean_sd() -> None:
    s = mean_sd([1.0, 2.0, 3.0])
    assert s == {"mean": 2.0, "sd": 1.0, "n": 3}
    assert math.isnan(mean_sd([5.0])["sd"]) and mean_sd([])["n"] == 0


def _cell(label: str, seed: int, scores: dict[str, float]) -> dict:
    return {
        "study": "tiny-study",
        "recipe_label": label,
        "recipe": f"txl/{label}-tiny",
        "seed": seed,
        "config_hash": f"{label}{seed}".ljust(64, "0"),
        "data_fingerprint": "x",
        "train": {"steps": 6, "resumed_from": None},
        "wall_s": {"train": 10.0, "ppl-joint": 2.0, "total": 12.0},
        "scores": scores,
    }


def _synthetic(out: Path) -> None:
    # position beats none by 2, 3, 4 joint-PPL points on seeds 1, 2 (paired), and has a seed-3
    # cell whose baseline is missing (it must not enter the paired statistics); its leakage
    # summary is stored clipped (as old cells have it) and the report recomputes it from the gains
    base = {1: 100.0, 2: 110.0}
    for seed, b in base.items():
        scores = {
            "ppl.conditional.word_ppl": b,
            "ppl.conditional.n_sentences": 12.0,
            "ppl.joint.word_ppl": b,
            "ppl.joint.n_sentences": 12.0,
            "syntaxgym.conditional.circuit.Agreement": 0.5,
            "syntaxgym.conditional.sg_score": 0.5,
        }
        write_json_atomic(
            out / "cells" / "none" / f"seed-{seed}" / "metrics.json", _cell("none", seed, scores)
        )
    for seed, d in ((1, 2.0), (2, 3.0), (3, 4.0)):
        b = base.get(seed, 120.0)
        scores = {
            "ppl.conditional.word_ppl": b - 20.0,
            "ppl.conditional.n_sentences": 12.0,
            "ppl.joint.word_ppl": b - d,
            "ppl.joint.n_sentences": 12.0,
            "syntaxgym.conditional.circuit.Agreement": 0.6,
            "syntaxgym.conditional.sg_score": 0.6,
            "leakage.full.word_ppl": 80.0,
            "leakage.prefix.word_ppl": 200.0,
            "leakage.full.gain": 0.2,
            "leakage.prefix.gain": -1.0 * seed,
            "leakage.baseline.word_ppl": 100.0,
            "leakage.summary.surviving_share": 0.0,
        }
        write_json_atomic(
            out / "cells" / "position" / f"seed-{seed}" / "metrics.json", _cell("position", seed, scores)
        )


def test_aggregate_pairs_by_seed(tiny_spec: Path, tmp_path: Path) -> None:
    spec = load_spec(tiny_spec, "test")
    spec.seeds = [1, 2, 3]
    _synthetic(tmp_path)
    cells = load_cell_metrics(tmp_path)
    agg = aggregate(cells, spec)
    pos = agg["recipes"]["position"]["scores"]["ppl.joint.word_ppl"]
    assert pos["n"] == 3 and pos["mean"] == pytest.approx((98 + 107 + 116) / 3)
    assert agg["recipes"]["position"]["reads_tags"] and not agg["recipes"]["none"]["reads_tags"]
    p = agg["vs_baseline"]["position"]["ppl.joint.word_ppl"]
    # raw recipe - baseline is -2, -3; signed to "lower is better" it is +2, +3
    assert p["seeds"] == [1, 2] and p["diffs"] == [-2.0, -3.0] and p["signed"] == [2.0, 3.0]
    assert p["mean"] == 2.5 and p["bound"] == "lower"  # position's joint PPL bounds its PPL
    claim = agg["claims"][0]
    row = claim["metrics"][0]
    # t = 2.5 / 0.5 = 5 on 1 df: p = 1/2 - atan(5)/pi (the Cauchy tail)
    assert row["p"] == pytest.approx(0.5 - math.atan(5) / math.pi)
    # joint PPL of a tagged recipe is a bound: shown with its p, never decided
    assert row["verdict"] == "bound, not counted" and claim["verdict"] == "no verdict (bounds only)"
    assert math.isnan(row["p_adj"]) and agg["holm_family"]["paper_direction"] == 0
    assert claim["paper"]["recipe"] == 16.95
    assert claim["show"][0]["metric"] == "ppl.conditional.word_ppl" and "verdict" not in claim["show"][0]
    share = agg["recipes"]["position"]["surviving_share"]
    assert share["by_seed"] == pytest.approx({1: -5.0, 2: -10.0, 3: -15.0})  # unclipped, from the gains
    assert agg["cells_finished"] == 5 and agg["cells_planned"] == 6


def test_report_files(tiny_spec: Path, tmp_path: Path) -> None:
    spec = load_spec(tiny_spec, "test")
    spec.claims[0].honest = ["ppl.marginal.word_ppl"]  # no cell has it: "not run"
    _synthetic(tmp_path)
    write_study_report(tmp_path, spec, command="structpe study run tiny-study")
    md = (tmp_path / "study.md").read_text()
    assert "| **ppl** |" in md and "**no verdict (bounds only)** / honest **not run**" in md
    assert "conditioned on one fixed parse" in md and "structpe study run tiny-study" in md
    assert "Holm-Bonferroni" in md and "0.125 with 3 seeds" not in md and "0.25 with 2 seeds" in md
    assert "word PPL [joint p(x, T): upper bound if tagged; n = 12 sentences]" in md
    assert (
        "`ppl.joint.word_ppl` [joint p(x, T): upper bound if tagged; n = 12 sentences] (bound: lower)" in md
    )
    assert "| +2.000, +3.000 |" in md  # signed to the paper's direction, not raw recipe - baseline
    assert "-5.00, -10.00, -15.00" in md  # the unclipped leakage share
    for old in ("inconclusive", "does not", "bootstrap"):
        assert old not in md
    assert (tmp_path / "syntaxgym_circuit_conditional.png").stat().st_size > 0
    assert (tmp_path / "ppl_modes.png").stat().st_size > 0
    data = json.loads((tmp_path / "study.json").read_text())
    assert data["claims"][0]["metrics"][0]["signed"] == [2.0, 3.0]
    assert data["claims"][0]["honest"][0]["verdict"] == "not run"


def test_table_escapes_pipes() -> None:
    assert md_table([["p(x | T)", "1"]], ["mode", "n"])[2] == "| p(x \\| T) | 1 |"


def test_report_reads_scores_against_chance(tiny_spec: Path, tmp_path: Path, shared_data: Path) -> None:
    """The chance row: BLiMP 0.5 and SyntaxGym by Monte Carlo on the study's own suites, cached."""
    spec = load_spec(tiny_spec, "test")
    spec.evaluations.syntaxgym = SyntaxGymSpec(suites=["number_prep", "npi_orc_any"])
    _synthetic(tmp_path)
    write_study_report(tmp_path, spec)
    chance = json.loads((tmp_path / "chance.json").read_text())
    assert chance["blimp"] == 0.5 and 0.0 < chance["syntaxgym"] < 1.0
    assert set(chance["syntaxgym_circuits"]) == {"Agreement", "Licensing"}
    md = (tmp_path / "study.md").read_text()
    assert "| *chance* | - |" in md and f"*{chance['syntaxgym']:.3f}*" in md
    assert json.loads((tmp_path / "study.json").read_text())["chance"] == chance
    (tmp_path / "chance.json").write_text(json.dumps({**chance, "syntaxgym": 0.123}))
    write_study_report(tmp_path, spec)  # computed once per study folder: the cached row is reused
    assert "*0.123*" in (tmp_path / "study.md").read_text()


def test_claims_pair_cells_of_one_cpu_type_and_precision_only(tiny_spec: Path, tmp_path: Path) -> None:
    # seed 1: the baseline ran on CPU A in bf16, position on CPU B in fp32 -> no pair (the difference
    # would include the machines' own); seed 2: both on CPU A in bf16 -> paired; the page says which
    # pairs are missing and why
    spec = load_spec(tiny_spec, "test")
    spec.seeds = [1, 2, 3]
    _synthetic(tmp_path)
    for label, seed, cpu, cap, bf16 in (
        ("none", 1, "CPU A", None, True),
        ("position", 1, "CPU B", "AVX2", False),
        ("none", 2, "CPU A", None, True),
        ("position", 2, "CPU A", None, True),
    ):
        f = tmp_path / "cells" / label / f"seed-{seed}" / "metrics.json"
        m = json.loads(f.read_text())
        hw = {"cpu": cpu, "cpu_count": 2, **({"cpu_capability": cap} if cap else {})}
        m["provenance"] = {"hardware": hw}
        m["train"]["bf16"] = bf16
        write_json_atomic(f, m)
    agg = aggregate(load_cell_metrics(tmp_path), spec)
    assert agg["recipes"]["none"]["machines"] == ["CPU A (2 CPUs), bf16"]
    assert agg["recipes"]["position"]["machines"] == ["CPU A (2 CPUs), bf16", "CPU B (2 CPUs, AVX2), fp32"]
    row = agg["claims"][0]["metrics"][0]
    assert row["seeds"] == [2] and row["signed"] == [3.0]
    assert row["missing"] == [
        {"seed": 1, "why": "`position` CPU B (AVX2), fp32; `none` CPU A, bf16"},
        {"seed": 3, "why": "no `none` value"},
    ]
    # the precision field of newer cells is read before train.bf16 (same CPU, other precision)
    f = tmp_path / "cells" / "position" / "seed-2" / "metrics.json"
    m = json.loads(f.read_text())
    m["precision"] = "fp32"
    write_json_atomic(f, m)
    none_paired = aggregate(load_cell_metrics(tmp_path), spec)["claims"][0]
    assert none_paired["metrics"][0]["seeds"] == [] and none_paired["metrics"][0]["verdict"] == "no pairs"
    assert none_paired["verdict"] == "no pairs"
    m["precision"] = "bf16"
    write_json_atomic(f, m)
    write_study_report(tmp_path, spec, command="structpe study run tiny-study")
    md = (tmp_path / "study.md").read_text()
    why = "seed 1: `position` CPU B (AVX2), fp32; `none` CPU A, bf16; seed 3: no `none` value."
    assert f"Missing pairs: {why}" in md
    assert "| position | 1 | 6 | 10 | 2 | 12 | no | CPU B (2 CPUs, AVX2), fp32 |" in md


def test_a_baseline_rerun_on_the_recipes_machine_pairs_its_seed(tiny_spec: Path, tmp_path: Path) -> None:
    # seed 1: `none` on CPU A, `position` on CPU B; `none` re-run on CPU B under machines/b pairs
    # with it (a re-run on CPU C does not; the comparison's re-run is tried before the recipe's, so
    # `position`'s re-run on CPU A stays unused); seed 2 stays on CPU A
    spec = load_spec(tiny_spec, "test")
    spec.seeds = [1, 2]
    _synthetic(tmp_path)
    shutil.rmtree(tmp_path / "cells" / "position" / "seed-3")

    def on(f: Path, cpu: str, bump: float = 0.0) -> None:
        m = json.loads(f.read_text())
        m["provenance"] = {"hardware": {"cpu": cpu, "cpu_count": 2}}
        m["precision"] = "bf16"
        # scores move, the counts of what they were measured on do not
        m["scores"] = {
            k: v if k.rsplit(".", 1)[1].startswith("n_") else v + bump for k, v in m["scores"].items()
        }
        write_json_atomic(f, m)

    cells = tmp_path / "cells"
    for label, seed, cpu in (
        ("none", 1, "CPU A"),
        ("position", 1, "CPU B"),
        ("none", 2, "CPU A"),
        ("position", 2, "CPU A"),
    ):
        on(cells / label / f"seed-{seed}" / "metrics.json", cpu)
    for folder, label, cpu in (("b", "none", "CPU B"), ("c", "none", "CPU C"), ("b", "position", "CPU A")):
        rerun = tmp_path / "machines" / folder / "cells" / label / "seed-1"
        rerun.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(cells / label / "seed-1", rerun)
        on(rerun / "metrics.json", cpu, bump=1.0)  # the re-run scores 1 higher than the primary
    reruns = load_rerun_cells(tmp_path)
    assert [(c["rerun_folder"], c["recipe_label"]) for c in reruns] == [
        ("machines/b", "none"),
        ("machines/b", "position"),
        ("machines/c", "none"),
    ]
    without = aggregate(load_cell_metrics(tmp_path), spec)["claims"][0]["metrics"][0]
    assert without["seeds"] == [2] and without["missing"][0]["seed"] == 1
    claim = aggregate(load_cell_metrics(tmp_path), spec, reruns=reruns)["claims"][0]
    row = claim["metrics"][0]
    # seed 1: position 98 against the re-run's 101 (not the primary's 100); seed 2: 107 - 110
    assert row["seeds"] == [1, 2] and row["diffs"] == [-3.0, -3.0] and row["missing"] == []
    assert claim["reruns"] == [(1, "none", "machines/b")] and claim["missing_pairs"] == []
    write_study_report(tmp_path, spec, command="structpe study run tiny-study")
    md = (tmp_path / "study.md").read_text()
    assert "Paired with re-runs on the other side's machine: seed 1: `none` of machines/b." in md


def test_a_metric_only_re_runs_have_pairs_them_on_their_machine(tmp_path: Path) -> None:
    # the primary cells (CPU A, bf16) predate a metric; both recipes were re-run on CPU B in fp32
    # and evaluated with it (seed 1 both, seed 2 only `none`): seed 1 pairs the two re-runs, seed 2
    # has no `position` value; a metric the primaries have still pairs the primaries
    _synthetic(tmp_path)
    for label, seed in (("none", 1), ("position", 1), ("none", 2)):
        f = tmp_path / "cells" / label / f"seed-{seed}" / "metrics.json"
        m = json.loads(f.read_text())
        m["provenance"], m["precision"] = {"hardware": {"cpu": "CPU A", "cpu_count": 2}}, "bf16"
        write_json_atomic(f, m)
        rerun = tmp_path / "machines" / "b" / "cells" / label / f"seed-{seed}" / "metrics.json"
        m["provenance"], m["precision"] = {"hardware": {"cpu": "CPU B", "cpu_count": 2}}, "fp32"
        m["scores"] = {**m["scores"], "blimp.exact.overall": 0.6 if label == "none" else 0.5}
        write_json_atomic(rerun, m)
    cells, reruns = load_cell_metrics(tmp_path), load_rerun_cells(tmp_path)
    alone = paired(cells, "position", "none", "blimp.exact.overall", "lower")  # the primaries alone
    assert alone["ran"] is False
    row = paired(cells, "position", "none", "blimp.exact.overall", "lower", reruns=reruns)
    assert row["ran"] and row["seeds"] == [1] and row["diffs"] == [pytest.approx(-0.1)]
    assert row["missing"] == [{"seed": 2, "why": "no `position` value"}]
    assert row["reruns"] == [
        {"seed": 1, "recipe": "position", "folder": "machines/b"},
        {"seed": 1, "recipe": "none", "folder": "machines/b"},
    ]
    primary = paired(cells, "position", "none", "ppl.joint.word_ppl", "lower", reruns=reruns)
    assert primary["seeds"] == [1] and primary["reruns"] == []  # seed 1's primaries, both CPU A
    # the reason names the side without a value, whichever side it is on
    reverse = paired(cells, "none", "position", "blimp.exact.overall", "higher", reruns=reruns)
    assert reverse["missing"] == [{"seed": 2, "why": "no `position` value"}]
    # seed 2's `position` re-run on a third CPU has the value: both sides have one, on two machines
    m["provenance"], m["recipe_label"] = {"hardware": {"cpu": "CPU C", "cpu_count": 2}}, "position"
    write_json_atomic(tmp_path / "machines" / "c" / "cells" / "position" / "seed-2" / "metrics.json", m)
    row = paired(cells, "position", "none", "blimp.exact.overall", "lower", reruns=load_rerun_cells(tmp_path))
    assert row["seeds"] == [1]
    why = "the `position` and `none` values are on different machines"
    assert row["missing"] == [{"seed": 2, "why": why}]


def test_cells_scored_on_different_test_sets_do_not_pair(tiny_spec: Path, tmp_path: Path) -> None:
    # seed 2's `position` was scored on 24 sentences (an older protocol), `none` on 12: a difference
    # of test sets, not of models; seed 1 pairs, and a metric without counts pairs as before
    spec = load_spec(tiny_spec, "test")
    spec.seeds = [1, 2]
    _synthetic(tmp_path)
    f = tmp_path / "cells" / "position" / "seed-2" / "metrics.json"
    m = json.loads(f.read_text())
    m["scores"]["ppl.joint.n_sentences"] = 24.0
    write_json_atomic(f, m)
    cells = load_cell_metrics(tmp_path)
    row = paired(cells, "position", "none", "ppl.joint.word_ppl", "lower")
    assert row["seeds"] == [1] and row["diffs"] == [-2.0]
    assert row["missing"] == [
        {"seed": 2, "why": "test sets differ (`position` against `none`: n_sentences 24 against 12)"},
        {"seed": 3, "why": "no `none` value"},
    ]
    assert paired(cells, "position", "none", "ppl.conditional.word_ppl", "lower")["seeds"] == [1, 2]
    assert paired(cells, "position", "none", "syntaxgym.conditional.sg_score", "higher")["seeds"] == [1, 2]


def test_machine_names_the_training_path() -> None:
    hw = {"provenance": {"hardware": {"cpu": "CPU A", "cpu_count": 2}}}
    assert machine_of({**hw, "train": {"bf16": True, "fast_bf16": True}}) == "CPU A (2 CPUs), bf16-fast"
    assert machine_of({**hw, "train": {"bf16": True, "fast_bf16": False}}) == "CPU A (2 CPUs), bf16"
    assert machine_of({**hw, "train": {"bf16": True}}) == "CPU A (2 CPUs), bf16"  # cells before the option
    assert machine_of({**hw, "train": {"bf16": False}}) == "CPU A (2 CPUs), fp32"


def test_a_contradiction_shows_the_opposite_tests_adjusted_p(tiny_spec: Path, tmp_path: Path) -> None:
    # position's conditional PPL is worse than the baseline's on both paired seeds (not a bound:
    # it can contradict); the verdict comes from the opposite test, so the page must show its p
    spec = load_spec(tiny_spec, "test")
    spec.claims[0].metrics = ["ppl.conditional.word_ppl"]
    spec.claims[0].honest = []
    _synthetic(tmp_path)
    for seed, worse in ((1, 10.0), (2, 11.0)):
        f = tmp_path / "cells" / "position" / f"seed-{seed}" / "metrics.json"
        m = json.loads(f.read_text())
        m["scores"]["ppl.conditional.word_ppl"] = (100.0 if seed == 1 else 110.0) + worse
        write_json_atomic(f, m)
    row = aggregate(load_cell_metrics(tmp_path), spec)["claims"][0]["metrics"][0]
    # d = -10, -11: t = -21 on 1 df, the opposite one-sided p = 1/2 - atan(21)/pi; one test, no adjustment
    assert row["p_against_adj"] == pytest.approx(0.5 - math.atan(21) / math.pi)
    assert row["verdict"] == "contradicts" and row["p_adj"] > 0.5
    write_study_report(tmp_path, spec, command="structpe study run tiny-study")
    md = (tmp_path / "study.md").read_text()
    q = f"{row['p_against_adj']:.3f}"
    assert f"(opposite direction: {q}), sign-flip p" in md  # the verdict paragraph
    assert f"| {row['p_adj']:.3f} / {q} |" in md  # the claims table
    assert "(opposite direction: -)" not in md  # not a bound: the opposite test is made

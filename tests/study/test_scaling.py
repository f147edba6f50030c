"""``structpe study scaling`` on synthetic study folders at two profiles (no training): the baseline
table and the signed effects against hand computation, the change rule case by case, the scale
order, the files written atomically, and bad input as one line with exit status 2."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from structpe.cli import main
from structpe.io import write_json_atomic
from structpe.study.scaling import NOT_DISTINGUISHABLE, PROTOCOLS_DIFFER, change, load_scale
from structpe.study.scaling_page import write_scaling
from structpe.study.spec import load_spec

T975_2 = 4.302652729911275  # t_{0.975} on 2 degrees of freedom: three paired seeds

SPEC = """\
name: {name}
baseline: none
seeds: [1, 2, 3]
recipes:
  none: {{recipe: txl/none}}
  position: {{recipe: txl/position}}
  input: {{recipe: txl/input}}
dataset: {{corpus: ud-ewt, parser: gold, test_sentences: 12, seq_len: 64}}
evaluations:
  ppl: {{likelihoods: [conditional], sentences: 12}}
  blimp: {{likelihoods: [conditional, joint]}}
  syntaxgym: {{likelihoods: [conditional, joint]}}
profiles:
  small: {{recipe_profile: tiny, description: the small scale}}
  large: {{recipe_profile: tiny, recipes: [none, position], description: the large scale}}
claims:
  - {{id: c-grows, claim: raises SG, recipe: position, metrics: [syntaxgym.conditional.sg_score],
     better: higher}}
  - {{id: c-shrinks, claim: raises joint SG, recipe: position, metrics: [syntaxgym.joint.sg_score],
     better: higher}}
  - {{id: c-flips, claim: raises BLiMP, recipe: position, metrics: [blimp.conditional.overall],
     honest: [blimp.joint.overall], better: higher}}
  - {{id: c-noise, claim: raises joint BLiMP, recipe: position, metrics: [blimp.joint.overall],
     better: higher}}
  - {{id: c-same, claim: lowers PPL, recipe: position, metrics: [ppl.conditional.word_ppl], better: lower}}
  - {{id: c-input, claim: input raises SG, recipe: input, metrics: [syntaxgym.conditional.sg_score],
     better: higher}}
"""

# the baseline's per-seed scores at each profile (means / sds by hand in the test)
BASE = {
    "small": {
        "val_lm_loss": [5.0, 5.2, 5.4],
        "ppl.conditional.word_ppl": [300.0, 310.0, 320.0],
        "blimp.conditional.overall": [0.55, 0.56, 0.57],
        "blimp.joint.overall": [0.55, 0.56, 0.57],
        "syntaxgym.conditional.sg_score": [0.30, 0.32, 0.34],
        "syntaxgym.joint.sg_score": [0.30, 0.32, 0.34],
    },
    "large": {
        "val_lm_loss": [4.0, 4.1, 4.2],
        "ppl.conditional.word_ppl": [100.0, 105.0, 110.0],
        "blimp.conditional.overall": [0.70, 0.72, 0.74],
        "blimp.joint.overall": [0.70, 0.72, 0.74],
        "syntaxgym.conditional.sg_score": [0.50, 0.55, 0.60],
        "syntaxgym.joint.sg_score": [0.50, 0.55, 0.60],
    },
}
# signed effect (> 0 = the paper's way) per seed = mean + (-1, 0, +1) * spread: sd = spread exactly
EFFECT = {
    "small": {
        "syntaxgym.conditional.sg_score": (0.05, 0.01),
        "syntaxgym.joint.sg_score": (0.15, 0.01),
        "blimp.conditional.overall": (0.05, 0.01),
        "blimp.joint.overall": (0.01, 0.02),
        "ppl.conditional.word_ppl": (10.0, 1.0),
        "val_lm_loss": (0.0, 0.1),
    },
    "large": {
        "syntaxgym.conditional.sg_score": (0.15, 0.01),  # interval above 0.05: grows
        "syntaxgym.joint.sg_score": (0.05, 0.01),  # interval below 0.15: shrinks
        "blimp.conditional.overall": (-0.05, 0.01),  # excludes zero on the other side: flips sign
        "blimp.joint.overall": (-0.005, 0.02),  # both intervals contain zero: stays within noise
        "ppl.conditional.word_ppl": (11.0, 5.0),  # both positive, overlapping: not distinguishable
        "val_lm_loss": (0.0, 0.1),
    },
}
BETTER_LOWER = ("ppl.conditional.word_ppl", "val_lm_loss")
CPU = {"small": ("Test CPU A", 2), "large": ("Test CPU B", 16)}


def _ci(mean: float, spread: float) -> list[float]:
    half = T975_2 * spread / math.sqrt(3)
    return [mean - half, mean + half]


def _cell(name: str, profile: str, label: str, seed: int, scores: dict[str, float]) -> dict:
    cpu, count = CPU[profile]
    return {
        "study": name,
        "profile": profile,
        "recipe_label": label,
        "recipe": f"txl/{label}-tiny",
        "seed": seed,
        "config_hash": f"{label}{seed}".ljust(64, "0"),
        "data_fingerprint": "x",
        "train": {"steps": 6, "resumed_from": None},
        "wall_s": {"train": 10.0, "total": 12.0},
        "scores": scores,
        "provenance": {"hardware": {"cpu": cpu, "cpu_count": count, "machine": "x86_64"}},
    }


def make_study(root: Path, profile: str, name: str = "scale-study", chance: bool = False) -> Path:
    """A study folder with finished cells for every recipe the profile runs (no training)."""
    out = root / f"{name}-{profile}"
    spec_file = root / f"{name}.yaml"
    spec_file.write_text(SPEC.format(name=name))
    write_json_atomic(
        out / "spec.json",
        {
            "source": str(spec_file),
            "profile": profile,
            "recipes": None,
            "seeds": None,
            "command": f"structpe study run {name} --profile {profile} --output {out}",
            "spec": load_spec(spec_file, profile).to_dict(),  # the settings its cells ran under
        },
    )
    labels = ["none", "position", "input"] if profile == "small" else ["none", "position"]
    for i, seed in enumerate((1, 2, 3)):
        base = {m: v[i] for m, v in BASE[profile].items()}
        counts = {"ppl.conditional.n_sentences": 12.0, "blimp.conditional.n_pairs": 670.0}
        for label in labels:
            scores = dict(base)
            if label != "none":
                for m, (mean, spread) in EFFECT[profile].items():
                    signed = mean + (i - 1) * spread
                    scores[m] = base[m] + (-signed if m in BETTER_LOWER else signed)
            write_json_atomic(
                out / "cells" / label / f"seed-{seed}" / "metrics.json",
                _cell(name, profile, label, seed, {**scores, **counts}),
            )
    if chance:
        write_json_atomic(out / "chance.json", {"blimp": 0.5, "syntaxgym": 0.289, "syntaxgym_circuits": {}})
    return out


@pytest.fixture(scope="module")
def scales(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("scaling")
    return {
        "small": make_study(root, "small", chance=True),
        "large": make_study(root, "large"),
        "root": root,
    }


@pytest.fixture(scope="module")
def page(scales: dict[str, Path]) -> dict[str, Path]:
    return write_scaling([scales["small"], scales["large"]], scales["root"] / "page" / "scaling.md")


def _rows(data: dict) -> dict[tuple[str, str, str], dict]:
    return {(c["id"], r["role"], r["metric"]): r for c in data["claims"] for r in c["rows"]}


def test_baseline_table_by_hand(page: dict[str, Path]) -> None:
    data = json.loads(page["json"].read_text())
    base = data["baseline"]
    assert base["metrics"] == {
        "val LM loss": "val_lm_loss",
        "word PPL": "ppl.conditional.word_ppl",
        "BLiMP": "blimp.conditional.overall",
        "SG": "syntaxgym.conditional.sg_score",
    }
    small, large = base["scales"]["small"]["scores"], base["scales"]["large"]["scores"]
    assert small["syntaxgym.conditional.sg_score"]["mean"] == pytest.approx(0.32)
    assert small["syntaxgym.conditional.sg_score"]["sd"] == pytest.approx(0.02)
    assert large["val_lm_loss"]["mean"] == pytest.approx(4.1)
    assert large["val_lm_loss"]["sd"] == pytest.approx(0.1)
    assert large["ppl.conditional.word_ppl"]["n"] == 3
    assert base["scales"]["small"]["chance"]["syntaxgym"] == 0.289
    assert base["scales"]["large"]["chance"] is None
    md = page["markdown"].read_text()
    assert "| `small` | `none` | 3 | 5.200 ± 0.200 | 310.0 ± 10.0 | 0.560 ± 0.010 | 0.320 ± 0.020 |" in md
    assert "| `large` | `none` | 3 | 4.100 ± 0.100 | 105.0 ± 5.0 | 0.720 ± 0.020 | 0.550 ± 0.050 |" in md
    assert "| *chance* (`small`) | - | - | - | - | *0.500* | *0.289* | - |" in md
    assert "*chance* (`large`)" not in md  # no chance.json in that folder
    # the studies table: each folder's command, seed counts and CPU from the cells' provenance
    assert "`structpe study run scale-study --profile large --output" in md
    assert "none 3, position 3, input 3" in md and "| none 3, position 3 |" in md
    assert "Test CPU A (2 CPUs)" in md and "Test CPU B (16 CPUs)" in md
    assert "- `large`: the large scale" in md


def test_effects_by_hand(page: dict[str, Path]) -> None:
    rows = _rows(json.loads(page["json"].read_text()))
    for key, prof, mean, spread in (
        (("c-grows", "replication", "syntaxgym.conditional.sg_score"), "small", 0.05, 0.01),
        (("c-grows", "replication", "syntaxgym.conditional.sg_score"), "large", 0.15, 0.01),
        (("c-flips", "replication", "blimp.conditional.overall"), "large", -0.05, 0.01),
        (("c-flips", "honest", "blimp.joint.overall"), "small", 0.01, 0.02),
        (("c-same", "replication", "ppl.conditional.word_ppl"), "large", 11.0, 5.0),  # lower is better
    ):
        r = rows[key]["at"][prof]
        assert r["n"] == 3 and r["mean"] == pytest.approx(mean)
        assert r["ci95"] == pytest.approx(_ci(mean, spread))
    # the verdict is each study's own (Holm over its own family): large's grows row is +0.15 +- 0.01
    assert rows[("c-grows", "replication", "syntaxgym.conditional.sg_score")]["at"]["large"]["verdict"] == (
        "replicates"
    )
    assert rows[("c-input", "replication", "syntaxgym.conditional.sg_score")]["at"]["large"] is None
    md = page["markdown"].read_text()
    lo, hi = _ci(0.05, 0.01)
    assert f"+0.050 [{lo:+.3f}, {hi:+.3f}] (n 3)" in md
    lo, hi = _ci(11.0, 5.0)
    assert f"+11.000 [{lo:+.3f}, {hi:+.3f}] (n 3)" in md
    assert "| `small` | `large` | change |" in md
    assert "Change rule" in md and "Checked in this order" in md


def test_change_words_per_case(page: dict[str, Path]) -> None:
    data = json.loads(page["json"].read_text())
    words = {
        (c["id"], r["role"]): [s["change"] for s in r["changes"]] for c in data["claims"] for r in c["rows"]
    }
    assert words == {
        ("c-grows", "replication"): ["grows"],
        ("c-shrinks", "replication"): ["shrinks"],
        ("c-flips", "replication"): ["flips sign"],
        ("c-flips", "honest"): ["stays within noise"],
        ("c-noise", "replication"): ["stays within noise"],
        ("c-same", "replication"): [NOT_DISTINGUISHABLE],
        ("c-input", "replication"): ["not run"],
    }
    verdicts = {c["id"]: c["verdicts"] for c in data["claims"]}
    assert verdicts["c-input"]["large"] is None and verdicts["c-input"]["small"]["replication"] in (
        "replicates",
        "not shown",
    )
    md = page["markdown"].read_text()
    assert "at `small` -> " in md and ": **flips sign**" in md and "not run at `large`: **not run**" in md
    assert "| **c-input** |  | claim verdicts |" in md and "| not run |  |" in md


def _row(mean: float, lo: float, hi: float, n: int = 3, ran: bool = True) -> dict:
    return {"ran": ran, "n": n, "mean": mean, "ci95": [lo, hi]}


@pytest.mark.parametrize(
    ("a", "b", "word"),
    [
        (_row(0.1, 0.05, 0.15), _row(-0.1, -0.15, -0.05), "flips sign"),
        (_row(-0.1, -0.15, -0.05), _row(0.1, 0.05, 0.15), "flips sign"),  # flips before grows
        (_row(0.1, 0.05, 0.15), _row(0.3, 0.11, 0.5), "grows"),
        (_row(-0.3, -0.5, -0.1), _row(-0.1, -0.2, -0.05), "grows"),  # towards the paper's way
        (_row(0.1, 0.05, 0.15), _row(0.06, 0.01, 0.09), "shrinks"),
        (_row(0.0, -0.1, 0.1), _row(0.02, -0.1, 0.12), "stays within noise"),
        (_row(0.1, 0.05, 0.15), _row(0.12, 0.0, 0.2), "not distinguishable at these seed counts"),
        (_row(0.1, 0.05, 0.15), _row(0.12, 0.06, 0.2), "not distinguishable at these seed counts"),
        (_row(0.1, 0.05, 0.15), _row(0.5, math.nan, math.nan, n=1), NOT_DISTINGUISHABLE),  # one seed
        (_row(0.1, 0.05, 0.15), _row(math.nan, math.nan, math.nan, n=0, ran=False), "not run"),
        (None, _row(0.1, 0.05, 0.15), "not run"),
    ],
)
def test_change_rule(a: dict | None, b: dict | None, word: str) -> None:
    assert change(a, b) == word


def test_order_by_quality(scales: dict[str, Path]) -> None:
    out = scales["root"] / "ordered" / "page.md"
    given = write_scaling([scales["large"], scales["small"]], out)  # large first: every change reverses
    data = json.loads(given["json"].read_text())
    assert [s["profile"] for s in data["scales"]] == ["large", "small"]
    grows = _rows(data)[("c-grows", "replication", "syntaxgym.conditional.sg_score")]
    assert grows["changes"] == [{"from": "large", "to": "small", "change": "shrinks"}]
    for x in ("syntaxgym", "val_lm_loss"):  # both put the worse baseline (small) first
        paths = write_scaling([scales["large"], scales["small"]], out, x=x, order="quality")
        data = json.loads(paths["json"].read_text())
        assert [s["profile"] for s in data["scales"]] == ["small", "large"]
        assert data["x_metric"] == ("syntaxgym.conditional.sg_score" if x == "syntaxgym" else "val_lm_loss")
        assert "worst first" in paths["markdown"].read_text()


def test_files_written_atomically(scales: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    out = scales["root"] / "atomic" / "scaling.md"
    argv = ["study", "scaling", str(scales["small"]), str(scales["large"]), "--output", str(out)]
    assert main(argv) == 0
    png = out.with_suffix(".png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "![scaling](scaling.png)" in out.read_text()
    assert json.loads(out.with_suffix(".json").read_text())["command"].startswith("structpe study scaling ")
    before = {p.name: p.read_bytes() for p in out.parent.iterdir()}
    assert set(before) == {"scaling.md", "scaling.json", "scaling.png"}

    import matplotlib.figure

    def full_disk(self: object, fh: object, **kwargs: object) -> None:
        fh.write(b"\x89PNG half a plot")  # type: ignore[attr-defined]
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", full_disk)
    assert main(argv) == 2
    after = {p.name: p.read_bytes() for p in out.parent.iterdir()}
    assert after == before  # the earlier page, plot and JSON intact; no temporary file left


def _one_line_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    return err


def test_bad_input(scales: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    small, large = str(scales["small"]), str(scales["large"])
    out = str(tmp_path / "s.md")
    err = _one_line_error(["study", "scaling", small, "--output", out], capsys)
    assert "at least two study folders" in err and "got 1" in err
    err = _one_line_error(["study", "scaling", small, small, "--output", out], capsys)
    assert "both profile 'small'" in err
    err = _one_line_error(["study", "scaling", small, str(tmp_path), "--output", out], capsys)
    assert "spec.json not found (not a study folder)" in err
    err = _one_line_error(["study", "scaling", small, str(tmp_path / "gone"), "--output", out], capsys)
    assert "gone: not a folder" in err
    empty = tmp_path / "empty"
    write_json_atomic(empty / "spec.json", json.loads((scales["large"] / "spec.json").read_text()))
    err = _one_line_error(["study", "scaling", small, str(empty), "--output", out], capsys)
    assert f"{empty}: no finished cells" in err
    other = make_study(tmp_path, "large", name="other-study")
    err = _one_line_error(["study", "scaling", small, str(other), "--output", out], capsys)
    assert "different studies" in err and "'other-study'" in err and "'scale-study'" in err
    err = _one_line_error(["study", "scaling", small, large, "--output", str(tmp_path / "s.txt")], capsys)
    assert "--output" in err and ".md" in err
    err = _one_line_error(["study", "scaling", small, large, "--output", out, "--x", "blimp"], capsys)
    assert "--x blimp" in err and "syntaxgym" in err
    err = _one_line_error(["study", "scaling", small, large, "--output", out, "--order", "size"], capsys)
    assert "--order size" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "other-study-large", "other-study.yaml"]


def test_plot_panels_show_every_interval(scales: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    # each panel's axes must hold every plotted mean and interval end, however large (PPL in
    # points, SyntaxGym in fractions), and both scales' x positions
    from structpe.study import scaling_page as scaling

    figures = []
    monkeypatch.setattr(scaling, "save_figure", lambda fig, path, **_: figures.append(fig) or Path(path))
    paths = write_scaling([scales["small"], scales["large"]], scales["root"] / "plot" / "scaling.md")
    data = json.loads(paths["json"].read_text())
    (fig,) = figures
    claims = [c for c in data["claims"] if scaling.ran_anywhere(c)]
    xs = [0.32, 0.55]  # the baseline's mean SyntaxGym at each scale (BASE): the x axis
    assert len(claims) == 6
    for ax, c in zip(fig.axes, claims, strict=False):
        lo, hi = ax.get_ylim()
        for r in c["rows"]:
            for a in r["at"].values():
                if a and a.get("n", 0) >= 2:
                    assert lo <= a["ci95"][0] and a["ci95"][1] <= hi, (c["id"], ax.get_ylim(), a)
        assert ax.get_xlim()[0] < min(xs) and max(xs) < ax.get_xlim()[1]


def test_rows_of_scales_with_other_protocols_are_marked(scales: dict[str, Path], tmp_path: Path) -> None:
    # the large scale scored BLiMP on 200 pairs per paradigm, the small one on the spec's default:
    # every BLiMP row says the protocols differ (naming the setting) and gets no change word; the
    # SyntaxGym and PPL rows, scored alike, keep theirs
    import shutil

    large = shutil.copytree(scales["large"], tmp_path / "scale-study-large")
    saved = json.loads((large / "spec.json").read_text())
    saved["spec"]["evaluations"]["blimp"]["limit"] = 200
    write_json_atomic(large / "spec.json", saved)
    paths = write_scaling([scales["small"], large], tmp_path / "page" / "scaling.md")
    rows = _rows(json.loads(paths["json"].read_text()))
    step = rows[("c-flips", "replication", "blimp.conditional.overall")]["changes"][0]
    assert step["change"] == PROTOCOLS_DIFFER
    assert step["protocol"] == "`evaluations.blimp.limit` null at `small`, 200 at `large`"
    assert rows[("c-noise", "replication", "blimp.joint.overall")]["changes"][0]["change"] == PROTOCOLS_DIFFER
    assert (
        rows[("c-grows", "replication", "syntaxgym.conditional.sg_score")]["changes"][0]["change"] == "grows"
    )
    md = paths["markdown"].read_text()
    assert "protocols differ (`evaluations.blimp.limit` null at `small`, 200 at `large`)" in md
    # no absolute machine path on the page: folders and commands are shortened
    assert str(tmp_path) not in md and str(scales["root"]) not in md
    assert "| `small` | `scale-study-small` |" in md


def test_a_scale_pairs_with_the_baselines_reruns_as_its_report_does(tmp_path: Path) -> None:
    # `position` ran on another CPU than `none`; `none` re-run there (machines/other) pairs with it,
    # as on the study's own page: without the re-runs the scale would show the claim as not run
    out = make_study(tmp_path, "small")
    for f in (out / "cells" / "position").glob("seed-*/metrics.json"):
        m = json.loads(f.read_text())
        m["provenance"]["hardware"]["cpu"] = "Other CPU"
        write_json_atomic(f, m)
    metric = "syntaxgym.conditional.sg_score"

    def claim_seeds() -> list[int]:
        claims = {c["id"]: c for c in load_scale(out).agg["claims"]}
        return next(r["seeds"] for r in claims["c-grows"]["metrics"] if r["metric"] == metric)

    assert claim_seeds() == []
    for f in (out / "cells" / "none").glob("seed-*/metrics.json"):
        m = json.loads(f.read_text())
        m["provenance"]["hardware"]["cpu"] = "Other CPU"
        write_json_atomic(out / "machines" / "other" / f.relative_to(out), m)
    assert claim_seeds() == [1, 2, 3]

"""The quickstart's single run among the ``quickstart`` profile's seeds, on synthetic reference folders
(no training): the spread and the paired differences against hand computation, the inside / outside
flags, the comparability check, a missing default (a note) against a missing or malformed
``--reference`` (one line, exit status 2, before anything runs), and the section in report.md."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from structpe.cli import main
from structpe.io import write_json_atomic
from structpe.quickstart.config import PROFILE, STUDY, QuickstartConfig, study_spec
from structpe.quickstart.reference import (
    SECTION_TITLE,
    ReferenceFolderError,
    find_reference,
    headline_metrics,
    read_reference,
    reference_section,
    render,
)
from structpe.study.runner import spec_record
from structpe.study.spec import load_spec
from structpe.study.wording import portable

MODES = ("conditional", "joint", "marginal")
METRICS = {"none": headline_metrics(("conditional",)), "position": headline_metrics(MODES)}
SEEDS = (1, 2, 3, 4, 5)
SG, PPL = "syntaxgym.conditional.sg_score", "ppl.conditional.word_ppl"
# hand-picked per-seed values (seeds 1-5); every other score is filler
NONE = {SG: [0.30, 0.32, 0.34, 0.36, 0.38], PPL: [800.0, 780.0, 760.0, 740.0, 720.0]}
POSITION = {SG: [0.33, 0.31, 0.39, 0.35, 0.37], "syntaxgym.joint.sg_score": [0.40, 0.40, 0.40, 0.40, 0.40]}
CHANCE = {"blimp": 0.5, "syntaxgym": 0.288, "syntaxgym_circuits": {}, "syntaxgym_method": "test"}


def _filed_under_all(scores: dict[str, float]) -> dict[str, float]:
    """A baseline cell files its one p(x) under every likelihood mode, as the study runner does."""
    out = dict(scores)
    for k, v in scores.items():
        if ".conditional." in k:
            out.update({k.replace(".conditional.", f".{m}."): v for m in MODES})
    return out


def _scores(label: str, i: int) -> dict[str, float]:
    names = METRICS[label]
    scores = {m: 1.0 + 0.01 * i for m in names}
    scores.update({m: v[i] for m, v in (NONE if label == "none" else POSITION).items()})
    return _filed_under_all(scores) if label == "none" else scores


def make_reference(root: Path, profile: str = PROFILE, own_evaluations: bool = True) -> Path:
    """A study folder as ``structpe study run sipe-txl --profile <profile>`` leaves it, its spec.json
    written by the runner's own record of the real spec, and finished cells for none / position.
    ``own_evaluations``: the quickstart profile evaluated on the quickstart's own sample (as the
    committed reference ran), else on the study's protocol (the profile as it stands)."""
    folder = root / f"ref-{profile}"
    spec = load_spec(STUDY, profile)
    if profile == PROFILE and own_evaluations:  # as the committed reference ran: the quickstart's sample
        spec.evaluations = study_spec(QuickstartConfig()).evaluations
    command = f"structpe study run {STUDY} --profile {profile} --output {folder}"
    write_json_atomic(folder / "spec.json", spec_record(spec, command, "fingerprint"))
    for label in ("none", "position"):
        for i, seed in enumerate(SEEDS):
            write_json_atomic(
                folder / "cells" / label / f"seed-{seed}" / "metrics.json",
                {
                    "study": STUDY,
                    "profile": profile,
                    "recipe_label": label,
                    "recipe": f"txl/{label}-tiny",
                    "seed": seed,
                    "wall_s": {"train": 10.0, "total": 12.0},
                    "scores": _scores(label, i),
                    "provenance": {"hardware": {"cpu": "Test CPU", "cpu_count": 2}},
                },
            )
    return folder


# this run: none's SyntaxGym below the reference's range, position's inside, their difference above
RUN = {
    "none": _filed_under_all({**{m: 1.02 for m in METRICS["none"]}, SG: 0.29, PPL: 760.0}),
    "position": {**{m: 1.02 for m in METRICS["position"]}, SG: 0.36, "syntaxgym.joint.sg_score": 0.40},
}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_reference(tmp_path_factory.mktemp("reference"))


def _section(reference: Path, cfg: QuickstartConfig | None = None) -> dict:
    cfg = cfg or QuickstartConfig()
    return reference_section(read_reference(reference), study_spec(cfg).to_dict(), RUN, METRICS, CHANCE,
                             cfg.seed)


def _row(rows: list[dict], recipe: str, metric: str) -> dict:
    return next(r for r in rows if r["recipe"] == recipe and r["metric"] == metric)


def test_spread_and_flags_by_hand(reference: Path) -> None:
    section = _section(reference)
    assert section["status"] == "compared"
    assert section["seeds"] == {"none": [1, 2, 3, 4, 5], "position": [1, 2, 3, 4, 5]}
    sg = _row(section["scores"], "none", SG)
    assert sg["mean"] == pytest.approx(0.34)
    assert sg["sd"] == pytest.approx(math.sqrt(0.004 / 4))  # squared deviations .0016 .0004 0 .0004 .0016
    assert (sg["min"], sg["max"], sg["n"]) == (0.30, 0.38, 5)
    assert (sg["run"], sg["inside"], sg["side"]) == (0.29, False, "below")
    ppl = _row(section["scores"], "none", PPL)
    assert ppl["mean"] == pytest.approx(760.0) and ppl["sd"] == pytest.approx(math.sqrt(4000 / 4))
    assert (ppl["inside"], ppl["side"]) == (True, None)
    pos = _row(section["scores"], "position", SG)
    assert pos["mean"] == pytest.approx(0.35) and (pos["min"], pos["max"]) == (0.31, 0.39)
    assert pos["inside"] is True
    joint = _row(section["scores"], "position", "syntaxgym.joint.sg_score")
    assert joint["sd"] == pytest.approx(0.0) and joint["inside"] is True  # min = max = the run's value
    # none is shown in its one mode (its p(x)), position in all three
    assert {r["metric"] for r in section["scores"] if r["recipe"] == "none"} == set(METRICS["none"])
    assert len([r for r in section["scores"] if r["recipe"] == "position"]) == 1 + 4 * len(MODES)


def test_paired_difference_by_hand(reference: Path) -> None:
    paired = _section(reference)["paired"]
    assert {r["recipe"] for r in paired} == {"position"} and {r["against"] for r in paired} == {"none"}
    d = _row(paired, "position", SG)  # per seed: +.03 -.01 +.05 -.01 -.01
    assert d["mean"] == pytest.approx(0.01)
    assert d["sd"] == pytest.approx(math.sqrt(0.0032 / 4))
    assert (d["min"], d["max"]) == (pytest.approx(-0.01), pytest.approx(0.05))
    assert d["run"] == pytest.approx(0.07) and (d["inside"], d["side"]) == (False, "above")
    # a joint score is paired with the baseline's p(x), which its cell files under every mode
    j = _row(paired, "position", "syntaxgym.joint.sg_score")
    assert j["mean"] == pytest.approx(0.40 - 0.34) and j["run"] == pytest.approx(0.40 - 0.29)
    assert j["min"] == pytest.approx(0.02) and j["max"] == pytest.approx(0.10)


def test_section_renders(reference: Path) -> None:
    md = "\n".join(render(_section(reference)))
    assert md.startswith(SECTION_TITLE)
    assert f"`{reference.name}`, seeds 5 of `none` (1, 2, 3, 4, 5), 5 of `position` (1, 2, 3, 4, 5)" in md
    assert str(reference.parent) not in md  # no absolute machine path: the folder and command shortened
    assert "on Test CPU (2 CPUs)" in md and "--profile quickstart --output" in md
    assert "2 / (n + 1) (0.33 with 5 seeds)" in md
    assert (
        "| `none` | `syntaxgym.conditional.sg_score` | 0.340 ± 0.032 | 0.300 to 0.380 | 5 | 0.290 "
        "| no (below) |"
    ) in md
    assert "| `none` | `ppl.conditional.word_ppl` | 760.0 ± 31.6 | 720.0 to 800.0 | 5 | 760.0 | yes |" in md
    assert "| *chance* | BLiMP, every mode | *0.500* | - | - | *0.500* | - |" in md
    assert "| *chance* | SyntaxGym, every mode | *0.288* | - | - | *0.288* | - |" in md
    assert (
        "| `position` - `none` | `syntaxgym.conditional.sg_score` | +0.010 ± 0.028 | -0.010 to +0.050 | 5 "
        "| +0.070 | no (above) |"
    ) in md
    assert "Seed 42 is one of" not in md


def test_a_reference_seed_is_no_new_draw(reference: Path) -> None:
    section = _section(reference, QuickstartConfig(seed=3))
    assert section["status"] == "compared"  # the seed is no setting
    md = "\n".join(render(section))
    assert "- Seed 3 is one of the reference's seeds: this run repeats that cell" in md


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"max_steps": 100}, '`train.max_steps` is "100" in this run and "2000" in the reference'),
        ({"vocab_size": 600}, "`dataset.vocab_size` is 600 in this run and 4096 in the reference"),
        (
            {"extra_overrides": ["train.warmup=5"]},
            '`train.warmup` is "5" in this run and not set in the reference',
        ),
        ({"variants": ("none", "input")}, "`recipes.input` is"),
    ],
)
def test_other_models_show_no_numbers(reference: Path, change: dict, named: str) -> None:
    section = _section(reference, replace(QuickstartConfig(), **change))
    assert section["status"] == "other settings"
    assert named in section["note"] and f"`{reference.name}`" in section["note"]
    assert str(reference.parent) not in section["note"]
    lines = render(section)
    assert lines == [SECTION_TITLE, "", section["note"]]  # one line, no table, no scores
    assert "scores" not in section and "paired" not in section


def test_a_score_is_compared_where_its_own_settings_agree(reference: Path) -> None:
    # other BLiMP pairs: the BLiMP rows name the setting and show no spread; every other score is
    # placed in the spread (the settings of one evaluation do not block the others)
    section = _section(reference, replace(QuickstartConfig(), blimp_limit=3))
    assert section["status"] == "compared"
    blimp = _row(section["scores"], "position", "blimp.joint.overall")
    assert blimp["other_settings"] == "`evaluations.blimp.limit` is 3 in this run and 200 in the reference"
    assert blimp["n"] == 0 and blimp["run"] == pytest.approx(1.02)
    assert "other_settings" not in _row(section["scores"], "none", SG)
    assert _row(section["scores"], "none", SG)["n"] == 5
    md = "\n".join(render(section))
    assert "| `position` | `blimp.joint.overall` | not compared: `evaluations.blimp.limit` is 3" in md
    # the beam width shapes the marginal mode's numbers only
    section = _section(reference, replace(QuickstartConfig(), marginal_k=5))
    differ = {r["metric"] for r in section["scores"] if r.get("other_settings")}
    assert differ == {f"{b}.marginal.{m}" for b, m in (("ppl", "token_ppl"), ("ppl", "word_ppl"),
                                                       ("blimp", "overall"), ("syntaxgym", "sg_score"))}
    # which modes run changes which numbers exist, not their values
    one_mode = replace(QuickstartConfig(), likelihoods=("conditional",))
    assert _section(reference, one_mode)["status"] == "compared"


def test_a_reference_on_the_studys_protocol_compares_what_the_quickstart_shares(tmp_path: Path) -> None:
    # the profile scores 67 x 100 BLiMP pairs, the 31 suites and k = 10; the quickstart its own
    # smaller sample at k = 2: the model, loss and conditional / joint PPL compare, BLiMP and
    # SyntaxGym and every marginal score name the setting that differs
    section = _section(make_reference(tmp_path, own_evaluations=False))
    assert section["status"] == "compared"
    differ = {r["metric"]: r["other_settings"] for r in section["scores"] if r.get("other_settings")}
    same = {r["metric"] for r in section["scores"] if not r.get("other_settings")}
    assert {"val_lm_loss", PPL, "ppl.joint.word_ppl"} <= same
    assert differ["blimp.conditional.overall"].startswith("`evaluations.blimp.paradigms` is [")
    assert differ[SG] == '`evaluations.syntaxgym.suites` is "all" in this run and "paper31" in the reference'
    assert differ["ppl.marginal.word_ppl"] == "`evaluations.ppl.k` is 2 in this run and 100 in the reference"


def test_a_field_added_after_the_reference_ran_is_no_difference(tmp_path: Path) -> None:
    # a reference whose spec.json predates BLiMP's marginal_limit (None = limit: the old behaviour)
    folder = make_reference(tmp_path)
    saved = json.loads((folder / "spec.json").read_text())
    del saved["spec"]["evaluations"]["blimp"]["marginal_limit"]
    del saved["spec"]["dataset"]["max_sentence_words"]
    write_json_atomic(folder / "spec.json", saved)
    section = _section(folder)
    assert section["status"] == "compared"
    assert not any(r.get("other_settings") for r in section["scores"])


def _rerun(folder: Path, machine: str, labels: tuple[str, ...], shift: float) -> None:
    """Cells of ``labels`` re-run on another machine (``machines/<name>/cells``), SyntaxGym ``shift``ed."""
    for label in labels:
        for i, seed in enumerate(SEEDS):
            scores = _scores(label, i)
            scores[SG] += shift
            write_json_atomic(
                folder / "machines" / machine / "cells" / label / f"seed-{seed}" / "metrics.json",
                {"study": STUDY, "profile": PROFILE, "recipe_label": label, "recipe": f"txl/{label}-tiny",
                 "seed": seed, "wall_s": {"train": 10.0}, "scores": scores, "precision": "bf16",
                 "provenance": {"hardware": {"cpu": "Other CPU", "cpu_count": 2,
                                             "cpu_capability": "AVX512"}}},
            )


def _placed(folder: Path, cpu: str | None = None, capability: str | None = None,
            precision: str | None = None) -> dict:
    """The section for a run on ``cpu`` (its ``metrics.json`` as far as the machine goes; None: the
    run records no machine)."""
    hw = {"cpu": cpu, "cpu_count": 2, **({"cpu_capability": capability} if capability else {})}
    run_cell = {"precision": precision, "provenance": {"hardware": hw}} if cpu else None
    return reference_section(read_reference(folder), study_spec(QuickstartConfig()).to_dict(), RUN, METRICS,
                             CHANCE, 42, run_cell=run_cell)


def test_the_run_is_placed_among_its_own_machines_cells(tmp_path: Path) -> None:
    folder = make_reference(tmp_path)
    _rerun(folder, "other-bf16", ("none", "position"), shift=0.1)
    # the run's machine re-ran both recipes: their spread, not the folder's own cells
    on_other = _placed(folder, "Other CPU", "AVX512", "bf16")
    assert on_other["same_machine"] is True and on_other["hardware"] == "Other CPU (2 CPUs, AVX512), bf16"
    assert _row(on_other["scores"], "none", SG)["mean"] == pytest.approx(0.44)
    assert _row(on_other["paired"], "position", SG)["mean"] == pytest.approx(0.01)  # within the re-runs
    assert "Another machine" not in "\n".join(render(on_other))
    # the folder's own machine: its own cells
    on_test = _placed(folder, "Test CPU")
    assert on_test["same_machine"] is True
    assert _row(on_test["scores"], "none", SG)["mean"] == pytest.approx(0.34)
    # a third machine: the folder's own cells, and a line saying the spread is another machine's
    elsewhere = _placed(folder, "Test CPU", None, "bf16")
    assert elsewhere["same_machine"] is False and elsewhere["hardware"] == "Test CPU (2 CPUs)"
    assert _row(elsewhere["scores"], "none", SG)["mean"] == pytest.approx(0.34)
    md = "\n".join(render(elsewhere))
    assert ("- **Another machine:** this run trained on Test CPU (2 CPUs), bf16, the reference's cells on "
            "Test CPU (2 CPUs).") in md
    # no machine recorded for the run: the folder's own cells, no claim either way
    unknown = _placed(folder)
    assert unknown["same_machine"] is None and "Another machine" not in "\n".join(render(unknown))


def test_a_rerun_of_part_of_the_recipes_is_not_the_runs_spread(tmp_path: Path) -> None:
    # only `none` re-ran on the run's machine: position has no cells there, so the folder's own
    # cells are the reference (one machine for both recipes and their paired difference)
    folder = make_reference(tmp_path)
    _rerun(folder, "other-bf16", ("none",), shift=0.1)
    section = _placed(folder, "Other CPU", "AVX512", "bf16")
    assert section["same_machine"] is False
    assert _row(section["scores"], "none", SG)["mean"] == pytest.approx(0.34)


def test_a_reference_whose_last_run_was_other_recipes_still_compares(tmp_path: Path) -> None:
    # the folder ran none / position, then the rivals (`--recipes gpt2 tpt`): its spec.json keeps
    # position's settings as they ran, so the quickstart's position is still compared
    folder = make_reference(tmp_path)
    first = json.loads((folder / "spec.json").read_text())
    from structpe.study.selection import select

    later = spec_record(select(load_spec(STUDY, PROFILE), ["gpt2", "tpt"]), "rivals", "fingerprint", first)
    labels = [r["label"] for r in later["spec"]["recipes"]]
    assert labels[:3] == ["none", "gpt2", "tpt"] and "position" in labels  # the latest first
    write_json_atomic(folder / "spec.json", later)
    assert _section(folder)["status"] == "compared"


def test_the_committed_reference_places_the_default_run() -> None:
    from structpe.quickstart.config import REFERENCE_DIR

    if not REFERENCE_DIR.is_dir():
        pytest.skip("an installed package without the repository's docs/")
    ref = read_reference(REFERENCE_DIR)
    run = {"none": ref.cells[0]["scores"], "position": ref.cells[-1]["scores"]}
    section = reference_section(ref, study_spec(QuickstartConfig()).to_dict(), run, METRICS, CHANCE, 42,
                                run_cell=ref.cells[0])
    assert section["status"] == "compared" and section["same_machine"] is True
    # the committed cells ran the study's protocol: the model's loss and perplexities are placed in
    # their spread, BLiMP / SyntaxGym / the marginal name the quickstart's own smaller sample
    placed = {r["metric"] for r in section["scores"] if not r.get("other_settings") and r["n"] == 5}
    assert {"val_lm_loss", PPL, "ppl.joint.word_ppl"} <= placed
    scored = [r for r in section["scores"] if r["metric"].startswith(("blimp.", "syntaxgym."))]
    assert scored and all(r.get("other_settings") for r in scored)
    assert str(REFERENCE_DIR) not in "\n".join(render(section))


def test_another_profile_is_not_comparable(tmp_path: Path) -> None:
    section = _section(make_reference(tmp_path, "cpu-mini"))
    assert section["status"] == "other settings"
    assert '`profile` is "quickstart" in this run and "cpu-mini" in the reference' in section["note"]


def test_how_the_data_stage_runs_is_no_setting(reference: Path) -> None:
    spec = study_spec(QuickstartConfig())
    spec.dataset.num_proc = 16  # run_quickstart parses with one process per core
    section = reference_section(read_reference(reference), spec.to_dict(), RUN, METRICS, CHANCE, 42)
    assert section["status"] == "compared"


def test_missing_default_is_a_note(tmp_path: Path, reference: Path) -> None:
    absent = tmp_path / "docs" / "studies" / "sipe-txl-quickstart"
    note = find_reference(None, default=absent)
    assert isinstance(note, str) and str(absent) in note
    assert "`structpe study run sipe-txl --profile quickstart --output DIR`" in note
    section = reference_section(note, {}, RUN, METRICS, CHANCE, 42)
    assert render(section) == [SECTION_TITLE, "", portable(note)] and str(tmp_path) not in portable(note)
    broken = tmp_path / "broken"
    broken.mkdir()
    assert "no spec.json" in find_reference(None, default=broken)  # present but unreadable: a note too
    assert find_reference(None, default=reference).folder == reference


def _quickstart_refuses(tmp_path: Path, given: Path, capsys: pytest.CaptureFixture[str],
                        monkeypatch: pytest.MonkeyPatch) -> str:
    """``structpe quickstart --reference given`` must stop before the data stage (which fails loudly)."""
    import structpe.parser.registry

    def no_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("the quickstart started running")

    monkeypatch.setattr(structpe.parser.registry, "get_parser", no_run)
    out = tmp_path / "qs"
    assert main(["quickstart", "--reference", str(given), "--out", str(out), "--no-progress"]) == 2
    assert not out.exists()
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("structpe quickstart: error: ")
    return err


def test_missing_or_malformed_reference_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "nowhere"
    assert str(missing) in _quickstart_refuses(tmp_path, missing, capsys, monkeypatch)
    with pytest.raises(ReferenceFolderError, match="no such folder"):
        find_reference(missing)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert f"{empty}: no spec.json" in _quickstart_refuses(tmp_path, empty, capsys, monkeypatch)
    truncated = tmp_path / "truncated"
    truncated.mkdir()
    (truncated / "spec.json").write_text('{"source": ')
    assert f"{truncated / 'spec.json'}: not valid JSON" in _quickstart_refuses(tmp_path, truncated, capsys,
                                                                                monkeypatch)
    no_cells = tmp_path / "no-cells"
    write_json_atomic(no_cells / "spec.json", spec_record(load_spec(STUDY, PROFILE), None, "x"))
    assert f"{no_cells}: no finished cells" in _quickstart_refuses(tmp_path, no_cells, capsys, monkeypatch)


def _fake_results(tmp_path: Path, section: dict) -> dict:
    """report.json's content as run_quickstart collects it, with made-up scores (no training)."""
    variants = {}
    for variant in ("none", "position"):
        run_dir = tmp_path / variant / "run"
        run_dir.mkdir(parents=True)
        (run_dir / "metrics.csv").write_text("step,eval_lm_loss\n250,5.0\n500,4.5\n")
        modes = ("conditional",) if variant == "none" else MODES
        variants[variant] = {
            "run_dir": str(run_dir),
            "train_s": 10.0,
            "val_lm_loss": 4.5,
            "eval": {
                m: {"token_ppl": 90.0, "word_ppl": 760.0, "blimp": 0.6, "syntaxgym": RUN[variant][SG],
                    "syntaxgym_circuits": {"Agreement": 0.1}}
                for m in modes
            },
        }
    return {"config": {"marginal_k": 2}, "variants": variants, "chance": CHANCE, "timings": {"total_s": 1.0},
            "reference": section}


def test_report_places_the_section_after_the_table(tmp_path: Path, reference: Path) -> None:
    from structpe.quickstart.report import write_report_files

    cfg = QuickstartConfig(bf16=False)
    write_report_files(tmp_path, cfg, _fake_results(tmp_path, _section(reference)))
    md = (tmp_path / "report.md").read_text()
    assert md.index("| chance | random region surprisals |") < md.index(SECTION_TITLE)
    assert "| `position` - `none` | `syntaxgym.conditional.sg_score` | +0.010 ± 0.028 |" in md
    # no absolute machine path: neither this report's folder nor the reference's
    assert str(tmp_path) not in md and str(reference.parent) not in md
    saved = json.loads((tmp_path / "report.json").read_text())
    assert saved["reference"]["status"] == "compared"
    assert _row(saved["reference"]["scores"], "none", SG)["inside"] is False


def test_report_without_a_reference_says_how_to_make_one(tmp_path: Path) -> None:
    from structpe.quickstart.report import write_report_files

    note = find_reference(None, default=tmp_path / "absent")
    results = _fake_results(tmp_path, reference_section(note, {}, RUN, METRICS, CHANCE, 42))
    write_report_files(tmp_path, QuickstartConfig(bf16=False), results)
    md = (tmp_path / "report.md").read_text()
    absent = tmp_path / "absent"
    assert f"{SECTION_TITLE}\n\nNo reference distribution is available: `{absent.name}` does not exist" in md
    assert str(tmp_path) not in md
    assert "structpe study run sipe-txl --profile quickstart --output DIR" in md

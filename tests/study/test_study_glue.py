"""GLUE as a study evaluation: each cell's final model fine-tuned per task and fine-tuning seed, one
cache file per run (a finished cell fine-tunes nothing again, a lost file re-runs alone, changed
settings re-run GLUE only), the flat scores, the spec's checks, the report's GLUE table, and the
committed cells' hashes, which a spec without GLUE leaves as they were."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest

import structpe.eval.glue.finetune as glue_finetune
import structpe.eval.ppl as ppl_module
import structpe.train.pretrain as pretrain_module
from structpe.io import read_json, stable_hash
from structpe.study.cells import cell_dir
from structpe.study.data import StudyData, TagVariant
from structpe.study.runner import eval_keys, run_study, train_config
from structpe.study.spec import load_spec
from structpe.study.spec_checks import StudySpecError
from structpe.study.stages.glue import glue_scores
from structpe.syntax.tagged import TaggedSentence

GLUE = "  glue: {tasks: [RTE, cola], epochs: 1, seeds: [0, 1], limit: 8, batch_size: 4, lr: 1e-3}\n"
CLAIM = """\
  - id: glue
    claim: PP-SiPE raises GLUE
    recipe: position
    metrics: [glue.macro]
    show: [glue.rte.accuracy, glue.cola.ft1.mcc]
    better: higher
    paper:
      {baseline: 68.17, recipe: 73.78, source: Table 6, tasks: {rte: [63.42, 67.51], cola: [13.8, 26.26]}}
"""
RTE = [
    ("the dog sees the cat .", "the dog sees .", "entailment"),
    ("the old farmer helps the child .", "the child helps .", "not_entailment"),
    ("the bird likes the horse .", "the bird likes .", "entailment"),
    ("the small cat calls the doctor .", "the doctor calls .", "not_entailment"),
]
COLA = [("the dog sees the cat .", 1), ("dog the cat sees the .", 0), ("the teacher finds the bird .", 1)]


class ChainTextParser:
    """Parses text for the test: whitespace words, word i heads word i + 1 (the root is word 1)."""

    name = "chain-test"

    def parse_text(self, texts: list[str], split_sentences: bool = True) -> list[TaggedSentence]:
        out = []
        for t in texts:
            words = t.split()
            out.append(TaggedSentence.from_heads(words, [0, *range(1, len(words))]))
        return out


def glue_text(spec_text: str) -> str:
    """The tiny study with GLUE among its evaluations and a claim on its macro."""
    ppl = "  ppl: {likelihoods: [conditional, joint], sentences: 12}\n"
    assert ppl in spec_text
    return spec_text.replace(ppl, ppl + GLUE) + CLAIM


@pytest.fixture(scope="module")
def glue_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """RTE (pairs, header) and CoLA (single sentences, no header) in GLUE's own file layout."""
    root = tmp_path_factory.mktemp("glue")
    for split, n in (("train", 8), ("dev", 6)):
        rows = [RTE[i % len(RTE)] for i in range(n)]
        (root / "RTE").mkdir(exist_ok=True)
        (root / "RTE" / f"{split}.tsv").write_text(
            "index\tsentence1\tsentence2\tlabel\n"
            + "".join(f"{i}\t{a}\t{b}\t{y}\n" for i, (a, b, y) in enumerate(rows))
        )
        cola = [COLA[i % len(COLA)] for i in range(n)]
        (root / "CoLA").mkdir(exist_ok=True)
        (root / "CoLA" / f"{split}.tsv").write_text("".join(f"src\t{y}\t\t{t}\n" for t, y in cola))
    return root


@pytest.fixture
def finetunes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[int, ...]]]:
    """Every (task, fine-tuning seeds) the runner fine-tunes, through the real fine-tuning function."""
    calls: list[tuple[str, tuple[int, ...]]] = []
    real = glue_finetune.finetune_task

    def counted(model_fn, tokenizer, task, *args, **kwargs):
        calls.append((task, tuple(kwargs["seeds"])))
        return real(model_fn, tokenizer, task, *args, **kwargs)

    monkeypatch.setattr(glue_finetune, "finetune_task", counted)
    return calls


def test_glue_cells_cache_resume_and_report(
    tiny_spec_text: str,
    tiny_data: StudyData,
    glue_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    finetunes: list[tuple[str, tuple[int, ...]]],
) -> None:
    path = tmp_path / "glue-study.yaml"
    path.write_text(glue_text(tiny_spec_text))
    spec = load_spec(path, "test")
    spec.seeds = [1]
    out = tmp_path / "study"

    def run() -> None:
        run_study(spec, out, data=tiny_data, parser=ChainTextParser(), data_dir=str(glue_dir))

    run()
    runs = [(t, (s,)) for t in ("rte", "cola") for s in (0, 1)]
    assert finetunes == runs * 2  # two cells (none, position), each task once per fine-tuning seed
    cell = cell_dir(out, "position", 1)
    m = read_json(cell / "metrics.json")
    s = m["scores"]
    assert {"glue.macro", "glue.macro_last", "glue.rte.accuracy", "glue.cola.mcc"} <= set(s)
    assert {"glue.rte.ft0.main", "glue.rte.ft1.last_accuracy", "glue.cola.ft_sd", "glue.macro_ft_sd"} <= set(
        s
    )
    assert s["glue.rte.n_train"] == 8 and s["glue.rte.n_dev"] == 6 and s["glue.cola.ft0.epoch"] == 1
    per_seed = [s[f"glue.rte.ft{ft}.accuracy"] for ft in (0, 1)]
    assert s["glue.rte.accuracy"] == pytest.approx(sum(per_seed) / 2)
    assert s["glue.macro"] == pytest.approx((s["glue.rte.main"] + s["glue.cola.main"]) / 2)
    cached = read_json(cell / "evals" / "glue-cola-ft1.json")
    assert cached["scores"]["mcc"] == s["glue.cola.ft1.mcc"] and "glue-cola-ft1" in m["wall_s"]

    finetunes.clear()
    run()  # finished cells: nothing is fine-tuned again
    assert finetunes == []

    (cell / "metrics.json").unlink()  # an interrupted cell that had lost one run
    (cell / "evals" / "glue-cola-ft1.json").unlink()
    run()
    assert finetunes == [("cola", (1,))]
    again = read_json(cell / "metrics.json")["scores"]
    assert {k: v for k, v in again.items() if ".cola." not in k and not k.startswith("glue.macro")} == {
        k: v for k, v in s.items() if ".cola." not in k and not k.startswith("glue.macro")
    }

    def no_training(*a, **k):
        raise AssertionError("a GLUE setting must not retrain the model")

    def no_ppl(*a, **k):
        raise AssertionError("a GLUE setting must not re-run perplexity")

    monkeypatch.setattr(pretrain_module, "pretrain", no_training)
    monkeypatch.setattr(ppl_module, "evaluate_ppl", no_ppl)
    finetunes.clear()
    spec.evaluations.glue.epochs = 2  # a GLUE setting: every GLUE run again, nothing else
    run()
    assert sorted(finetunes) == sorted(runs * 2)
    assert read_json(cell / "metrics.json")["scores"]["glue.cola.ft0.last_epoch"] == 2
    finetunes.clear()
    spec.evaluations.glue.seeds = [0, 1, 2]  # one more fine-tuning seed: its runs only
    run()
    assert sorted(finetunes) == sorted([(t, (2,)) for t in ("rte", "cola")] * 2)

    md = (out / "study.md").read_text()
    assert "## GLUE: each cell's final model fine-tuned" in md and "*majority class*" in md
    assert " tokens, float32, the first " in md  # the spec's precision (bf16 off by default)
    assert "*paper: none* (Table 6)" in md and "(its 2 tasks: 68.17)" in md
    assert "`glue.macro` [best dev epoch; 3 fine-tuning seeds; cola, rte]" in md
    assert (out / "glue_tasks.png").stat().st_size > 0
    chance = json.loads((out / "chance.json").read_text())
    assert chance["glue"]["rte"] == pytest.approx(0.5) and chance["glue"]["cola"] == 0.0


def test_glue_scores_average_seeds_then_tasks() -> None:
    """Per task the mean over fine-tuning seeds, the macro over tasks, and the macro's spread over
    fine-tuning seeds (each seed's own macro), as ``structpe finetune glue`` reports them."""

    def run(main: float, last: float) -> dict[str, float]:
        return {
            "accuracy": main,
            "main": main,
            "epoch": 2.0,
            "last_accuracy": last,
            "last_main": last,
            "last_epoch": 3.0,
            "n_train": 8.0,
            "n_dev": 6.0,
        }

    runs = {"rte": {0: run(0.6, 0.5), 1: run(0.8, 0.7)}, "sst2": {0: run(0.7, 0.7), 1: run(0.9, 0.9)}}
    s = glue_scores(runs)
    assert s["rte.main"] == pytest.approx(0.7) and s["rte.last_main"] == pytest.approx(0.6)
    assert s["macro"] == pytest.approx(0.75) and s["macro_last"] == pytest.approx(0.7)
    assert s["macro_ft_sd"] == pytest.approx(0.1414213, abs=1e-6)  # per-seed macros 0.65 and 0.85
    assert s["rte.ft1.accuracy"] == 0.8 and "rte.ft0.n_train" not in s and s["rte.n_dev"] == 6.0


@pytest.mark.parametrize(
    ("glue", "claim_metric", "needle"),
    [
        ("{tasks: [rte, qqp]}", None, "unknown or not fine-tunable GLUE task 'qqp'; choose from cola, sst2"),
        ("{tasks: [qnli]}", None, "'qnli'; choose from cola, sst2, mrpc, rte, stsb"),
        ("{tasks: [rte, RTE]}", None, "'RTE' is given twice"),
        ("{tasks: []}", None, "expected a non-empty list"),
        ("{lr: fast}", None, "evaluations.glue.lr: expected a number, got 'fast'"),
        ("{seeds: [0, 0]}", None, "evaluations.glue.seeds has duplicates"),
        ("{epochs: 0}", None, "evaluations.glue.epochs: must be >= 1"),
        ("{limit: 0}", None, "evaluations.glue.limit: must be >= 1"),
        ("{bf16: fast}", None, "evaluations.glue.bf16: expected true, false or auto, got 'fast'"),
        ("{task: [rte]}", None, "unknown key 'task'"),
        ("{tasks: [rte]}", "glue.cola.mcc", "metric 'glue.cola.mcc' is not produced"),
        ("{tasks: [rte], seeds: [0]}", "glue.rte.ft1.accuracy", "'glue.rte.ft1.accuracy' is not produced"),
        ("{tasks: [rte]}", "glue.rte.mcc", "'glue.rte.mcc' is not produced"),
    ],
)
def test_glue_settings_are_checked(
    tiny_spec_text: str, tmp_path: Path, glue: str, claim_metric: str | None, needle: str
) -> None:
    text = glue_text(tiny_spec_text).replace(GLUE, f"  glue: {glue}\n")
    if claim_metric is not None:
        text = text.replace("[glue.macro]", f"[{claim_metric}]").replace(
            "    show: [glue.rte.accuracy, glue.cola.ft1.mcc]\n", ""
        )
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(StudySpecError) as err:
        load_spec(path, "test")
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_glue_task_names_are_canonical(tiny_spec_text: str, tmp_path: Path) -> None:
    path = tmp_path / "glue.yaml"
    path.write_text(glue_text(tiny_spec_text).replace("[RTE, cola]", "[STS-B, rte, CoLA]"))
    glue = load_spec(path, "test").evaluations.glue
    assert glue.tasks == ["stsb", "rte", "cola"] and glue.lr == 1e-3 and isinstance(glue.lr, float)


@pytest.mark.parametrize("profile", ["cpu-mini", "cpu-small"])
def test_a_spec_without_glue_hashes_as_before(profile: str) -> None:
    """The committed cells of docs/studies/sipe-txl-<profile> (trained before the profile had GLUE)
    keep their hashes: GLUE adds its own cache keys (and so changes the configuration hash only where
    a profile runs it) and leaves the training hash and every other evaluation's key as they were, so
    adding it re-trains nothing. A cell that has since run GLUE (cpu-small's `none`, `position` and
    `input`) has the hash with the GLUE keys over the same training hash; the others the one without."""
    root = Path(__file__).parents[2] / "docs" / "studies" / f"sipe-txl-{profile}"
    current = load_spec("sipe-txl", profile)
    spec = copy.deepcopy(current)  # the settings the committed cells were evaluated under
    if profile == "cpu-small":  # before the study's one protocol: every BLiMP pair in the plain modes
        spec.evaluations.blimp = dataclasses.replace(spec.evaluations.blimp, limit=None, marginal_limit=100)
    assert spec.evaluations.glue is not None
    plain = copy.deepcopy(spec)
    plain.evaluations.glue = None
    # most cells predate the smc likelihood and BLiMP's exact mode too: each adds its own keys and
    # leaves the others as they were
    for name in ("ppl", "blimp", "syntaxgym"):
        sub = getattr(plain.evaluations, name)
        sub.likelihoods = [m for m in sub.likelihoods if m != "smc"]
    committed = sorted(root.glob("cells/*/seed-*/metrics.json"))
    assert committed
    # the parse's training data (the baseline's); a tag control trains on its own variant
    parse_cell = read_json(root / "cells" / spec.baseline / "seed-1" / "cell.json")
    parse_fp = parse_cell["config"]["data_fingerprint"]
    for path in committed:
        m, cell = read_json(path), read_json(path.parent / "cell.json")
        label, seed = m["recipe_label"], m["seed"]
        train_fp = cell["config"]["data_fingerprint"]
        tags = spec.recipe(label).tags
        variants = {} if tags == "parse" else {tags: TagVariant(Path("ds"), train_fp)}
        data = StudyData(
            Path("tok"), Path("ds"), m["data_fingerprint"], [], train_fingerprint=parse_fp, variants=variants
        )
        assert train_config(spec, label, seed, train_fp) == cell["config"]
        assert stable_hash(cell["config"]) == m["train_hash"] == cell["train_hash"]
        before = eval_keys(plain, label, seed, data)
        full = eval_keys(spec, label, seed, data)
        keys = {k: v for k, v in full.items() if not k.endswith("-smc")}
        ran_glue = any(k.startswith("glue.") for k in m["scores"])
        ran_smc = any(".smc." in k for k in m["scores"])  # the cells re-run since smc existed
        ran_exact = any(k.startswith("blimp.exact.") for k in m["scores"])  # and since BLiMP's exact
        expected = {
            k: v for k, v in full.items()
            if (ran_glue or not k.startswith("glue-")) and (ran_smc or not k.endswith("-smc"))
            and (ran_exact or k != "blimp-exact")
        }
        assert stable_hash([m["train_hash"], expected]) == m["config_hash"], path
        assert {k: v for k, v in keys.items() if not k.startswith("glue-")} == before
        glue = spec.evaluations.glue
        assert set(keys) - set(before) == {f"glue-{t}-ft{s}" for t in glue.tasks for s in glue.seeds}
        # the protocol re-keys BLiMP's evaluations alone (re-evaluated, never re-trained)
        now = eval_keys(current, label, seed, data)
        assert {k for k in keys if now[k] != keys[k]} <= {k for k in keys if k.startswith("blimp-")}


def test_the_committed_encoder_cells_are_the_specs_cells() -> None:
    """docs/studies/sipe-encoders-cpu-mini holds cells that `structpe study run sipe-encoders
    --profile cpu-mini` would skip as finished: their training configuration and their evaluation
    keys (GLUE's included) hash as the packaged spec's do today."""
    root = Path(__file__).parents[2] / "docs" / "studies" / "sipe-encoders-cpu-mini"
    spec = load_spec("sipe-encoders", "cpu-mini")
    committed = sorted(root.glob("cells/*/seed-*/metrics.json"))
    assert committed
    for path in committed:
        m, cell = read_json(path), read_json(path.parent / "cell.json")
        label, seed = m["recipe_label"], m["seed"]
        fp = cell["config"]["data_fingerprint"]
        assert train_config(spec, label, seed, fp) == cell["config"], path
        assert stable_hash(cell["config"]) == m["train_hash"] == cell["train_hash"]
        data = StudyData(Path("tok"), Path("ds"), m["data_fingerprint"], [], train_fingerprint=fp)
        keys = eval_keys(spec, label, seed, data)
        assert any(k.startswith("glue-") for k in keys) and any(k.startswith("glue.") for k in m["scores"])
        assert stable_hash([m["train_hash"], keys]) == m["config_hash"], path


def test_the_papers_task_scores_are_checked(tiny_spec_text: str, tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(glue_text(tiny_spec_text).replace("rte: [63.42, 67.51]", "rte: 63.42"))
    with pytest.raises(StudySpecError, match=r"claims\[1\] \(glue\): paper.tasks: expected \{task: "):
        load_spec(path, "test")

"""One test per class of docs/reliability.md: silent wrong results, names that become paths, faults
(full disk, SIGKILL during a write, two processes on one run folder), reads that name their file,
the Python API's entry checks, and generation options. Each error case checks the CLI contract:
exit 2, one line on stderr, no traceback, earlier outputs intact."""

from __future__ import annotations

import errno
import io
import json
import math
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from cli_contract import fails as _fails

from structpe.cli import main
from structpe.errors import StructpeError, is_input_error

FIXTURES = Path(__file__).parent / "fixtures"
SRC = str(Path(__file__).parents[2] / "src")


# -- one text form --------------------------------------------------------------------------------
def test_tag_writes_the_raw_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t.jsonl"
    assert main(["tag", str(FIXTURES / "ok.conllu"), "-o", str(out), "--no-progress"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["text"] for r in rows] == ["I saw her.", "Dogs bark."]
    src = tmp_path / "in.txt"
    src.write_text('I saw the videos. They were "good" -- really.\n\n  Dogs bark.\n')
    assert main(["tag", str(src), "--parser", "spacy", "-o", str(out), "--no-progress"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["text"] for r in rows] == ["I saw the videos.", 'They were "good" -- really.', "Dogs bark."]


def test_words_without_text_are_detokenized_never_space_joined() -> None:
    from structpe.eval.ppl import sentence_text
    from structpe.syntax.tagged import TaggedSentence

    sent = TaggedSentence.from_heads(["I", "saw", "the", "videos", "."], [2, 0, 4, 2, 2])
    line = sent.to_dict()
    assert sentence_text(TaggedSentence.from_dict(line)) == "I saw the videos."
    given = {**line, "text": "I saw the videos !"}
    assert sentence_text(TaggedSentence.from_dict(given)) == "I saw the videos !"


def test_empty_words_and_bad_text_are_refused(tmp_path: Path, tiny_model: Path, capsys) -> None:
    row = {"words": ["a", ""], "terminals": ["tl", "tr"], "nonterminals": ["nl-L", "eos"]}
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(row) + "\n")
    _fails(
        ["eval", "ppl", "--model", str(tiny_model), "--data", str(bad), "--out", str(tmp_path / "o")],
        capsys,
        "bad.jsonl:1",
        "word 2",
    )
    (tmp_path / "blank.jsonl").write_text("\n \n")
    _fails(
        [
            "eval",
            "ppl",
            "--model",
            str(tiny_model),
            "--data",
            str(tmp_path / "blank.jsonl"),
            "--out",
            str(tmp_path / "o"),
        ],
        capsys,
        "no tagged sentences",
    )


def test_utf8_is_strict_and_a_leading_bom_is_dropped(tmp_path: Path, capsys, monkeypatch) -> None:
    bom = tmp_path / "bom.conllu"
    bom.write_bytes(b"\xef\xbb\xbf" + (FIXTURES / "ok.conllu").read_bytes())
    out = tmp_path / "o.jsonl"
    assert main(["tag", str(bom), "-o", str(out), "--no-progress"]) == 0
    assert json.loads(out.read_text().splitlines()[0])["sent_id"] == "ok-1"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"I saw \xff her.\n")))
    _fails(["tag", "-", "--no-progress"], capsys, "<stdin>", "not UTF-8")


# -- numbers that are not numbers ------------------------------------------------------------------
def _rewrite_weights(model: Path, edit) -> None:
    from safetensors.torch import load_file, save_file

    weights = load_file(model / "model.safetensors")
    edit(weights)
    save_file(weights, model / "model.safetensors", metadata={"format": "pt"})


def test_broken_weights_and_foreign_tokenizers_are_refused(
    tmp_path: Path, tiny_model: Path, make_tiny_model, capsys
) -> None:
    data = tmp_path / "d.jsonl"
    shutil.copy(FIXTURES / "ok.jsonl", data)
    nan = tmp_path / "nan"
    shutil.copytree(tiny_model, nan)
    _rewrite_weights(
        nan, lambda w: next(v for k, v in w.items() if v.dtype.is_floating_point).fill_(math.nan)
    )
    _fails(
        ["eval", "ppl", "--model", str(nan), "--data", str(data), "--out", str(tmp_path / "o")], capsys, "NaN"
    )
    ints = tmp_path / "int32"
    shutil.copytree(tiny_model, ints)

    def to_int(w: dict) -> None:
        key = next(iter(w))
        w[key] = w[key].to(torch.int32)

    _rewrite_weights(ints, to_int)
    _fails(
        ["eval", "ppl", "--model", str(ints), "--data", str(data), "--out", str(tmp_path / "o")],
        capsys,
        "I32",
        "not floating point",
    )
    big = make_tiny_model(tmp_path / "big", vocab_size=400)
    _fails(
        [
            "eval",
            "ppl",
            "--model",
            str(tiny_model),
            "--tokenizer",
            str(big),
            "--data",
            str(data),
            "--out",
            str(tmp_path / "o"),
        ],
        capsys,
        "another model's tokenizer",
    )


def test_study_report_refuses_nan_scores(tmp_path: Path) -> None:
    from structpe.study.cell_metrics import load_cell_metrics

    cell = tmp_path / "cells" / "none" / "seed-1"
    cell.mkdir(parents=True)
    (cell / "metrics.json").write_text('{"recipe_label": "none", "seed": 1, "scores": {"ppl": NaN}}')
    with pytest.raises(StructpeError, match="metrics.json: holds NaN"):
        load_cell_metrics(tmp_path)


# -- specs, recipes and names ----------------------------------------------------------------------
SPEC = (
    (Path(__file__).parents[1] / "cli" / "test_fuzz.py")
    .read_text()
    .split('SPEC = """\\\n')[1]
    .split('"""')[0]
)


@pytest.mark.parametrize(
    ("edit", "needles"),
    [
        (("corpus: ud-ewt", "corpus: ud-ewtt"), ["dataset.corpus", "ud-ewtt"]),
        # what the run's prepare refuses, --dry-run refuses too
        (("corpus: ud-ewt", "corpus: brown"), ["gold parser needs CoNLL-U", "'brown'"]),
        (("parser: gold", "parser: gold, max_sentence_words: 40"), ["max_words cuts", "'ud-ewt'"]),
        (("parser: gold", "parser: stanza"), ["dataset.parser", "stanza"]),
        (("test_sentences: 12", "test_sentences: 0"), ["test_sentences", ">= 1"]),
        (("name: fuzz-study", "name: x/../../../escaped"), ["name", "x/../../../escaped"]),
        (("  none: {recipe: txl/none}", "  ../../x: {recipe: txl/none}"), ["recipe label", "../../x"]),
        (("baseline: none", "baseline: none\nbaseline: position"), ["given twice"]),
        (("name: fuzz-study", "name: !!python/object/apply:os.system [echo hi]"), ["python/object"]),
        (("train.warmup=2", "train.warmup=200"), ["below warmup"]),
    ],
)
def test_bad_specs_fail_at_dry_run(tmp_path: Path, capsys, edit: tuple[str, str], needles: list[str]) -> None:
    assert edit[0] in SPEC
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.replace(edit[0], edit[1], 1))
    _fails(
        ["study", "run", str(spec), "--dry-run", "-o", str(tmp_path / "study")], capsys, "spec.yaml", *needles
    )
    assert not (tmp_path / "study").exists() and not list(tmp_path.parent.glob("escaped"))


def test_names_become_paths_only_when_safe() -> None:
    from structpe.names import check_inside, check_name

    for ok in ("sipe-txl", "cpu-mini", "position_k2", "a.b+c=d"):
        assert check_name("name", ok) == ok
    for bad in ("", "..", "a/b", "x/../y", "../x", ".hidden", "-opt", "a\\b", "a b", "é"):
        with pytest.raises(StructpeError):
            check_name("name", bad)
    with pytest.raises(StructpeError, match="outside"):
        check_inside("/tmp/out/../elsewhere", "/tmp/out")


# -- faults ----------------------------------------------------------------------------------------
def test_a_full_disk_is_one_line_and_keeps_the_earlier_output(tmp_path: Path, capsys, monkeypatch) -> None:
    import structpe.io

    out = tmp_path / "tags.jsonl"
    out.write_text("earlier output\n")

    def no_space(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(structpe.io.os, "fsync", no_space)
    _fails(
        ["tag", str(FIXTURES / "ok.conllu"), "-o", str(out), "--no-progress"],
        capsys,
        str(out),
        "No space left on device",
    )
    assert out.read_text() == "earlier output\n" and sorted(p.name for p in tmp_path.iterdir()) == [
        "tags.jsonl"
    ]


def test_a_tokenizers_io_error_in_a_folder_writer_names_the_folder(tmp_path: Path) -> None:
    from structpe.io import atomic_files

    (tmp_path / "tokenizer.json").write_text("earlier")
    with (
        pytest.raises(StructpeError, match=f"{tmp_path}: cannot write .*os error 28"),
        atomic_files(tmp_path),
    ):
        raise Exception("No space left on device (os error 28)")  # what the Rust tokenizers raise
    assert [p.name for p in tmp_path.iterdir()] == ["tokenizer.json"]
    assert (tmp_path / "tokenizer.json").read_text() == "earlier"
    assert is_input_error(RuntimeError("PytorchStreamWriter failed writing file data/0: file write failed"))
    import pickle

    assert is_input_error(pickle.UnpicklingError("Weights only load failed"))


def test_tokenizer_train_on_a_full_disk_is_one_line(tmp_path: Path, capsys, monkeypatch) -> None:
    from transformers import PreTrainedTokenizerFast

    text = tmp_path / "corpus.txt"
    text.write_text("the dog barks .\nthe cat sleeps .\n" * 20)
    out = tmp_path / "tok"
    out.mkdir()
    (out / "tokenizer.json").write_text("earlier")

    def full(self, *args, **kwargs):  # what the Rust tokenizers library raises on ENOSPC
        raise Exception("No space left on device (os error 28)")

    monkeypatch.setattr(PreTrainedTokenizerFast, "save_pretrained", full)
    argv = ["tokenizer", "train", str(text), "-o", str(out), "--vocab-size", "300", "--input-format", "lines"]
    _fails(argv, capsys, str(out), "os error 28")
    assert [p.name for p in out.iterdir()] == ["tokenizer.json"] and (
        out / "tokenizer.json"
    ).read_text() == "earlier"


def test_sigkill_during_a_write_leaves_the_earlier_file(tmp_path: Path) -> None:
    dest = tmp_path / "results.json"
    dest.write_text('{"earlier": true}\n')
    writer = textwrap.dedent(f"""
        import sys, time
        from structpe.io import atomic_open
        with atomic_open({str(dest)!r}) as fh:
            fh.write("partial " * 1000)
            fh.flush()
            print("writing", flush=True)
            time.sleep(60)
    """)
    p = subprocess.Popen(
        [sys.executable, "-c", writer],
        stdout=subprocess.PIPE,
        text=True,
        env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
    )
    assert p.stdout.readline().strip() == "writing"
    p.kill()
    p.wait(timeout=30)
    assert dest.read_text() == '{"earlier": true}\n'
    from structpe.io import write_json_atomic

    write_json_atomic(dest, {"next": 1})  # the stale temporary file does not stop the next write
    assert json.loads(dest.read_text()) == {"next": 1}


def test_a_run_folder_in_use_is_refused(tmp_path: Path) -> None:
    import contextlib

    from structpe.train.pretrain import hold_run_folder

    run = tmp_path / "run"
    holder = textwrap.dedent(f"""
        import sys
        from filelock import FileLock
        lock = FileLock({str(run) + ".lock"!r}); lock.acquire()
        print("held", flush=True); sys.stdin.read()
    """)
    p = subprocess.Popen(
        [sys.executable, "-c", holder], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert p.stdout.readline().strip() == "held"
        with (
            pytest.raises(StructpeError, match="in use by another training process"),
            contextlib.ExitStack() as h,
        ):
            hold_run_folder(run, h)
    finally:
        p.stdin.close()
        p.wait(timeout=30)
    with contextlib.ExitStack() as h:  # free again once the other process ends
        hold_run_folder(run, h)


def test_truncated_files_are_named(tmp_path: Path, tiny_model: Path, capsys) -> None:
    from structpe.io import read_json

    (tmp_path / "metrics.json").write_text('{"scores": {"ppl": 1')
    with pytest.raises(StructpeError, match="metrics.json: not valid JSON"):
        read_json(tmp_path / "metrics.json")
    study = tmp_path / "study"
    study.mkdir()
    (study / "spec.json").write_text('{"source": ')
    _fails(["study", "report", str(study)], capsys, "spec.json", "not valid JSON")
    broken = tmp_path / "model"
    shutil.copytree(tiny_model, broken)
    text = (broken / "tokenizer.json").read_text()
    (broken / "tokenizer.json").write_text(text[: len(text) // 2])
    argv = ["eval", "ppl", "--model", str(broken), "--data", str(FIXTURES / "ok.jsonl"), "--out", str(study)]
    _fails(argv, capsys, str(broken / "tokenizer.json"), "not valid JSON")


# -- the Python API ----------------------------------------------------------------------------------
@pytest.mark.parametrize("family", ["txl", "roberta", "deberta", "modernbert"])
def test_models_check_their_inputs(family: str) -> None:
    from structpe.models import SiPEConfig, build_model

    model = build_model(
        SiPEConfig(
            family=family,
            injection="input",
            vocab_size=50,
            d_model=16,
            n_layers=1,
            n_heads=2,
            d_ff=32,
            max_position_embeddings=64,
        )
    ).eval()
    ids = torch.randint(5, 50, (2, 6))
    tags = torch.zeros(2, 6, dtype=torch.long)
    with pytest.raises(ValueError, match=r"attention_mask: expected shape .*\[2, 6\].*got \[2, 4\]"):
        model(ids, attention_mask=torch.ones(2, 4))
    with pytest.raises(ValueError, match="input_ids: expected a 2-D tensor"):
        model(ids[0])
    with pytest.raises(ValueError, match="input_ids: expected token ids"):
        model(ids.float())
    with pytest.raises(ValueError, match="terminal_ids: expected integer ids"):
        model(ids, terminal_ids=tags.float(), nonterminal_ids=tags)
    with pytest.raises(ValueError, match="deprel_ids: this model has no DEPREL table"):
        model(ids, terminal_ids=tags, nonterminal_ids=tags, deprel_ids=tags)


# -- options checked before any work -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--top-k", "-3"], "top_k"),
        (["--device", "tpu"], "tpu"),
        (["-n", "2", "--strategy", "greedy"], "repeat"),
        (["--temperature", "nan"], "temperature"),
    ],
)
def test_generate_options_are_checked_before_loading(
    tmp_path: Path, capsys, extra: list[str], needle: str
) -> None:
    _fails(["generate", "--model", str(tmp_path / "not-loaded"), *extra], capsys, needle)


def test_max_steps_below_warmup_is_refused(capsys) -> None:
    _fails(["pretrain", "--config", "txl/position-tiny", "max_steps=50"], capsys, "below warmup 100")
    _fails(
        ["parser", "train", "--config", "bilstm", "--max-steps", "3"],
        capsys,
        "below the config's warmup_steps",
    )


def test_a_worker_that_cannot_load_its_parser_is_one_line(tmp_path: Path, capfd) -> None:
    """capfd: the worker processes' own stderr counts too (they once printed a traceback each)."""
    src = tmp_path / "in.txt"
    src.write_text("I saw her.\nDogs bark.\n")
    argv = [
        "tag",
        str(src),
        "--parser",
        "hexatagger",
        "--model",
        str(tmp_path / "nowhere"),
        "--workers",
        "2",
        "--batch-size",
        "1",
        "-o",
        str(tmp_path / "o.jsonl"),
        "--no-progress",
    ]
    _fails(argv, capfd, "a --workers process cannot load the 'hexatagger' parser", "nowhere")
    assert not (tmp_path / "o.jsonl").exists()

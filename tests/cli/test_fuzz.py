"""A seeded, bounded fuzz test of the command line (``hypothesis``): malformed CoNLL-U, tag JSON
lines, raw text, study specs and recipes, each mutated from a valid file by random edits.

Every example runs ``structpe.cli.main`` in-process (no interpreter start-up per example) and must
end in one of two ways: exit 0 with a sane output, or exit 2 with exactly one line on stderr and no
traceback, with every file that existed before byte for byte unchanged and no temporary file left.
An exception that escapes ``main`` (a bug) fails the test. ``derandomize`` makes the examples the
same on every run; ``FUZZ_COUNTS`` records how many of each ended how (docs/reliability.md).
"""

from __future__ import annotations

import collections
import contextlib
import io
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from structpe.cli import main

FIXTURES = Path(__file__).parent / "fixtures"
FUZZ_COUNTS: collections.Counter[str] = collections.Counter()
SETTINGS = settings(derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))

TAGGED = [
    {
        "sent_id": "s1",
        "text": "I saw her.",
        "words": ["I", "saw", "her", "."],
        "heads": [2, 0, 2, 2],
        "terminals": ["tl", "tr", "tr", "tr"],
        "nonterminals": ["nl-R", "nl-L", "nl-L", "eos"],
    },
    {
        "sent_id": "s2",
        "words": ["Dogs", "bark", "."],
        "heads": [2, 0, 2],
        "terminals": ["tl", "tr", "tr"],
        "nonterminals": ["nl-R", "nl-L", "eos"],
    },
]
SPEC = """\
name: fuzz-study
baseline: none
seeds: [1, 2]
recipes:
  none: {recipe: txl/none}
  position: {recipe: txl/position}
dataset: {corpus: ud-ewt, parser: gold, test_sentences: 12, seq_len: 64}
evaluations:
  ppl: {likelihoods: [conditional, joint], sentences: 12}
profiles:
  test:
    recipe_profile: tiny
    overrides: [model.d_model=32, train.max_steps=6, train.warmup=2]
claims:
  - id: ppl
    claim: PP-SiPE lowers perplexity
    recipe: position
    metrics: [ppl.joint.word_ppl]
    better: lower
"""
RECIPE = """\
model:
  family: txl
  injection: position
  d_model: 32
  n_layers: 2
  n_heads: 2
train:
  lr: 3.0e-3
  batch_size: 4
  seq_len: 64
  max_steps: 6
  warmup: 2
"""
# values a careless user or a broken file puts where another was expected
ODD_VALUES = [
    "",
    "_",
    "0",
    "-1",
    "999999999999",
    "1.5",
    "nan",
    "inf",
    "a b",
    "../../x",
    "x/../../escaped",
    "!!python/object/apply:os.system [echo]",
    "[1, 2",
    "{a: 1}",
    "null",
    "true",
    "\ufeff",
    "\u2028",
    "é",
]
JSON_ODD: list[Any] = [None, 0, -1, 1.5, float("nan"), "", " ", "x", [], [None], ["tl"], {}, True, 10**20]


def _mutate_text(data: st.DataObject, text: str) -> bytes:
    """A few random line / field / byte edits of ``text`` (UTF-8), the edit list drawn by hypothesis."""
    lines = text.split("\n")
    for _ in range(data.draw(st.integers(1, 4), label="edits")):
        op = data.draw(st.sampled_from(["delete", "duplicate", "field", "insert", "swap", "blank"]))
        i = data.draw(st.integers(0, max(len(lines) - 1, 0)))
        if not lines:
            lines = [""]
        if op == "delete" and len(lines) > 1:
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "field":
            seps = "\t" if "\t" in lines[i] else " "
            parts = lines[i].split(seps)
            k = data.draw(st.integers(0, len(parts) - 1))
            parts[k] = data.draw(st.sampled_from(ODD_VALUES) | st.text(max_size=6))
            lines[i] = seps.join(parts)
        elif op == "insert":
            lines.insert(i, data.draw(st.sampled_from(ODD_VALUES) | st.text(max_size=20)))
        elif op == "swap" and len(lines) > 1:
            j = data.draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "blank":
            lines[i] = ""
    raw = "\n".join(lines).encode("utf-8", "surrogatepass")
    tail = data.draw(st.sampled_from(["none", "bom", "bad-utf8", "truncate", "nul"]), label="bytes")
    if tail == "bom":
        raw = b"\xef\xbb\xbf" + raw
    elif tail == "bad-utf8":
        k = data.draw(st.integers(0, len(raw)))
        raw = raw[:k] + b"\xff\xfe" + raw[k:]
    elif tail == "truncate":
        raw = raw[: data.draw(st.integers(0, len(raw)))]
    elif tail == "nul":
        raw = raw.replace(b"\n", b"\x00\n", 1)
    return raw


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _run(kind: str, argv: list[str], workspace: Path) -> tuple[int, str]:
    """Run the CLI; check the error contract; return (exit status, stderr)."""
    before = _snapshot(workspace)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:  # argparse: not expected, the command lines are fixed
            rc = exc.code if isinstance(exc.code, int) else 1
    text = err.getvalue()
    assert "Traceback" not in text, text
    assert rc in (0, 2), (rc, text)
    FUZZ_COUNTS[f"{kind} exit {rc}"] += 1
    if rc == 2:
        lines = text.strip().splitlines()
        assert len(lines) == 1 and ": error: " in lines[0], text
        assert _snapshot(workspace) == before, "a failed command changed a file"
    return rc, text


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def _workspace(work: Path, name: str, payload: bytes) -> tuple[Path, Path, Path]:
    """A fresh folder with the input file and an earlier output that a failure must not touch."""
    n = sum(1 for _ in work.glob(f"{name}-*"))
    ws = work / f"{name}-{n}"
    ws.mkdir()
    src = ws / "input"
    src.write_bytes(payload)
    prior = ws / "prior.jsonl"
    prior.write_text("an earlier output\n")
    return ws, src, prior


@SETTINGS
@given(data=st.data())
def test_fuzz_conllu(work: Path, data: st.DataObject) -> None:
    payload = _mutate_text(data, (FIXTURES / "ok.conllu").read_text())
    ws, src, prior = _workspace(work, "conllu", payload)
    conllu = src.rename(ws / "input.conllu")
    rc, _ = _run(
        "CoNLL-U (tag --parser gold)",
        ["tag", str(conllu), "--parser", "gold", "-o", str(prior), "--no-progress"],
        ws,
    )
    if rc == 0:
        for line in prior.read_text(encoding="utf-8").splitlines():
            sent = json.loads(line)
            assert sent["words"] and all(w.strip() for w in sent["words"])


# 40 examples, not hypothesis's 100: each loads the model and scores (the slowest format per example)
@settings(SETTINGS, max_examples=40)
@given(data=st.data())
def test_fuzz_tag_jsonl(work: Path, tiny_model: Path, data: st.DataObject) -> None:
    rows = json.loads(json.dumps(TAGGED))
    for _ in range(data.draw(st.integers(0, 3), label="field edits")):
        row = rows[data.draw(st.integers(0, len(rows) - 1))]
        key = data.draw(
            st.sampled_from(["words", "heads", "terminals", "nonterminals", "text", "meta", "sent_id"])
        )
        if data.draw(st.booleans(), label="drop"):
            row.pop(key, None)
        elif isinstance(row.get(key), list) and row[key] and data.draw(st.booleans(), label="element"):
            row[key][data.draw(st.integers(0, len(row[key]) - 1))] = data.draw(st.sampled_from(JSON_ODD))
        else:
            row[key] = data.draw(st.sampled_from(JSON_ODD))
    text = "\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n"
    payload = _mutate_text(data, text) if data.draw(st.booleans(), label="line edits") else text.encode()
    ws, src, _ = _workspace(work, "jsonl", payload)
    out = ws / "report"
    rc, _ = _run(
        "tag JSON lines (eval ppl --data)",
        ["eval", "ppl", "--model", str(tiny_model), "--data", str(src), "--out", str(out)],
        ws,
    )
    if rc == 0:
        res = json.loads((out / "ppl.json").read_text())
        assert math.isfinite(res["word_ppl"]) and res["n_sentences"] >= 1


@settings(SETTINGS, max_examples=12)
@given(data=st.data())
def test_fuzz_raw_text(work: Path, data: st.DataObject) -> None:
    lines = data.draw(st.lists(st.sampled_from(ODD_VALUES) | st.text(max_size=40), min_size=0, max_size=4))
    payload = _mutate_text(data, "\n".join(["I saw her.", *lines]))
    ws, src, prior = _workspace(work, "text", payload)
    rc, _ = _run(
        "raw text (tag --parser spacy)",
        ["tag", str(src), "--input-format", "raw-lines", "--parser", "spacy", "-o", str(prior)]
        + ["--no-progress"],
        ws,
    )
    if rc == 0:
        for line in prior.read_text(encoding="utf-8").splitlines():
            sent = json.loads(line)
            assert "text" in sent and sent["words"]


@SETTINGS
@given(data=st.data())
def test_fuzz_study_spec(work: Path, data: st.DataObject) -> None:
    ws, src, _ = _workspace(work, "spec", _mutate_text(data, SPEC))
    spec = src.rename(ws / "spec.yaml")
    rc, _ = _run(
        "study spec (study run --dry-run)",
        ["study", "run", str(spec), "--dry-run", "-o", str(ws / "study")],
        ws,
    )
    if rc == 0:
        assert not (ws / "study").exists()  # a dry run writes nothing


@SETTINGS
@given(data=st.data())
def test_fuzz_recipe(work: Path, data: st.DataObject) -> None:
    ws, src, _ = _workspace(work, "recipe", _mutate_text(data, RECIPE))
    recipe = src.rename(ws / "recipe.yaml")
    # no train.dataset: a recipe that validates stops at that check, so nothing ever trains
    rc, err = _run(
        "recipe (pretrain --config)",
        ["pretrain", "--config", str(recipe), f"train.output_dir={ws / 'run'}"],
        ws,
    )
    assert rc == 2, err


def test_fuzz_counts_cover_both_outcomes() -> None:
    """Report what the fuzz tests tried (run with -s to see it); every format was exercised."""
    if not FUZZ_COUNTS:
        pytest.skip("run with the fuzz tests above (the counts are theirs)")
    print("\nfuzz examples:", json.dumps(dict(sorted(FUZZ_COUNTS.items())), indent=1))
    kinds = {k.rsplit(" exit", 1)[0] for k in FUZZ_COUNTS}
    assert len(kinds) == 5, FUZZ_COUNTS

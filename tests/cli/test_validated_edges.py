"""The Python API refuses what the CLI refuses: bad tags, configs, checkpoints, tensors and files.

Each test feeds one kind of malformed input to a library function and checks the error names the
problem (and, for writers, that nothing earlier is lost).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
import yaml

from structpe.errors import StructpeError
from structpe.io import atomic_files, atomic_open, atomic_write_text, earlier_results, refuse_overwrite_input
from structpe.syntax import hexatags as hx
from structpe.syntax.conllu_io import read_conllu
from structpe.syntax.hexatags import InvalidTagsError
from structpe.syntax.tagged import TaggedSentence


# -- tags ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("ids", [[-1], [2], [1.0], [True], ["tx"]])
def test_tag_names_refuse_out_of_range_ids(ids: list) -> None:
    with pytest.raises(InvalidTagsError):
        hx.terminal_names(ids)
    with pytest.raises(InvalidTagsError):
        hx.nonterminal_names([5] if ids == [2] else ids)


def _row(**kw) -> dict:
    row = {"sent_id": "s", "words": ["a", "b"], "heads": [0, 1], "terminals": ["tl", "tr"],
           "nonterminals": ["nl-L", "eos"]}
    return {**row, **kw}


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (_row(nonterminals=["eos", "eos"]), "eos"),  # eos on every word
        (_row(words=["a", "b", "c"], heads=None, terminals=["tl"] * 3, nonterminals=["nl-L", "nl-L", "eos"]),
         "unfinished"),  # a stack that never closes
        (_row(heads=[2, 0]), "heads say"),  # heads that disagree with the tags
        (_row(heads=[0]), "words but"),
        (_row(terminals="tl tr"), "must be a list"),
        ([1, 2], "JSON object"),
    ],
)
def test_tagged_sentences_from_json_are_checked_as_trees(row: object, message: str) -> None:
    with pytest.raises(InvalidTagsError, match=message):
        TaggedSentence.from_dict(row)


def test_non_canonical_tags_are_read_and_can_be_told_apart() -> None:
    """Well formed, a tree, but never emitted by encode: eval reads it (see docs/hexatags.md)."""
    line = (Path(__file__).parent / "fixtures" / "tags_not_canonical.jsonl").read_text()
    sent = TaggedSentence.from_json(line)
    assert sent.heads == [2, 0, 2]
    with pytest.raises(InvalidTagsError, match="word 2: .*not the canonical"):
        sent.check(canonical=True)
    TaggedSentence.from_heads(["a", "b", "c"], [2, 0, 2]).check(canonical=True)


def test_heads_may_be_left_out_and_are_decoded() -> None:
    row = _row()
    del row["heads"]
    assert TaggedSentence.from_dict(row).heads == [0, 1]


# -- CoNLL-U ---------------------------------------------------------------------------------------
def test_conllu_comment_blocks_without_sent_id_are_still_skipped(tmp_path: Path) -> None:
    f = tmp_path / "x.conllu"
    f.write_text("# sent_id = a\n1\tHi\t_\t_\t_\t_\t0\troot\t_\t_\n\n# newdoc id = next\n\n")
    assert [s.sent_id for s in read_conllu(f)] == ["a"]


# -- configs and checkpoints -------------------------------------------------------------------------
def _tiny(**kw):
    from structpe.models import SiPEConfig

    base = {"family": "txl", "vocab_size": 40, "d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": 32,
            "max_position_embeddings": 32, "pad_token_id": 0}
    return SiPEConfig(**{**base, **kw})


@pytest.mark.parametrize(
    ("kw", "message"),
    [({"injecton": "position"}, "did you mean 'injection'"), ({"n_heads": 0}, "n_heads"),
     ({"vocab_size": 0}, "vocab_size"), ({"d_ff": -1}, "d_ff"), ({"dropout": 1.5}, "dropout")],
)
def test_sipe_config_refuses_typos_and_non_positive_sizes(kw: dict, message: str) -> None:
    with pytest.raises(StructpeError, match=message):
        _tiny(**kw)


def test_sipe_config_still_round_trips(tmp_path: Path) -> None:
    from structpe.models import SiPEConfig

    _tiny(injection="position").save_pretrained(tmp_path)
    assert SiPEConfig.from_pretrained(tmp_path).injection == "position"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"family": "roberta"}, "builds RobertaSiPEForMaskedLM"),  # config.json names another family
        ({"injection": "position"}, "missing keys"),  # an edited injection needs weights it lacks
        ({"d_ff": 64}, "mismatched|size"),
    ],
)
def test_load_fails_unless_every_weight_loads(tmp_path: Path, edit: dict, message: str) -> None:
    from structpe.models import build_model, load

    build_model(_tiny()).save_pretrained(tmp_path)
    assert load(tmp_path) is not None  # the untouched folder loads
    cfg = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**cfg, **edit}))
    with pytest.raises(StructpeError, match=message):
        load(tmp_path)


def test_load_names_a_corrupt_weights_file(tmp_path: Path) -> None:
    from structpe.models import build_model, load

    build_model(_tiny()).save_pretrained(tmp_path)
    data = (tmp_path / "model.safetensors").read_bytes()
    (tmp_path / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(StructpeError, match=str(tmp_path)):
        load(tmp_path)


@pytest.mark.parametrize(("family", "injection"), [("roberta", "input"), ("deberta", "position"),
                                                   ("modernbert", "position"), ("roberta", "none")])
def test_encoders_refuse_tags_of_another_shape(family: str, injection: str) -> None:
    from structpe.models import build_model

    model = build_model(_tiny(family=family, injection=injection, dropout=0.0, attention_dropout=0.0,
                              local_attention=8))
    ids = torch.randint(5, 40, (2, 7))
    one = torch.zeros(1, 7, dtype=torch.long)
    with pytest.raises(ValueError, match="must match input_ids"):
        model(ids, terminal_ids=one, nonterminal_ids=one + 1)  # batch 1 would broadcast over 2
    model(ids, terminal_ids=one.expand(2, 7), nonterminal_ids=(one + 1).expand(2, 7))


# -- resume ------------------------------------------------------------------------------------------
def _fake_checkpoint(run: Path, step: int) -> Path:
    from safetensors.torch import save_file

    ckpt = run / f"checkpoint-{step}"
    ckpt.mkdir(parents=True)
    (ckpt / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    save_file({"w": torch.ones(64)}, str(ckpt / "model.safetensors"))
    return ckpt


def test_resume_falls_back_past_a_corrupt_newest_checkpoint(tmp_path: Path, capsys) -> None:
    from structpe.train.checkpoints import checkpoint_problem, last_complete_checkpoint

    _fake_checkpoint(tmp_path, 10)
    newest = _fake_checkpoint(tmp_path, 20)
    assert last_complete_checkpoint(tmp_path).name == "checkpoint-20"
    data = (newest / "model.safetensors").read_bytes()
    (newest / "model.safetensors").write_bytes(data[:-100])  # killed mid-write / disk full
    assert "model.safetensors" in checkpoint_problem(newest)
    assert last_complete_checkpoint(tmp_path).name == "checkpoint-10"
    assert "skipping checkpoint-20" in capsys.readouterr().err
    (newest / "model.safetensors").write_bytes(data)
    (newest / "optimizer.pt").write_bytes(b"PK\x03\x04 truncated")
    assert last_complete_checkpoint(tmp_path).name == "checkpoint-10"


def test_resume_refuses_a_changed_recipe_unless_told(tmp_path: Path) -> None:
    from structpe.errors import RecipeError
    from structpe.train.checkpoints import check_resume_config
    from structpe.train.recipe import load_recipe

    recipe = load_recipe("txl/position-tiny", [f"train.output_dir={tmp_path}"])
    recipe.dump(tmp_path / "config.yaml")
    assert check_resume_config(tmp_path, recipe) == []
    bookkeeping = load_recipe("txl/position-tiny", [f"train.output_dir={tmp_path}", "eval_every=7"])
    assert check_resume_config(tmp_path, bookkeeping) == []
    changed = load_recipe("txl/position-tiny", [f"train.output_dir={tmp_path}", "lr=0.1", "seed=3"])
    with pytest.raises(RecipeError, match=r"train.lr.*train.seed.*--allow-changed-recipe"):
        check_resume_config(tmp_path, changed)
    assert check_resume_config(tmp_path, changed, allow_changed=True) == ["train.lr", "train.seed"]
    # a run folder written before a train key existed resumes under that key's default, not another
    saved = yaml.safe_load((tmp_path / "config.yaml").read_text())
    del saved["train"]["fast_bf16"]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(saved))
    assert check_resume_config(tmp_path, recipe) == []
    fast = load_recipe("txl/position-tiny", [f"train.output_dir={tmp_path}", "train.fast_bf16=true"])
    with pytest.raises(RecipeError, match=r"train.fast_bf16"):
        check_resume_config(tmp_path, fast)


# -- atomic outputs ------------------------------------------------------------------------------------
def test_a_failed_write_leaves_the_earlier_file(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    atomic_write_text(out, "earlier\n")
    with pytest.raises(RuntimeError), atomic_open(out) as fh:
        fh.write("half a new repo")
        raise RuntimeError("crash mid-write")
    assert out.read_text() == "earlier\n" and [p.name for p in tmp_path.iterdir()] == ["report.json"]
    with pytest.raises(StructpeError, match="is a directory"):
        atomic_write_text(tmp_path, "x")


def test_atomic_outputs_get_ordinary_permissions(tmp_path: Path) -> None:
    """A new file gets 0666 & ~umask like open() (not mkstemp's 0600); a replaced one keeps its bits."""
    old_mask = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "new.json", "{}")
        assert (tmp_path / "new.json").stat().st_mode & 0o777 == 0o644
        (tmp_path / "shared.json").write_text("x")
        (tmp_path / "shared.json").chmod(0o664)
        atomic_write_text(tmp_path / "shared.json", "y")
        assert (tmp_path / "shared.json").stat().st_mode & 0o777 == 0o664
    finally:
        os.umask(old_mask)


def test_atomic_files_keeps_other_files_of_the_folder(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "tokenizer.json").write_text("old")
    with pytest.raises(RuntimeError), atomic_files(tmp_path) as staging:
        (staging / "tokenizer.json").write_text("half")
        raise RuntimeError("crash")
    assert (tmp_path / "tokenizer.json").read_text() == "old"
    with atomic_files(tmp_path) as staging:
        (staging / "tokenizer.json").write_text("new")
    assert (tmp_path / "tokenizer.json").read_text() == "new"
    assert (tmp_path / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "tokenizer.json"]


def test_output_equal_to_an_input_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "in.conllu"
    f.write_text("x")
    with pytest.raises(StructpeError, match="also an input"):
        refuse_overwrite_input(tmp_path / "." / "in.conllu", [f], "-o")
    (tmp_path / "link.conllu").symlink_to(f)
    with pytest.raises(StructpeError, match="also an input"):
        refuse_overwrite_input(tmp_path / "link.conllu", [f], "-o")
    refuse_overwrite_input(tmp_path / "out.jsonl", [f, "-"], "-o")


def test_results_are_merged_never_dropped(tmp_path: Path) -> None:
    from structpe.lis.kg_report import merge

    cfg = {"iters": 3, "models": ["B"], "threads": 1}
    a, b, out = tmp_path / "a", tmp_path / "b", tmp_path / "out"
    for folder, model in ((a, "B"), (b, "J"), (out, "Bl")):
        folder.mkdir()
        res = {"config": {**cfg, "models": [model]}, "data": {"vocab": 3}, "models": {model: {
            "label": model, "params": 1, "train_seconds": 0, "final_train_loss": 1.0,
            "scores": {"single/test": {"all": {"hit@1": 0.5, "hit@5": 0.5, "ppl": 2.0}}}}}}
        (folder / "results.json").write_text(json.dumps(res))
    merged = merge([a, b], out)
    assert sorted(merged["models"]) == ["B", "Bl", "J"]  # out's earlier "Bl" is kept
    assert earlier_results(out / "results.json", {**cfg, "threads": 8}, ignore=("threads",)).keys() == {
        "B", "Bl", "J"}
    with pytest.raises(StructpeError, match=r"another configuration.*iters"):
        earlier_results(out / "results.json", {**cfg, "iters": 4})

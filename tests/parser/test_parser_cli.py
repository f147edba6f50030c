"""End to end on a tiny model trained inside the test: ``structpe parser train``, ``parser eval`` and
``structpe tag --parser hexatagger --model DIR``, all through ``structpe.cli.main``."""

from __future__ import annotations

import json

import pytest
import yaml

from structpe.cli import main
from structpe.parser.recipe import ParserTrainConfig
from structpe.syntax.hexatags import decode
from structpe.syntax.trees import check_tree

pytestmark = pytest.mark.data


@pytest.fixture(scope="module")
def trained(tmp_path_factory, shared_data):
    """A 1-layer model trained for a few steps on 48 EWT sentences (seconds, not accuracy)."""
    tmp = tmp_path_factory.mktemp("hexatagger")
    recipe = {
        "model": {"d_model": 32, "n_layers": 1, "n_heads": 2, "d_ff": 64, "dropout": 0.0},
        "tokenizer": {"vocab_size": 600, "corpora": []},
        "data": {"root": str(shared_data), "train": ["ewt"], "limit_train": 48, "limit_dev": 16},
        "optim": {"max_steps": 8, "warmup_steps": 2, "batch_tokens": 1024, "eval_every": 4, "ema": 0.9},
        "threads": 1,
    }
    cfg = tmp / "recipe.yaml"
    cfg.write_text(yaml.safe_dump(recipe))
    out = tmp / "model"
    assert main(["parser", "train", "--config", str(cfg), "--output", str(out), "--no-progress"]) == 0
    return out, shared_data


def test_train_writes_a_model_folder(trained):
    out, _ = trained
    names = {p.name for p in out.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "train_summary.json"} <= names
    summary = json.loads((out / "train_summary.json").read_text())
    assert summary["steps"] == 8 and summary["best_step"] in (4, 8)
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in log if r["event"] == "train"]
    assert losses and all(loss == loss for loss in losses)  # finite, logged
    dev = [r for r in log if r["event"] == "dev"]
    assert dev and all("uas_raw_weights" in r for r in dev)  # EMA weights scored, raw ones logged


def test_tag_cli_with_hexatagger(trained, tmp_path, capsys):
    out, _ = trained
    src = tmp_path / "in.txt"
    src.write_text("The dog barked at the mailman. It ran away!\nColorless green ideas sleep furiously.\n")
    dst = tmp_path / "out.jsonl"
    rc = main(
        ["tag", str(src), "--parser", "hexatagger", "--model", str(out), "-o", str(dst), "--no-progress"]
    )
    assert rc == 0
    rows = [json.loads(line) for line in dst.read_text().splitlines()]
    assert len(rows) == 3
    for r in rows:
        assert set(r) >= {"words", "heads", "terminals", "nonterminals"}
        check_tree(r["heads"])
        assert decode(r["terminals"], r["nonterminals"]) == r["heads"]
        assert r["nonterminals"][-1] == "eos"


def test_tag_cli_quantize_is_for_the_hexatagger_only(tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("Hello there.\n")
    assert main(["tag", str(src), "--parser", "spacy", "--quantize", "int8", "--no-progress"]) != 0
    assert "--quantize" in capsys.readouterr().err


def test_tag_cli_hexatagger_without_a_packaged_model_asks_for_one(tmp_path, capsys, monkeypatch):
    from structpe.parser import default as default_parser

    monkeypatch.setattr(default_parser, "default_model_dir", lambda: tmp_path / "none")
    src = tmp_path / "in.txt"
    src.write_text("Hello there.\n")
    assert main(["tag", str(src), "--parser", "hexatagger", "--no-progress"]) != 0
    assert "--model" in capsys.readouterr().err


def test_export_writes_float16_weights_and_a_card_that_checks_them(trained, tmp_path):
    import torch
    from safetensors.torch import load_file

    from structpe.errors import StructpeError
    from structpe.parser.default import read_card, verify

    out, root = trained
    dev = root / "ud" / "UD_English-EWT" / "en_ewt-ud-dev.conllu.gz"
    shipped = tmp_path / "shipped"
    argv = ["parser", "export", "--model", str(out), "--output", str(shipped)]
    assert main([*argv, "--command", "structpe parser train", "--eval", f"{dev}:dev"]) == 0
    card = read_card(shipped)
    assert card["training_command"] == "structpe parser train" and card["parameters"] > 0
    (metrics,) = card["metrics"].values()
    assert metrics["sentences"] > 0 and 0 <= metrics["uas"] <= 100
    files = {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}
    files.add("train_summary.json")
    assert set(card["sha256"]) == files
    assert {t.dtype for t in load_file(shipped / "model.safetensors").values()} == {torch.float16}
    verify(shipped)
    (shipped / "tokenizer_config.json").write_text("{}")
    with pytest.raises(StructpeError, match="tokenizer_config.json"):
        verify(shipped)
    # the exported folder is a model folder like any other
    src = tmp_path / "in.txt"
    src.write_text("The dog barked.\n")
    assert main(["tag", str(src), "--parser", "hexatagger", "--model", str(shipped), "--no-progress",
                 "-o", str(tmp_path / "o.jsonl")]) == 0


def test_parser_eval_cli(trained, tmp_path):
    out, root = trained
    dev = root / "ud" / "UD_English-EWT" / "en_ewt-ud-dev.conllu.gz"
    # a 20-sentence slice keeps the test fast
    from structpe.io import open_text

    lines, blocks = [], 0
    with open_text(dev) as fh:
        for line in fh:
            lines.append(line)
            if not line.strip():
                blocks += 1
                if blocks == 20:
                    break
    small = tmp_path / "dev20.conllu"
    small.write_text("".join(lines))
    metrics = tmp_path / "m.json"
    assert main(["parser", "eval", "--model", str(out), "--data", str(small), "--output", str(metrics)]) == 0
    m = json.loads(metrics.read_text())
    assert m["sentences"] == 20
    for key in (
        "uas",
        "uas_no_punct",
        "las",
        "tag_acc",
        "terminal_acc",
        "nonterminal_acc",
        "sentences_per_second",
    ):
        assert key in m
    assert 0 <= m["uas"] <= 100
    prov = m["provenance"]  # what produced the numbers: the model's weights, the data, the command
    assert prov["model"]["weights_sha256"] and prov["data"][0]["path"] == str(small.resolve())
    assert prov["parser"]["identity"]["files"]["model.safetensors"] == prov["model"]["weights_sha256"]
    assert prov["command"].startswith("structpe parser eval") and prov["wall_s"] >= 0
    q = tmp_path / "q.json"
    argv = ["parser", "eval", "--model", str(out), "--data", str(small), "--quantize", "int8"]
    argv += ["--output", str(q)]
    assert main(argv) == 0
    mq = json.loads(q.read_text())
    assert mq["quantize"] == "int8" and mq["sentences"] == 20 and 0 <= mq["uas"] <= 100


def test_recipes_parse():
    for name in ("tiny", "fast", "small"):
        cfg = ParserTrainConfig.from_yaml(name)
        assert cfg.data.dev == "ewt" and "atis" not in cfg.data.train
    with pytest.raises(ValueError, match="unknown"):
        ParserTrainConfig.from_dict({"optim": {"lrr": 1}})


def test_parse_text_one_tree_per_text_when_asked(trained):
    """Scorers align tags to a text's characters, so they need exactly one tree per text."""
    from structpe.parser.registry import get_parser

    out, _ = trained
    parser = get_parser("hexatagger", model=str(out))
    texts = ["The dog barked. Then it slept.", "Cats sleep."]
    split = parser.parse_text(texts)
    assert [s.sent_id for s in split] == ["1.1", "1.2", "2.1"]
    joined = parser.parse_text(texts, split_sentences=False)
    assert len(joined) == 2
    assert joined[0].words == ["The", "dog", "barked", ".", "Then", "it", "slept", "."]
    for s in joined:
        check_tree(s.heads)
        assert decode(s.terminals, s.nonterminals) == s.heads


def test_prepare_tags_with_the_quantized_hexatagger(trained, tmp_path, capsys):
    out, _ = trained
    text = tmp_path / "prose.txt"
    text.write_text("The old man saw the boat. It was red.\n\nShe ran home quickly. The dog barked.\n" * 4)
    tok = tmp_path / "tok"
    assert main(["tokenizer", "train", str(text), "-o", str(tok), "--vocab-size", "300"]) == 0
    common = ["--train", str(text), "--validation", str(text), "--tokenizer", str(tok)]
    common += ["--input-format", "raw-text", "--seq-len", "48"]
    argv = ["prepare", *common, "--parser", "hexatagger", "--parser-model", str(out)]
    assert main([*argv, "--parser-quantize", "int8", "-o", str(tmp_path / "ds")]) == 0
    meta = json.loads((tmp_path / "ds" / "structpe_prepare.json").read_text())
    assert meta["settings"]["parser_kwargs"]["quantize"] == "int8"
    assert meta["stats"]["train"]["sentences"] == 16
    bad = ["prepare", *common, "--parser", "spacy", "--parser-quantize", "int8", "-o", str(tmp_path / "x")]
    assert main(bad) == 2
    assert "--parser-quantize" in capsys.readouterr().err

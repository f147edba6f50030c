"""`structpe eval ...` / `structpe finetune glue` end to end on tiny saved models (no downloads)."""

from __future__ import annotations

import json

import pytest
import torch
from eval_toys import WORDS, ChainParser, ObjectParser, make_tokenizer
from transformers import BertConfig, BertForSequenceClassification, GPT2Config, GPT2LMHeadModel

from structpe.cli import main
from structpe.io import sha256_file
from structpe.models import SiPEConfig, build_model
from structpe.parser.registry import register_parser

register_parser("chain-test", lambda **kw: ChainParser())
register_parser("object-test", lambda **kw: ObjectParser())


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    torch.manual_seed(0)
    txl = build_model(
        SiPEConfig(
            family="txl", injection="position", vocab_size=len(WORDS), d_model=32, n_layers=2, n_heads=2
        )
    )
    txl.save_pretrained(root / "txl")
    make_tokenizer().save_pretrained(root / "txl")
    base = build_model(
        SiPEConfig(family="txl", injection="none", vocab_size=len(WORDS), d_model=32, n_layers=2, n_heads=2)
    )
    base.save_pretrained(root / "txl-none")
    make_tokenizer().save_pretrained(root / "txl-none")
    gpt = GPT2LMHeadModel(GPT2Config(vocab_size=len(WORDS), n_layer=1, n_head=2, n_embd=16, n_positions=64))
    gpt.save_pretrained(root / "gpt2")
    make_tokenizer().save_pretrained(root / "gpt2" / "tokenizer")
    bert = BertForSequenceClassification(
        BertConfig(
            vocab_size=len(WORDS),
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
        )
    )
    bert.save_pretrained(root / "bert")
    make_tokenizer(with_cls=True).save_pretrained(root / "bert")
    return root


@pytest.mark.data
def test_eval_blimp_and_syntaxgym_cli(saved, shared_data, tmp_path, capsys):
    out = tmp_path / "blimp"
    rc = main(
        [
            "eval",
            "blimp",
            "--model",
            str(saved / "txl"),
            "--parser",
            "chain-test",
            "--data-dir",
            str(shared_data),
            "--paradigms",
            "causative",
            "--limit",
            "3",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    res = json.loads((out / "blimp.json").read_text())
    assert res["n_pairs"] == 3 and res["scoring"].startswith("conditional")
    assert (out / "blimp.md").read_text().startswith("# BLiMP") and (out / "blimp_paradigms.png").is_file()
    assert res["chance"] == 0.5
    assert "| chance | one of two sentences | 0.5000 |" in (out / "blimp.md").read_text()
    prov = res["provenance"]
    assert prov["command"].startswith("structpe eval blimp --model")
    assert prov["parser"]["name"] == "chain-test"
    assert prov["model"]["weights_sha256"] == sha256_file(saved / "txl" / "model.safetensors")
    blimp_file = shared_data / "blimp" / "causative.jsonl.gz"
    assert prov["data"] == [{"path": str(blimp_file.resolve()), "sha256": sha256_file(blimp_file)}]
    assert prov["likelihood"] == "conditional" and prov["k"] is None
    assert prov["limits"] == {"limit": 3, "paradigms": ["causative"]} and prov["wall_s"] > 0
    assert prov["structpe_version"] and prov["hardware"]["cpu"] and "git_revision" in prov
    out = tmp_path / "sg"
    rc = main(
        [
            "eval",
            "syntaxgym",
            "--model",
            str(saved / "gpt2"),
            "--data-dir",
            str(shared_data),
            "--suites",
            "number_src",
            "--max-items",
            "2",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    res = json.loads((out / "syntaxgym.json").read_text())
    assert res["n_suites"] == 1 and res["suites"]["number_src"]["n_items"] == 2
    assert "not the paper's SG score" in (out / "syntaxgym.md").read_text()
    # the chance row: the same suite and items under random surprisals (SyntaxGym chance is not 0.5)
    assert 0 < res["chance"]["sg_score"] < 1 and set(res["chance"]["suite_accuracy"]) == {"number_src"}
    assert "| chance |" in (out / "syntaxgym.md").read_text()
    prov = res["provenance"]
    assert prov["limits"] == {"max_items": 2, "suites": ["number_src"], "protocol": "prediction0"}
    assert prov["parser"] is None and prov["data"][0]["path"].endswith("number_src.json")


@pytest.mark.data
def test_eval_blimp_cli_with_per_pair_budgets(saved, shared_data, tmp_path):
    out = tmp_path / "blimp"
    args = ["eval", "blimp", "--model", str(saved / "txl"), "--parser", "chain-test", "--data-dir"]
    args += [str(shared_data), "--paradigms", "causative", "--limit", "3", "--likelihood", "smc"]
    assert main([*args, "--particles", "2", "--particles-max", "8", "--out", str(out)]) == 0
    res = json.loads((out / "blimp.json").read_text())
    assert res["particles_max"] == 8 and sum(res["budgets"].values()) == 3 and res["settle_z"] > 0
    assert res["provenance"]["particles_max"] == 8 and res["provenance"]["particles"] == 2
    assert "per-pair budgets: N = 2 to 8" in (out / "blimp.md").read_text()


@pytest.mark.data
def test_eval_blimp_cli_exact_on_short_pairs(saved, shared_data, tmp_path, capsys):
    """``--exact-max-words``: the same short pairs for a tag-reading model and its baseline (whose
    words come from the parser too), recorded as the exact likelihood; impossible limits refused."""
    common = ["--parser", "chain-test", "--data-dir", str(shared_data), "--paradigms", "causative"]
    common += ["--limit", "6", "--exact-max-words", "5", "--keep-pairs"]
    got = {}
    for name in ("txl", "txl-none"):
        out = tmp_path / name
        assert main(["eval", "blimp", "--model", str(saved / name), *common, "--out", str(out)]) == 0
        res = json.loads((out / "blimp.json").read_text())
        assert res["likelihood"] == "exact" and res["provenance"]["likelihood"] == "exact"
        assert res["n_pairs_considered"] == 6 and res["provenance"]["limits"]["exact_max_words"] == 5
        got[name] = [p["pair_id"] for p in res["pairs"]]
    assert got["txl"] == got["txl-none"] and 0 < len(got["txl"]) < 6
    capsys.readouterr()
    refused = ((["--exact-max-words", "9"], "1 to 7"), (["--likelihood", "smc"], "drop --likelihood smc"))
    for bad, msg in refused:
        args = ["eval", "blimp", "--model", str(saved / "txl"), *common, *bad]
        assert main(args) == 2
        assert msg in capsys.readouterr().err


def test_eval_ppl_cli(saved, tmp_path):
    data = tmp_path / "tagged.jsonl"
    sents = ChainParser().parse_text(["the dogs run .", "cat sleep"])
    data.write_text("\n".join(s.to_json() for s in sents) + "\n")
    out = tmp_path / "ppl"
    assert main(["eval", "ppl", "--model", str(saved / "txl"), "--data", str(data), "--out", str(out)]) == 0
    res = json.loads((out / "ppl.json").read_text())
    assert res["n_words"] == 6 and res["n_tokens"] == 7 and res["token_ppl"] > 1
    assert res["provenance"]["data"] == [{"path": str(data.resolve()), "sha256": sha256_file(data)}]
    # --text in the shared input vocabulary: raw-text joins the lines of a paragraph
    prose = tmp_path / "prose.txt"
    prose.write_text("the dogs\nrun .\n\ncat sleep\n")
    args = ["eval", "ppl", "--model", str(saved / "txl"), "--text", str(prose), "--parser", "chain-test"]
    assert main([*args, "--input-format", "raw-text", "--out", str(tmp_path / "p1")]) == 0
    assert json.loads((tmp_path / "p1" / "ppl.json").read_text())["n_sentences"] == 2
    assert main([*args, "--out", str(tmp_path / "p2")]) == 0  # .txt: raw-lines, three texts
    assert json.loads((tmp_path / "p2" / "ppl.json").read_text())["n_sentences"] == 3


@pytest.mark.data
def test_finetune_glue_cli(saved, shared_data, tmp_path):
    out = tmp_path / "glue"
    rc = main(
        [
            "finetune",
            "glue",
            "--model",
            str(saved / "bert"),
            "--tasks",
            "all",
            "--seeds",
            "0",
            "1",
            "--epochs",
            "1",
            "--max-train",
            "8",
            "--max-eval",
            "8",
            "--batch-size",
            "4",
            "--precision",
            "bf16",
            "--data-dir",
            str(shared_data),
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    res = json.loads((out / "glue.json").read_text())
    assert set(res["tasks"]) == {"cola", "sst2", "mrpc", "rte", "stsb"} and -1 <= res["macro"] <= 1
    assert all(t["bf16"] for t in res["tasks"].values())
    assert res["macro_sd"] is not None and res["parser"]["name"] == "none"  # the HF model reads no tags
    assert res["provenance"]["seed"] == [0, 1] and len(res["provenance"]["data"]) == 5
    table = (out / "glue.md").read_text()
    assert "best epoch" in table and "last epoch" in table and "**macro**" in table
    assert "bf16 autocast" in table


@pytest.mark.data
def test_eval_attention_cli(saved, shared_data, tmp_path):
    out = tmp_path / "att"
    # the first causative pair is "Aaron breaks the glass." (the shape ObjectParser handles)
    rc = main(
        [
            "eval",
            "attention",
            "--base",
            str(saved / "txl-none"),
            "--sipe",
            str(saved / "txl"),
            "--parser",
            "object-test",
            "--data-dir",
            str(shared_data),
            "--limit",
            "1",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    res = json.loads((out / "attention.json").read_text())
    assert res["direction"] == "object_to_verb" and res["n_with_object"] == 1
    assert len(res["per_layer_base"]) == 2 and (out / "attention_per_layer.png").is_file()

"""Checkpoints that are not what they claim (docs/reliability.md, "foreign checkpoints"): a folder
with a missing or an extra tensor, weights of another family under a config, a ``config.json``
that is not an object, a classifier given where a language model is needed. Every path refuses
them: ``structpe.models.load``, the Auto classes, ``eval``, ``generate``, fine-tuning."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file, save_file

from structpe.errors import StructpeError

FIXTURES = Path(__file__).parent / "fixtures"


def _edit_weights(src: Path, dst: Path, drop: str | None = None, add: str | None = None) -> Path:
    shutil.copytree(src, dst)
    weights = load_file(dst / "model.safetensors")
    if drop is not None:
        weights.pop(next(k for k in weights if drop in k))
    if add is not None:
        weights[add] = torch.zeros(3)
    save_file(weights, dst / "model.safetensors", metadata={"format": "pt"})
    return dst


@pytest.fixture(scope="module")
def damaged(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("damaged")
    return {
        "missing": _edit_weights(tiny_model, d / "missing", drop="layers.0"),
        "extra": _edit_weights(tiny_model, d / "extra", add="stray.weight"),
    }


@pytest.mark.parametrize("kind", ["missing", "extra"])
def test_every_loader_refuses_a_missing_or_an_extra_tensor(
    kind: str, damaged: dict[str, Path], tmp_path: Path, cli_fails: Any
) -> None:
    from transformers import AutoModelForCausalLM

    from structpe.models import load

    folder = damaged[kind]
    word = "missing keys" if kind == "missing" else "unexpected keys"
    with pytest.raises(StructpeError, match=word):
        AutoModelForCausalLM.from_pretrained(folder)
    with pytest.raises(StructpeError, match=word):
        load(folder)
    cli_fails(["eval", "ppl", "--model", str(folder), "--data", str(FIXTURES / "ok.jsonl"),
            "--out", str(tmp_path / "o")], str(folder), word)
    cli_fails(["generate", "--model", str(folder), "--max-words", "3"], str(folder), word)


def test_the_auto_classes_still_load_a_whole_folder(tiny_model: Path) -> None:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    assert type(model).__name__ == "TransfoXLSiPEForCausalLM"


def test_weights_of_another_family_under_a_llama_config_are_refused(
    tiny_model: Path, tmp_path: Path, cli_fails: Any
) -> None:
    from transformers import LlamaConfig

    folder = tmp_path / "llama"
    shutil.copytree(tiny_model, folder)
    cfg = LlamaConfig(vocab_size=300, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=2)
    cfg.architectures = ["LlamaForCausalLM"]
    cfg.save_pretrained(folder)
    cli_fails(["eval", "ppl", "--model", str(folder), "--data", str(FIXTURES / "ok.jsonl"),
            "--out", str(tmp_path / "o")], str(folder), "missing keys")


def test_a_config_list_and_a_classifier_are_one_line(
    tiny_model: Path, tmp_path: Path, cli_fails: Any
) -> None:
    listed = tmp_path / "listed"
    shutil.copytree(tiny_model, listed)
    (listed / "config.json").write_text("[1, 2]\n")
    data = ["--data", str(FIXTURES / "ok.jsonl"), "--out", str(tmp_path / "o")]
    cli_fails(["eval", "ppl", "--model", str(listed), *data], "config.json", "expected a JSON object")
    cli_fails(["generate", "--model", str(listed)], "config.json", "expected a JSON object")

    from structpe.eval.glue.finetune import load_classifier

    with pytest.raises(StructpeError, match="expected a JSON object"):
        load_classifier(listed, 2)
    classifier = load_classifier(tiny_model, 2)  # an LM loaded as a classifier: a new head, allowed
    saved = tmp_path / "classifier"
    classifier.save_pretrained(saved)
    shutil.copy(tiny_model / "tokenizer.json", saved)
    archs = json.loads((saved / "config.json").read_text())["architectures"]
    assert archs[0].endswith("ForSequenceClassification")
    cli_fails(["eval", "ppl", "--model", str(saved), *data], "sequence classifier")

"""A tiny saved model for the CLI tests that need one (fuzz, reliability)."""

from __future__ import annotations

from pathlib import Path

import pytest


def save_tiny_model(out: Path, vocab_size: int = 300, injection: str = "position") -> Path:
    """A small random TXL model and byte-level BPE tokenizer, saved like a trained one."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from structpe.models import SiPEConfig, build_model

    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<pad>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    t.train_from_iterator(
        ["I saw her.", "Dogs bark.", "the quick brown fox jumps over a lazy dog"] * 3, trainer
    )
    tok = PreTrainedTokenizerFast(tokenizer_object=t, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    torch.manual_seed(0)
    cfg = SiPEConfig(
        family="txl", injection=injection, vocab_size=len(tok), d_model=16, n_layers=1, n_heads=2, d_ff=32
    )
    build_model(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture
def make_tiny_model():  # noqa: ANN201 (the function above, for tests that need another model)
    return save_tiny_model


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture
def cli_fails(capsys: pytest.CaptureFixture[str]):  # noqa: ANN201 (the checker below)
    """``cli_fails(argv, *needles)``: :func:`cli_contract.fails` with this test's ``capsys``."""
    from cli_contract import fails

    return lambda argv, *needles: fails(argv, capsys, *needles)

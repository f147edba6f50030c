"""Fixtures for the pre-training tests: a slice of UD EWT, a tokenizer trained on it, a prepared
dataset (gold trees) and a tiny Transformer-XL recipe. Everything is built once per session."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from structpe.train.prepare import prepare
from structpe.train.prepare_settings import PrepareSettings
from structpe.train.tokenizer import train_tokenizer

SEQ_LEN = 64


def _conllu_slice(src: Path, dst: Path, start: int, count: int) -> Path:
    """Write sentences [start, start + count) of a CoNLL-U file (a test-local copy, not the data)."""
    blocks, cur = [], []
    with gzip.open(src, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                cur.append(line)
            elif cur:
                blocks.append("".join(cur))
                cur = []
                if len(blocks) >= start + count:
                    break
    dst.write_text("\n".join(blocks[start : start + count]) + "\n")
    return dst


@pytest.fixture(scope="session")
def ewt_slices(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    src = shared_data / "ud" / "UD_English-EWT" / "en_ewt-ud-dev.conllu.gz"
    d = tmp_path_factory.mktemp("ewt")
    return {
        "train": _conllu_slice(src, d / "train.conllu", 0, 300),
        "validation": _conllu_slice(src, d / "valid.conllu", 300, 100),
    }


@pytest.fixture(scope="session")
def bpe_tokenizer(ewt_slices: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tok") / "bpe"
    train_tokenizer(
        [ewt_slices["train"], ewt_slices["validation"]], out, kind="bpe", vocab_size=600, show_progress=False
    )
    return out


@pytest.fixture(scope="session")
def wordpiece_tokenizer(ewt_slices: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tok") / "wordpiece"
    train_tokenizer([ewt_slices["train"]], out, kind="wordpiece", vocab_size=600, show_progress=False)
    return out


@pytest.fixture(scope="session")
def gold_dataset(
    ewt_slices: dict[str, Path], bpe_tokenizer: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    out = tmp_path_factory.mktemp("data") / "ewt-gold"
    settings = PrepareSettings(parser="gold", seq_len=SEQ_LEN)
    return prepare({k: [v] for k, v in ewt_slices.items()}, bpe_tokenizer, out, settings=settings)


TINY_RECIPE = """\
description: tiny test decoder
model:
  family: txl
  injection: position
  d_model: 32
  n_layers: 2
  n_heads: 2
  d_ff: 64
  dropout: 0.0
  attention_dropout: 0.0
train:
  lr: 3.0e-3
  batch_size: 4
  seq_len: 64
  max_steps: 6
  warmup: 2
  eval_every: 3
  eval_batches: 2
  log_every: 1
  seed: 7
  progress: false
"""


@pytest.fixture
def tiny_recipe(tmp_path: Path) -> Path:
    p = tmp_path / "tiny.yaml"
    p.write_text(TINY_RECIPE)
    return p

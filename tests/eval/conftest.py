"""Fixtures over the toy tokenizer and tables of eval_toys."""

from __future__ import annotations

import pytest
import torch
from eval_toys import WORDS, make_tokenizer
from transformers import PreTrainedTokenizerFast


@pytest.fixture
def tok() -> PreTrainedTokenizerFast:
    return make_tokenizer()


@pytest.fixture
def mlm_tok() -> PreTrainedTokenizerFast:
    return make_tokenizer(with_cls=True)


@pytest.fixture
def random_table() -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.randn(len(WORDS), len(WORDS), generator=g)

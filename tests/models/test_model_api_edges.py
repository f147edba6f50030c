"""The model API at its edge (docs/reliability.md, "the Python API"): every family's ``forward``
refuses token ids outside the vocabulary (too large or negative) and an empty batch or sequence
with one ``ValueError`` naming ``input_ids``, never an ``IndexError`` from ``nn.Embedding`` or a
reshape error in a layer."""

from __future__ import annotations

import pytest
import torch

from structpe.models import SiPEConfig, build_model

VOCAB = 50


def _model(family: str) -> torch.nn.Module:
    cfg = SiPEConfig(family=family, injection="input", vocab_size=VOCAB, d_model=16, n_layers=1,
                     n_heads=2, d_ff=32, max_position_embeddings=64)
    return build_model(cfg).eval()


BAD_IDS = [
    (torch.full((2, 5), VOCAB), "token id 50 is outside the vocabulary \\[0, 50\\)"),
    (torch.tensor([[3, 4, -1]]), "token id -1 is outside"),
    (torch.zeros(0, 5, dtype=torch.long), "non-empty batch"),
    (torch.zeros(2, 0, dtype=torch.long), "non-empty batch"),
]


@pytest.mark.parametrize("family", ["txl", "roberta", "deberta", "modernbert"])
def test_every_family_checks_ids_against_the_vocabulary(family: str) -> None:
    model = _model(family)
    for ids, needle in BAD_IDS:
        with pytest.raises(ValueError, match=f"input_ids: .*{needle}"):
            model(ids)
    assert model(torch.randint(0, VOCAB, (2, 5))).logits.shape[:2] == (2, 5)


def test_the_lisformer_checks_its_ids() -> None:
    from structpe.lis.lisformer import LISformer, LISformerConfig

    model = LISformer(LISformerConfig(vocab_size=VOCAB, d_model=16, n_layers=1, n_heads=2, pe="rope")).eval()
    for ids, needle in BAD_IDS:
        with pytest.raises(ValueError, match=f"idx: .*{needle}"):
            model(ids)
    assert model(torch.randint(0, VOCAB, (1, 4))).logits.shape == (1, 4, VOCAB)

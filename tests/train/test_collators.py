"""Collators: causal labels, MLM 15% / 80-10-10, and no masked position can see its own tag."""

from __future__ import annotations

import pytest
import torch

from structpe.models import SiPEConfig, build_model
from structpe.train.collators import CausalCollator, MLMCollator

IGN = -100
PAD, BOS, EOS, MASK, V = 0, 1, 2, 3, 120


def examples(n: int, length: int, seed: int = 0) -> list[dict]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        L = length - (i % 5)  # ragged: the collator pads
        ids = [BOS] + torch.randint(5, V, (L - 2,), generator=g).tolist() + [EOS]
        t = [IGN] + [
            int(x) if k % 3 else IGN for k, x in enumerate(torch.randint(0, 2, (L - 2,), generator=g))
        ]
        nt = [IGN] + [
            int(x) if k % 3 else IGN for k, x in enumerate(torch.randint(0, 5, (L - 2,), generator=g))
        ]
        out.append({"input_ids": ids, "terminal_ids": t + [IGN], "nonterminal_ids": nt + [IGN]})
    return out


def test_causal_collator_pads_and_labels() -> None:
    batch = CausalCollator(pad_token_id=PAD)(examples(3, 10))
    assert batch["input_ids"].shape == (3, 10)
    pad = batch["attention_mask"] == 0
    assert pad.any() and (batch["labels"][pad] == IGN).all()
    assert torch.equal(batch["labels"][~pad], batch["input_ids"][~pad])
    assert (batch["terminal_ids"][pad] == IGN).all() and (batch["nonterminal_ids"][pad] == IGN).all()


def test_mlm_rates_specials_and_determinism() -> None:
    col = MLMCollator(
        pad_token_id=PAD, mask_token_id=MASK, vocab_size=V, special_token_ids=[BOS, EOS, MASK], seed=3
    )
    exs = examples(64, 128)
    batch = col(exs)
    orig = CausalCollator(PAD)(exs)["input_ids"]
    sel = batch["labels"] != IGN
    maskable = (orig != PAD) & (orig != BOS) & (orig != EOS)
    assert not (sel & ~maskable).any()  # never a special token or padding
    assert torch.equal(batch["labels"][sel], orig[sel])  # labels are the original ids
    assert (batch["input_ids"][~sel] == orig[~sel]).all()  # unselected positions untouched
    rate = sel.sum() / maskable.sum()
    assert 0.13 < rate < 0.17
    masked = (batch["input_ids"] == MASK) & sel
    kept = (batch["input_ids"] == orig) & sel
    assert 0.75 < masked.sum() / sel.sum() < 0.85 and 0.06 < kept.sum() / sel.sum() < 0.14
    assert torch.equal(col(exs)["labels"], batch["labels"])  # same seed, epoch and batch: same masks
    col.epoch = 1
    assert not torch.equal(col(exs)["labels"], batch["labels"])  # a new epoch draws new masks


@pytest.mark.parametrize(
    "family,injection", [("roberta", "input"), ("deberta", "position"), ("modernbert", "position")]
)
def test_mlm_never_leaks_a_masked_tokens_prior(family: str, injection: str) -> None:
    """Changing the tags of every selected position changes no output: their prior is zeroed.
    Changing the tag of one unselected tagged position does change the outputs (the test has teeth)."""
    torch.manual_seed(0)
    cfg = SiPEConfig(
        family=family,
        injection=injection,
        vocab_size=V,
        d_model=32,
        n_layers=2,
        n_heads=2,
        d_ff=64,
        dropout=0.0,
        attention_dropout=0.0,
        max_position_embeddings=64,
        prior_proj_init_std=0.5,
        initializer_range=0.3,
        pad_token_id=PAD,
    )
    # large init: peaked attention and a strong prior, so that any leak would show in the logits
    model = build_model(cfg).eval()
    col = MLMCollator(
        pad_token_id=PAD,
        mask_token_id=MASK,
        vocab_size=V,
        special_token_ids=[BOS, EOS, MASK],
        mlm_probability=0.3,
        seed=0,
    )
    batch = col(examples(4, 40))
    sel = batch["labels"] != IGN
    tagged = batch["terminal_ids"] != IGN
    assert (sel & tagged).sum() > 5
    with torch.no_grad():
        ref = model(**batch)
        flipped = dict(batch)
        flipped["terminal_ids"] = torch.where(sel & tagged, 1 - batch["terminal_ids"], batch["terminal_ids"])
        flipped["nonterminal_ids"] = torch.where(
            sel & tagged, (batch["nonterminal_ids"] + 2) % 5, batch["nonterminal_ids"]
        )
        out = model(**flipped)
        torch.testing.assert_close(out.logits, ref.logits, rtol=0, atol=1e-5)
        torch.testing.assert_close(out.terminal_logits, ref.terminal_logits, rtol=0, atol=1e-5)
        control = dict(batch)
        r, c = (tagged & ~sel).nonzero()[0].tolist()
        control["terminal_ids"] = batch["terminal_ids"].clone()
        control["terminal_ids"][r, c] = 1 - control["terminal_ids"][r, c]
        assert (model(**control).logits - ref.logits).abs().max() > 1e-2

"""Where structpe and the SiPE paper could differ: the plain baseline, the tag loss, parameter counts."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from structpe.models import SiPEConfig, build_model
from structpe.models.registry import sipe_parameter_count
from structpe.train.recipe import load_recipe

VOCAB = 40


def txl(injection: str = "none", **kw) -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = SiPEConfig(family="txl", injection=injection, vocab_size=VOCAB, d_model=16, n_layers=2, n_heads=2,
                     d_ff=32, dropout=0.0, attention_dropout=0.0, **kw)
    return build_model(cfg).eval()


def batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """BOS (untagged) + words; positions 3 and 6 are continuation subwords."""
    ids = torch.tensor([[1, 5, 9, 12, 7, 30, 31, 8, 2]])
    t = torch.tensor([[-100, 0, 1, -100, 0, 1, -100, 0, -100]])
    n = torch.tensor([[-100, 1, 3, -100, 0, 2, -100, 4, -100]])
    return ids, t, n


def test_none_from_the_api_is_the_plain_baseline():
    model = txl("none")  # defaults everywhere: tag_loss_weight is 1.0, yet no tag supervision
    assert model.tag_heads is None
    assert not [n for n, _ in model.named_parameters() if "tag" in n or "prior" in n]
    ids, t, n = batch()
    out = model(ids, terminal_ids=t, nonterminal_ids=n, labels=ids)
    assert out.terminal_logits is None and out.terminal_loss is None
    want = F.cross_entropy(out.logits[0, :-1], ids[0, 1:])
    torch.testing.assert_close(out.loss, want)
    assert torch.equal(out.loss, out.lm_loss)
    for family in ("roberta", "deberta", "modernbert"):  # the encoders' `none` is plain too
        enc = build_model(SiPEConfig(family=family, injection="none", vocab_size=VOCAB, d_model=16,
                                     n_layers=1, n_heads=2, d_ff=32, max_position_embeddings=32))
        assert enc.tag_heads is None


def test_multitask_baseline_is_explicit():
    model = txl("none", multitask_baseline=True)
    assert model.tag_heads is not None and model.prior is None
    ids, t, n = batch()
    out = model(ids, terminal_ids=t, nonterminal_ids=n, labels=ids)
    torch.testing.assert_close(out.loss, out.lm_loss + out.terminal_loss + out.nonterminal_loss)
    assert out.terminal_loss > 0
    with pytest.raises(ValueError, match="multitask_baseline"):
        SiPEConfig(family="txl", injection="position", multitask_baseline=True)


def test_paper_tag_loss_without_the_start_position():
    """joint_tag_loss=False: L_T = mean over m_p = 1 of CE(tau of the next tagged position)."""
    ids, t, n = batch()
    for joint in (False, True):
        model = txl("position", joint_tag_loss=joint, prior_proj_init_std=0.3)
        out = model(ids, terminal_ids=t, nonterminal_ids=n, labels=ids)
        tagged = [p for p in range(ids.shape[1]) if t[0, p] != -100]
        sources = tagged[:-1] if not joint else [0, *tagged[:-1]]  # the last word has no next word
        targets = tagged[1:] if not joint else tagged
        ce_t = F.cross_entropy(out.terminal_logits[0, sources], t[0, targets])
        ce_n = F.cross_entropy(out.nonterminal_logits[0, sources], n[0, targets])
        torch.testing.assert_close(out.terminal_loss, ce_t)
        torch.testing.assert_close(out.nonterminal_loss, ce_n)
        torch.testing.assert_close(out.loss, out.lm_loss + ce_t + ce_n)


def test_extra_parameter_counts_by_hand():
    # txl/position-small: d = 512, 8 layers, one d x d W_E per layer (PP-SiPE), E_T + E_N = 7d,
    # tag heads 2 x (d + 1) + 5 x (d + 1)
    d, layers = 512, 8
    cfg = load_recipe("txl/position-small").model
    got = sipe_parameter_count(SiPEConfig(**cfg))
    assert got == {"total": layers * d * d + 7 * d + 7 * (d + 1), "prior": 7 * d, "heads": 7 * (d + 1),
                   "other": layers * d * d}
    assert got["total"] == 2_104_327
    # roberta/input-tiny (ADD_T_NT): only the 7d tables and the heads, d = 128
    d = 128
    got = sipe_parameter_count(SiPEConfig(**load_recipe("roberta/input-tiny").model))
    assert got == {"total": 7 * d + 7 * (d + 1), "prior": 7 * d, "heads": 7 * (d + 1), "other": 0}
    # a shared W_E: one d x d for all layers; E_D adds n_deprels x d
    got = sipe_parameter_count(SiPEConfig(family="txl", injection="position", d_model=16, n_layers=3,
                                          n_heads=2, projection="shared", n_deprels=37))
    assert got == {"total": 16 * 16 + (7 + 37) * 16 + 7 * 17, "prior": (7 + 37) * 16, "heads": 7 * 17,
                   "other": 16 * 16}

"""lis_tree2 in the encoders (RoBERTa, ModernBERT): every arc is visible, so q and k rotate by each
word's address in the whole tree (docs/lis.md). Without tags the model is `none`; a hand-built
tree's addresses; the attention scores against the explicit rotation; the MLM rule."""

from __future__ import annotations

import math

import pytest
import torch

from structpe.models import SiPEConfig, build_model
from structpe.models.sipe_parts import encoder_tree_angles
from structpe.modules.rotary import apply_rotary, rope_angles
from structpe.syntax.hexatags import IGNORE_INDEX, encode

X = IGNORE_INDEX
VOCAB = 40
HEADS = [2, 0, 2, 5, 3]  # "I saw dogs with hats": saw is the root, hats depends on dogs


def encoder(family: str, injection: str = "lis_tree2", seed: int = 0):
    extra = {"max_position_embeddings": 64} if family == "roberta" else {"local_attention": 4}
    cfg = SiPEConfig(
        family=family,
        injection=injection,
        vocab_size=VOCAB,
        d_model=16,
        n_layers=2,
        n_heads=2,
        d_ff=32,
        dropout=0.0,
        attention_dropout=0.0,
        prior_proj_init_std=0.5,
        pad_token_id=0,
        **extra,
    )
    torch.manual_seed(seed)
    return build_model(cfg).eval()


def tagged_batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """[CLS] I saw do ##gs with hats [SEP]: untagged CLS / SEP and a continuation subword."""
    t, nt = encode(HEADS)
    terms = torch.tensor([[X, t[0], t[1], t[2], X, t[3], t[4], X]])
    nts = torch.tensor([[X, nt[0], nt[1], nt[2], X, nt[3], nt[4], X]])
    ids = torch.randint(3, VOCAB, terms.shape, generator=torch.Generator().manual_seed(1))
    return ids, terms, nts


# the whole tree's addresses, label 0 = dependent left of its head, 1 = right (theta(root) = 0):
# I = e0, saw = 0, dogs = e1, hats = dogs + e1, with = hats + e0; CLS has none, ##gs is dogs', SEP hats'
EXPECTED = [[0, 0], [1, 0], [0, 0], [0, 1], [0, 1], [1, 2], [0, 2], [0, 2]]


def test_a_hand_built_trees_addresses():
    model = encoder("roberta")
    ids, t, n = tagged_batch()
    angles = encoder_tree_angles(model.backbone.tree_address, model.config, t, n, None, None)
    w = model.backbone.tree_address.delta["0"].weight  # [H * d_head/2, labels]
    want = (torch.tensor(EXPECTED, dtype=torch.float32) @ w.T).view(1, -1, 2, 4).transpose(1, 2)
    assert torch.equal(angles[0], want)
    keep = torch.ones_like(ids, dtype=torch.bool)
    keep[0, 3] = False  # a masked token (the MLM rule): its own address is zero
    masked = encoder_tree_angles(model.backbone.tree_address, model.config, t, n, None, keep)[0]
    assert not masked[0, :, 3].any() and torch.equal(masked[0, :, 5], angles[0][0, :, 5])


@pytest.mark.parametrize("family", ["roberta", "modernbert"])
def test_without_tags_it_is_the_plain_encoder(family):
    base = encoder(family, "none")
    model = encoder(family, seed=3)
    missing, unexpected = model.load_state_dict(base.state_dict(), strict=False)
    assert not unexpected and all(k.startswith(("backbone.tree_address", "tag_heads")) for k in missing)
    ids = torch.randint(3, VOCAB, (2, 9))
    with torch.no_grad():
        assert torch.equal(model(ids).logits, base(ids).logits)


@pytest.mark.parametrize("family", ["roberta", "modernbert"])
def test_scores_rotate_by_the_tree(family):
    """Layer 1's attention equals softmax(<A(i) q_i, A(j) k_j> / sqrt(d)) with A the tree rotation
    (on top of RoPE for ModernBERT), written out with ``apply_rotary``; another tree moves it."""
    model = encoder(family)
    ids, t, n = tagged_batch()
    with torch.no_grad():
        out = model(ids, terminal_ids=t, nonterminal_ids=n, output_attentions=True, output_hidden_states=True)
        layer = model.backbone.layers[0]
        x = out.hidden_states[0]
        if family == "modernbert":
            x = layer.attn_norm(x)
        q, k, _ = layer.qkv(x).view(1, x.shape[1], 3, 2, 8).permute(2, 0, 3, 1, 4)
        w = model.backbone.tree_address.delta["0"].weight
        theta = (torch.tensor(EXPECTED, dtype=torch.float32) @ w.T).view(1, -1, 2, 4).transpose(1, 2)
        if family == "modernbert":  # layer 0 is global: RoPE angles at the global theta, plus the tree's
            theta = theta + rope_angles(torch.arange(x.shape[1]), 8, model.config.global_rope_theta)
        scores = apply_rotary(q, theta) @ apply_rotary(k, theta).transpose(-1, -2) / math.sqrt(8)
        torch.testing.assert_close(out.attentions[0], scores.softmax(-1), atol=1e-6, rtol=1e-5)
        chain = [torch.tensor([x]) for x in encode([0, 1, 2, 3, 4])]
        other = torch.tensor([[X, *chain[0][0, :3].tolist(), X, *chain[0][0, 3:].tolist(), X]])
        other_n = torch.tensor([[X, *chain[1][0, :3].tolist(), X, *chain[1][0, 3:].tolist(), X]])
        moved = model(ids, terminal_ids=other, nonterminal_ids=other_n).logits
    assert not torch.allclose(moved, out.logits)


def test_config_allows_it_for_roberta_and_modernbert_only():
    from structpe.errors import StructpeError

    with pytest.raises(StructpeError, match="not defined for family 'deberta'"):
        SiPEConfig(family="deberta", injection="lis_tree2")
    with pytest.raises(StructpeError, match="d_head must be even"):
        SiPEConfig(family="roberta", injection="lis_tree2", d_model=18, n_heads=6)

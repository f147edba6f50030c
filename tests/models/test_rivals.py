"""The parser-free rivals of SiPE's Table 2: GPT-2 from scratch, Tree-Planted Transformers and
TreeReg (structpe.models.gpt2, structpe.modules.syntax_losses). Their targets and scores on hand
examples, their independence of the tags at inference, and their zero-weight equivalence."""

from __future__ import annotations

import math

import pytest
import torch

from structpe.errors import StructpeError
from structpe.models import SiPEConfig, build_model, load
from structpe.modules.syntax_losses import (
    Sentence,
    orth_norms,
    row_sentences,
    tpt_targets,
    treereg_loss,
    treereg_nodes,
)
from structpe.syntax.hexatags import bht_splits, encode
from structpe.syntax.trees import tree_distances

# "he is very happy now": he <- is, very <- happy, is -> happy, is -> now
HEADS = [2, 0, 4, 2, 2]
BOS, EOS, PAD = 1, 2, 0


def _row() -> tuple[list[int], list[int], list[int]]:
    """BOS he is ve|ry happy now EOS, then "a b" EOS, then padding ("very" has two subwords)."""
    t, n = encode(HEADS)
    t2, n2 = encode([2, 0])
    ids = [BOS, 10, 11, 12, 13, 14, 15, EOS, 16, 17, EOS, PAD, PAD]
    terms = [-100, t[0], t[1], t[2], -100, t[3], t[4], -100, t2[0], t2[1], -100, -100, -100]
    nts = [-100, n[0], n[1], n[2], -100, n[3], n[4], -100, n2[0], n2[1], -100, -100, -100]
    return ids, terms, nts


def _batch(terms_shift: int = 0) -> dict[str, torch.Tensor]:
    ids, terms, nts = _row()
    if terms_shift:  # another (well-formed) parse of the first sentence: a chain to the left
        t, n = encode([0, 1, 2, 3, 4])
        for k, p in enumerate((1, 2, 3, 5, 6)):
            terms[p], nts[p] = t[k], n[k]
    x = torch.tensor([ids, ids])
    labels = x.masked_fill(x == PAD, -100)
    return {"input_ids": x, "attention_mask": (x != PAD).long(), "labels": labels,
            "terminal_ids": torch.tensor([terms, terms]), "nonterminal_ids": torch.tensor([nts, nts])}


def _model(**kw) -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = dict(family="txl", vocab_size=20, d_model=32, n_layers=3, n_heads=4, d_ff=48, dropout=0.0,
               attention_dropout=0.0, bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD)
    return build_model(SiPEConfig(**{**cfg, **kw}))


def test_bht_splits_write_one_node_after_each_word() -> None:
    assert bht_splits(HEADS) == [(1, 2, 1), (1, 4, 2), (3, 4, 3), (1, 5, 4)]
    assert [k for *_, k in bht_splits([0, 1, 2, 3, 4, 5])] == [1, 2, 3, 4, 5]


def test_tpt_target_on_a_hand_built_tree() -> None:
    d = tree_distances(HEADS)
    assert d[0] == [0, 1, 3, 2, 2] and d[2][4] == 3
    s = tpt_targets(HEADS)
    # word 4 ("happy") sees words 1..4 at distances 2, 1, 1, 0: softmax of their negatives
    z = math.exp(-2) + 2 * math.exp(-1) + 1
    assert s[3, :4].tolist() == pytest.approx([math.exp(-2) / z, math.exp(-1) / z, math.exp(-1) / z, 1 / z])
    assert s[3, 4] == 0 and s[0].tolist() == pytest.approx([1, 0, 0, 0, 0])
    assert torch.allclose(s.sum(-1), torch.ones(5, dtype=s.dtype))


def test_row_sentences_reads_words_and_trees_of_a_packed_row() -> None:
    ids, terms, nts = _row()
    a, b = row_sentences(ids, terms, nts, {BOS, EOS, PAD})
    assert (a.starts, a.ends, a.heads) == ([1, 2, 3, 5, 6], [2, 3, 5, 6, 7], HEADS)
    assert (b.starts, b.ends, b.heads) == ([8, 9], [9, 10], [2, 0])
    # a sentence cut at the row's start (no complete tags) is left out
    cut = row_sentences(ids[4:], terms[4:], nts[4:], {BOS, EOS, PAD})
    assert cut == [Sentence([4, 5], [5, 6], [2, 0])]


def test_treereg_score_against_the_papers_formula() -> None:
    torch.manual_seed(1)
    h = torch.randn(8, 6, dtype=torch.float64)

    def orth(j: int, i: int) -> float:  # || h_j - <h_j, u_i> u_i ||, u_i = h_i / ||h_i||
        u = h[i] / h[i].norm()
        return float((h[j] - (h[j] @ u) * u).norm())

    assert orth_norms(h[[2]], h[[5]]).item() == pytest.approx(orth(5, 2))
    # words at tokens 1, 2, 3-4, 5, 6 (the row above)
    s = Sentence([1, 2, 3, 5, 6], [2, 3, 5, 6, 7], HEADS)
    nodes = treereg_nodes(s)
    assert [len(c) for c, _ in nodes] == [3, 4]  # nodes (1,4) and (1,5); (1,2) and (3,4) have one split
    (inner, inner_gold), (root, gold) = nodes
    assert (inner_gold, gold) == (1, 3)  # "he is | very happy", "he is very happy | now"
    # SCIN(a, b) = ||orth(h_b; h_{a-1})||, 0 (None) when a starts the sentence (token 1) or is past
    # its end (token 7); split score = SCIN(st, k) + SCIN(k+1, en) + SCIN(k+1, k+1) + SCIN(en+1, en+1)
    # node (1,4) = tokens 1..5 split after word 2 (token 2): right child tokens 3..5, then token 6
    assert inner[1] == (None, (2, 5), (2, 3), (5, 6))
    # the root = tokens 1..6 split after word 2: its end is the sentence's, so the last term is 0
    assert root[1] == (None, (2, 6), (2, 3), None)

    def score(terms: tuple) -> float:
        return sum(orth(b, a) for a, b in (t for t in terms if t))

    # the loss: the gold split's cross-entropy over each node's candidates, averaged over the nodes
    expect = 0.0
    for cands, g in nodes:
        sc = torch.tensor([score(c) for c in cands])
        expect += float(-torch.log_softmax(sc, 0)[g]) / len(nodes)
    assert treereg_loss(h[None], [[s]]).item() == pytest.approx(expect, rel=1e-5)
    # two rows, one sentence each: the mean over sentences
    other = Sentence([1, 2, 3], [2, 3, 4], [0, 1, 2])
    alone = treereg_loss(h[None], [[other]]).item()
    both = treereg_loss(torch.stack([h, h]), [[s], [other]]).item()
    assert both == pytest.approx((expect + alone) / 2, rel=1e-5)


@pytest.mark.parametrize("method", ["tpt", "treereg"])
def test_tags_change_no_logit_and_weight_zero_is_none(method: str) -> None:
    batch, other = _batch(), _batch(terms_shift=1)
    model = _model(syntax_loss=method, syntax_loss_weight=0.5)
    model.train()
    out = model(**batch)
    assert out.syntax_loss is not None and out.syntax_loss.item() > 0
    assert out.loss.item() == pytest.approx(out.lm_loss.item() + 0.5 * out.syntax_loss.item(), rel=1e-6)
    out.syntax_loss.backward()  # the loss trains the model: finite gradients, into the chosen layer
    grads = {n: q.grad for n, q in model.named_parameters() if q.grad is not None}
    assert grads and all(torch.isfinite(g).all() for g in grads.values())
    assert any(g.abs().sum() > 0 for n, g in grads.items() if n.startswith("layers.0."))
    model.zero_grad()
    # the tags reach the loss ...
    assert model(**other).syntax_loss.item() != pytest.approx(out.syntax_loss.item())
    model.eval()
    with torch.no_grad():
        logits = model(**batch).logits
        assert torch.equal(logits, model(**other).logits)
        untagged = {k: v for k, v in batch.items() if not k.endswith("_ids") or k == "input_ids"}
        assert torch.equal(logits, model(**untagged).logits)  # ... never the logits
    # weight 0: the same seed gives the `none` model's loss exactly
    zero, none = _model(syntax_loss=method, syntax_loss_weight=0.0), _model()
    zero.train()
    none.train()
    assert torch.equal(zero(**batch).loss, none(**batch).loss)
    assert torch.equal(zero(**batch).logits, model.train()(**batch).logits)


@pytest.mark.parametrize("method", ["tpt", "treereg"])
def test_the_lm_path_in_training_is_nones_bit_for_bit_under_bf16_autocast(method: str) -> None:
    """The rival's loss is added beside the LM, never routed through it: under bf16 autocast the
    training logits and the LM loss's gradients equal the ``none`` model's bit for bit. (tpt's planted
    layer once took the explicit-softmax path, which matched SDPA to ~1% per step yet stalled
    training at the unigram plateau.)"""
    batch = _batch()
    rival, none = _model(syntax_loss=method, syntax_loss_weight=0.5).train(), _model().train()
    grads = []
    for model in (rival, none):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(**batch)
        out.lm_loss.backward()
        grads.append((out.logits, {n: q.grad for n, q in model.named_parameters() if q.grad is not None}))
    assert torch.equal(grads[0][0], grads[1][0])
    assert grads[0][1].keys() == grads[1][1].keys()
    assert all(torch.equal(grads[0][1][n], grads[1][1][n]) for n in grads[1][1])


def test_syntax_loss_needs_a_decoder_without_injection() -> None:
    with pytest.raises(StructpeError, match="not defined for family 'roberta'.*supports"):
        SiPEConfig(family="roberta", syntax_loss="tpt")
    with pytest.raises(StructpeError, match="injection='none'"):
        SiPEConfig(family="txl", injection="position", syntax_loss="treereg")
    with pytest.raises(StructpeError, match="injection 'position' is not defined for family 'gpt2'"):
        SiPEConfig(family="gpt2", injection="position")


def test_gpt2_reads_no_tags_and_saves(tmp_path) -> None:
    torch.manual_seed(0)
    model = build_model(SiPEConfig(family="gpt2", vocab_size=20, d_model=32, n_layers=2, n_heads=2, d_ff=48,
                                   dropout=0.0, attention_dropout=0.0, pad_token_id=PAD))
    model.eval()
    batch, other = _batch(), _batch(terms_shift=1)
    out = model(**batch)
    assert torch.equal(out.logits, model(**other).logits)
    assert torch.equal(out.logits, model(batch["input_ids"], attention_mask=batch["attention_mask"]).logits)
    assert out.loss is not None and out.loss.item() == pytest.approx(math.log(20), rel=0.2)
    model.save_pretrained(tmp_path)
    again = load(tmp_path)
    assert torch.equal(again(**batch).logits, out.logits)
    # the GLUE head loads from the LM checkpoint
    from structpe.models.registry import model_class

    clf = model_class("gpt2", "classification").from_pretrained(tmp_path, num_labels=2)
    assert clf(**{k: v for k, v in batch.items() if k != "labels"}).logits.shape == (2, 2)


@pytest.mark.parametrize("profile", ["tiny", "small"])
def test_gpt2_recipes_build(profile: str) -> None:
    from structpe.train.recipe import load_recipe

    r = load_recipe(f"gpt2/none-{profile}")
    cfg = SiPEConfig(**{**r.model, "vocab_size": 50})
    assert cfg.family == "gpt2" and cfg.injection == "none" and cfg.max_position_embeddings >= r.train.seq_len
    if profile == "tiny":
        ids = torch.randint(0, 50, (2, 8))
        assert build_model(cfg)(ids, labels=ids).loss.isfinite()

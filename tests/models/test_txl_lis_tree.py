"""lis_tree: LIS dependency-tree addresses in the TXL decoder (docs/lis.md, "Dependency trees").

The address computation (modules/tree_address.py) against hand-worked trees and its causal and
journey properties; the model's causality, its reduction to plain TXL, its configuration errors
and generation through the cache. The cache, save/load and the likelihood modes are also covered
by the tests every injection site runs (tests/models/test_txl*.py, tests/eval/test_likelihood.py).
"""

from __future__ import annotations

import random

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from structpe.errors import StructpeError
from structpe.eval.scoring.prefixes import allowed_pairs
from structpe.generation.decoding import generate
from structpe.models import SiPEConfig, build_model
from structpe.modules.tree_address import tree_paths
from structpe.syntax.hexatag_prefix import determined_arcs
from structpe.syntax.hexatags import IGNORE_INDEX, decode, encode

X = IGNORE_INDEX
VOCAB = 29


def model_for(injection: str = "lis_tree", seed: int = 0, **kw):
    args = dict(
        family="txl",
        injection=injection,
        vocab_size=VOCAB,
        d_model=16,
        n_layers=2,
        n_heads=2,
        d_ff=32,
        dropout=0.0,
        attention_dropout=0.0,
        prior_proj_init_std=0.5,
        initializer_range=0.3,
    )
    args.update(kw)
    torch.manual_seed(seed)
    return build_model(SiPEConfig(**args)).eval()


def random_tree_tags(rng: random.Random, n_words: int) -> tuple[list[int], list[int]]:
    depth, terms, nts = 0, [], []
    for w in range(1, n_words + 1):
        t, nt, depth = rng.choice(allowed_pairs(depth, w, n_words))
        terms.append(t)
        nts.append(nt)
    return terms, nts


def test_addresses_of_a_worked_example():
    # BOS, "I saw dogs with hats" (heads [2, 0, 2, 5, 3]) with "dogs" in two subwords, EOS.
    # Labels without DEPREL: 0 = left dependent, 1 = right dependent.
    t, nt = encode([2, 0, 2, 5, 3])
    terms = torch.tensor([[X, t[0], t[1], t[2], X, t[3], t[4], X]])
    nonts = torch.tensor([[X, nt[0], nt[1], nt[2], X, nt[3], nt[4], X]])
    paths = tree_paths(terms, nonts, None, 2)[0].tolist()
    assert paths == [
        [0, 0],  # BOS: before the first word
        [0, 0],  # I: its head comes later, no dependents: no arc to an earlier word
        [-1, 0],  # saw: nearest left dependent I, theta(saw) = theta(I) - delta_left
        [-1, 1],  # dogs: head saw is earlier and (saw, dogs) is known: theta(saw) + delta_right
        [-1, 1],  # the second subword of dogs keeps its word's address
        [0, 0],  # with: its head (hats) comes later
        [-1, 2],  # hats: head dogs, theta(dogs) + delta_right; its left dependent `with` is not its anchor
        [-1, 2],  # EOS keeps the last word's
    ]
    # with DEPREL ids the label is 2 + the dependent's id (here id = word number)
    deprels = torch.tensor([[X, 1, 2, 3, X, 4, 5, X]])
    labelled = tree_paths(terms, nonts, deprels, 2 + 6)[0]
    assert labelled[2].tolist() == [0, 0, 0, -1, 0, 0, 0, 0]  # saw = I - delta_(2 + deprel(I) = 3)
    assert labelled[6].tolist() == [0, 0, 0, -1, 0, 1, 0, 1]  # hats = dogs + delta_(2 + 5)


def test_addresses_are_causal_and_exact_along_their_anchor_arcs():
    rng = random.Random(0)
    for _ in range(60):
        n = rng.randrange(1, 14)
        t, nt = random_tree_tags(rng, n)
        heads = decode(t, nt)
        full = tree_paths(torch.tensor([t]), torch.tensor([nt]), None, 2)[0]
        for i in range(1, n + 1):  # a word's address depends on the tags of words 1..i only
            prefix = tree_paths(torch.tensor([t[:i]]), torch.tensor([nt[:i]]), None, 2)[0]
            assert torch.equal(prefix, full[:i])
        # every word whose own arc (head before it) is known when it is read sits delta_l from its head
        for w, arcs in enumerate(determined_arcs(t, nt), 1):
            h = heads[w - 1]
            if 0 < h < w and (h, w) in arcs:
                assert (full[w - 1] - full[h - 1]).tolist() == [0, 1]


def test_causal_in_later_words_and_tags():
    """Changing tokens and tags after position i leaves every output at <= i unchanged (both paths)."""
    model = model_for()
    rng = random.Random(1)
    for _ in range(4):
        t, nt = random_tree_tags(rng, 10)
        t2, nt2 = random_tree_tags(rng, 10)
        cut = rng.randrange(1, 9)
        t2[:cut], nt2[:cut] = t[:cut], nt[:cut]  # same first `cut` words, another tree after
        ids = torch.randint(0, VOCAB, (1, 10))
        ids2 = ids.clone()
        ids2[0, cut:] = (ids2[0, cut:] + 1) % VOCAB
        for plain in (False, True):
            a = model(
                ids,
                terminal_ids=torch.tensor([t]),
                nonterminal_ids=torch.tensor([nt]),
                output_attentions=plain,
            )
            b = model(
                ids2,
                terminal_ids=torch.tensor([t2]),
                nonterminal_ids=torch.tensor([nt2]),
                output_attentions=plain,
            )
            for name in ("logits", "terminal_logits", "nonterminal_logits"):
                assert torch.equal(getattr(a, name)[:, :cut], getattr(b, name)[:, :cut]), name


def test_the_tree_moves_the_scores():
    """Same tokens, another tree over the same words: the logits change (the addresses are used)."""
    model = model_for()
    ids = torch.randint(0, VOCAB, (1, 5))
    one = [torch.tensor([x]) for x in encode([2, 0, 2, 5, 3])]
    other = [torch.tensor([x]) for x in encode([0, 1, 2, 3, 4])]  # a right-branching chain
    with torch.no_grad():
        a = model(ids, terminal_ids=one[0], nonterminal_ids=one[1]).logits
        b = model(ids, terminal_ids=other[0], nonterminal_ids=other[1]).logits
    assert not torch.allclose(a, b)


def test_without_tags_it_is_plain_txl():
    """No parse: every address is zero, so the logits are those of `none` with the same weights."""
    base = model_for("none")
    model = model_for(seed=3)
    missing, unexpected = model.load_state_dict(base.state_dict(), strict=False)
    assert not unexpected and all(k.startswith(("tree_address", "tag_heads")) for k in missing)
    ids = torch.randint(0, VOCAB, (2, 7))
    with torch.no_grad():
        assert torch.equal(model(ids).logits, base(ids).logits)
        none = torch.full_like(ids, X)  # untagged positions: no arc, address 0
        assert torch.equal(model(ids, terminal_ids=none, nonterminal_ids=none).logits, base(ids).logits)


def test_config_lists_the_alternatives():
    allowed = r"\('none', 'input', 'lis_tree2'\)"
    with pytest.raises(StructpeError, match=r"not defined for family 'roberta'.*" + allowed):
        SiPEConfig(family="roberta", injection="lis_tree")
    with pytest.raises(StructpeError, match="injection must be one of .*'lis_tree'"):
        SiPEConfig(family="txl", injection="lis-tree")
    with pytest.raises(StructpeError, match="d_head must be even"):
        SiPEConfig(family="txl", injection="lis_tree", d_model=18, n_heads=6)


def test_generation_through_the_cache_keeps_trees():
    """Tree-controlled joint generation (one new position per step on the cache) reproduces the tags."""
    words = ["the", "dog", "saw", "a", "cat", "with", "hats", "and", "ran", "."]
    vocab = {w: i for i, w in enumerate(["<pad>", "<s>", "</s>", "<unk>", *words])}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk, bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>"
    )
    model = model_for(vocab_size=len(tok))
    t, nt = encode([2, 0, 2, 5, 3])
    for strategy in ("sample", "beam"):
        (s,) = generate(model, tok, tags=(t, nt), strategy=strategy, seed=0, num_beams=2)
        assert (s.terminals, s.nonterminals) == (t, nt) and s.heads == [2, 0, 2, 5, 3]

"""lis_tree: LIS dependency-tree addresses in the TXL decoder (docs/lis.md, "Dependency trees"),
and lis_tree2: the same addresses over components joined by later arcs, with the two-term score
(docs/lis.md, "Tree addresses that see the whole tree").

The address computation (modules/tree_address.py) against hand-worked trees and its causal and
journey properties; the model's causality, its reduction to plain TXL, its configuration errors
and generation through the cache; for lis_tree2 also the cache against the full forward. The
cache, save/load and the likelihood modes are also covered by the tests every injection site runs
(tests/models/test_txl*.py, tests/eval/test_likelihood.py).
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
from structpe.models import txl as txl_module
from structpe.modules.tree_address import joined_tree_paths, tree_paths
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


# -- lis_tree2: joined components -------------------------------------------------------------------


def tree_addresses(heads: list[int]) -> torch.Tensor:
    """theta(w) = theta(head) + e_label(w) over the whole tree (label: dependent right of its head),
    written from the heads directly: theta(b) - theta(a) is the tree path from a to b."""
    theta = torch.zeros(len(heads), 2)
    done = [False] * len(heads)

    def fill(w: int) -> torch.Tensor:
        if not done[w - 1]:
            h = heads[w - 1]
            if h:
                theta[w - 1] = fill(h)
                theta[w - 1, int(w > h)] += 1
            done[w - 1] = True
        return theta[w - 1]

    for w in range(1, len(heads) + 1):
        fill(w)
    return theta


def test_the_big_dog_barked():
    """v1 fixes *the* at 0 when it is read and anchors *dog* to *big*, so dog - the is amod's angle,
    not det's; joined components re-address *the* once *dog* settles its arc (words 1-3 joined at 3).
    Labels 2 + DEPREL id: det 0, amod 1, nsubj 2, root 3."""
    t, nt = encode([3, 3, 4, 0])
    tt, nn_, dr = torch.tensor([t]), torch.tensor([nt]), torch.tensor([[0, 1, 2, 3]])
    det, amod = torch.eye(6)[2], torch.eye(6)[3]
    v1 = tree_paths(tt, nn_, dr, 6)[0]
    assert torch.equal(v1[0] - v1[2], amod)  # the - dog: the wrong label
    paths, joined = joined_tree_paths(tt, nn_, dr, 6, 4)
    paths, joined = paths[0], joined[0]
    assert joined[2, :3].all() and not joined[1, 0]  # *the* and *big* wait for their head
    assert torch.equal(paths[0] - paths[2], det) and torch.equal(paths[1] - paths[2], amod)
    assert joined[3].all()


def test_joined_pairs_get_exact_tree_paths_from_their_query_time_tags():
    rng = random.Random(0)
    for _ in range(60):
        n = rng.randrange(1, 14)
        t, nt = random_tree_tags(rng, n)
        ref = tree_addresses(decode(t, nt))
        paths, joined = (x[0] for x in joined_tree_paths(torch.tensor([t]), torch.tensor([nt]), None, 2, n))
        assert joined[-1].all()  # the whole sentence read: one tree, every pair exact
        for i in range(n):
            pre_paths, pre_joined = (
                x[0]
                for x in joined_tree_paths(
                    torch.tensor([t[: i + 1]]), torch.tensor([nt[: i + 1]]), None, 2, 1
                )
            )
            assert torch.equal(pre_joined[0], joined[i, : i + 1])  # joined at i: tags <= i only
            for j in torch.nonzero(joined[i]).flatten().tolist():
                exact = ref[j] - ref[i]
                assert torch.equal(paths[j] - paths[i], exact)
                assert torch.equal(pre_paths[j] - pre_paths[i], exact)


def test_a_batch_with_repeated_rows_equals_each_row_alone():
    # the particle estimator's rows repeat; each distinct row is computed once and shared
    rng = random.Random(1)
    rows = [random_tree_tags(rng, 9) for _ in range(3)]
    order = [0, 1, 0, 2, 1, 0]
    labels = [[rng.randrange(4) for _ in range(9)] for _ in order]
    labels[2] = labels[0]  # rows 0 and 2 repeat in full; rows 1 and 4 share tags, not labels
    terms = torch.tensor([rows[i][0] for i in order])
    nts = torch.tensor([rows[i][1] for i in order])
    paths, joined = joined_tree_paths(terms, nts, torch.tensor(labels), 6, 3)
    for b in range(len(order)):
        alone = joined_tree_paths(terms[b : b + 1], nts[b : b + 1], torch.tensor([labels[b]]), 6, 3)
        assert torch.equal(paths[b], alone[0][0]) and torch.equal(joined[b], alone[1][0])
    assert not torch.equal(paths[1], paths[4])  # same tags, other labels: not shared


def test_untagged_positions_join_through_their_word_and_eos_separates_trees():
    # BOS, "I saw dogs" with "dogs" in two subwords, EOS; then a second sentence "run" packed after
    t, nt = encode([2, 0, 2])
    t2, nt2 = encode([0])
    terms = torch.tensor([[X, t[0], t[1], t[2], X, X, t2[0], X]])
    nts = torch.tensor([[X, nt[0], nt[1], nt[2], X, X, nt2[0], X]])
    paths, joined = (x[0] for x in joined_tree_paths(terms, nts, None, 2, 8))
    assert not joined[0].any()  # BOS: no word, the plain term only
    assert joined[4, 1:5].all() and torch.equal(paths[4], paths[3])  # a subword is its word
    assert not joined[7, :6].any() and joined[7, 6:].all()  # the next sentence is another tree


def _joined_causal_check(model, rng) -> float:
    """Largest change at positions < cut when tokens and tags change from cut on."""
    worst = 0.0
    for _ in range(4):
        t, nt = random_tree_tags(rng, 10)
        t2, nt2 = random_tree_tags(rng, 10)
        cut = rng.randrange(1, 9)
        t2[:cut], nt2[:cut] = t[:cut], nt[:cut]
        ids = torch.randint(0, VOCAB, (1, 10))
        ids2 = ids.clone()
        ids2[0, cut:] = (ids2[0, cut:] + 1) % VOCAB
        for plain in (False, True):
            kw = dict(output_attentions=plain)
            a = model(ids, terminal_ids=torch.tensor([t]), nonterminal_ids=torch.tensor([nt]), **kw)
            b = model(ids2, terminal_ids=torch.tensor([t2]), nonterminal_ids=torch.tensor([nt2]), **kw)
            for name in ("logits", "terminal_logits", "nonterminal_logits"):
                diff = (getattr(a, name)[:, :cut] - getattr(b, name)[:, :cut]).abs().max().item()
                worst = max(worst, diff)
    return worst


def test_joined_causal_in_later_words_and_tags(monkeypatch):
    """Outputs at <= i do not move when tokens and tags after i change. Not bit for bit: the keys
    are rotated by the addresses after the last position, which later arcs re-base, and only the
    journeys of joined pairs are invariant (to rounding). The check fails when every pair counts as
    joined (the full tree's journeys, which read later tags)."""
    with torch.no_grad():
        assert _joined_causal_check(model_for("lis_tree2"), random.Random(1)) < 1e-4
        real = txl_module.joined_tree_paths

        def leaky(*args):
            paths, joined = real(*args)
            return paths, torch.ones_like(joined)

        monkeypatch.setattr(txl_module, "joined_tree_paths", leaky)
        assert _joined_causal_check(model_for("lis_tree2"), random.Random(1)) > 1e-2


def test_joined_tree_moves_the_scores():
    model = model_for("lis_tree2")
    ids = torch.randint(0, VOCAB, (1, 5))
    one = [torch.tensor([x]) for x in encode([2, 0, 2, 5, 3])]
    other = [torch.tensor([x]) for x in encode([0, 1, 2, 3, 4])]
    with torch.no_grad():
        a = model(ids, terminal_ids=one[0], nonterminal_ids=one[1]).logits
        b = model(ids, terminal_ids=other[0], nonterminal_ids=other[1]).logits
    assert not torch.allclose(a, b)


def test_joined_without_tags_it_is_plain_txl():
    base = model_for("none")
    model = model_for("lis_tree2", seed=3)
    missing, unexpected = model.load_state_dict(base.state_dict(), strict=False)
    assert not unexpected and all(k.startswith(("tree_address", "tag_heads")) for k in missing)
    ids = torch.randint(0, VOCAB, (2, 7))
    with torch.no_grad():
        assert torch.equal(model(ids).logits, base(ids).logits)


def _tagged_batch(rng: random.Random, n_words: int, bsz: int = 2):
    rows = []
    for _ in range(bsz):
        t, nt = random_tree_tags(rng, n_words)
        ids, ts, ns = [rng.randrange(VOCAB)], [X], [X]  # a BOS without tags
        for a, b in zip(t, nt, strict=True):
            for sub in range(rng.choice((1, 1, 2))):
                ids.append(rng.randrange(VOCAB))
                ts.append(a if sub == 0 else X)
                ns.append(b if sub == 0 else X)
        rows.append((ids, ts, ns))
    width = max(len(r[0]) for r in rows)
    pad = lambda xs, v: xs + [v] * (width - len(xs))  # noqa: E731
    return tuple(torch.tensor([pad(r[k], X if k else 0) for r in rows]) for k in range(3))


@pytest.mark.parametrize("explicit", [False, True])
def test_joined_cache_equals_the_full_forward(explicit):
    """Prefill, then one position per call; keys are cached unrotated and re-addressed per step."""
    model = model_for("lis_tree2")
    rng = random.Random(2)
    with torch.no_grad():
        for trial in range(3):
            ids, t, n = _tagged_batch(rng, n_words=rng.randrange(3, 8))
            full = model(ids, terminal_ids=t, nonterminal_ids=n, output_attentions=explicit)
            cache = None
            cuts = [0, 1 + trial, *range(2 + trial, ids.shape[1] + 1)]
            for a, b in zip(cuts, cuts[1:], strict=False):
                out = model(
                    ids[:, a:b],
                    terminal_ids=t[:, a:b],
                    nonterminal_ids=n[:, a:b],
                    cache=cache,
                    use_cache=True,
                    output_attentions=explicit,
                )
                cache = out.cache
                for name in ("logits", "terminal_logits", "nonterminal_logits"):
                    torch.testing.assert_close(
                        getattr(out, name), getattr(full, name)[:, a:b], atol=1e-5, rtol=0
                    )


def test_joined_cache_batch_ops_and_padding():
    model = model_for("lis_tree2")
    with torch.no_grad():
        ids, t, n = _tagged_batch(random.Random(5), n_words=6)
        mask = torch.ones_like(ids)
        mask[0, 2] = 0
        full = model(ids, attention_mask=mask, terminal_ids=t, nonterminal_ids=n)
        out = model(
            ids[:, :-1],
            attention_mask=mask[:, :-1],
            terminal_ids=t[:, :-1],
            nonterminal_ids=n[:, :-1],
            use_cache=True,
        )
        cache = out.cache
        cache.reorder_cache(torch.tensor([1, 0]))
        cache.batch_repeat_interleave(2)  # rows 1, 1, 0, 0
        cache.batch_select_indices(torch.tensor([3, 0]))  # rows 0, 1
        step = model(
            ids[:, -1:], attention_mask=mask, terminal_ids=t[:, -1:], nonterminal_ids=n[:, -1:], cache=cache
        )
        torch.testing.assert_close(step.logits[:, 0], full.logits[:, -1], atol=1e-5, rtol=0)


def test_joined_training_step_under_bf16_autocast_has_gradients():
    model = model_for("lis_tree2").train()
    ids, t, n = _tagged_batch(random.Random(7), n_words=6)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(ids, terminal_ids=t, nonterminal_ids=n, labels=ids).loss
    loss.backward()
    grad = model.tree_address.delta["0"].weight.grad
    assert grad is not None and grad.abs().sum() > 0

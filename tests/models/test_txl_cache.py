"""The TXL key/value cache is exact: step-by-step decoding equals the full forward, every injection site."""

from __future__ import annotations

import random

import pytest
import torch
from transformers import DynamicCache

from structpe.eval.scoring.prefixes import allowed_pairs
from structpe.models import SiPEConfig, build_model
from structpe.models.config import FAMILY_INJECTIONS
from structpe.models.txl_cache import SiPECache
from structpe.syntax.hexatags import IGNORE_INDEX, is_well_formed

VARIANTS = FAMILY_INJECTIONS["txl"]
VOCAB = 41


def model_for(injection: str, seed: int = 0, **kw):
    """fp32, dropout off, W_E / W^tag large enough that the prior moves the scores."""
    args = dict(
        family="txl", injection=injection, vocab_size=VOCAB, d_model=16, n_layers=3, n_heads=2, d_ff=32,
        dropout=0.0, attention_dropout=0.0, prior_proj_init_std=0.3, initializer_range=0.3,
    )
    args.update(kw)
    torch.manual_seed(seed)
    return build_model(SiPEConfig(**args)).eval()


def random_tagged(rng: random.Random, n_words: int, bsz: int = 2) -> tuple[torch.Tensor, ...]:
    """Token ids [B, L] with a well-formed random tag sequence on each word's first subword."""
    rows_ids, rows_t, rows_n = [], [], []
    for _ in range(bsz):
        depth, ids, ts, ns, tags = 0, [], [], [], ([], [])
        for w in range(1, n_words + 1):
            t, nt, depth = rng.choice(allowed_pairs(depth, w, n_words))
            tags[0].append(t)
            tags[1].append(nt)
            for sub in range(rng.choice((1, 1, 2, 3))):  # continuation subwords carry no tag
                ids.append(rng.randrange(VOCAB))
                ts.append(t if sub == 0 else IGNORE_INDEX)
                ns.append(nt if sub == 0 else IGNORE_INDEX)
        assert is_well_formed(*tags)
        rows_ids.append(ids)
        rows_t.append(ts)
        rows_n.append(ns)
    length = min(len(r) for r in rows_ids)
    cut = lambda rows: torch.tensor([r[:length] for r in rows])  # noqa: E731
    return cut(rows_ids), cut(rows_t), cut(rows_n)


@pytest.mark.parametrize("injection", VARIANTS)
@pytest.mark.parametrize("explicit", [False, True], ids=["fused", "explicit"])
def test_stepwise_cached_decoding_equals_full_forward(injection, explicit):
    model = model_for(injection)
    rng = random.Random(hash(injection) % 1000)
    for trial in range(2):
        ids, t, n = random_tagged(rng, n_words=rng.randrange(3, 8))
        full = model(ids, terminal_ids=t, nonterminal_ids=n, output_attentions=explicit)
        cache = None
        # a prefill of a few positions, then one position per call
        cuts = [0, 1 + trial, *range(2 + trial, ids.shape[1] + 1)]
        for a, b in zip(cuts, cuts[1:], strict=False):
            out = model(ids[:, a:b], terminal_ids=t[:, a:b], nonterminal_ids=n[:, a:b], cache=cache,
                        use_cache=True, output_attentions=explicit)
            cache = out.cache
            assert isinstance(cache, SiPECache) and cache.get_seq_length() == b
            for name in ("logits", "terminal_logits", "nonterminal_logits"):
                if getattr(full, name) is None:  # the plain `none` baseline has no tag heads
                    assert getattr(out, name) is None
                    continue
                torch.testing.assert_close(getattr(out, name), getattr(full, name)[:, a:b], atol=1e-5, rtol=0)


@pytest.mark.parametrize("injection", ["position", "input+attn_bias", "lis_tree"])
def test_cache_with_padding_mask_and_clamped_offsets(injection):
    """attention_mask over cached + new keys, offsets past clamp_len, and untagged steps."""
    model = model_for(injection, clamp_len=4)
    ids, t, n = random_tagged(random.Random(3), n_words=10)
    t[:, -3:] = IGNORE_INDEX  # the last steps get no tags (pair 0) -- same as passing none
    n[:, -3:] = IGNORE_INDEX
    mask = torch.ones_like(ids)
    mask[0, 2] = 0
    full = model(ids, attention_mask=mask, terminal_ids=t, nonterminal_ids=n)
    out = model(ids[:, :5], attention_mask=mask[:, :5], terminal_ids=t[:, :5], nonterminal_ids=n[:, :5],
                use_cache=True)
    cache = out.cache
    for j in range(5, ids.shape[1]):
        tagged = j < ids.shape[1] - 3
        tags = {"terminal_ids": t[:, j:j + 1], "nonterminal_ids": n[:, j:j + 1]} if tagged else {}
        out = model(ids[:, j:j + 1], attention_mask=mask[:, : j + 1], cache=cache, **tags)
        torch.testing.assert_close(out.logits[:, 0], full.logits[:, j], atol=1e-5, rtol=0)
        torch.testing.assert_close(out.terminal_logits[:, 0], full.terminal_logits[:, j], atol=1e-5, rtol=0)


@pytest.mark.parametrize("injection", ["position", "lis_tree"])
def test_cache_batch_ops_move_the_tags_with_the_keys(injection):
    """reorder / select / repeat (beam search, copy-on-branch) keep each row's pair ids (lis_tree:
    its tags, which the next positions' tree addresses are read from) with its keys."""
    model = model_for(injection)
    ids, t, n = random_tagged(random.Random(5), n_words=6)
    out = model(ids[:, :-1], terminal_ids=t[:, :-1], nonterminal_ids=n[:, :-1], use_cache=True)
    cache = out.cache
    cache.reorder_cache(torch.tensor([1, 0]))
    cache.batch_repeat_interleave(2)  # rows 1, 1, 0, 0
    cache.batch_select_indices(torch.tensor([3, 0]))  # rows 0, 1
    step = model(ids[:, -1:], terminal_ids=t[:, -1:], nonterminal_ids=n[:, -1:], cache=cache)
    full = model(ids, terminal_ids=t, nonterminal_ids=n)
    torch.testing.assert_close(step.logits[:, 0], full.logits[:, -1], atol=1e-5, rtol=0)
    cache.crop(-2)
    kept = cache.pair_ids if injection == "position" else cache.tags
    assert cache.get_seq_length() == ids.shape[1] - 2 and kept.shape[1] == ids.shape[1] - 2


def test_buffered_keys_survive_growth_crop_and_row_views():
    """Keys live in buffers with spare room (BufferedLayer): growing past a buffer, cropping and
    refeeding, and a batch selection that is a view of some rows all keep decoding exact."""
    model = model_for("position")
    ids = torch.randint(0, VOCAB, (2, 140), generator=torch.Generator().manual_seed(0))
    full = model(ids).logits
    cache = model(ids[:, :1], use_cache=True).cache
    for j in range(1, 130):  # the buffers hold 64 positions, then double twice
        out = model(ids[:, j : j + 1], cache=cache)
        torch.testing.assert_close(out.logits[:, 0], full[:, j], atol=1e-5, rtol=0)
    cache.crop(-5)  # a view of the same buffers: the refed positions overwrite the cropped ones
    out = model(ids[:, 125:135], cache=cache)
    torch.testing.assert_close(out.logits, full[:, 125:135], atol=1e-5, rtol=0)
    cache.batch_select_indices(slice(0, 1))  # row 0: a view that starts where the buffers start
    out = model(ids[:1, 135:], cache=cache)
    torch.testing.assert_close(out.logits, full[:1, 135:], atol=1e-5, rtol=0)


def test_a_batch_selection_copies_rows_with_room_and_stays_exact():
    """Copy-on-branch (the marginal beam): selecting rows by a tensor, repeats included, gathers the
    buffers with spare room, so the next steps write in place, and decoding stays exact."""
    model = model_for("position")
    ids = torch.randint(0, VOCAB, (3, 40), generator=torch.Generator().manual_seed(1))
    full = model(ids).logits
    cache = model(ids[:, :10], use_cache=True).cache
    rows = torch.tensor([2, 0, 0, 1])
    cache.batch_select_indices(rows)
    layer = cache.layers[0]
    assert layer.keys.data_ptr() == layer.buffers[0].data_ptr() and layer.buffers[0].shape[0] == 4
    before = layer.buffers[0].data_ptr()
    for j in range(10, 30):
        out = model(ids[rows, j : j + 1], cache=cache)
        torch.testing.assert_close(out.logits[:, 0], full[rows, j], atol=1e-5, rtol=0)
        if j == 19:  # room for 2 x 10 positions: written in place so far
            assert layer.buffers[0].data_ptr() == before
    assert layer.buffers[0].data_ptr() != before  # then outgrown, and refilled


def test_a_filled_foreign_cache_is_refused():
    model = model_for("position")
    foreign = DynamicCache()
    foreign.update(torch.zeros(1, 2, 3, 8), torch.zeros(1, 2, 3, 8), 0)
    with pytest.raises(ValueError, match="SiPECache"):
        model(torch.zeros(1, 1, dtype=torch.long), cache=foreign)


@pytest.mark.parametrize("injection", ["none", "position"])
def test_transformers_generate_matches_uncached_greedy(injection):
    """A TXL model works with transformers' ``generate`` (greedy, sampling, beams) like any causal LM."""
    model = model_for(injection, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    prompt = torch.tensor([[1, 5, 9, 11], [1, 7, 3, 4]])
    # the uncached reference re-runs the whole window at every step
    ours = model.generate(prompt, max_new_tokens=8, min_new_tokens=8, do_sample=False, use_cache=False)
    hf = model.generate(prompt, max_new_tokens=8, min_new_tokens=8, do_sample=False)
    assert torch.equal(hf, ours)
    beams = model.generate(prompt, max_new_tokens=4, min_new_tokens=4, num_beams=3, do_sample=False,
                           num_return_sequences=2)
    assert beams.shape == (4, 8)
    torch.manual_seed(0)
    sampled = model.generate(prompt, max_new_tokens=3, do_sample=True, top_k=5)
    assert sampled.shape[0] == 2


@pytest.mark.parametrize("injection", ["disentangled", "position+attn_bias"])
def test_untagged_prefix_then_tagged_steps(injection):
    """A cache filled without tags (the prior skipped) takes tagged positions later: pair 0 before."""
    model = model_for(injection)
    ids, t, n = random_tagged(random.Random(9), n_words=7)
    t[:, :3] = IGNORE_INDEX
    n[:, :3] = IGNORE_INDEX
    full = model(ids, terminal_ids=t, nonterminal_ids=n)
    cache = model(ids[:, :3], use_cache=True).cache
    assert cache.pair_ids is None
    for j in range(3, ids.shape[1]):
        step = slice(j, j + 1)
        out = model(ids[:, step], terminal_ids=t[:, step], nonterminal_ids=n[:, step], cache=cache)
        for name in ("logits", "nonterminal_logits"):
            torch.testing.assert_close(getattr(out, name)[:, 0], getattr(full, name)[:, j], atol=1e-5, rtol=0)

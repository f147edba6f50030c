"""Hexatagger model: training lowers the loss, save/load round-trips, decoding always yields trees."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from structpe.parser.decode import decode_scores, greedy_is_well_formed
from structpe.parser.hexatagger import predict
from structpe.parser.model import HexataggerConfig, HexataggerModel
from structpe.parser.tokenizer import load_tokenizer, train_tokenizer
from structpe.syntax.hexatags import (
    EOS,
    IGNORE_INDEX,
    constrained_decode,
    decode,
    encode,
    is_well_formed,
)
from structpe.syntax.trees import check_tree, is_projective

TEXTS = [
    "The quick brown fox jumps over the lazy dog .",
    "She watches funny videos .",
    "I saw dogs with hats and cats with bats .",
    "Colorless green ideas sleep furiously .",
] * 20


def tiny_config(vocab_size: int = 300, **kw) -> HexataggerConfig:
    base = dict(vocab_size=vocab_size, d_model=32, n_layers=2, n_heads=2, d_ff=64, max_positions=64)
    base["dropout"] = 0.0
    base.update(kw)
    return HexataggerConfig(**base)


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer(iter(TEXTS), vocab_size=300, min_frequency=1)


def test_training_steps_lower_the_loss():
    torch.manual_seed(0)
    model = HexataggerModel(tiny_config(deprels=["a", "b", "root"]))
    b, n = 8, 12
    ids = torch.randint(5, 300, (b, n))
    mask = torch.ones(b, n, dtype=torch.long)
    mask[0, 9:] = 0  # one padded row
    terms = torch.randint(0, 2, (b, n))
    nts = torch.randint(0, 5, (b, n))
    labels = torch.randint(0, 3, (b, n))
    for t in (terms, nts, labels):
        t[:, 0] = IGNORE_INDEX  # [CLS]
        t[0, 9:] = IGNORE_INDEX
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    first = None
    for _ in range(15):
        out = model(ids, mask, terms, nts, labels)
        assert out.loss is not None and torch.isfinite(out.loss)
        first = first if first is not None else float(out.loss.detach())
        opt.zero_grad()
        out.loss.backward()
        opt.step()
    last = float(model(ids, mask, terms, nts, labels).loss.detach())
    assert last < 0.7 * first
    assert out.deprel_loss is not None and out.terminal_loss is not None


def test_loss_ignores_untagged_positions():
    torch.manual_seed(0)
    model = HexataggerModel(tiny_config())
    ids = torch.randint(5, 300, (2, 6))
    terms = torch.full((2, 6), IGNORE_INDEX)
    nts = torch.full((2, 6), IGNORE_INDEX)
    out = model(ids, None, terms, nts)
    assert float(out.loss.detach()) == 0.0  # no tagged position: nothing to learn, no NaN


def test_padding_does_not_change_scores():
    torch.manual_seed(0)
    model = HexataggerModel(tiny_config()).eval()
    ids = torch.randint(5, 300, (1, 7))
    padded = torch.cat([ids, torch.zeros(1, 5, dtype=torch.long)], 1)
    mask = torch.cat([torch.ones(1, 7), torch.zeros(1, 5)], 1).long()
    a = model(ids).terminal_logits
    b = model(padded, mask).terminal_logits[:, :7]
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_save_load_round_trip(tmp_path, tokenizer):
    torch.manual_seed(0)
    model = HexataggerModel(
        tiny_config(vocab_size=tokenizer.get_vocab_size(), deprels=["nsubj", "root"])
    ).eval()
    model.save_pretrained(tmp_path, tokenizer=tokenizer)
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in tmp_path.iterdir()}
    assert not list(tmp_path.glob("*.bin")) and not list(tmp_path.glob("*.pt"))
    loaded = HexataggerModel.from_pretrained(tmp_path)
    assert loaded.config == model.config
    tok2 = load_tokenizer(tmp_path)
    words = [["She", "watches", "funny", "videos", "."]]
    ids = torch.tensor([tok2.encode(words[0], is_pretokenized=True).ids])
    assert ids.tolist() == [tokenizer.encode(words[0], is_pretokenized=True).ids]
    a, b = model(ids), loaded(ids)
    torch.testing.assert_close(a.terminal_logits, b.terminal_logits)
    torch.testing.assert_close(a.deprel_logits, b.deprel_logits)
    # the folder is also a regular Hugging Face tokenizer folder
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(tmp_path))
    assert hf(words[0], is_split_into_words=True)["input_ids"] == ids[0].tolist()


def test_load_errors_are_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json"):
        HexataggerModel.from_pretrained(tmp_path)
    with pytest.raises(ValueError, match="unknown hexatagger config keys"):
        HexataggerConfig.from_dict({"vocab_size": 10, "bogus": 1})
    with pytest.raises(ValueError, match="divisible"):
        HexataggerConfig(vocab_size=10, d_model=30, n_heads=4)


def test_decoding_model_scores_always_yields_trees(tokenizer):
    """An untrained model's scores are arbitrary: every prediction must still be a projective tree
    whose tags decode to its heads, with labels consistent with the root."""
    torch.manual_seed(1)
    model = HexataggerModel(
        tiny_config(vocab_size=tokenizer.get_vocab_size(), deprels=["dep", "root"])
    ).eval()
    rng = np.random.default_rng(0)
    vocab = ["the", "a", "dog", "cat", "saw", "with", "hats", ",", ".", "and", "xyzzy", "Überfluß", "42"]
    sentences = [list(rng.choice(vocab, size=int(rng.integers(1, 30)))) for _ in range(60)]
    for pred, words in zip(predict(model, tokenizer, sentences, batch_tokens=256), sentences, strict=True):
        assert len(pred.heads) == len(words)
        check_tree(pred.heads)
        assert is_projective(pred.heads)
        assert decode(pred.terminals, pred.nonterminals) == pred.heads
        assert pred.nonterminals[-1] == EOS
        assert [d == "root" for d in pred.deprels] == [h == 0 for h in pred.heads]


def _path_score(ts: np.ndarray, ns: np.ndarray, t: list[int], nt: list[int]) -> float:
    n = len(t)  # the last word's non-terminal is eos on every path
    return float(ts[np.arange(n), t].sum() + ns[np.arange(n - 1), nt[:-1]].sum())


def test_greedy_shortcut_matches_viterbi():
    """A well-formed arg-max is the constrained optimum; otherwise Viterbi decides. Either way the
    chosen sequence scores as high as ``constrained_decode``'s."""
    rng = np.random.default_rng(0)
    for trial in range(300):
        n = int(rng.integers(1, 25))
        ts = np.log(rng.dirichlet(np.ones(2), size=n))
        ns = np.log(rng.dirichlet(np.ones(5), size=n))
        if trial % 3 == 0:  # sharpen towards a real tree so that the greedy path is exercised
            heads = [0] + [int(rng.integers(1, i + 1)) for i in range(1, n)]
            if is_projective(heads):
                t, nt = encode(heads)
                ts[np.arange(n), t] += 5
                ns[np.arange(n), nt] += 5
        terms, nts, heads = decode_scores(ts, ns)
        assert is_well_formed(terms, nts) and decode(terms, nts) == heads
        ref_t, ref_n, _ = constrained_decode(ts, ns)

        assert _path_score(ts, ns, terms, nts) >= _path_score(ts, ns, ref_t, ref_n) - 1e-9
        assert greedy_is_well_formed(terms, nts)


def test_pair_nonterminal_head_reads_the_next_position():
    torch.manual_seed(0)
    model = HexataggerModel(tiny_config(pair_nonterminal=True)).eval()
    ids = torch.randint(5, 300, (1, 8))
    base = model(ids)
    w = model.nonterminal_head.weight
    assert w.shape == (5, 2 * model.config.d_model)
    with torch.no_grad():
        w[:, model.config.d_model :] = 0
    only_own = model(ids).nonterminal_logits
    assert not torch.allclose(only_own, base.nonterminal_logits)  # the next state was used
    torch.testing.assert_close(model(ids).terminal_logits, base.terminal_logits)  # terminals untouched


def test_int8_quantization_keeps_the_scores_and_trees(tokenizer):
    from structpe.parser.hexatagger import quantize_for_cpu

    torch.manual_seed(0)
    model = HexataggerModel(tiny_config(vocab_size=tokenizer.get_vocab_size())).eval()
    sentences = [t.split() for t in TEXTS[:4]]
    q = quantize_for_cpu(model, "int8")
    assert not any(type(m) is torch.nn.Linear for m in q.modules())  # every Linear swapped
    ids = torch.tensor([tokenizer.encode(sentences[0], is_pretokenized=True).ids])
    with torch.inference_mode():
        a, b = model(ids).nonterminal_logits, q(ids).nonterminal_logits
    assert float((a - b).abs().max()) < 0.05 * float(a.abs().max()) + 1e-3
    for p in predict(q, tokenizer, sentences):
        check_tree(p.heads)
    assert quantize_for_cpu(model, "none") is model
    with pytest.raises(ValueError, match="quantize"):
        quantize_for_cpu(model, "int4")


def test_batched_decoding_equals_sentence_by_sentence():
    from structpe.parser.decode import decode_scores_batch

    rng = np.random.default_rng(3)
    ts = [np.log(rng.dirichlet([1, 1], size=n)) for n in (1, 4, 12, 30, 7)]
    ns = [np.log(rng.dirichlet([1] * 5, size=n)) for n in (1, 4, 12, 30, 7)]
    assert decode_scores_batch(ts, ns) == [decode_scores(t, n) for t, n in zip(ts, ns, strict=True)]
    # greedy or Viterbi, every sentence gets the constrained optimum
    assert decode_scores_batch(ts, ns) == [constrained_decode(t, n) for t, n in zip(ts, ns, strict=True)]

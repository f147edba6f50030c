"""Honest likelihoods: joint p(x, T), k-best marginal p(x), and their invariants.

Tiny randomly initialised Transformer-XL models and a BPE tokenizer trained here with
``tokenizers``; random well-formed parses. The tag tables and tag heads are scaled up so that tags
move a random model's predictions (``input`` injection: at init the ``position`` pathway moves
them by ~1e-4 nats only; the code paths do not depend on the injection site).
"""

from __future__ import annotations

import itertools
import random
from types import SimpleNamespace

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from structpe.eval.scoring import likelihood as lk
from structpe.eval.scoring.prefix_marginal import prefix_bounds
from structpe.eval.scoring.prefixes import allowed_pairs
from structpe.eval.scoring.scorer import CausalScorer
from structpe.models import SiPEConfig, build_model
from structpe.modules.prior import causal_tag_targets
from structpe.syntax.hexatags import decode, is_well_formed
from structpe.syntax.tagged import TaggedSentence

CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "a dog sleeps in the warm afternoon sun",
    "colourless green ideas sleep furiously tonight",
    "the keys to the cabinet are on the table",
    "she watches funny videos with her brother",
    "i saw dogs with hats near the river bank",
]
TEXTS = [
    "the lazy dog sleeps",
    "she saw funny hats near the warm river",
    "colourless ideas jump",
    "a fox",
    "the keys to the brown cabinet are on the table tonight",
]


@pytest.fixture(scope="module")
def tok() -> PreTrainedTokenizerFast:
    t = Tokenizer(models.BPE(unk_token="<unk>"))
    t.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=90, special_tokens=["<pad>", "<s>", "</s>", "<unk>"])
    t.train_from_iterator(CORPUS * 3, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=t, bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>"
    )


def random_parse(text: str, rng: random.Random) -> TaggedSentence:
    """A random well-formed tag sequence (hence a random projective tree) over the text's words."""
    words = text.split()
    terms, nts, depth = [], [], 0
    for i in range(1, len(words) + 1):
        t, nt, depth = rng.choice(allowed_pairs(depth, i, len(words)))
        terms.append(t)
        nts.append(nt)
    return TaggedSentence(words, decode(terms, nts), terms, nts)


@pytest.fixture(scope="module")
def parses() -> list[TaggedSentence]:
    rng = random.Random(0)
    return [random_parse(t, rng) for t in TEXTS]


def tiny_txl(tok: PreTrainedTokenizerFast, injection: str, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    cfg = SiPEConfig(
        family="txl",
        injection=injection,
        vocab_size=len(tok),
        d_model=32,
        n_layers=1,
        n_heads=2,
        d_ff=64,
        dropout=0.0,
        attention_dropout=0.0,
        prior_proj_init_std=0.5,
    )
    model = build_model(cfg).eval()
    with torch.no_grad():  # make the tags (input and head) matter in a random model
        if model.prior is not None:
            model.prior.terminal.weight.mul_(50)
            model.prior.nonterminal.weight.mul_(50)
        if model.tag_heads is not None:  # the plain `none` baseline has none
            for lin in (model.tag_heads.terminal, model.tag_heads.nonterminal):
                lin.weight.mul_(30)
    return model


class OracleTags(torch.nn.Module):
    """A model whose tag head is a one-hot oracle: it reads the next word's tags from its input."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.config = inner.config

    def forward(self, input_ids, attention_mask=None, terminal_ids=None, nonterminal_ids=None, labels=None):
        out = self.inner(
            input_ids,
            attention_mask=attention_mask,
            terminal_ids=terminal_ids,
            nonterminal_ids=nonterminal_ids,
        )
        t_tgt, n_tgt = causal_tag_targets(terminal_ids, nonterminal_ids)

        def onehot(target: torch.Tensor, width: int) -> torch.Tensor:
            logits = torch.full((*target.shape, width), -1e4)
            hit = target >= 0
            logits[hit] = logits[hit].scatter(-1, target[hit].unsqueeze(-1), 0.0)
            return logits

        return SimpleNamespace(
            logits=out.logits, terminal_logits=onehot(t_tgt, 2), nonterminal_logits=onehot(n_tgt, 5)
        )


def score(model, tok, parses, mode, k=10, batch_size=8, append_eos=False):
    sc = CausalScorer(model, tok, likelihood=mode, k=k, batch_size=batch_size, append_eos=append_eos)
    return sc.score([" ".join(p.words) for p in parses], parses)


def test_every_word_is_aligned_and_tags_matter(tok, parses):
    model = tiny_txl(tok, "input")
    for s in score(model, tok, parses, "conditional"):
        assert s.unaligned_words == 0 and s.tagged
    other = random_parse(TEXTS[1], random.Random(7))
    assert other.terminals != parses[1].terminals or other.nonterminals != parses[1].nonterminals
    a, b = score(model, tok, [parses[1], other], "conditional")
    assert abs(a.total - b.total) > 0.1
    # the tokenizer splits some words into several subwords (continuation positions are exercised)
    assert any(len(tok(t, add_special_tokens=False)["input_ids"]) > len(t.split()) for t in TEXTS)


def test_joint_equals_conditional_with_a_one_hot_oracle_tag_head(tok, parses):
    model = OracleTags(tiny_txl(tok, "input"))
    cond = score(model, tok, parses, "conditional")
    joint = score(model, tok, parses, "joint")
    for c, j in zip(cond, joint, strict=True):
        assert j.likelihood == "joint" and c.likelihood == "conditional"
        assert j.meta["tag_logprob"] == 0.0
        assert j.logprobs == pytest.approx(c.logprobs, abs=1e-6)


def test_joint_pays_exactly_the_models_tag_loss(tok, parses):
    model = tiny_txl(tok, "input")
    cond = score(model, tok, parses, "conditional")
    joint = score(model, tok, parses, "joint")
    for p, c, j in zip(parses, cond, joint, strict=True):
        assert j.total == pytest.approx(c.total + j.meta["tag_logprob"], abs=1e-4)
        assert j.meta["tag_logprob"] < -0.1  # a random tag head pays for the tags
        # the model's own auxiliary losses, averaged over the n words it predicts, summed back
        ids = torch.tensor([[tok.bos_token_id, *j.token_ids]])
        t = torch.full_like(ids, -100)
        n = torch.full_like(ids, -100)
        pos = [q for q, (a, b) in enumerate(j.offsets, start=1) if a == 0 or j.text[a - 1] == " "]
        t[0, pos] = torch.tensor(p.terminals)
        n[0, pos] = torch.tensor(p.nonterminals)
        out = model(ids, terminal_ids=t, nonterminal_ids=n)
        expected = -(out.terminal_loss + out.nonterminal_loss).item() * len(p.words)
        assert j.meta["tag_logprob"] == pytest.approx(expected, abs=1e-4)
        # each word's tag cost sits on its first token
        diffs = [a - b for a, b in zip(j.logprobs, c.logprobs, strict=True)]
        assert [d for d in diffs if abs(d) > 1e-9] == pytest.approx(j.meta["tag_logprobs"], abs=1e-5)


def test_baseline_conditional_is_its_plain_likelihood(tok, parses):
    model = tiny_txl(tok, "none")
    texts = [" ".join(p.words) for p in parses]
    for mode in ("conditional", "joint", "marginal"):
        res = score(model, tok, parses, mode, k=3)
        for text, r in zip(texts, res, strict=True):
            assert r.likelihood == "plain" and not r.tagged
            ids = torch.tensor([[tok.bos_token_id, *tok(text, add_special_tokens=False)["input_ids"]]])
            with torch.no_grad():
                lp = torch.log_softmax(model(ids).logits[0, :-1], -1).gather(-1, ids[0, 1:, None])[:, 0]
            assert r.logprobs == pytest.approx(lp.tolist(), abs=1e-5)


@pytest.mark.parametrize("mode", ["conditional", "joint", "marginal"])
@pytest.mark.parametrize(
    ("injection", "append_eos"),
    [("input", False), ("input", True), ("position", False), ("lis_tree", True), ("lis_tree2", True)],
)
def test_batched_equals_unbatched(tok, parses, mode, injection, append_eos):
    model = tiny_txl(tok, injection, seed=1)
    one = score(model, tok, parses, mode, k=4, batch_size=1, append_eos=append_eos)
    many = score(model, tok, parses, mode, k=4, batch_size=16, append_eos=append_eos)
    for a, b in zip(one, many, strict=True):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)
        assert (a.eos_logprob is None) == (not append_eos)
        if append_eos:
            assert a.eos_logprob == pytest.approx(b.eos_logprob, abs=1e-4)
        if mode == "marginal":
            assert a.meta["best_terminals"] == b.meta["best_terminals"]


def test_marginal_k1_is_the_best_sequence_plus_the_parse(tok, parses):
    model = tiny_txl(tok, "input", seed=2)
    marg = score(model, tok, parses, "marginal", k=1)
    best = [
        TaggedSentence(
            p.words,
            decode(m.meta["best_terminals"], m.meta["best_nonterminals"]),
            m.meta["best_terminals"],
            m.meta["best_nonterminals"],
        )
        for p, m in zip(parses, marg, strict=True)
    ]
    joint = score(model, tok, best, "joint")
    gold = score(model, tok, parses, "joint")
    for m, j, g in zip(marg, joint, gold, strict=True):
        assert m.meta["n_sequences"] <= 1
        assert m.meta["best_joint"] == pytest.approx(j.total, abs=1e-4)
        assert m.meta["parse_joint"] == pytest.approx(g.total, abs=1e-5)
        # the width-1 sum: the closed greedy sequence and the parser's parse, unless they are one
        parts = [j.total] if m.meta["parse_in_beam"] else [j.total, g.total]
        assert m.total == pytest.approx(lk.log_sum_exp(parts), abs=1e-4)
        assert m.total >= g.total - 1e-6  # never looser than the parse's joint
        # per-token scores telescope to the open bound; the closing takes them to the total
        assert sum(m.logprobs) == pytest.approx(m.meta["open_bound"], abs=1e-5)
        assert sum(m.logprobs) + m.close_logprob == pytest.approx(m.total, abs=1e-9)


def test_marginal_never_decreases_with_k_and_is_nested(tok, parses):
    model = tiny_txl(tok, "input", seed=3)
    joint_gold = score(model, tok, parses, "joint")
    widths = (1, 2, 3, 5, 10, 30)
    runs = {k: score(model, tok, parses, "marginal", k=k) for k in widths}
    for i in range(len(parses)):
        totals = [runs[k][i].total for k in widths]
        assert all(b >= a - 1e-6 for a, b in zip(totals, totals[1:], strict=False)), totals
        opens = [sum(runs[k][i].logprobs) for k in widths]  # the open prefix bound is nested too
        assert all(b >= a - 1e-6 for a, b in zip(opens, opens[1:], strict=False)), opens
        big = runs[30][i]
        assert big.total == pytest.approx(big.meta["bound_by_k"]["30"], abs=1e-9)
        # the width-w bound of a wider run is the width-w run's own bound
        for w in (1, 10):
            assert big.meta["bound_by_k"][str(w)] == pytest.approx(runs[w][i].total, abs=1e-4)
        # a lower bound on log p(x): at least the best sequence it found and the parse's joint
        assert big.total <= 1e-6
        assert big.total >= big.meta["best_joint"] - 1e-6
        for k in widths:
            assert runs[k][i].total >= joint_gold[i].total - 1e-5


def _open_sequences(n: int) -> list[list[tuple[int, int]]]:
    """Every tag sequence of n words the prefix beam may hold: open moves, or closed at word n."""
    out = []

    def walk(prefix, depth, close):
        if len(prefix) == n:
            out.append(prefix)
            return
        last = len(prefix) + 1 == n
        for t, nt, d in lk.prefix_pairs(depth, close and last):
            walk([*prefix, (t, nt)], d, close)

    walk([], 0, False)
    return out


def every_tree(words: list[str]) -> list[TaggedSentence]:
    """Every well-formed tag sequence (projective tree) over ``words``, by brute force."""
    seqs: list[list[tuple[int, int]]] = []

    def walk(prefix, depth):
        i = len(prefix) + 1
        if i > len(words):
            seqs.append(prefix)
            return
        for t, nt, d in allowed_pairs(depth, i, len(words)):
            walk([*prefix, (t, nt)], d)

    walk([], 0)
    return [
        TaggedSentence(
            words, decode([a for a, _ in s], [b for _, b in s]), [a for a, _ in s], [b for _, b in s]
        )
        for s in seqs
    ]


def test_marginal_is_exact_when_the_beam_covers_every_tree(tok):
    """Brute force: sum of p(x, T) over every well-formed T equals the marginal at a large k."""
    model = tiny_txl(tok, "input", seed=4)
    text = "the lazy dog sleeps"
    words = text.split()
    parses = every_tree(words)
    joints = score(model, tok, parses, "joint")
    exact = lk.log_sum_exp([j.total for j in joints])
    k = len(_open_sequences(len(words) - 1)) * 6  # every open prefix of the first n-1 words is kept
    marg = score(model, tok, [parses[0]], "marginal", k=k)[0]
    assert marg.meta["n_sequences"] == len(parses) and marg.meta["parse_in_beam"]
    assert marg.total == pytest.approx(exact, abs=1e-4)


def test_prefix_bound_is_the_exact_prefix_marginal(tok):
    """(b) of the prefix marginal: with k >= the number of open tag sequences of a prefix, its
    bound equals log sum_T p(prefix, T) over every such T, enumerated by brute force; the bound at
    a cut of a longer text is the same number (it reads nothing after the cut)."""
    model = tiny_txl(tok, "input", seed=7)
    prefix, text = "the lazy dog", "the lazy dog sleeps near the river"
    words = prefix.split()
    seqs = _open_sequences(len(words))
    assert len(seqs) > 20
    # open sequences do not decode to a tree: SimpleNamespace carries the fields the scorer reads
    tagged = [
        SimpleNamespace(words=words, terminals=[a for a, _ in q], nonterminals=[b for _, b in q])
        for q in seqs
    ]
    exact = lk.log_sum_exp([j.total for j in score(model, tok, tagged, "joint")])
    sc = CausalScorer(model, tok, HashParser(), likelihood="marginal", k=len(seqs), batch_size=4)
    alone = sc.score([prefix])[0]
    assert sum(alone.logprobs) == pytest.approx(exact, abs=1e-4)
    assert alone.meta["open_bound"] == pytest.approx(exact, abs=1e-4)
    full, bounds = prefix_bounds(
        sc, [text, prefix], [[len("the lazy"), len(prefix), len(text)], [len(prefix)]]
    )
    assert bounds[0][1] == pytest.approx(exact, abs=1e-4)
    assert bounds[1][0] == pytest.approx(exact, abs=1e-4)
    assert bounds[0][2] == pytest.approx(sum(full[0].logprobs), abs=1e-9)
    # a smaller beam is a lower bound on the same prefix marginal
    small = CausalScorer(model, tok, HashParser(), likelihood="marginal", k=3).score([prefix])[0]
    assert sum(small.logprobs) <= exact + 1e-6


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_allowed_moves_generate_exactly_the_well_formed_sequences(n):
    found = set()

    def walk(prefix, depth):
        i = len(prefix) + 1
        if i > n:
            found.add(tuple(prefix))
            return
        for t, nt, d in allowed_pairs(depth, i, n):
            walk([*prefix, (t, nt)], d)

    walk([], 0)
    pairs = [(t, nt) for t in range(2) for nt in range(5)]
    brute = {
        seq
        for seq in itertools.product(pairs, repeat=n)
        if is_well_formed([a for a, _ in seq], [b for _, b in seq])
    }
    assert found == brute and len(found) > 0


def test_beam_only_proposes_well_formed_sequences(tok, parses, monkeypatch):
    proposed = []
    real = lk._select

    def spy(parents, close, k, max_depth):
        chosen = real(parents, close, k, max_depth)
        proposed.extend((h.terminals, h.nonterminals, close) for h in chosen)
        return chosen

    monkeypatch.setattr(lk, "_select", spy)
    score(tiny_txl(tok, "input", seed=5), tok, parses, "marginal", k=20)
    closed = [(t, n) for t, n, close in proposed if close]
    assert closed and all(is_well_formed(t, n) for t, n in closed)
    for t, n, close in proposed:
        if close:
            continue
        # an open prefix is well formed up to here and never ends the tree: tr + nr back to depth
        # 1, then tr + eos, finishes it
        assert 4 not in n
        depth = sum((a == 0) - (b in (2, 3)) for a, b in zip(t, n, strict=True))
        assert depth >= 1
        rest = [(1, 2)] * (depth - 1) + [(1, 4)]
        assert is_well_formed(t + [a for a, _ in rest], n + [b for _, b in rest])


def test_bad_k_and_reports_name_the_mode(tok):
    model = tiny_txl(tok, "input")
    with pytest.raises(ValueError, match="k >= 1"):
        CausalScorer(model, tok, likelihood="marginal", k=0)
    from structpe.eval.scoring.scorer import describe_scoring

    assert "conditional" in describe_scoring(CausalScorer(model, tok, likelihood="conditional"))
    assert "joint" in describe_scoring(CausalScorer(model, tok, likelihood="joint"))
    assert "k = 7" in describe_scoring(CausalScorer(model, tok, likelihood="marginal", k=7))


class HashParser:
    """A parser whose tree of every word depends on the whole text (seeded by the text)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def parse_text(self, texts: list[str]) -> list[TaggedSentence]:
        self.seen.extend(texts)
        return [random_parse(t, random.Random(sum(map(ord, t)) * 7919 + len(t))) for t in texts]


def test_leakage_audit_causal_conditions_never_see_the_future(tok):
    from structpe.eval.leakage import leakage_audit

    model = tiny_txl(tok, "input", seed=6)
    a, b = "the lazy dog sleeps near the river", "the lazy dog sleeps near the table"
    parser = HashParser()
    rep = leakage_audit(model, tok, [a, b], parser, baseline=tiny_txl(tok, "none"), per_token=True)
    v = rep["variants"]
    assert set(v) == {"full", "untagged", "no_eos", "prefix", "prefix_drop_last"}
    shared = len(tok("the lazy dog sleeps near the", add_special_tokens=False)["input_ids"])
    for name in ("prefix", "prefix_drop_last", "untagged"):
        la, lb = v[name]["token_logprobs"]
        assert la[:shared] == pytest.approx(lb[:shared], abs=1e-5), name
    la, lb = v["full"]["token_logprobs"]
    assert la[:shared] != pytest.approx(lb[:shared], abs=1e-3)  # the full parses differ and leak
    # every text the parser saw for the causal conditions is a prefix ending inside the text
    assert all(a.startswith(t) or b.startswith(t) for t in parser.seen)
    assert set(rep["gain_vs_baseline"]) == set(v)
    untagged = score(model, tok, parser.parse_text([a, b]), "conditional")
    assert v["untagged"]["token_logprobs"][0] != pytest.approx(untagged[0].logprobs, abs=1e-3)
    with pytest.raises(ValueError, match="causal"):
        leakage_audit(model, tok, [a], None, parses=parser.parse_text([a]))


def test_pareto_figure_places_each_mode(tmp_path):
    from structpe.eval.pareto import PUBLISHED, pareto_figure

    def sg(likelihood, scoring, score):
        return {
            "benchmark": "syntaxgym",
            "likelihood": likelihood,
            "scoring": scoring,
            "sg_score": score,
            "n_suites": 2,
        }

    results = [
        sg("plain", "log-likelihood p(x), BOS-conditioned (model reads no tags)", 0.5),
        sg("conditional", "conditional log-likelihood p(x | T(x))", 0.6),
        sg("joint", "joint log-likelihood p(x, T(x))", 0.55),
        sg("marginal", "marginal ... over the k = 10 best well-formed tag sequences", 0.58),
    ]
    data = pareto_figure(results, tmp_path / "p.png", labels=["none", "position", "position", "position"])
    assert [p["x"] for p in data["ours"]] == [0, 1, 1, 10]
    assert [p["y"] for p in data["ours"]] == pytest.approx([50.0, 60.0, 55.0, 58.0])
    assert (tmp_path / "p.png").stat().st_size > 1000 and (tmp_path / "p.json").exists()
    assert len(data["published"]) == len(PUBLISHED) and all("Table 2" in p["source"] for p in PUBLISHED)
    with pytest.raises(ValueError, match="beam width"):
        pareto_figure([sg("marginal", "no width", 0.5)], tmp_path / "q.png")


def test_cli_likelihood_modes_and_leakage(tok, parses, tmp_path, capsys):
    import json

    from structpe.cli import main

    model = tiny_txl(tok, "input", seed=8)
    model.save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(p.to_dict()) + "\n" for p in parses))
    totals = {}
    for mode in ("conditional", "joint", "marginal", "smc"):
        out = tmp_path / mode
        argv = ["eval", "ppl", "--model", str(tmp_path / "m"), "--data", str(data), "--out", str(out)]
        assert main([*argv, "--likelihood", mode, "--k", "5", "--particles", "4"]) == 0
        res = json.loads((out / "ppl.json").read_text())
        assert res["likelihood"] == mode and mode in res["scoring"]
        totals[mode] = res["nll_sum"]
    assert res["particles"] == 4 and res["stderr"] > 0  # smc: its N and its standard error
    assert main([*argv, "--likelihood", "smc", "--particles", "0"]) == 2
    assert totals["joint"] > totals["conditional"]  # the tags are paid for
    out = tmp_path / "leak"
    argv = ["eval", "leakage", "--model", str(tmp_path / "m"), "--data", str(data), "--out", str(out)]
    assert main([*argv, "--parser", "spacy", "--variants", "full", "prefix"]) == 0
    res = json.loads((out / "leakage.json").read_text())
    assert set(res["variants"]) == {"full", "prefix"}


@pytest.mark.parametrize(
    "injection,append_eos",
    [("input", False), ("position+attn_bias", True), ("lis_tree", False), ("lis_tree2", False)],
)
def test_cached_marginal_equals_the_uncached_beam(tok, parses, injection, append_eos, monkeypatch):
    """The key/value-cached beam gives the same bounds (k = 1, 10, 100), per-token scores and best
    sequence as re-running every prefix; a small row budget also splits the batch into groups."""
    model = tiny_txl(tok, injection, seed=6)
    sc = CausalScorer(model, tok, likelihood="marginal", k=100, batch_size=8, append_eos=append_eos)
    enc = sc.encode([" ".join(p.words) for p in parses], parses)
    ref = lk.marginal_scores(sc, enc, use_cache=False)
    monkeypatch.setattr(lk, "CACHED_BEAM_ROWS", 150)  # 1 sentence per group at k = 100
    for cached in (lk.marginal_scores(sc, enc), sc.score([" ".join(p.words) for p in parses], parses)):
        for a, b in zip(cached, ref, strict=True):
            for w in ("1", "10", "100"):
                assert a.meta["bound_by_k"][w] == pytest.approx(b.meta["bound_by_k"][w], abs=1e-4)
            assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)
            assert a.meta["best_terminals"] == b.meta["best_terminals"]
            assert a.meta["n_sequences"] == b.meta["n_sequences"]
            assert a.total == pytest.approx(b.total, abs=1e-4)
            assert a.close_logprob == pytest.approx(b.close_logprob, abs=1e-4)

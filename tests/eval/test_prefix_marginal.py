"""The prefix marginal on SyntaxGym items: identical prefixes get identical surprisals.

Where two conditions of an item share the text up to the end of a region (and before it), a
leak-free scorer gives that region the same surprisal in both. A small randomly initialised tagged
Transformer-XL (float64, so that batch composition cannot flip a near-tie in the beam), a
byte-level BPE trained here on the suites' sentences and a parser whose trees depend on the whole
text: the `conditional` mode must leak (the check can fail), the `marginal` mode must not.

The test runs the property on ``SAMPLE``, four suites of different constructions (about a tenth of
the stored suites' items; every shipped suite took 303 s, a third of the whole test suite);
``benchmarks/identical_prefixes.py`` runs the same check on every stored suite.
"""

from __future__ import annotations

import dataclasses
import random
import re
import zlib

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from structpe.choices import PROPOSALS
from structpe.data.paths import data_root
from structpe.eval.scoring.prefixes import prefix_pairs
from structpe.eval.syntaxgym.evaluate import evaluate_syntaxgym, paper_suites
from structpe.eval.syntaxgym.suites import load_suites, sentence_and_spans
from structpe.models import SiPEConfig, build_model
from structpe.syntax.hexatags import decode
from structpe.syntax.tagged import TaggedSentence

WORD = re.compile(r"\w+|[^\w\s]")


class WholeTextParser:
    """Words: a regex over the text; tree: random, seeded by the whole text (so it leaks)."""

    def parse_text(self, texts: list[str]) -> list[TaggedSentence]:
        out = []
        for text in texts:
            words = WORD.findall(text)
            rng = random.Random(zlib.crc32(text.encode()))
            terms, nts, depth = [], [], 0
            for i in range(len(words)):
                last = i + 1 == len(words)
                moves = [m for m in prefix_pairs(depth, last) if last or m[2] <= len(words) - i - 1]
                t, nt, depth = rng.choice(moves)
                terms.append(t)
                nts.append(nt)
            out.append(TaggedSentence(words, decode(terms, nts), terms, nts))
        return out


@pytest.fixture(scope="module")
def suites_root():
    root = data_root(None, sub="syntaxgym")
    if not paper_suites(root):  # none stored
        pytest.skip("SyntaxGym suites are not in the data folder (structpe data fetch syntaxgym)")
    return root


def _sentences(suites) -> list[str]:
    return [
        sentence_and_spans(contents, "raw")[0]
        for s in suites
        for item in s.items
        for contents in item.conditions.values()
    ]


def _tokenizer(texts: list[str]) -> PreTrainedTokenizerFast:
    t = Tokenizer(models.BPE(unk_token=None))
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<pad>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    t.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=t, bos_token="<s>", eos_token="</s>", pad_token="<pad>")


def _model(vocab: int) -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = SiPEConfig(
        family="txl",
        injection="input",
        vocab_size=vocab,
        d_model=16,
        n_layers=1,
        n_heads=2,
        d_ff=32,
        dropout=0.0,
        attention_dropout=0.0,
    )
    model = build_model(cfg).eval()
    with torch.no_grad():  # make the tags (input and head) matter in a random model
        model.prior.terminal.weight.mul_(50)
        model.prior.nonterminal.weight.mul_(50)
        for lin in (model.tag_heads.terminal, model.tag_heads.nonterminal):
            lin.weight.mul_(30)
    return model.double()


def _shared_prefix_differences(result, suites) -> tuple[int, list[float]]:
    """Region pairs (same item and region, two conditions) with equal text before and up to the
    region's end, non-empty; the absolute surprisal difference (bits) of each."""
    pairs, diffs = 0, []
    for suite in suites:
        bits = result["suites"][suite.name]["region_surprisal_bits"]
        for item in suite.items:
            conds = {c: sentence_and_spans(v, "raw") for c, v in item.conditions.items()}
            names = sorted(conds)
            for i, a in enumerate(names):
                for b in names[i + 1 :]:
                    (ta, sa), (tb, sb) = conds[a], conds[b]
                    for r, (x, y) in enumerate(zip(sa, sb, strict=True), start=1):
                        if x is None or y is None or ta[: x[1]] != tb[: y[1]] or x[0] != y[0]:
                            continue
                        pairs += 1
                        v = bits[str(item.number)]
                        diffs.append(abs(v[f"{a}:{r}"] - v[f"{b}:{r}"]))
    return pairs, diffs


# four constructions (clefts, a six-condition filler-gap suite, NP/Z garden paths, subordination):
# shared prefixes of different lengths and region layouts
SAMPLE = ("cleft", "fgd_hierarchy", "npz_ambig", "subordination_src-src")
SMC_ITEMS = 6


def identical_prefix_check(suites_root, names: list[str] | None) -> dict[str, float]:
    """Score the suites ``names`` (None: every stored suite) in both modes; the pair count, the
    leaking pairs of `conditional` and the largest difference of `marginal` (bits)."""
    suites = load_suites(suites_root, names)
    every = load_suites(suites_root, None)
    tok = _tokenizer(_sentences(every))  # the vocabulary of every suite, whichever are scored
    model = _model(len(tok))
    parser = WholeTextParser()
    run = lambda mode: evaluate_syntaxgym(  # noqa: E731
        model, tok, parser, suites_root, [s.name for s in suites], likelihood=mode, k=4, progress=False
    )
    pairs, leaky = _shared_prefix_differences(run("conditional"), suites)
    pairs_m, diffs = _shared_prefix_differences(run("marginal"), suites)
    assert pairs_m == pairs
    return {
        "suites": len(suites),
        "pairs": pairs,
        "conditional_leaking_pairs": sum(d > 1e-4 for d in leaky),
        "marginal_max_diff_bits": max(diffs),
    }


def test_identical_prefixes_get_identical_surprisals(suites_root):
    found = identical_prefix_check(suites_root, list(SAMPLE))
    assert found["pairs"] > 500
    assert found["conditional_leaking_pairs"] > 10  # the whole-text parse leaks: the check can fail
    assert found["marginal_max_diff_bits"] < 1e-4, found


@pytest.mark.parametrize("proposal", PROPOSALS)
def test_identical_prefixes_get_identical_smc_surprisals(suites_root, proposal):
    """The particle estimate on a sample of suites: each system is seeded alone and draws its random
    numbers in the same order for the same prefix, so shared prefixes get identical region
    surprisals (0 differing pairs), in the reported (4N) estimate; the result records the budgets.
    With the adapted proposal a word's pair is drawn only once the tokens up to the next word's first
    are read, and the estimates inside a word sum its pairs: the same holds."""
    names = ["number_prep", "reflexive_src_fem", "mvrr", "subordination_src-src"]
    suites = [s for s in load_suites(suites_root, None) if s.name in names]
    assert len(suites) == len(names)
    tok = _tokenizer(_sentences(suites))
    model = _model(len(tok))
    # the first SMC_ITEMS items of each suite (over 300 shared-prefix pairs); every item of the four
    # cost 4x as much for the same code paths
    suites = [dataclasses.replace(s, items=s.items[:SMC_ITEMS]) for s in suites]
    res = evaluate_syntaxgym(
        model,
        tok,
        WholeTextParser(),
        suites_root,
        names,
        max_items=SMC_ITEMS,
        likelihood="smc",
        particles=4,
        proposal=proposal,
        progress=False,
    )
    pairs, diffs = _shared_prefix_differences(res, suites)
    assert pairs > 100
    assert max(diffs) < 1e-6, sorted(diffs)[-5:]
    assert res["likelihood"] == "smc" and res["particles"] == 4 and res["proposal"] == proposal
    assert 0 <= res["flip_share"] <= 1 and res["stderr"] >= 0 and res["decisions"] == sum(
        len(s.items) for s in suites
    )


def test_per_item_budgets_keep_the_prefix_property_and_the_fixed_run(suites_root):
    """SyntaxGym with per-item particle budgets: at particles_max = N it is the fixed-budget run; with
    room to grow, items near a tie are re-scored at 4N (all their conditions together, so shared
    prefixes still get identical surprisals) and the others keep the fixed run's numbers."""
    names = ["number_prep", "subordination_src-src"]
    suites = [dataclasses.replace(s, items=s.items[:SMC_ITEMS]) for s in load_suites(suites_root, names)]
    tok = _tokenizer(_sentences(suites))
    model = _model(len(tok))
    kw = {"max_items": SMC_ITEMS, "likelihood": "smc", "particles": 2, "progress": False}
    fixed = evaluate_syntaxgym(model, tok, WholeTextParser(), suites_root, names, **kw)
    same = evaluate_syntaxgym(model, tok, WholeTextParser(), suites_root, names, particles_max=2, **kw)
    assert same["budgets"] == {"2": 2 * SMC_ITEMS} and same["flip_share"] == fixed["flip_share"]
    grown = evaluate_syntaxgym(model, tok, WholeTextParser(), suites_root, names, particles_max=8, **kw)
    assert grown["particles_max"] == 8 and sum(grown["budgets"].values()) == 2 * SMC_ITEMS
    assert grown["stderr_method"] == "flip bound" and "stderr_method" not in fixed
    pairs, diffs = _shared_prefix_differences(grown, suites)
    assert pairs > 10 and max(diffs) < 1e-6
    moved = 0
    for name in names:
        for a, b in zip(grown["suites"][name]["items"], fixed["suites"][name]["items"], strict=True):
            bits_a = grown["suites"][name]["region_surprisal_bits"][str(a["item"])]
            bits_b = fixed["suites"][name]["region_surprisal_bits"][str(b["item"])]
            assert (bits_a == bits_b) == (a["particles"] == 2)
            moved += a["particles"] > 2
    assert moved == 2 * SMC_ITEMS - grown["budgets"].get("2", 0) > 0

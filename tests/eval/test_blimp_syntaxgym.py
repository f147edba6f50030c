"""BLiMP and SyntaxGym: hand-computed answers on toy models, the paper protocol on the real files."""

from __future__ import annotations

import json
import math
import random

import pytest
import torch
from eval_toys import VOCAB, WORDS, BigramLM, ChainParser
from transformers import GPT2Config, GPT2LMHeadModel

from structpe.eval.blimp import BlimpPair, evaluate_blimp, list_paradigms, load_blimp
from structpe.eval.syntaxgym.evaluate import evaluate_syntaxgym, sg_score_from_reference
from structpe.eval.syntaxgym.formula import FormulaError, parse_formula
from structpe.eval.syntaxgym.suites import load_suites, sentence_and_spans

V = len(WORDS)
LOG2V = math.log2(V)


def _pair(paradigm, i, good, bad, field="syntax"):
    return BlimpPair(paradigm, str(i), good, bad, field, "toy_phenomenon")


def test_blimp_hand_computed(tok):
    # uniform model: log P(sentence) = -(#tokens) log V, so the shorter sentence wins
    model = BigramLM(torch.zeros(V, V), injection="none")
    pairs = [
        _pair("a", 0, "the dog run", "the dogs run"),  # 3 vs 4 tokens: correct
        _pair("a", 1, "the dog run", "cat"),  # 3 vs 1: wrong
        _pair("a", 2, "cat sleep", "cat sleep"),  # identical: a tie counts as wrong
        _pair("b", 0, "dogs", "the dog run", field="syntax_semantics"),  # 2 vs 3: correct
    ]
    r = evaluate_blimp(model, tok, pairs=pairs, progress=False, keep_pairs=True)
    assert r["per_paradigm"] == {"a": pytest.approx(1 / 3), "b": 1.0}
    assert r["overall"] == pytest.approx(2 / 4)
    assert r["per_field"] == {"syntax": pytest.approx(1 / 3), "syntax_semantics": 1.0}
    assert r["pairs"][0]["logp_good"] == pytest.approx(-3 * math.log(V))
    assert r["leading_space"] is True  # decoders: " " + sentence, as lm-eval-harness


def test_blimp_bigram_with_tags(tok):
    table = torch.zeros(V, V)
    table[VOCAB["dog"], VOCAB["run"]] = 3.0  # "dog run" is likely, "dog ##s run" is not
    model = BigramLM(table)
    pairs = [_pair("agr", 0, "the dog run .", "the dogs run .")]
    r = evaluate_blimp(model, tok, ChainParser(), pairs=pairs, progress=False, keep_pairs=True)
    lsm = torch.log_softmax(table, -1)
    ix = VOCAB
    good = ["[BOS]", "the", "dog", "run", "."]
    want = sum(lsm[ix[a], ix[b]].item() for a, b in zip(good, good[1:], strict=False))
    assert r["pairs"][0]["logp_good"] == pytest.approx(want, abs=1e-5)
    assert r["overall"] == 1.0
    assert r["scoring"].startswith("conditional log-likelihood p(x | T(x))")


@pytest.fixture
def toy_suite_dir(tmp_path):
    suite = {
        "meta": {"name": "number_toy", "metric": "sum"},
        "region_meta": {"1": "det", "2": "noun", "3": "verb"},
        "predictions": [
            {"type": "formula", "formula": "(3;%match%) < (3;%mismatch%)"},
            {"type": "formula", "formula": "(2;%gap%) = 0"},
        ],
        "items": [
            {
                "item_number": 1,
                "conditions": [
                    {
                        "condition_name": "match",
                        "regions": [
                            {"region_number": 1, "content": "the"},
                            {"region_number": 2, "content": "dog"},
                            {"region_number": 3, "content": "run ."},
                        ],
                    },
                    {
                        "condition_name": "mismatch",
                        "regions": [
                            {"region_number": 1, "content": "the"},
                            {"region_number": 2, "content": "dogs"},
                            {"region_number": 3, "content": "run ."},
                        ],
                    },
                    {
                        "condition_name": "gap",
                        "regions": [
                            {"region_number": 1, "content": "the"},
                            {"region_number": 2, "content": ""},
                            {"region_number": 3, "content": "run ."},
                        ],
                    },
                ],
            }
        ],
    }
    d = tmp_path / "suites"
    d.mkdir()
    (d / "number_toy.json").write_text(json.dumps(suite))
    return tmp_path


def test_syntaxgym_hand_computed(tok, toy_suite_dir):
    table = torch.zeros(V, V)
    table[VOCAB["dog"], VOCAB["run"]] = math.log(V - 1)  # p(run | dog) = 1/2
    model = BigramLM(table, injection="none")
    r = evaluate_syntaxgym(model, tok, data_dir=toy_suite_dir, progress=False)
    regs = r["suites"]["number_toy"]["region_surprisal_bits"]["1"]
    # match: "the"|BOS = log2 V bits; "dog"|the = log2 V; "run"|dog = 1 bit, "."|run = log2 V
    assert regs["match:1"] == pytest.approx(LOG2V)
    assert regs["match:2"] == pytest.approx(LOG2V)
    assert regs["match:3"] == pytest.approx(1 + LOG2V)
    # dog|the = log2 V; ##s|dog = log2 (2 (V-1)) since the row of "dog" favours "run"
    assert regs["mismatch:2"] == pytest.approx(LOG2V + 1 + math.log2(V - 1))
    assert regs["mismatch:3"] == pytest.approx(2 * LOG2V)
    assert regs["gap:2"] == 0.0  # empty region
    item = r["suites"]["number_toy"]["items"][0]
    assert item["predictions"] == [True, True]
    assert r["suite_accuracy"] == {"number_toy": 1.0}
    assert r["circuits"] == {"Agreement": 1.0}


def test_sentence_and_region_spans():
    s, spans = sentence_and_spans(["The", "", "author", "is"])
    assert s == "The author is"
    assert spans == [(0, 3), None, (3, 10), (10, 13)]  # the joining space belongs to the next region


def test_formula_grammar():
    v = {("a", 1): 1.0, ("b", 1): 2.0, ("a", 2): 5.0}
    assert parse_formula("(1;%a%) < (1;%b%)").evaluate(v)
    assert not parse_formula("(1;%a%) < (1;%a%)").evaluate(v)  # strict: ties are False
    assert parse_formula("(1;%a%) + (1;%b%) < (2;%a%) & (1;%a%) > 0").evaluate(v)
    assert parse_formula("((1;%a%)-(1;%b%))+(2;%a%) > 3.5").evaluate(v)
    assert parse_formula("(1;%a%) = 1.0005").evaluate(v)  # isclose(atol=1e-3)
    assert not parse_formula("(1;%a%) = 1.01").evaluate(v)
    assert parse_formula("(1;%a%) > 9 | (1;%b%) > 1").evaluate(v)
    assert parse_formula("-(1;%a%) < 0").evaluate(v)
    # slack: how far from flipping, positive where the prediction holds
    assert parse_formula("(1;%a%) < (1;%b%)").slack(v) == 1.0
    assert parse_formula("(1;%a%) > (1;%b%)").slack(v) == -1.0
    assert parse_formula("(1;%a%) < (1;%b%) & (2;%a%) > 4").slack(v) == 1.0
    assert parse_formula("(1;%a%) > (1;%b%) | (2;%a%) > 4.5").slack(v) == 0.5
    assert parse_formula("(1;%a%) = 1.0005").slack(v) > 0 > parse_formula("(1;%a%) = 1.01").slack(v)
    with pytest.raises(FormulaError, match="no slack"):
        parse_formula("(1;%a%) + (1;%b%)").slack(v)
    with pytest.raises(FormulaError):
        parse_formula("((1;%a%) < (1;%b%)")
    with pytest.raises(FormulaError):
        parse_formula("(1;%a%) <")


@pytest.mark.data
def test_every_suite_formula_parses_and_evaluates(shared_data):
    suites = load_suites(shared_data)
    assert len(suites) == 34 and sum(len(s.items) for s in suites) == 842
    rng = random.Random(0)
    for s in suites:
        for item in s.items:
            values = {}
            for cond, contents in item.conditions.items():
                for r in range(1, len(contents) + 1):
                    values[(cond, r)] = rng.uniform(0, 20)
            assert all(isinstance(p.evaluate(values), bool) for p in s.predictions)
            # the slack the particle budgets read agrees with the prediction's truth value
            assert all((p.slack(values) > 0) == p.evaluate(values) for p in s.predictions)


@pytest.mark.data
@pytest.mark.parametrize(
    "model, score, circuits",
    [
        ("gpt-2-pretrained", 0.784, [0.737, 0.658, 0.881, 0.891, 0.893, 0.814]),
        ("gpt-2-xl-pretrained", 0.842, [0.772, 0.787, 0.928, 0.870, 0.964, 0.826]),
        ("transformer-xl", 0.596, [0.719, 0.384, 0.680, 0.891, 0.804, 0.536]),
        ("jrnn", 0.563, [0.509, 0.253, 0.829, 0.478, 0.821, 0.810]),
        ("grnn", 0.551, [0.526, 0.134, 0.818, 0.891, 0.661, 0.729]),
    ],
)
def test_sg_score_from_reference_results(shared_data, model, score, circuits):
    r = sg_score_from_reference(
        shared_data / "syntaxgym" / "reference_results" / f"syntaxgym_results_{model}_.csv"
    )
    assert r["n_suites"] == 31
    assert r["excluded"] == ["fgd-embed3", "fgd-embed4", "nn-nv-rpl"]
    assert round(r["sg_score"], 3) == score
    order = [
        "Agreement",
        "Licensing",
        "Garden-Path Effects",
        "Gross Syntactic State",
        "Center Embedding",
        "Long-Distance Dependencies",
    ]
    assert [round(r["circuits"][c], 3) for c in order] == circuits


@pytest.mark.data
def test_blimp_loader_real_files(shared_data):
    names = list_paradigms(shared_data)
    assert len(names) == 67
    pairs = load_blimp(shared_data)
    assert len(pairs) == 67_000
    fields = {}
    phen = {}
    for p in pairs:
        fields[p.field] = fields.get(p.field, 0) + 1
        phen.setdefault(p.phenomenon, set()).add(p.paradigm)
    assert sorted(fields) == ["morphology", "semantics", "syntax", "syntax_semantics"]
    assert fields["syntax_semantics"] == 14_000  # 13 paradigms + principle_A_case_2's "syntax/semantics"
    assert {k: len(v) for k, v in phen.items()}["argument_structure"] == 9
    assert len(phen) == 12
    sub = load_blimp(shared_data, limit=2, phenomena=["island_effects"], fields=["syntax"])
    assert len({p.paradigm for p in sub}) == 8 and len(sub) == 16


@pytest.mark.data
def test_real_data_smoke_with_hf_gpt2(shared_data, tok):
    torch.manual_seed(0)
    gpt = GPT2LMHeadModel(GPT2Config(vocab_size=V, n_layer=1, n_head=2, n_embd=16, n_positions=64)).eval()
    r = evaluate_blimp(
        gpt, tok, data_dir=shared_data, paradigms=["causative", "passive_1"], limit=4, progress=False
    )
    assert r["n_pairs"] == 8 and set(r["per_paradigm"]) == {"causative", "passive_1"}
    sg = evaluate_syntaxgym(
        gpt, tok, data_dir=shared_data, suites=["number_prep", "fgd_hierarchy"], max_items=2, progress=False
    )
    assert sg["suites"]["fgd_hierarchy"]["n_items"] == 2
    assert len(sg["suites"]["fgd_hierarchy"]["items"][0]["predictions"]) == 2
    assert sg["n_suites"] == 2 and not sg["complete_31"]

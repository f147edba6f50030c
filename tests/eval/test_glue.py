"""GLUE: loaders on the real files, metrics against sklearn/scipy and by hand, a tiny fine-tune."""

from __future__ import annotations

import json
import math
import statistics
from types import SimpleNamespace

import pytest
import torch
from eval_toys import VOCAB, WORDS, ChainParser
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef
from transformers import BertConfig, BertForSequenceClassification

from structpe.eval.glue.features import featurize
from structpe.eval.glue.finetune import finetune_glue
from structpe.eval.glue.report import format_results
from structpe.eval.glue.tasks import GlueExample, glue_metrics, load_glue


def test_metrics_match_sklearn_scipy_and_hand_values():
    p, y = [1, 0, 1, 1], [1, 0, 0, 1]
    # TP 2, TN 1, FP 1, FN 0
    assert glue_metrics("cola", p, y)["mcc"] == pytest.approx(2 / math.sqrt(12))
    assert glue_metrics("cola", p, y)["mcc"] == pytest.approx(matthews_corrcoef(y, p))
    m = glue_metrics("mrpc", p, y)
    assert m["f1"] == pytest.approx(0.8) and m["accuracy"] == pytest.approx(0.75)
    assert m["f1"] == pytest.approx(f1_score(y, p)) and m["accuracy"] == pytest.approx(accuracy_score(y, p))
    assert m["main"] == pytest.approx(0.8)  # MRPC: F1, the one number the paper's tables give
    assert glue_metrics("SST-2", p, y)["main"] == pytest.approx(0.75)
    ps, ys = [0.1, 2.0, 3.5, 4.0, 1.0], [0.0, 3.5, 3.0, 5.0, 2.0]  # one rank swap: rho = 0.9
    s = glue_metrics("sts-b", ps, ys)
    assert s["pearson"] == pytest.approx(pearsonr(ps, ys)[0])
    assert s["spearman"] == pytest.approx(spearmanr(ps, ys)[0]) and s["spearman"] == pytest.approx(0.9)
    assert s["main"] == s["spearman"]


def test_a_collapsed_run_scores_zero_correlation_not_nan():
    """A fine-tuning run that predicts one value everywhere: scipy's correlation is NaN, which would
    turn the cell's macro (and every mean over seeds) into NaN; like MCC, it scores 0."""
    ys = [0.0, 3.5, 3.0, 5.0, 2.0]
    s = glue_metrics("stsb", [2.5] * 5, ys)
    assert s["pearson"] == 0.0 and s["spearman"] == 0.0 and s["main"] == 0.0
    assert glue_metrics("cola", [1] * 4, [1, 0, 0, 1])["mcc"] == 0.0
    assert glue_metrics("stsb", [2.5, 2.5, 2.5, 2.5, 2.6], ys)["spearman"] != 0.0  # only exact ties


@pytest.mark.data
def test_loaders_real_files(shared_data):
    sizes = {"cola": (8551, 1043), "mrpc": (3668, 408), "rte": (2490, 277), "stsb": (5749, 1500)}
    for task, (n_train, n_dev) in sizes.items():
        assert len(load_glue(task, "train", shared_data)) == n_train, task
        assert len(load_glue(task, "dev", shared_data)) == n_dev, task
    assert len(load_glue("sst2", "dev", shared_data)) == 872
    assert len(load_glue("sst2", "train", shared_data, limit=10)) == 10  # gzip
    assert len(load_glue("qnli", "dev", shared_data)) == 5463
    with pytest.raises(ValueError, match="train"):
        load_glue("qnli", "train", shared_data)
    rte = load_glue("rte", "dev", shared_data)
    assert sum(e.label == 0 for e in rte) == 146  # entailment
    mrpc = load_glue("mrpc", "dev", shared_data)
    assert sum(e.label for e in mrpc) == 279 and len(mrpc[0].texts) == 2  # BOM-stripped header found
    assert load_glue("cola", "dev", shared_data)[-1].texts[0]  # no trailing newline handled
    assert sum(e.label for e in load_glue("cola", "train", shared_data)) == 6023


def test_pair_tags_each_sentence_separately(mlm_tok):
    from structpe.eval.glue.tasks import GlueExample

    ex = [GlueExample(("the dogs run", "cat sleep"), 1)]
    parser = ChainParser()
    f = featurize(ex, mlm_tok, parser)
    ids = f.input_ids[0]
    a, b = parser.parse_text(["the dogs run", "cat sleep"])
    # only the first token of each word, in either sentence, carries that sentence's own tags
    tokens = [WORDS[i] for i in ids]
    t = f.terminal_ids[0]
    tagged = [(tok, tag) for tok, tag in zip(tokens, t, strict=True) if tag != -100]
    assert [x for x, _ in tagged] == ["the", "dog", "run", "cat", "sleep"]
    assert [x for _, x in tagged] == [*a.terminals, *b.terminals]


@pytest.mark.data
def test_tiny_finetune_runs_on_real_rte(shared_data, mlm_tok):
    def model_fn(n):
        cfg = BertConfig(
            vocab_size=len(WORDS),
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
            num_labels=n,
        )
        return BertForSequenceClassification(cfg)

    r = finetune_glue(
        model_fn,
        mlm_tok,
        ["rte", "stsb"],
        data_dir=shared_data,
        seeds=(0, 1),
        epochs=1,
        max_train=16,
        max_eval=16,
        batch_size=8,
        progress=False,
    )
    assert set(r["tasks"]) == {"rte", "stsb"}
    assert len(r["tasks"]["rte"]["runs"]) == 2
    assert 0.0 <= r["tasks"]["rte"]["mean"]["accuracy"] <= 1.0
    mains = [r["tasks"][t]["mean"]["main"] for t in ("rte", "stsb")]
    assert r["macro"] == pytest.approx(sum(mains) / 2)
    assert torch.isfinite(torch.tensor(mains)).all()


@pytest.mark.data
def test_finetune_our_encoder_with_tags(shared_data, mlm_tok, tmp_path):
    from structpe.eval.glue.finetune import load_classifier
    from structpe.models import SiPEConfig, build_model

    cfg = SiPEConfig(
        family="roberta",
        injection="input",
        vocab_size=len(WORDS),
        d_model=16,
        n_layers=1,
        n_heads=2,
        pad_token_id=0,
        max_position_embeddings=64,
    )
    build_model(cfg).save_pretrained(tmp_path / "rob")
    r = finetune_glue(
        lambda n: load_classifier(tmp_path / "rob", n),
        mlm_tok,
        ["cola"],
        ChainParser(),
        shared_data,
        seeds=(0,),
        epochs=1,
        max_train=8,
        max_eval=8,
        batch_size=4,
        max_length=48,
        progress=False,
    )
    assert r["tasks"]["cola"]["tagged"] and -1 <= r["macro"] <= 1


@pytest.mark.data
@pytest.mark.parametrize("bf16", [False, True])
def test_finetune_in_bf16_trains_in_bf16_and_scores_in_float32(shared_data, mlm_tok, tmp_path, bf16):
    """``bf16`` autocasts the training forward passes; the dev predictions stay float32 (bf16 would
    round a weak model's nearly equal outputs into ties), and so do the weights."""
    from structpe.eval.glue.finetune import load_classifier
    from structpe.models import SiPEConfig, build_model

    cfg = SiPEConfig(family="roberta", vocab_size=len(WORDS), d_model=16, n_layers=1, n_heads=2,
                     pad_token_id=0, max_position_embeddings=64)
    build_model(cfg).save_pretrained(tmp_path / "rob")
    seen: list[tuple[bool, torch.dtype]] = []
    models = []

    def model_fn(n: int) -> torch.nn.Module:
        model = load_classifier(tmp_path / "rob", n)
        linear = next(m for m in model.modules() if isinstance(m, torch.nn.Linear))
        linear.register_forward_hook(lambda mod, args, out: seen.append((mod.training, out.dtype)))
        models.append(model)
        return model

    r = finetune_glue(model_fn, mlm_tok, ["rte"], None, shared_data, seeds=(0,), epochs=1, max_train=8,
                      max_eval=8, batch_size=4, max_length=48, bf16=bf16, progress=False)
    want = torch.bfloat16 if bf16 else torch.float32
    assert {train for train, _ in seen} == {True, False}  # training and dev passes both seen
    assert {dtype for train, dtype in seen if train} == {want}
    assert {dtype for train, dtype in seen if not train} == {torch.float32}
    assert all(p.dtype == torch.float32 for p in models[0].parameters())
    assert r["tasks"]["rte"]["bf16"] is bf16 and math.isfinite(r["macro"])


def test_best_epoch_and_macro_on_a_toy_run(monkeypatch):
    """Scripted dev scores per (task, seed, epoch): best-epoch selection, sd over seeds, the macro."""
    from structpe.eval.glue import finetune as glue

    # dev `main` after epochs 1..3 for each task and seed
    script = {
        ("rte", 0): [0.50, 0.70, 0.60],
        ("rte", 1): [0.55, 0.58, 0.65],
        ("cola", 0): [0.10, 0.30, 0.20],
        ("cola", 1): [0.40, 0.20, 0.10],
    }
    state = {}

    def fake_load(task, split, data_dir=None, limit=None):
        state["task"] = task
        return [GlueExample(("a b", "c d") if task == "rte" else ("a b",), i % 2) for i in range(4)]

    def fake_metrics(task, predictions, labels):
        score = script[(task, state["seed"])][state["epoch"]]
        state["epoch"] += 1
        return {"accuracy" if task == "rte" else "mcc": score, "main": score}

    class Tiny(torch.nn.Module):
        def __init__(self, n):
            super().__init__()
            self.lin = torch.nn.Linear(1, n)

        def forward(self, input_ids, attention_mask=None, **kw):
            return SimpleNamespace(logits=self.lin(input_ids[:, :1].float()))

    def model_fn(n):
        state["seed"], state["epoch"] = state.get("next_seed", 0), 0
        state["next_seed"] = 1 - state.get("next_seed", 0)
        return Tiny(n)

    monkeypatch.setattr(glue, "load_glue", fake_load)
    monkeypatch.setattr(glue, "glue_metrics", fake_metrics)
    tok = SimpleNamespace(pad_token_id=0)
    monkeypatch.setattr(glue, "featurize", lambda ex, *a, **k: glue.Features(
        [[1, 2, 3]] * len(ex), [[-100] * 3] * len(ex), [[-100] * 3] * len(ex), [e.label for e in ex]))
    r = glue.finetune_glue(model_fn, tok, ["rte", "cola"], seeds=(0, 1), epochs=3, progress=False)
    rte, cola = r["tasks"]["rte"], r["tasks"]["cola"]
    assert [run["best"]["epoch"] for run in rte["runs"]] == [2, 3]
    assert [run["best"]["epoch"] for run in cola["runs"]] == [2, 1]
    assert rte["summary"]["best"]["mean"]["main"] == pytest.approx((0.70 + 0.65) / 2)
    assert rte["summary"]["last"]["mean"]["main"] == pytest.approx((0.60 + 0.65) / 2)
    assert rte["summary"]["best"]["sd"]["main"] == pytest.approx(statistics.stdev([0.70, 0.65]))
    assert cola["summary"]["best"]["mean"]["main"] == pytest.approx(0.35)
    assert r["macro"] == pytest.approx((0.675 + 0.35) / 2)
    assert r["macro_last"] == pytest.approx((0.625 + 0.15) / 2)
    per_seed = [(0.70 + 0.30) / 2, (0.65 + 0.40) / 2]  # each seed's mean over tasks
    assert r["macro_sd"] == pytest.approx(statistics.stdev(per_seed))
    rows, cols = format_results(r)
    assert rows[-1]["best epoch"] == f"{100 * r['macro']:.2f} ± {100 * r['macro_sd']:.2f}"
    assert glue.resolve_tasks(["all"]) == list(glue.FINETUNE_TASKS)
    with pytest.raises(ValueError, match="cannot be fine-tuned"):
        glue.resolve_tasks(["qnli"])


def test_recorded_parser_is_the_pretraining_one(tmp_path):
    from structpe.eval.glue.finetune import recorded_parser

    data = tmp_path / "data"
    data.mkdir()
    settings = {"parser": "hexatagger", "parser_kwargs": {"model": "/p/hexa", "quantize": "int8"}}
    (data / "structpe_prepare.json").write_text(json.dumps({"settings": settings}))
    run = tmp_path / "run"
    (run / "final").mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({"dataset": str(data)}))
    rec = recorded_parser(run / "final")
    assert rec["parser"] == "hexatagger" and rec["parser_kwargs"] == settings["parser_kwargs"]
    assert recorded_parser(tmp_path / "elsewhere") is None


class LabelledChain(ChainParser):
    """ChainParser with dependency labels: the first word is ROOT (ClearNLP), the rest nmod:poss (UD)."""

    def parse_text(self, texts):
        out = ChainParser.parse_text(self, texts)
        for s in out:
            s.deprels = ["ROOT"] + ["nmod:poss"] * (len(s.words) - 1)
        return out


def test_deprel_features_follow_the_tags(mlm_tok):
    from structpe.eval.glue.tasks import GlueExample
    from structpe.syntax.deprels import UD_RELATIONS

    ex = [GlueExample(("the dogs run", "cat sleep"), 1)]
    f = featurize(ex, mlm_tok, LabelledChain(), deprels=True)
    t, d = f.terminal_ids[0], f.deprel_ids[0]
    assert [x == -100 for x in d] == [x == -100 for x in t]  # on the words' first tokens only
    root, nmod = UD_RELATIONS.index("root"), UD_RELATIONS.index("nmod")
    assert [x for x in d if x != -100] == [root, nmod, nmod, root, nmod]
    with pytest.raises(ValueError, match="gives none"):
        featurize(ex, mlm_tok, ChainParser(), deprels=True)


@pytest.mark.data
def test_finetune_a_deprel_encoder(shared_data, mlm_tok, tmp_path):
    from structpe.eval.glue.finetune import load_classifier
    from structpe.models import SiPEConfig, build_model

    cfg = SiPEConfig(family="roberta", injection="input", n_deprels=37, prior_parts="dr_nt",
                     vocab_size=len(WORDS), d_model=16, n_layers=1, n_heads=2, pad_token_id=0,
                     max_position_embeddings=64)
    build_model(cfg).save_pretrained(tmp_path / "dr")
    r = finetune_glue(lambda n: load_classifier(tmp_path / "dr", n), mlm_tok, ["rte"], LabelledChain(),
                      shared_data, seeds=(0,), epochs=2, max_train=8, max_eval=8, batch_size=4,
                      max_length=48, progress=False)
    assert r["tasks"]["rte"]["tagged"] and len(r["tasks"]["rte"]["runs"][0]["history"]) == 2


def test_a_decoder_reads_its_sentences_framed_as_in_pretraining(tok, mlm_tok):
    """A tokenizer that adds no special tokens (structpe's BPE) frames <s> A </s> B </s> for our
    decoder, the tags stay on each sentence's words; one that adds its own is left as it is."""
    from structpe.eval.glue.features import frame_sentences

    framed = frame_sentences(tok)
    ex = [GlueExample(("the dogs run", "cat sleep"), 1)]
    f = featurize(ex, framed, ChainParser())
    tokens = [WORDS[i] for i in f.input_ids[0]]
    assert tokens == ["[BOS]", "the", "dog", "##s", "run", "[SEP]", "cat", "sleep", "[SEP]"]
    plain = featurize(ex, tok, ChainParser())
    assert [t for t in f.terminal_ids[0] if t != -100] == [t for t in plain.terminal_ids[0] if t != -100]
    assert f.terminal_ids[0][0] == f.terminal_ids[0][5] == -100  # no tags on the frame
    assert tok("the dogs")["input_ids"] == [VOCAB["the"], VOCAB["dog"], VOCAB["##s"]]  # a copy is framed
    assert frame_sentences(mlm_tok) is mlm_tok


@pytest.mark.data
def test_finetune_our_decoder_with_tags(shared_data, tok, tmp_path):
    """The Transformer-XL under its GLUE head (last real token) fine-tunes like the encoders."""
    from structpe.eval.glue.finetune import load_classifier
    from structpe.models import SiPEConfig, build_model

    cfg = SiPEConfig(family="txl", injection="position", vocab_size=len(WORDS), d_model=16, n_layers=1,
                     n_heads=2, d_ff=32, pad_token_id=0)
    build_model(cfg).save_pretrained(tmp_path / "txl")
    r = finetune_glue(lambda n: load_classifier(tmp_path / "txl", n), tok, ["rte", "stsb"], ChainParser(),
                      shared_data, seeds=(0,), epochs=1, max_train=8, max_eval=8, batch_size=4,
                      max_length=48, progress=False)
    assert r["tasks"]["rte"]["tagged"] and -1 <= r["macro"] <= 1

"""The BiLSTM hexatagger (``encoder: bilstm``): frozen pretrained + trainable subword vectors,
packed sequences, word2vec subword vectors, and the recipe end to end on a few sentences."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import yaml

from structpe.cli import main
from structpe.parser.model import HexataggerConfig, HexataggerModel
from structpe.parser.recipe import ParserTrainConfig
from structpe.parser.tokenizer import train_tokenizer
from structpe.parser.word_vectors import train_subword_vectors
from structpe.syntax.hexatags import IGNORE_INDEX

TEXTS = [
    "A small fox jumps over the old dog .",
    "He reads long books at night .",
    "We saw birds with nests and fish with fins .",
] * 20


def lstm_config(**kw) -> HexataggerConfig:
    base = dict(vocab_size=300, d_model=32, n_layers=2, d_emb=16, dropout=0.0, encoder="bilstm")
    base.update(kw)
    return HexataggerConfig(**base)


def test_training_moves_only_the_trainable_vectors_of_seen_subwords():
    torch.manual_seed(0)
    model = HexataggerModel(lstm_config(deprels=["a", "root"], pair_nonterminal=True))
    enc = model.encoder
    with torch.no_grad():
        enc.pretrained_emb.weight.normal_()
    frozen = enc.pretrained_emb.weight.clone()
    ids = torch.randint(5, 100, (6, 10))  # subwords 100.. never occur
    mask = torch.ones_like(ids)
    mask[0, 7:] = 0
    terms, nts = torch.randint(0, 2, (6, 10)), torch.randint(0, 5, (6, 10))
    labels = torch.randint(0, 2, (6, 10))
    for t in (terms, nts, labels):
        t[0, 7:] = IGNORE_INDEX
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    first = None
    for _ in range(20):
        loss = model(ids, mask, terms, nts, labels).loss
        first = first if first is not None else float(loss.detach())
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert float(model(ids, mask, terms, nts, labels).loss.detach()) < 0.7 * first
    assert torch.equal(enc.pretrained_emb.weight, frozen)  # frozen table untouched
    assert enc.tok_emb.weight[5:100].abs().sum() > 0  # seen subwords learned a correction
    assert enc.tok_emb.weight[100:].abs().sum() == 0  # unseen ones keep their pretrained vector


def test_packing_makes_scores_independent_of_padding():
    torch.manual_seed(0)
    model = HexataggerModel(lstm_config()).eval()
    with torch.no_grad():
        model.encoder.pretrained_emb.weight.normal_()
    ids = torch.randint(5, 300, (1, 7))
    padded = torch.cat([ids, torch.randint(5, 300, (1, 5))], 1)  # junk after the end
    mask = torch.cat([torch.ones(1, 7), torch.zeros(1, 5)], 1).long()
    a = model(ids).nonterminal_logits
    b = model(padded, mask).nonterminal_logits[:, :7]
    torch.testing.assert_close(a[:, :6], b[:, :6], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(model(ids).terminal_logits, model(padded, mask).terminal_logits[:, :7])


def test_cpu_inference_by_direction_equals_the_packed_path():
    """No-grad CPU inference runs each direction on padded inputs (oneDNN's LSTM kernel); every
    head, the pair non-terminal head at each sentence's end included, must match packed sequences."""
    torch.manual_seed(0)
    model = HexataggerModel(lstm_config(n_layers=2, pair_nonterminal=True, deprels=["x", "root"])).eval()
    with torch.no_grad():
        model.encoder.pretrained_emb.weight.normal_()
    lengths = [9, 1, 6, 9, 3]
    ids = torch.randint(5, 300, (len(lengths), 9))
    mask = (torch.arange(9)[None] < torch.tensor(lengths)[:, None]).long()
    packed = model(ids, mask)  # grad enabled: the packed path
    with torch.no_grad():
        fast = model(ids, mask)
    valid = mask.bool()
    for name in ("terminal_logits", "nonterminal_logits", "deprel_logits"):
        a, b = getattr(packed, name)[valid], getattr(fast, name)[valid]
        torch.testing.assert_close(b, a.detach(), atol=1e-5, rtol=1e-5)
    states = model.encoder(ids, mask).detach()
    with torch.no_grad():
        assert torch.equal(model.encoder(ids, mask)[~valid], torch.zeros_like(states[~valid]))


def test_bilstm_save_load_round_trip(tmp_path):
    torch.manual_seed(0)
    model = HexataggerModel(lstm_config(deprels=["x", "root"])).eval()
    with torch.no_grad():
        model.encoder.pretrained_emb.weight.normal_()
    model.save_pretrained(tmp_path)
    loaded = HexataggerModel.from_pretrained(tmp_path)
    assert loaded.config.encoder == "bilstm"
    ids = torch.randint(5, 300, (2, 9))
    torch.testing.assert_close(model(ids).deprel_logits, loaded(ids).deprel_logits)


def test_int8_quantizes_the_lstm_and_keeps_its_scores():
    from torch.ao.nn.quantized.dynamic import LSTM as QuantizedLSTM

    from structpe.parser.hexatagger import quantize_for_cpu

    torch.manual_seed(0)
    model = HexataggerModel(lstm_config(d_model=64, d_emb=32)).eval()
    with torch.no_grad():
        model.encoder.pretrained_emb.weight.normal_()
    ids = torch.randint(5, 300, (4, 12))
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0
    ref = model(ids, mask).nonterminal_logits
    q = quantize_for_cpu(model, "int8")
    assert isinstance(q.encoder.lstm, QuantizedLSTM)
    torch.testing.assert_close(q(ids, mask).nonterminal_logits, ref, atol=0.05, rtol=0.0)


def test_bf16_inference_keeps_the_scores_and_leaves_the_model_alone():
    from structpe.parser.hexatagger import quantize_for_cpu

    torch.manual_seed(0)
    model = HexataggerModel(lstm_config(d_model=64, d_emb=32, pair_nonterminal=True)).eval()
    with torch.no_grad():
        model.encoder.pretrained_emb.weight.normal_()
    ids = torch.randint(5, 300, (4, 12))
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0
    with torch.no_grad():
        ref = model(ids, mask).nonterminal_logits
        b = quantize_for_cpu(model, "bf16")
        got = b(ids, mask).nonterminal_logits
    assert next(b.parameters()).dtype == torch.bfloat16
    assert next(model.parameters()).dtype == torch.float32  # a copy: the fp32 model is unchanged
    torch.testing.assert_close(got.float()[mask.bool()], ref[mask.bool()], atol=0.05, rtol=0.0)


def test_config_checks():
    with pytest.raises(ValueError, match="encoder must be one of"):
        HexataggerConfig(vocab_size=10, encoder="gru")
    with pytest.raises(ValueError, match="even d_model"):
        HexataggerConfig(vocab_size=10, d_model=33, n_heads=1, encoder="bilstm")
    assert ParserTrainConfig.from_yaml("bilstm").model.encoder == "bilstm"


def test_subword_vectors_align_with_the_vocabulary():
    tok = train_tokenizer(iter(TEXTS), vocab_size=300, min_frequency=1)
    table, stats = train_subword_vectors(tok, TEXTS, dim=8, epochs=2, min_count=1)
    vocab = tok.get_vocab()
    assert table.shape == (tok.get_vocab_size(), 8) and table.dtype == np.float32
    assert not table[vocab["[PAD]"]].any() and not table[vocab["[CLS]"]].any()  # never in the text
    assert table[vocab["fox"]].any() and table[vocab["."]].any()
    assert stats["vector_sentences"] == len(TEXTS)
    nonzero = table[table.any(-1)]
    assert abs(float(nonzero.std()) - 1.0) < 1e-3


@pytest.mark.data
def test_bilstm_recipe_trains_with_vectors(tmp_path, shared_data, capsys):
    recipe = {
        "model": {"encoder": "bilstm", "d_model": 32, "n_layers": 1, "d_emb": 16, "dropout": 0.0},
        "tokenizer": {"vocab_size": 600, "corpora": []},
        "vectors": {"enabled": True, "epochs": 1, "min_count": 1},
        "data": {"root": str(shared_data), "train": ["ewt"], "limit_train": 48, "limit_dev": 16},
        "optim": {"max_steps": 6, "warmup_steps": 2, "batch_tokens": 1024, "eval_every": 3},
        "threads": 1,
    }
    cfg = tmp_path / "recipe.yaml"
    cfg.write_text(yaml.safe_dump(recipe))
    out = tmp_path / "model"
    assert main(["parser", "train", "--config", str(cfg), "--output", str(out), "--no-progress"]) == 0
    summary = json.loads((out / "train_summary.json").read_text())
    assert summary["steps"] == 6 and {"word_vectors", "training"} <= set(summary["stage_seconds"])
    loaded = HexataggerModel.from_pretrained(out)
    assert loaded.encoder.pretrained_emb.weight.abs().sum() > 0  # the vectors were saved
    recipe["model"]["encoder"] = "transformer"
    recipe["model"]["n_heads"] = 2
    cfg.write_text(yaml.safe_dump(recipe))
    argv = ["parser", "train", "--config", str(cfg), "--output", str(tmp_path / "m2"), "--no-progress"]
    assert main(argv) != 0
    assert "vectors.enabled needs model.encoder: bilstm" in capsys.readouterr().err
    assert not (tmp_path / "m2").exists()  # refused before any output

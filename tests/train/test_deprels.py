"""DEPREL ids end to end: the label inventory, ids aligned like the tags, and a tiny pre-training run
of every DEPREL recipe (SiPE App. E, table 12)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from structpe.parser.registry import get_parser
from structpe.syntax.conllu_io import read_conllu
from structpe.syntax.deprels import (
    CLEARNLP_TO_UD,
    N_DEPRELS,
    UD_RELATIONS,
    deprel_ids,
    spread_word_labels,
    universal_relation,
)
from structpe.train.collators import collator_for
from structpe.train.prepare import load_prepared, prepare
from structpe.train.prepare_settings import PrepareSettings
from structpe.train.pretrain import pretrain
from structpe.train.recipe import list_recipes
from structpe.train.tokenizer import load_tokenizer

IGN = -100
DEPREL_RECIPES = [
    n for n in list_recipes() if n.startswith("roberta/input_") and n.endswith(("dr-tiny", "dnt-tiny"))
]


def test_inventory_covers_spacy_and_ud_labels() -> None:
    spacy_labels = [  # en_core_web_sm's parser labels
        "ROOT", "acl", "acomp", "advcl", "advmod", "agent", "amod", "appos", "attr", "aux", "auxpass", "case",
        "cc", "ccomp", "compound", "conj", "csubj", "csubjpass", "dative", "dep", "det", "dobj", "expl",
        "intj", "mark", "meta", "neg", "nmod", "npadvmod", "nsubj", "nsubjpass", "nummod", "oprd",
        "parataxis", "pcomp", "pobj", "poss", "preconj", "predet", "prep", "prt", "punct", "quantmod",
        "relcl", "xcomp",
    ]
    assert all(universal_relation(x) in UD_RELATIONS for x in spacy_labels)
    assert {v.split(":")[0] for v in CLEARNLP_TO_UD.values()} <= set(UD_RELATIONS) and N_DEPRELS == 37
    assert universal_relation("nmod:poss") == "nmod" and universal_relation("dobj") == "obj"
    ids, unknown = deprel_ids(["nsubj", "obl:tmod", "nonsense", "ROOT"])
    assert [UD_RELATIONS[i] for i in ids] == ["nsubj", "obl", "dep", "root"] and unknown == 1
    assert spread_word_labels([IGN, 0, IGN, 1, 0, IGN], [7, 8, 9]) == [IGN, 7, IGN, 8, 9, IGN]
    assert spread_word_labels([1, IGN], [7, 8], start=1) == [8, IGN]
    with pytest.raises(ValueError, match="tagged positions"):
        spread_word_labels([0, 0], [7])


@pytest.fixture(scope="module")
def wp_gold(ewt_slices: dict, wordpiece_tokenizer: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("deprel") / "wp-gold"
    return prepare({k: [v] for k, v in ewt_slices.items()}, wordpiece_tokenizer, out,
                   settings=PrepareSettings(parser="gold", seq_len=64))


def test_gold_deprel_ids_aligned_like_the_tags(gold_dataset: Path, ewt_slices: dict) -> None:
    dd, meta = load_prepared(gold_dataset)
    assert meta["deprel_inventory"]["labels"] == list(UD_RELATIONS)
    stats = meta["stats"]["train"]
    assert stats["deprel_ids"] is True and stats["deprel_unknown_labels"] == 0
    got = []
    for row in dd["train"]:
        t, d = row["terminal_ids"], row["deprel_ids"]
        assert len(d) == len(t) and [x == IGN for x in d] == [x == IGN for x in t]
        got += [x for x in d if x != IGN]
    assert all(0 <= x < N_DEPRELS for x in got)
    gold = [universal_relation(r) for s in read_conllu(ewt_slices["train"]) for r in s.deprels]
    # every tagged word, in order, its own label; in the raw text form a word sharing its first
    # token with the previous word (the `"` of `."`) has neither tag nor label
    assert len(got) == len(gold) - stats["unaligned_words"]
    rest = iter(gold)
    assert all(any(UD_RELATIONS[x] == g for g in rest) for x in got)  # an in-order subsequence


def test_spacy_labels_are_mapped(bpe_tokenizer: Path, tmp_path: Path) -> None:
    text = tmp_path / "prose.txt"
    text.write_text("The old man saw the boat.\n\nShe gave him a book.\n")
    settings = PrepareSettings(parser="spacy", input_format="text", seq_len=64)
    dd, _ = load_prepared(prepare({"train": [text], "validation": [text]}, bpe_tokenizer, tmp_path / "ds",
                                  settings=settings))
    labels = [UD_RELATIONS[x] for row in dd["train"] for x in row["deprel_ids"] if x != IGN]
    assert len(labels) == 13  # 7 + 6 words -- one label per word
    parsed = get_parser("spacy").parse_text(["The old man saw the boat.", "She gave him a book."])
    spacy_labels = [x for sent in parsed for x in sent.deprels]
    assert "dobj" in spacy_labels and "ROOT" in spacy_labels  # ClearNLP labels in, UD ids out
    assert labels == [universal_relation(x) for x in spacy_labels]


def test_collators_pass_deprel_ids(wp_gold: Path, wordpiece_tokenizer: Path) -> None:
    dd, _ = load_prepared(wp_gold)
    rows = [dd["train"][i] for i in range(3)]
    tok = load_tokenizer(wordpiece_tokenizer)
    for objective in ("causal", "mlm"):
        batch = collator_for(objective, tok, seed=0)(rows)
        assert batch["deprel_ids"].shape == batch["terminal_ids"].shape
        assert ((batch["deprel_ids"] == IGN) == (batch["terminal_ids"] == IGN)).all()


@pytest.mark.parametrize("name", DEPREL_RECIPES)
def test_deprel_recipe_trains(name: str, wp_gold: Path, tmp_path: Path) -> None:
    small = ["model.d_model=32", "model.n_layers=1", "model.n_heads=2", "model.d_ff=64",
             "model.max_position_embeddings=80", "train.seq_len=64", "max_steps=2", "eval_every=2",
             "eval_batches=1", "batch_size=4", "warmup=1", "log_every=1", "progress=false"]
    run = pretrain(name, [f"train.dataset={wp_gold}", f"train.output_dir={tmp_path / 'run'}", *small])
    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["final_eval"]["eval_terminal_loss"] > 0


def test_deprel_model_refuses_data_without_deprels(wp_gold: Path, tmp_path: Path) -> None:
    from datasets import load_from_disk

    from structpe.errors import PreparedDataError

    stripped = tmp_path / "no-deprels"
    load_from_disk(str(wp_gold)).remove_columns("deprel_ids").save_to_disk(str(stripped))
    (stripped / "structpe_prepare.json").write_text((wp_gold / "structpe_prepare.json").read_text())
    with pytest.raises(PreparedDataError, match="no deprel_ids"):
        pretrain("roberta/input_dr-tiny", [f"train.dataset={stripped}", f"train.output_dir={tmp_path / 'r'}",
                                           "model.max_position_embeddings=80", "train.seq_len=64"])


@pytest.mark.parametrize("n_deprels", [0, N_DEPRELS], ids=["direction", "deprel"])
def test_lis_tree_recipe_trains(n_deprels: int, gold_dataset: Path, tmp_path: Path) -> None:
    """The LIS tree-address decoder through the Trainer, with arc directions or DEPREL ids as labels."""
    small = ["model.d_model=32", "model.n_layers=1", "model.n_heads=2", "model.d_ff=64", "train.seq_len=64",
             "max_steps=2", "eval_every=2", "eval_batches=1", "batch_size=4", "warmup=1", "log_every=1",
             "progress=false", f"model.n_deprels={n_deprels}"]
    data = [f"train.dataset={gold_dataset}", f"train.output_dir={tmp_path / 'r'}"]
    run = pretrain("txl/lis_tree-tiny", [*data, *small])
    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["final_eval"]["eval_terminal_loss"] > 0

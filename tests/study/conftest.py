"""Fixtures for the study tests: a synthetic treebank (no shared data), its tokenizer and prepared
data, tagged test sentences, and a tiny two-recipe study spec over them."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from structpe.study.data import StudyData
from structpe.train.prepare import prepare
from structpe.train.prepare_settings import PrepareSettings
from structpe.train.tokenizer import train_tokenizer

NOUNS = ["dog", "cat", "bird", "child", "teacher", "farmer", "horse", "doctor"]
VERBS = ["sees", "likes", "finds", "follows", "helps", "calls"]
ADJS = ["old", "small", "happy", "quiet"]

SPEC = """\
name: tiny-study
baseline: none
seeds: [1, 2]
recipes:
  none: {recipe: txl/none}
  position: {recipe: txl/position}
dataset: {corpus: ud-ewt, parser: gold, test_sentences: 12, seq_len: 64}
evaluations:
  ppl: {likelihoods: [conditional, joint], sentences: 12}
profiles:
  test:
    recipe_profile: tiny
    overrides: [model.d_model=32, model.n_layers=2, model.n_heads=2, model.d_ff=64, train.max_steps=6,
                train.eval_every=3, train.batch_size=4, train.seq_len=64, train.eval_batches=2,
                train.log_every=1, train.warmup=2, train.lr=3.0e-3]
claims:
  - id: ppl
    claim: PP-SiPE lowers perplexity
    recipe: position
    metrics: [ppl.joint.word_ppl]
    show: [ppl.conditional.word_ppl]
    better: lower
    paper: {baseline: 18.63, recipe: 16.95, source: Table 2}
"""


def _sentence(rng: random.Random) -> list[tuple[str, int, str]]:
    """'the (adj) N V the N .' as (word, head, deprel) rows, heads 1-based, 0 = root."""
    adj = rng.random() < 0.5
    subj = ["the", *([rng.choice(ADJS)] if adj else []), rng.choice(NOUNS)]
    n = len(subj)
    rows = [("the", n, "det")] + ([(subj[1], n, "amod")] if adj else []) + [(subj[-1], n + 1, "nsubj")]
    v = n + 1
    rows += [
        (rng.choice(VERBS), 0, "root"),
        ("the", v + 2, "det"),
        (rng.choice(NOUNS), v, "obj"),
        (".", v, "punct"),
    ]
    return rows


def write_conllu(path: Path, n: int, seed: int) -> Path:
    rng = random.Random(seed)
    blocks = []
    for i in range(n):
        lines = [f"# sent_id = s{seed}-{i}"]
        for j, (w, h, d) in enumerate(_sentence(rng), start=1):
            lines.append(f"{j}\t{w}\t{w}\t_\t_\t_\t{h}\t{d}\t_\t_")
        blocks.append("\n".join(lines))
    path.write_text("\n\n".join(blocks) + "\n\n")
    return path


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory: pytest.TempPathFactory) -> StudyData:
    from structpe.parser.registry import get_parser

    d = tmp_path_factory.mktemp("study-data")
    train = write_conllu(d / "train.conllu", 160, 1)
    valid = write_conllu(d / "valid.conllu", 30, 2)
    test = write_conllu(d / "test.conllu", 12, 3)
    tok = d / "tok"
    train_tokenizer([train], tok, kind="bpe", vocab_size=300, show_progress=False)
    settings = PrepareSettings(parser="gold", seq_len=64)
    ds = prepare({"train": [train], "validation": [valid]}, tok, d / "prepared", settings=settings)
    sents = list(get_parser("gold").parse_conllu(test))
    return StudyData(
        tokenizer_dir=tok,
        dataset_dir=ds,
        fingerprint="synthetic-1",
        test_sentences=sents,
        train_fingerprint="synthetic-train-1",
    )


@pytest.fixture
def tiny_spec(tmp_path: Path) -> Path:
    p = tmp_path / "tiny-study.yaml"
    p.write_text(SPEC)
    return p


@pytest.fixture
def tiny_spec_text() -> str:
    return SPEC

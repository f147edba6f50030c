"""One text form from training to evaluation: Brown detokenized with its words aligned to the
text, tokenizers recording their form, and benchmark sentences without unseen token patterns."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import pytest

from structpe.train.corpus import detokenize_words, iter_tokenizer_text, normalize_words
from structpe.train.tokenizer import load_tokenizer, text_form_warning, train_tokenizer


@pytest.mark.parametrize(
    ("brown", "raw"),
    [
        ("`` Only a relative handful '' , the jury said .", '"Only a relative handful", the jury said.'),
        # a quotation closed in this sentence but opened in the previous one keeps its direction
        ("reports was received '' , the jury said .", 'reports was received", the jury said.'),
        ("`` Stop ! ! ''", '"Stop!"'),  # Brown doubles a final ? or ! (here inside the quote)
        ("made statements admitting this '' ? ?", 'made statements admitting this"?'),
        ("won by Ivan Allen Jr. .", "won by Ivan Allen Jr."),  # Brown's doubled period
        ("the jury recommended that : ( 1 )", "the jury recommended that: (1)"),
        ("I do n't know what it 's worth ; $ 5 or 50 % ?", "I don't know what it's worth; $5 or 50%?"),
        ("he said -- and left !", "he said -- and left!"),
    ],
)
def test_detokenize_brown_quirks(brown: str, raw: str) -> None:
    words, text, spans = detokenize_words(brown.split())
    assert text == raw
    assert [text[a:b] for a, b in spans] == words  # the parser's words, located in the text
    assert all(spans[i][1] <= spans[i + 1][0] for i in range(len(spans) - 1))


def test_normalize_words_only_touches_quotes_and_the_doubled_period() -> None:
    assert normalize_words(["``", "Hi", "''", "Mr.", "."]) == ['"', "Hi", '"', "Mr."]
    assert normalize_words(["It", "ends", "."]) == ["It", "ends", "."]
    assert normalize_words(["."]) == ["."]
    assert normalize_words(["Why", "?", "?"]) == ["Why", "?"]
    assert normalize_words(["Why", "?", "''", "?"]) == ["Why", "?", '"']


def test_alignment_on_brown(shared_data: Path) -> None:
    """Every Brown sentence of a slice: words found in order in the text; no sentence falls back
    to space-joining; sentence-final periods glued to their word."""
    src = shared_data / "corpus" / "brown" / "brown.train.txt.gz"
    with gzip.open(src, "rt", encoding="utf-8") as fh:
        lines = [next(fh).split() for _ in range(3000)]
    glued = 0
    for line in lines:
        words, text, spans = detokenize_words(line)
        assert [text[a:b] for a, b in spans] == words
        assert len(words) in (len(line), len(line) - 1)
        glued += text.endswith(".") and not text.endswith(" .")
        assert " ," not in text and "``" not in text and "''" not in text
    assert glued > 2000


def _brown_slice(shared_data: Path, dst: Path, n: int) -> Path:
    with gzip.open(shared_data / "corpus" / "brown" / "brown.train.txt.gz", "rt", encoding="utf-8") as fh:
        dst.write_text("".join(next(fh) for _ in range(n)))
    return dst


def _benchmark_sample(shared_data: Path, n: int = 300) -> list[str]:
    from structpe.eval.blimp import load_blimp
    from structpe.eval.syntaxgym.suites import load_suites, sentence_and_spans

    rng = random.Random(0)
    blimp = [s for p in load_blimp(shared_data / "blimp", limit=10) for s in (p.good, p.bad)]
    sg = [
        sentence_and_spans(regions, "raw")[0]
        for suite in load_suites(shared_data / "syntaxgym")
        for item in suite.items[:3]
        for regions in item.conditions.values()
    ]
    return rng.sample(blimp, n) + rng.sample(sg, n)


@pytest.mark.parametrize("text_form", ["raw", "tokenized"])
def test_benchmark_sentences_have_no_unseen_patterns(
    shared_data: Path, tmp_path: Path, text_form: str
) -> None:
    """Tokens of BLiMP / SyntaxGym sentences all occur in the tokenized training text (raw form);
    the old tokenized form fails exactly this check."""
    corpus = _brown_slice(shared_data, tmp_path / "brown.txt", 20000)
    tok_dir = tmp_path / "tok"
    train_tokenizer([corpus], tok_dir, kind="bpe", vocab_size=2000, text_form=text_form, show_progress=False)
    tok = load_tokenizer(tok_dir)
    seen = {i for line in iter_tokenizer_text([corpus], "lines", text_form) for i in tok(line).input_ids}
    unseen = {}
    for sentence in _benchmark_sample(shared_data):
        for i in tok(sentence).input_ids:
            if i not in seen:
                unseen.setdefault(tok.convert_ids_to_tokens(i), sentence)
    if text_form == "raw":
        assert unseen == {}
        assert text_form_warning(tok) is None
    else:
        # "noticed?": a question mark glued to its word is never seen in " ?" training text (a bare
        # period is, after abbreviations such as "Mr.", so it does not show up here)
        assert "?" in unseen
        assert "tokenized" in text_form_warning(tok)

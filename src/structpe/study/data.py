"""The study's data stage: tokenizer, hexatagged training data and parsed test sentences.

Every step is the library call the quickstart and ``structpe prepare`` use (``corpus_splits``,
``train_tokenizer``, ``prepare``, the quickstart's split merge), so a change to that data path
(e.g. the text form Brown is trained on) reaches the study without edits here. All steps are
cached by content: a second run of the same spec reuses the prepared folders.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from structpe.study.spec import DatasetSpec, stable_hash


@dataclass
class StudyData:
    tokenizer_dir: Path
    dataset_dir: Path
    fingerprint: str  # prepared data + test sentences
    test_sentences: list[Any]  # TaggedSentence, parsed once with the study's parser
    train_fingerprint: str  # the prepared train/validation data alone (owns the trained models)


def read_test_units(path: Path, fmt: str, limit: int) -> list[str]:
    """The first ``limit`` units (sentences or paragraphs) of a corpus file, in file order."""
    from structpe.train.corpus import iter_units

    out = []
    for unit in iter_units(path, fmt):
        out.append(unit)
        if len(out) >= limit:
            break
    return out


def parse_units(parser: Any, units: list[str], fmt: str, limit: int) -> list[Any]:
    """Tagged test sentences: ``lines`` units detokenized (raw text in ``meta``); ``text`` paragraphs
    cut by the corpus's sentence rule (``split_sentences``, as in training), each sentence scored as
    the detokenized text of its words, the form the prepare step trains the model on."""
    if fmt == "lines":  # Brown's tokenized lines: scored in the raw form the model was trained on
        from structpe.quickstart import parse_token_lines

        return parse_token_lines(parser, [u for u in units if u.split()])[:limit]
    from structpe.train.corpus import detokenize_words, split_sentences

    words = [s for para in split_sentences(units) for s in para][:limit]
    sents = parser.parse_words(words) if words else []
    for s in sents:
        s.meta = {**(getattr(s, "meta", None) or {}), "text": detokenize_words(s.words)[1]}
    return sents


def prepare_study_data(
    ds: DatasetSpec, out: Path, data_dir: str | None = None, *, parser: Any, progress: bool = True
) -> StudyData:
    """Prepare (or reuse) the tokenizer, the train/validation data and the test sentences."""
    from structpe.data.paths import data_root
    from structpe.quickstart import _merge_prepared
    from structpe.train.prepare import PrepareSettings, corpus_splits, load_prepared, prepare
    from structpe.train.tokenizer import train_tokenizer

    root = data_root(data_dir)
    splits, fmt = corpus_splits(ds.corpus, root, splits=("train", "validation", "test"))
    tok_dir = out / "tokenizer"
    if not (tok_dir / "tokenizer.json").is_file():
        train_tokenizer(
            splits["train"],
            tok_dir,
            kind=ds.tokenizer,
            vocab_size=ds.vocab_size,
            input_format=fmt,
            show_progress=progress,
        )

    def settings(n: int) -> PrepareSettings:
        return PrepareSettings(parser=ds.parser, input_format=fmt, seq_len=ds.seq_len, max_units=n)

    run = {"num_proc": ds.num_proc, "shard_units": ds.shard_units}  # how, not what: same output
    train = prepare(
        {"train": splits["train"]}, tok_dir, out / "train", settings=settings(ds.train_sentences), **run
    )
    valid = prepare(
        {"validation": splits["validation"]},
        tok_dir,
        out / "validation",
        settings=settings(ds.valid_sentences),
        **run,
    )
    merged = _merge_prepared(train, valid, out / "merged")
    _, meta = load_prepared(merged)
    units = read_test_units(splits["test"][0], fmt, ds.test_sentences)
    test = parse_units(parser, units, fmt, ds.test_sentences)
    test_key = stable_hash([[t.to_dict(), (t.meta or {}).get("text")] for t in test])  # + the scored text
    fingerprint = stable_hash([meta["fingerprint"], test_key])
    return StudyData(tok_dir, merged, fingerprint, test, train_fingerprint=meta["fingerprint"])

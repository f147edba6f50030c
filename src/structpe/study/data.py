"""The study's data stage: tokenizer, hexatagged training data and parsed test sentences.

The one data pipeline of the package: every study profile, the quickstart's included, prepares its
data here. Every step is the library call ``structpe tokenizer train`` and ``structpe prepare``
use (``corpus_splits``, ``train_tokenizer``, ``prepare``), so a change to that data path (e.g. the
text form Brown is trained on) reaches the studies without edits here. All steps are cached by
content: a second run of the same spec reuses the prepared folders.

The tag controls (recipes with ``tags: prefix`` or ``tags: shuffled``; structpe.parser.tag_controls)
train on their own variant of the train/validation data, prepared once per study beside the
parse's (``train-<tags>``, ``validation-<tags>``, ``merged-<tags>``) by the same ``prepare`` call
with ``PrepareSettings.tags`` set: atomic like every prepared folder, and the long prefix parses
are saved in shards as they finish, so a killed preparation resumes where it stopped.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from structpe.errors import StructpeError
from structpe.io import atomic_write_text, read_json, replace_folder, stable_hash, writing
from structpe.study.spec import DatasetSpec
from structpe.study.spec_checks import dataset_prepare_settings


@dataclass
class TagVariant:
    """The training data of one tag control (``prefix`` / ``shuffled``)."""

    dataset_dir: Path
    train_fingerprint: str
    pool_file: Path | None = None  # shuffled: the training parses test sentences draw from


@dataclass
class StudyData:
    tokenizer_dir: Path
    dataset_dir: Path
    fingerprint: str  # prepared data + test sentences
    test_sentences: list[Any]  # TaggedSentence, parsed once with the study's parser (read_test_units)
    train_fingerprint: str  # the prepared train/validation data alone (owns the trained models)
    variants: dict[str, TagVariant] = field(default_factory=dict)  # tag source -> its training data

    def training(self, tags: str) -> TagVariant:
        """The training data of a recipe whose tags come from ``tags`` (``parse``: the study's)."""
        if tags == "parse":
            return TagVariant(self.dataset_dir, self.train_fingerprint)
        if tags not in self.variants:
            raise KeyError(f"the study data has no {tags!r} tag variant (prepared: {sorted(self.variants)})")
        return self.variants[tags]


def read_test_units(path: Path, fmt: str, n: int, seed: int = 0) -> list[str]:
    """``n`` units (sentences or paragraphs) of a test file: a seeded sample stratified by genre.

    Strata: the genre of each document when the corpus folder has a ``manifest.json.gz`` that
    lists the test split's documents with a ``category`` in file order (Brown: 13 genres in its
    test split; documents end at an empty line), else one stratum (the whole file). Each stratum
    gets its share of ``n`` in proportion to its units (largest remainder); its units are drawn
    with ``random.Random(seed)`` without replacement. The order interleaves the strata by draw rank
    (unit j of a stratum of m drawn sits at (j + 0.5) / m), so every leading slice of the sample
    (the leakage audit's first sentences) is spread over the genres too. All units when ``n``
    covers them.
    """
    import random

    from structpe.io import open_text

    units: list[str] = []
    doc_of: list[int] = []
    doc = 0
    with open_text(path, "corpus file") as fh:
        para: list[str] = []
        for line in fh:
            line = line.strip()
            if line and fmt == "lines":
                units.append(line)
                doc_of.append(doc)
            elif line:
                para.append(line)
            elif fmt == "text" and para:
                units.append(" ".join(para))
                doc_of.append(doc)
                para = []
            elif fmt == "lines" and doc_of and doc_of[-1] == doc:
                doc += 1  # an empty line ends a document
        if para:
            units.append(" ".join(para))
            doc_of.append(doc)
    genres = genres_of_test_documents(path) if fmt == "lines" else None
    if genres is not None and len(genres) != len(set(doc_of)):
        raise StructpeError(
            f"{path}: the manifest lists {len(genres)} test documents, the file holds {len(set(doc_of))}"
        )
    stratum = [genres[d] for d in doc_of] if genres is not None else [""] * len(units)
    if n >= len(units):
        return units
    groups: dict[str, list[int]] = {}
    for i, g in enumerate(stratum):
        groups.setdefault(g, []).append(i)
    quota = {g: n * len(ix) / len(units) for g, ix in groups.items()}
    share = {g: int(q) for g, q in quota.items()}
    for g in sorted(groups, key=lambda g: (share[g] - quota[g], g))[: n - sum(share.values())]:
        share[g] += 1  # largest remainder
    rng = random.Random(seed)
    keyed = []
    for g in sorted(groups):
        drawn = rng.sample(groups[g], share[g])
        keyed.extend(((j + 0.5) / len(drawn), g, i) for j, i in enumerate(drawn))
    return [units[i] for _, _, i in sorted(keyed)]


def genres_of_test_documents(path: Path) -> list[str] | None:
    """The genre of each test document, in file order, from the corpus's manifest (None: none)."""
    import gzip
    import json

    manifest = path.parent / "manifest.json.gz"
    if not manifest.is_file():
        return None
    with gzip.open(manifest, "rt", encoding="utf-8") as fh:
        rows = json.load(fh)
    genres = [r["category"] for r in rows if r.get("split") == "test" and "category" in r]
    return genres or None


def parse_token_lines(parser: Any, lines: Sequence[str]) -> list[Any]:
    """Whitespace-tokenized lines (Brown's form) parsed and scored in raw text form: each sentence
    keeps the parser's words and carries its detokenized text in ``meta["text"]``, the form the
    tokenizer and the model were trained on (scoring ``glass .`` would inflate perplexity)."""
    from structpe.train.corpus import detokenize_words

    detok = [detokenize_words(line.split()) for line in lines]
    sents = parser.parse_words([d[0] for d in detok])
    for s, (_, text, _) in zip(sents, detok, strict=True):
        s.meta = {**(getattr(s, "meta", None) or {}), "text": text}
    return sents


def parse_units(
    parser: Any, units: list[str], fmt: str, limit: int, max_words: int | None = None
) -> list[Any]:
    """Tagged test sentences: ``lines`` units detokenized (raw text in ``meta``); ``text`` paragraphs
    cut by the corpus's sentence rule (``split_sentences`` with the training data's ``max_words``),
    each sentence scored as the detokenized text of its words, the form the prepare step trains the
    model on."""
    if fmt == "lines":  # Brown's tokenized lines: scored in the raw form the model was trained on
        return parse_token_lines(parser, [u for u in units if u.split()])[:limit]
    from structpe.syntax.sentences import split_sentences
    from structpe.train.corpus import detokenize_words

    words = [s for para in split_sentences(units, max_words) for s in para][:limit]
    sents = parser.parse_words(words) if words else []
    for s in sents:
        s.meta = {**(getattr(s, "meta", None) or {}), "text": detokenize_words(s.words)[1]}
    return sents


def merge_prepared(train: Path, valid: Path, dest: Path) -> Path:
    """One dataset folder with both splits (train and validation were prepared with different caps)."""
    from datasets import DatasetDict

    from structpe.train.prepare import load_prepared
    from structpe.train.prepare_settings import METADATA_FILE

    dtrain, meta = load_prepared(train, splits=("train",))
    dvalid, vmeta = load_prepared(valid, splits=("validation",))
    key = f"{meta['fingerprint']}+{vmeta['fingerprint']}"
    if (dest / METADATA_FILE).is_file() and read_json(dest / METADATA_FILE).get("fingerprint") == key:
        return dest
    merged = DatasetDict({"train": dtrain["train"], "validation": dvalid["validation"]})
    meta = {
        **meta,
        "fingerprint": key,
        "stats": {**meta.get("stats", {}), **vmeta.get("stats", {})},
        "inputs": {**meta.get("inputs", {}), **vmeta.get("inputs", {})},
    }
    dest.parent.mkdir(parents=True, exist_ok=True)
    # built beside and swapped at the end: a signal during a rebuild keeps the earlier merged data
    with tempfile.TemporaryDirectory(prefix=f".{dest.name}-", dir=dest.parent) as tmp, writing(dest, tmp):
        staged = Path(tmp) / "dataset"
        merged.save_to_disk(str(staged))
        atomic_write_text(staged / METADATA_FILE, json.dumps(meta, indent=2) + "\n")
        replace_folder(staged, dest)
    return dest


def study_data_root(data_dir: str | Path | None, *, required: bool) -> Path | None:
    """The data root (corpora, BLiMP, SyntaxGym, GLUE), resolved once where a study starts
    (``run_study``, ``write_study_report``) and passed down as a path; a missing root is the one-line
    ``DataNotFoundError`` where ``required``, else None."""
    from structpe.data.paths import DataNotFoundError, data_root

    try:
        return data_root(data_dir)
    except DataNotFoundError:
        if required:
            raise
        return None


def is_prepared(out: Path, tag_sources: Sequence[str] = ()) -> bool:
    """Whether :func:`prepare_study_data` has written ``out`` (tokenizer, merged train/validation
    data, and each tag control's), so that reusing it parses nothing but the test sentences."""
    from structpe.train.prepare_settings import METADATA_FILE

    merged = [out / "merged", *(out / f"merged-{tags}" for tags in tag_sources)]
    tokenizer = (out / "tokenizer" / "tokenizer.json").is_file()
    return tokenizer and all((m / METADATA_FILE).is_file() for m in merged)


def prepare_study_data(
    ds: DatasetSpec,
    out: Path,
    data_dir: str | Path | None = None,
    *,
    parser: Any,
    progress: bool = True,
    tag_sources: tuple[str, ...] = (),
) -> StudyData:
    """Prepare (or reuse) the tokenizer, the train/validation data and the test sentences, and the
    training data of each tag control in ``tag_sources`` (module docstring)."""
    from structpe.data.paths import data_root
    from structpe.parser.tag_controls import POOL_FILE
    from structpe.train.prepare import load_prepared, prepare
    from structpe.train.prepare_settings import PrepareSettings, corpus_splits
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

    def settings(n: int, tags: str = "parse") -> PrepareSettings:
        return dataset_prepare_settings(ds, n, tags)

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
    merged = merge_prepared(train, valid, out / "merged")
    _, meta = load_prepared(merged)
    units = read_test_units(splits["test"][0], fmt, ds.test_sentences, ds.test_seed)
    test = parse_units(parser, units, fmt, ds.test_sentences, ds.max_sentence_words)
    test_key = stable_hash([[t.to_dict(), (t.meta or {}).get("text")] for t in test])  # + the scored text
    fingerprint = stable_hash([meta["fingerprint"], test_key])
    variants = {}
    for tags in tag_sources:
        # a variant parses its split again (the parse's shards are gone once its data is written):
        # the same processes and resumable shards as the parse's own
        vtrain = prepare(
            {"train": splits["train"]},
            tok_dir,
            out / f"train-{tags}",
            settings=settings(ds.train_sentences, tags),
            **run,
        )
        vvalid = prepare(
            {"validation": splits["validation"]},
            tok_dir,
            out / f"validation-{tags}",
            settings=settings(ds.valid_sentences, tags),
            **run,
        )
        vmerged = merge_prepared(vtrain, vvalid, out / f"merged-{tags}")
        _, vmeta = load_prepared(vmerged)
        pool = vtrain / POOL_FILE
        variants[tags] = TagVariant(vmerged, vmeta["fingerprint"], pool if pool.is_file() else None)
    return StudyData(
        tok_dir, merged, fingerprint, test, train_fingerprint=meta["fingerprint"], variants=variants
    )

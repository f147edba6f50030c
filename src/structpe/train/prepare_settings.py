"""What ``structpe prepare`` is asked to build, and the identity of its cache.

The settings (``PrepareSettings``: corpus, parser, tokenizer, text form, packing), the corpora of
the shared data that ``--corpus`` names, and the fingerprint that hashes the *contents* of the
input files and of ``tokenizer.json``, the parser (spaCy model version, or the trained
hexatagger's files) and every setting that changes the output, so a second call with the same
inputs is a cache hit and any change rebuilds. Kept apart from the pipeline steps
(``structpe.train.prepare_steps``) and the driver (``structpe.train.prepare``): deciding whether to
build needs no parser or tokenizer.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from structpe.io import read_json, sha256_file
from structpe.train.corpus import FORMATS, TEXT_FORMS, text_form_record

METADATA_FILE = "structpe_prepare.json"


FORMAT_VERSION = 2  # 2: deprel_ids column


PARSERS = ("gold", "spacy", "hexatagger")


BOS_POLICIES = ("sequence", "sentence")


IGNORE_INDEX = -100


COLUMNS = ("input_ids", "terminal_ids", "nonterminal_ids")


# Corpora of shared/data that ``--corpus`` names: folder under the data root, file pattern, format.
KNOWN_CORPORA = {
    "brown": ("corpus/brown", "brown.{split}.txt.gz", "lines", {"train": "train", "validation": "valid",
                                                               "test": "test"}),
    "gutenberg": ("corpus/gutenberg_nltk", "gutenberg.{split}.txt.gz", "text",
                  {"train": "train", "validation": "valid", "test": "test"}),
    "gutenberg-pd-10m": ("corpus/gutenberg_pd_10m", "gutenberg_pd.{split}.txt.gz", "text",
                         {"train": "train", "validation": "dev", "test": "test"}),
    "ud-ewt": ("ud/UD_English-EWT", "en_ewt-ud-{split}.conllu.gz", "conllu",
               {"train": "train", "validation": "dev", "test": "test"}),
}


@dataclass
class PrepareSettings:
    """Every setting that changes the prepared data (all of it enters the fingerprint)."""

    parser: str = "spacy"
    parser_kwargs: dict[str, Any] = field(default_factory=dict)
    input_format: str | None = None
    seq_len: int = 128
    bos: str = "sequence"
    max_units: int | None = None
    nonprojective: str = "lift"
    text_form: str | None = None  # raw | tokenized; None: the tokenizer's form (resolve_text_form)
    tags: str = "parse"  # parse | prefix | shuffled: the study's tag controls (parser/tag_controls.py)
    # raw-text corpora: a longer sentence is cut into pieces of at most this many words
    # (structpe.syntax.sentences.split_sentences); None: no cap
    max_words: int | None = None

    def validate(self) -> None:
        if self.parser not in PARSERS:
            raise ValueError(f"parser must be one of {PARSERS}, got {self.parser!r}")
        if self.input_format is not None and self.input_format not in FORMATS:
            raise ValueError(f"input_format must be one of {FORMATS}, got {self.input_format!r}")
        if self.bos not in BOS_POLICIES:
            raise ValueError(f"bos must be one of {BOS_POLICIES}, got {self.bos!r}")
        if self.seq_len < 4:
            raise ValueError(f"seq_len must be >= 4, got {self.seq_len}")
        if self.nonprojective not in ("lift", "skip", "error"):
            raise ValueError(f"nonprojective must be lift | skip | error, got {self.nonprojective!r}")
        if self.max_units is not None and self.max_units < 1:
            raise ValueError("max_units must be >= 1")
        if self.max_words is not None and self.max_words < 1:
            raise ValueError(f"max_words must be >= 1, got {self.max_words}")
        if self.text_form is not None and self.text_form not in TEXT_FORMS:
            raise ValueError(f"text_form must be one of {TEXT_FORMS}, got {self.text_form!r}")
        from structpe.parser.tag_controls import TAG_SOURCES

        if self.tags not in TAG_SOURCES:
            raise ValueError(f"tags must be one of {TAG_SOURCES}, got {self.tags!r}")
        if self.tags == "prefix" and self.parser == "gold":
            raise ValueError("tags='prefix' parses word prefixes: use parser spacy or hexatagger, not gold")

    def check_input(self, fmt: str, source: str) -> None:
        """ValueError unless these settings fit input read as ``fmt`` (``source`` names it): the gold
        parser reads CoNLL-U trees, and ``max_words`` cuts raw text only. The run (``prepare``) and
        ``study run --dry-run`` (the corpus's format) ask the same question."""
        if self.parser == "gold" and fmt != "conllu":
            raise ValueError(f"the gold parser needs CoNLL-U input, but {source} is read as {fmt!r} text")
        if self.max_words is not None and fmt != "text":
            raise ValueError(
                f"max_words cuts sentences of raw text; {source} is read as {fmt!r}, whose sentences "
                "are given"
            )


def settings_record(settings: PrepareSettings) -> dict[str, Any]:
    """The settings as recorded and fingerprinted: ``tags`` only when it is not the parse and
    ``max_words`` only when set, so data prepared before either existed keeps its fingerprint."""
    record = asdict(settings)
    if record["tags"] == "parse":
        del record["tags"]
    if record["max_words"] is None:
        del record["max_words"]
    return record


def resolve_text_form(settings: PrepareSettings, tokenizer: Any) -> str:
    """The text form to prepare in: the setting, else the one the tokenizer was trained on.

    A tokenizer without a record (trained before text forms were recorded) was trained on the
    words joined with spaces, so it gets ``tokenized``: data and tokenizer must agree.
    """
    if settings.text_form is not None:
        return settings.text_form
    from structpe.train.tokenizer import TEXT_FORM_KEY

    record = (getattr(tokenizer, "init_kwargs", None) or {}).get(TEXT_FORM_KEY) or {}
    return record.get("text_form", "tokenized")


# -- helpers ----------------------------------------------------------------------------------------
def tokenizer_hash(tokenizer_dir: str | Path) -> str:
    """sha256 of ``tokenizer.json``: what identifies a tokenizer for the cache and for pretrain."""
    f = Path(tokenizer_dir) / "tokenizer.json"
    if not f.is_file():
        raise FileNotFoundError(f"{tokenizer_dir} is not a tokenizer folder (no tokenizer.json)")
    return sha256_file(f)


def parser_identity(settings: PrepareSettings) -> dict[str, Any]:
    """What makes the settings' parser's output change (``structpe.parser.registry.parser_identity``)."""
    from structpe.parser.registry import parser_identity as identity

    return identity(settings.parser, settings.parser_kwargs.get("model"))


def fingerprint(splits: dict[str, list[Path]], tokenizer_dir: str | Path, settings: PrepareSettings) -> str:
    """Content hash of the inputs, the tokenizer, the parser and the settings (not of paths or times)."""
    payload = {
        "format_version": FORMAT_VERSION,
        "splits": {k: [sha256_file(p) for p in v] for k, v in sorted(splits.items())},
        "tokenizer": tokenizer_hash(tokenizer_dir),
        "settings": settings_record(settings),
        "parser": parser_identity(settings),
        "text_form": text_form_record(settings.text_form or "tokenized"),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def corpus_splits(name: str, data_dir: str | Path | None = None,
                  splits: Sequence[str] = ("train", "validation")) -> tuple[dict[str, list[Path]], str]:
    """Files of a corpus of ``shared/data`` by name (``brown``, ``gutenberg``, ``gutenberg-pd-10m``,
    ``ud-ewt``) and its format."""
    from structpe.data.paths import data_root

    if name not in KNOWN_CORPORA:
        raise ValueError(f"unknown corpus {name!r}; known: {', '.join(KNOWN_CORPORA)} (or pass files)")
    sub, pattern, fmt, names = KNOWN_CORPORA[name]
    root = data_root(data_dir, sub=sub)
    out = {}
    for split in splits:
        if split not in names:
            raise ValueError(f"corpus {name!r} has no split {split!r}; it has {list(names)}")
        p = root / pattern.format(split=names[split])
        if not p.is_file():
            raise FileNotFoundError(f"corpus {name!r}: missing {p}")
        out[split] = [p]
    return out, fmt


def prepared_data_files(dataset_dir: str | Path) -> list[Path]:
    """A prepared dataset's record (``structpe_prepare.json``) and the corpus files it was built from."""

    meta_file = Path(dataset_dir) / METADATA_FILE
    inputs = read_json(meta_file).get("inputs", {}) if meta_file.is_file() else {}
    return [meta_file, *(Path(p) for paths in inputs.values() for p in paths)]


def parser_record(name: str | None, model: str | None = None) -> dict[str, Any] | None:
    """The parser's name and identity (spaCy model + versions, or the hexatagger's file hashes), as a
    result's provenance block records it (``structpe.provenance``)."""
    if name is None or name == "none":
        return None
    kwargs = {"model": model} if model else {}
    return {
        "name": name,
        **kwargs,
        "identity": parser_identity(PrepareSettings(parser=name, parser_kwargs=kwargs)),
    }

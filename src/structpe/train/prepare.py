"""Corpus -> hexatagged, tokenized, packed training sequences on disk (``structpe prepare``).

Pipeline, per split (each step a ``datasets`` map; steps 1-2 run on ``num_proc`` processes):

1. parse    sentence units -> words + hexatags with the chosen parser: ``gold`` (CoNLL-U trees),
            ``spacy`` or ``hexatagger``. ``lines`` input (Brown) is pre-tokenized, one sentence per
            line, and is parsed as given (``parse_words``); ``text`` input (Gutenberg, any prose) is
            split into paragraphs at blank lines and sentence-split + tokenized by the parser
            (``parse_text``). Non-projective parses are lifted (arc lifting, counted in the metadata).
2. align    words -> subword ids with the run's tokenizer; each word's tags go on its *first*
            subword, every other position gets -100. Text form ``raw`` (the default of tokenizers
            trained by ``structpe tokenizer train``): the sentence is detokenized (``glass.``, ``"``;
            :func:`structpe.train.corpus.detokenize_words`), the *text* is tokenized as evaluation
            tokenizes it, and each word's tags go on the first token overlapping the word's
            characters (:func:`structpe.eval.scoring.align_tags_by_offsets`, the scorers' rule).
            Text form ``tokenized``: words are tokenized pre-split
            (``structpe.syntax.alignment.align_tags``), i.e. trained on ``glass .``.
3. pack     sentences, in corpus order, are packed greedily into sequences of at most ``seq_len``
            tokens. Layout (``bos="sequence"``, the default):

                BOS s1 EOS s2 EOS ... sk EOS           (encoders: [CLS] s1 [SEP] s2 [SEP] ...)

            with ``bos="sentence"`` every sentence gets its own BOS: ``BOS s1 EOS BOS s2 EOS ...``.
            A sentence never straddles two sequences unless it alone exceeds the capacity; then it
            is cut into pieces at subword boundaries, each piece opening a new sequence and only the
            last one closed by EOS (so every word is kept, and the ids of consecutive pieces concatenate
            back to the sentence). Special tokens carry no tags.

The result is a ``DatasetDict`` (``train`` / ``validation`` / ...) saved with ``save_to_disk``
plus ``structpe_prepare.json`` (settings, tokenizer hash, counts, fingerprint). The fingerprint
hashes the *contents* of the input files and of ``tokenizer.json``, the parser (spaCy model
version, or the trained hexatagger's files) and every setting that changes the output, so a second
call with the same inputs is a cache hit, and any change rebuilds. Output is deterministic: it
does not depend on ``num_proc`` (order-preserving maps, packing in one pass).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from structpe.errors import PreparedDataError
from structpe.train.corpus import (
    FORMATS,
    TEXT_FORMS,
    detokenize_words,
    guess_format,
    iter_units,
    text_form_record,
)
from structpe.train.prepare_deprels import (
    WORD_COLUMNS,
    attach_deprel_ids,
    inventory_metadata,
    word_deprel_columns,
)

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
        if self.text_form is not None and self.text_form not in TEXT_FORMS:
            raise ValueError(f"text_form must be one of {TEXT_FORMS}, got {self.text_form!r}")


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
def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def tokenizer_hash(tokenizer_dir: str | Path) -> str:
    """sha256 of ``tokenizer.json``: what identifies a tokenizer for the cache and for pretrain."""
    f = Path(tokenizer_dir) / "tokenizer.json"
    if not f.is_file():
        raise FileNotFoundError(f"{tokenizer_dir} is not a tokenizer folder (no tokenizer.json)")
    return _sha256_file(f)


def parser_identity(settings: PrepareSettings) -> dict[str, Any]:
    """What makes a parser's output change: the spaCy package version, or the hexatagger's files."""
    if settings.parser == "spacy":
        from importlib.metadata import PackageNotFoundError, version

        from structpe.syntax.parsers import DEFAULT_SPACY_MODEL

        name = settings.parser_kwargs.get("model") or DEFAULT_SPACY_MODEL
        try:
            return {"spacy_model": name, "model_version": version(name), "spacy": version("spacy")}
        except PackageNotFoundError:
            return {"spacy_model": name}
    if settings.parser == "hexatagger" and settings.parser_kwargs.get("model"):
        folder = Path(settings.parser_kwargs["model"])
        if folder.is_dir():
            return {"files": {f.name: _sha256_file(f) for f in sorted(folder.iterdir()) if f.is_file()}}
    return {}


def fingerprint(splits: dict[str, list[Path]], tokenizer_dir: str | Path, settings: PrepareSettings) -> str:
    """Content hash of the inputs, the tokenizer, the parser and the settings (not of paths or times)."""
    payload = {
        "format_version": FORMAT_VERSION,
        "splits": {k: [_sha256_file(p) for p in v] for k, v in sorted(splits.items())},
        "tokenizer": tokenizer_hash(tokenizer_dir),
        "settings": asdict(settings),
        "parser": parser_identity(settings),
        "text_form": text_form_record(settings.text_form or "tokenized"),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def corpus_splits(name: str, data_dir: str | Path | None = None,
                  splits: Sequence[str] = ("train", "validation")) -> tuple[dict[str, list[Path]], str]:
    """Files of a corpus of ``shared/data`` by name (``brown``, ``gutenberg``, ``ud-ewt``) and its format."""
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


# -- step 1: parse ------------------------------------------------------------------------------------
_CACHE: dict[Any, Any] = {}


def _get_parser(name: str, kwargs: dict[str, Any]) -> Any:
    key = ("parser", name, json.dumps(kwargs, sort_keys=True))
    if key not in _CACHE:
        from structpe.syntax.parsers import get_parser

        _CACHE[key] = get_parser(name, **kwargs)
    return _CACHE[key]


def _get_tokenizer(path: str) -> Any:
    key = ("tokenizer", path)
    if key not in _CACHE:
        from structpe.train.tokenizer import load_tokenizer

        _CACHE[key] = load_tokenizer(path)
    return _CACHE[key]


def _sentence_columns(sentences: Iterable[Any]) -> dict[str, list]:
    out: dict[str, list] = {"words": [], "terminals": [], "nonterminals": [], "lifted": []}
    out.update({c: [] for c in WORD_COLUMNS})
    for s in sentences:
        if len(s.words) == 0:
            continue
        out["words"].append(list(s.words))
        out["terminals"].append(list(s.terminals))
        out["nonterminals"].append(list(s.nonterminals))
        out["lifted"].append(int(getattr(s, "lifted_arcs", 0) > 0))
        for c, v in zip(WORD_COLUMNS, word_deprel_columns(s.deprels), strict=True):
            out[c].append(v)
    return out


def _parse_batch(batch: dict[str, list], parser: str, parser_kwargs: dict[str, Any]) -> dict:
    """Parse a batch of units; the number of output rows (sentences) may differ from the input."""
    p = _get_parser(parser, parser_kwargs)
    # raw paragraphs: the parser sentence-splits and tokenizes; otherwise pre-tokenized sentences
    # (Brown lines, or CoNLL-U words re-parsed by a predicted parser)
    if "text" in batch:
        return _sentence_columns(p.parse_text(batch["text"]))
    cols = _sentence_columns(p.parse_words(batch["words_in"]))
    if "raw_text" in batch:
        _keep_raw_text(batch, cols)
    return cols


def _keep_raw_text(batch: dict[str, list], cols: dict[str, list]) -> None:
    """Carry each sentence's detokenized text past the parser (it must return one parse per input)."""
    if cols["words"] != [list(w) for w in batch["words_in"]]:
        raise ValueError(
            "the parser changed or dropped sentences, so their detokenized text no longer matches; "
            "use nonprojective='lift' (or text_form='tokenized')"
        )
    cols["raw_text"] = list(batch["raw_text"])


def _gold_units(paths: Sequence[Path], policy: str, max_units: int | None) -> tuple[dict[str, list], int]:
    """Gold CoNLL-U trees -> tagged sentences under the non-projectivity policy; also the input count."""
    from structpe.syntax import read_conllu

    p = _get_parser("gold", {"nonprojective": policy})
    conllu = [s for path in paths for s in read_conllu(path)]
    if max_units is not None:
        conllu = conllu[:max_units]
    return _sentence_columns(p.parse_conllu_sentences(conllu)), len(conllu)


# -- step 2: align ------------------------------------------------------------------------------------
def _align_batch(batch: dict[str, list], tokenizer_path: str, text_form: str = "tokenized") -> dict:
    if text_form == "raw":
        return _align_raw_batch(batch, tokenizer_path)
    from structpe.syntax.alignment import align_tags

    tok = _get_tokenizer(tokenizer_path)
    enc = align_tags(tok, batch["words"], batch["terminals"], batch["nonterminals"], add_special_tokens=False)
    return {
        "input_ids": enc["input_ids"],
        "terminal_ids": enc["terminal_ids"],
        "nonterminal_ids": enc["nonterminal_ids"],
        "unaligned_words": [0] * len(enc["input_ids"]),
        "tagged_words": [[True] * len(w) for w in batch["words"]],  # every word has a first subword
    }


def _align_raw_batch(batch: dict[str, list], tokenizer_path: str) -> dict:
    """Tokenize each sentence's raw text exactly as the scorers do and tag first tokens by offsets.

    Sentences of Brown carry the text detokenized before parsing (``raw_text``); for the others
    (parsed from CoNLL-U or raw prose) the parser's words are detokenized here.
    """
    from structpe.eval.scoring import align_tags_by_offsets, first_tokens_of_words

    tok = _get_tokenizer(tokenizer_path)
    texts = batch.get("raw_text") or [detokenize_words(w)[1] for w in batch["words"]]
    enc = tok(texts, add_special_tokens=False, return_offsets_mapping=True)
    out: dict[str, list] = {"input_ids": enc["input_ids"], "terminal_ids": [], "nonterminal_ids": [],
                            "unaligned_words": [], "tagged_words": []}
    for i, text in enumerate(texts):
        parse = {k: batch[k][i] for k in ("words", "terminals", "nonterminals")}
        t, n, missed = align_tags_by_offsets(text, enc["offset_mapping"][i], parse)
        out["terminal_ids"].append(t)
        out["nonterminal_ids"].append(n)
        out["unaligned_words"].append(missed)
        # which words got a token (and so a tag): their DEPREL labels follow the tags exactly
        firsts = first_tokens_of_words(text, enc["offset_mapping"][i], parse["words"])
        out["tagged_words"].append([f is not None for f in firsts])
    return out


def _lines_units(paths: Sequence[Path], text_form: str) -> dict[str, list]:
    """Sentences of ``lines`` files: their words, and (``raw``) Brown-normalised words + raw text."""
    words = [u.split() for p in paths for u in iter_units(p, "lines")]
    if text_form != "raw":
        return {"words_in": words}
    detok = [detokenize_words(w) for w in words]
    return {"words_in": [d[0] for d in detok], "raw_text": [d[1] for d in detok]}


# -- step 3: pack -------------------------------------------------------------------------------------
def pack_sentences(
    sentences: Iterable[tuple[list[int], list[int], list[int]]],
    seq_len: int,
    bos_id: int,
    eos_id: int,
    bos: str = "sequence",
) -> list[dict[str, list[int]]]:
    """Greedy in-order packing (module docstring); returns rows of ids and the two tag columns."""
    rows: list[dict[str, list[int]]] = []
    cur: dict[str, list[int]] = {c: [] for c in COLUMNS}

    def push(ids: Sequence[int], t: Sequence[int], n: Sequence[int]) -> None:
        cur["input_ids"].extend(ids)
        cur["terminal_ids"].extend(t)
        cur["nonterminal_ids"].extend(n)

    def special(tok: int) -> None:
        push([tok], [IGNORE_INDEX], [IGNORE_INDEX])

    def flush() -> None:
        nonlocal cur
        if cur["input_ids"]:
            rows.append(cur)
        cur = {c: [] for c in COLUMNS}

    per_sentence_bos = bos == "sentence"
    for ids, t, n in sentences:
        # tokens this sentence needs in the current sequence: [BOS] + ids + EOS
        need = len(ids) + 1 + (1 if (per_sentence_bos or not cur["input_ids"]) else 0)
        if cur["input_ids"] and len(cur["input_ids"]) + need > seq_len:
            flush()
        if not cur["input_ids"] or per_sentence_bos:
            special(bos_id)
        start = 0
        while len(ids) - start + 1 > seq_len - len(cur["input_ids"]):
            room = seq_len - len(cur["input_ids"])  # too long: fill this sequence, continue in the next
            push(ids[start : start + room], t[start : start + room], n[start : start + room])
            start += room
            flush()
            special(bos_id)
        push(ids[start:], t[start:], n[start:])
        special(eos_id)
    flush()
    return rows


def _pack_batch(batch: dict[str, list], seq_len: int, bos_id: int, eos_id: int, bos: str) -> dict:
    rows = pack_sentences(
        zip(batch["input_ids"], batch["terminal_ids"], batch["nonterminal_ids"], strict=True),
        seq_len, bos_id, eos_id, bos,
    )
    return {c: [r[c] for r in rows] for c in COLUMNS}


PACK_BATCH = 4096  # sentences per packing batch: fixed, so the output does not depend on num_proc


# -- driver -------------------------------------------------------------------------------------------
def _prepare_split(
    name: str, paths: list[Path], fmt: str, settings: PrepareSettings, tokenizer_dir: str,
    bos_id: int, eos_id: int, num_proc: int, work: Path,
) -> tuple[Any, dict[str, int]]:
    from datasets import Dataset

    nproc = num_proc if num_proc and num_proc > 1 else None
    if fmt == "conllu" and settings.parser == "gold":
        cols, n_units = _gold_units(paths, settings.nonprojective, settings.max_units)
        sents = Dataset.from_dict(cols)
    else:
        if settings.parser == "gold":
            raise ValueError(f"the gold parser needs CoNLL-U input, but {paths[0]} is read as {fmt!r} text")
        if fmt == "conllu":
            from structpe.syntax import read_conllu

            units: dict[str, list] = {"words_in": [s.words for p in paths for s in read_conllu(p)]}
        elif fmt == "lines":
            units = _lines_units(paths, settings.text_form or "tokenized")
        else:
            units = {"text": [u for p in paths for u in iter_units(p, fmt)]}
        column = next(iter(units))
        if settings.max_units is not None:
            units = {k: v[: settings.max_units] for k, v in units.items()}
        if not units[column]:
            raise ValueError(f"split {name!r}: no text in {', '.join(map(str, paths))}")
        n_units = len(units[column])
        kwargs = dict(settings.parser_kwargs)
        kwargs.setdefault("nonprojective", settings.nonprojective)
        sents = Dataset.from_dict(units).map(
            _parse_batch,
            batched=True,
            batch_size=64,
            num_proc=nproc,
            remove_columns=list(units),
            fn_kwargs={"parser": settings.parser, "parser_kwargs": kwargs},
            cache_file_name=str(work / f"{name}-parse.arrow"),
            new_fingerprint=f"{name}-parse",
            desc=f"parse {name} ({settings.parser})",
        )
    aligned = sents.map(
        _align_batch,
        batched=True,
        batch_size=256,
        num_proc=nproc,
        remove_columns=sents.column_names,
        fn_kwargs={"tokenizer_path": tokenizer_dir, "text_form": settings.text_form or "tokenized"},
        cache_file_name=str(work / f"{name}-align.arrow"),
        new_fingerprint=f"{name}-align",
        desc=f"tokenize + align {name}",
    )
    packed = aligned.map(
        _pack_batch,
        batched=True,
        batch_size=PACK_BATCH,
        remove_columns=aligned.column_names,
        fn_kwargs={"seq_len": settings.seq_len, "bos_id": bos_id, "eos_id": eos_id, "bos": settings.bos},
        cache_file_name=str(work / f"{name}-pack.arrow"),
        new_fingerprint=f"{name}-pack",
        desc=f"pack {name}",
    )
    packed, deprel_stats = attach_deprel_ids(
        sents, packed, work / f"{name}-deprel.arrow", aligned["tagged_words"]
    )
    stats = {
        "units": n_units,
        "sentences": len(sents),
        "lifted_sentences": int(sum(sents["lifted"])),
        "subword_tokens": int(sum(len(x) for x in aligned["input_ids"])),
        "unaligned_words": int(sum(aligned["unaligned_words"])),
        "sequences": len(packed),
        "tokens": int(sum(len(x) for x in packed["input_ids"])),
        **deprel_stats,
    }
    return packed, stats


def default_cache_dir() -> Path:
    return Path(os.environ.get("STRUCTPE_CACHE", Path.home() / ".cache" / "structpe")) / "prepared"


def prepare(
    splits: dict[str, Sequence[str | Path]],
    tokenizer: str | Path,
    output_dir: str | Path | None = None,
    *,
    settings: PrepareSettings | None = None,
    num_proc: int = 1,
    force: bool = False,
) -> Path:
    """Build (or reuse) the prepared dataset of ``splits`` ({"train": [files], "validation": [...]}).

    Returns the dataset folder. ``output_dir`` defaults to ``$STRUCTPE_CACHE/prepared/<fingerprint>``
    (``~/.cache/structpe``). If the folder already holds a dataset with the same fingerprint it is
    reused without work; a folder with another fingerprint is rebuilt; a non-empty folder that is
    not a prepared dataset is refused.
    """
    settings = settings or PrepareSettings()
    settings.validate()
    if not splits:
        raise ValueError("prepare needs at least one split, e.g. {'train': [...], 'validation': [...]}")
    paths = {k: [Path(p) for p in v] for k, v in splits.items()}
    for k, ps in paths.items():
        if not ps:
            raise ValueError(f"split {k!r} has no input files")
        for p in ps:
            if not p.is_file():
                raise FileNotFoundError(f"split {k!r}: input file not found: {p}")
    if settings.parser == "gold":
        for k, ps in paths.items():
            fmt = settings.input_format or guess_format(ps[0])
            if fmt != "conllu":
                raise ValueError(
                    f"the gold parser needs CoNLL-U input, but split {k!r} ({ps[0]}) is read as {fmt!r} text"
                )
    tok_dir = str(Path(tokenizer).resolve())
    tok = _get_tokenizer(tok_dir)
    settings = replace(settings, text_form=resolve_text_form(settings, tok))
    bos_id = tok.bos_token_id if tok.bos_token_id is not None else tok.cls_token_id
    eos_id = tok.eos_token_id if tok.eos_token_id is not None else tok.sep_token_id
    if bos_id is None or eos_id is None:
        raise ValueError(f"tokenizer {tok_dir} needs BOS/EOS (or CLS/SEP) tokens for packing")
    fp = fingerprint(paths, tok_dir, settings)
    out = Path(output_dir) if output_dir is not None else default_cache_dir() / fp[:20]
    meta_file = out / METADATA_FILE
    if out.exists() and any(out.iterdir()):
        if not meta_file.is_file():
            raise FileExistsError(f"{out} exists and is not a prepared dataset; choose another output folder")
        old = json.loads(meta_file.read_text())
        if old.get("fingerprint") == fp and not force:
            print(f"prepare: cache hit, {out} already holds this dataset (fingerprint {fp[:12]})")
            return out
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from datasets import DatasetDict

    t0 = time.time()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".prepare-", dir=out.parent) as tmp:
        work = Path(tmp) / "work"
        work.mkdir()
        built, stats = {}, {}
        for name, ps in paths.items():
            fmt = settings.input_format or guess_format(ps[0])
            built[name], stats[name] = _prepare_split(
                name, ps, fmt, settings, tok_dir, bos_id, eos_id, num_proc, work
            )
        staged = Path(tmp) / "dataset"
        DatasetDict(built).save_to_disk(str(staged))
        meta = {
            "fingerprint": fp,
            "format_version": FORMAT_VERSION,
            "settings": asdict(settings),
            "text_form": text_form_record(settings.text_form or "tokenized"),
            "inputs": {k: [str(p.resolve()) for p in v] for k, v in paths.items()},
            "tokenizer": tok_dir,
            "tokenizer_sha256": tokenizer_hash(tok_dir),
            "vocab_size": len(tok),
            "bos_token_id": bos_id,
            "eos_token_id": eos_id,
            "pad_token_id": tok.pad_token_id,
            "deprel_inventory": inventory_metadata(),
            "stats": stats,
            "seconds": round(time.time() - t0, 1),
        }
        (staged / METADATA_FILE).write_text(json.dumps(meta, indent=2) + "\n")
        if out.exists():
            shutil.rmtree(out)
        os.replace(staged, out)  # atomic on one filesystem: a killed run never leaves half a dataset
    counts = ", ".join(f"{k}: {v['sequences']} sequences" for k, v in stats.items())
    print(f"prepare: wrote {out} ({counts})")
    return out


def load_prepared(path: str | Path, splits: Sequence[str] = ("train", "validation")) -> tuple[Any, dict]:
    """Open a prepared dataset, checking it is complete; raises PreparedDataError naming what is wrong."""
    from datasets import load_from_disk

    path = Path(path)
    if not path.exists():
        raise PreparedDataError(f"prepared dataset not found: {path} (create it with `structpe prepare`)")
    meta_file = path / METADATA_FILE
    if not meta_file.is_file():
        raise PreparedDataError(f"{path} is not a structpe prepared dataset (no {METADATA_FILE})")
    try:
        meta = json.loads(meta_file.read_text())
    except json.JSONDecodeError as err:
        raise PreparedDataError(f"{meta_file} is corrupt: {err}") from None
    try:
        dd = load_from_disk(str(path))
        for split in dd:  # touch both ends so a truncated arrow file fails here, not mid-training
            if len(dd[split]):
                dd[split][0], dd[split][len(dd[split]) - 1]
    except Exception as err:  # datasets/pyarrow raise several types for missing or truncated files
        raise PreparedDataError(f"{path}: cannot load the dataset ({type(err).__name__}: {err}); "
                                "re-run `structpe prepare`") from None
    for split in splits:
        if split not in dd:
            raise PreparedDataError(f"{path}: no {split!r} split (has {list(dd)})")
        missing = [c for c in COLUMNS if c not in dd[split].column_names]
        if missing:
            raise PreparedDataError(f"{path}: split {split!r} lacks columns {missing}")
        if len(dd[split]) == 0:
            raise PreparedDataError(f"{path}: split {split!r} is empty")
    return dd, meta

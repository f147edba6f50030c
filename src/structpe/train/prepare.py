"""Corpus -> hexatagged, tokenized, packed training sequences on disk (``structpe prepare``).

Pipeline, per split (each step a ``datasets`` map; steps 1-2 run on ``num_proc`` processes):
parse (words + hexatags with the chosen parser: ``gold``, ``spacy`` or ``hexatagger``), align (each
word's tags on its first subword), pack (sentences into sequences of at most ``seq_len`` tokens).
The steps and their conventions are described in ``structpe.train.prepare_steps``.

The result is a ``DatasetDict`` (``train`` / ``validation`` / ...) saved with ``save_to_disk``
plus ``structpe_prepare.json`` (settings, tokenizer hash, counts, fingerprint). The fingerprint
hashes the *contents* of the input files and of ``tokenizer.json``, the parser (spaCy model
version, or the trained hexatagger's files) and every setting that changes the output, so a second
call with the same inputs is a cache hit, and any change rebuilds. Output is deterministic: it
does not depend on ``num_proc`` (order-preserving maps, packing in one pass).

The settings and fingerprint live in ``structpe.train.prepare_settings`` and the three steps in
``structpe.train.prepare_steps``; this module drives them per split and
loads the result.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from structpe.errors import PreparedDataError, StructpeError
from structpe.io import output_folder, read_json, replace_folder, writing
from structpe.parser.tag_controls import POOL_FILE, shuffle_within_lengths, write_pool
from structpe.syntax.sentences import check_text_lengths
from structpe.train.corpus import guess_format, iter_units, text_form_record
from structpe.train.prepare_deprels import WORD_COLUMNS, attach_deprel_ids, inventory_metadata
from structpe.train.prepare_settings import (
    COLUMNS,
    FORMAT_VERSION,
    METADATA_FILE,
    PrepareSettings,
    fingerprint,
    parser_identity,
    resolve_text_form,
    settings_record,
    tokenizer_hash,
)
from structpe.train.prepare_steps import (
    PACK_BATCH,
    align_batch,
    get_tokenizer,
    gold_units,
    lines_units,
    pack_batch,
    parse_batch,
)


# -- driver -------------------------------------------------------------------------------------------
def _parse_in_shards(
    units: dict[str, list], shard_units: int, folder: Path, map_kwargs: dict[str, Any]
) -> Any:
    """Parse ``units`` ``shard_units`` at a time; each finished shard is saved under ``folder``
    (written whole, then renamed) and reused by the next run, so a killed prepare resumes at the
    first unfinished shard. Units are parsed one batch at a time either way, so the concatenated
    shards equal the one-pass result (shard sizes that are multiples of the parse batch, 64, even
    keep the batches identical)."""
    from datasets import Dataset, concatenate_datasets, load_from_disk

    folder.mkdir(parents=True, exist_ok=True)
    n = len(next(iter(units.values())))
    shards = []
    for i, start in enumerate(range(0, n, shard_units)):
        done = folder / f"shard-{i:05d}"
        if not done.is_dir():
            chunk = Dataset.from_dict({k: v[start : start + shard_units] for k, v in units.items()})
            tmp = folder / f".shard-{i:05d}.partial"
            shutil.rmtree(tmp, ignore_errors=True)
            chunk.map(**map_kwargs, remove_columns=list(units)).save_to_disk(str(tmp))
            os.replace(tmp, done)
        shards.append(load_from_disk(str(done)))
    return concatenate_datasets(shards)


def _prepare_split(
    name: str, paths: list[Path], fmt: str, settings: PrepareSettings, tokenizer_dir: str,
    bos_id: int, eos_id: int, num_proc: int, work: Path, extras: Path,
    shards: tuple[Path, int] | None = None,
) -> tuple[Any, dict[str, int]]:
    from datasets import Dataset

    nproc = num_proc if num_proc and num_proc > 1 else None
    settings.check_input(fmt, str(paths[0]))
    if fmt == "conllu" and settings.parser == "gold":
        cols, n_units = gold_units(paths, settings.nonprojective, settings.max_units)
        sents = Dataset.from_dict(cols)
    else:
        if fmt == "conllu":
            from structpe.syntax.conllu_io import read_conllu

            units: dict[str, list] = {"words_in": [s.words for p in paths for s in read_conllu(p)]}
        elif fmt == "lines":
            units = lines_units(paths, settings.text_form or "tokenized")
        else:
            units = {"text": [u for p in paths for u in iter_units(p, fmt)]}
        column = next(iter(units))
        if settings.max_units is not None:
            units = {k: v[: settings.max_units] for k, v in units.items()}
        if "text" in units:  # before the parse step: spaCy cuts every text into sentences
            check_text_lengths(units["text"], f"split {name!r} ({', '.join(map(str, paths))}): ")
        if not units[column]:
            raise ValueError(f"split {name!r}: no text in {', '.join(map(str, paths))}")
        n_units = len(units[column])
        kwargs = dict(settings.parser_kwargs)
        kwargs.setdefault("nonprojective", settings.nonprojective)
        if settings.parser == "hexatagger" and (nproc or 1) > 1:
            # forked workers: one torch thread each, which also keeps them out of OpenMP's thread pool,
            # inherited from the parent and dead after fork (a parallel region there never returns)
            kwargs.setdefault("threads", 1)
        parse = {
            "function": parse_batch,
            "batched": True,
            "batch_size": 64,
            "num_proc": nproc,
            "fn_kwargs": {
                "parser": settings.parser,
                "parser_kwargs": kwargs,
                "tags": settings.tags,
                "max_words": settings.max_words,
            },
            "desc": f"parse {name} ({settings.parser}{', prefixes' if settings.tags == 'prefix' else ''})",
        }
        if shards is not None:
            sents = _parse_in_shards(units, shards[1], shards[0] / name, parse)
        else:
            sents = Dataset.from_dict(units).map(
                **parse,
                remove_columns=list(units),
                cache_file_name=str(work / f"{name}-parse.arrow"),
                new_fingerprint=f"{name}-parse",
            )
    if settings.tags == "shuffled":
        if name == "train":  # the pool that test / BLiMP / SyntaxGym sentences draw their tags from
            write_pool(extras / POOL_FILE, sents["terminals"], sents["nonterminals"])
        sents = _shuffle_tags(sents)
    aligned = sents.map(
        align_batch,
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
        pack_batch,
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


PREFIX_SHARD = 2048  # units per saved shard of prefix parses (tags="prefix") unless shard_units says


def _shuffle_tags(sents: Any) -> Any:
    """Every sentence takes the parse (tags and labels) of another of its word count
    (:func:`structpe.parser.tag_controls.shuffle_within_lengths`); words and text stay."""
    donor = shuffle_within_lengths([len(w) for w in sents["words"][:]])
    for col in ("terminals", "nonterminals", *WORD_COLUMNS):
        # read the column once: indexing a datasets Column row by row builds a Dataset per access
        # (hours on the 10M-word corpus' 573K sentences)
        values = sents[col][:]
        sents = sents.remove_columns(col).add_column(col, [values[d] for d in donor])
    return sents


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
    shard_units: int | None = None,
) -> Path:
    """Build (or reuse) the prepared dataset of ``splits`` ({"train": [files], "validation": [...]}).

    Returns the dataset folder. ``output_dir`` defaults to ``$STRUCTPE_CACHE/prepared/<fingerprint>``
    (``~/.cache/structpe``). If the folder already holds a dataset with the same fingerprint it is
    reused without work; a folder with another fingerprint is rebuilt; a non-empty folder that is
    not a prepared dataset is refused.

    ``num_proc`` processes parse and align (the result does not depend on it). ``shard_units``
    makes the parse step resumable: units are parsed that many at a time and every finished shard is
    kept in ``.<output name>.shards-<fingerprint>/`` beside the output until the dataset is written,
    so a killed run (hours of parsing for a 10M-word corpus) restarts at its first unfinished shard.
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
    if shard_units is not None and shard_units < 1:
        raise ValueError(f"shard_units must be >= 1, got {shard_units}")
    for k, ps in paths.items():  # before any work: the settings fit every split's format
        settings.check_input(settings.input_format or guess_format(ps[0]), f"split {k!r} ({ps[0]})")
    tok_dir = str(Path(tokenizer).resolve())
    tok = get_tokenizer(tok_dir)
    settings = replace(settings, text_form=resolve_text_form(settings, tok))
    bos_id = tok.bos_token_id if tok.bos_token_id is not None else tok.cls_token_id
    eos_id = tok.eos_token_id if tok.eos_token_id is not None else tok.sep_token_id
    if bos_id is None or eos_id is None:
        raise ValueError(f"tokenizer {tok_dir} needs BOS/EOS (or CLS/SEP) tokens for packing")
    fp = fingerprint(paths, tok_dir, settings)
    out = output_folder(output_dir, "--output") if output_dir is not None else default_cache_dir() / fp[:20]
    meta_file = out / METADATA_FILE
    if out.exists() and any(out.iterdir()):
        if not meta_file.is_file():
            raise FileExistsError(f"{out} exists and is not a prepared dataset; choose another output folder")
        old = read_json(meta_file)
        if old.get("fingerprint") == fp and not force:
            print(f"prepare: cache hit, {out} already holds this dataset (fingerprint {fp[:12]})")
            return out
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from datasets import DatasetDict

    t0 = time.time()
    out.parent.mkdir(parents=True, exist_ok=True)
    shard_dir = out.parent / f".{out.name}.shards-{fp[:16]}"
    if settings.tags == "prefix" and not shard_units:  # one parse per word prefix: always resumable
        shard_units = PREFIX_SHARD
    with tempfile.TemporaryDirectory(prefix=".prepare-", dir=out.parent) as tmp, writing(out, tmp):
        work = Path(tmp) / "work"
        work.mkdir()
        staged = Path(tmp) / "dataset"
        extras = Path(tmp) / "extras"  # files saved beside the dataset (the shuffled tags' pool)
        extras.mkdir()
        built, stats = {}, {}
        for name, ps in paths.items():
            fmt = settings.input_format or guess_format(ps[0])
            built[name], stats[name] = _prepare_split(
                name, ps, fmt, settings, tok_dir, bos_id, eos_id, num_proc, work, extras,
                (shard_dir, shard_units) if shard_units else None,
            )
        DatasetDict(built).save_to_disk(str(staged))
        for f in extras.iterdir():
            os.replace(f, staged / f.name)
        meta = {
            "fingerprint": fp,
            "format_version": FORMAT_VERSION,
            "settings": settings_record(settings),
            "parser_identity": parser_identity(settings),  # spaCy version or the tagger's file hashes
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
        replace_folder(staged, out)  # a signal at any moment leaves the earlier dataset or this one
    shutil.rmtree(shard_dir, ignore_errors=True)
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
        meta = read_json(meta_file)
    except StructpeError as err:
        raise PreparedDataError(str(err)) from None
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



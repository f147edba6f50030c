"""How a study spec's YAML is checked: every key against the valid ones (with a close-match hint),
every value against its field's type, choices and seed lists; one line naming the file and the key
for each mistake (``structpe.study.spec.load_spec`` reads the spec with these)."""

from __future__ import annotations

import copy
import dataclasses
import difflib
import typing
from typing import Any

from structpe.errors import StructpeError


class StudySpecError(StructpeError):
    """A study spec is invalid; the message names the file and the key."""


def check_keys(d: Any, valid: tuple[str, ...] | list[str], where: str) -> dict[str, Any]:
    """``d`` as a mapping whose every key is in ``valid`` (one line with a close-match hint if not)."""
    if d is None:
        return {}
    if not isinstance(d, dict):
        raise StudySpecError(f"{where}: expected a mapping, got {type(d).__name__}")
    for key in d:
        if key not in valid:
            close = difflib.get_close_matches(str(key), list(valid), n=2)
            hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
            raise StudySpecError(f"{where}: unknown key {key!r}.{hint} Valid keys: {', '.join(valid)}")
    return d


def _fits(value: Any, hint: Any) -> bool:
    """Whether a YAML value has the type a spec field declares (int, str, list, or unions of them)."""
    args = typing.get_args(hint)
    if args and typing.get_origin(hint) is not list:  # a union such as `int | None`
        return any(_fits(value, a) for a in args)
    if hint is type(None):
        return value is None
    base = typing.get_origin(hint) or hint
    if base is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, base)


def _type_name(hint: Any) -> str:
    base = typing.get_origin(hint) or hint
    return "null" if base is type(None) else getattr(base, "__name__", str(base))


def build_spec(cls: type, raw: Any, where: str) -> Any:
    """A dataclass from a mapping, with every key and value type checked."""
    hints = typing.get_type_hints(cls)
    raw = check_keys(raw, list(hints), where)
    for key, value in raw.items():
        if not _fits(value, hints[key]):
            want = " or ".join(_type_name(a) for a in (typing.get_args(hints[key]) or (hints[key],)))
            raise StudySpecError(f"{where}.{key}: expected {want}, got {value!r}")
    return cls(**raw)


def merge_raw(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``extra`` laid over it, mappings merged key by key (a profile over the spec)."""
    out = copy.deepcopy(base)
    for k, v in extra.items():
        out[k] = merge_raw(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def check_choices(values: list[str], choices: tuple[str, ...], where: str) -> None:
    """``values`` is a non-empty list drawn from ``choices``."""
    if not isinstance(values, list) or not values:
        raise StudySpecError(f"{where}: expected a non-empty list from {', '.join(choices)}")
    bad = [v for v in values if v not in choices]
    if bad:
        raise StudySpecError(f"{where}: unknown value(s) {bad}; choose from {', '.join(choices)}")


def seed_list(seeds: Any, where: str) -> list[int]:
    """``seeds`` as a list of distinct integers (one line naming ``where`` if not)."""
    ok = (
        isinstance(seeds, list)
        and seeds
        and all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)
    )
    if not ok:
        raise StudySpecError(f"{where} must be a non-empty list of integers, got {seeds!r}")
    if len(set(seeds)) != len(seeds):
        raise StudySpecError(f"{where} has duplicates: {seeds}")
    return list(seeds)


def check_dataset(ds: Any, where: str) -> None:
    """The corpus, parser, tokenizer and sizes are known and usable (``--dry-run`` catches them)."""
    from structpe.parser.registry import available_parsers
    from structpe.train.prepare_settings import KNOWN_CORPORA
    from structpe.train.tokenizer import KINDS

    choices = {"corpus": list(KNOWN_CORPORA), "parser": available_parsers(), "tokenizer": list(KINDS)}
    for key, valid in choices.items():
        value = getattr(ds, key)
        if value not in valid:
            raise StudySpecError(f"{where}.{key}: unknown {value!r}; choose from {', '.join(valid)}")
    for key in ("vocab_size", "train_sentences", "valid_sentences", "test_sentences", "seq_len"):
        if getattr(ds, key) < 1:
            raise StudySpecError(f"{where}.{key}: must be >= 1, got {getattr(ds, key)}")
    if ds.max_sentence_words is not None and ds.max_sentence_words < 1:
        raise StudySpecError(f"{where}.max_sentence_words: must be >= 1 or null, got {ds.max_sentence_words}")


def dataset_prepare_settings(ds: Any, n: int, tags: str = "parse") -> Any:
    """The ``prepare`` settings of a study's data (``n`` units, tag source ``tags``): one definition
    for the run (``study.data``) and the checks of ``--dry-run`` (:func:`check_dataset_input`)."""
    from structpe.train.prepare_settings import KNOWN_CORPORA, PrepareSettings

    return PrepareSettings(parser=ds.parser, input_format=KNOWN_CORPORA[ds.corpus][2], seq_len=ds.seq_len,
                           max_units=n, tags=tags, max_words=ds.max_sentence_words)


def check_dataset_input(ds: Any, tag_sources: Any, where: str) -> None:
    """The checks ``prepare`` runs on the study's corpus, run at ``--dry-run`` (a spec the dry run
    accepts is not refused by the run): the settings of each tag source fit the corpus's format."""
    for tags in ("parse", *tag_sources):
        settings = dataset_prepare_settings(ds, 1, tags)
        try:
            settings.validate()
            settings.check_input(settings.input_format, f"corpus {ds.corpus!r}")
        except ValueError as err:
            raise StudySpecError(f"{where}: {err}") from None


def check_sizes(evals: Any, where: str) -> None:
    """Counts in the evaluation settings are >= 1 (``limit: 0`` is not "no limit")."""
    for name in (f.name for f in dataclasses.fields(evals)):
        sub = getattr(evals, name)
        for key, value in dataclasses.asdict(sub).items() if sub is not None else ():
            if isinstance(value, int) and not isinstance(value, bool) and value < 1:
                raise StudySpecError(f"{where}.{name}.{key}: must be >= 1, got {value}")

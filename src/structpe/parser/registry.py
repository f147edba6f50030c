"""Parsers by name: ``get_parser("gold" | "spacy" | "hexatagger", **kwargs)`` (``structpe tag --parser``,
``structpe prepare --parser``, the evaluations' ``--parser``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from structpe.parser.base import GoldParser, Parser, ParserInputError
from structpe.parser.spacy import SpacyParser

_REGISTRY: dict[str, Callable[..., Parser]] = {}


def register_parser(name: str, factory: Callable[..., Parser]) -> None:
    """Make ``get_parser(name, **kwargs)`` call ``factory(**kwargs)``."""
    _REGISTRY[name] = factory


def _hexatagger(**kwargs: Any) -> Parser:
    """The hexatagger, imported on first use (torch is heavy)."""
    from structpe.parser import default
    from structpe.parser.hexatagger import HexatagParser

    if kwargs.get("model") is None:  # the packaged model
        default = default.default_model_dir()
        if not (default / "model.safetensors").is_file():
            raise ParserInputError(
                f"this install has no packaged hexatagger ({default}); pass a trained folder (--model DIR)"
            )
        kwargs["model"] = default
    return HexatagParser(**kwargs)


register_parser("gold", GoldParser)
register_parser("spacy", SpacyParser)
register_parser("hexatagger", _hexatagger)


def available_parsers() -> list[str]:
    return sorted(_REGISTRY)


def get_parser(name: str, **kwargs: Any) -> Parser:
    """Build a parser by name: ``gold``, ``spacy`` (``model=`` a spaCy package name) or
    ``hexatagger`` (``model=`` a trained folder; default: the packaged one). ``nonprojective=`` sets
    the policy for all."""
    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown parser {name!r}; choose from {available_parsers()}") from None
    return factory(**kwargs)


def parser_identity(name: str, model: str | None = None) -> dict[str, Any]:
    """What makes a parser's output change: the spaCy package version, or the hexatagger's files
    (recorded in prepared data's fingerprint and in results' provenance)."""
    if name == "spacy":
        from importlib.metadata import PackageNotFoundError, version

        from structpe.parser.spacy import DEFAULT_SPACY_MODEL

        package = model or DEFAULT_SPACY_MODEL
        try:
            return {"spacy_model": package, "model_version": version(package), "spacy": version("spacy")}
        except PackageNotFoundError:
            return {"spacy_model": package}
    if name == "hexatagger":
        from pathlib import Path

        from structpe.io import sha256_file
        from structpe.parser.default import default_model_dir

        # no model: get_parser falls back to the packaged one, whose files then make the identity
        folder = Path(model or default_model_dir())
        if folder.is_dir():
            return {"files": {f.name: sha256_file(f) for f in sorted(folder.iterdir()) if f.is_file()}}
    return {}

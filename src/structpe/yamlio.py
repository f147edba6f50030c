"""One YAML loader for every file a user writes (recipes, study specs, profiles, parser configs).

PyYAML's ``safe_load`` lets a repeated mapping key silently replace the first one (a recipe label
given twice trains only the second), and reports a ``!!python/...`` tag or a syntax error over
several lines. This loader refuses duplicate keys and turns every YAML error into one line naming
the file and line. It builds on ``yaml.SafeLoader`` (never constructs Python objects).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from structpe.errors import StructpeError


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a mapping key given twice."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: let SafeLoader report it
                break
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is given twice (first on line {first})", key_node.start_mark
                )
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def _one_line(err: yaml.YAMLError) -> str:
    """``line N: problem`` from a PyYAML error (its message spans several lines)."""
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or str(err)
    where = f"line {mark.line + 1}: " if mark is not None else ""
    return where + " ".join(str(problem).split())


def parse_yaml(text: str, where: str, error: type[Exception] = StructpeError) -> Any:
    """The YAML document in ``text``; ``error`` (naming ``where``) when it is not valid YAML, uses
    a Python tag, or repeats a key."""
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as err:
        raise error(f"{where}: not valid YAML ({_one_line(err)})") from None


def load_yaml(path: str | os.PathLike, error: type[Exception] = StructpeError) -> Any:
    """:func:`parse_yaml` of the UTF-8 file ``path`` (a leading BOM dropped); read errors name it."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as err:
        raise error(f"{p}: not UTF-8 text (byte {err.start}: {err.reason})") from None
    return parse_yaml(text, str(p), error)

"""What every evaluation stage of one study cell reads and writes: the trained model, its tokenizer
and parsers, the test sentences, the cache keys, and the ``scores`` / ``wall_s`` of its
``metrics.json`` (:func:`structpe.study.runner.run_cell` builds one :class:`Cell` and hands it to
each stage in turn)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from structpe.io import read_json, write_json_atomic


def flat(prefix: str, d: dict[str, float]) -> dict[str, float]:
    """``d``'s entries as flat ``metrics.json`` scores under ``prefix`` (``ppl.joint`` ...)."""
    return {f"{prefix}.{k}": float(v) for k, v in d.items()}


def cached_eval(
    folder: Path, name: str, key: str, compute: Callable[[], dict[str, float]], log: Callable[[str], None]
) -> tuple[dict[str, float], float]:
    """The scores of one evaluation, from its cache file when the key matches, else computed."""
    path = folder / f"{name}.json"
    if path.is_file():
        cached = read_json(path)
        if cached.get("key") == key:
            return cached["scores"], float(cached["wall_s"])
    log(f"evaluate {name}")
    t0 = time.time()
    scores = compute()
    wall = time.time() - t0
    write_json_atomic(path, {"key": key, "wall_s": round(wall, 2), "scores": scores})
    return scores, wall


@dataclass
class Cell:
    """One cell at its evaluation stages.

    ``test_sentences`` are the cell's own (retagged for a tag control), ``parsed_sentences`` the
    parse's (the leakage audit keeps the parse); ``data_root`` is the study's data root, resolved
    once by the caller (None when no stage of the spec reads shared data)."""

    spec: Any  # the StudySpec
    run_dir: Path  # the cell's pre-training run
    data_root: Path | None
    model: Any
    tokenizer: Any
    parser: Any  # the study's parser
    cell_parser: Any  # the cell's tag source (structpe.parser.tag_controls)
    test_sentences: list[Any]
    parsed_sentences: list[Any]
    keys: dict[str, str]  # one cache key per evaluation (structpe.study.runner.eval_keys)
    log: Callable[[str], None]
    tagged: bool  # the model reads hexatags
    causal: bool  # a decoder (else a masked LM)
    baseline_model: Callable[[], Path]  # the same seed's baseline model, once it exists
    progress: bool = False
    scores: dict[str, float] = field(default_factory=dict)
    wall: dict[str, float] = field(default_factory=dict)

    @property
    def evals(self) -> Path:
        """The cell's cache folder: one ``<name>.json`` per evaluation."""
        return self.run_dir.parent / "evals"

    def cached(self, name: str, compute: Callable[[], dict[str, float]]) -> dict[str, float]:
        """The scores of evaluation ``name``, from its cache file when its key matches, else
        computed; its wall time goes into ``wall_s``."""
        scores, self.wall[name] = cached_eval(self.evals, name, self.keys[name], compute, self.log)
        return scores

    def record(self, name: str, compute: Callable[[], dict[str, float]], prefix: str) -> None:
        """:meth:`cached`, its scores filed under ``prefix``."""
        scores = self.cached(name, compute)
        self.scores.update(flat(prefix, scores))

    def shared_data(self, sub: str) -> Path:
        """``<data root>/<sub>`` (``blimp``, ``syntaxgym``)."""
        if self.data_root is None:
            raise ValueError(f"{sub}: the study's data root was not resolved")
        return self.data_root / sub

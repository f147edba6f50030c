"""The hexatagger's training recipe: the YAML sections and ``ParserTrainConfig`` (``structpe parser train``).

Every option is a typed dataclass field; an unknown key or a value of the wrong type is one clear
error naming the section and key (the closest known key suggested), never a silent default. Kept
apart from the training loop (``structpe.parser.train``) so the CLI and tests can load
and check a recipe without importing the trainer.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from structpe.errors import StructpeError, closest


@dataclass
class ModelSection:
    d_model: int = 256
    n_layers: int = 4
    n_heads: int = 4
    d_ff: int = 1024
    max_positions: int = 512
    dropout: float = 0.1
    labels: bool = True  # predict dependency relations (adds LAS)
    pair_nonterminal: bool = False  # non-terminal head reads [h_t ; h_t+1] (HexataggerConfig)
    encoder: str = "transformer"  # or "bilstm" (d_model = 2 x LSTM hidden; n_heads, d_ff unused)
    d_emb: int = 100  # bilstm: subword vector width (pretrained + trainable tables)


@dataclass
class VectorsSection:
    """word2vec subword vectors for ``encoder: bilstm`` (``structpe.parser.word_vectors``), trained
    on the training treebanks' text plus ``tokenizer.corpora``; off: the frozen table stays zero."""

    enabled: bool = False
    epochs: int = 5
    window: int = 5
    min_count: int = 2


@dataclass
class TokenizerSection:
    vocab_size: int = 12000
    min_frequency: int = 2
    corpora: list[str] = field(default_factory=lambda: ["brown", "gutenberg"])


@dataclass
class DataSection:
    root: str | None = None  # default: structpe.data.paths.data_root()
    train: list[str] = field(default_factory=lambda: ["ewt", "gum", "lines", "partut"])
    dev: str = "ewt"
    max_train_subwords: int = 128  # longer training sentences are skipped (counted in the log)
    limit_train: int | None = None  # first N training sentences (tests, smoke runs)
    limit_dev: int | None = None


@dataclass
class OptimSection:
    lr: float = 2e-3
    min_lr_ratio: float = 0.05
    warmup_steps: int = 200
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.98)
    batch_tokens: int = 4096
    max_steps: int = 100000
    max_minutes: float | None = None  # measured on ``clock``
    clock: str = "wall"  # "cpu": process CPU time / threads, i.e. minutes on dedicated cores
    max_wall_minutes: float | None = None  # an extra wall-clock cap (e.g. a deadline on a busy machine)
    grad_clip: float = 1.0
    ema: float = 0.0  # > 0: evaluate and save an exponential moving average of the weights (decay)
    amp_bf16: bool = False  # bf16 autocast (GPU recipes)
    unk_dropout: float = 0.03  # replace this share of training subwords by [UNK]
    eval_every: int = 500  # steps (0: off)
    eval_every_minutes: float | None = None  # also evaluate on this wall-clock period
    eval_batch_tokens: int = 8192


def _check_types(section: str, values: Any) -> None:
    """Refuse a recipe value of the wrong type (``d_model: big``) before it fails deep in training:
    each scalar field must hold the type of its default (an int is fine where a float is expected)."""
    want = {bool: (bool,), int: (int,), float: (int, float), str: (str,)}
    for f in dataclasses.fields(values):
        default, value = f.default, getattr(values, f.name)
        if default is None or value is None or type(default) not in want:
            continue
        ok = isinstance(value, want[type(default)]) and (type(default) is bool or not isinstance(value, bool))
        if not ok:
            raise StructpeError(
                f"{section}.{f.name} must be of type {type(default).__name__}, "
                f"got {value!r} ({type(value).__name__})"
            )


@dataclass
class ParserTrainConfig:
    """A parser recipe (YAML under ``structpe/configs/parser``)."""

    model: ModelSection = field(default_factory=ModelSection)
    tokenizer: TokenizerSection = field(default_factory=TokenizerSection)
    vectors: VectorsSection = field(default_factory=VectorsSection)
    data: DataSection = field(default_factory=DataSection)
    optim: OptimSection = field(default_factory=OptimSection)
    output_dir: str = "runs/hexatagger"
    seed: int = 0
    threads: int | None = None
    device: str = "cpu"

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ParserTrainConfig:
        sections = {
            "model": ModelSection,
            "tokenizer": TokenizerSection,
            "vectors": VectorsSection,
            "data": DataSection,
            "optim": OptimSection,
        }
        kwargs: dict[str, Any] = {}
        for key, value in d.items():
            if key in sections:
                sec = sections[key]
                unknown = set(value or {}) - set(sec.__dataclass_fields__)
                if unknown:
                    first = sorted(unknown)[0]
                    raise StructpeError(
                        f"unknown keys in '{key}': {sorted(unknown)}"
                        f"{closest(first, sec.__dataclass_fields__)}"
                    )
                kwargs[key] = sec(**(value or {}))
                _check_types(key, kwargs[key])
            elif key in cls.__dataclass_fields__:
                kwargs[key] = value
            else:
                hint = closest(key, [*sections, *cls.__dataclass_fields__])
                raise StructpeError(f"unknown config key {key!r}{hint}")
        cfg = cls(**kwargs)
        cfg.optim.betas = tuple(cfg.optim.betas)  # type: ignore[assignment]
        return cfg

    @classmethod
    def from_yaml(cls, path: str | os.PathLike) -> ParserTrainConfig:
        from structpe.yamlio import load_yaml

        p = Path(path)
        if not p.is_file():
            builtin = Path(__file__).resolve().parent.parent / "configs" / "parser" / f"{path}.yaml"
            if builtin.is_file():
                p = builtin
            else:
                raise FileNotFoundError(f"config {path} not found (nor built-in recipe {builtin.name})")
        return cls.from_dict(load_yaml(p) or {})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

"""Pre-training recipes: one YAML file = ``model:`` (SiPEConfig kwargs) + ``train:`` (TrainConfig).

Recipes live in ``src/structpe/configs/<family>/<injection>-<profile>.yaml`` (``configs/`` at the
repository root links there) and are named by their path without the suffix, e.g.
``txl/position-tiny``. Any key can be overridden on the command line::

    structpe pretrain --config txl/position-tiny train.lr=1e-3 model.d_model=64 max_steps=200

A bare key (``max_steps=200``) is looked up in ``train`` and then ``model``; a key that exists in
neither section fails with the list of valid keys and the closest match, *before* anything runs.
Values are parsed as YAML scalars and coerced to the field's type (``1e-3`` -> float).
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from structpe.errors import RecipeError
from structpe.io import atomic_write_text
from structpe.models.config import SiPEConfig
from structpe.yamlio import load_yaml

CONFIG_ROOT = Path(__file__).resolve().parent.parent / "configs"
TOP_LEVEL_KEYS = ("model", "train", "description", "adapter")
OBJECTIVES = ("auto", "causal", "mlm")
SCHEDULES = ("cosine", "linear", "constant_with_warmup")


@dataclass
class TrainConfig:
    """Training settings (the ``train:`` section of a recipe).

    Data
      dataset          folder written by ``structpe prepare`` (``train`` + ``validation`` splits)
      tokenizer        tokenizer folder; default: the one recorded in the dataset's metadata
      output_dir       run folder (checkpoints, resolved config, metrics.csv, loss.png);
                       default ``runs/<recipe name>``
    Objective
      objective        ``causal`` (next token) or ``mlm``; ``auto`` = causal for txl, mlm for encoders
      mlm_probability  fraction of tokens masked by the MLM collator (80/10/10 mask/random/keep)
    Optimisation (AdamW)
      lr, weight_decay, warmup (steps), schedule, max_grad_norm, max_steps
      batch_size       sequences per device per step; global batch = batch_size * grad_accum * world
      grad_accum       gradient accumulation steps
      seq_len          the longest training sequence; the dataset must have been packed at <= this
    Bookkeeping
      eval_every       steps between validation passes (validation loss / perplexity)
      eval_batches     cap on validation batches per pass (None = the whole validation split)
      save_every       steps between checkpoints (default: eval_every)
      save_total_limit checkpoints kept (oldest deleted first)
      log_every        steps between training-loss log rows
      seed             seeds model init, data order, masking and dropout
      num_workers      DataLoader workers (0 keeps exact resume simple: all randomness in one process)
      threads          CPU training only: intra-op threads; 0 = auto, the cores that are free now
                       (cores minus the 1-minute load average, at least 1; ``OMP_NUM_THREADS``, when
                       set, wins). On a shared 2-core machine at load ~20, 1 thread ran the tiny
                       TXL step 3.7x faster than 2 (benchmarks/train_throughput.py)
      bf16             bfloat16 autocast: GPUs, and CPUs with native bf16 (AVX-512 BF16 / AMX;
                       ``structpe.hardware.native_bf16``); emulated bf16 on other CPUs is
                       several times slower than float32. ``auto`` (the CPU recipes): on where
                       it is native
      fast_bf16        bf16 parameters and activations with float32 master weights in a fused AdamW
                       (``structpe.train.master_weights``) instead of bf16 autocast over float32
                       parameters: no per-layer casts. Needs bf16 (true, or auto where native).
                       Off by default (benchmarks/train_throughput.py ``--precision bf16-fast``
                       measures it; docs/pretraining.md)
      compile          ``torch.compile`` the training forward (inductor; needs a C++ compiler on
                       CPU). Off by default: on real prepared batches of the quickstart model it
                       ran 0.305 s per step against 0.190 s for bf16 eager (random batches had
                       suggested the opposite; docs/pretraining.md). Evaluation stays eager (its
                       batch shapes vary); training drops each epoch's partial last batch, which
                       would trigger a recompile
      progress         show progress bars
    """

    dataset: str | None = None
    tokenizer: str | None = None
    output_dir: str | None = None
    objective: str = "auto"
    mlm_probability: float = 0.15
    lr: float = 5e-4
    weight_decay: float = 0.01
    warmup: int = 100
    schedule: str = "cosine"
    max_grad_norm: float = 1.0
    max_steps: int = 1000
    batch_size: int = 16
    eval_batch_size: int | None = None
    grad_accum: int = 1
    seq_len: int = 128
    eval_every: int = 200
    eval_batches: int | None = None
    save_every: int | None = None
    save_total_limit: int | None = 3
    log_every: int = 10
    seed: int = 42
    num_workers: int = 0
    threads: int = 0
    bf16: bool | str = False  # True / False / "auto" (= native_bf16())
    fast_bf16: bool = False
    compile: bool = False
    progress: bool = True

    def validate(self, where: str = "train") -> None:
        def need(ok: bool, msg: str) -> None:
            if not ok:
                raise RecipeError(f"{where}: {msg}")

        need(self.objective in OBJECTIVES, f"objective must be one of {OBJECTIVES}, got {self.objective!r}")
        need(self.schedule in SCHEDULES, f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        p = self.mlm_probability
        need(0.0 < p < 1.0, f"mlm_probability must be in (0, 1), got {p}")
        for name in ("max_steps", "batch_size", "grad_accum", "seq_len", "eval_every", "log_every"):
            need(getattr(self, name) >= 1, f"{name} must be >= 1, got {getattr(self, name)}")
        need(self.lr > 0, f"lr must be > 0, got {self.lr}")
        need(self.warmup >= 0, f"warmup must be >= 0, got {self.warmup}")
        need(
            self.warmup <= self.max_steps,
            f"max_steps {self.max_steps} is below warmup {self.warmup}: the lr would never reach "
            f"lr={self.lr}; lower warmup too (e.g. train.warmup={self.max_steps // 10})",
        )
        need(self.save_every is None or self.save_every >= 1, "save_every must be >= 1")
        need(self.num_workers >= 0, "num_workers must be >= 0")
        need(self.threads >= 0, "threads must be >= 0 (0 = auto)")
        bf16 = self.bf16
        need(isinstance(bf16, bool) or bf16 == "auto", f"bf16 must be true, false or auto, got {bf16!r}")
        need(
            not self.fast_bf16 or bf16 is not False,
            "fast_bf16=true trains in bf16 and needs bf16=true or auto (bf16 is false)",
        )

    def resolved_bf16(self) -> bool:
        """``bf16`` with ``auto`` resolved: bf16 autocast where it is native (``native_bf16``)."""
        from structpe.hardware import resolve_bf16

        return resolve_bf16(self.bf16)


@dataclass
class Recipe:
    """A resolved recipe: SiPEConfig kwargs, the train settings and where they came from."""

    model: dict[str, Any]
    train: TrainConfig
    name: str = "run"
    source: str | None = None
    description: str | None = None
    overrides: list[str] = field(default_factory=list)
    adapter: dict[str, Any] | None = None  # a Hugging Face base + SiPE adapter (structpe.train.adapter)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.description:
            out["description"] = self.description
        out["model"] = dict(self.model)
        out["train"] = dataclasses.asdict(self.train)
        if self.adapter is not None:
            out["adapter"] = dict(self.adapter)
        return out

    def dump(self, path: str | Path) -> None:
        """Write the resolved recipe (what actually ran) as YAML, with its origin in a comment."""
        header = f"# resolved recipe: {self.source or self.name}"
        if self.overrides:
            header += "\n# overrides: " + " ".join(self.overrides)
        atomic_write_text(path, header + "\n" + yaml.safe_dump(self.to_dict(), sort_keys=False))


def model_keys() -> dict[str, Any]:
    """Valid ``model:`` keys (SiPEConfig's constructor arguments) and their defaults."""
    sig = inspect.signature(SiPEConfig.__init__)
    return {
        n: (None if p.default is inspect.Parameter.empty else p.default)
        for n, p in sig.parameters.items()
        if n != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    }


def train_keys() -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(TrainConfig)}


def list_recipes(root: Path = CONFIG_ROOT) -> list[str]:
    """Pre-training recipe names in the package, e.g. ``txl/position-tiny`` (one folder per family)."""
    from structpe.models.config import FAMILIES

    return sorted(
        f"{fam}/{p.stem}"
        for fam in (*FAMILIES, "adapters")
        if (root / fam).is_dir()
        for p in (root / fam).glob("*.yaml")
    )


def default_run_dir(recipe: Recipe) -> Path:
    """The run folder of a recipe without ``train.output_dir``: ``runs/<family>-<name>``."""
    return Path("runs") / recipe.name.replace("/", "-")


def recipe_table(root: Path = CONFIG_ROOT) -> list[str]:
    """``structpe pretrain --list``: one line per recipe with the exact parameters its SiPE variant adds
    over the family's plain model (``sipe_parameter_count``: tag tables, tag heads, the rest); for an
    adapter recipe, what it adds to its base (``adapter_parameter_count``: SiPE's parts, LoRA in the
    rest), its base sized by the base's folder or the packaged recipe that writes it."""
    from structpe.models.registry import sipe_parameter_count
    from structpe.train.adapter import adapter_parameter_count

    names = list_recipes(root)
    recipes = {name: load_recipe(root / f"{name}.yaml") for name in names}
    # the bases packaged recipes build from scratch, by the folder their runs write them to
    bases = {
        str(default_run_dir(r) / "final" / "base"): r.adapter["base_init"]
        for r in recipes.values()
        if r.adapter is not None and r.adapter.get("base_init")
    }
    width = max((len(n) for n in names), default=6)
    lines = [
        f"{'recipe':<{width}}  {'extra params':>12}  (tag tables + tag heads + projections/fusion"
        "; adapters: + LoRA)"
    ]
    for name, recipe in recipes.items():
        if recipe.adapter is not None:
            c = adapter_parameter_count(recipe.adapter, str(recipe.source), bases)
            if c is None:
                lines.append(f"{name:<{width}}  {'?':>12}  (the base model's folder is not there yet)")
                continue
        else:
            model = {k: v for k, v in recipe.model.items() if not (k == "vocab_size" and v is None)}
            c = sipe_parameter_count(SiPEConfig(**model))
        parts = f"({c['prior']:,} + {c['heads']:,} + {c['other']:,})"
        lines.append(f"{name:<{width}}  {c['total']:>12,}  {parts}")
    return lines


def resolve_recipe_path(config: str | Path) -> Path:
    """A path to a YAML file, or a recipe name (``txl/position-tiny``) under the package configs."""
    p = Path(config)
    if p.is_file():
        return p
    for cand in (CONFIG_ROOT / f"{config}.yaml", CONFIG_ROOT / str(config)):
        if cand.is_file():
            return cand
    names = list_recipes()
    close = difflib.get_close_matches(str(config), names, n=3)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    avail = ", ".join(names) if names else "(none found)"
    raise RecipeError(f"no recipe file or name {str(config)!r}.{hint} Available recipes: {avail}")


def _unknown(key: str, section: str, valid: list[str], where: str) -> RecipeError:
    close = difflib.get_close_matches(key, valid, n=3)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return RecipeError(
        f"{where}: unknown {section} key {key!r}.{hint} Valid {section} keys: {', '.join(sorted(valid))}"
    )


def _coerce(value: Any, annotation: Any, key: str, where: str) -> Any:
    """Coerce a YAML value to a TrainConfig field type (YAML reads ``1e-3`` as a string)."""
    args = typing.get_args(annotation)
    types = [a for a in args if a is not type(None)] if args else [annotation]
    if value is None:
        if type(None) in args:
            return None
        raise RecipeError(f"{where}: {key} cannot be null")
    base = types[0]
    if base is bool and str in types and str(value).lower() == "auto":  # bf16: true, false or auto
        return "auto"
    try:
        if base is bool:
            if isinstance(value, bool):
                return value
            if str(value).lower() in ("true", "1", "yes", "on"):
                return True
            if str(value).lower() in ("false", "0", "no", "off"):
                return False
            raise ValueError(value)
        if base is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError(value)
            return int(float(value)) if isinstance(value, str) else int(value)
        if base is float:
            return float(value)
        if base is str:
            return str(value)
    except (TypeError, ValueError):
        kind = "bool (true, false or auto)" if base is bool and str in types else base.__name__
        raise RecipeError(f"{where}: {key}={value!r} is not a valid {kind}") from None
    return value


def _coerce_model(key: str, value: Any, default: Any, where: str) -> Any:
    if key == "vocab_size" and value in (None, "auto"):
        return None  # taken from the tokenizer by pretrain()
    if isinstance(value, str) and isinstance(default, (int, float)) and not isinstance(default, bool):
        try:
            return type(default)(float(value)) if isinstance(default, int) else float(value)
        except ValueError:
            raise RecipeError(f"{where}: {key}={value!r} is not a number") from None
    return value


def _parse_value(text: str) -> Any:
    try:
        return yaml.safe_load(text) if text != "" else None
    except yaml.YAMLError:
        return text


def load_recipe(config: str | Path, overrides: list[str] | None = None) -> Recipe:
    """Read a recipe (path or name), apply ``key=value`` overrides, validate every key and value."""
    path = resolve_recipe_path(config)
    raw = load_yaml(path, RecipeError) or {}
    if not isinstance(raw, dict):
        raise RecipeError(f"{path}: a recipe is a mapping with 'model:' and 'train:' sections")
    for key in raw:
        if key not in TOP_LEVEL_KEYS:
            raise _unknown(str(key), "top-level", list(TOP_LEVEL_KEYS), str(path))
    model_raw = raw.get("model") or {}
    train_raw = raw.get("train") or {}
    if not isinstance(model_raw, dict) or not isinstance(train_raw, dict):
        raise RecipeError(f"{path}: 'model' and 'train' must be mappings")
    mkeys, tkeys = model_keys(), train_keys()
    for key in model_raw:
        if key not in mkeys:
            raise _unknown(str(key), "model", list(mkeys), str(path))
    for key in train_raw:
        if key not in tkeys:
            raise _unknown(str(key), "train", list(tkeys), str(path))
    adapter_raw = raw.get("adapter")
    if adapter_raw is not None and not isinstance(adapter_raw, dict):
        raise RecipeError(f"{path}: 'adapter' must be a mapping")
    model = dict(model_raw)
    train = dict(train_raw)
    adapter = dict(adapter_raw) if adapter_raw is not None else None
    for item in overrides or []:
        if "=" not in item:
            raise RecipeError(f"override {item!r} is not of the form key=value (e.g. train.lr=1e-3)")
        key, text = item.split("=", 1)
        key = key.strip()
        value = _parse_value(text)
        section, _, name = key.rpartition(".")
        if section == "":
            in_train, in_model = name in tkeys, name in mkeys
            if in_train and in_model:
                raise RecipeError(f"override {key!r} is ambiguous: write train.{name}= or model.{name}=")
            if not (in_train or in_model):
                close = difflib.get_close_matches(name, [*tkeys, *mkeys], n=3)
                named = [f"train.{c}" if c in tkeys else f"model.{c}" for c in close]
                hint = f" Did you mean {', '.join(repr(c) for c in named)}?" if named else ""
                raise RecipeError(
                    f"command line: unknown key {key!r}.{hint} Valid keys: train.{{{', '.join(tkeys)}}} "
                    f"and model.{{{', '.join(mkeys)}}} (bare names are looked up in train, then model)"
                )
            section = "train" if in_train else "model"
        if section == "train":
            if name not in tkeys:
                raise _unknown(name, "train", list(tkeys), "command line")
            train[name] = value
        elif section == "model":
            if name not in mkeys:
                raise _unknown(name, "model", list(mkeys), "command line")
            model[name] = value
        elif section == "adapter" and adapter is not None:
            adapter[name] = value
        else:
            raise RecipeError(f"override {key!r}: section must be 'train' or 'model', not {section!r}")
    for key, value in list(model.items()):
        model[key] = _coerce_model(key, value, mkeys[key], str(path))
    hints = typing.get_type_hints(TrainConfig)
    tc = TrainConfig(**{k: _coerce(v, hints[k], f"train.{k}", str(path)) for k, v in train.items()})
    tc.validate(f"{path} (train)")
    try:
        SiPEConfig(**{k: v for k, v in model.items() if not (k == "vocab_size" and v is None)})
    except (TypeError, ValueError) as err:
        raise RecipeError(f"{path} (model): {err}") from None
    if adapter is not None:
        from structpe.train.adapter import adapter_settings

        adapter_settings(adapter, str(path))  # validates every key and value now, before anything runs
    try:
        name = str(path.resolve().relative_to(CONFIG_ROOT.resolve()).with_suffix(""))
    except ValueError:
        name = path.stem
    return Recipe(
        model=model,
        train=tc,
        name=name,
        source=str(path),
        description=raw.get("description"),
        overrides=list(overrides or []),
        adapter=adapter,
    )

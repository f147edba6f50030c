"""The GLUE tasks stored locally: their specs, loading, metrics and task selection.

Tasks (data/glue/PROVENANCE.md): CoLA, SST-2, MRPC, RTE, STS-B; QNLI has only a dev split, so it
loads but cannot be fine-tuned here. Files are read with ``QUOTE_NONE`` tab splitting (quotes
inside sentences are text), MRPC's UTF-8 BOM is stripped, gzip is handled. The paper does not name
its per-task metric; we use BERT's convention (Devlin et al. 2019, table 1), which gives exactly
one: MCC for CoLA, F1 for MRPC (and QQP), Spearman for STS-B, accuracy otherwise
(``TaskSpec.metric``, the task's ``main``). Kept apart from fine-tuning
(``structpe.eval.glue.finetune``) because it needs no model.
"""

from __future__ import annotations

import csv
import gzip
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class TaskSpec:
    name: str
    folder: str
    text_columns: tuple[str | int, ...]
    label_column: str | int
    num_labels: int
    metrics: tuple[str, ...]
    header: bool = True
    label_map: tuple[tuple[str, int], ...] | None = None
    splits: tuple[str, ...] = ("train", "dev")
    metric: str = "accuracy"  # the one number reported per task (module docstring)

    @property
    def regression(self) -> bool:
        return self.num_labels == 1


TASKS: dict[str, TaskSpec] = {
    "cola": TaskSpec("cola", "CoLA", (3,), 1, 2, ("mcc",), header=False, metric="mcc"),
    "sst2": TaskSpec("sst2", "SST-2", ("sentence",), "label", 2, ("accuracy",)),
    "mrpc": TaskSpec(
        "mrpc", "MRPC", ("#1 String", "#2 String"), "Quality", 2, ("f1", "accuracy"), metric="f1"
    ),
    "rte": TaskSpec(
        "rte",
        "RTE",
        ("sentence1", "sentence2"),
        "label",
        2,
        ("accuracy",),
        label_map=(("entailment", 0), ("not_entailment", 1)),
    ),
    "stsb": TaskSpec(
        "stsb", "STS-B", ("sentence1", "sentence2"), "score", 1, ("pearson", "spearman"), metric="spearman"
    ),
    "qnli": TaskSpec(
        "qnli",
        "QNLI",
        ("question", "sentence"),
        "label",
        2,
        ("accuracy",),
        label_map=(("entailment", 0), ("not_entailment", 1)),
        splits=("dev",),
    ),
}


FINETUNE_TASKS = ("cola", "sst2", "mrpc", "rte", "stsb")


def task_spec(task: str) -> TaskSpec:
    key = task.lower().replace("-", "").replace("_", "")
    if key not in TASKS:
        raise ValueError(f"unknown GLUE task {task!r}; stored here: {sorted(TASKS)}")
    return TASKS[key]


@dataclass(frozen=True)
class GlueExample:
    texts: tuple[str, ...]
    label: float | int


def _open_split(folder: Path, split: str) -> tuple[Path, Any]:
    for name in (f"{split}.tsv", f"{split}.tsv.gz"):
        p = folder / name
        if p.is_file():
            if name.endswith(".gz"):
                return p, gzip.open(p, "rt", encoding="utf-8-sig", newline="")
            return p, open(p, encoding="utf-8-sig", newline="")  # noqa: SIM115
    raise FileNotFoundError(f"no {split}.tsv(.gz) in {folder}")


def load_glue(
    task: str, split: str, data_dir: str | Path | None = None, limit: int | None = None
) -> list[GlueExample]:
    """Examples of ``task``/``split`` from ``<data>/glue/<Task>/<split>.tsv[.gz]``."""
    from structpe.data.paths import data_root

    spec = task_spec(task)
    if split not in spec.splits:
        raise ValueError(f"GLUE {spec.folder} has no {split!r} split here (available: {spec.splits})")
    if data_dir is not None and (Path(data_dir) / spec.folder).is_dir():
        folder = Path(data_dir) / spec.folder
    else:
        folder = data_root(data_dir, sub=f"glue/{spec.folder}")
    path, f = _open_split(folder, split)
    label_map = dict(spec.label_map) if spec.label_map else None
    out: list[GlueExample] = []
    with f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader) if spec.header else None
        width = len(header) if header else None
        cols = [header.index(c) if isinstance(c, str) else c for c in (*spec.text_columns, spec.label_column)]
        for line_no, row in enumerate(reader, start=2 if header else 1):
            if not row:
                continue
            if width is not None and len(row) != width:
                raise ValueError(f"{path}:{line_no}: {len(row)} columns, header has {width}")
            try:
                *texts, raw = (row[c] for c in cols)
            except IndexError as err:
                raise ValueError(f"{path}:{line_no}: too few columns ({len(row)})") from err
            if spec.regression:
                label: float | int = float(raw)
            elif label_map is not None:
                if raw not in label_map:
                    raise ValueError(f"{path}:{line_no}: unknown label {raw!r}")
                label = label_map[raw]
            else:
                label = int(raw)
            out.append(GlueExample(tuple(t.strip() for t in texts), label))
            if limit is not None and len(out) >= limit:
                break
    return out


def glue_metrics(task: str, predictions: Sequence[float], labels: Sequence[float]) -> dict[str, float]:
    """The task's standard metrics (sklearn / scipy) and ``main``, the one the paper's tables report.
    A constant prediction scores 0 on every correlation (MCC, Pearson, Spearman)."""
    from scipy.stats import pearsonr, spearmanr
    from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

    spec = task_spec(task)
    p = np.asarray(predictions)
    y = np.asarray(labels)
    if len(p) != len(y) or len(p) == 0:
        raise ValueError(f"need equally many predictions and labels (got {len(p)} and {len(y)})")
    out: dict[str, float] = {}
    if "mcc" in spec.metrics:
        out["mcc"] = float(matthews_corrcoef(y, p))
    if "accuracy" in spec.metrics:
        out["accuracy"] = float(accuracy_score(y, p))
    if "f1" in spec.metrics:
        out["f1"] = float(f1_score(y, p, pos_label=1))
    if "pearson" in spec.metrics:
        # A constant prediction (a fine-tuning run that collapsed) has no correlation: scipy answers
        # NaN, which would poison every mean and macro above it; score it 0, as sklearn's MCC does.
        constant = bool(np.ptp(p) == 0)
        out["pearson"] = 0.0 if constant else float(pearsonr(p, y)[0])
        out["spearman"] = 0.0 if constant else float(spearmanr(p, y)[0])
    out["main"] = out[spec.metric]
    return out


def majority_baseline(task: str, train_labels: Sequence[float], dev_labels: Sequence[float]) -> float:
    """The task's ``main`` metric when every dev example gets the most frequent training label: what
    a model without information reaches (accuracy / F1 of that class, MCC 0). A regression task's
    constant prediction has no correlation: 0 by convention."""
    spec = task_spec(task)
    if spec.regression:
        return 0.0
    majority = Counter(train_labels).most_common(1)[0][0]
    with warnings.catch_warnings():  # F1 of a class never predicted: sklearn warns, the value is 0
        warnings.simplefilter("ignore")
        return glue_metrics(task, [majority] * len(dev_labels), dev_labels)["main"]


def resolve_tasks(tasks: Sequence[str] | str) -> list[str]:
    """Task names (any spelling ``task_spec`` accepts), or ``all`` for every fine-tunable task."""
    names = [tasks] if isinstance(tasks, str) else list(tasks)
    if any(t.lower() == "all" for t in names):
        return list(FINETUNE_TASKS)
    out = []
    for t in names:
        spec = task_spec(t)
        if "train" not in spec.splits:
            raise ValueError(f"GLUE {spec.folder} has only {spec.splits} here; it cannot be fine-tuned")
        if spec.name not in out:
            out.append(spec.name)
    return out

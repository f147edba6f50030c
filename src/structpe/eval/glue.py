"""GLUE fine-tuning with per-sentence hexatags (docs/design.md §4; SiPE §4 "GLUE").

Tasks stored locally (data/glue/PROVENANCE.md): CoLA, SST-2, MRPC, RTE, STS-B; QNLI has only a
dev split, so it loads but cannot be fine-tuned here. Files are read with ``QUOTE_NONE`` tab
splitting (quotes inside sentences are text), MRPC's UTF-8 BOM is stripped, gzip is handled.

Reporting, as the SiPE paper's GLUE tables do (tables 4-6, 9-10): one number per task, mean
(± sd) over seeds, and the macro average = the plain mean of those numbers over the tasks run.
The paper does not name its per-task metric; we use BERT's convention (Devlin et al. 2019,
table 1), which gives exactly one: MCC for CoLA, F1 for MRPC (and QQP), Spearman for STS-B,
accuracy otherwise (``TaskSpec.metric``, the task's ``main``). Every other metric is kept too.
Per seed the *best dev epoch* by that metric is reported (the paper fine-tunes 20 epochs,
table 11) and the last epoch beside it; the selection is on the dev split that is also reported,
as in the papers it follows, so ``best`` is optimistic; ``last`` involves no selection.

Tags: each sentence is parsed on its own (pairs: tag each separately) and its tags are placed on
the first token of each word within that sentence's segment of the pair encoding (character
offsets). Loss is computed here from the logits (CE, or MSE for STS-B), so any
classifier works: our encoders' ``...ForSequenceClassification`` or any HF
``AutoModelForSequenceClassification``.
"""

from __future__ import annotations

import csv
import gzip
import json
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from structpe.eval.scoring import (
    IGNORE,
    Parser,
    align_tags_by_offsets,
    first_tokens_of_words,
    forward_logits,
    get_field,
    is_structpe_model,
    model_device,
    parse_texts,
    uses_tags,
)


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


# ----------------------------------------------------------------------------------------------
# metrics


def glue_metrics(task: str, predictions: Sequence[float], labels: Sequence[float]) -> dict[str, float]:
    """The task's standard metrics (sklearn / scipy) and ``main``, the one the paper's tables report."""
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
        out["pearson"] = float(pearsonr(p, y)[0])
        out["spearman"] = float(spearmanr(p, y)[0])
    out["main"] = out[spec.metric]
    return out


# ----------------------------------------------------------------------------------------------
# features


@dataclass
class Features:
    input_ids: list[list[int]]
    terminal_ids: list[list[int]]
    nonterminal_ids: list[list[int]]
    labels: list[float | int]
    unaligned_words: int = 0
    token_type_ids: list[list[int]] | None = None  # segment ids, for HF models that use them (BERT)
    deprel_ids: list[list[int]] | None = None  # DEPREL prior models (n_deprels > 0): UD label ids


def uses_deprels(model: Any) -> bool:
    """True for a structpe model whose prior has a DEPREL table (SiPE table 12)."""
    return is_structpe_model(model) and getattr(model.config, "n_deprels", 0) > 0


def _deprel_row(text: str, offsets: Sequence[tuple[int, int]], parse: Any, scorable: Sequence[bool],
                row: list[int]) -> None:
    """Put each word's UD label id on its first token (where its tags go) in ``row``."""
    from structpe.syntax.deprels import deprel_ids

    labels = get_field(parse, "deprels")
    if labels is None:
        raise ValueError("this model's prior reads dependency labels (n_deprels > 0), but the parser "
                         "gives none; tag with a labelling parser (spacy, or a hexatagger with labels)")
    ids, _ = deprel_ids(labels)
    for tok, label in zip(first_tokens_of_words(text, offsets, get_field(parse, "words"), scorable), ids,
                          strict=True):
        if tok is not None:
            row[tok] = label


def featurize(
    examples: Sequence[GlueExample],
    tokenizer: Any,
    parser: Parser | None,
    *,
    max_length: int = 128,
    tagged: bool = True,
    parse_cache: dict[str, Any] | None = None,
    deprels: bool = False,
) -> Features:
    """Tokenize (pairs as pairs) and put each sentence's own tags (and, with ``deprels``, its UD
    labels) on its words' first tokens."""
    n_seg = len(examples[0].texts) if examples else 1
    if tagged and parser is None:
        raise ValueError("this model reads hexatags: give a parser")
    cache = parse_cache if parse_cache is not None else {}
    if tagged:
        todo = sorted({t for e in examples for t in e.texts if t not in cache})
        if todo:
            for t, ps in zip(todo, parse_texts(parser, todo) or [], strict=True):
                cache[t] = ps
    cols = [[e.texts[i] for e in examples] for i in range(n_seg)]
    enc = tokenizer(*cols, truncation=True, max_length=max_length, return_offsets_mapping=True)
    feats = Features([], [], [], [e.label for e in examples])
    if "token_type_ids" in enc:
        feats.token_type_ids = [list(x) for x in enc["token_type_ids"]]
    if deprels:
        feats.deprel_ids = []
    for k, ex in enumerate(examples):
        ids = list(enc["input_ids"][k])
        offs = [tuple(o) for o in enc["offset_mapping"][k]]
        seq = enc.sequence_ids(k)
        t = [IGNORE] * len(ids)
        n = [IGNORE] * len(ids)
        d = [IGNORE] * len(ids)
        if tagged:
            for s, text in enumerate(ex.texts):
                scorable = [sid == s for sid in seq]
                ts, ns, missed = align_tags_by_offsets(text, offs, cache[text], scorable)
                feats.unaligned_words += missed
                for i in range(len(ids)):
                    if scorable[i] and ts[i] != IGNORE:
                        t[i], n[i] = ts[i], ns[i]
                if deprels:
                    _deprel_row(text, offs, cache[text], scorable, d)
        if feats.deprel_ids is not None:
            feats.deprel_ids.append(d)
        feats.input_ids.append(ids)
        feats.terminal_ids.append(t)
        feats.nonterminal_ids.append(n)
    return feats


def _collate(f: Features, idx: Sequence[int], pad_id: int) -> dict[str, torch.Tensor]:
    L = max(len(f.input_ids[i]) for i in idx)
    B = len(idx)
    ids = torch.full((B, L), pad_id, dtype=torch.long)
    mask = torch.zeros((B, L), dtype=torch.long)
    t = torch.full((B, L), IGNORE, dtype=torch.long)
    n = torch.full((B, L), IGNORE, dtype=torch.long)
    for b, i in enumerate(idx):
        m = len(f.input_ids[i])
        ids[b, :m] = torch.tensor(f.input_ids[i])
        mask[b, :m] = 1
        t[b, :m] = torch.tensor(f.terminal_ids[i])
        n[b, :m] = torch.tensor(f.nonterminal_ids[i])
    batch = {"input_ids": ids, "attention_mask": mask, "terminal_ids": t, "nonterminal_ids": n}
    if f.deprel_ids is not None:
        d = torch.full((B, L), IGNORE, dtype=torch.long)
        for b, i in enumerate(idx):
            d[b, : len(f.deprel_ids[i])] = torch.tensor(f.deprel_ids[i])
        batch["deprel_ids"] = d
    if f.token_type_ids is not None:
        tt = torch.zeros((B, L), dtype=torch.long)
        for b, i in enumerate(idx):
            tt[b, : len(f.token_type_ids[i])] = torch.tensor(f.token_type_ids[i])
        batch["token_type_ids"] = tt
    return batch


def _forward(model: Any, batch: Mapping[str, torch.Tensor], tagged: bool) -> torch.Tensor:
    dev = model_device(model)
    extra = {}
    # segment ids only for HF models (ours are configured with one segment type unless trained otherwise)
    if "token_type_ids" in batch and not is_structpe_model(model):
        extra["token_type_ids"] = batch["token_type_ids"].to(dev)
    if "deprel_ids" in batch and tagged:
        extra["deprel_ids"] = batch["deprel_ids"].to(dev)
    out = forward_logits(
        model,
        batch["input_ids"].to(dev),
        batch["attention_mask"].to(dev),
        batch["terminal_ids"].to(dev) if tagged else None,
        batch["nonterminal_ids"].to(dev) if tagged else None,
        **extra,
    )
    return out.logits


@torch.no_grad()
def predict(model: Any, feats: Features, *, regression: bool, batch_size: int = 64, pad_id: int = 0) -> list:
    model.eval()
    tagged = uses_tags(model)
    preds: list = []
    for s in range(0, len(feats.input_ids), batch_size):
        idx = list(range(s, min(s + batch_size, len(feats.input_ids))))
        logits = _forward(model, _collate(feats, idx, pad_id), tagged).float()
        preds += logits.squeeze(-1).tolist() if regression else logits.argmax(-1).tolist()
    return preds


def load_classifier(path: str | Path, num_labels: int) -> Any:
    """A sequence classifier from a saved folder: ours (structpe config) or any HF checkpoint."""
    path = Path(path)
    cfg_file = path / "config.json"
    if not cfg_file.is_file():
        raise FileNotFoundError(f"{path} has no config.json (expected a save_pretrained folder)")
    cfg = json.loads(cfg_file.read_text())
    # a saved classification head of another size (e.g. 2 labels, then STS-B's 1) is replaced by a
    # fresh one, as fine-tuning trains the head anew anyway
    kw: dict[str, Any] = {"num_labels": num_labels, "ignore_mismatched_sizes": True}
    if num_labels == 1:
        kw["problem_type"] = "regression"
    if cfg.get("model_type") == "structpe-sipe":
        from structpe.models import model_class

        return model_class(cfg["family"], "classification").from_pretrained(path, **kw)
    from transformers import AutoModelForSequenceClassification

    return AutoModelForSequenceClassification.from_pretrained(path, **kw)


def recorded_parser(model_path: str | Path) -> dict[str, Any] | None:
    """The parser that prepared a structpe model's pre-training data, or None if nothing records it.

    ``structpe pretrain`` writes ``summary.json`` (with the dataset folder) next to ``final/`` and
    the checkpoints; the dataset's ``structpe_prepare.json`` holds the parser and its settings
    (spaCy package, hexatagger folder, quantization). GLUE tags its sentences with that parser so
    fine-tuning sees the tags pre-training saw.
    """
    from structpe.train.prepare import METADATA_FILE

    model_path = Path(model_path)
    for summary in (model_path / "summary.json", model_path.parent / "summary.json"):
        if not summary.is_file():
            continue
        dataset = json.loads(summary.read_text()).get("dataset")
        meta_file = Path(dataset) / METADATA_FILE if dataset else None
        if meta_file is None or not meta_file.is_file():
            return None
        settings = json.loads(meta_file.read_text()).get("settings", {})
        return {
            "parser": settings.get("parser"),
            "parser_kwargs": dict(settings.get("parser_kwargs") or {}),
            "source": str(meta_file),
        }
    return None


def finetune_task(
    model_fn: Callable[[int], Any],
    tokenizer: Any,
    task: str,
    parser: Parser | None = None,
    data_dir: str | Path | None = None,
    *,
    seeds: Sequence[int] = (0, 1, 2),
    epochs: int = 3,
    lr: float = 2e-5,
    batch_size: int = 32,
    max_length: int = 128,
    max_train: int | None = None,
    max_eval: int | None = None,
    weight_decay: float = 0.01,
    warmup_ratio: float = 0.06,
    adam_epsilon: float = 1e-6,
    progress: bool = True,
) -> dict[str, Any]:
    """Fine-tune ``model_fn(num_labels)`` on one task for each seed; dev metrics after every epoch.

    The model is created anew per seed (after ``torch.manual_seed(seed)``), so the classifier head
    and the data order both depend on the seed. Each run reports its best dev epoch by the task's
    metric (``best``) and its last epoch (``last``); ``summary`` gives mean and sd over seeds.
    AdamW with eps 1e-6 as in the paper (table 11).
    """
    spec = task_spec(task)
    if "train" not in spec.splits:
        raise ValueError(f"GLUE {spec.folder} has only {spec.splits} here; it cannot be fine-tuned")
    train = load_glue(spec.name, "train", data_dir, max_train)
    dev = load_glue(spec.name, "dev", data_dir, max_eval)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    cache: dict[str, Any] = {}
    runs = []
    feats_by_tagging: dict[bool, tuple[Features, Features]] = {}
    for seed in seeds:
        torch.manual_seed(seed)
        random.seed(seed)
        model = model_fn(spec.num_labels)
        tagged = uses_tags(model)
        if tagged not in feats_by_tagging:
            kw = {"max_length": max_length, "tagged": tagged, "parse_cache": cache}
            kw["deprels"] = uses_deprels(model)
            feats_by_tagging[tagged] = (
                featurize(train, tokenizer, parser, **kw),
                featurize(dev, tokenizer, parser, **kw),
            )
        ftrain, fdev = feats_by_tagging[tagged]
        steps = epochs * math.ceil(len(train) / batch_size)
        decay = [p for n, p in model.named_parameters() if p.requires_grad and p.ndim >= 2]
        no_decay = [p for n, p in model.named_parameters() if p.requires_grad and p.ndim < 2]
        opt = torch.optim.AdamW(
            [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=lr,
            eps=adam_epsilon,
        )
        warm = max(1, int(warmup_ratio * steps))
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s, w=warm, n=steps: min((s + 1) / w, max(0.0, (n - s) / max(1, n - w)))
        )
        history = []
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=steps, desc=f"{spec.name} seed {seed}", leave=False)
        dev_model = model_device(model)
        for epoch in range(epochs):
            model.train()
            order = list(range(len(train)))
            random.Random(seed * 1000 + epoch).shuffle(order)
            losses = []
            for s in range(0, len(order), batch_size):
                idx = order[s : s + batch_size]
                batch = _collate(ftrain, idx, pad_id)
                logits = _forward(model, batch, tagged).float()
                y = torch.tensor([ftrain.labels[i] for i in idx], device=dev_model)
                if spec.regression:
                    loss = F.mse_loss(logits.squeeze(-1), y.float())
                else:
                    loss = F.cross_entropy(logits, y.long())
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                sched.step()
                losses.append(loss.item())
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(loss=f"{loss.item():.3f}")
            preds = predict(model, fdev, regression=spec.regression, batch_size=batch_size * 2, pad_id=pad_id)
            metrics = glue_metrics(spec.name, preds, fdev.labels)
            history.append({"epoch": epoch + 1, "train_loss": float(np.mean(losses)), **metrics})
        if bar is not None:
            bar.close()
        best = best_epoch(history)
        runs.append({"seed": seed, "tagged": tagged, "best": best, "last": history[-1], "history": history})
    summary = {which: summarize([r[which] for r in runs]) for which in ("best", "last")}
    return {
        "task": spec.name,
        "metric": spec.metric,
        "n_train": len(train),
        "n_dev": len(dev),
        "seeds": list(seeds),
        "tagged": any(r["tagged"] for r in runs),
        "unaligned_words": sum(f.unaligned_words for pair in feats_by_tagging.values() for f in pair),
        "summary": summary,
        "mean": summary["best"]["mean"],  # the headline: best dev epoch, mean over seeds
        "std_main": summary["best"]["sd"]["main"],
        "runs": runs,
    }


def best_epoch(history: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The epoch with the highest ``main`` (the first one on ties), as a copy of its row."""
    if not history:
        raise ValueError("no epochs to choose from")
    return dict(max(history, key=lambda h: (h["main"], -h["epoch"])))


def sample_sd(values: Sequence[float]) -> float | None:
    """Sample standard deviation (n - 1) over seeds; None for a single seed."""
    return float(np.std(values, ddof=1)) if len(values) > 1 else None


def summarize(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Mean and sample sd over seeds of every metric of the given per-seed epoch rows."""
    names = [k for k in rows[0] if k not in ("epoch", "train_loss")]
    return {
        "mean": {m: float(np.mean([r[m] for r in rows])) for m in names},
        "sd": {m: sample_sd([r[m] for r in rows]) for m in names},
        "epochs": [int(r["epoch"]) for r in rows],
    }


def finetune_glue(
    model_fn: Callable[[int], Any],
    tokenizer: Any,
    tasks: Sequence[str] = FINETUNE_TASKS,
    parser: Parser | None = None,
    data_dir: str | Path | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """Fine-tune on several tasks (``"all"`` = every fine-tunable task); GLUE macro averages.

    ``macro`` = mean over tasks of the seed-averaged main score at the best dev epoch (the paper's
    "Macro" row); ``macro_sd`` = sd over seeds of the per-seed macro (each seed's mean over tasks);
    ``macro_last`` / ``macro_last_sd`` the same at the last epoch.
    """
    per_task = {}
    for t in resolve_tasks(tasks):
        r = finetune_task(model_fn, tokenizer, t, parser, data_dir, **kwargs)
        per_task[r["task"]] = r
    out: dict[str, Any] = {"benchmark": "glue", "tasks": per_task, "selection": "best dev epoch by main"}
    for which, key in (("best", "macro"), ("last", "macro_last")):
        out[key], out[f"{key}_sd"] = macro_average(per_task, which)
    return out


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


def macro_average(
    per_task: Mapping[str, Mapping[str, Any]], which: str = "best"
) -> tuple[float, float | None]:
    """Mean over tasks of the seed-mean main score, and the sd over seeds of the per-seed macro."""
    macro = float(np.mean([r["summary"][which]["mean"]["main"] for r in per_task.values()]))
    seeds = [list(r["seeds"]) for r in per_task.values()]
    if any(s != seeds[0] for s in seeds):
        return macro, None  # per-seed macros need the same seeds on every task
    runs = [r["runs"] for r in per_task.values()]
    per_seed = [np.mean([task_runs[i][which]["main"] for task_runs in runs]) for i in range(len(seeds[0]))]
    return macro, sample_sd(per_seed)


def _pm(mean: float, sd: float | None) -> str:
    """``72.30 ± 0.33`` in points (x100), as the paper's tables print scores."""
    return f"{100 * mean:.2f}" + (f" ± {100 * sd:.2f}" if sd is not None else "")


def format_results(result: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """The combined table: per task the paper's metric at the best and at the last dev epoch."""
    rows = []
    for t, r in result["tasks"].items():
        best, last = r["summary"]["best"], r["summary"]["last"]
        rows.append(
            {
                "task": t,
                "metric": r["metric"],
                "best epoch": _pm(best["mean"]["main"], best["sd"]["main"]),
                "last epoch": _pm(last["mean"]["main"], last["sd"]["main"]),
                "best epochs": " ".join(str(e) for e in best["epochs"]),
                "other metrics (best)": ", ".join(
                    f"{k} {100 * v:.2f}" for k, v in best["mean"].items() if k not in ("main", r["metric"])
                ),
                "seeds": len(r["seeds"]),
            }
        )
    rows.append(
        {
            "task": "**macro**",
            "metric": "mean of the tasks",
            "best epoch": _pm(result["macro"], result.get("macro_sd")),
            "last epoch": _pm(result["macro_last"], result.get("macro_last_sd")),
            "best epochs": "",
            "other metrics (best)": "",
            "seeds": "",
        }
    )
    return rows, list(rows[0])


__all__ = [
    "FINETUNE_TASKS",
    "TASKS",
    "GlueExample",
    "best_epoch",
    "featurize",
    "finetune_glue",
    "finetune_task",
    "glue_metrics",
    "load_classifier",
    "load_glue",
    "macro_average",
    "recorded_parser",
    "resolve_tasks",
]

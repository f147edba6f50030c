"""GLUE fine-tuning with per-sentence hexatags (docs/design.md §4; SiPE §4 "GLUE").

This module holds the fine-tuning loop (``finetune_task``, ``finetune_glue``), prediction and the
classifier/parser loading; the rest lives in sibling modules:
``structpe.eval.glue.tasks`` (task specs, loading, metrics: CoLA, SST-2, MRPC, RTE, STS-B; QNLI
loads but has no train split), ``structpe.eval.glue.features`` (token ids with per-sentence tags)
and ``structpe.eval.glue.report`` (best / last epoch, mean ± sd over seeds, macro average, as the
SiPE paper's GLUE tables 4-6, 9-10 report).

Tags: each sentence is parsed on its own (pairs: tag each separately) and its tags are placed on
the first token of each word within that sentence's segment of the pair encoding (character
offsets). Loss is computed here from the logits (CE, or MSE for STS-B), so any
classifier works: our encoders' ``...ForSequenceClassification``, our decoder's
``TransfoXLSiPEForSequenceClassification`` (its input framed ``<s> A </s> B </s>`` as in
pre-training, ``features.frame_sentences``) or any HF ``AutoModelForSequenceClassification``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from structpe.eval.glue.features import Features, collate_features, featurize, frame_sentences, uses_deprels
from structpe.eval.glue.report import best_epoch, macro_average, summarize
from structpe.eval.glue.tasks import (
    FINETUNE_TASKS,
    glue_metrics,
    load_glue,
    resolve_tasks,
    task_spec,
)
from structpe.eval.scoring.types import (
    Parser,
    forward_logits,
    is_structpe_model,
    model_device,
    model_kind,
    uses_tags,
)
from structpe.io import read_json, read_json_object


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


def _autocast(model: Any, bf16: bool) -> torch.autocast:
    """bf16 autocast on the model's device when asked (weights and optimizer stay float32)."""
    return torch.autocast(model_device(model).type, dtype=torch.bfloat16, enabled=bf16)


@torch.no_grad()
def predict(model: Any, feats: Features, *, regression: bool, batch_size: int = 64, pad_id: int = 0) -> list:
    """Dev predictions, always in float32: bf16 keeps 8 bits of mantissa, so a weak model's
    nearly equal outputs round to a few values (measured: a tiny encoder's 1,000 STS-B predictions
    fell on 1-2 bf16 values, 945 distinct in float32, Spearman 0.035 -> 0.108), and ties in the
    scores would decide the metric. Scoring is a forward pass only, a small part of fine-tuning."""
    model.eval()
    tagged = uses_tags(model)
    preds: list = []
    for s in range(0, len(feats.input_ids), batch_size):
        idx = list(range(s, min(s + batch_size, len(feats.input_ids))))
        logits = _forward(model, collate_features(feats, idx, pad_id), tagged).float()
        preds += logits.squeeze(-1).tolist() if regression else logits.argmax(-1).tolist()
    return preds


def load_classifier(path: str | Path, num_labels: int) -> Any:
    """A sequence classifier from a saved folder: ours (structpe config) or any HF checkpoint."""
    path = Path(path)
    cfg_file = path / "config.json"
    if not cfg_file.is_file():
        raise FileNotFoundError(f"{path} has no config.json (expected a save_pretrained folder)")
    cfg = read_json_object(cfg_file)
    # a saved classification head of another size (e.g. 2 labels, then STS-B's 1) is replaced by a
    # fresh one, as fine-tuning trains the head anew anyway
    kw: dict[str, Any] = {"num_labels": num_labels, "ignore_mismatched_sizes": True}
    if num_labels == 1:
        kw["problem_type"] = "regression"
    if cfg.get("model_type") == "structpe-sipe":
        from structpe.models.registry import model_class

        return model_class(cfg["family"], "classification").from_pretrained(path, **kw)
    from transformers import AutoModelForSequenceClassification

    from structpe.models.validate import load_strictly

    return load_strictly(AutoModelForSequenceClassification.from_pretrained, path, **kw)[0]


def recorded_parser(model_path: str | Path) -> dict[str, Any] | None:
    """The parser that prepared a structpe model's pre-training data, or None if nothing records it.

    ``structpe pretrain`` writes ``summary.json`` (with the dataset folder) next to ``final/`` and
    the checkpoints; the dataset's ``structpe_prepare.json`` holds the parser and its settings
    (spaCy package, hexatagger folder, quantization). GLUE tags its sentences with that parser so
    fine-tuning sees the tags pre-training saw.
    """
    from structpe.train.prepare_settings import METADATA_FILE

    model_path = Path(model_path)
    for summary in (model_path / "summary.json", model_path.parent / "summary.json"):
        if not summary.is_file():
            continue
        dataset = read_json(summary).get("dataset")
        meta_file = Path(dataset) / METADATA_FILE if dataset else None
        if meta_file is None or not meta_file.is_file():
            return None
        settings = read_json(meta_file).get("settings", {})
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
    bf16: bool = False,
    progress: bool = True,
) -> dict[str, Any]:
    """Fine-tune ``model_fn(num_labels)`` on one task for each seed; dev metrics after every epoch.

    The model is created anew per seed (after ``torch.manual_seed(seed)``), so the classifier head
    and the data order both depend on the seed. Each run reports its best dev epoch by the task's
    metric (``best``) and its last epoch (``last``); ``summary`` gives mean and sd over seeds.
    AdamW with eps 1e-6 as in the paper (table 11). ``bf16``: bf16 autocast of the training forward
    passes (on CPUs with native bf16 about twice as fast as float32; ``structpe.hardware.resolve_bf16``);
    the dev predictions are always float32 (``predict``).
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
            # our decoder reads sentences framed as in pre-training and pools the last token
            decoder = is_structpe_model(model) and model_kind(model) == "causal"
            framed = frame_sentences(tokenizer) if decoder else tokenizer
            feats_by_tagging[tagged] = (
                featurize(train, framed, parser, **kw),
                featurize(dev, framed, parser, **kw),
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
                batch = collate_features(ftrain, idx, pad_id)
                with _autocast(model, bf16):
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
        "bf16": bf16,
        "tagged": any(r["tagged"] for r in runs),
        "unaligned_words": sum(f.unaligned_words for pair in feats_by_tagging.values() for f in pair),
        "summary": summary,
        "mean": summary["best"]["mean"],  # the headline: best dev epoch, mean over seeds
        "std_main": summary["best"]["sd"]["main"],
        "runs": runs,
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



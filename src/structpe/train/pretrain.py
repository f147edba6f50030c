"""Pre-train a SiPE model from a recipe on the Hugging Face ``Trainer`` (``structpe pretrain``).

    structpe prepare --corpus brown --tokenizer tok/ -o data/brown-spacy
    structpe pretrain --config txl/position-tiny train.dataset=data/brown-spacy
    torchrun --nproc_per_node 8 -m structpe.cli pretrain --config ...      # multi-GPU / multi-node

What this module adds to the stock Trainer (and nothing else -- devices, DDP, mixed precision,
gradient accumulation, checkpoint/optimizer/RNG state and the progress bar are the Trainer's):

* checks before any step: dataset present and complete, tokenizer = the one the data was prepared
  with, model vocabulary = tokenizer vocabulary, data packed no longer than ``train.seq_len``;
* the LM loss and the two tag losses (docs/design.md §2: loss = LM + CE_T + CE_N) logged separately, and a
  validation pass reporting token-weighted validation LM loss and perplexity exp(loss);
* a non-finite loss stops the run at once with a message (not after silently skipping steps);
* a run folder: ``config.yaml`` (the resolved recipe), ``metrics.csv``, ``loss.png``,
  ``checkpoint-N/`` (model.safetensors + optimizer/scheduler/RNG state), ``final/`` (model +
  tokenizer, ``structpe.models.load``-able) and ``summary.json``;
* exact resume (``--resume``): continue from the newest *complete* checkpoint (a checkpoint
  half-written when the job was killed is skipped); the rows the killed run logged after that
  checkpoint are dropped from ``metrics.csv`` so that the curve has no duplicates.

Checkpoint formats: weights are safetensors (``PreTrainedModel.save_pretrained``). The Trainer
writes optimizer, scheduler and RNG state with ``torch.save`` and reads them back with
``torch.load(weights_only=True)``; these are files this run wrote itself, and weights_only
refuses arbitrary pickled objects, so no untrusted pickle is ever executed.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import os
import pickle
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback, TrainingArguments

from structpe.choices import CAUSAL_FAMILIES
from structpe.errors import PreparedDataError, RecipeError, StructpeError
from structpe.hardware import cpu_threads
from structpe.io import atomic_open, atomic_write_text, read_json
from structpe.train.checkpoints import checkpoint_problem, last_complete_checkpoint
from structpe.train.collators import MLMCollator, collator_for
from structpe.train.master_weights import MasterWeightAdamW
from structpe.train.model_card import write_model_card
from structpe.train.prepare import load_prepared
from structpe.train.prepare_deprels import check_deprel_data
from structpe.train.prepare_settings import tokenizer_hash
from structpe.train.recipe import Recipe, TrainConfig, default_run_dir, load_recipe
from structpe.train.trainer import (
    METRIC_COLUMNS,
    EpochToCollator,
    RunFolderCallback,
    SiPETrainer,
    VocabularyMismatchError,
    plot_losses,
)
from structpe.yamlio import load_yaml


def _truncate_metrics(csv_path: Path, step: int) -> float:
    """Drop rows logged after ``step`` (a killed run's steps that the resume will redo); return the
    training seconds logged up to ``step``, from which the resumed run's clock continues."""
    if not csv_path.exists():
        return 0.0
    with open(csv_path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    keep = [r for r in rows if float(r["step"]) <= step]
    with atomic_open(csv_path, "w") as fh:
        w = csv.DictWriter(fh, fieldnames=METRIC_COLUMNS)
        w.writeheader()
        w.writerows(keep)
    return max((float(r["elapsed_s"]) for r in keep if r.get("elapsed_s")), default=0.0)


# -- setup checks -----------------------------------------------------------------------------------
def resolve_model_config(recipe: Recipe, tokenizer: Any, meta: dict[str, Any]):
    """SiPEConfig of the recipe with vocabulary and special ids checked against tokenizer and data."""
    from structpe.models import SiPEConfig

    kw = dict(recipe.model)
    n_tok = len(tokenizer)
    if kw.get("vocab_size") is None:
        kw["vocab_size"] = n_tok
    elif int(kw["vocab_size"]) != n_tok:
        raise VocabularyMismatchError(
            f"{recipe.source}: model.vocab_size={kw['vocab_size']} but the tokenizer "
            f"({meta.get('tokenizer')}) has {n_tok} tokens; set model.vocab_size={n_tok} "
            "(or model.vocab_size=auto to take it from the tokenizer)"
        )
    if meta.get("vocab_size") not in (None, n_tok):
        raise VocabularyMismatchError(
            f"the dataset was prepared with a {meta['vocab_size']}-token tokenizer but the run's tokenizer "
            f"has {n_tok}; re-run `structpe prepare` with this tokenizer"
        )
    kw.setdefault("pad_token_id", tokenizer.pad_token_id)
    kw.setdefault("bos_token_id", meta.get("bos_token_id"))
    kw.setdefault("eos_token_id", meta.get("eos_token_id"))
    return SiPEConfig(**kw)


def _check_lengths(recipe: Recipe, meta: dict[str, Any], dd: Any) -> None:
    packed = int(meta.get("settings", {}).get("seq_len", 0))
    tc = recipe.train
    if packed > tc.seq_len:
        raise RecipeError(
            f"the dataset {tc.dataset} was packed at seq_len={packed} but train.seq_len={tc.seq_len}; "
            f"re-run `structpe prepare --seq-len {tc.seq_len}` or set train.seq_len={packed}"
        )
    max_pos = recipe.model.get("max_position_embeddings")
    if max_pos is not None and recipe.model.get("family") != "txl" and packed > int(max_pos):
        raise RecipeError(
            f"model.max_position_embeddings={max_pos} is shorter than the packed sequences ({packed})"
        )


def _objective(recipe: Recipe) -> str:
    obj = recipe.train.objective
    if obj == "auto":
        return "causal" if recipe.model.get("family", "txl") in CAUSAL_FAMILIES else "mlm"
    return obj


# -- entry point ------------------------------------------------------------------------------------
def pretrain(
    config: Recipe | str | Path,
    overrides: Sequence[str] | None = None,
    *,
    resume: bool | str | Path = False,
    callbacks: Sequence[TrainerCallback] = (),
    allow_changed_recipe: bool = False,
) -> Path:
    """Train the model of ``config`` (recipe path/name or Recipe) and return the run folder.

    ``resume=True`` continues from the newest complete checkpoint of the run folder (starting
    fresh if there is none); a path resumes from that checkpoint. Without ``resume`` a run folder
    that already has checkpoints is refused, so a finished run is never overwritten by accident.
    A resume must use the recipe of the run (bookkeeping such as eval_every aside) unless
    ``allow_changed_recipe``; the run's config.yaml is kept, and a changed recipe is written beside
    it as ``config-resumed-<step>.yaml``. Once the recipe and data are checked the run folder is
    locked (:func:`hold_run_folder`): a second run or resume on the same folder is refused at once
    instead of interleaving its metrics and checkpoints with the first.
    """
    with contextlib.ExitStack() as hold:
        return _train_run(config, overrides, resume=resume, callbacks=callbacks,
                          allow_changed_recipe=allow_changed_recipe, hold=hold)


def hold_run_folder(run_dir: Path, hold: contextlib.ExitStack) -> None:
    """Lock ``run_dir`` (``<run folder>.lock``, ``filelock``, as the study cells are) until ``hold``
    closes, then remove the lock file; StructpeError when another process holds it. Only the main
    process of a distributed run takes it (every rank trains into the same folder)."""
    from filelock import FileLock, Timeout

    if not _is_main():
        return
    lock_path = run_dir.with_name(run_dir.name + ".lock")
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        hold.enter_context(FileLock(lock_path, timeout=0))
        # the lock file goes when the run ends, removed while still held (``hold`` closes last in,
        # first out); a process that opened it just before cannot then take it: it refuses at once
        hold.callback(lock_path.unlink, missing_ok=True)
    except Timeout:
        raise StructpeError(
            f"run folder {run_dir} is in use by another training process (lock {lock_path}); "
            "wait for it to finish or choose another train.output_dir"
        ) from None
    except OSError as err:
        raise StructpeError(f"{lock_path}: cannot lock the run folder ({err.strerror})") from None


def _train_run(
    config: Recipe | str | Path,
    overrides: Sequence[str] | None = None,
    *,
    resume: bool | str | Path = False,
    callbacks: Sequence[TrainerCallback] = (),
    allow_changed_recipe: bool = False,
    hold: contextlib.ExitStack,
) -> Path:
    """:func:`pretrain`'s work; the run folder is locked into ``hold`` before anything is written."""
    recipe = config if isinstance(config, Recipe) else load_recipe(config, list(overrides or []))
    tc = recipe.train
    if tc.dataset is None:
        raise RecipeError(
            f"{recipe.source}: train.dataset is not set; "
            "pass train.dataset=<folder written by `structpe prepare`>"
        )
    if tc.compile and not can_compile():
        raise RecipeError(
            f"{recipe.source}: train.compile=true needs a C++ compiler for torch.compile's CPU kernels "
            "($CXX, g++, c++ or clang++) and none was found; install one or set train.compile=false"
        )
    dd, meta = load_prepared(tc.dataset)
    tok_dir = tc.tokenizer or meta.get("tokenizer")
    if not tok_dir or not Path(tok_dir, "tokenizer.json").is_file():
        raise PreparedDataError(
            f"tokenizer folder {tok_dir!r} (recorded in {tc.dataset}) not found; "
            "pass train.tokenizer=<folder>"
        )
    if meta.get("tokenizer_sha256") and tokenizer_hash(tok_dir) != meta["tokenizer_sha256"]:
        raise VocabularyMismatchError(
            f"the tokenizer at {tok_dir} is not the one {tc.dataset} was prepared with "
            f"({meta.get('tokenizer')}); use that tokenizer or re-run `structpe prepare`"
        )
    from structpe.train.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(tok_dir)
    model_config = resolve_model_config(recipe, tokenizer, meta)
    _check_lengths(recipe, meta, dd)
    check_deprel_data(model_config.n_deprels, tc.dataset, dd)
    if not model_config.n_deprels:  # the model has no DEPREL table: it must not be handed labels
        dd = dd.__class__(
            {k: v.remove_columns([c for c in v.column_names if c == "deprel_ids"]) for k, v in dd.items()}
        )
    objective = _objective(recipe)
    if objective == "mlm" and tokenizer.mask_token_id is None:
        raise VocabularyMismatchError(f"objective 'mlm' needs a mask token, and {tok_dir} has none")

    run_dir = Path(tc.output_dir) if tc.output_dir else default_run_dir(recipe)
    hold_run_folder(run_dir, hold)
    checkpoint: str | None = None
    changed: list[str] = []
    elapsed_before = 0.0
    if resume:
        ckpt = Path(resume) if isinstance(resume, (str, Path)) else last_complete_checkpoint(run_dir)
        if ckpt is not None:
            if not (ckpt / "trainer_state.json").is_file():
                raise FileNotFoundError(f"{ckpt} is not a complete checkpoint (no trainer_state.json)")
            if problem := checkpoint_problem(ckpt):
                raise RecipeError(f"cannot resume from {ckpt}: {problem}")
            changed = _check_resume_config(run_dir, recipe, allow_changed_recipe)
            checkpoint = str(ckpt)
            step = read_json(ckpt / "trainer_state.json")["global_step"]
            print(f"pretrain: resuming {run_dir} from {ckpt.name} (step {step})")
            if _is_main():
                elapsed_before = _truncate_metrics(run_dir / "metrics.csv", step)
        else:
            print(f"pretrain: nothing to resume in {run_dir}; starting from scratch")
    elif last_complete_checkpoint(run_dir) is not None:
        raise FileExistsError(
            f"run folder {run_dir} already has checkpoints; pass --resume to continue it or set "
            "train.output_dir to a new folder"
        )
    if checkpoint is None and _is_main() and (run_dir / "metrics.csv").exists():
        (run_dir / "metrics.csv").unlink()  # a fresh start in a folder without checkpoints
    run_dir.mkdir(parents=True, exist_ok=True)
    if _is_main() and checkpoint is None:
        recipe.dump(run_dir / "config.yaml")
    elif _is_main() and changed:
        recipe.dump(run_dir / f"config-resumed-{step}.yaml")

    from structpe.models import build_model

    if not torch.cuda.is_available():
        torch.set_num_threads(cpu_threads(tc.threads))
    torch.manual_seed(tc.seed)
    trainer_class = SiPETrainer
    if recipe.adapter is not None:  # a Hugging Face base model + SiPE adapter (structpe.train.adapter)
        from structpe.train.adapter import AdapterTrainer, build_adapted

        model, trainer_class = build_adapted(recipe, tokenizer, tc.seq_len), AdapterTrainer
    else:
        model = build_model(model_config)
    collator = collator_for(objective, tokenizer, tc.mlm_probability, model_config.vocab_size, seed=tc.seed)
    fast = tc.fast_bf16 and tc.resolved_bf16()  # ``auto`` on a CPU without native bf16: autocast's path, off
    if fast:
        model.to(torch.bfloat16)  # float32 masters live in the optimizer (structpe.train.master_weights)
    save_every = tc.save_every or tc.eval_every
    args = TrainingArguments(
        output_dir=str(run_dir),
        max_steps=tc.max_steps,
        per_device_train_batch_size=tc.batch_size,
        per_device_eval_batch_size=tc.eval_batch_size or tc.batch_size,
        gradient_accumulation_steps=tc.grad_accum,
        learning_rate=tc.lr,
        weight_decay=tc.weight_decay,
        warmup_steps=tc.warmup,
        lr_scheduler_type=tc.schedule,
        max_grad_norm=tc.max_grad_norm,
        logging_steps=tc.log_every,
        logging_first_step=True,
        logging_nan_inf_filter=False,
        eval_strategy="steps",
        eval_steps=tc.eval_every,
        save_strategy="steps",
        save_steps=save_every,
        save_total_limit=tc.save_total_limit,
        seed=tc.seed,
        data_seed=tc.seed,
        dataloader_num_workers=tc.num_workers,
        bf16=tc.resolved_bf16() and not fast,  # a fast_bf16 model is bf16 itself: no autocast
        torch_compile=tc.compile,
        # a compiled step keeps one batch shape: the epoch's partial last batch (6 of the quickstart's
        # 13,174 sequences) would cost a dynamic-shape recompile (~60 s on 2 CPU cores), so it is dropped
        dataloader_drop_last=tc.compile,
        report_to=[],
        disable_tqdm=not tc.progress,
        remove_unused_columns=False,
        use_cpu=not torch.cuda.is_available(),
        ddp_backend="gloo" if _world_size() > 1 and not torch.cuda.is_available() else None,
    )
    cbs: list[TrainerCallback] = [RunFolderCallback(run_dir, elapsed_before), *callbacks]
    if isinstance(collator, MLMCollator):
        cbs.append(EpochToCollator(collator))
    trainer = trainer_class(
        model=model,
        args=args,
        train_dataset=dd["train"],
        eval_dataset=dd["validation"],
        data_collator=collator,
        processing_class=tokenizer,
        callbacks=cbs,
        objective=objective,
        eval_batches=tc.eval_batches,
        optimizer_cls_and_kwargs=master_weight_optimizer(args) if fast else None,
    )
    if trainer.is_world_process_zero():
        n_params = sum(p.numel() for p in model.parameters())
        per_step = tc.batch_size * tc.grad_accum * args.world_size
        print(
            f"pretrain: {recipe.name} ({model.config.family}/{model.config.injection}, "
            f"{n_params:,} parameters, {objective}) on {len(dd['train']):,} train / "
            f"{len(dd['validation']):,} validation sequences; {tc.max_steps} steps x {per_step} "
            f"sequences; {torch.get_num_threads()} CPU threads; run folder {run_dir}"
        )
    t0 = time.time()
    try:
        result = trainer.train(resume_from_checkpoint=checkpoint)
    except pickle.UnpicklingError:  # torch.load(weights_only=True) met an object that is not a tensor
        raise StructpeError(
            f"{checkpoint}: a checkpoint file holds pickled Python objects, not plain tensors; "
            "refused (structpe never unpickles them)"
        ) from None
    wall = time.time() - t0
    step = trainer.state.global_step
    done = [h for h in trainer.state.log_history if "eval_ppl" in h and h.get("step") == step]
    final = {k: v for k, v in done[-1].items() if k.startswith("eval_")} if done else trainer.evaluate()
    trainer.save_model(str(run_dir / "final"))  # model.safetensors + config + tokenizer (rank 0 writes)
    if trainer.is_world_process_zero():
        summary = {
            "recipe": recipe.source,
            "overrides": recipe.overrides,
            "objective": objective,
            "steps": trainer.state.global_step,
            "train_wall_s": round(elapsed_before + wall, 1),  # every sitting of a resumed run
            "sitting_wall_s": round(wall, 1),
            "train_runtime_s": result.metrics.get("train_runtime"),
            "parameters": sum(p.numel() for p in model.parameters()),
            "world_size": args.world_size,
            "bf16": tc.resolved_bf16(),  # the precision this machine trained in (``auto`` resolved)
            "fast_bf16": fast,  # bf16 parameters + float32 master weights (else autocast, if bf16)
            "resumed_from": checkpoint,
            "final_eval": final,
            "dataset": str(tc.dataset),
            "dataset_fingerprint": meta.get("fingerprint"),
        }
        atomic_write_text(run_dir / "summary.json", json.dumps(summary, indent=2) + "\n")
        write_model_card(run_dir / "final", recipe=recipe, summary=summary, meta=meta)
        plot_losses(run_dir / "metrics.csv", run_dir / "loss.png")
        print(f"pretrain: done in {wall:.0f}s; validation ppl {final['eval_ppl']:.2f}; run folder {run_dir}")
    return run_dir


def master_weight_optimizer(args: TrainingArguments) -> tuple[type, dict[str, Any]]:
    """The Trainer's own AdamW settings (lr, betas, eps) for :class:`MasterWeightAdamW`, fused
    where torch has a fused AdamW for the device (CPU since torch 2.4)."""
    _, kwargs = SiPETrainer.get_optimizer_cls_and_kwargs(args)
    return MasterWeightAdamW, {**kwargs, "fused": True}


def can_compile() -> bool:
    """True when ``torch.compile`` (inductor) can build kernels here: CUDA, or a C++ compiler for
    the CPU kernels (``$CXX``, else g++ / c++ / clang++ on the PATH, as inductor looks them up)."""
    if torch.cuda.is_available():
        return True
    import shutil

    names = [os.environ["CXX"]] if os.environ.get("CXX") else ["g++", "c++", "clang++"]
    return any(shutil.which(n) for n in names)


def _world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def _is_main() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


# train keys that do not change what is trained: free to differ when a run is resumed (threads and
# compile: a run resumed on another machine or under other load; they change float summation order only)
RESUME_FREE_KEYS = ("output_dir", "progress", "threads", "compile", "eval_every", "eval_batches",
                    "eval_batch_size", "save_every", "save_total_limit", "log_every")


def _check_resume_config(run_dir: Path, recipe: Recipe, allow_changed: bool = False) -> list[str]:
    """The recipe keys that differ from the run's config.yaml (bookkeeping keys aside). A resumed
    run must match the run that wrote the checkpoint -- the model always, training settings unless
    ``allow_changed`` (a changed lr, seed or batch size makes it another run)."""
    saved = run_dir / "config.yaml"
    if not saved.is_file():
        return []
    old_all = load_yaml(saved, RecipeError) or {}
    new_all = recipe.to_dict()
    old = old_all.get("model", {})
    if old != new_all["model"]:
        diff = sorted(k for k in set(old) | set(recipe.model) if old.get(k) != recipe.model.get(k))
        raise RecipeError(
            f"cannot resume {run_dir}: the model section differs from the checkpoint's config.yaml "
            f"(keys {diff}); resume with the same model settings or use a new train.output_dir"
        )
    # a key the run's config.yaml predates had its default then (e.g. fast_bf16: false)
    defaults = {f.name: f.default for f in dataclasses.fields(TrainConfig)
                if f.default is not dataclasses.MISSING}
    old_t, new_t = {**defaults, **old_all.get("train", {})}, new_all["train"]
    diff = sorted(f"train.{k}" for k in set(old_t) | set(new_t)
                  if k not in RESUME_FREE_KEYS and old_t.get(k) != new_t.get(k))
    if diff and not allow_changed:
        raise RecipeError(
            f"cannot resume {run_dir}: {diff} differ from the run's config.yaml; resume with the "
            "same settings, or pass --allow-changed-recipe to continue it as a changed run"
        )
    return diff

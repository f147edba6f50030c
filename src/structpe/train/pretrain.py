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
from structpe.io import atomic_write_text, read_json
from structpe.train.checkpoints import (
    check_resume_config,
    checkpoint_problem,
    last_complete_checkpoint,
    truncate_metrics,
)
from structpe.train.collators import MLMCollator, collator_for
from structpe.train.master_weights import MasterWeightAdamW
from structpe.train.model_card import write_model_card
from structpe.train.prepare import load_prepared
from structpe.train.prepare_deprels import check_deprel_data
from structpe.train.prepare_settings import tokenizer_hash
from structpe.train.recipe import Recipe, default_run_dir, load_recipe
from structpe.train.trainer import (
    EpochToCollator,
    RunFolderCallback,
    SiPETrainer,
    VocabularyMismatchError,
    plot_losses,
)


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


def _load_inputs(recipe: Recipe) -> tuple[Any, dict[str, Any], Any, Any, str]:
    """The prepared data, its record, its tokenizer, the model config and the objective, each checked
    against the recipe before anything is written: a wrong tokenizer or missing column is one error."""
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
    return dd, meta, tokenizer, model_config, objective


def _open_run_folder(
    recipe: Recipe, run_dir: Path, resume: bool | str | Path, allow_changed_recipe: bool
) -> tuple[str | None, tuple[float, float | None]]:
    """The checkpoint to resume from (None: a fresh start) and the training wall / CPU seconds of
    the earlier sittings (CPU None: not logged by them); the folder gets the recipe (or, resumed
    with a changed recipe, the changed one)."""
    checkpoint: str | None = None
    changed: list[str] = []
    before: tuple[float, float | None] = (0.0, 0.0)
    if resume:
        ckpt = Path(resume) if isinstance(resume, (str, Path)) else last_complete_checkpoint(run_dir)
        if ckpt is not None:
            if not (ckpt / "trainer_state.json").is_file():
                raise FileNotFoundError(f"{ckpt} is not a complete checkpoint (no trainer_state.json)")
            if problem := checkpoint_problem(ckpt):
                raise RecipeError(f"cannot resume from {ckpt}: {problem}")
            changed = check_resume_config(run_dir, recipe, allow_changed_recipe)
            checkpoint = str(ckpt)
            step = read_json(ckpt / "trainer_state.json")["global_step"]
            print(f"pretrain: resuming {run_dir} from {ckpt.name} (step {step})")
            if _is_main():
                before = truncate_metrics(run_dir / "metrics.csv", step)
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
    return checkpoint, before


def _training_arguments(recipe: Recipe, run_dir: Path, fast: bool) -> TrainingArguments:
    """The recipe's ``train:`` section as transformers' TrainingArguments."""
    tc = recipe.train
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
    return args


def _finish(
    trainer: Any, model: Any, recipe: Recipe, run_dir: Path, result: Any, clocks: tuple[float, float],
    before: tuple[float, float | None], checkpoint: str | None, fast: bool, objective: str,
    meta: dict[str, Any],
) -> None:
    """Save the final model; on rank 0 also the run's summary.json, model card and loss plot.
    ``clocks``: this sitting's wall and CPU seconds; ``before``: the earlier sittings'."""
    tc, args = recipe.train, trainer.args
    (wall, cpu), (elapsed_before, cpu_before) = clocks, before
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
            # the process's CPU seconds over every sitting: the cost a pause or a loaded machine
            # does not inflate (None: an earlier sitting did not log it)
            "train_cpu_s": None if cpu_before is None else round(cpu_before + cpu, 1),
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


def _train_run(
    config: Recipe | str | Path, overrides: Sequence[str] | None = None, *,
    resume: bool | str | Path = False, callbacks: Sequence[TrainerCallback] = (),
    allow_changed_recipe: bool = False, hold: contextlib.ExitStack,
) -> Path:
    """:func:`pretrain`'s work; the run folder is locked into ``hold`` before anything is written."""
    recipe = config if isinstance(config, Recipe) else load_recipe(config, list(overrides or []))
    tc = recipe.train
    dd, meta, tokenizer, model_config, objective = _load_inputs(recipe)
    run_dir = Path(tc.output_dir) if tc.output_dir else default_run_dir(recipe)
    hold_run_folder(run_dir, hold)
    checkpoint, before = _open_run_folder(recipe, run_dir, resume, allow_changed_recipe)

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
    args = _training_arguments(recipe, run_dir, fast)
    cbs: list[TrainerCallback] = [RunFolderCallback(run_dir, *before), *callbacks]
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
    t0, c0 = time.time(), time.process_time()
    try:
        result = trainer.train(resume_from_checkpoint=checkpoint)
    except pickle.UnpicklingError:  # torch.load(weights_only=True) met an object that is not a tensor
        raise StructpeError(
            f"{checkpoint}: a checkpoint file holds pickled Python objects, not plain tensors; "
            "refused (structpe never unpickles them)"
        ) from None
    clocks = (time.time() - t0, time.process_time() - c0)
    _finish(trainer, model, recipe, run_dir, result, clocks, before, checkpoint, fast, objective, meta)
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

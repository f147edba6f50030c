"""The Trainer of every structpe pre-training run and what it writes to the run folder.

``SiPETrainer`` logs the SiPE loss terms (LM, terminal and non-terminal tag losses), validates with
perplexity over a fixed number of batches and stops on a non-finite loss; ``RunFolderCallback``
writes ``metrics.csv`` and ``loss.png``. Kept apart from ``pretrain.py`` (which builds a run from a
recipe) so that the adapter trainer in ``structpe.train.adapter`` can subclass it without an
import cycle.
"""

from __future__ import annotations

import csv
import math
import time
from pathlib import Path
from typing import Any

import torch
from transformers import Trainer, TrainerCallback

from structpe.errors import StructpeError
from structpe.io import atomic_write_text, save_figure
from structpe.train.collators import IGNORE_INDEX, MLMCollator
from structpe.train.master_weights import MasterWeightAdamW

METRIC_COLUMNS = (
    "step", "epoch", "loss", "lm_loss", "terminal_loss", "nonterminal_loss", "ppl", "learning_rate",
    "grad_norm", "eval_loss", "eval_lm_loss", "eval_ppl", "eval_terminal_loss", "eval_nonterminal_loss",
    "eval_tokens", "elapsed_s", "cpu_s",
)
# the clocks of a row (every other column is something the trainer logged)
CLOCK_COLUMNS = ("elapsed_s", "cpu_s")

class NonFiniteLossError(RuntimeError):
    """The training loss became NaN or infinite; the run stops rather than train on garbage."""


class VocabularyMismatchError(StructpeError):
    """Model, tokenizer and prepared data disagree on the vocabulary."""


# -- the Trainer ------------------------------------------------------------------------------------
class SiPETrainer(Trainer):
    """Trainer that logs the SiPE loss terms, validates with perplexity and stops on NaN."""

    def __init__(self, *args: Any, objective: str = "causal", eval_batches: int | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.objective = objective
        self.eval_batches = eval_batches
        self._terms: torch.Tensor | None = None  # on-device sums of lm, terminal, nonterminal; count

    def _issue_warnings_after_load(self, load_result: Any) -> None:
        # A checkpoint leaves out tied weights (the LM head shares the embedding); the Trainer only
        # knows ``_keys_to_ignore_on_save`` and would warn "missing keys" on every resume. Re-tie
        # and stay quiet for exactly those; any other missing key still warns.
        tied = set(getattr(self.model, "all_tied_weights_keys", None) or {})
        if load_result.missing_keys and set(load_result.missing_keys) <= tied:
            self.model.tie_weights()
            load_result = type(load_result)([], load_result.unexpected_keys)
        super()._issue_warnings_after_load(load_result)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):  # noqa: D102
        outputs = model(**inputs)
        loss = outputs.loss
        if loss is None:
            raise RuntimeError("the model returned no loss; the collator must provide labels")
        if not torch.isfinite(loss.detach()).all():
            names = ("lm_loss", "terminal_loss", "nonterminal_loss")
            terms = {k: _item(getattr(outputs, k, None)) for k in names}
            raise NonFiniteLossError(
                f"non-finite training loss {loss.item()} at step {self.state.global_step + 1} "
                f"(terms: {terms}); stopping. Lower train.lr, raise train.warmup or check the data; "
                f"the last good checkpoint is in {self.args.output_dir}"
            )
        if model.training:  # accumulate on the device: no host sync per step
            zero = loss.new_zeros(())
            terms = [outputs.lm_loss, outputs.terminal_loss, outputs.nonterminal_loss]
            vals = torch.stack([(x if x is not None else zero).detach().float() for x in terms] + [zero + 1])
            self._terms = vals if self._terms is None else self._terms + vals
        return (loss, outputs) if return_outputs else loss

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:  # noqa: D102
        if "loss" in logs and self._terms is not None:
            t = self._terms
            if self.args.world_size > 1:
                t = self.accelerator.reduce(t, reduction="sum")
            t = t.double().cpu()
            n = float(t[3])
            logs["lm_loss"] = float(t[0]) / n
            logs["terminal_loss"] = float(t[1]) / n
            logs["nonterminal_loss"] = float(t[2]) / n
            logs["ppl"] = _ppl(logs["lm_loss"])
            self._terms = None
        super().log(logs, start_time)

    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        """Trainer's save, minus the pickled ``training_args.bin`` (kept as JSON instead); a
        ``fast_bf16`` model is saved as its float32 master weights."""
        optimizer = getattr(self.optimizer, "optimizer", self.optimizer)  # accelerate wraps it
        if isinstance(optimizer, MasterWeightAdamW) and state_dict is None:
            with optimizer.float32_model(self.model):
                super()._save(output_dir, state_dict)
        else:
            super()._save(output_dir, state_dict)
        out = Path(output_dir if output_dir is not None else self.args.output_dir)
        if self.args.should_save:
            (out / "training_args.bin").unlink(missing_ok=True)
            atomic_write_text(out / "training_args.json", self.args.to_json_string())

    def evaluate(
        self, eval_dataset=None, ignore_keys=None, metric_key_prefix: str = "eval"
    ) -> dict[str, float]:
        """Token-weighted validation LM loss, perplexity and tag losses (all processes together)."""
        loader = self.get_eval_dataloader(eval_dataset)
        model = self.model
        was_training = model.training
        model.eval()
        sums = torch.zeros(4, dtype=torch.float64, device=self.args.device)  # lm*n, t*n, nt*n, n
        t0 = time.time()
        with torch.no_grad():
            for i, batch in enumerate(loader):
                if self.eval_batches is not None and i >= self.eval_batches:
                    break
                batch = self._prepare_inputs(batch)
                with self.compute_loss_context_manager():
                    out = model(**batch)
                labels = batch["labels"]
                n = (labels[:, 1:] != IGNORE_INDEX).sum() if self.objective == "causal" else (
                    labels != IGNORE_INDEX).sum()
                n = float(n)
                if n == 0:
                    continue
                sums[0] += float(out.lm_loss) * n
                sums[1] += (_item(out.terminal_loss) or 0.0) * n
                sums[2] += (_item(out.nonterminal_loss) or 0.0) * n
                sums[3] += n
        if self.args.world_size > 1:
            sums = self.accelerator.reduce(sums, reduction="sum")
        if was_training:
            model.train()
        n = max(float(sums[3]), 1.0)
        p = metric_key_prefix
        metrics = {
            f"{p}_lm_loss": float(sums[0]) / n,
            f"{p}_terminal_loss": float(sums[1]) / n,
            f"{p}_nonterminal_loss": float(sums[2]) / n,
            f"{p}_tokens": float(sums[3]),
            f"{p}_runtime": round(time.time() - t0, 3),
        }
        metrics[f"{p}_ppl"] = _ppl(metrics[f"{p}_lm_loss"])
        metrics[f"{p}_loss"] = metrics[f"{p}_lm_loss"] + float(
            getattr(self.model.config, "tag_loss_weight", 1.0)
        ) * (metrics[f"{p}_terminal_loss"] + metrics[f"{p}_nonterminal_loss"])
        self.log(metrics)
        self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, metrics)
        return metrics


def _item(x: Any) -> float | None:
    if x is None:
        return None
    return float(x.detach().float().item()) if torch.is_tensor(x) else float(x)


def _ppl(loss: float) -> float:
    return math.exp(loss) if loss < 50 else float("inf")


# -- callbacks --------------------------------------------------------------------------------------
class RunFolderCallback(TrainerCallback):
    """metrics.csv (one row per log event) and loss.png, written by the main process only.

    ``elapsed_s`` counts training time over every sitting of a resumed run (``elapsed_before`` is
    what the earlier sittings logged up to the checkpoint), so wall times stay comparable; ``cpu_s``
    likewise counts the process's CPU seconds (``cpu_before``), the cost that a pause or a loaded
    machine does not inflate (empty when the earlier sittings did not log it).
    """

    def __init__(self, run_dir: Path, elapsed_before: float = 0.0, cpu_before: float | None = 0.0):
        self.run_dir = run_dir
        self.csv_path = run_dir / "metrics.csv"
        self.t0 = time.time() - elapsed_before
        self.c0 = None if cpu_before is None else time.process_time() - cpu_before

    def on_log(self, args, state, control, logs=None, **kwargs):  # noqa: D102
        if not state.is_world_process_zero or not logs:
            return
        row = {k: logs.get(k, "") for k in METRIC_COLUMNS}
        row["step"] = state.global_step
        row["epoch"] = round(state.epoch or 0.0, 4)
        row["elapsed_s"] = round(time.time() - self.t0, 2)
        row["cpu_s"] = "" if self.c0 is None else round(time.process_time() - self.c0, 2)
        if not any(row[k] != "" for k in METRIC_COLUMNS[2:] if k not in CLOCK_COLUMNS):
            return  # e.g. the end-of-training runtime summary
        new = not self.csv_path.exists()
        with open(self.csv_path, "a", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=METRIC_COLUMNS)
            if new:
                w.writeheader()
            w.writerow(row)

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):  # noqa: D102
        if state.is_world_process_zero:
            plot_losses(self.csv_path, self.run_dir / "loss.png")

    def on_train_end(self, args, state, control, **kwargs):  # noqa: D102
        if state.is_world_process_zero:
            plot_losses(self.csv_path, self.run_dir / "loss.png")


class EpochToCollator(TrainerCallback):
    """Tell the MLM collator the epoch, so its per-batch masks differ from epoch to epoch."""

    def __init__(self, collator: MLMCollator):
        self.collator = collator

    def on_epoch_begin(self, args, state, control, **kwargs):  # noqa: D102
        self.collator.epoch = int(state.epoch or 0)


def read_metrics(path: str | Path) -> list[dict[str, float]]:
    """Rows of a run's metrics.csv as floats (empty cells dropped)."""
    out = []
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            out.append({k: float(v) for k, v in row.items() if v not in ("", None)})
    return out


def val_lm_loss(row: dict[str, float]) -> float | None:
    """Validation LM loss of a metrics row (``eval_loss`` also holds the tag terms for SiPE runs)."""
    return row.get("eval_lm_loss", row.get("eval_loss"))


def plot_losses(csv_path: Path, png_path: Path) -> None:
    """Training LM loss, tag losses and validation LM loss against the step."""
    if not csv_path.exists():
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_metrics(csv_path)
    fig, ax = plt.subplots(figsize=(7, 4))
    curves = (("lm_loss", "-"), ("terminal_loss", ":"), ("nonterminal_loss", ":"), ("eval_lm_loss", "o-"))
    for key, style in curves:
        pts = [(r["step"], r[key]) for r in rows if key in r]
        if pts:
            ax.plot(*zip(*pts, strict=True), style, label=key, markersize=3)
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats)")
    ax.set_title(png_path.parent.name)
    ax.legend()
    ax.grid(alpha=0.3)
    save_figure(fig, png_path, dpi=100)

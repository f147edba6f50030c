"""pretrain(): run folder, clear errors before training, NaN stop, exact resume after a kill,
and 2-process DDP (gloo, CPU) matching the single-process run."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import TrainerCallback

from structpe.errors import PreparedDataError, RecipeError
from structpe.models import load
from structpe.train.prepare import prepare
from structpe.train.prepare_settings import METADATA_FILE, PrepareSettings
from structpe.train.pretrain import can_compile, pretrain
from structpe.train.trainer import NonFiniteLossError, VocabularyMismatchError, read_metrics

SEQ_LEN = 64  # the tiny recipe's train.seq_len (conftest.py)
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}

KILL_SCRIPT = """
import os, signal, sys
from transformers import TrainerCallback
from structpe.train.pretrain import pretrain

class Kill(TrainerCallback):  # SIGKILL: no cleanup, no final save -- like a lost node
    def on_step_end(self, args, state, control, **kw):
        if state.global_step == int(os.environ["KILL_AT"]):
            os.kill(os.getpid(), signal.SIGKILL)

resume = sys.argv[1] == "resume"
pretrain(sys.argv[2], sys.argv[3:], resume=resume, callbacks=[Kill()] if "KILL_AT" in os.environ else [])
"""


def _run(args: list[str], env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run(args, env=env or ENV, capture_output=True, text=True, timeout=300)
    if check and p.returncode != 0:
        raise AssertionError(f"{args} failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


def _free_port() -> int:
    """A free TCP port, so concurrent test sessions do not collide on torchrun's rendezvous."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _losses(run: Path) -> dict[int, float]:
    return {int(r["step"]): r["loss"] for r in read_metrics(run / "metrics.csv") if "loss" in r}


def test_run_folder(tiny_recipe: Path, gold_dataset: Path, tmp_path: Path) -> None:
    run = pretrain(tiny_recipe, [f"train.dataset={gold_dataset}", f"train.output_dir={tmp_path / 'run'}"])
    for name in (
        "config.yaml",
        "metrics.csv",
        "loss.png",
        "summary.json",
        "checkpoint-6/model.safetensors",
        "checkpoint-6/optimizer.pt",
        "checkpoint-6/rng_state.pth",
        "final/model.safetensors",
        "final/tokenizer.json",
    ):
        assert (run / name).is_file(), name
    assert not list(run.rglob("training_args.bin"))  # no pickled TrainingArguments
    rows = read_metrics(run / "metrics.csv")
    train_rows = [r for r in rows if "loss" in r]
    eval_rows = [r for r in rows if "eval_ppl" in r]
    assert [r["step"] for r in train_rows] == [1, 2, 3, 4, 5, 6] and [r["step"] for r in eval_rows] == [3, 6]
    for r in train_rows:  # loss = LM + CE_T + CE_N, logged separately
        assert r["loss"] == pytest.approx(r["lm_loss"] + r["terminal_loss"] + r["nonterminal_loss"], rel=1e-4)
    assert eval_rows[-1]["eval_ppl"] == pytest.approx(
        torch.tensor(eval_rows[-1]["eval_lm_loss"]).exp().item()
    )
    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == 6 and summary["final_eval"]["eval_ppl"] == eval_rows[-1]["eval_ppl"]
    model = load(run / "final")
    assert model.config.injection == "position" and model.config.vocab_size == 600
    with pytest.raises(FileExistsError, match="--resume"):  # a finished run is never overwritten silently
        pretrain(tiny_recipe, [f"train.dataset={gold_dataset}", f"train.output_dir={run}"])


@pytest.fixture(scope="module")
def full_length_dataset(gold_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The gold dataset's sequences of exactly ``seq_len`` tokens: every batch has one shape, as in the
    quickstart's data, so a compiled run compiles once (a shorter batch costs a second, dynamic-shape
    compile as long as the first, which the comparison below does not need)."""
    from datasets import load_from_disk

    out = tmp_path_factory.mktemp("data") / "ewt-gold-full"
    dd = load_from_disk(str(gold_dataset)).filter(lambda e: len(e["input_ids"]) == SEQ_LEN)
    assert min(len(split) for split in dd.values()) >= 8
    dd.save_to_disk(str(out))
    shutil.copy(gold_dataset / METADATA_FILE, out / METADATA_FILE)
    return out


def test_compiled_bf16_run_trains_like_eager_fp32(
    tiny_recipe: Path, full_length_dataset: Path, tmp_path: Path
) -> None:
    """train.compile + train.bf16 (the quickstart's CPU default where bf16 is native): every step's
    loss within 2% of the eager float32 run's, and the checkpoint holds the plain module's weights
    (no ``_orig_mod.`` prefixes), so it loads like any other. One layer: compiling is most of the cost."""
    if not can_compile():
        pytest.skip("torch.compile needs a C++ compiler on CPU, and none is on the PATH")
    common = [f"train.dataset={full_length_dataset}", "train.max_steps=8", "train.eval_every=8",
              "model.n_layers=1"]
    eager = pretrain(tiny_recipe, [*common, f"train.output_dir={tmp_path / 'eager'}"])
    fast = pretrain(tiny_recipe, [*common, f"train.output_dir={tmp_path / 'fast'}", "train.compile=true",
                                  "train.bf16=true"])
    a, b = _losses(eager), _losses(fast)
    assert sorted(a) == sorted(b) == list(range(1, 9))
    assert a[8] < a[1]  # the runs learn, so the comparison covers a moving curve
    for step in a:
        assert b[step] == pytest.approx(a[step], rel=0.02), step
    ref, got = load(eager / "final").state_dict(), load(fast / "final").state_dict()
    assert list(got) == list(ref)
    assert all(torch.allclose(got[k], ref[k], atol=0.05) for k in ref)


class _StopAt(TrainerCallback):
    """Interrupt a run after step ``at`` (an in-process stand-in for a lost job)."""

    def __init__(self, at: int) -> None:
        self.at = at

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.at:
            raise KeyboardInterrupt


def test_fast_bf16_trains_like_fp32_saves_float32_and_resumes_exactly(
    tiny_recipe: Path, gold_dataset: Path, tmp_path: Path
) -> None:
    """train.fast_bf16: bf16 parameters, float32 masters. Every loss within 3% of float32 eager; the
    saved model is the float32 masters; a run resumed from its checkpoint repeats the same losses
    (the masters come back from the optimizer state, not from the bf16 weights)."""
    # one thread throughout: the default picks the idle cores at each start, and a resume on more
    # threads than the run it continues sums in another order (seen: 2 then 1 beside the suite)
    common = [f"train.dataset={gold_dataset}", "train.max_steps=8", "train.eval_every=4", "train.threads=1"]
    fast = [*common, "train.fast_bf16=true", "train.bf16=true"]
    ref = pretrain(tiny_recipe, [*common, f"train.output_dir={tmp_path / 'fp32'}"])
    run = pretrain(tiny_recipe, [*fast, f"train.output_dir={tmp_path / 'fast'}"])
    a, b = _losses(ref), _losses(run)
    assert sorted(b) == list(range(1, 9)) and a[8] < a[1]
    for step in a:
        assert b[step] == pytest.approx(a[step], rel=0.03), step
    assert json.loads((run / "summary.json").read_text())["fast_bf16"] is True
    final = load(run / "final")
    assert {p.dtype for p in final.parameters()} == {torch.float32}
    assert any((p != p.to(torch.bfloat16).float()).any() for p in final.parameters())  # not bf16-rounded
    cut = tmp_path / "cut"
    with pytest.raises(KeyboardInterrupt):
        pretrain(tiny_recipe, [*fast, f"train.output_dir={cut}"], callbacks=[_StopAt(6)])
    pretrain(tiny_recipe, [*fast, f"train.output_dir={cut}"], resume=True)
    c = _losses(cut)
    for step in range(5, 9):
        assert c[step] == b[step], step  # a resume that lost state moves the loss by percents
    got, want = load(cut / "final").state_dict(), final.state_dict()
    assert all(torch.equal(got[k], want[k]) for k in want)


def test_clear_errors_before_training(
    tiny_recipe: Path, gold_dataset: Path, wordpiece_tokenizer: Path, tmp_path: Path
) -> None:
    out = f"train.output_dir={tmp_path / 'never'}"
    with pytest.raises(PreparedDataError, match="not found"):
        pretrain(tiny_recipe, [f"train.dataset={tmp_path / 'missing'}", out])
    with pytest.raises(RecipeError, match="train.dataset is not set"):
        pretrain(tiny_recipe, [out])
    with pytest.raises(VocabularyMismatchError, match=r"model.vocab_size=512 .* has 600 tokens"):
        pretrain(tiny_recipe, [f"train.dataset={gold_dataset}", "model.vocab_size=512", out])
    with pytest.raises(VocabularyMismatchError, match="not the one"):
        pretrain(
            tiny_recipe, [f"train.dataset={gold_dataset}", f"train.tokenizer={wordpiece_tokenizer}", out]
        )
    with pytest.raises(RecipeError, match="packed at seq_len=64"):
        pretrain(tiny_recipe, [f"train.dataset={gold_dataset}", "train.seq_len=32", out])
    with pytest.raises(RecipeError, match="Did you mean 'train.warmup'"):
        pretrain(tiny_recipe, [f"train.dataset={gold_dataset}", "warmpu=3", out])
    assert not (tmp_path / "never").exists()  # nothing started


def test_nan_loss_stops_with_message(tiny_recipe: Path, gold_dataset: Path, tmp_path: Path) -> None:
    class Poison(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kw):
            if state.global_step == 2:
                with torch.no_grad():
                    next(model.parameters()).fill_(float("nan"))

    with pytest.raises(NonFiniteLossError, match="non-finite training loss nan at step 3"):
        pretrain(
            tiny_recipe,
            [f"train.dataset={gold_dataset}", f"train.output_dir={tmp_path / 'nan'}"],
            callbacks=[Poison()],
        )


def test_exact_resume_after_kill(tiny_recipe: Path, gold_dataset: Path, tmp_path: Path) -> None:
    script = tmp_path / "run.py"
    script.write_text(KILL_SCRIPT)
    common = [
        str(tiny_recipe),
        f"train.dataset={gold_dataset}",
        "max_steps=20",
        "eval_every=10",
        "model.dropout=0.1",
        "model.attention_dropout=0.1",
    ]  # dropout: RNG state must resume too
    full, killed = tmp_path / "full", tmp_path / "killed"
    _run([sys.executable, str(script), "fresh", *common, f"train.output_dir={full}"])
    p = _run(
        [sys.executable, str(script), "fresh", *common, f"train.output_dir={killed}"],
        env={**ENV, "KILL_AT": "13"},
        check=False,
    )
    assert p.returncode == -9, p.stderr[-2000:]
    assert (killed / "checkpoint-10").is_dir() and not (killed / "checkpoint-20").exists()
    assert max(_losses(killed)) == 12  # steps 11-12 were logged, then lost with the process
    before = {int(r["step"]): r["elapsed_s"] for r in read_metrics(killed / "metrics.csv")}[10]
    resumed = _run([sys.executable, str(script), "resume", *common, f"train.output_dir={killed}"])
    assert "missing keys" not in resumed.stdout + resumed.stderr  # the tied LM head is re-tied, quietly
    # the clock continues from the checkpoint: elapsed_s never goes back, the summary counts both sittings
    elapsed = [r["elapsed_s"] for r in read_metrics(killed / "metrics.csv")]
    assert elapsed == sorted(elapsed) and elapsed[-1] > before
    summary = json.loads((killed / "summary.json").read_text())
    assert summary["train_wall_s"] >= before + summary["sitting_wall_s"] - 0.1
    # so does the CPU clock: every row has one, it never goes back, the summary sums the sittings
    cpu = [r.get("cpu_s") for r in read_metrics(killed / "metrics.csv")]
    assert None not in cpu and cpu == sorted(cpu) and summary["train_cpu_s"] >= cpu[-1] - 0.5 > 0
    a, b = _losses(full), _losses(killed)
    assert sorted(a) == sorted(b) == list(range(1, 21))  # no duplicate rows for the redone steps
    for step in range(1, 21):
        assert b[step] == pytest.approx(a[step], rel=1e-6, abs=1e-6), step
    ea = [r["eval_lm_loss"] for r in read_metrics(full / "metrics.csv") if "eval_lm_loss" in r]
    eb = [r["eval_lm_loss"] for r in read_metrics(killed / "metrics.csv") if "eval_lm_loss" in r]
    assert eb == pytest.approx(ea, rel=1e-6)


def test_ddp_two_processes_match_single(tiny_recipe: Path, gold_dataset: Path, tmp_path: Path) -> None:
    """torchrun, 2 CPU processes (gloo), 2 sequences each == 1 process with 4 sequences per step (run
    in this process: the comparison allows 0.2%, more than thread counts change)."""
    overrides = [f"train.dataset={gold_dataset}", "max_steps=4", "eval_every=4"]
    single, ddp = tmp_path / "single", tmp_path / "ddp"
    pretrain(tiny_recipe, [*overrides, "batch_size=4", f"train.output_dir={single}"])
    common = ["--config", str(tiny_recipe), *overrides]
    _run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            "2",
            "--master_port",
            str(_free_port()),
            "-m",
            "structpe.cli",
            "pretrain",
            *common,
            "batch_size=2",
            f"train.output_dir={ddp}",
        ]
    )
    assert json.loads((ddp / "summary.json").read_text())["world_size"] == 2
    a, b = _losses(single), _losses(ddp)
    assert sorted(a) == sorted(b) == [1, 2, 3, 4]
    # same examples per step; the only difference is per-rank token-mean weighting of the loss
    for step in a:
        assert b[step] == pytest.approx(a[step], rel=2e-3), (step, a, b)
    ea = [r["eval_lm_loss"] for r in read_metrics(single / "metrics.csv") if "eval_lm_loss" in r]
    eb = [r["eval_lm_loss"] for r in read_metrics(ddp / "metrics.csv") if "eval_lm_loss" in r]
    assert eb == pytest.approx(ea, rel=2e-3)


def test_mlm_encoder_pretrains(ewt_slices: dict, wordpiece_tokenizer: Path, tmp_path: Path) -> None:
    data = prepare(
        {k: [v] for k, v in ewt_slices.items()},
        wordpiece_tokenizer,
        tmp_path / "wp",
        settings=PrepareSettings(parser="gold", seq_len=64),
    )
    recipe = tmp_path / "roberta.yaml"
    recipe.write_text(
        "model: {family: roberta, injection: input, d_model: 32, n_layers: 2, n_heads: 2, d_ff: 64,"
        " max_position_embeddings: 80}\n"
        "train: {batch_size: 4, seq_len: 64, max_steps: 3, warmup: 1, eval_every: 3, eval_batches: 2,"
        " log_every: 1, progress: false}\n"
    )
    run = pretrain(recipe, [f"train.dataset={data}", f"train.output_dir={tmp_path / 'run'}"])
    summary = json.loads((run / "summary.json").read_text())
    assert summary["objective"] == "mlm" and summary["final_eval"]["eval_tokens"] > 0
    rows = [r for r in read_metrics(run / "metrics.csv") if "loss" in r]
    assert len(rows) == 3 and all(r["terminal_loss"] > 0 for r in rows)


def test_a_resume_of_a_run_without_a_cpu_clock_records_none(tmp_path: Path) -> None:
    # metrics.csv written before `cpu_s` existed: the earlier sittings' CPU time is unknown, so the
    # resumed run must not report a total that counts only its own sitting
    from structpe.train.checkpoints import truncate_metrics

    csv_path = tmp_path / "metrics.csv"
    csv_path.write_text("step,epoch,loss,elapsed_s\n5,0.1,4.0,10.0\n10,0.2,3.5,20.0\n15,0.3,3.2,30.0\n")
    assert truncate_metrics(csv_path, 10) == (20.0, None)
    assert [r["step"] for r in read_metrics(csv_path)] == [5, 10]
    csv_path.write_text("step,loss,elapsed_s,cpu_s\n5,4.0,10.0,9.0\n10,3.5,20.0,18.5\n")
    assert truncate_metrics(csv_path, 10) == (20.0, 18.5)
    assert truncate_metrics(tmp_path / "absent.csv", 10) == (0.0, 0.0)


"""CPU training settings: bf16 autocast trains like float32 on a tiny model (so it can be the
default wherever it is native), and the thread count follows the free cores."""

from __future__ import annotations

import pytest
import torch

from structpe.hardware import cpu_threads
from structpe.models import SiPEConfig, build_model
from structpe.modules.prior import TagIdError, check_tag_ids
from structpe.train.pretrain import can_compile


def _batch(seed: int, vocab: int = 300, batch: int = 4, seq: int = 32) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (batch, seq), generator=g)
    ids[:, 1::2] = ids[:, 0::2] % 50  # learnable structure: every odd token follows from the previous
    tagged = torch.rand(batch, seq, generator=g) < 0.75
    return {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "terminal_ids": torch.where(tagged, torch.randint(0, 2, (batch, seq), generator=g), -100),
        "nonterminal_ids": torch.where(tagged, torch.randint(0, 5, (batch, seq), generator=g), -100),
        "labels": ids.clone(),
    }


def _train(bf16: bool, steps: int = 30) -> list[float]:
    torch.manual_seed(0)
    cfg = SiPEConfig(family="txl", injection="position", vocab_size=300, d_model=32, n_layers=2, n_heads=2,
                     d_ff=64, dropout=0.0, attention_dropout=0.0)
    model = build_model(cfg).train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for step in range(steps):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            out = model(**_batch(step % 4))
        assert out.lm_loss.dtype == torch.float32  # logits are upcast before the cross-entropy
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(float(out.lm_loss.detach()))
    return losses


def test_bf16_loss_curve_matches_fp32() -> None:
    fp32, bf16 = _train(False), _train(True)
    assert fp32[-1] < fp32[0] - 0.5  # it learns, so the comparison covers a moving curve
    for a, b in zip(fp32, bf16, strict=True):
        assert abs(a - b) / a < 0.02
    tail = slice(-10, None)
    assert abs(sum(fp32[tail]) - sum(bf16[tail])) / sum(fp32[tail]) < 0.01


def test_cpu_threads_follow_the_free_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    busy = {"percent": 25.0}  # psutil's system-wide busy share over the sampling interval
    monkeypatch.setattr("psutil.cpu_percent", lambda interval=None: busy["percent"])
    monkeypatch.setattr("os.getloadavg", lambda: (20.0, 0.0, 0.0))  # ignored: it counts our own past work
    assert cpu_threads() == 6
    busy["percent"] = 100.0
    assert cpu_threads() == 1  # a saturated machine: one thread, never zero
    assert cpu_threads(3) == 3  # an explicit train.threads wins
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert cpu_threads() == 2


def test_tag_id_check_inside_a_compiled_graph() -> None:
    """Under torch.compile the check asserts inside the graph (no graph break) and still refuses a
    bad id; eager keeps the error that names the position."""
    ids = torch.tensor([[0, 1, -100]])
    with pytest.raises(TagIdError, match=r"terminal_ids\[0, 1\] = 7"):
        check_tag_ids("terminal_ids", torch.tensor([[0, 7, -100]]), 2)
    if not can_compile():
        pytest.skip("torch.compile needs a C++ compiler on CPU, and none is on the PATH")

    def f(t: torch.Tensor) -> torch.Tensor:
        check_tag_ids("terminal_ids", t, 2)
        return t.clamp(min=0) + 1

    assert torch._dynamo.explain(f)(ids).graph_break_count == 0
    compiled = torch.compile(f)
    assert compiled(ids).tolist() == [[1, 2, 1]]
    with pytest.raises(RuntimeError, match="terminal_ids holds an id"):
        compiled(torch.tensor([[0, 7, -100]]))


def test_can_compile_looks_for_a_cpp_compiler(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    monkeypatch.setenv("CXX", "no-such-compiler-here")
    assert not can_compile()
    monkeypatch.setenv("CXX", "sh")  # any program on the PATH stands for one
    assert can_compile()


def test_compile_without_a_compiler_is_one_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    from structpe.errors import RecipeError
    from structpe.train.pretrain import pretrain

    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    monkeypatch.setenv("CXX", "no-such-compiler-here")
    with pytest.raises(RecipeError, match="train.compile=true needs a C\\+\\+ compiler"):
        pretrain("txl/none-tiny", [f"train.dataset={tmp_path}", "train.compile=true"])


@pytest.mark.parametrize(
    "argv",
    [
        ["generate", "--model", "m"],
        ["eval", "ppl", "--model", "m", "--data", "d"],
        ["eval", "blimp", "--model", "m"],
        ["finetune", "glue", "--model", "m"],
        ["tag", "in.txt"],
    ],
)
def test_every_long_command_takes_threads_and_refuses_zero(
    argv: list[str], capsys: pytest.CaptureFixture
) -> None:
    """--threads on generate / eval / finetune / tag (the idle share when absent); 0 is one line, exit 2."""
    from structpe.cli import build_parser, main

    assert build_parser().parse_args([*argv, "--threads", "3"]).threads == 3
    assert build_parser().parse_args(argv).threads is None
    assert main([*argv, "--threads", "0"]) == 2
    assert "--threads must be >= 1, got 0" in capsys.readouterr().err


def test_set_cpu_threads_sets_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    from structpe.hardware import set_cpu_threads

    before = torch.get_num_threads()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    monkeypatch.setattr("psutil.cpu_percent", lambda interval=None: 50.0)  # one busy process of two cores
    try:
        assert set_cpu_threads() == 1 and torch.get_num_threads() == 1
        assert set_cpu_threads(2) == 2 and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)

"""MasterWeightAdamW (train.fast_bf16): AdamW on float32 masters of bf16 parameters."""

from __future__ import annotations

import torch
from torch import nn

from structpe.train.master_weights import MASTER_KEY, MasterWeightAdamW


def _pair(seed: int = 0) -> tuple[nn.Linear, nn.Linear]:
    torch.manual_seed(seed)
    model = nn.Linear(8, 4).to(torch.bfloat16)
    ref = nn.Linear(8, 4)
    ref.load_state_dict(model.state_dict())  # the same (bf16-representable) start in float32
    return ref, model


def test_steps_match_float32_adamw_on_the_same_gradients() -> None:
    """The masters follow float32 AdamW exactly; the model holds their bf16 rounding. Updates far
    below bf16's resolution still accumulate in the masters (a bf16 AdamW would lose them)."""
    ref, model = _pair()
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-5, weight_decay=0.01, fused=True)
    opt = MasterWeightAdamW(model.parameters(), lr=1e-5, weight_decay=0.01, fused=True)
    start = model.weight.detach().clone()
    for step in range(5):
        grads = [torch.randn_like(p, dtype=torch.bfloat16) for p in model.parameters()]
        for p, q, g in zip(model.parameters(), ref.parameters(), grads, strict=True):
            p.grad, q.grad = g.clone(), g.float()
        opt.step()
        ref_opt.step()
        opt.zero_grad(set_to_none=True)
        for (param, master), q in zip(opt.pairs(), ref.parameters(), strict=True):
            assert torch.equal(master, q.detach()), step
            assert torch.equal(param.detach(), q.detach().to(torch.bfloat16)), step
    master = next(m for _, m in opt.pairs())
    # weights whose total update (~5e-5) is below half of bf16's step there: moved in the masters only
    stuck = (model.weight.detach() == start) & (master != start.float())
    assert stuck.any()


def _groups(model: nn.Linear) -> list[dict]:
    return [{"params": [model.weight]}, {"params": [model.bias], "weight_decay": 0.0}]


def test_state_dict_carries_the_masters_and_float32_model_saves_them() -> None:
    _, model = _pair()
    opt = MasterWeightAdamW(_groups(model), lr=1e-3)
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    opt.step()
    state = opt.state_dict()
    assert len(state[MASTER_KEY]) == 2 and state[MASTER_KEY][0].dtype == torch.float32
    _, other = _pair(seed=1)
    opt2 = MasterWeightAdamW(_groups(other), lr=1e-3)
    opt2.load_state_dict(state)
    for (p, m), (p2, m2) in zip(opt.pairs(), opt2.pairs(), strict=True):
        assert torch.equal(m, m2) and torch.equal(p.detach(), p2.detach())
    assert torch.equal(opt2.state_dict()["state"][0]["exp_avg"], state["state"][0]["exp_avg"])
    with opt.float32_model(model) as m32:
        assert m32.weight.dtype == torch.float32
        assert torch.equal(m32.weight.detach(), next(m for _, m in opt.pairs()))
    assert model.weight.dtype == torch.bfloat16
    assert torch.equal(model.weight.detach(), state[MASTER_KEY][0].to(torch.bfloat16))

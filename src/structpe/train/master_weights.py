"""``train.fast_bf16``: bfloat16 parameters and activations, float32 master weights in the optimizer.

Under bf16 autocast (``train.bf16``) the parameters and the residual stream stay float32, so every
linear layer casts its input to bf16 and its output back, forward and backward: on CPU these casts
were the top op by self time of the quickstart step (docs/pretraining.md). With ``fast_bf16`` the
model itself is bf16 -- no autocast, no casts -- and the optimizer keeps a float32 copy of every
parameter (the "master weights" of mixed-precision training, Micikevicius et al. 2018): each step
adds the bf16 gradients to the float32 masters with AdamW and rounds the masters back into the
model, so updates far below bf16's resolution still accumulate. Checkpoints hold the float32
masters (``SiPETrainer._save``), and the optimizer state carries them too, so a resumed run
continues from the exact float32 weights.

Written here rather than taken from a library: torch's AdamW updates parameters in place in their
own dtype, and Hugging Face's Trainer has no master-weight option for a bf16 model on CPU
(accelerate's mixed precision is autocast).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

MASTER_KEY = "master_weights"  # the float32 copies in the optimizer's state dict


class MasterWeightAdamW(torch.optim.AdamW):
    """AdamW over float32 copies of (bf16) model parameters; ``step`` rounds them back into the model.

    Takes the same parameter groups as ``torch.optim.AdamW`` (the Trainer's weight-decay groups).
    """

    def __init__(self, params: Any, **kwargs: Any) -> None:
        groups = list(params)
        if groups and not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        self.model_params = [list(g["params"]) for g in groups]
        masters = [
            {**g, "params": [p.detach().to(torch.float32, copy=True) for p in ps]}
            for g, ps in zip(groups, self.model_params, strict=True)
        ]
        super().__init__(masters, **kwargs)

    def pairs(self) -> Iterator[tuple[nn.Parameter, torch.Tensor]]:
        """(model parameter, its float32 master) for every parameter the optimizer updates."""
        for group, params in zip(self.param_groups, self.model_params, strict=True):
            yield from zip(params, group["params"], strict=True)

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        """AdamW on the masters with the model's gradients (upcast), then the masters rounded back."""
        for param, master in self.pairs():
            master.grad = None if param.grad is None else param.grad.to(torch.float32)
        loss = super().step(closure)
        params, masters = zip(*self.pairs(), strict=True)
        torch._foreach_copy_(list(params), list(masters))  # rounds to the parameters' dtype
        for master in masters:
            master.grad = None
        return loss

    def state_dict(self) -> dict[str, Any]:
        """AdamW's state plus the masters themselves (the model holds only their bf16 rounding)."""
        state = super().state_dict()
        state[MASTER_KEY] = [master.detach().clone() for _, master in self.pairs()]
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore AdamW's state and the masters, and round the masters into the model."""
        state_dict = dict(state_dict)
        saved = state_dict.pop(MASTER_KEY)
        super().load_state_dict(state_dict)
        with torch.no_grad():
            for (param, master), value in zip(self.pairs(), saved, strict=True):
                master.copy_(value)
                param.copy_(value)

    @contextmanager
    def float32_model(self, model: nn.Module) -> Iterator[nn.Module]:
        """The model in float32 holding the exact masters (to save it), bf16 again afterwards."""
        dtype = next(model.parameters()).dtype
        model.to(torch.float32)
        with torch.no_grad():
            for param, master in self.pairs():
                param.copy_(master)
        try:
            yield model
        finally:
            model.to(dtype)  # the masters rounded: what the parameters held before

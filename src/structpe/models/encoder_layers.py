"""Building blocks the three encoder backbones share (SiPE §3.2, §3.4, §3.5; docs/design.md §6).

* ``add_segment_embedding``, ``key_padding_mask``, ``LayerOutputs`` -- embedding and mask plumbing
  and the per-layer outputs transformers returns on request.
* ``attend`` -- one attention call: ``F.scaled_dot_product_attention`` unless the caller asks for
  the attention weights.
* ``MaskedLMHead`` and ``activation`` -- the MLM head (tied decoder) and transformers' activation names.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from structpe.models.config import SiPEConfig


def add_segment_embedding(
    x: torch.Tensor, token_type: nn.Embedding | None, token_type_ids: torch.Tensor | None
) -> torch.Tensor:
    """x + e^seg (segment 0 when no ids are given), as BERT-style embeddings do.

    A model built without segment embeddings (type_vocab_size=0) refuses non-zero ids rather than
    silently dropping them.
    """
    if token_type is not None:
        return x + (token_type.weight[0] if token_type_ids is None else token_type(token_type_ids))
    if token_type_ids is not None and bool(token_type_ids.any()):
        raise ValueError("token_type_ids given but the model has no segment embeddings (type_vocab_size=0)")
    return x

def key_padding_mask(attention_mask: torch.Tensor | None) -> torch.Tensor | None:
    """[B, 1, 1, L] bool (True = attend) over keys only, as transformers does.

    None when nothing is padded, so that attention can take the unmasked kernel.
    """
    if attention_mask is None or bool(attention_mask.all()):
        return None
    return attention_mask.bool()[:, None, None, :]

# what every backbone's forward returns: (last hidden state, hidden states, attention weights), the last two
# None unless asked for
BackboneOutput = tuple[torch.Tensor, tuple[torch.Tensor, ...] | None, tuple[torch.Tensor, ...] | None]

class LayerOutputs:
    """The per-layer outputs transformers returns on request: hidden states (the embedding output
    first, then one per layer) and attention weights; nothing is kept unless asked for."""

    def __init__(self, x: torch.Tensor, output_hidden_states: bool, output_attentions: bool):
        self.hidden_states: list[torch.Tensor] | None = [x] if output_hidden_states else None
        self.attentions: list[torch.Tensor | None] | None = [] if output_attentions else None

    def add(self, x: torch.Tensor, probs: torch.Tensor | None) -> None:
        if self.hidden_states is not None:
            self.hidden_states.append(x)
        if self.attentions is not None:
            self.attentions.append(probs)

    def result(self, x: torch.Tensor) -> BackboneOutput:
        """(last, hidden_states, attentions) with ``x`` as the last hidden state."""
        return (
            x,
            tuple(self.hidden_states) if self.hidden_states is not None else None,
            tuple(self.attentions) if self.attentions is not None else None,
        )

def attend(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None,
    scale: float,
    dropout: float,
    output_attentions: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """softmax(q k^T * scale + mask) v over [B, H, L, d]; ``mask`` is bool (True = attend) or additive.

    Uses the fused SDPA kernel; the explicit path only runs when the caller wants the weights
    (attention analysis), with the same numbers.
    """
    if not output_attentions:
        out = F.scaled_dot_product_attention(
            query, key, value, attn_mask=mask, dropout_p=dropout, scale=scale
        )
        return out, None
    scores = torch.matmul(query, key.transpose(-1, -2)) * scale
    if mask is not None:
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        else:
            scores = scores + mask
    probs = torch.softmax(scores, dim=-1)
    out = torch.matmul(F.dropout(probs, p=dropout), value)
    return out, probs

class MaskedLMHead(nn.Module):
    """dense -> act -> LayerNorm -> decoder (tied to the word embeddings) + bias."""

    def __init__(self, config: SiPEConfig, act: str, bias: bool = True, norm_bias: bool = True):
        super().__init__()
        self.dense = nn.Linear(config.d_model, config.d_model, bias=bias)
        self.act = activation(act)
        self.norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps, bias=norm_bias)
        self.decoder = nn.Linear(config.d_model, config.vocab_size, bias=True)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.norm(self.act(self.dense(hidden))))

def _gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")

ACTIVATIONS = {  # the transformers ACT2FN names our checkpoints use, as plain functions
    "gelu": F.gelu,
    "gelu_new": _gelu_tanh,
    "gelu_pytorch_tanh": _gelu_tanh,
    "relu": F.relu,
    "tanh": torch.tanh,
}

def activation(name: str):
    """The activation function called ``name`` (transformers' spelling)."""
    if name not in ACTIVATIONS:
        raise ValueError(f"unsupported activation {name!r}; expected one of {sorted(ACTIVATIONS)}")
    return ACTIVATIONS[name]

"""The output every SiPE model returns, whatever its family (docs/design.md §6), the GLUE loss
every classification head shares, and the decoders' last-token GLUE head."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PretrainedConfig
from transformers.utils import ModelOutput


@dataclass
class SiPEOutput(ModelOutput):
    """``loss`` = lm_loss + tag_loss_weight * (terminal_loss + nonterminal_loss), when labels are given
    (+ syntax_loss_weight * syntax_loss in training for the rivals ``tpt`` / ``treereg``).

    ``terminal_logits`` / ``nonterminal_logits`` are the auxiliary tag heads ([B, L, 2] / [B, L, 5]);
    for causal models position p predicts the tags of the next tagged position, for masked models a
    masked position predicts its own tags. ``logits`` is [B, L, V] (or [B, n_labels] for
    classification heads).
    """

    loss: torch.FloatTensor | None = None
    logits: torch.FloatTensor | None = None
    terminal_logits: torch.FloatTensor | None = None
    nonterminal_logits: torch.FloatTensor | None = None
    lm_loss: torch.FloatTensor | None = None
    terminal_loss: torch.FloatTensor | None = None
    nonterminal_loss: torch.FloatTensor | None = None
    syntax_loss: torch.FloatTensor | None = None  # a parser-free rival's loss (SiPEConfig.syntax_loss)
    hidden_states: tuple[torch.FloatTensor, ...] | None = None
    attentions: tuple[torch.FloatTensor, ...] | None = None
    cache: Any = None  # the decoder's key/value cache (a transformers Cache) after use_cache=True


def causal_lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy of unshifted (HF-style) ``labels`` (-100: not scored); half-precision
    logits go to float32 for the loss, float32 / float64 stay as they are."""
    shifted = logits[:, :-1]
    shifted = shifted.float() if shifted.element_size() < 4 else shifted
    return F.cross_entropy(
        shifted.reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1).to(logits.device), ignore_index=-100
    )


def last_token_states(h: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """A causal decoder's pooled state for classification: each row's last real token [B, D]
    (padding on the right; the only position that has read the whole input)."""
    if attention_mask is None:
        last = torch.full((h.shape[0],), h.shape[1] - 1, device=h.device)
    else:
        last = attention_mask.to(h.device).long().sum(-1).clamp_min(1) - 1
    return h[torch.arange(h.shape[0], device=h.device), last]


def classification_output(
    config: PretrainedConfig,
    logits: torch.Tensor,
    labels: torch.Tensor | None,
    hidden_states: tuple[torch.Tensor, ...] | None,
    attentions: tuple[torch.Tensor, ...] | None,
) -> SiPEOutput:
    """GLUE losses as in ``transformers``: MSE for one label, else CE (int labels) or BCE (float)."""
    out = SiPEOutput(logits=logits, hidden_states=hidden_states, attentions=attentions)
    if labels is None:
        return out
    n = config.num_labels
    problem = config.problem_type
    if problem is None:
        if n == 1:
            problem = "regression"
        elif labels.dtype in (torch.long, torch.int):
            problem = "single_label_classification"
        else:
            problem = "multi_label_classification"
    if problem == "regression":
        out.loss = (
            F.mse_loss(logits.squeeze(-1).float(), labels.float().reshape(-1))
            if n == 1
            else F.mse_loss(logits.float(), labels.float())
        )
    elif problem == "single_label_classification":
        out.loss = F.cross_entropy(logits.reshape(-1, n).float(), labels.reshape(-1))
    else:
        out.loss = F.binary_cross_entropy_with_logits(logits.float(), labels.float())
    return out


class LastTokenClassifier:
    """The causal decoders' GLUE head (TXL and GPT-2; mixed in before the family's LM class): the
    last real token's final state -> one linear layer without bias, as Hugging Face's decoders do.
    The family gives :meth:`classifier_states`; the LM head is not built."""

    _tied_weights_keys = None
    _keys_to_ignore_on_load_missing = [r"^score\."]

    def build_heads(self, config: PretrainedConfig) -> None:
        self.score = nn.Linear(config.d_model, config.num_labels, bias=False)

    def get_output_embeddings(self) -> None:
        return None

    def classifier_states(
        self, input_ids: torch.LongTensor, attention_mask: torch.Tensor | None,
        terminal_ids: torch.LongTensor | None, nonterminal_ids: torch.LongTensor | None,
        deprel_ids: torch.LongTensor | None, output_attentions: bool, output_hidden_states: bool,
    ) -> tuple[torch.Tensor, tuple | None, tuple | None]:
        """Abstract: the final states [B, L, D], and the hidden states and attentions when asked."""
        raise NotImplementedError(f"{type(self).__name__} must define classifier_states")

    def forward(
        self, input_ids: torch.LongTensor, attention_mask: torch.Tensor | None = None,
        terminal_ids: torch.LongTensor | None = None, nonterminal_ids: torch.LongTensor | None = None,
        labels: torch.Tensor | None = None, deprel_ids: torch.LongTensor | None = None,
        output_attentions: bool = False, output_hidden_states: bool = False, **kwargs: Any,
    ) -> SiPEOutput:
        """``labels`` are class ids [B] (float targets for regression); logits are [B, num_labels]."""
        h, hidden_states, attentions = self.classifier_states(
            input_ids, attention_mask, terminal_ids, nonterminal_ids, deprel_ids,
            output_attentions, output_hidden_states,
        )
        pooled = self.dropout(last_token_states(h, attention_mask))  # (B, D)
        labels = labels.to(h.device) if labels is not None else None
        return classification_output(self.config, self.score(pooled), labels, hidden_states, attentions)

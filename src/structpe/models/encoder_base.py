"""The encoder model classes every family subclasses (SiPE App. A.1, E; docs/design.md §6).

* ``SiPEEncoderPreTrainedModel`` -- the ``transformers`` base (config class, weight init that
  respects loaded weights and applies the SiPE init rules).
* ``SiPEEncoderWithHead`` -- the forward shared by the MLM and the classification model, with the
  calling convention of docs/design.md §6.
* ``SiPEEncoderForMaskedLM`` + ``masked_lm_output`` -- the tied MLM head and the MLM rule of
  App. A.1: at masked positions (labels != -100) the prior is zeroed and the tag heads predict the
  position's own tags; loss = MLM + tag_loss_weight * (CE_T + CE_N).
* ``SiPEEncoderForSequenceClassification`` -- the GLUE head (its loss:
  ``structpe.models.outputs.classification_output``, shared with the decoder's head).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel

from structpe.models.config import SiPEConfig
from structpe.models.encoder_layers import MaskedLMHead
from structpe.models.outputs import SiPEOutput, classification_output
from structpe.models.sipe_parts import check_tags, keep_mask, make_tag_heads
from structpe.models.validate import CheckedModel, check_inputs
from structpe.modules.init_rules import apply_init_rule
from structpe.modules.input_prior import InputPrior
from structpe.modules.prior import TagHeads, mlm_tag_targets, tag_losses


class SiPEEncoderPreTrainedModel(CheckedModel, PreTrainedModel):
    """Base of every encoder model: ``config_class`` SiPEConfig, backbone under ``backbone``."""

    config_class = SiPEConfig
    base_model_prefix = "backbone"
    supports_gradient_checkpointing = False
    _supports_sdpa = True

    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)
        apply_init_rule(module)
        if isinstance(module, InputPrior):
            module.reset_sipe_parameters()

def masked_lm_output(
    config: SiPEConfig,
    logits: torch.Tensor,
    last_hidden: torch.Tensor,
    tag_heads: TagHeads | None,
    labels: torch.Tensor | None,
    terminal_ids: torch.Tensor | None,
    nonterminal_ids: torch.Tensor | None,
    hidden_states: tuple[torch.Tensor, ...] | None,
    attentions: tuple[torch.Tensor, ...] | None,
) -> SiPEOutput:
    """loss = MLM + tag_loss_weight * (CE_T + CE_N), tag targets = own tags at masked positions."""
    out = SiPEOutput(logits=logits, hidden_states=hidden_states, attentions=attentions)
    if tag_heads is not None:
        out.terminal_logits, out.nonterminal_logits = tag_heads(last_hidden)
    if labels is None:
        return out
    out.lm_loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1))
    out.loss = out.lm_loss
    if tag_heads is not None and check_tags(terminal_ids, nonterminal_ids):
        t_target, n_target = mlm_tag_targets(terminal_ids, nonterminal_ids, labels)
        out.terminal_loss, out.nonterminal_loss = tag_losses(
            out.terminal_logits, out.nonterminal_logits, t_target, n_target
        )
        out.loss = out.lm_loss + config.tag_loss_weight * (out.terminal_loss + out.nonterminal_loss)
    return out

class SiPEEncoderWithHead(SiPEEncoderPreTrainedModel):
    """backbone -> task head, with the calling convention of docs/design.md §6 (MLM and GLUE models alike).

    A family subclass sets ``family`` and ``backbone_class``; the task classes below build their heads
    (``build_heads``), say where the prior survives (``prior_keep``) and read the output (``head_output``).
    """

    family: str = ""
    backbone_class: type[nn.Module]

    def __init__(self, config: SiPEConfig):
        if config.family != self.family:
            raise ValueError(f"{type(self).__name__} needs family={self.family!r}, got {config.family!r}")
        super().__init__(config)
        self.backbone = self.backbone_class(config)
        self.build_heads(config)
        self.post_init()

    def build_heads(self, config: SiPEConfig) -> None:
        """Abstract: create the task head(s) on top of ``self.backbone``."""
        raise NotImplementedError(f"{type(self).__name__} must define build_heads")

    def prior_keep(self, labels: torch.Tensor | None) -> torch.Tensor | None:
        """Abstract: the positions whose prior survives (None: all of them)."""
        raise NotImplementedError(f"{type(self).__name__} must define prior_keep")

    def head_output(
        self,
        last: torch.Tensor,
        attention_mask: torch.Tensor | None,
        labels: torch.Tensor | None,
        terminal_ids: torch.Tensor | None,
        nonterminal_ids: torch.Tensor | None,
        hidden_states: tuple[torch.Tensor, ...] | None,
        attentions: tuple[torch.Tensor, ...] | None,
    ) -> SiPEOutput:
        """Abstract: logits and losses from the last hidden states [B, L, d]."""
        raise NotImplementedError(f"{type(self).__name__} must define head_output")

    def get_input_embeddings(self) -> nn.Embedding:
        return self.backbone.embeddings.word

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.backbone.embeddings.word = value

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
        terminal_ids: torch.Tensor | None = None, nonterminal_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None, token_type_ids: torch.Tensor | None = None,
        deprel_ids: torch.Tensor | None = None, output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> SiPEOutput:
        """``labels``: MLM targets (-100 at unmasked positions) or class ids / float targets for GLUE."""
        check_inputs(self.config, input_ids, attention_mask, terminal_ids, nonterminal_ids, deprel_ids,
                     token_type_ids)
        last, hidden_states, attentions = self.backbone(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            terminal_ids=terminal_ids,
            nonterminal_ids=nonterminal_ids,
            deprel_ids=deprel_ids,
            keep=self.prior_keep(labels),
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
        )
        return self.head_output(
            last, attention_mask, labels, terminal_ids, nonterminal_ids, hidden_states, attentions
        )

class SiPEEncoderForMaskedLM(SiPEEncoderWithHead):
    """backbone -> tied MLM head, plus the tag heads; a family says how its MLM head looks."""

    _tied_weights_keys = {"lm_head.decoder.weight": "backbone.embeddings.word.weight"}

    def build_heads(self, config: SiPEConfig) -> None:
        self.lm_head = self.make_lm_head(config)
        self.tag_heads = make_tag_heads(config)

    def make_lm_head(self, config: SiPEConfig) -> MaskedLMHead:
        return MaskedLMHead(config, act=config.hidden_act)

    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head.decoder

    def set_output_embeddings(self, value: nn.Linear) -> None:
        self.lm_head.decoder = value

    def prior_keep(self, labels: torch.Tensor | None) -> torch.Tensor | None:
        """The prior is zeroed where labels != -100 (App. A.1): a masked token must not see its own tags."""
        return keep_mask(labels)

    def head_output(
        self,
        last: torch.Tensor,
        attention_mask: torch.Tensor | None,
        labels: torch.Tensor | None,
        terminal_ids: torch.Tensor | None,
        nonterminal_ids: torch.Tensor | None,
        hidden_states: tuple[torch.Tensor, ...] | None,
        attentions: tuple[torch.Tensor, ...] | None,
    ) -> SiPEOutput:
        return masked_lm_output(
            self.config,
            self.lm_head(last),
            last,
            self.tag_heads,
            labels,
            terminal_ids,
            nonterminal_ids,
            hidden_states,
            attentions,
        )

class SiPEEncoderForSequenceClassification(SiPEEncoderWithHead):
    """backbone -> pooled classifier (GLUE). Tags enter unmasked; there is no auxiliary loss."""

    def build_heads(self, config: SiPEConfig) -> None:
        self.build_classifier(config)

    def build_classifier(self, config: SiPEConfig) -> None:
        """Abstract: each family builds its own head (RoBERTa/DeBERTa pooler + dense, ModernBERT cls/mean)."""
        raise NotImplementedError(f"{type(self).__name__} must define build_classifier")

    def classify(self, last: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        """Abstract: pool the last hidden states [B, L, d] into class logits [B, n_labels]."""
        raise NotImplementedError(f"{type(self).__name__} must define classify")

    def prior_keep(self, labels: torch.Tensor | None) -> None:
        """Class labels say nothing about positions: every tag enters."""
        return None

    def head_output(
        self,
        last: torch.Tensor,
        attention_mask: torch.Tensor | None,
        labels: torch.Tensor | None,
        terminal_ids: torch.Tensor | None,
        nonterminal_ids: torch.Tensor | None,
        hidden_states: tuple[torch.Tensor, ...] | None,
        attentions: tuple[torch.Tensor, ...] | None,
    ) -> SiPEOutput:
        """``labels`` are class ids [B] (or float targets for regression / multi-label)."""
        logits = self.classify(last, attention_mask)
        return classification_output(self.config, logits, labels, hidden_states, attentions)

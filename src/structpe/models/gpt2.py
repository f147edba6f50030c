"""GPT-2 from scratch in structpe's calling convention: the SiPE paper's "GPT-2 (tokens)" row (Table 2).

transformers' ``GPT2Model`` (learned absolute positions, pre-LN, GELU MLP; Radford et al. 2019) with
GPT-2's tied LM head -- the composition of ``GPT2LMHeadModel`` -- built from a ``SiPEConfig`` of
family ``gpt2`` so that training, scoring and saving treat it as every structpe decoder
(docs/design.md §6): tags are accepted as keyword arguments and checked, and read by nothing, so
every likelihood mode scores its exact p(x). The LM head is our own tied ``nn.Linear`` beside the
``GPT2Model`` (not a nested ``GPT2LMHeadModel``) so that the loss, the logits' dtype and the
checkpoint layout follow the TXL decoder's (``structpe.models.txl``).

Positions are absolute: a model trained on rows of ``seq_len`` tokens has never seen position
embeddings past it, and inputs longer than ``max_position_embeddings`` are refused by GPT-2.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from transformers import GenerationMixin, GPT2Config, GPT2Model, PreTrainedModel

from structpe.models.config import SiPEConfig
from structpe.models.outputs import LastTokenClassifier, SiPEOutput, causal_lm_loss
from structpe.modules.prior import check_tag_ids
from structpe.syntax.hexatags import N_NONTERMINALS, N_TERMINALS


def gpt2_config(config: SiPEConfig) -> GPT2Config:
    """The transformers GPT-2 config of a ``gpt2`` SiPEConfig (its sizes, dropouts and special ids)."""
    return GPT2Config(
        vocab_size=config.vocab_size,
        n_positions=config.max_position_embeddings,
        n_embd=config.d_model,
        n_layer=config.n_layers,
        n_head=config.n_heads,
        n_inner=config.d_ff,
        resid_pdrop=config.dropout,
        embd_pdrop=config.dropout,
        attn_pdrop=config.attention_dropout,
        layer_norm_epsilon=config.layer_norm_eps,
        initializer_range=config.initializer_range,
        bos_token_id=config.bos_token_id,
        eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id,
    )


class GPT2SiPEForCausalLM(PreTrainedModel, GenerationMixin):
    """GPT-2 LM in the SiPE decoder's convention (``SiPEOutput``, tags accepted and unused)."""

    config_class = SiPEConfig
    config: SiPEConfig
    base_model_prefix = "gpt2"
    main_input_name = "input_ids"
    _tied_weights_keys = {"lm_head.weight": "transformer.wte.weight"}
    _no_split_modules = ["GPT2Block"]

    def __init__(self, config: SiPEConfig):
        if config.family != "gpt2":
            raise ValueError(f"{type(self).__name__} needs family='gpt2', got {config.family!r}")
        super().__init__(config)
        self.transformer = GPT2Model(gpt2_config(config))
        self.build_heads(config)
        self.post_init()

    def build_heads(self, config: SiPEConfig) -> None:
        """GPT-2's LM head: no bias, tied to the token embedding."""
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)

    def get_input_embeddings(self) -> nn.Embedding:
        return self.transformer.wte

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.transformer.wte = value

    def get_output_embeddings(self) -> nn.Linear | None:
        return self.lm_head

    def _init_weights(self, module: nn.Module) -> None:
        """GPT-2's own initialisation (``GPT2PreTrainedModel``: N(0, 0.02), scaled residual projections)."""
        self.transformer._init_weights(module)

    def decode(
        self,
        input_ids: torch.LongTensor,
        attention_mask: torch.Tensor | None,
        terminal_ids: torch.LongTensor | None,
        nonterminal_ids: torch.LongTensor | None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        cache: Any = None,
        use_cache: bool | None = None,
    ) -> Any:
        """The GPT-2 stack's output (last hidden state after ``ln_f``); tags are checked, not read."""
        for name, ids, n in (("terminal_ids", terminal_ids, N_TERMINALS),
                             ("nonterminal_ids", nonterminal_ids, N_NONTERMINALS)):
            if ids is not None:
                if ids.shape != input_ids.shape:
                    shapes = f"{tuple(input_ids.shape)}, got {tuple(ids.shape)}"
                    raise ValueError(f"{name} must match input_ids {shapes}")
                check_tag_ids(name, ids, n)
        return self.transformer(
            input_ids=input_ids,
            attention_mask=attention_mask,
            cache=cache,
            use_cache=bool(use_cache) or cache is not None,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
        )

    def forward(
        self, input_ids: torch.LongTensor, attention_mask: torch.Tensor | None = None,
        terminal_ids: torch.LongTensor | None = None, nonterminal_ids: torch.LongTensor | None = None,
        labels: torch.LongTensor | None = None, deprel_ids: torch.LongTensor | None = None,
        output_attentions: bool = False, output_hidden_states: bool = False, cache: Any = None,
        use_cache: bool | None = None, past_key_values: Any = None, **kwargs: Any,
    ) -> SiPEOutput:
        """Causal LM with the TXL decoder's signature; ``labels`` unshifted (HF style). Tags and
        ``deprel_ids`` are accepted so every structpe caller can pass them; nothing reads them."""
        cache = cache if cache is not None else past_key_values
        out = self.decode(input_ids, attention_mask, terminal_ids, nonterminal_ids,
                          output_attentions, output_hidden_states, cache, use_cache)
        logits = self.lm_head(out.last_hidden_state)
        lm_loss = causal_lm_loss(logits, labels) if labels is not None else None
        return SiPEOutput(
            loss=lm_loss,
            logits=logits,
            lm_loss=lm_loss,
            hidden_states=out.hidden_states if output_hidden_states else None,
            attentions=out.attentions if output_attentions else None,
            cache=out.cache if (use_cache or cache is not None) else None,
        )


class GPT2SiPEForSequenceClassification(LastTokenClassifier, GPT2SiPEForCausalLM):
    """GPT-2 with a GLUE head: the last real token's final state -> one linear layer (as GPT-2's
    own classifier and the TXL decoder's, ``TransfoXLSiPEForSequenceClassification``)."""

    _keys_to_ignore_on_load_unexpected = [r"^lm_head\."]

    def build_heads(self, config: SiPEConfig) -> None:
        super().build_heads(config)
        self.dropout = nn.Dropout(config.dropout)

    def classifier_states(self, input_ids, attention_mask, terminal_ids, nonterminal_ids, deprel_ids,
                          output_attentions, output_hidden_states):
        out = self.decode(input_ids, attention_mask, terminal_ids, nonterminal_ids,
                          output_attentions, output_hidden_states)
        return (out.last_hidden_state, out.hidden_states if output_hidden_states else None,
                out.attentions if output_attentions else None)

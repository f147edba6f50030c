"""One config for every SiPE model family (DESIGN §2-3, §6).

``family`` picks the architecture file (``roberta.py``, ``deberta.py``, ``modernbert.py``,
``txl.py``); ``injection`` picks where the hexatag prior enters. The remaining SiPE fields are the
paper's design axes (SiPE §3.3, App. A.2-A.4, tables 7-8, 12). Combinations that do not exist for a
family are rejected here, once, with a message -- attention code never re-checks them.

It is a ``transformers`` ``PreTrainedConfig`` so that models save and load with
``save_pretrained`` / ``from_pretrained`` (config.json + model.safetensors).
"""

from __future__ import annotations

from transformers import PreTrainedConfig

FAMILIES = ("roberta", "deberta", "modernbert", "txl")
INJECTIONS = (
    "none",
    "input",
    "position",
    "disentangled",
    "attn_bias",
    "input+attn_bias",
    "position+attn_bias",
)
# which injection sites each family implements (SiPE §3.2-3.5)
FAMILY_INJECTIONS = {
    "txl": INJECTIONS,
    "roberta": ("none", "input"),
    "deberta": ("none", "input", "position"),
    "modernbert": ("none", "input", "position"),
}
FUSIONS = ("add", "concat", "alpha", "residual")
PROJECTIONS = ("shared", "per_layer")
TARGETS = ("head", "model")


class SiPEConfig(PreTrainedConfig):
    """Architecture + SiPE settings. Family-specific fields are ignored by the other families.

    SiPE fields
      injection          where the prior enters (see INJECTIONS)
      fusion             input fusion for ``input`` (add | concat | alpha | residual; SiPE table 12)
      alpha_init         initial a of the ``alpha`` fusion a*x + (1-a)*prior (paper: 0.1 / 0.5 / 0.9)
      n_deprels          > 0 adds a DEPREL table E_D to the prior (the *_DR variants)
      projection         W_E / W_delta / W^tag shared across layers or one per layer
      projection_target  ``head``: W_E maps into one d_head subspace shared by all heads;
                         ``model``: into d_model, split into heads
      entry_layer        k (1-based): layers < k get no prior (position / attention sites)
      prior_proj_init_std  std of W_E / W_delta / W^tag at init ("near zero": training starts
                         from the unmodified model)
      tag_loss_weight    weight of CE_T + CE_N in the total loss (0 disables the aux heads' loss)
    """

    model_type = "structpe-sipe"

    def __init__(
        self,
        family: str = "txl",
        injection: str = "none",
        vocab_size: int = 8192,
        d_model: int = 256,
        n_layers: int = 4,
        n_heads: int = 4,
        d_ff: int | None = None,
        max_position_embeddings: int = 512,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        layer_norm_eps: float = 1e-5,
        initializer_range: float = 0.02,
        pre_norm: bool = False,
        type_vocab_size: int = 1,
        pad_token_id: int | None = 0,
        bos_token_id: int | None = None,
        eos_token_id: int | None = None,
        tie_word_embeddings: bool = True,
        # SiPE
        fusion: str = "add",
        alpha_init: float = 0.5,
        n_deprels: int = 0,
        projection: str = "per_layer",
        projection_target: str = "model",
        entry_layer: int = 1,
        prior_proj_init_std: float = 1e-3,
        tag_loss_weight: float = 1.0,
        # DeBERTa-v3
        position_buckets: int = 256,
        max_relative_positions: int = 512,
        # ModernBERT
        global_rope_theta: float = 160000.0,
        local_rope_theta: float = 10000.0,
        local_attention: int = 128,
        global_attn_every_n_layers: int = 3,
        # Transformer-XL
        clamp_len: int = 1000,
        **kwargs,
    ):
        self.family = family
        self.injection = injection
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.n_layers = n_layers
        self.n_heads = n_heads
        self.d_ff = d_ff if d_ff is not None else 4 * d_model
        self.max_position_embeddings = max_position_embeddings
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        self.pre_norm = pre_norm
        self.type_vocab_size = type_vocab_size
        self.fusion = fusion
        self.alpha_init = alpha_init
        self.n_deprels = n_deprels
        self.projection = projection
        self.projection_target = projection_target
        self.entry_layer = entry_layer
        self.prior_proj_init_std = prior_proj_init_std
        self.tag_loss_weight = tag_loss_weight
        self.position_buckets = position_buckets
        self.max_relative_positions = max_relative_positions
        self.global_rope_theta = global_rope_theta
        self.local_rope_theta = local_rope_theta
        self.local_attention = local_attention
        self.global_attn_every_n_layers = global_attn_every_n_layers
        self.clamp_len = clamp_len
        super().__init__(
            pad_token_id=pad_token_id,
            bos_token_id=bos_token_id,
            eos_token_id=eos_token_id,
            tie_word_embeddings=tie_word_embeddings,
            **kwargs,
        )
        self.validate_sipe()

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def uses_input_prior(self) -> bool:
        return self.injection in ("input", "input+attn_bias")

    @property
    def uses_position_prior(self) -> bool:
        return self.injection in ("position", "position+attn_bias")

    @property
    def uses_attn_bias(self) -> bool:
        return self.injection.endswith("attn_bias")

    @property
    def uses_prior(self) -> bool:
        return self.injection != "none"

    def layer_gets_prior(self, layer_index: int) -> bool:
        """0-based ``layer_index``; the entry layer k is 1-based as in the paper."""
        return layer_index + 1 >= self.entry_layer

    def validate_sipe(self) -> None:
        def need(ok: bool, msg: str) -> None:
            if not ok:
                raise ValueError(f"SiPEConfig: {msg}")

        need(self.family in FAMILIES, f"family must be one of {FAMILIES}, got {self.family!r}")
        need(self.injection in INJECTIONS, f"injection must be one of {INJECTIONS}, got {self.injection!r}")
        allowed = FAMILY_INJECTIONS[self.family]
        need(
            self.injection in allowed,
            f"injection {self.injection!r} is not defined for family {self.family!r} (it supports {allowed})",
        )
        need(self.fusion in FUSIONS, f"fusion must be one of {FUSIONS}, got {self.fusion!r}")
        need(
            self.fusion == "add" or self.uses_input_prior,
            f"fusion={self.fusion!r} only applies to input injection (injection={self.injection!r})",
        )
        need(0.0 <= self.alpha_init <= 1.0, f"alpha_init must be in [0, 1], got {self.alpha_init}")
        need(self.projection in PROJECTIONS, f"projection must be one of {PROJECTIONS}")
        need(self.projection_target in TARGETS, f"projection_target must be one of {TARGETS}")
        need(self.n_layers >= 1 and self.d_model >= 1, "n_layers and d_model must be positive")
        need(self.d_model % self.n_heads == 0, f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        need(
            1 <= self.entry_layer <= self.n_layers,
            f"entry_layer must be in 1..n_layers={self.n_layers}, got {self.entry_layer}",
        )
        need(self.n_deprels >= 0, "n_deprels must be >= 0")
        need(self.tag_loss_weight >= 0, "tag_loss_weight must be >= 0")
        if self.family == "txl":
            need(
                self.d_model % 2 == 0,
                f"txl: the sinusoidal relative embedding needs an even d_model, got {self.d_model}",
            )
            need(
                self.fusion == "add",
                f"txl: input injection adds the prior to the token embedding (SiPE eq. 4); "
                f"fusion={self.fusion!r} is an ablation of the absolute encoder (family='roberta')",
            )
            need(
                self.entry_layer == 1 or self.injection not in ("none", "input"),
                f"txl: entry_layer={self.entry_layer} has no effect with injection={self.injection!r}; "
                "the entry layer k applies to the score-side sites (position, disentangled, attn_bias, ...)",
            )

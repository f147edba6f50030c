"""One config for every SiPE model family (docs/design.md §2-3, §6).

``family`` picks the architecture file (``roberta.py``, ``deberta.py``, ``modernbert.py``,
``txl.py``); ``injection`` picks where the hexatag prior enters. The remaining SiPE fields are the
paper's design axes (SiPE §3.3, App. A.2-A.4, tables 7-8, 12). Combinations that do not exist for a
family are rejected here, once, with a message -- attention code never re-checks them.

It is a ``transformers`` ``PreTrainedConfig`` so that models save and load with
``save_pretrained`` / ``from_pretrained`` (config.json + model.safetensors).
"""

from __future__ import annotations

import inspect

from transformers import PreTrainedConfig

from structpe.errors import StructpeError, closest

FAMILIES = ("roberta", "deberta", "modernbert", "txl", "gpt2")  # causal ones: choices.CAUSAL_FAMILIES
INJECTIONS = (
    "none",
    "input",
    "position",
    "disentangled",
    "attn_bias",
    "input+attn_bias",
    "position+attn_bias",
    "lis_tree",  # not SiPE's: LIS tree addresses rotate q and k (docs/lis.md, "Dependency trees")
    "lis_tree2",  # lis_tree with components joined by later arcs, two-term score (docs/lis.md)
)
# which injection sites each family implements (SiPE §3.2-3.5; lis_tree: TXL only; lis_tree2 in an
# encoder: the whole tree's addresses, every arc visible)
FAMILY_INJECTIONS = {
    "txl": INJECTIONS,
    "roberta": ("none", "input", "lis_tree2"),
    "deberta": ("none", "input", "position"),
    "modernbert": ("none", "input", "position", "lis_tree2"),
    "gpt2": ("none",),
}
# parser-free rivals of SiPE (its Table 2): an auxiliary training loss on a tag-free decoder, so the
# model reads no tags at inference (docs/studies/README.md, "Rivals"). ``tpt``: Tree-Planted
# Transformers (Yoshida, Someya & Oseki 2024), a KL loss planting the dependency tree's syntactic
# distances into chosen attention heads; ``treereg``: TreeReg (Nandi, Manning & Murty 2025), the
# span-independence (SCIN) loss on chosen heads' outputs over the hexatag binary head tree's spans
SYNTAX_LOSSES = ("none", "tpt", "treereg")
FAMILY_SYNTAX_LOSSES = {"txl": SYNTAX_LOSSES, "roberta": ("none",), "deberta": ("none",),
                        "modernbert": ("none",), "gpt2": ("none",)}
FUSIONS = ("add", "concat", "alpha", "residual")
# which tag embeddings form the prior: t = E_T[tau], nt = E_N[nu], dr = E_D[deprel] (SiPE table 12)
PRIOR_PARTS = ("t_nt", "t_nt_dr", "dr_nt")
# the named input-injection strategies of SiPE table 12 (absolute encoder) -> SiPEConfig kwargs;
# ``alpha`` variants take their initial a from ``alpha_init`` (paper: 0.1 / 0.5 / 0.9)
INPUT_VARIANTS = {
    "ADD_T_NT": {"fusion": "add", "prior_parts": "t_nt"},
    "CONCAT_T_NT": {"fusion": "concat", "prior_parts": "t_nt"},
    "ADD_T_NT_RESIDUAL": {"fusion": "residual", "prior_parts": "t_nt"},
    "ADD_T_NT_ALPHA": {"fusion": "alpha", "prior_parts": "t_nt"},
    "ADD_T_NT_DR": {"fusion": "add", "prior_parts": "t_nt_dr"},
    "CONCAT_POS_NT_T_DR": {"fusion": "concat", "prior_parts": "t_nt_dr"},
    "ADD_DNT": {"fusion": "add", "prior_parts": "dr_nt"},
    "ADD_DNT_ALPHA": {"fusion": "alpha", "prior_parts": "dr_nt"},
    "CONCAT_POS_DNT": {"fusion": "concat", "prior_parts": "dr_nt"},
}
PROJECTIONS = ("shared", "per_layer")
TARGETS = ("head", "model")


# keys transformers itself passes to a config or stores in config.json beside the model's own
# (``from_pretrained``, pipelines, generation); keys starting with "_" are its private ones
TRANSFORMERS_KEYS = frozenset(
    {"model_type", "num_labels", "torch_dtype", "attn_implementation", "name_or_path", "use_cache",
     "output_attentions", "tie_word_embeddings"}
)


def _check_keys(kwargs: dict) -> None:
    """Refuse keys neither SiPEConfig nor transformers knows: a typo such as ``injecton`` would
    otherwise be stored and ignored, silently building a model without the intended setting."""
    known = set(inspect.signature(PreTrainedConfig.__init__).parameters) | TRANSFORMERS_KEYS
    unknown = sorted(k for k in kwargs if k not in known and not k.startswith("_"))
    if unknown:
        own = [k for k in inspect.signature(SiPEConfig.__init__).parameters if k not in ("self", "kwargs")]
        raise StructpeError(
            f"SiPEConfig: unknown key {unknown[0]!r}{closest(unknown[0], own)}"
            + (f" (all unknown: {unknown})" if len(unknown) > 1 else "")
        )


class SiPEConfig(PreTrainedConfig):
    """Architecture + SiPE settings. Family-specific fields are ignored by the other families.

    SiPE fields
      injection          where the prior enters (see INJECTIONS); ``lis_tree`` (txl) has no prior
                         vector: the parse read from the tags gives each word a LIS tree address
                         that rotates q and k (docs/lis.md), labelled by DEPREL with n_deprels > 0;
                         ``lis_tree2``: addresses over components joined by arcs known later, used
                         for the pairs a query's tags join (two-term score; docs/lis.md); in
                         roberta / modernbert every arc is visible: the whole tree's addresses
      fusion             input fusion for ``input`` (add | concat | alpha | residual; SiPE table 12)
      alpha_init         initial a of the ``alpha`` fusion a*x + (1-a)*prior (paper: 0.1 / 0.5 / 0.9)
      n_deprels          > 0 adds a DEPREL table E_D to the prior (the *_DR variants)
      prior_parts        which tag embeddings form the prior: ``t_nt`` (default), ``t_nt_dr``
                         (default when n_deprels > 0) or ``dr_nt`` (DEPREL replaces the terminal;
                         input injection only). ``INPUT_VARIANTS`` names the table-12 combinations.
      projection         W_E / W_delta / W^tag shared across layers or one per layer
      projection_target  ``head``: W_E maps into one d_head subspace shared by all heads;
                         ``model``: into d_model, split into heads
      entry_layer        k (1-based): layers < k get no prior (position / attention sites)
      prior_proj_init_std  std of W_E / W_delta / W^tag at init ("near zero": training starts
                         from the unmodified model)
      tag_loss_weight    weight of CE_T + CE_N in the total loss (0 disables the aux heads' loss)
      multitask_baseline injection ``none`` only: keep the auxiliary tag heads and their loss (a
                         tag-supervised baseline without a prior, not the paper's). Off by
                         default, so ``none`` is the paper's plain baseline: no tag heads, LM loss
                         only (every family)
      syntax_loss        a parser-free rival's training loss (SYNTAX_LOSSES; txl with injection
                         ``none``): ``tpt`` or ``treereg``; tags feed the loss only, never the logits
      syntax_loss_weight its weight in the total loss (0: exactly the ``none`` model and loss)
      syntax_layer       the layer (1-based) whose heads carry it; 0 = the method's default
                         (tpt: the last layer; treereg: layer ceil(2 n_layers / 3), an upper-middle one)
      syntax_heads       how many heads of that layer (the first ones) carry it
      joint_tag_loss     causal (txl) only: position 0 (BOS / packed-row start) also predicts the
                         first word's tags, so the tag loss covers every word and is the tag part
                         of -log p(x, T) (structpe's choice, needed by the ``joint`` likelihood).
                         False: the paper's loss, from first-subword positions (m_p = 1) only
    """

    model_type = "structpe-sipe"
    # the Hugging Face names that transformers' generic code reads (e.g. DynamicCache in ``generate``)
    attribute_map = {"num_hidden_layers": "n_layers"}

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
        hidden_act: str = "gelu",
        classifier_dropout: float | None = None,
        classifier_pooling: str = "cls",
        pooler_hidden_act: str = "gelu",
        # SiPE
        fusion: str = "add",
        alpha_init: float = 0.5,
        n_deprels: int = 0,
        prior_parts: str | None = None,
        projection: str = "per_layer",
        projection_target: str = "model",
        entry_layer: int = 1,
        prior_proj_init_std: float = 1e-3,
        tag_loss_weight: float = 1.0,
        multitask_baseline: bool = False,
        joint_tag_loss: bool = True,
        syntax_loss: str = "none",
        syntax_loss_weight: float = 1.0,
        syntax_layer: int = 0,
        syntax_heads: int = 1,
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
        self.hidden_act = hidden_act
        self.classifier_dropout = classifier_dropout
        self.classifier_pooling = classifier_pooling
        self.pooler_hidden_act = pooler_hidden_act
        self.fusion = fusion
        self.alpha_init = alpha_init
        self.n_deprels = n_deprels
        self.prior_parts = prior_parts if prior_parts is not None else ("t_nt_dr" if n_deprels else "t_nt")
        self.projection = projection
        self.projection_target = projection_target
        self.entry_layer = entry_layer
        self.prior_proj_init_std = prior_proj_init_std
        self.tag_loss_weight = tag_loss_weight
        self.multitask_baseline = multitask_baseline
        self.joint_tag_loss = joint_tag_loss
        self.syntax_loss = syntax_loss
        self.syntax_loss_weight = syntax_loss_weight
        self.syntax_layer = syntax_layer
        self.syntax_heads = syntax_heads
        self.position_buckets = position_buckets
        self.max_relative_positions = max_relative_positions
        self.global_rope_theta = global_rope_theta
        self.local_rope_theta = local_rope_theta
        self.local_attention = local_attention
        self.global_attn_every_n_layers = global_attn_every_n_layers
        self.clamp_len = clamp_len
        _check_keys(kwargs)
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
        """The model reads the tags (and has tag heads); ``uses_hexatag_prior``: through a prior vector."""
        return self.injection != "none"

    @property
    def uses_hexatag_prior(self) -> bool:
        return self.injection not in ("none", "lis_tree", "lis_tree2")

    @property
    def uses_tree_address(self) -> bool:
        return self.injection in ("lis_tree", "lis_tree2")

    @property
    def joins_tree_components(self) -> bool:
        """``lis_tree2``: addresses change as components join; keys are cached unrotated."""
        return self.injection == "lis_tree2"

    @property
    def has_tag_heads(self) -> bool:
        """The auxiliary tag heads (and their loss) exist with a prior, or for the multitask baseline."""
        return self.uses_prior or self.multitask_baseline

    @property
    def syntax_layer_index(self) -> int:
        """0-based layer of the syntax loss (``syntax_layer``, or the method's default when 0)."""
        if self.syntax_layer:
            return self.syntax_layer - 1
        if self.syntax_loss == "treereg":
            return -(-2 * self.n_layers // 3) - 1
        return self.n_layers - 1

    def layer_gets_prior(self, layer_index: int) -> bool:
        """0-based ``layer_index``; the entry layer k is 1-based as in the paper."""
        return layer_index + 1 >= self.entry_layer

    def validate_sipe(self) -> None:
        def need(ok: bool, msg: str) -> None:
            if not ok:
                raise StructpeError(f"SiPEConfig: {msg}")

        need(self.family in FAMILIES, f"family must be one of {FAMILIES}, got {self.family!r}")
        for key in ("vocab_size", "d_model", "n_layers", "n_heads", "d_ff", "max_position_embeddings"):
            value = getattr(self, key)
            need(type(value) is int and value >= 1, f"{key} must be a positive int, got {value!r}")
        for key in ("dropout", "attention_dropout"):
            need(0.0 <= getattr(self, key) < 1.0, f"{key} must be in [0, 1), got {getattr(self, key)!r}")
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
        need(
            self.d_model % self.n_heads == 0,
            f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}",
        )
        need(
            self.d_head % 2 == 0 or not self.uses_tree_address,
            f"{self.family}: {self.injection} rotates frequency pairs of each head; d_head must be even, "
            f"got {self.d_head}",
        )
        need(
            1 <= self.entry_layer <= self.n_layers,
            f"entry_layer must be in 1..n_layers={self.n_layers}, got {self.entry_layer}",
        )
        need(self.n_deprels >= 0, "n_deprels must be >= 0")
        need(
            self.prior_parts in PRIOR_PARTS,
            f"prior_parts must be one of {PRIOR_PARTS}, got {self.prior_parts!r}",
        )
        need(
            ("dr" in self.prior_parts) == (self.n_deprels > 0),
            f"prior_parts={self.prior_parts!r} and n_deprels={self.n_deprels} disagree: DEPREL parts need "
            "n_deprels > 0 (the size of the label table) and n_deprels > 0 needs a DEPREL part",
        )
        need(
            self.prior_parts != "dr_nt" or self.injection == "input",
            "prior_parts='dr_nt' (DEPREL replaces the terminal, SiPE table 12) is defined for "
            "input injection only",
        )
        need(
            self.fusion == "add" or self.family not in ("deberta", "modernbert"),
            f"fusion={self.fusion!r}: the fusion ablations of SiPE table 12 are defined for the absolute "
            "encoder (family='roberta'); DeBERTa and ModernBERT input injection adds the prior",
        )
        need(self.type_vocab_size >= 0, "type_vocab_size must be >= 0 (0: no segment embeddings)")
        need(
            self.classifier_pooling in ("cls", "mean"),
            f"classifier_pooling must be 'cls' or 'mean', got {self.classifier_pooling!r}",
        )
        if self.family == "modernbert":
            need(self.local_attention % 2 == 0, f"local_attention must be even, got {self.local_attention}")
            need(self.global_attn_every_n_layers >= 1, "global_attn_every_n_layers must be >= 1")
            need(self.d_head % 2 == 0, f"rotary attention needs an even d_head, got {self.d_head}")
        need(self.tag_loss_weight >= 0, "tag_loss_weight must be >= 0")
        losses = FAMILY_SYNTAX_LOSSES[self.family]
        need(
            self.syntax_loss in losses,
            f"syntax_loss {self.syntax_loss!r} is not defined for family {self.family!r} "
            f"(it supports {losses})",
        )
        need(
            self.syntax_loss == "none" or (self.injection == "none" and not self.multitask_baseline),
            f"syntax_loss={self.syntax_loss!r} is a parser-free rival of SiPE: it needs injection='none' "
            f"and no multitask_baseline (got injection={self.injection!r})",
        )
        need(self.syntax_loss_weight >= 0, f"syntax_loss_weight must be >= 0, got {self.syntax_loss_weight}")
        need(
            0 <= self.syntax_layer <= self.n_layers,
            f"syntax_layer must be in 0..n_layers={self.n_layers} (0: the method's default), "
            f"got {self.syntax_layer}",
        )
        need(
            1 <= self.syntax_heads <= self.n_heads,
            f"syntax_heads must be in 1..n_heads={self.n_heads}, got {self.syntax_heads}",
        )
        need(
            not self.multitask_baseline or self.injection == "none",
            f"multitask_baseline adds tag heads to injection='none'; injection={self.injection!r} "
            "already has them",
        )
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
            need(
                self.prior_parts != "dr_nt",
                "txl: prior_parts='dr_nt' (DEPREL replaces the terminal) is an absolute-encoder ablation "
                "(SiPE table 12); txl's prior is E_T + E_N (+ E_D with n_deprels > 0, prior_parts='t_nt_dr')",
            )

"""The SiPE modules of a model, built from its SiPEConfig, and how a backbone applies them
(docs/design.md §2, §3, §6).

``structpe.modules`` holds the building blocks with explicit sizes (the prior tables, W_E, the
input fusion, the tag heads); this is the one place that reads a config to size them, so every
family builds them alike. The functions below the builders are the plumbing every backbone runs
around its own layers: check the tags, apply the input prior, project the pair table per layer.
"""

from __future__ import annotations

import torch

from structpe.models.config import SiPEConfig
from structpe.modules.input_prior import InputPrior
from structpe.modules.prior import HexatagPrior, TagHeads, check_tag_ids
from structpe.modules.prior_projection import PriorProjection
from structpe.modules.tree_address import TreeAddress, joined_tree_paths
from structpe.syntax.hexatags import IGNORE_INDEX


def prior_projection(config: SiPEConfig, d_out: int | None = None) -> PriorProjection:
    """W_E^(l) / W_delta^(l) / W^tag [d_model -> d_out per head] for the layers from the entry layer
    on, near zero at init (``prior_proj_init_std``; SiPE fn. 4, App. A.6). ``d_out`` defaults to d_head."""
    return PriorProjection(
        config.d_model,
        config.n_heads,
        d_out if d_out is not None else config.d_head,
        layers=[i for i in range(config.n_layers) if config.layer_gets_prior(i)],
        shared=config.projection == "shared",
        target=config.projection_target,
        init_std=config.prior_proj_init_std,
    )


def tree_address(config: SiPEConfig) -> TreeAddress:
    """lis_tree's per-layer label angles delta_l (2 arc directions + n_deprels labels) from the entry
    layer on, near zero at init (``prior_proj_init_std``: training starts from plain relative attention)."""
    return TreeAddress(
        2 + config.n_deprels,
        config.n_heads,
        config.d_head,
        layers=[i for i in range(config.n_layers) if config.layer_gets_prior(i)],
        init_std=config.prior_proj_init_std,
    )


def hexatag_prior(config: SiPEConfig) -> HexatagPrior:
    """E_T, E_N (+ E_D) at N(0, initializer_range)."""
    return HexatagPrior(config.d_model, config.n_deprels, init_std=config.initializer_range)


def position_prior(config: SiPEConfig, d_out: int) -> tuple[HexatagPrior | None, PriorProjection | None]:
    """PP-SiPE's tag tables and per-layer projection W^(l) [d_model -> d_out], or (None, None) without."""
    if not config.uses_position_prior:
        return None, None
    return hexatag_prior(config), prior_projection(config, d_out=d_out)


def input_prior(config: SiPEConfig) -> InputPrior | None:
    """The input fusion of SiPE table 12 for ``injection: input``, else None."""
    if not config.uses_input_prior:
        return None
    return InputPrior(
        config.d_model,
        fusion=config.fusion,
        parts=config.prior_parts,
        n_deprels=config.n_deprels,
        init_std=config.initializer_range,
        proj_init_std=config.prior_proj_init_std,
        alpha_init=config.alpha_init,
    )


def make_tag_heads(config: SiPEConfig) -> TagHeads | None:
    """The auxiliary tag heads exist when the model carries a prior (or is the multitask baseline)."""
    return TagHeads(config.d_model) if config.has_tag_heads else None


def keep_mask(labels: torch.Tensor | None) -> torch.Tensor | None:
    """Positions whose prior survives: the MLM rule zeroes it where the token is masked."""
    return None if labels is None else labels == IGNORE_INDEX


def check_tags(
    terminal_ids: torch.Tensor | None,
    nonterminal_ids: torch.Tensor | None,
    shape: torch.Size | None = None,
    deprel_ids: torch.Tensor | None = None,
) -> bool:
    """True when tags are given; both or neither must be passed and, given ``shape`` (input_ids'
    [B, L]), match it exactly -- broadcasting one sentence's tags over a batch is an error."""
    if (terminal_ids is None) != (nonterminal_ids is None):
        raise ValueError("pass terminal_ids and nonterminal_ids together (or neither)")
    if terminal_ids is None or shape is None:
        return terminal_ids is not None
    tags = {"terminal_ids": terminal_ids, "nonterminal_ids": nonterminal_ids, "deprel_ids": deprel_ids}
    bad = {k: tuple(v.shape) for k, v in tags.items() if v is not None and v.shape != shape}
    if bad:
        raise ValueError(f"tag tensors must match input_ids {tuple(shape)}, got {bad}")
    return True


def apply_input_prior(
    input_prior: InputPrior | None,
    x: torch.Tensor,
    terminal_ids: torch.Tensor | None,
    nonterminal_ids: torch.Tensor | None,
    deprel_ids: torch.Tensor | None,
    keep: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``InputPrior``'s (x', skip_prior), or (x, None) when no tags are given or the model has no input prior.

    The tags are checked (both or neither) even when the model ignores them, so a wrong call fails on
    every configuration alike.
    """
    if not check_tags(terminal_ids, nonterminal_ids, x.shape[:2], deprel_ids) or input_prior is None:
        return x, None
    return input_prior(x, terminal_ids, nonterminal_ids, deprel_ids, keep)


def tag_pairs(
    prior: HexatagPrior | None,
    terminal_ids: torch.Tensor | None,
    nonterminal_ids: torch.Tensor | None,
    deprel_ids: torch.Tensor | None,
    keep: torch.Tensor | None,
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(pair_ids [B, L], pair table [P, d]) of the position prior; (None, None) without tags or prior.

    The prior takes one of P <= 11 values per position, so layers project the small table, not [B, L, d].
    """
    if prior is None or not check_tags(terminal_ids, nonterminal_ids):
        return None, None
    return prior.pair_ids(terminal_ids, nonterminal_ids, deprel_ids, keep), prior.pair_table()


def layer_pair_projection(
    prior_proj: PriorProjection | None, table: torch.Tensor | None, layer: int
) -> torch.Tensor | None:
    """W^(layer) applied to the pair table ([H, P, d_out]), or None where that layer gets no prior."""
    if table is None or not prior_proj.has_layer(layer):
        return None
    return prior_proj(table, layer)


def encoder_tree_angles(
    module: TreeAddress | None,
    config: SiPEConfig,
    terminal_ids: torch.Tensor | None,
    nonterminal_ids: torch.Tensor | None,
    deprel_ids: torch.Tensor | None,
    keep: torch.Tensor | None,
) -> list[torch.Tensor | None]:
    """``lis_tree2`` in an encoder: each layer's tree-address angles [B, H, L, d_head/2] (None below
    the entry layer, and everywhere without tags: A = I, the plain encoder).

    Every arc is visible, so the addresses are those after the last position (docs/lis.md): one
    tree per complete sentence, relative to its root; an unfinished sentence (cut at seq_len) keeps
    components whose arcs to each other are open, and pairs across them get no tree path. Where
    ``keep`` is False (a masked token, the MLM rule) the address is zero, as the prior is zeroed there.
    """
    if module is None or terminal_ids is None:
        return [None] * config.n_layers
    labelled = config.n_deprels > 0 and deprel_ids is not None
    if labelled:
        check_tag_ids("deprel_ids", deprel_ids, config.n_deprels)
    paths, _ = joined_tree_paths(
        terminal_ids, nonterminal_ids, deprel_ids if labelled else None, 2 + config.n_deprels, 1
    )
    if keep is not None:
        paths = paths * keep[..., None].to(paths.dtype)
    return [module(paths, i) if module.has_layer(i) else None for i in range(config.n_layers)]

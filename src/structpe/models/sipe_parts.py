"""The SiPE modules of a model, built from its SiPEConfig (docs/design.md §2, §3).

``structpe.modules`` holds the building blocks with explicit sizes (the prior tables, W_E, the
input fusion, the tag heads); this is the one place that reads a config to size them, so every
family builds them alike.
"""

from __future__ import annotations

from structpe.models.config import SiPEConfig
from structpe.modules.input_prior import InputPrior
from structpe.modules.prior import HexatagPrior, TagHeads
from structpe.modules.prior_projection import PriorProjection


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

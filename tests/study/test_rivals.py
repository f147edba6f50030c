"""The rivals' recipes in the decoder study: each is sized within 2% of `none`'s parameters at
every profile that runs it (profiles.*.recipe_overrides), recomputed from the built models."""

from __future__ import annotations

import pytest
import torch

from structpe.models import SiPEConfig, build_model
from structpe.study.spec import load_spec
from structpe.train.recipe import load_recipe


def _params(spec, label: str) -> int:
    r = load_recipe(spec.recipe_name(label), spec.cell_overrides(label))
    with torch.device("meta"):
        model = build_model(SiPEConfig(**{**r.model, "vocab_size": spec.dataset.vocab_size}))
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("profile", ["cpu-mini", "quickstart", "smoke", "paper"])
def test_rivals_match_none_parameters_within_2_percent(profile: str) -> None:
    spec = load_spec("sipe-txl", profile)
    assert {"gpt2", "tpt", "treereg"} <= {r.label for r in spec.recipes}
    target = _params(spec, "none")
    assert _params(spec, "tpt") == _params(spec, "treereg") == target  # `none`'s modules exactly
    assert abs(_params(spec, "gpt2") / target - 1) < 0.002
    if profile in ("quickstart", "paper"):  # what the override corrects (at cpu-mini it is +1.1%)
        wide = load_recipe(spec.recipe_name("gpt2"), spec.profile_overrides)
        with torch.device("meta"):
            plain = build_model(SiPEConfig(**{**wide.model, "vocab_size": spec.dataset.vocab_size}))
        assert abs(sum(p.numel() for p in plain.parameters()) / target - 1) > 0.02


def test_exact_counts_of_the_report() -> None:
    counts = {p: (_params(load_spec("sipe-txl", p), "none"), _params(load_spec("sipe-txl", p), "gpt2"))
              for p in ("cpu-mini", "quickstart")}
    assert counts == {"cpu-mini": (1_171_584, 1_171_789), "quickstart": (4_471_808, 4_472_580)}

"""Every encoder recipe (configs/{roberta,deberta,modernbert}) loads, validates and builds."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from structpe.models import SiPEConfig, build_model
from structpe.train.recipe import CONFIG_ROOT, load_recipe

RECIPES = sorted(
    f"{path.parent.name}/{path.stem}"
    for family in ("roberta", "deberta", "modernbert")
    for path in (Path(CONFIG_ROOT) / family).glob("*.yaml")
)


def test_every_family_has_tiny_and_small_recipes():
    for family in ("roberta", "deberta", "modernbert"):
        for variant in ("none", "input"):
            assert f"{family}/{variant}-tiny" in RECIPES and f"{family}/{variant}-small" in RECIPES
    for family in ("deberta", "modernbert"):
        assert f"{family}/position-tiny" in RECIPES and f"{family}/position-small" in RECIPES


@pytest.mark.parametrize("name", RECIPES)
def test_recipe_builds(name):
    recipe = load_recipe(name)
    assert recipe.model["family"] == name.split("/")[0]
    config = SiPEConfig(vocab_size=128, pad_token_id=0, **recipe.model)
    assert recipe.train.seq_len <= config.max_position_embeddings
    if name.endswith("-tiny"):  # build and run the small ones; the GPU profiles only validate
        model = build_model(config)
        ids = torch.randint(5, 128, (2, 16))
        tags = torch.randint(0, 2, (2, 16))
        deprels = torch.randint(0, max(config.n_deprels, 1), (2, 16))  # DEPREL recipes (SiPE table 12)
        extra = {"deprel_ids": deprels} if config.n_deprels else {}
        out = model(ids, terminal_ids=tags, nonterminal_ids=tags, labels=ids, **extra)
        assert torch.isfinite(out.loss)

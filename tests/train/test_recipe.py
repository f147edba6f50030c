"""Recipes: YAML + key=value overrides, with clear errors for typos (before anything runs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from structpe.errors import RecipeError
from structpe.train.recipe import TrainConfig, list_recipes, load_recipe


def test_overrides_and_coercion(tiny_recipe: Path) -> None:
    r = load_recipe(
        tiny_recipe,
        [
            "train.lr=1e-3",
            "max_steps=9",
            "model.d_model=48",
            "n_heads=4",
            "train.eval_batches=null",
            "bf16=true",
        ],
    )
    assert r.train.lr == pytest.approx(1e-3) and isinstance(r.train.lr, float)  # YAML reads 1e-3 as str
    assert r.train.max_steps == 9 and r.train.eval_batches is None and r.train.bf16 is True
    assert r.model["d_model"] == 48 and r.model["n_heads"] == 4
    assert r.description == "tiny test decoder"


def test_typo_in_file_names_key_and_suggests(tmp_path: Path, tiny_recipe: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(tiny_recipe.read_text().replace("  max_steps:", "  max_step:"))
    with pytest.raises(RecipeError) as e:
        load_recipe(bad)
    msg = str(e.value)
    assert str(bad) in msg and "'max_step'" in msg and "Did you mean 'max_steps'" in msg
    assert "Valid train keys:" in msg and "save_every" in msg


def test_typo_in_override_and_model_key(tiny_recipe: Path) -> None:
    with pytest.raises(RecipeError, match=r"unknown train key 'lrr'.*Did you mean 'lr'"):
        load_recipe(tiny_recipe, ["train.lrr=1"])
    with pytest.raises(RecipeError, match=r"unknown model key 'd_modle'.*'d_model'"):
        load_recipe(tiny_recipe, ["model.d_modle=8"])
    with pytest.raises(RecipeError, match=r"unknown key 'bach_size'. Did you mean 'train.batch_size'"):
        load_recipe(tiny_recipe, ["bach_size=8"])
    with pytest.raises(RecipeError, match="not of the form key=value"):
        load_recipe(tiny_recipe, ["lr"])
    with pytest.raises(RecipeError, match="is not a valid int"):
        load_recipe(tiny_recipe, ["max_steps=ten"])
    with pytest.raises(RecipeError, match="injection"):
        load_recipe(tiny_recipe, ["model.injection=everywhere"])  # SiPEConfig's own check
    with pytest.raises(RecipeError, match="fast_bf16=true trains in bf16 and needs bf16=true or auto"):
        load_recipe(tiny_recipe, ["train.fast_bf16=true", "train.bf16=false"])
    assert load_recipe(tiny_recipe, ["train.fast_bf16=true", "train.bf16=auto"]).train.fast_bf16 is True


def test_unknown_recipe_name_lists_available() -> None:
    with pytest.raises(RecipeError, match="no recipe file or name"):
        load_recipe("txl/postion-tiny")


def test_packaged_recipes_load() -> None:
    """Every recipe the model engineers ship must be readable by TrainConfig (no stray keys)."""
    names = list_recipes()
    for name in names:
        r = load_recipe(name)
        assert isinstance(r.train, TrainConfig)
        folder = name.split("/")[0]
        assert r.adapter is not None if folder == "adapters" else r.model["family"] == folder


def test_list_counts_what_adapter_recipes_add() -> None:
    """`pretrain --list`: an adapter recipe's extra parameters are counted on its base (here the
    packaged scratch recipe's base_init): SiPE's tag tables, tag head and W_delta, plus LoRA."""
    from structpe.train.recipe import recipe_table

    rows = {line.split()[0]: line.split()[1:] for line in recipe_table()[1:]}
    # d = 128, 4 layers, 16 rotary pairs: E_T + E_N = 7d, tag head (d + 1) x 7, W_delta 4 x d x 16;
    # LoRA r = 8 on q, k, v, o (128 -> 128) and gate, up (128 -> 384), down (384 -> 128) of 4 layers
    sipe = 7 * 128 + 129 * 7 + 4 * 128 * 16
    lora = 4 * 8 * (4 * (128 + 128) + 3 * (128 + 384))
    assert rows["adapters/llama-position-tiny"][0] == f"{sipe + lora:,}" == "91,911"
    assert rows["adapters/llama-none-tiny"][0] == f"{lora:,}"
    assert rows["adapters/llama-scratch-tiny"][0] == "0"
    assert rows["adapters/llama-position-gpu"][0] == "?"  # its base is a folder of the user's

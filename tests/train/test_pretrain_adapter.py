"""``structpe pretrain`` with an ``adapter:`` recipe: a Llama pre-trained from scratch, then continued
with LoRA + the SiPE adapter; the saved adapter folder evaluates through the eval loader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from structpe.errors import RecipeError
from structpe.eval.command_common import load_model_and_tokenizer
from structpe.eval.scoring.scorer import CausalScorer
from structpe.syntax.tagged import TaggedSentence
from structpe.train.pretrain import pretrain
from structpe.train.recipe import load_recipe
from structpe.train.trainer import read_metrics

SCRATCH = """\
adapter:
  base_init: {model_type: llama, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2,
              num_attention_heads: 2, max_position_embeddings: 128}
  injection: none
  base_training: full
train: {lr: 3.0e-3, batch_size: 4, seq_len: 64, max_steps: 4, warmup: 1, eval_every: 4, eval_batches: 2,
        log_every: 1, seed: 7, progress: false}
"""

CONTINUE = """\
adapter:
  base_model: {base}
  injection: position
  base_training: lora
  lora_r: 4
train: {{lr: 1.0e-2, batch_size: 4, seq_len: 64, max_steps: 6, warmup: 0, eval_every: 3, eval_batches: 2,
        log_every: 1, seed: 7, progress: false, schedule: constant_with_warmup}}
"""


@pytest.fixture
def scratch_run(gold_dataset: Path, tmp_path: Path) -> Path:
    recipe = tmp_path / "scratch.yaml"
    recipe.write_text(SCRATCH)
    return pretrain(recipe, [f"train.dataset={gold_dataset}", f"train.output_dir={tmp_path / 'scratch'}"])


def test_scratch_then_sipe_lora_then_eval(scratch_run: Path, gold_dataset: Path, tmp_path: Path) -> None:
    base = scratch_run / "final" / "base"
    assert (base / "model.safetensors").is_file()
    recipe = tmp_path / "continue.yaml"
    recipe.write_text(CONTINUE.format(base=base))
    run = pretrain(recipe, [f"train.dataset={gold_dataset}", f"train.output_dir={tmp_path / 'sipe'}"])
    final = run / "final"
    assert {"config.json", "sipe.safetensors", "lora", "tokenizer.json"} <= {p.name for p in final.iterdir()}
    assert not (final / "model.safetensors").exists() and not (final / "base").exists()  # small: no base copy
    rows = [r for r in read_metrics(run / "metrics.csv") if "terminal_loss" in r and "loss" in r]
    assert rows and all(r["terminal_loss"] > 0 for r in rows)  # the tag head trains with the LM
    losses = [r["loss"] for r in rows]
    assert losses[-1] < losses[0]

    model, tok = load_model_and_tokenizer(final)
    assert any(
        float(p.detach().abs().max()) > 0 for n, p in model.named_parameters() if n.startswith("delta.")
    )
    text = "The dog runs ."
    parse = TaggedSentence.from_heads(["The", "dog", "runs", "."], [2, 3, 0, 3])
    scores = {}
    for mode in ("conditional", "joint", "marginal"):
        s = CausalScorer(model, tok, likelihood=mode, k=3).score([text], parses=[parse])[0]
        assert s.tagged and all(torch.isfinite(torch.tensor(s.logprobs)))
        scores[mode] = s.total
    assert scores["joint"] < scores["conditional"]  # the tags are paid for


def test_resume_continues_an_adapter_run(scratch_run: Path, gold_dataset: Path, tmp_path: Path) -> None:
    """3 steps, then --resume to 6, ends where an uninterrupted 6-step run ends."""
    from safetensors.torch import load_file

    recipe = tmp_path / "continue.yaml"
    recipe.write_text(CONTINUE.format(base=scratch_run / "final" / "base"))
    data = f"train.dataset={gold_dataset}"
    out = f"train.output_dir={tmp_path / 'sipe'}"
    pretrain(recipe, [data, out, "max_steps=3"])
    run = pretrain(recipe, [data, out], resume=True, allow_changed_recipe=True)  # max_steps 3 -> 6
    summary = json.loads((run / "summary.json").read_text())
    assert summary["resumed_from"].endswith("checkpoint-3") and summary["steps"] == 6
    straight = pretrain(recipe, [data, f"train.output_dir={tmp_path / 'straight'}"])
    for name in ("sipe.safetensors", "lora/adapter_model.safetensors"):
        a, b = load_file(run / "final" / name), load_file(straight / "final" / name)
        assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=1e-6) for k in a), name


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("adapter.lora_rank=4", "unknown adapter key 'lora_rank'.*lora_r"),
        ("adapter.injection=attn_bias", "injection must be one of"),
        ("adapter.base_init={model_type: llama}", "exactly one of base_model, base_init"),
        ("adapter.lora_r=many", "adapter.lora_r='many' is not a valid int"),
    ],
)
def test_adapter_recipe_errors(tmp_path: Path, override: str, message: str) -> None:
    recipe = tmp_path / "continue.yaml"
    recipe.write_text(CONTINUE.format(base=tmp_path))
    with pytest.raises(RecipeError, match=message):
        load_recipe(recipe, [override])


def test_packaged_adapter_recipes_load() -> None:
    for name in ("adapters/llama-scratch-tiny", "adapters/llama-position-tiny", "adapters/llama-none-tiny"):
        assert load_recipe(name).adapter is not None

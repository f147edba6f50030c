"""The model card (``README.md``) of a final model folder, so ``push_to_hub`` needs nothing else.

The Hub reads the YAML header (``huggingface_hub``'s ``ModelCardData``): library, tags, pipeline,
the evaluation numbers as ``model-index`` results; structpe's own record goes under ``structpe``:
the recipe and its overrides, the prepared data's fingerprint and its input files with their
sha256, the tokenizer's hash, the parser that tagged the data, the training steps and wall time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from structpe.io import atomic_write_text

CARD_FILE = "README.md"

_PIPELINES = {"causal": "text-generation", "mlm": "fill-mask"}

_BODY = """
# {name}

A **{family}** model with SiPE injection **{injection}** (structure-informed positional encodings:
dependency parses linearised as hexatags feed a prior into the model), trained with structpe from
the recipe `{recipe}` for {steps} steps.

## Use

```python
import structpe  # registers structpe's models with transformers' Auto classes
from transformers import {auto}

model = {auto}.from_pretrained("<this folder or repo>")
```

A model that reads tags (injection other than `none`) scores text with tags from a parser; see
structpe's `docs/evaluation.md` (`structpe eval ppl|blimp|syntaxgym`, `lm_eval --model structpe`).

## Training data

- prepared dataset fingerprint: `{fingerprint}`
- parser: {parser}
- tokenizer sha256: `{tokenizer_sha256}`
{inputs}

## Evaluation

{evaluation}
"""


def _input_lines(inputs: list[dict[str, Any]]) -> str:
    return "\n".join(f"- {d['split']}: `{Path(d['path']).name}` sha256 `{d['sha256']}`" for d in inputs)


def model_card_data(
    *, recipe: Any, summary: dict[str, Any], meta: dict[str, Any]
) -> tuple[Any, dict[str, Any]]:
    """``ModelCardData`` for the header and the fields the body shows."""
    from huggingface_hub import EvalResult, ModelCardData

    from structpe.io import sha256_file

    inputs = [
        {"split": split, "path": p, "sha256": sha256_file(p) if Path(p).is_file() else None}
        for split, paths in (meta.get("inputs") or {}).items()
        for p in paths
    ]
    settings = meta.get("settings") or {}
    parser = {"name": settings.get("parser"), **(meta.get("parser_identity") or {})}
    objective = summary.get("objective", "causal")
    final = summary.get("final_eval") or {}
    name = recipe.name
    family, injection = recipe.model.get("family", "txl"), recipe.model.get("injection", "none")
    results = [
        EvalResult(
            task_type=_PIPELINES.get(objective, "text-generation"),
            dataset_type="structpe-prepared",
            dataset_name=f"validation split of {Path(str(summary.get('dataset'))).name}",
            dataset_split="validation",
            metric_type=key.removeprefix("eval_"),
            metric_value=float(value),
        )
        for key, value in final.items()
        if key in ("eval_ppl", "eval_lm_loss", "eval_loss") and value is not None
    ]
    record = {
        "recipe": recipe.source,
        "overrides": list(recipe.overrides),
        "family": family,
        "injection": injection,
        "objective": objective,
        "steps": summary.get("steps"),
        "parameters": summary.get("parameters"),
        "train_wall_s": summary.get("train_wall_s"),
        "data": {
            "dataset": summary.get("dataset"),
            "fingerprint": meta.get("fingerprint"),
            "tokenizer_sha256": meta.get("tokenizer_sha256"),
            "inputs": inputs,
        },
        "parser": parser,
        "final_eval": final,
    }
    data = ModelCardData(
        library_name="transformers",
        pipeline_tag=_PIPELINES.get(objective),
        tags=["structpe", "sipe", "hexatags", family, f"injection-{injection}"],
        model_name=name,
        eval_results=results or None,
        structpe=record,
    )
    return data, record


def write_model_card(
    folder: str | Path, *, recipe: Any, summary: dict[str, Any], meta: dict[str, Any]
) -> Path:
    """Write ``<folder>/README.md``: the Hub's YAML header and a short body (atomically)."""
    from huggingface_hub import ModelCard

    data, record = model_card_data(recipe=recipe, summary=summary, meta=meta)
    final = record["final_eval"]
    numbers = [
        f"- {k.removeprefix('eval_')}: {v:.4f}"
        for k, v in final.items()
        if isinstance(v, float) and (k.endswith("loss") or k.endswith("ppl"))
    ]
    evaluation = "\n".join(numbers or ["- none recorded"]) + (
        "\n\nValidation numbers at the last step. structpe's evaluations (`structpe eval ...`) write "
        "theirs as JSON with a provenance block."
    )
    parser = record["parser"]
    body = _BODY.format(
        name=data.model_name,
        family=record["family"],
        injection=record["injection"],
        recipe=record["recipe"],
        steps=record["steps"],
        auto="AutoModelForCausalLM" if record["objective"] == "causal" else "AutoModelForMaskedLM",
        fingerprint=record["data"]["fingerprint"],
        parser=", ".join(f"{k} {v}" for k, v in parser.items() if isinstance(v, str)) or "none",
        tokenizer_sha256=record["data"]["tokenizer_sha256"],
        inputs=_input_lines(record["data"]["inputs"]),
        evaluation=evaluation,
    )
    card = ModelCard(f"---\n{data.to_yaml()}\n---\n{body}")
    path = Path(folder) / CARD_FILE
    atomic_write_text(path, str(card))
    return path

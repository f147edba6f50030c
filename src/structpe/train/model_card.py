"""The model card (``README.md``) of a final model folder, so ``push_to_hub`` needs nothing else.

The Hub reads the YAML header (``huggingface_hub``'s ``ModelCardData``): library, tags, pipeline,
the evaluation numbers as ``model-index`` results; structpe's own record goes under ``structpe``:
the recipe (by name) and its overrides, the prepared data's fingerprint and its input files with
their sha256, the tokenizer's hash, the parser that tagged the data, the training steps and wall
time, structpe's version and git revision. Each number is labelled with the likelihood it measures
(docs/likelihoods.md): a model that reads tags was validated on p(x | T(x)), the parse of the whole
sentence given, a fixed-parse figure that is not p(x); the license is the training data's, from
structpe's data registry.
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
dependency parses linearised as hexatags feed a prior into the model), trained with structpe
{version} (git revision `{revision}`) from the recipe `{recipe}` for {steps} steps.

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

## License

{license}
"""

# Hub license ids of the data registry's licenses (the rest are "other", named in the card's body)
_HUB_LICENSES = {
    "CC BY-SA 4.0": "cc-by-sa-4.0",
    "CC BY-SA 3.0": "cc-by-sa-3.0",
    "CC BY-NC-SA 4.0": "cc-by-nc-sa-4.0",
}


def metric_likelihood(objective: str, injection: str) -> dict[str, Any]:
    """What a validation number of this model measures (docs/likelihoods.md): the likelihood mode,
    whether it reads the parse, and a label for the card."""
    tagged = injection != "none"
    if objective != "causal":
        return {
            "likelihood": "masked",
            "reads_parse": tagged,
            "label": "masked-token cross-entropy" + (", reads the parse" if tagged else ""),
        }
    if tagged:
        return {
            "likelihood": "conditional",
            "reads_parse": True,
            "label": "conditional p(x | T(x)), reads the parse of the whole sentence: a fixed-parse "
            "figure, not p(x)",
        }
    return {"likelihood": "exact", "reads_parse": False, "label": "exact p(x)"}


def data_licenses(inputs: list[dict[str, Any]]) -> dict[str, str]:
    """The license of each registry data set the training files come from (``.../<folder>/<file>``
    under a data root); a file of the user's own is listed as ``unknown``."""
    from structpe.data.registry import registry

    out: dict[str, str] = {}
    for d in inputs:
        path = Path(d["path"])
        owner = next(
            (
                ds
                for ds in registry().values()
                if path.parent.parts[-len(Path(ds.folder).parts) :] == Path(ds.folder).parts
                and any(o.target == path.name for o in ds.outputs)
            ),
            None,
        )
        if owner is not None:
            out[owner.name] = owner.license
        else:
            out[str(path.name)] = "unknown (not a data set of structpe's registry)"
    return out


def _hub_license(licenses: dict[str, str]) -> str:
    ids = {next((v for k, v in _HUB_LICENSES.items() if t.startswith(k)), "other") for t in licenses.values()}
    return ids.pop() if len(ids) == 1 else "other"


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
    from structpe.provenance import git_revision
    from structpe.version import __version__

    objective = summary.get("objective", "causal")
    final = summary.get("final_eval") or {}
    name = recipe.name
    family, injection = recipe.model.get("family", "txl"), recipe.model.get("injection", "none")
    mode = metric_likelihood(objective, injection)
    results = [
        EvalResult(
            task_type=_PIPELINES.get(objective, "text-generation"),
            dataset_type="structpe-prepared",
            dataset_name=f"validation split of {Path(str(summary.get('dataset'))).name}",
            dataset_split="validation",
            metric_type=key.removeprefix("eval_"),
            metric_name=f"{key.removeprefix('eval_')}, {_metric_label(key, mode)}",
            metric_value=float(final[key]),
        )
        for key in METRICS
        if final.get(key) is not None
    ]
    licenses = data_licenses(inputs)
    record = {
        "recipe": recipe.name,  # the name --config takes (a file of the user's own: its stem)
        "overrides": list(recipe.overrides),
        "structpe_version": __version__,
        "git_revision": git_revision(),
        "likelihood": mode["likelihood"],
        "reads_parse": mode["reads_parse"],
        "data_licenses": licenses,
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
        license=_hub_license(licenses),
        library_name="transformers",
        pipeline_tag=_PIPELINES.get(objective),
        tags=["structpe", "sipe", "hexatags", family, f"injection-{injection}"],
        model_name=name,
        eval_results=results or None,
        structpe=record,
    )
    return data, record


# the validation numbers a card shows, in this order: the LM's (perplexity, then its loss), then the
# training objective (the LM loss plus the tag heads' losses for a model with tag heads)
METRICS = ("eval_ppl", "eval_lm_loss", "eval_loss")


def _metric_label(key: str, mode: dict[str, Any]) -> str:
    if key == "eval_loss":
        return "the training objective (the LM loss plus any tag-head losses)"
    return mode["label"]


def write_model_card(
    folder: str | Path, *, recipe: Any, summary: dict[str, Any], meta: dict[str, Any]
) -> Path:
    """Write ``<folder>/README.md``: the Hub's YAML header and a short body (atomically)."""
    from huggingface_hub import ModelCard

    data, record = model_card_data(recipe=recipe, summary=summary, meta=meta)
    final = record["final_eval"]
    mode = metric_likelihood(record["objective"], record["injection"])
    numbers = [
        f"- {k.removeprefix('eval_')} ({_metric_label(k, mode)}): {final[k]:.4f}"
        for k in METRICS
        if isinstance(final.get(k), float)
    ]
    note = ""
    if mode["likelihood"] == "conditional":
        note = (
            "\n\nNo exact p(x) figure: this model reads tags, so p(x) sums over every parse; `structpe "
            "eval ppl --likelihood marginal` gives a lower bound on it, `--likelihood joint` p(x, T). The "
            "conditional figure above is not comparable with an untagged model's p(x) perplexity: the "
            "model is given the parse of the whole sentence, future words' tags included "
            "(docs/likelihoods.md)."
        )
    evaluation = "\n".join(numbers or ["- none recorded"]) + note + (
        "\n\nValidation numbers at the last step. structpe's evaluations (`structpe eval ...`) write "
        "theirs as JSON with a provenance block."
    )
    licenses = "\n".join(f"- {name}: {text}" for name, text in record["data_licenses"].items())
    license_text = (
        "Trained on the data below; the weights are subject to its terms (structpe's data registry):\n\n"
        + (licenses or "- no training files recorded")
    )
    parser = record["parser"]
    body = _BODY.format(
        name=data.model_name,
        family=record["family"],
        injection=record["injection"],
        recipe=record["recipe"],
        steps=record["steps"],
        version=record["structpe_version"],
        revision=record["git_revision"] or "unknown",
        license=license_text,
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

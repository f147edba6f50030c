"""``structpe parser export``: a trained hexatagger folder made into the shippable default.

:func:`export_model` writes the weights as float16 safetensors (half the bytes; they are read back
into float32, and the card's metrics are measured on the exported copy, not on the training run),
the config and tokenizer, and a model card: ``card.json`` (the facts, machine-read by the tests)
and ``README.md`` (the same facts for people), with the sha256 of every file.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from structpe.errors import StructpeError
from structpe.io import MODEL_CONFIG_NAME, atomic_write_text, read_json, replace_folder, sha256_file
from structpe.parser.default import CARD_NAME

TRAINING_FILES = ("train_summary.json",)  # copied next to the weights: stages, wall times, recipe


def export_model(
    model_dir: str | os.PathLike,
    output: str | os.PathLike,
    command: str,
    evaluations: dict[str, dict[str, Any]] | None = None,
    data_root: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """Write ``model_dir`` as a shippable folder at ``output``; return its card.

    ``evaluations`` maps a treebank name (``ewt``, ``gum``, ``pud``) to a split; each is parsed with
    the *exported* weights and scored (``structpe parser eval``'s metrics). ``command`` is the
    training command that reproduces ``model_dir``.
    """
    from structpe.parser.data import load_sentences, treebank_file
    from structpe.parser.evaluate import evaluate_parser
    from structpe.parser.model import HexataggerModel

    src, out = Path(model_dir), Path(output)
    if out.resolve() == src.resolve():
        raise StructpeError(f"--output {out}: is the model folder itself; choose another folder")
    model = HexataggerModel.from_pretrained(src)
    stage = out.with_name(out.name + ".tmp-export")  # built aside, then moved into place
    shutil.rmtree(stage, ignore_errors=True)
    model.half().save_pretrained(stage)
    for name in ("tokenizer.json", "tokenizer_config.json", *TRAINING_FILES):
        if (src / name).is_file():
            shutil.copyfile(src / name, stage / name)
    metrics = {}
    for treebank, split in (evaluations or {}).items():
        path = treebank_file(data_root, treebank, split)
        res = evaluate_parser("hexatagger", load_sentences(path), str(stage))
        keep = ("uas", "uas_no_punct", "las", "tag_acc", "exact_match", "sentences", "words")
        metrics[f"{treebank}-{split}"] = {k: res[k] for k in keep if k in res}
    config = read_json(stage / MODEL_CONFIG_NAME)
    summary_path = stage / TRAINING_FILES[0]
    summary = read_json(summary_path) if summary_path.is_file() else {}
    card = {
        "name": "structpe default hexatagger",
        "encoder": config.get("encoder"),
        "parameters": model.num_parameters(),
        "dtype": "float16 (loaded as float32)",
        "training_command": command,
        "training_data": summary.get("config", {}).get("data", {}).get("train"),
        "training_summary": {k: v for k, v in summary.items() if k != "config"},
        "metrics": metrics,
        "metric_note": "gold words in; UAS/LAS count every word (CoNLL 2018), *_no_punct leave out punct",
        "sha256": {
            name: sha256_file(stage / name)
            for name in sorted(p.name for p in stage.iterdir() if p.is_file())
        },
    }
    atomic_write_text(stage / CARD_NAME, json.dumps(card, indent=2) + "\n")
    atomic_write_text(stage / "README.md", render_card(card))
    replace_folder(stage, out)
    return card


def render_card(card: dict[str, Any]) -> str:
    """The card as Markdown (``README.md`` beside the weights)."""
    lines = [
        f"# {card['name']}",
        "",
        f"A hexatagger ({card['encoder']} encoder, {card['parameters']:,} parameters, {card['dtype']}) "
        "that `structpe tag --parser hexatagger` and `structpe prepare --parser hexatagger` load when no "
        "`--model` is given. docs/hexatagger.md describes the model and how it was chosen.",
        "",
        f"Training command: `{card['training_command']}`",
        "",
        f"Training data: UD English train splits {card['training_data']} (projectivised by arc lifting); "
        "model selection on EWT dev UAS.",
        "",
        "| data | UAS | UAS no punct | LAS | tag acc | exact | sentences |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, m in card["metrics"].items():
        lines.append(
            f"| {name} | {m['uas']:.2f} | {m['uas_no_punct']:.2f} | {m.get('las', float('nan')):.2f} | "
            f"{m['tag_acc']:.2f} | {m['exact_match']:.1f} | {m['sentences']} |"
        )
    lines += ["", card["metric_note"], "", "sha256:", ""]
    lines += [f"- `{name}`: `{digest}`" for name, digest in card["sha256"].items()]
    return "\n".join(lines) + "\n"


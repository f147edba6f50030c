"""The model card of a final folder: each number labelled with its likelihood mode, the recipe by
name, the data's license from the registry, structpe's version and revision (offline, no training)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from structpe.train.model_card import write_model_card
from structpe.version import __version__


def _card(tmp_path: Path, injection: str, objective: str = "causal", corpus: str = "corpus/brown") -> str:
    data = tmp_path / "data" / corpus
    data.mkdir(parents=True)
    train = data / ("brown.train.txt.gz" if "brown" in corpus else "mine.txt")
    train.write_bytes(b"x")
    recipe = SimpleNamespace(
        name=f"txl/{injection}-tiny",
        source=str(tmp_path / "configs" / f"{injection}-tiny.yaml"),  # an absolute local path
        overrides=["train.max_steps=4"],
        model={"family": "txl", "injection": injection},
    )
    summary = {
        "objective": objective,
        "steps": 4,
        "dataset": str(tmp_path / "prepared"),
        "final_eval": {"eval_loss": 5.1, "eval_lm_loss": 4.2, "eval_ppl": 68.6},
    }
    meta = {"inputs": {"train": [str(train)]}, "settings": {"parser": "spacy"}, "fingerprint": "f"}
    (tmp_path / "final").mkdir()
    return write_model_card(tmp_path / "final", recipe=recipe, summary=summary, meta=meta).read_text()


def test_a_tagged_models_card_says_its_perplexity_reads_the_parse(tmp_path: Path) -> None:
    from huggingface_hub import ModelCard

    text = _card(tmp_path, "position")
    card = ModelCard(text)
    assert "ppl (conditional p(x | T(x)), reads the parse of the whole sentence" in text
    assert "No exact p(x) figure" in text
    assert card.data.structpe["likelihood"] == "conditional" and card.data.structpe["reads_parse"]
    names = [r.metric_name for r in card.data.eval_results]
    assert names[0].startswith("ppl, conditional p(x | T(x)), reads the parse")
    # the recipe by name, never the local path it was read from
    assert card.data.structpe["recipe"] == "txl/position-tiny"
    assert "recipe `txl/position-tiny`" in text and "configs/position-tiny.yaml" not in text
    # Brown is non-commercial: the license comes from the data registry
    assert card.data.license == "other"
    assert "brown: non-commercial use" in text
    assert card.data.structpe["data_licenses"] == {
        "brown": "non-commercial use (NLTK index); redistribution permitted (corpus README)"
    }
    assert card.data.structpe["structpe_version"] == __version__
    assert f"structpe {__version__}" in " ".join(text.split())
    assert "git_revision" in card.data.structpe


@pytest.mark.parametrize(("injection", "objective", "label"), [
    ("none", "causal", "- ppl (exact p(x)): 68.6000"),
    ("input", "mlm", "- ppl (masked-token cross-entropy, reads the parse): 68.6000"),
])
def test_the_exact_figure_comes_first(tmp_path: Path, injection: str, objective: str, label: str) -> None:
    text = _card(tmp_path, injection, objective)
    evaluation = text.split("## Evaluation")[1].strip().splitlines()
    assert evaluation[0] == label
    assert "No exact p(x) figure" not in text


def test_a_users_own_data_has_an_unknown_license(tmp_path: Path) -> None:
    text = _card(tmp_path, "none", corpus="mine")
    assert "mine.txt: unknown" in text and "license: other" in text

"""transformers' Auto classes load structpe models (identical logits to ``structpe.models.load``)
without warnings, and every final model folder has a Hub model card (offline).

The trained models come from ``pretrain`` on a slice of UD EWT (gold trees, a few steps); the
Auto-class checks run in fresh interpreters, since the registration depends on import order.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from structpe.train.prepare import prepare
from structpe.train.prepare_settings import PrepareSettings
from structpe.train.pretrain import pretrain
from structpe.train.tokenizer import train_tokenizer

TXL = (
    "model: {family: txl, injection: position, d_model: 32, n_layers: 2, n_heads: 2, d_ff: 64, dropout: 0.0,"
    " attention_dropout: 0.0}\n"
)
ROBERTA = (
    "model: {family: roberta, injection: input, d_model: 32, n_layers: 2, n_heads: 2, d_ff: 64,"
    " max_position_embeddings: 80}\n"
)
TRAIN = (
    "train: {batch_size: 4, seq_len: 64, max_steps: 4, warmup: 1, eval_every: 4, eval_batches: 2,"
    " log_every: 1, progress: false}\n"
)


def _ewt_slice(shared: Path, dst: Path, count: int) -> Path:
    import gzip

    src = shared / "ud" / "UD_English-EWT" / "en_ewt-ud-dev.conllu.gz"
    with gzip.open(src, "rt", encoding="utf-8") as f:
        blocks = f.read().split("\n\n")[:count]
    dst.write_text("\n\n".join(blocks) + "\n\n", encoding="utf-8")
    return dst


@pytest.fixture(scope="module")
def trained(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny TXL (BPE, causal) and a tiny RoBERTa (WordPiece, MLM), each trained 4 steps."""
    root = tmp_path_factory.mktemp("hf")
    splits = {"train": _ewt_slice(shared_data, root / "train.conllu", 120)}
    splits["validation"] = splits["train"]
    runs = {}
    for family, kind, model in (("txl", "bpe", TXL), ("roberta", "wordpiece", ROBERTA)):
        tok = root / f"tok-{kind}"
        train_tokenizer([splits["train"]], tok, kind=kind, vocab_size=300, show_progress=False)
        data = prepare(
            {k: [v] for k, v in splits.items()},
            tok,
            root / f"data-{kind}",
            settings=PrepareSettings(parser="gold", seq_len=64),
        )
        recipe = root / f"{family}.yaml"
        recipe.write_text(model + TRAIN)
        runs[family] = pretrain(recipe, [f"train.dataset={data}", f"train.output_dir={root / family}"])
    return runs


CHECK = textwrap.dedent(
    """
    import logging, sys, warnings
    warnings.simplefilter("always")
    records = []
    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())
    logging.getLogger("transformers").addHandler(Keep(level=logging.WARNING))
    txl_dir, roberta_dir, order = sys.argv[1:4]
    with warnings.catch_warnings(record=True) as caught:
        if order == "transformers-first":
            from transformers import AutoModelForCausalLM
            import structpe
        else:
            import structpe
            assert "torch" not in sys.modules, "import structpe must stay cheap"
        import torch
        from transformers import (AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM,
                                  AutoModelForSequenceClassification, AutoTokenizer)
        from structpe.models import SiPEConfig, load
        from structpe.syntax.hexatags import NONTERMINAL_TO_ID, TERMINAL_TO_ID

        assert isinstance(AutoConfig.from_pretrained(txl_dir), SiPEConfig)
        tok = AutoTokenizer.from_pretrained(txl_dir)
        ids = torch.tensor([tok("the dog runs in the park .")["input_ids"]])
        n = ids.shape[1]
        tags = dict(terminal_ids=torch.arange(n)[None] % len(TERMINAL_TO_ID),
                    nonterminal_ids=torch.arange(n)[None] % len(NONTERMINAL_TO_ID))
        auto = AutoModelForCausalLM.from_pretrained(txl_dir).eval()
        ours = load(txl_dir).eval()
        assert type(auto).__name__ == "TransfoXLSiPEForCausalLM", type(auto)
        with torch.no_grad():
            assert torch.equal(auto(ids, **tags).logits, ours(ids, **tags).logits)
            assert torch.equal(auto(ids).logits, ours(ids).logits)
            out = auto.generate(ids, max_new_tokens=3, do_sample=False)
            assert out.shape[1] == n + 3

        AutoTokenizer.from_pretrained(roberta_dir)
        auto = AutoModelForMaskedLM.from_pretrained(roberta_dir).eval()
        ours = load(roberta_dir).eval()
        assert type(auto).__name__ == "RobertaSiPEForMaskedLM", type(auto)
        ids = torch.tensor([[2, 10, 11, 12, 13, 3]])
        tags = dict(terminal_ids=torch.arange(6)[None] % len(TERMINAL_TO_ID),
                    nonterminal_ids=torch.arange(6)[None] % len(NONTERMINAL_TO_ID))
        with torch.no_grad():
            assert torch.equal(auto(ids, **tags).logits, ours(ids, **tags).logits)
        clf = AutoModelForSequenceClassification.from_pretrained(roberta_dir, num_labels=3)
        assert type(clf).__name__ == "RobertaSiPEForSequenceClassification", type(clf)
    found = [str(w.message) for w in caught] + records
    bad = [m for m in found if "model of type" in m or "deprecat" in m.lower() or "past_key_values" in m]
    assert not bad, bad
    print("ok")
    """
)


@pytest.mark.parametrize("order", ["structpe-first", "transformers-first"])
def test_auto_classes_load_structpe_models(trained: dict[str, Path], order: str) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    args = [
        sys.executable,
        "-c",
        CHECK,
        str(trained["txl"] / "final"),
        str(trained["roberta"] / "final"),
        order,
    ]
    run = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr[-3000:]


def test_final_folder_has_a_hub_model_card(trained: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from huggingface_hub import ModelCard
    from huggingface_hub.repocard import metadata_load

    from structpe.io import sha256_file

    for family, objective in (("txl", "causal"), ("roberta", "mlm")):
        run = trained[family]
        card_path = run / "final" / "README.md"
        assert card_path.read_text().startswith("---\n")
        card = ModelCard.load(card_path)
        summary = json.loads((run / "summary.json").read_text())
        meta = json.loads((Path(summary["dataset"]) / "structpe_prepare.json").read_text())
        record = card.data.structpe
        assert record["steps"] == 4 and record["objective"] == objective and record["family"] == family
        assert record["data"]["fingerprint"] == meta["fingerprint"]
        assert record["data"]["tokenizer_sha256"] == meta["tokenizer_sha256"]
        assert record["parser"]["name"] == "gold"
        assert [d["sha256"] for d in record["data"]["inputs"]] == [
            sha256_file(p) for paths in meta["inputs"].values() for p in paths
        ]
        assert record["recipe"] == family  # the name, never a local path
        assert record["structpe_version"] and "git_revision" in record
        assert "structpe" in card.data.tags and card.data.library_name == "transformers"
        results = {r.metric_type: r.metric_value for r in card.data.eval_results}
        assert results["ppl"] == pytest.approx(summary["final_eval"]["eval_ppl"])
        assert metadata_load(card_path)["model-index"][0]["name"] == card.data.model_name


def test_cli_help_imports_no_torch() -> None:
    code = (
        "import sys; from structpe.cli import build_parser; build_parser(); "
        "print(sorted(m for m in ('torch', 'transformers', 'datasets', 'spacy') if m in sys.modules))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.stdout.strip() == "[]", run.stderr[-2000:]

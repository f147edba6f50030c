"""lm-evaluation-harness with the ``structpe`` model type: a local YAML task over a local JSONL file
(offline) gives the same BLiMP decisions as ``structpe eval blimp`` on the same pairs."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from eval_toys import WORDS, ChainParser, make_tokenizer

from structpe.cli import main
from structpe.models import SiPEConfig, build_model
from structpe.parser.registry import register_parser

lm_eval = pytest.importorskip("lm_eval")

register_parser("chain-lm-eval", lambda **kw: ChainParser())

PAIRS = [
    ("the dog runs .", "the dogs runs ."),
    ("the dogs run .", "the dog run ."),
    ("the cat sleeps .", "the cats sleeps ."),
    ("the cats sleep .", "the cat sleep ."),
    ("the dog sleeps .", "dog the sleeps ."),
    ("the cat runs .", "cat runs the ."),
    ("the dogs sleep .", "the dogs sleeps ."),
    ("the cats run .", "the cats runs ."),
]
TASK = """\
task: structpe_toy_blimp
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: ""
doc_to_target: 0
doc_to_choice: "{{{{[sentence_good, sentence_bad]}}}}"
num_fewshot: 0
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("lmeval")
    torch.manual_seed(3)
    cfg = SiPEConfig(
        family="txl", injection="position", vocab_size=len(WORDS), d_model=32, n_layers=2, n_heads=2
    )
    build_model(cfg).save_pretrained(root / "txl")
    make_tokenizer().save_pretrained(root / "txl")
    rows = [
        {
            "sentence_good": g,
            "sentence_bad": b,
            "field": "morphology",
            "linguistics_term": "subject_verb_agreement",
            "UID": "toy_agreement",
            "pairID": str(i),
        }
        for i, (g, b) in enumerate(PAIRS)
    ]
    (root / "blimp").mkdir()
    with gzip.open(root / "blimp" / "toy_agreement.jsonl.gz", "wt") as f:  # what `structpe eval blimp` reads
        f.writelines(json.dumps(r) + "\n" for r in rows)
    # a data folder (STRUCTPE_DATA) whose BLiMP paradigm is the shipped offline task's
    (root / "data" / "blimp").mkdir(parents=True)
    with gzip.open(root / "data" / "blimp" / "anaphor_gender_agreement.jsonl.gz", "wt") as f:
        f.writelines(json.dumps({**r, "UID": "anaphor_gender_agreement"}) + "\n" for r in rows)
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = make_tokenizer()  # a tiny GPT-2 (lm-eval's own `hf` type), tokenizer saved beside it
    gpt2 = GPT2Config(vocab_size=len(tok), n_positions=32, n_embd=16, n_layer=1, n_head=2)
    GPT2LMHeadModel(gpt2).save_pretrained(root / "gpt2")
    tok.save_pretrained(root / "gpt2")
    (root / "pairs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))  # lm-eval's task data
    (root / "tasks").mkdir()
    (root / "tasks" / "toy.yaml").write_text(TASK.format(data=root / "pairs.jsonl"))
    return {"root": root, "model": root / "txl", "tasks": root / "tasks", "gpt2": root / "gpt2"}


@pytest.fixture(scope="module")
def toy_tasks(setup: dict[str, Path]):  # noqa: ANN201 (lm-eval's TaskManager)
    """The toy task alone: lm-eval's default index parses every YAML it ships (seconds per build), which
    the in-process runs do not need; the command-line tests below still go through the full index."""
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=str(setup["tasks"]), include_defaults=False)


@pytest.mark.parametrize(
    "likelihood,proposal",
    [
        ("conditional", "prior"),
        ("joint", "prior"),
        ("marginal", "prior"),
        ("smc", "prior"),
        ("smc", "adapted"),
    ],
)
def test_lm_eval_blimp_decisions_match_structpe(
    setup: dict[str, Path], toy_tasks, likelihood: str, proposal: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import structpe.lm_eval  # noqa: F401  (registers the model type)

    args = f"pretrained={setup['model']},parser=chain-lm-eval,likelihood={likelihood}"
    args += ",k=4,particles=4,batch_size=8" + (f",proposal={proposal}" if likelihood == "smc" else "")
    res = lm_eval.simple_evaluate(
        model="structpe",
        model_args=args,
        tasks=["structpe_toy_blimp"],
        task_manager=toy_tasks,
        log_samples=True,
    )
    samples = sorted(res["samples"]["structpe_toy_blimp"], key=lambda s: s["doc_id"])
    lm_lp = [[float(r[0][0]) for r in s["resps"]] for s in samples]

    out = setup["root"] / f"blimp-{likelihood}-{proposal}"
    argv = [
        "eval",
        "blimp",
        "--model",
        str(setup["model"]),
        "--data-dir",
        str(setup["root"] / "blimp"),
        "--parser",
        "chain-lm-eval",
        "--likelihood",
        likelihood,
        "--k",
        "4",
        "--particles",
        "4",
        *(["--proposal", proposal] if likelihood == "smc" else []),
        "--batch-size",
        "8",
        "--keep-pairs",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    pairs = json.loads((out / "blimp.json").read_text())["pairs"]
    ours = {int(p["pair_id"]): p for p in pairs}
    assert len(samples) == len(ours) == len(PAIRS)
    for i, (good, bad) in enumerate(lm_lp):
        assert good == pytest.approx(ours[i]["logp_good"], abs=1e-4)
        assert bad == pytest.approx(ours[i]["logp_bad"], abs=1e-4)
        assert (good > bad) == ours[i]["correct"]
    acc = res["results"]["structpe_toy_blimp"]["acc,none"]
    assert acc == pytest.approx(sum(p["correct"] for p in pairs) / len(pairs))
    info = res["config"]["model_args"] if isinstance(res["config"].get("model_args"), dict) else res["config"]
    assert "structpe" in json.dumps(info, default=str)


def _lm_eval(root: Path, *args: str) -> subprocess.CompletedProcess:
    """``python -m structpe.lm_eval ARGS`` offline (lm-eval's HF-dataset and Hub clients refuse the
    network), the BLiMP files from the test's data folder."""
    env = {
        **os.environ,
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "STRUCTPE_DATA": str(root / "data"),
    }
    cmd = [sys.executable, "-m", "structpe.lm_eval", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)


def test_the_readme_command_line(setup: dict[str, Path], tmp_path: Path) -> None:
    """The README's command as written (spaCy tags, the shipped offline task, no --include_path),
    with lm-eval's own --batch_size beside batch_size in model_args; its provenance."""
    run = _lm_eval(
        setup["root"],
        "--model",
        "structpe",
        "--model_args",
        f"pretrained={setup['model']},parser=spacy,likelihood=conditional,batch_size=8",
        "--tasks",
        "structpe_blimp_anaphor_gender_agreement",
        "--device",
        "cpu",
        "--batch_size",
        "4",
        "--output_path",
        str(tmp_path / "out"),
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "structpe_blimp_anaphor_gender_agreement" in run.stdout
    (result,) = list((tmp_path / "out").rglob("results_*.json"))
    data = json.loads(result.read_text())
    assert 0 <= data["results"]["structpe_blimp_anaphor_gender_agreement"]["acc,none"] <= 1
    assert data["n-samples"]["structpe_blimp_anaphor_gender_agreement"]["effective"] == len(PAIRS)
    prov = data["config"]["provenance"]
    assert prov["command"].split()[1:4] == ["-m", "structpe.lm_eval", "--model"]
    assert prov["wall_s"] is not None and prov["wall_s"] > 0


def test_lm_evals_own_model_types_still_work(setup: dict[str, Path], tmp_path: Path) -> None:
    """`--model hf` through structpe's entry: registering `structpe` keeps lm-eval's own types."""
    run = _lm_eval(
        setup["root"],
        "--model",
        "hf",
        "--model_args",
        f"pretrained={setup['gpt2']}",
        "--tasks",
        "structpe_toy_blimp",
        "--include_path",
        str(setup["tasks"]),
        "--device",
        "cpu",
        "--batch_size",
        "8",
        "--output_path",
        str(tmp_path / "out"),
    )
    assert run.returncode == 0, run.stderr[-3000:]
    (result,) = list((tmp_path / "out").rglob("results_*.json"))
    assert 0 <= json.loads(result.read_text())["results"]["structpe_toy_blimp"]["acc,none"] <= 1


@pytest.mark.parametrize(
    ("model_args", "message"),
    [
        ("likelihod=joint", "unknown key 'likelihod' (did you mean 'likelihood'?)"),
        ("likelihood=jiont", "likelihood='jiont': expected one of"),
        ("parser=spcy", "parser='spcy': expected one of"),
        ("k=0", "k=0: must be >= 1"),
        ("k=ten", "k='ten': expected an integer"),
        ("batch_size=-3", "batch_size=-3: must be >= 1"),
        ("batch_size=big", "expected an integer or auto"),
        ("parser=spacy", "pretrained=... is required"),
        ("device=gpu7", "device"),
    ],
)
def test_bad_model_args_are_refused_by_name(setup: dict[str, Path], model_args: str, message: str) -> None:
    from structpe.errors import StructpeError
    from structpe.lm_eval import StructpeLM

    pretrained = "" if model_args == "parser=spacy" else f"pretrained={setup['model']},"
    with pytest.raises(StructpeError, match=re.escape(message)):
        StructpeLM.create_from_arg_string(pretrained + model_args, {"batch_size": 1, "device": None})


def test_a_bad_model_arg_on_the_command_line_is_one_line(setup: dict[str, Path]) -> None:
    run = _lm_eval(
        setup["root"],
        "--model",
        "structpe",
        "--model_args",
        f"pretrained={setup['model']},likelihod=joint",
        "--tasks",
        "structpe_blimp_anaphor_gender_agreement",
    )
    assert run.returncode == 2, run.stderr[-3000:]
    assert "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines()[-1] == (
        "structpe.lm_eval: error: model_args: unknown key 'likelihod' (did you mean 'likelihood'?); known: "
        + ", ".join(__import__("structpe.lm_eval").lm_eval.MODEL_ARGS)
    )


def test_context_tokens_are_not_scored(setup: dict[str, Path]) -> None:
    from types import SimpleNamespace

    from structpe.lm_eval import StructpeLM

    lm = StructpeLM(pretrained=str(setup["model"]), parser="chain-lm-eval", likelihood="conditional")
    req = [
        SimpleNamespace(args=a)
        for a in [("", " the dogs run ."), (" the dogs", " run ."), (" the", " dogs run .")]
    ]
    whole, tail, longer = (lp for lp, _ in lm.loglikelihood(req))
    (rolling,) = lm.loglikelihood_rolling([SimpleNamespace(args=(" the dogs run .",))])
    assert whole == pytest.approx(rolling)
    scores = lm.scorer.score([" the dogs run ."])[0]
    # " run ." starts at character 9: its tokens' log-probs, under the tags of the whole text
    assert tail == pytest.approx(
        sum(lp for (s, _), lp in zip(scores.offsets, scores.logprobs, strict=True) if s >= 9)
    )
    assert whole < longer < tail < 0

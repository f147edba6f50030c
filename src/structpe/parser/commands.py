"""``structpe parser train`` / ``structpe parser eval``: train and score the hexatagger.

Thin wrappers over ``structpe.parser.train``: ``train`` runs a YAML recipe (a path or a
built-in name such as ``tiny`` / ``small``); ``eval`` parses the words of a CoNLL-U file with a
parser (the trained hexatagger by default, or spaCy for comparison) and scores the trees against
the gold ones: UAS (and LAS for UD-labelled parsers), tag accuracy, sentences per second.
Punctuation: ``uas``/``las`` count every word (CoNLL 2018 UD convention); ``*_no_punct`` leave out
words whose gold relation is ``punct``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from structpe.errors import StructpeError, check_choice, check_device, check_positive
from structpe.hardware import THREADS_HELP, set_cpu_threads
from structpe.io import open_output, output_folder, refuse_overwrite_input
from structpe.parser.base import QUANTIZE_HELP, QUANTIZE_MODES


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "parser",
        help="train and evaluate the hexatagger (a fast neural parser)",
        description="Train the hexatagger from a recipe, or score a parser on UD gold trees.",
    )
    sub = p.add_subparsers(dest="parser_command", metavar="ACTION", required=True)

    t = sub.add_parser(
        "train",
        help="train a hexatagger from a YAML recipe",
        description=(
            "Train a hexatagger (Transformer or BiLSTM encoder + hexatag heads) on UD English train splits, "
            "projectivised by arc lifting; the best EWT-dev checkpoint is saved as a "
            "save_pretrained folder (config.json, model.safetensors, tokenizer)."
        ),
    )
    t.add_argument(
        "--config",
        required=True,
        help="recipe YAML, or a built-in name: tiny, fast, bilstm (CPU), small (GPU)",
    )
    t.add_argument("--output", default=None, help="output folder (default: the recipe's output_dir)")
    t.add_argument("--data", default=None, help="data root holding ud/ and corpus/ (default: $STRUCTPE_DATA)")
    t.add_argument("--device", default=None, help="torch device (default: the recipe's, cpu)")
    t.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: the recipe's)")
    t.add_argument("--max-minutes", type=float, default=None, help="override the recipe's time budget")
    t.add_argument(
        "--max-wall-minutes", type=float, default=None, help="extra wall-clock cap (busy machines, deadlines)"
    )
    t.add_argument("--max-steps", type=int, default=None, help="override the recipe's step budget")
    t.add_argument("--no-progress", action="store_true", help="no progress bar")
    t.set_defaults(func=run_train)

    e = sub.add_parser(
        "eval",
        help="score a parser against UD gold trees (UAS, LAS, tag accuracy, speed)",
        description=(
            "Parse the gold words of a CoNLL-U file and score the trees. UAS/LAS count every word "
            "including punctuation (CoNLL 2018 UD); *_no_punct exclude gold 'punct' words. LAS uses "
            "universal relations (subtypes dropped) and is reported for the hexatagger only (spaCy's "
            "labels are not UD). Tag accuracy is against the hexatags of the projectivised gold tree."
        ),
    )
    e.add_argument("--model", default=None, help="hexatagger model folder (default: the packaged model)")
    e.add_argument(
        "--data",
        required=True,
        help="CoNLL-U file (.conllu / .conllu.gz) or treebank name with --split, e.g. ewt",
    )
    e.add_argument("--split", default="test", help="split when --data is a treebank name (default: test)")
    e.add_argument("--parser", default="hexatagger", choices=("hexatagger", "spacy"), help="parser to score")
    e.add_argument("--batch-tokens", type=int, default=8192, help="hexatagger batch size in subwords")
    e.add_argument(
        "--quantize", choices=QUANTIZE_MODES, default="none", help=QUANTIZE_HELP,
    )
    e.add_argument("--threads", type=int, default=None, help=THREADS_HELP)
    e.add_argument("--output", default=None, help="also write the metrics JSON here")
    e.set_defaults(func=run_eval)

    x = sub.add_parser(
        "export",
        help="make a trained hexatagger the shippable default (float16, model card, sha256)",
        description=(
            "Write a trained folder as the packaged default parser: float16 safetensors, config, "
            "tokenizer and a model card (card.json + README.md) with the training command, the metrics "
            "of the exported weights on each --eval treebank, and the sha256 of every file."
        ),
    )
    x.add_argument("--model", required=True, help="trained hexatagger folder (parser train --output)")
    x.add_argument("--output", required=True, help="output folder (src/structpe/resources/hexatagger ships)")
    x.add_argument("--command", required=True, help="the training command, recorded in the card")
    x.add_argument(
        "--eval", nargs="*", default=["ewt:test", "gum:test", "pud:test"], metavar="TREEBANK:SPLIT",
        help="treebanks to score the exported weights on (default: ewt:test gum:test pud:test)",
    )
    x.add_argument("--data", default=None, help="data root holding ud/ (default: $STRUCTPE_DATA)")
    x.set_defaults(func=run_export)


def run_train(args: argparse.Namespace) -> int:
    from structpe.parser.recipe import ParserTrainConfig
    from structpe.parser.train import train

    for opt in ("threads", "max_steps"):
        check_positive(f"--{opt.replace('_', '-')}", getattr(args, opt))
    for opt in ("max_minutes", "max_wall_minutes"):
        if getattr(args, opt) is not None and getattr(args, opt) <= 0:
            raise StructpeError(f"--{opt.replace('_', '-')} must be > 0, got {getattr(args, opt)}")
    if args.device:
        check_device(args.device)
    cfg = ParserTrainConfig.from_yaml(args.config)
    if args.data:
        cfg.data.root = args.data
    if args.device:
        cfg.device = args.device
    if args.threads:
        cfg.threads = args.threads
    if args.max_minutes is not None:
        cfg.optim.max_minutes = args.max_minutes
    if args.max_wall_minutes is not None:
        cfg.optim.max_wall_minutes = args.max_wall_minutes
    if args.max_steps is not None:
        cfg.optim.max_steps = args.max_steps
    if cfg.optim.max_steps < cfg.optim.warmup_steps:
        raise StructpeError(
            f"--max-steps {cfg.optim.max_steps} is below the config's warmup_steps {cfg.optim.warmup_steps}: "
            "the lr would never reach its set value; use a config with a shorter warm-up"
        )
    if args.output is not None:
        output_folder(args.output, "--output")  # a folder: "-" or an existing file is refused
    summary = train(cfg, args.output, progress=not args.no_progress)
    print(json.dumps({k: v for k, v in summary.items() if k != "config"}, indent=2))
    return 0


def run_export(args: argparse.Namespace) -> int:
    from structpe.parser.export import export_model

    evaluations = {}
    for item in args.eval:
        name, _, split = item.partition(":")
        check_choice(f"--eval {item}: split", split or "test", ("train", "dev", "test"))
        evaluations[name] = split or "test"
    output_folder(args.output, "--output")
    card = export_model(args.model, args.output, args.command, evaluations, args.data)
    print(json.dumps({k: card[k] for k in ("parameters", "metrics", "sha256")}, indent=2))
    return 0


def run_eval(args: argparse.Namespace) -> int:
    from structpe.parser.data import load_sentences, treebank_file
    from structpe.parser.default import default_model_dir
    from structpe.parser.registry import parser_identity
    from structpe.provenance import provenance

    check_positive("--threads", args.threads)
    check_positive("--batch-tokens", args.batch_tokens)
    check_choice("--split", args.split, ("train", "dev", "test"))
    started = time.time()
    set_cpu_threads(args.threads)
    data = Path(args.data)
    path = data if data.is_file() else treebank_file(None, args.data, args.split)
    if args.output:
        refuse_overwrite_input(args.output, [path], "--output")
    gold = load_sentences(path)
    kwargs: dict = {}
    if args.parser == "hexatagger":
        kwargs = {"batch_tokens": args.batch_tokens, "quantize": args.quantize}
    from structpe.parser.evaluate import evaluate_parser

    res = evaluate_parser(args.parser, gold, args.model, **kwargs)
    res["data"] = str(path)
    res["provenance"] = provenance(
        started=started,
        model=(args.model or default_model_dir()) if args.parser == "hexatagger" else None,
        data=[path],
        parser={
            "name": args.parser, "model": args.model, "identity": parser_identity(args.parser, args.model)
        },
        quantize=args.quantize if args.parser == "hexatagger" else None,
    )
    text = json.dumps(res, indent=2)
    print(text)
    if args.output:
        with open_output(args.output) as fh:
            fh.write(text + "\n")
    print(
        f"{args.parser}: UAS {res['uas']:.2f} (no punct {res['uas_no_punct']:.2f})"
        + (f", LAS {res['las']:.2f}" if "las" in res else "")
        + f", tag acc {res['tag_acc']:.2f}, {res['sentences_per_second']:.0f} sent/s",
        file=sys.stderr,
    )
    return 0

"""CLI: ``structpe eval glue`` and ``structpe finetune glue``.

Thin wrappers (see cli.py) over :func:`structpe.eval.glue.finetune.finetune_glue`: choose the parser for
GLUE tags (``--parser``, else the one that prepared the pre-training data), fine-tune, write JSON +
Markdown with :mod:`structpe.eval.report`. Registered by ``structpe.eval.commands.register``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from structpe.errors import StructpeError, closest
from structpe.eval.command_common import (
    check_args,
    common_options,
    eval_out_dir,
    eval_provenance,
    find_tokenizer_dir,
    make_parser,
    print_table,
)
from structpe.hardware import PRECISIONS


def cmd_glue(args: argparse.Namespace) -> int:

    from structpe.eval import report
    from structpe.eval.glue.finetune import finetune_glue, load_classifier
    from structpe.eval.glue.report import format_results
    from structpe.eval.glue.tasks import TASKS, resolve_tasks, task_spec
    from structpe.hardware import resolve_bf16

    started = time.time()
    check_args(args)
    for task in args.tasks:
        try:
            if task.lower() != "all":
                task_spec(task)
        except ValueError as err:
            raise StructpeError(f"--tasks: {err}{closest(task.lower(), TASKS)}") from None
    model_path = Path(args.model)
    try:
        tasks = resolve_tasks(args.tasks)
    except ValueError as err:
        raise StructpeError(f"--tasks: {err}") from None
    probe = load_classifier(model_path, 2)  # which tags (and parser) the classifier reads
    from structpe.train.tokenizer import auto_tokenizer

    tok = auto_tokenizer(find_tokenizer_dir(model_path, args.tokenizer))
    parser, parser_note = _glue_parser(args, probe, model_path)
    del probe

    def model_fn(num_labels: int) -> Any:
        return load_classifier(model_path, num_labels).to(args.device)

    bf16 = resolve_bf16(PRECISIONS[args.precision])

    res = finetune_glue(
        model_fn,
        tok,
        tasks,
        parser,
        args.data_dir,
        seeds=args.seeds,
        epochs=args.epochs,
        lr=args.lr,
        batch_size=args.batch_size,
        max_length=args.max_length,
        max_train=args.max_train,
        max_eval=args.max_eval,
        weight_decay=args.weight_decay,
        bf16=bf16,
    )
    res["model"] = args.model
    res["parser"] = parser_note
    rows, cols = format_results(res)
    out = eval_out_dir(args, "glue")
    # one scale (points, as the tables) for the title, the axis and the error bars (sd over seeds)
    epochs = {"best epoch": "best", "last epoch": "last"}
    plots = [
        report.bar_plot(
            out / "glue_tasks.png",
            list(res["tasks"]),
            {
                k: [100 * r["summary"][w]["mean"]["main"] for r in res["tasks"].values()]
                for k, w in epochs.items()
            },
            errors={
                k: [100 * r["summary"][w]["sd"]["main"] for r in res["tasks"].values()]
                for k, w in epochs.items()
            }
            if len(args.seeds) > 1
            else None,
            title=f"GLUE dev (macro {100 * res['macro']:.2f} points, best epoch"
            + ("; error bars: sd over seeds)" if len(args.seeds) > 1 else ")"),
            ylabel="task metric (points)",
        )
    ]
    notes = [
        f"model: `{args.model}`; seeds {list(args.seeds)}, {args.epochs} epochs, lr {args.lr}, "
        f"weight decay {args.weight_decay}, {'bf16 autocast' if bf16 else 'float32'}",
        "one number per task, as the paper's tables (it does not name them; BERT's convention): MCC "
        "(CoLA), F1 (MRPC), Spearman (STS-B), accuracy (SST-2, RTE); dev split, in points; "
        "mean ± sample sd over seeds",
        "best epoch: per seed the dev epoch with the best task metric (selected on the reported dev "
        "split); last epoch: after the last epoch; macro: mean over the tasks run",
        f"tags: {parser_note['name']} ({parser_note['why']})",
    ]
    if args.max_train or args.max_eval:
        notes.append(f"subsampled: max_train={args.max_train}, max_eval={args.max_eval}")
    print_table(
        report.write_report(
            out, "glue", res, rows, cols, title="GLUE fine-tuning", notes=notes, plots=plots,
            provenance=eval_provenance(args, started, parser, _task_folders(args.data_dir, tasks)),
        )
    )
    return 0


def _task_folders(data_dir: str | None, tasks: list[str]) -> list[Path]:
    """The GLUE folders the tasks read (recorded with their files' hashes in the provenance)."""
    from structpe.data.paths import data_root
    from structpe.eval.glue.tasks import task_spec

    folders = [task_spec(t).folder for t in tasks]
    if data_dir is not None and all((Path(data_dir) / f).is_dir() for f in folders):
        return [Path(data_dir) / f for f in folders]
    return [data_root(data_dir, sub=f"glue/{f}") for f in folders]


def _glue_parser(args: argparse.Namespace, model: Any, model_path: Path) -> tuple[Any, dict[str, str]]:
    """The parser for GLUE tags: ``--parser``, else the one that prepared the pre-training data."""
    from structpe.eval.glue.finetune import recorded_parser
    from structpe.eval.scoring.types import uses_tags

    if args.parser is not None or not uses_tags(model):
        parser = make_parser(args.parser, model, args.parser_model)
        why = "--parser" if args.parser is not None else "the model reads no tags"
        return parser, {"name": args.parser or "none", "why": why}
    rec = recorded_parser(model_path)
    if rec is None or rec["parser"] in (None, "gold"):
        why = ("pre-training used gold trees, which GLUE text does not have" if rec else
               "no pre-training record (summary.json -> structpe_prepare.json) next to the model")
        print(f"structpe finetune glue: tagging with spaCy: {why}; pass --parser to choose", file=sys.stderr)
        return make_parser("spacy", model, args.parser_model), {"name": "spacy", "why": why}
    from structpe.parser.registry import get_parser

    kwargs = dict(rec["parser_kwargs"])
    if args.parser_model:
        kwargs["model"] = args.parser_model
    note = {"name": rec["parser"], "why": f"as pre-training, {rec['source']}"}
    return get_parser(rec["parser"], **kwargs), note


def add_glue_args(p: argparse.ArgumentParser) -> None:
    """The options of GLUE fine-tuning (``structpe eval glue`` and ``structpe finetune glue`` alike)."""
    from structpe.eval.glue.tasks import FINETUNE_TASKS

    common_options(p)
    p.add_argument(
        "--tasks", "--task", nargs="+", default=["all"], dest="tasks",
        help=f"GLUE tasks ({', '.join(FINETUNE_TASKS)}) or all (default), run in one go with one table",
    )
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2],
                   help="fine-tuning seeds; scores are mean ± sd over them")
    p.add_argument("--epochs", type=int, default=3,
                   help="epochs per run (the paper: 20); the best and the last epoch are reported")
    p.add_argument("--lr", type=float, default=2e-5)
    p.add_argument("--weight-decay", type=float, default=0.01, help="AdamW weight decay (the paper: 0.1)")
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--max-train", type=int, help="use only the first N training examples per task")
    p.add_argument("--max-eval", type=int, help="use only the first N dev examples per task")
    p.add_argument("--precision", choices=tuple(PRECISIONS), default="fp32",
                   help="bf16 autocast of fine-tuning; auto: only where bf16 is native (CPUs with "
                   "AVX-512 BF16 / AMX: ~1.7x faster than fp32)")
    p.set_defaults(func=cmd_glue)

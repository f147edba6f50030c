"""What a study cell's evaluations cost at a profile's sizes, before any such cell is trained (JSON).

A cell's cost is training plus every evaluation of the profile, and the tagged recipes' honest
likelihoods (the k-best marginal) cost a multiple of a plain pass. This builds the cell's model as
the study would (the recipe, the profile's overrides, optionally a sweep size ``LAYERSxWIDTH``) on
the study's own prepared data, trains it 2 steps (the cost of scoring does not depend on the
weights), then times each evaluation of the profile in CPU seconds of this process on a sample:
``--ppl-sentences`` test sentences, ``--blimp-pairs`` pairs of every BLiMP paradigm, and
``--sg-items`` items of every SyntaxGym suite, and scales each to the profile's full counts
(linear in sentences / pairs / items). Run it with the study folder of the profile (its
``data/``, prepared by the study or the size sweep), one thread, as the cells run:

  OMP_NUM_THREADS=1 python benchmarks/eval_cost.py --profile cpu-small --recipe position \\
      --size 6x384 --study-dir runs/study-sipe-txl-cpu-small --out runs/eval-cost \\
      > benchmarks/results/eval_cost-cpu-small-position-6x384.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from structpe.errors import StructpeError
from structpe.study.spec_checks import StudySpecError


def timed(fn) -> tuple[Any, float]:
    t0 = time.process_time()
    out = fn()
    return out, time.process_time() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spec", default="sipe-txl")
    ap.add_argument("--profile", default="cpu-small")
    ap.add_argument("--recipe", default="position", help="a recipe label of the spec")
    ap.add_argument("--size", default=None, help="LAYERSxWIDTH (a size-sweep size); default: the profile's")
    ap.add_argument("--study-dir", required=True, help="the profile's study (or sweep) folder with data/")
    ap.add_argument("--out", required=True, help="folder for the 2-step model")
    ap.add_argument("--ppl-sentences", type=int, default=20)
    ap.add_argument("--blimp-pairs", type=int, default=3, help="pairs per paradigm (all 67 paradigms)")
    ap.add_argument("--sg-items", type=int, default=2, help="items per suite (every suite of the spec)")
    ap.add_argument("--data-dir", default=None, help="shared data root (default: $STRUCTPE_DATA)")
    args = ap.parse_args()
    try:
        with contextlib.redirect_stdout(sys.stderr):  # training and evaluation logs; the JSON alone on stdout
            result = measure(args)
        print(json.dumps(result, indent=1))
    except (StudySpecError, StructpeError, FileNotFoundError, ValueError) as err:
        print(f"eval_cost: error: {err}", file=sys.stderr)
        return 2
    return 0


def measure(args: argparse.Namespace) -> dict[str, Any]:
    from filelock import FileLock

    from structpe.data.paths import data_root
    from structpe.eval.blimp import evaluate_blimp
    from structpe.eval.ppl import evaluate_ppl
    from structpe.eval.scoring.types import uses_tags
    from structpe.eval.syntaxgym.evaluate import evaluate_syntaxgym, suite_names
    from structpe.eval.syntaxgym.suites import load_suites
    from structpe.models import load
    from structpe.parser.cached import CachedParser
    from structpe.parser.registry import get_parser
    from structpe.parser.tag_controls import tag_parser
    from structpe.provenance import hardware
    from structpe.study.data import prepare_study_data
    from structpe.study.spec import load_spec
    from structpe.study.sweep import size_overrides
    from structpe.train.checkpoints import final_model_dir
    from structpe.train.pretrain import pretrain
    from structpe.train.tokenizer import load_tokenizer

    spec = load_spec(args.spec, args.profile)
    recipe = spec.recipe(args.recipe)  # an unknown label is one clear error
    study = Path(args.study_dir)
    parser = CachedParser(get_parser(spec.dataset.parser))
    with FileLock(study / "data.lock"):
        tag_sources = () if recipe.tags == "parse" else (recipe.tags,)
        data = prepare_study_data(
            spec.dataset,
            study / "data",
            args.data_dir,
            parser=parser,
            progress=False,
            tag_sources=tag_sources,
        )
    training = data.training(recipe.tags)
    run = Path(args.out) / f"{args.recipe}-{args.size or args.profile}"
    overrides = [
        *spec.cell_overrides(args.recipe),
        *(size_overrides(args.size) if args.size else []),
        f"train.dataset={training.dataset_dir}",
        f"train.output_dir={run}",
        "train.max_steps=2",
        "train.warmup=0",
        "train.eval_every=2",
        "train.eval_batches=1",
        "train.progress=false",
    ]
    pretrain(spec.recipe_name(args.recipe), overrides, resume=True)
    model = load(final_model_dir(run)).eval()
    tokenizer = load_tokenizer(data.tokenizer_dir)
    modes_of = (lambda ls: list(ls)) if uses_tags(model) else (lambda ls: ["conditional"])
    cell_parser = tag_parser(recipe.tags, parser, training.pool_file)
    tests = data.test_sentences if recipe.tags == "parse" else cell_parser.retag(data.test_sentences)
    root = data_root(args.data_dir)
    ev = spec.evaluations
    rows: dict[str, dict[str, float]] = {}

    def row(name: str, cpu_s: float, sampled: int, full: int, unit: str) -> None:
        rows[name] = {
            "sampled": sampled,
            "unit": unit,
            "cpu_s": round(cpu_s, 2),
            "cpu_s_per_unit": round(cpu_s / sampled, 4),
            "full": full,
            "projected_cpu_s": round(cpu_s / sampled * full, 1),
        }

    if ev.ppl is not None:
        full = min(ev.ppl.sentences or spec.dataset.test_sentences, len(tests))
        sample = tests[: args.ppl_sentences]
        for mode in modes_of(ev.ppl.likelihoods):
            _, cpu = timed(
                lambda m=mode: evaluate_ppl(
                    model, tokenizer, sample, likelihood=m, k=ev.ppl.k, progress=False
                )
            )
            row(f"ppl-{mode}", cpu, len(sample), full, "sentences")
    if ev.blimp is not None:
        paradigms = None if ev.blimp.paradigms == "all" else list(ev.blimp.paradigms)
        for mode in modes_of(ev.blimp.likelihoods):
            _, cpu = timed(
                lambda m=mode: evaluate_blimp(
                    model,
                    tokenizer,
                    cell_parser,
                    root / "blimp",
                    paradigms,
                    limit=args.blimp_pairs,
                    likelihood=m,
                    k=ev.blimp.k,
                    progress=False,
                )
            )
            n_par = len(paradigms) if paradigms else 67
            full = n_par * (ev.blimp.limit_for(mode) or 1000)
            row(f"blimp-{mode}", cpu, n_par * args.blimp_pairs, full, "pairs")
    if ev.syntaxgym is not None:
        suites = suite_names(ev.syntaxgym.suites, root / "syntaxgym")
        loaded = load_suites(root / "syntaxgym", suites)
        items = sum(len(s.items) for s in loaded)
        sampled = sum(min(args.sg_items, len(s.items)) for s in loaded)
        for mode in modes_of(ev.syntaxgym.likelihoods):
            _, cpu = timed(
                lambda m=mode: evaluate_syntaxgym(
                    model,
                    tokenizer,
                    cell_parser,
                    root / "syntaxgym",
                    suites,
                    likelihood=m,
                    k=ev.syntaxgym.k,
                    max_items=args.sg_items,
                    progress=False,
                )
            )
            row(f"syntaxgym-{mode}", cpu, sampled, items, "items")
    total = sum(r["projected_cpu_s"] for r in rows.values())
    return {
        "spec": spec.source,
        "profile": spec.profile,
        "recipe": args.recipe,
        "size": args.size,
        "parameters": sum(p.numel() for p in model.parameters()),
        "evaluations": rows,
        "projected_evaluation_cpu_s": round(total, 1),
        "note": "CPU seconds of this process; the leakage audit and GLUE are not included",
        "machine": {
            **hardware(),
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
            "python": platform.python_version(),
            "load_average_end": [round(x, 2) for x in os.getloadavg()],
        },
    }


if __name__ == "__main__":
    sys.exit(main())

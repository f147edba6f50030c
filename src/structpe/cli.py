"""The ``structpe`` command line: one entry point, one sub-command module per area.

Each area module exposes ``register(subparsers)`` and keeps its command functions thin: they parse
arguments and call library functions, so everything the CLI does is also importable.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# Area modules that contribute sub-commands, in the order they appear in ``structpe --help``.
COMMAND_MODULES = [
    "structpe.syntax.commands",
    "structpe.syntax.parser_commands",
    "structpe.train.commands",
    "structpe.lis.commands",
    "structpe.eval.commands",
    "structpe.quickstart",
    "structpe.study.commands",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="structpe",
        description="Structure-informed positional encodings: SiPE (hexatag priors) and LIS.",
    )
    from structpe import __version__

    parser.add_argument("--version", action="version", version=f"structpe {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        rc = args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return int(rc or 0)


if __name__ == "__main__":
    raise SystemExit(main())

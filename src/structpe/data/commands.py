"""``structpe data fetch | list | verify``: the registry's data sets on this machine.

  structpe data fetch            # everything missing, into the cache (no-op where the data is present)
  structpe data fetch ud blimp   # a group or single data sets; --data DIR fetches into DIR
  structpe data list             # what is where, pinned or trusted on first use, licenses
  structpe data verify           # re-hash what is on disk; exit 2 on any mismatch
"""

from __future__ import annotations

import argparse
import sys

from structpe.data.fetch import DataFetchError, fetch, locate, read_records, verify
from structpe.data.paths import lookup_roots
from structpe.data.registry import select


def _error(cmd: str, err: Exception) -> int:
    print(f"structpe data {cmd}: error: {err}", file=sys.stderr)
    return 2


def cmd_fetch(args: argparse.Namespace) -> int:
    try:
        results = fetch(args.names, args.data, retries=args.retries, log=lambda m: print(m, flush=True))
    except (DataFetchError, ValueError, OSError) as err:
        return _error("fetch", err)
    n = sum(r.fetched for r in results)
    print(f"{n} data set(s) fetched, {len(results) - n} already complete")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    try:
        datasets = select(args.names)
        roots = lookup_roots(args.data)
        rows = []
        for ds in datasets:
            root = locate(ds, roots)
            unhashed = [o for o in ds.outputs if o.sha256 is None]
            records = read_records(root) if root is not None else {}
            recorded = root is not None and all(f"{ds.folder}/{o.target}" in records for o in unhashed)
            if not unhashed:
                pin = "pinned"
            elif recorded:
                pin = "pinned + recorded on first fetch" if ds.pinned else "recorded on first fetch"
            elif ds.pinned:
                pin = f"pinned by git blob id ({len(unhashed)} file(s) without sha256)"
            else:
                pin = f"UNVERIFIED ({len(unhashed)} file(s) without sha256)"
            rows.append((ds.name, str(root / ds.folder) if root else "missing", pin, ds.license))
    except (DataFetchError, ValueError) as err:
        return _error("list", err)
    widths = [max(len(r[i]) for r in rows + [("name", "where", "sha256", "license")]) for i in range(3)]
    for r in [("name", "where", "sha256", "license"), *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r[:3], widths, strict=True)) + "  " + r[3])
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    try:
        checks = verify(args.names, args.data)
    except (DataFetchError, ValueError) as err:
        return _error("verify", err)
    bad = 0
    for c in checks:
        if c.root is None:
            print(f"{c.dataset.name}: missing (run `structpe data fetch {c.dataset.name}`)")
            bad += bool(args.names)
            continue
        for f in c.files:
            if f.problem == "sha256 mismatch":
                print(f"{f.path}: sha256 mismatch: expected {f.expected}, got {f.actual}")
            elif f.problem:
                print(f"{f.path}: {f.problem}")
        if c.ok:
            note = f", {len(c.unverified)} file(s) unverified (no sha256)" if c.unverified else ""
            print(f"{c.dataset.name}: ok ({len(c.files)} files in {c.root / c.dataset.folder}{note})")
        else:
            bad += 1
    return 2 if bad else 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="fetch, list and verify the data sets structpe reads")
    dsub = p.add_subparsers(dest="data_command", metavar="ACTION", required=True)
    names_help = "data sets (default: all); `ud` and `glue` name their groups; see `structpe data list`"
    f = dsub.add_parser("fetch", help="download missing data sets from their pinned upstream sources")
    f.add_argument("names", nargs="*", metavar="NAME", help=names_help)
    f.add_argument("--data", default=None,
                   help="fetch into this folder (default: the cache, $STRUCTPE_CACHE; nothing is fetched "
                        "for data sets already complete in $STRUCTPE_DATA or shared/data)")
    f.add_argument("--retries", type=int, default=3, help="extra attempts per download (default 3)")
    f.set_defaults(func=cmd_fetch)
    for name, func, what in (("list", cmd_list, "what is present where, pinned or not, licenses"),
                             ("verify", cmd_verify, "re-hash the files on disk (exit 2 on a mismatch)")):
        q = dsub.add_parser(name, help=what)
        q.add_argument("names", nargs="*", metavar="NAME", help=names_help)
        q.add_argument("--data", default=None, help="data root to look in first (default: $STRUCTPE_DATA)")
        q.set_defaults(func=func)

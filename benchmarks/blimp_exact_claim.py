"""A BLiMP claim on the exact p(x): seed-paired accuracy difference on the short pairs (JSON on stdout).

Each folder is one ``structpe eval blimp --exact-max-words W --keep-pairs --out DIR`` result of one
cell; ``--baseline`` and ``--recipe`` list the cells of each side in seed order (a pair of folders
per seed, trained on the same machine). The pairs must be the same in every folder (the exact mode
selects them by the parser's word counts, not by the model). Prints each seed's accuracies and
difference, the mean difference with its 95% t interval over seeds, the paired t-test's two-sided p
and one-sided p in the direction ``--better`` expects of the recipe, and the share of pairs where
the two sides decide differently. No estimator is involved, so there is no Monte Carlo error.

  python benchmarks/blimp_exact_claim.py --baseline runs/exact/none-{1..5} \
      --recipe runs/exact/position-{1..5} --better lower
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from scipy import stats


def load(folder: str) -> dict:
    res = json.loads((Path(folder) / "blimp.json").read_text())
    if res.get("likelihood") != "exact" or "pairs" not in res:
        sys.exit(f"{folder}/blimp.json: not an exact BLiMP result with --keep-pairs")
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", nargs="+", required=True)
    ap.add_argument("--recipe", nargs="+", required=True)
    ap.add_argument("--better", choices=("higher", "lower"), required=True, help="the paper's direction")
    args = ap.parse_args()
    if len(args.baseline) != len(args.recipe) or len(args.recipe) < 2:
        sys.exit("--baseline and --recipe need the same number of cells, at least two (one per seed)")
    base, rec = [load(f) for f in args.baseline], [load(f) for f in args.recipe]
    ids = [(p["paradigm"], p["pair_id"]) for p in base[0]["pairs"]]
    for f, r in zip([*args.baseline, *args.recipe], [*base, *rec], strict=True):
        if [(p["paradigm"], p["pair_id"]) for p in r["pairs"]] != ids:
            sys.exit(f"{f}: not the pairs of {args.baseline[0]} (same data, --limit, --exact-max-words?)")
    seeds = []
    for b, r in zip(base, rec, strict=True):
        differ = sum(x["correct"] != y["correct"] for x, y in zip(b["pairs"], r["pairs"], strict=True))
        seeds.append(
            {"baseline": b["overall"], "recipe": r["overall"], "diff": r["overall"] - b["overall"],
             "decisions_differ": differ / len(ids)}
        )
    d = [s["diff"] for s in seeds]
    m, se = statistics.mean(d), statistics.stdev(d) / len(d) ** 0.5
    half = stats.t.ppf(0.975, len(d) - 1) * se
    test = stats.ttest_rel([s["recipe"] for s in seeds], [s["baseline"] for s in seeds])
    p_dir = test.pvalue / 2 if (test.statistic < 0) == (args.better == "lower") else 1 - test.pvalue / 2
    json.dump(
        {
            "benchmark": "blimp_exact_claim",
            "max_words": base[0]["max_words"],
            "pairs": len(ids),
            "pairs_considered": base[0]["n_pairs_considered"],
            "paradigms": len({p for p, _ in ids}),
            "seeds": seeds,
            "mean_diff": m,
            "ci95": [m - half, m + half],
            "seeds_in_direction": sum((x < 0) == (args.better == "lower") and x != 0 for x in d),
            "p_two_sided": test.pvalue,
            "p_one_sided_in_direction": p_dir,
            "better": args.better,
            "baseline_cells": args.baseline,
            "recipe_cells": args.recipe,
        },
        sys.stdout,
        indent=1,
    )
    print()


if __name__ == "__main__":
    main()

"""The per-decision budget rule of ``smc`` tried offline on measured margins (JSON on stdout).

``benchmarks/smc_decisions.py --pairs-out PAIRS`` keeps, for the same BLiMP pairs at several N (each
N its own seed: independent runs), every pair's 4N margin, its jackknife standard error and the N
check's margin. Here each (starting N, z) rule of ``structpe.eval.scoring.smc_budget`` is replayed
on them: a pair starts at N and moves to the next measured N while its margin is within z standard
errors of a tie; it flips where its final margin and check differ in sign. The cost of a pair at a
budget is that run's CPU seconds per pair (``--bench``: the JSON smc_decisions.py printed), summed
over the budgets it went through.

  python benchmarks/smc_budget_rule.py --pairs pairs.json --bench bench.json
"""

from __future__ import annotations

import argparse
import json
import sys


def replay(margins: dict[int, list[dict]], start: int, z: float, cost: dict[int, float]) -> dict:
    """Flip share, mean CPU seconds per pair and the final budgets of one rule."""
    budgets = sorted(n for n in margins if n >= start)
    n_pairs = len(margins[start])
    flips, cpu, final = 0, 0.0, {n: 0 for n in budgets}
    for i in range(n_pairs):
        for n in budgets:
            m = margins[n][i]
            cpu += cost[n]
            if abs(m["margin"]) >= z * m["se"] or n == budgets[-1]:
                break
        flips += (m["margin"] > 0) != (m["check"] > 0)
        final[n] += 1
    return {
        "start": start,
        "z": z,
        "particles_max": budgets[-1],
        "flip_share": flips / n_pairs,
        "cpu_s_per_pair": cpu / n_pairs,
        "final_budgets": {str(n): c for n, c in final.items()},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", required=True, help="smc_decisions.py --pairs-out file")
    ap.add_argument("--bench", required=True, help="smc_decisions.py's JSON for the same run (CPU s per N)")
    ap.add_argument("--z", type=float, nargs="+", default=[2.0, 3.0, 4.0, 6.0])
    args = ap.parse_args()
    with open(args.pairs) as f:
        kept = json.load(f)
    with open(args.bench) as f:
        bench = json.load(f)
    margins = {int(n): m for n, m in kept["margins"].items()}
    cost = {int(r["particles"]): r["cpu_s"] / r["pairs"] for r in bench["runs"]}
    fixed = [replay({n: margins[n]}, n, 0.0, cost) for n in sorted(margins)]
    rules = [replay(margins, s, z, cost) for s in sorted(margins)[:-1] for z in args.z]
    json.dump(
        {
            "benchmark": "smc_budget_rule",
            "pairs": len(kept["pairs"]),
            "model": bench["model"],
            "hardware": bench["hardware"],
            "fixed": fixed,
            "rules": rules,
        },
        sys.stdout,
        indent=1,
    )
    print()


if __name__ == "__main__":
    main()

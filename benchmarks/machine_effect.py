"""The same study cells trained on two machines, paired by seed (JSON on stdout).

A study's cells are deterministic given their seed on one machine, but not across machines: the
CPU's SIMD kernels and the training precision (bf16 autocast where native, fp32 elsewhere) change
every update. When a study's recipes ran on different machines, this measures how far the *same*
recipe moves between them, which is the scale against which a cross-machine paired difference must
be read:

  python benchmarks/machine_effect.py docs/studies/sipe-txl-cpu-mini/cells \\
      docs/studies/sipe-txl-cpu-mini/machines/amd-epyc-avx2-fp32/cells --recipe none \\
      > benchmarks/results/machine_effect-cpu-mini-none.json

Each folder holds ``<recipe>/seed-<s>/metrics.json``; per metric: the per-seed differences
(second folder - first), their mean, the paired t 95% interval and the two-sided paired t p.

``--second-recipe`` pairs another recipe of the second folder with the first's, which gives the
other half of the picture: a control against the baseline rerun on the control's own machine,
free of the machine's effect (exploratory: outside the study's Holm family)::

  python benchmarks/machine_effect.py \
      docs/studies/sipe-txl-cpu-mini/machines/amd-epyc-avx2-fp32/cells \
      docs/studies/sipe-txl-cpu-mini/cells --recipe none --second-recipe none_tagloss
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from structpe.io import read_json
from structpe.study.aggregate import paired_test
from structpe.study.cell_metrics import machine_of

METRICS = (
    "val_lm_loss",
    "ppl.conditional.word_ppl",
    "blimp.conditional.overall",
    "syntaxgym.conditional.sg_score",
    "syntaxgym.marginal.sg_score",
)


def cells(folder: Path, recipe: str) -> dict[int, dict]:
    found = {}
    for f in sorted((folder / recipe).glob("seed-*/metrics.json")):
        m = read_json(f)
        found[int(m["seed"])] = m
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("first", type=Path, help="cells folder of the first machine")
    ap.add_argument("second", type=Path, help="cells folder of the second machine")
    ap.add_argument("--recipe", default="none", help="recipe label (default: none)")
    ap.add_argument("--second-recipe", help="recipe label in the second folder (default: --recipe)")
    args = ap.parse_args()
    second_recipe = args.second_recipe or args.recipe
    a, b = cells(args.first, args.recipe), cells(args.second, second_recipe)
    seeds = sorted(set(a) & set(b))
    if not seeds:
        msg = (
            f"machine_effect: no seed is in both {args.first / args.recipe} and {args.second / second_recipe}"
        )
        print(msg, file=sys.stderr)
        return 2
    rows = {}
    for metric in METRICS:
        pairs = [(a[s]["scores"].get(metric), b[s]["scores"].get(metric)) for s in seeds]
        if any(x is None or y is None for x, y in pairs):
            continue
        t = paired_test([y - x for x, y in pairs])
        two_sided = min(1.0, 2 * min(t["p"], t["p_against"])) if t["n"] > 1 else None
        rows[metric] = {
            "first": [x for x, _ in pairs],
            "second": [y for _, y in pairs],
            "diffs": [y - x for x, y in pairs],
            "mean_diff": t["mean"],
            "ci95": t["ci95"],
            "p_two_sided": two_sided,
        }
    out = {
        "recipe": args.recipe,
        "second_recipe": second_recipe,
        "seeds": seeds,
        "first": {"cells": str(args.first), "machines": sorted({machine_of(a[s]) or "?" for s in seeds})},
        "second": {"cells": str(args.second), "machines": sorted({machine_of(b[s]) or "?" for s in seeds})},
        "metrics": rows,
    }
    json.dump(out, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

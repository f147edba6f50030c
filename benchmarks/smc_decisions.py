"""Where the particle estimator's BLiMP decisions flip, on a trained model (JSON on stdout).

Per pair it takes the margin log p^(good) - log p^(bad) of the reported 4N score (systems 1-4
pooled), that margin's Monte Carlo standard error (the jackknife over the four replicates, as
``smc_views.convergence`` does for a whole score) and the margin of the independent N check
(system 0): the pair's decision flips where the two margins differ in sign
(docs/likelihoods.md, "Budgets N and 4N"). The study's rule wants at most 2% of decisions to
flip. If the flips sit in the pairs whose 4N margin lies within a few standard errors of zero,
more particles for those pairs alone would settle them (a budget that adapts per decision); if
they spread over pairs with clear margins, only a larger N everywhere would.

  OMP_NUM_THREADS=1 python benchmarks/smc_decisions.py --model <cell>/run/final --particles 8 \
      --paradigms anaphor_gender_agreement determiner_noun_agreement_1 \
      regular_plural_subject_verb_agreement_1 --limit 100 [--pairs-out pairs.json]

``--pairs-out`` keeps every pair's margins at every N (each N draws from its own seed, so the
budgets are independent runs): the data a per-decision budget rule can be tried on offline.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from structpe.choices import DEFAULT_PROPOSAL, PROPOSALS
from structpe.eval.blimp import load_blimp, pair_margin
from structpe.eval.command_common import load_model_and_tokenizer, make_parser
from structpe.eval.scoring import smc
from structpe.eval.scoring.scorer import make_scorer
from structpe.eval.scoring.smc_budget import margin_and_se
from structpe.eval.scoring.smc_views import views
from structpe.provenance import hardware


def pair_margins(scores: list, n: int) -> list[dict[str, float]]:
    """Per pair (``scores`` = n good sentences then n bad ones): the 4N margin, its jackknife
    standard error and the N check's margin."""
    out = []
    for i in range(n):
        pair = [scores[i], scores[n + i]]
        margin, se = margin_and_se(pair, pair_margin)
        out.append({"margin": margin, "se": se, "check": pair_margin(pair, views()["check"])})
    return out


def summarize(pairs: list[dict[str, float]], zs: tuple[float, ...] = (1.0, 2.0, 3.0)) -> dict:
    """The flip share, and for each z how many pairs are within z standard errors of a tie and
    how many of the flips they hold."""
    flips = [(p["margin"] > 0) != (p["check"] > 0) for p in pairs]
    n_flips = sum(flips)
    out = {"pairs": len(pairs), "flips": n_flips, "flip_share": n_flips / len(pairs), "by_z": {}}
    for z in zs:
        near = [abs(p["margin"]) < z * p["se"] for p in pairs]
        flips_near = sum(f and c for f, c in zip(flips, near, strict=True))
        out["by_z"][str(z)] = {
            "share_of_pairs_near_tie": sum(near) / len(pairs),
            "share_of_flips_near_tie": flips_near / n_flips if n_flips else None,
            "flip_share_among_the_rest": (n_flips - flips_near) / max(1, len(pairs) - sum(near)),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="a saved tag-reading decoder (run/final)")
    ap.add_argument("--particles", type=int, nargs="+", default=[8])
    ap.add_argument("--paradigms", nargs="+", default=None)
    ap.add_argument("--limit", type=int, default=100, help="first pairs of each paradigm")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--pairs-out", default=None, help="write every pair's margins per N (JSON)")
    ap.add_argument("--proposal", choices=PROPOSALS, default=DEFAULT_PROPOSAL)
    ap.add_argument(
        "--parse-mix", type=float, default=smc.PARSE_MIX, help="parse proposal: the prior's share"
    )
    args = ap.parse_args()
    smc.PARSE_MIX = args.parse_mix  # the library's default, replaced for this measurement

    model, tok = load_model_and_tokenizer(args.model)
    parser = make_parser(None, model)
    pairs = load_blimp(args.data_dir, args.paradigms, args.limit)
    groups: dict[str, list] = {}
    for p in pairs:
        groups.setdefault(p.paradigm, []).append(p)
    runs, kept = [], {}
    for seed, n_particles in enumerate(args.particles):
        scorer = make_scorer(
            model, tok, parser, likelihood="smc", particles=n_particles, seed=seed, smc_parts="sentence",
            proposal=args.proposal,
        )
        start = time.process_time()
        margins = []
        for group in groups.values():
            texts = [" " + p.good for p in group] + [" " + p.bad for p in group]
            margins += pair_margins(scorer.score(texts), len(group))
        run = {
            "particles": n_particles,
            "seed": seed,
            "cpu_s": round(time.process_time() - start, 1),
            **summarize(margins),
        }
        run["median_abs_margin_over_se"] = sorted(abs(m["margin"]) / max(m["se"], 1e-12) for m in margins)[
            len(margins) // 2
        ]
        runs.append(run)
        kept[str(n_particles)] = margins
        print(f"N = {n_particles}: flip share {run['flip_share']:.3f}, {run['cpu_s']} CPU s", file=sys.stderr)
    if args.pairs_out:
        ids = [f"{p.paradigm}/{p.pair_id}" for group in groups.values() for p in group]
        with open(args.pairs_out, "w") as f:
            json.dump({"pairs": ids, "margins": kept}, f)
    json.dump(
        {
            "benchmark": "smc_decisions",
            "model": args.model,
            "paradigms": list(groups),
            "pairs_per_paradigm": args.limit,
            "proposal": args.proposal,
            **({"parse_mix": args.parse_mix} if args.proposal == "parse" else {}),
            "threads": os.environ.get("OMP_NUM_THREADS"),
            "hardware": hardware(),
            "load_average": os.getloadavg(),
            "runs": runs,
        },
        sys.stdout,
        indent=1,
    )
    print()


if __name__ == "__main__":
    main()

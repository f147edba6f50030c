"""The particle estimator against the exact p(x), on a trained model (JSON on stdout).

The flip share (N against 4N, docs/likelihoods.md) measures whether decisions are stable, not
whether they are right: a proposal that rarely leaves one region of the trees would be stable and
still miss mass elsewhere (a heavy-tailed weight is what importance sampling fails by). On short
sentences p(x) = sum_T p(x, T) can be summed exactly: every well-formed hexatag sequence of n words
(8 at n = 3, 224 at 5, 1,344 at 6, 8,448 at 7) is scored by the ``joint`` mode
(``structpe.eval.scoring.exact``). This benchmark takes the BLiMP pairs whose two sentences have at
most ``--max-words`` words (the parser's words, each on a token of its own), sums
their exact log p(x), and scores them again with ``smc`` for each proposal; per proposal it prints
the error of log p^ against the exact value (the pooled 4N score and the N check: mean, spread,
largest), the share of pair decisions that differ from the exact decision (``wrong_share``), the
N-vs-4N ``flip_share`` the study rule reads, and the CPU seconds of the smc scoring.

  OMP_NUM_THREADS=1 python benchmarks/smc_exact.py --model <cell>/run/final --particles 8 \
      --proposals prior parse:0.1 parse:0.3 --max-words 6 --limit 100
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time

from structpe.eval.blimp import load_blimp
from structpe.eval.command_common import load_model_and_tokenizer, make_parser
from structpe.eval.scoring import smc
from structpe.eval.scoring.exact import ExactScorer
from structpe.eval.scoring.likelihood import log_sum_exp
from structpe.eval.scoring.scorer import make_scorer
from structpe.eval.scoring.smc_views import SMC_REPLICATES
from structpe.provenance import hardware


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="a saved tag-reading decoder (run/final)")
    ap.add_argument("--particles", type=int, default=8)
    ap.add_argument(
        "--proposals", nargs="+", default=["prior", "parse"],
        help="prior | adapted | parse[:MIX] (MIX: the prior's share of the parse mixture)",
    )
    ap.add_argument("--max-words", type=int, default=6)
    ap.add_argument("--paradigms", nargs="+", default=None)
    ap.add_argument("--limit", type=int, default=100, help="first pairs of each paradigm")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    model, tok = load_model_and_tokenizer(args.model)
    parser = make_parser(None, model)
    pairs = load_blimp(args.data_dir, args.paradigms, args.limit)
    texts = [" " + s for p in pairs for s in (p.good, p.bad)]
    exact_scorer = ExactScorer(model, tok, parser, args.max_words)
    parses = exact_scorer.parse(texts)
    fits = [exact_scorer.fits(t, p) for t, p in zip(texts, parses, strict=True)]
    keep = [i for i in range(len(pairs)) if fits[2 * i] and fits[2 * i + 1]]
    if not keep:
        sys.exit(f"no pair has both sentences within --max-words {args.max_words}")
    kept_texts = [texts[2 * i + k] for i in keep for k in (0, 1)]
    kept_parses = [parses[2 * i + k] for i in keep for k in (0, 1)]
    start = time.process_time()
    exact = exact_scorer.totals(kept_texts, kept_parses)
    exact_cpu = time.process_time() - start
    print(f"exact p(x) of {len(exact)} sentences in {exact_cpu:.0f} CPU s", file=sys.stderr)
    runs = []
    for spec in args.proposals:
        name, _, mix = spec.partition(":")
        smc.PARSE_MIX = float(mix) if mix else smc.PARSE_MIX  # the library default unless given
        scorer = make_scorer(
            model, tok, parser, likelihood="smc", particles=args.particles, seed=args.seed,
            smc_parts="sentence", proposal=name,
        )
        start = time.process_time()
        scores = scorer.score(kept_texts, kept_parses)
        cpu = time.process_time() - start
        pooled, check = [], []
        for s in scores:
            closed = s.meta["closed"]
            pooled.append(log_sum_exp(closed[1:]) - math.log(SMC_REPLICATES))
            check.append(closed[0])
        err = [a - b for a, b in zip(pooled, exact, strict=True)]
        err_n = [a - b for a, b in zip(check, exact, strict=True)]
        wrong = flips = wrong_n = 0
        wrong_margins = []  # |exact margin| of the pairs the 4N score decides wrongly: near-ties?
        for j in range(len(keep)):
            truth = exact[2 * j] > exact[2 * j + 1]
            est = pooled[2 * j] > pooled[2 * j + 1]
            est_n = check[2 * j] > check[2 * j + 1]
            wrong += est != truth
            wrong_n += est_n != truth
            flips += est != est_n
            if est != truth:
                wrong_margins.append(round(abs(exact[2 * j] - exact[2 * j + 1]), 3))
        run = {
            "proposal": name,
            **({"parse_mix": smc.PARSE_MIX} if name == "parse" else {}),
            "particles": args.particles,
            "cpu_s": round(cpu, 1),
            "error_4n": {
                "mean": statistics.mean(err), "sd": statistics.pstdev(err),
                "max_abs": max(abs(e) for e in err),
            },
            "error_n": {
                "mean": statistics.mean(err_n), "sd": statistics.pstdev(err_n),
                "max_abs": max(abs(e) for e in err_n),
            },
            "wrong_share_4n": wrong / len(keep),
            "wrong_share_n": wrong_n / len(keep),
            "flip_share": flips / len(keep),
            "wrong_exact_margins": sorted(wrong_margins),
        }
        runs.append(run)
        print(
            f"{spec}: log p error (4N) mean {run['error_4n']['mean']:+.3f} sd {run['error_4n']['sd']:.3f}, "
            f"wrong {run['wrong_share_4n']:.3f}, flips {run['flip_share']:.3f}, {cpu:.0f} CPU s",
            file=sys.stderr,
        )
    words = [len(p.words) for p in kept_parses]
    json.dump(
        {
            "benchmark": "smc_exact",
            "model": args.model,
            "paradigms": sorted({pairs[i].paradigm for i in keep}),
            "pairs": len(keep),
            "pairs_considered": len(pairs),
            "max_words": args.max_words,
            "words_per_sentence": {"mean": statistics.mean(words), "max": max(words)},
            "exact_accuracy": sum(exact[2 * j] > exact[2 * j + 1] for j in range(len(keep))) / len(keep),
            "exact_margin_abs_median": statistics.median(
                abs(exact[2 * j] - exact[2 * j + 1]) for j in range(len(keep))
            ),
            "exact_cpu_s": round(exact_cpu, 1),
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

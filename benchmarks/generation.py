"""Speed of incremental decoding on the TXL key/value cache: generation and the marginal beam.

    OMP_NUM_THREADS=1 python benchmarks/generation.py --tokenizer TOK [--model TINY_MODEL] > out.json

Two measurements, JSON on stdout (docs/generation.md has the table):

* ``generation``: tokens/s of greedy token generation (transformers' ``generate``) from a BOS prompt to
  ``--lengths`` tokens, ``--batch`` sequences at a time (new tokens of all of them per second),
  with the cache (one new position per step) and without it (the whole window re-run every step,
  as before the cache), for the packaged ``txl/position-tiny`` and ``txl/position-small``
  architectures (``--recipes``) at random init (speed does not depend on the weights;
  vocabulary ``--vocab``). The cached run is timed whole. The uncached run costs
  sum_t forward(t); it is timed whole up to ``--full-uncached`` tokens, and beyond that
  estimated from ``--samples`` forwards at evenly spaced prefix lengths (each the median of
  ``--reps``), integrated over t = 1..L with linear interpolation (``uncached_method`` says which).
* ``marginal``: seconds per sentence of ``--likelihood marginal`` (the nested k-best beam) at each
  ``--ks``, cached (token-synchronous on a ``SiPECache``) and uncached (every kept prefix re-run
  at every word), on the first ``--sentences`` EWT dev sentences (gold word positions; the
  marginal does not read tag values), with ``--model`` (a trained tiny TXL) or a random-init tiny
  model with a ``--vocab`` wide output layer, and the largest bound difference between the two.

Times are process CPU time (``time.process_time``) and wall time: on a shared machine wall time
mostly measures the neighbours. ``machine`` records the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
from transformers import AutoTokenizer

from structpe.eval.scoring.likelihood import marginal_scores
from structpe.eval.scoring.scorer import CausalScorer
from structpe.models import SiPEConfig, build_model, load
from structpe.train.recipe import load_recipe

RECIPES = ("txl/position-tiny", "txl/position-small")
EWT_DEV = "ud/UD_English-EWT/en_ewt-ud-dev.conllu.gz"


def timed(fn) -> tuple[float, float, object]:
    """(cpu seconds, wall seconds, result) of one call."""
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return time.process_time() - c0, time.perf_counter() - w0, out


def recipe_model(name: str, vocab: int) -> torch.nn.Module:
    model_cfg = dict(load_recipe(name).model)
    model_cfg.update(vocab_size=vocab, dropout=0.0, attention_dropout=0.0)
    torch.manual_seed(0)
    return build_model(SiPEConfig(**model_cfg)).eval()


def greedy(model, batch: int, new_tokens: int, use_cache: bool = True) -> torch.Tensor:
    """``new_tokens`` greedy tokens after a BOS prompt, with transformers' ``generate`` (on the
    ``SiPECache``, or re-running the whole window every step with ``use_cache=False``)."""
    prompt = torch.ones(batch, 1, dtype=torch.long)
    return model.generate(
        prompt, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, use_cache=use_cache
    )


@torch.no_grad()
def uncached_cost(model, length: int, args) -> tuple[float, float, str]:
    """CPU / wall seconds of uncached generation to ``length`` tokens (whole, or sampled + integrated)."""
    if length <= args.full_uncached:
        cpu, wall, _ = timed(
            lambda: greedy(model, args.batch, length - 1, use_cache=False)
        )
        return cpu, wall, "timed whole"
    points = sorted({round(1 + i * (length - 1) / (args.samples - 1)) for i in range(args.samples)})
    cpu_at, wall_at = [], []
    for t in points:
        ids = torch.randint(0, model.config.vocab_size, (args.batch, t))
        runs = [timed(lambda ids=ids: model(ids)) for _ in range(args.reps)]
        cpu_at.append(statistics.median(r[0] for r in runs))
        wall_at.append(statistics.median(r[1] for r in runs))

    def integrate(values: list[float]) -> float:  # sum over t = 1..length-1 of forward(t), linear interp
        total = 0.0
        for (a, va), (b, vb) in zip(
            zip(points, values, strict=True), zip(points[1:], values[1:], strict=True), strict=False
        ):
            total += sum(va + (vb - va) * (t - a) / (b - a) for t in range(a, b))
        return total

    return (
        integrate(cpu_at),
        integrate(wall_at),
        f"{len(points)} prefix lengths, median of {args.reps}, integrated",
    )


def bench_generation(args) -> list[dict]:
    rows = []
    for name in args.recipes:
        model = recipe_model(name, args.vocab)
        greedy(model, args.batch, 8)  # warm-up
        for length in args.lengths:
            c_cpu, c_wall, _ = timed(
                lambda length=length, model=model: greedy(model, args.batch, length - 1)
            )
            u_cpu, u_wall, method = uncached_cost(model, length, args)
            n_tok = (length - 1) * args.batch  # new tokens over all sequences
            rows.append(
                {
                    "recipe": name,
                    "length": length,
                    "batch": args.batch,
                    "random_init": True,
                    "cached_tokens_per_s_cpu": n_tok / c_cpu,
                    "cached_tokens_per_s_wall": n_tok / c_wall,
                    "uncached_tokens_per_s_cpu": n_tok / u_cpu,
                    "uncached_tokens_per_s_wall": n_tok / u_wall,
                    "speedup_cpu": u_cpu / c_cpu,
                    "speedup_wall": u_wall / c_wall,
                    "uncached_method": method,
                }
            )
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def ewt_dev(n: int) -> list:
    from structpe.data.paths import data_root
    from structpe.parser.registry import get_parser
    from structpe.syntax.conllu_io import read_conllu

    sents = []
    for s in read_conllu(Path(data_root()) / EWT_DEV):
        sents.append(s)
        if len(sents) >= n:
            break
    return get_parser("gold").parse_conllu_sentences(sents)


def bench_marginal(args) -> dict:
    tok = AutoTokenizer.from_pretrained(args.tokenizer)
    # random init: the --vocab wide output layer (8,192, the size of the model the 2.6 s reference used)
    model = load(args.model).eval() if args.model else recipe_model(RECIPES[0], max(args.vocab, len(tok)))
    parses = ewt_dev(args.sentences)
    texts = [" ".join(p.words) for p in parses]
    rows = []
    for k in args.ks:
        sc = CausalScorer(model, tok, likelihood="marginal", k=k, batch_size=args.batch_size)
        enc = sc.encode(texts, parses)
        c = timed(lambda sc=sc, enc=enc: marginal_scores(sc, enc, use_cache=True))
        u = timed(lambda sc=sc, enc=enc: marginal_scores(sc, enc, use_cache=False))
        diff = max(
            abs(a.meta["bound_by_k"][str(k)] - b.meta["bound_by_k"][str(k)])
            for a, b in zip(c[2], u[2], strict=True)
        )
        rows.append(
            {
                "k": k,
                "cached_s_per_sentence_cpu": c[0] / len(texts),
                "cached_s_per_sentence_wall": c[1] / len(texts),
                "uncached_s_per_sentence_cpu": u[0] / len(texts),
                "uncached_s_per_sentence_wall": u[1] / len(texts),
                "speedup_cpu": u[0] / c[0],
                "speedup_wall": u[1] / c[1],
                "max_bound_difference": diff,
            }
        )
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    words = sum(len(p.words) for p in parses) / len(parses)
    return {
        "model": args.model or f"{RECIPES[0]} at random init, vocabulary {model.config.vocab_size}",
        "tokenizer": args.tokenizer,
        "sentences": f"first {len(parses)} of EWT dev ({words:.1f} words each on average)",
        "rows": rows,
        "reference": "before the cache: 2.6 s/sentence at k = 100 (docs/likelihoods.md: trained tiny TXL, "
        "200 sentences, wall time, one other job running)",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokenizer", required=True, help="tokenizer folder (the marginal's sentences)")
    ap.add_argument("--model", help="trained tiny TXL folder for the marginal (default: random init)")
    ap.add_argument("--lengths", type=int, nargs="+", default=[64, 256, 1024])
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--batch", type=int, default=1, help="sequences generated together (default 1)")
    ap.add_argument("--recipes", nargs="+", default=list(RECIPES), help="architectures to time")
    ap.add_argument(
        "--full-uncached", type=int, default=256, help="time uncached runs whole up to this length"
    )
    ap.add_argument("--samples", type=int, default=9, help="sampled prefix lengths beyond --full-uncached")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--ks", type=int, nargs="+", default=[1, 10, 100])
    ap.add_argument("--sentences", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--skip", choices=("generation", "marginal"), help="leave one measurement out")
    args = ap.parse_args()
    load0 = os.getloadavg()
    result = {
        "machine": {
            "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "threads": torch.get_num_threads(),
            "torch": torch.__version__,
            "loadavg_before": load0,
        },
        "generation": bench_generation(args) if args.skip != "generation" else None,
        "marginal": bench_marginal(args) if args.skip != "marginal" else None,
    }
    result["machine"]["loadavg_after"] = os.getloadavg()
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

"""Hexatag front-end throughput (docs/design.md §1; targets in docs/hexatags.md), printed as one JSON object.

* encode / decode sentences per second over the projective sentences of EWT train (best of
  ``--repeats`` timed passes; targets >= 50,000/s each);
* constrained (Viterbi) decoding sentences per second from random scores;
* spaCy parser-only sentences per second (``SpacyParser.parse_words`` on gold EWT words: Doc
  building + ``nlp.pipe`` + hexatagging; target >= 1,000/s);
* per treebank file: sentences, non-projective sentences, arcs lifted by ``projectivize`` and the
  deepest gold stack (what the constrained decoder's depth cap must cover).

Run:  OMP_NUM_THREADS=1 python benchmarks/hexatags.py [--data DIR] [--spacy-sentences 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np

from structpe.data.paths import data_root
from structpe.syntax.conllu_io import read_conllu
from structpe.syntax.hexatags import DEFAULT_MAX_DEPTH, constrained_decode, decode, encode, stack_depths
from structpe.syntax.trees import is_projective, projectivize_with_count


def best_rate(fn, items, repeats: int) -> dict[str, int]:
    """Items per second, best of ``repeats``: wall clock and this process's CPU time (the machine is
    shared, so the CPU-time figure is the steadier one)."""
    wall = cpu = float("inf")
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        fn(items)
        wall = min(wall, time.perf_counter() - t)
        cpu = min(cpu, time.process_time() - c)
    return {"wall": round(len(items) / wall), "cpu": round(len(items) / max(cpu, 1e-9))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=None, help="data root holding ud/ (default: structpe data_root())")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--spacy-sentences", type=int, default=4000,
                    help="EWT train sentences for spaCy (0: skip)")
    ap.add_argument("--spacy-batch-size", type=int, default=256)
    ap.add_argument("--n-process", default="1,2", help="spaCy nlp.pipe process counts to time (comma list)")
    args = ap.parse_args()

    ud = data_root(args.data, sub="ud")
    ewt = ud / "UD_English-EWT" / "en_ewt-ud-train.conllu.gz"
    t0 = time.perf_counter()
    sents = list(read_conllu(ewt))
    read_s = time.perf_counter() - t0
    heads = [s.heads for s in sents if is_projective(s.heads)]
    tags = [encode(h) for h in heads]
    assert [decode(t, n) for t, n in tags] == heads

    result: dict = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "omp_num_threads": os.environ.get("OMP_NUM_THREADS")},
        "ewt_train": {"sentences": len(sents), "projective": len(heads),
                      "words": sum(map(len, heads)), "read_conllu_sent_per_s": round(len(sents) / read_s)},
        "encode_sent_per_s": best_rate(lambda xs: [encode(h) for h in xs], heads, args.repeats),
        "decode_sent_per_s": best_rate(lambda xs: [decode(t, n) for t, n in xs], tags, args.repeats),
    }
    rng = np.random.default_rng(0)
    sample = heads[:1000]
    scores = [(rng.normal(size=(len(h), 2)), rng.normal(size=(len(h), 5))) for h in sample]
    result["constrained_decode_sent_per_s"] = best_rate(
        lambda xs: [constrained_decode(a, b) for a, b in xs], scores, 1
    )
    result["constrained_decode_max_depth"] = DEFAULT_MAX_DEPTH

    if args.spacy_sentences:
        from structpe.parser.spacy import SpacyParser

        words = [s.words for s in sents[: args.spacy_sentences]]
        runs = []
        for n_proc in (int(x) for x in args.n_process.split(",")):
            t = time.perf_counter()
            parser = SpacyParser(batch_size=args.spacy_batch_size, n_process=n_proc)
            load_s = time.perf_counter() - t
            if n_proc == 1:
                parser.parse_words(words[:64])  # warm-up
                parser.stats = type(parser.stats)()
            # with n_process > 1 the worker start-up (fork + model) is inside the timing
            t, c = time.perf_counter(), time.process_time()
            out = parser.parse_words(words)
            secs, cpu = time.perf_counter() - t, time.process_time() - c
            run = {
                "n_process": n_proc, "sentences": len(words), "load_s": round(load_s, 2),
                "sent_per_s_wall": round(len(words) / secs),
                "words_per_s_wall": round(sum(map(len, words)) / secs),
                "tagged": len(out), "stats": parser.stats.to_dict(),
            }
            if n_proc == 1:  # CPU time only means something when all work is in this process
                run["sent_per_s_cpu"] = round(len(words) / cpu)
            runs.append(run)
        result["spacy"] = {"model": parser.model, "pipe": parser.nlp.pipe_names,
                           "batch_size": args.spacy_batch_size, "runs": runs}

    per_tb = {}
    for f in sorted(ud.glob("*/*.conllu.gz")):
        n = nonproj = arcs = deepest = 0
        for s in read_conllu(f):
            n += 1
            h = s.heads
            if not is_projective(h):
                nonproj += 1
                h, lifted = projectivize_with_count(h)
                arcs += lifted
            deepest = max(deepest, max(stack_depths(*encode(h))))
        per_tb[f.name.removesuffix(".conllu.gz")] = {
            "sentences": n, "nonprojective": nonproj, "pct": round(100 * nonproj / n, 2),
            "arcs_lifted": arcs, "max_stack_depth": deepest,
        }
    result["nonprojective"] = per_tb
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

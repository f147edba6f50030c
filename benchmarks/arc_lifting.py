"""Arc lifting (``projectivize_with_count``) on long non-projective sentences, as one JSON object.

* ``ud_chain``: the non-projective sentences of EWT train chained into one tree of ``--words``
  words (each sentence's root attached to the first one's root): natural crossing arcs, spread out;
* ``random``: a random tree of ``--words`` words where each word attaches to one of the 5 words
  placed just before it in a random order -- almost every arc crosses others, the adversarial case
  (tens of thousands of lifts).

Reports lifts and seconds (best of ``--repeats``, wall and CPU) for each, plus, for the UD chain,
the seconds of the plain definition (lift the shortest non-projective arc, recompute all; the
implementation before the incremental one) when ``--reference`` is given.

Run:  OMP_NUM_THREADS=1 python benchmarks/arc_lifting.py [--words 2000] [--reference]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from pathlib import Path

from structpe.data.paths import data_root
from structpe.syntax.conllu_io import read_conllu
from structpe.syntax.trees import is_projective, projectivize_with_count


def ud_chain(words: int) -> list[int]:
    path = data_root() / "ud" / "UD_English-EWT" / "en_ewt-ud-train.conllu.gz"
    heads: list[int] = []
    first_root = None
    for s in read_conllu(path):
        if len(heads) >= words:
            break
        if is_projective(s.heads):
            continue
        off = len(heads)
        new = [h + off if h else 0 for h in s.heads]
        if first_root is None:
            first_root = new.index(0) + 1
        else:
            new[new.index(0)] = first_root
        heads += new
    return heads


def random_tree(words: int, seed: int = 0) -> list[int]:
    rng = random.Random(seed)
    order = list(range(1, words + 1))
    rng.shuffle(order)
    heads = [0] * words
    for i, w in enumerate(order[1:], 1):
        heads[w - 1] = order[rng.randrange(max(0, i - 5), i)]
    return heads


def reference():
    """The plain definition (O(n^2) per lift), kept once, as the specification in the tests."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "tests" / "syntax" / "test_syntax_lifting.py"
    spec = importlib.util.spec_from_file_location("lifting_spec", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.reference_projectivize


def timed(fn, heads: list[int], repeats: int) -> dict:
    wall = cpu = float("inf")
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        out, lifts = fn(heads)
        wall, cpu = min(wall, time.perf_counter() - t), min(cpu, time.process_time() - c)
    return {"words": len(heads), "lifts": lifts, "seconds_wall": round(wall, 4), "seconds_cpu": round(cpu, 4)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--words", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--reference", action="store_true", help="also time the plain definition on ud_chain")
    args = ap.parse_args()
    chain, rand = ud_chain(args.words), random_tree(args.words)
    res = {
        "load_average": os.getloadavg()[0],
        "ud_chain": timed(projectivize_with_count, chain, args.repeats),
        "random": timed(projectivize_with_count, rand, args.repeats),
    }
    if args.reference:
        spec = reference()
        res["ud_chain_reference"] = timed(spec, chain, 1)
        res["ud_chain_reference"]["same_output"] = spec(chain) == projectivize_with_count(chain)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()

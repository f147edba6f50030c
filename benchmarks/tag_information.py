"""How much each tag source of a study tells a model: entropy of the hexatags per word (JSON on stdout).

A tag control is only a control if its tags have the form of the parse's tags *and* the information
the comparison needs. This reads a study's prepared training data (``<run>/data/train``,
``train-prefix``, ``train-shuffled``; structpe.study.data) and reports, per tag source, the entropy
in bits per word of the terminal tag, the non-terminal tag and the pair (what SiPE's prior reads),
the number of distinct pairs, the share of the most common pair and, for every source but the
parse, how often a word's pair equals the one the whole-sentence parse gives it (the rows of all
sources hold the same token ids, which the script checks):

  python benchmarks/tag_information.py ../runs/sipe-txl-cpu-mini \\
      > benchmarks/results/tag_information-cpu-mini.json

Plug-in (maximum-likelihood) entropies over every tagged word of the training split; with
~1M words and at most a few dozen pair values their bias is negligible.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter
from pathlib import Path

import numpy as np

SOURCES = {"parse": "train", "prefix": "train-prefix", "shuffled": "train-shuffled"}
IGNORE = -100  # the label id of untagged subwords (a word's tags sit on its first subword)


def entropy_bits(counts: Counter) -> float:
    n = sum(counts.values())
    return sum(c / n * math.log2(n / c) for c in counts.values())


def tag_arrays(folder: Path) -> dict[str, np.ndarray]:
    from datasets import load_from_disk

    ds = load_from_disk(str(folder))["train"].with_format("numpy")
    return {k: np.concatenate(list(ds[k])) for k in ("input_ids", "terminal_ids", "nonterminal_ids")}


def summary(arrays: dict[str, np.ndarray]) -> dict[str, float | int]:
    tagged = arrays["terminal_ids"] != IGNORE
    t, nt = arrays["terminal_ids"][tagged], arrays["nonterminal_ids"][tagged]
    pairs = Counter(zip(t.tolist(), nt.tolist(), strict=True))
    return {
        "words": int(tagged.sum()),
        "terminal_bits": round(entropy_bits(Counter(t.tolist())), 4),
        "nonterminal_bits": round(entropy_bits(Counter(nt.tolist())), 4),
        "pair_bits": round(entropy_bits(pairs), 4),
        "distinct_pairs": len(pairs),
        "top_pair_share": round(pairs.most_common(1)[0][1] / tagged.sum(), 4),
    }


def error(message: str) -> int:
    print(f"tag_information: error: {message}", file=sys.stderr)
    return 2


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run", type=Path, help="a study run folder (holds data/train and the controls' data)")
    args = ap.parse_args()
    found = {s: args.run / "data" / d for s, d in SOURCES.items() if (args.run / "data" / d).is_dir()}
    if "parse" not in found:
        return error(f"{args.run / 'data' / 'train'}: no prepared training data")
    arrays = {s: tag_arrays(p) for s, p in found.items()}
    ref = arrays["parse"]
    out: dict[str, object] = {"run": str(args.run), "sources": {}}
    for source, a in arrays.items():
        row = summary(a)
        if source != "parse":
            if not np.array_equal(a["input_ids"], ref["input_ids"]):
                return error(f"{found[source]}: its token ids differ from the parse's")
            tagged = ref["terminal_ids"] != IGNORE
            same = a["terminal_ids"] == ref["terminal_ids"]
            same &= a["nonterminal_ids"] == ref["nonterminal_ids"]
            row["same_pair_as_parse"] = round(float(same[tagged].mean()), 4)
        out["sources"][source] = row
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

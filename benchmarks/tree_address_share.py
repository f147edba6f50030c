"""How many arcs of gold trees get an exact tree-path comparison: `lis_tree` against `lis_tree2`.

For every arc (h, d) of UD English EWT dev (projectivised by arc lifting, as hexatags need; one
sentence per row, unlabelled as the study recipes are), the comparison between its two words is
*exact* when the score of the later word against the earlier one uses the journey delta_l of that
arc alone: `lis_tree` (docs/lis.md: one anchor per word, fixed when the word is read) when the two
words' addresses differ by exactly that label; `lis_tree2` (joined components) when the two words
are joined at the later word's time (``joined_tree_paths``) and their addresses differ by it.
Also counts words at address 0 and the arcs determined once both of their words are read.

    python benchmarks/tree_address_share.py [--conllu PATH]
Prints one JSON object (docs/lis.md quotes it; benchmarks/results/tree_address_share-ewt-dev.json).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch

from structpe.modules.tree_address import joined_tree_paths, tree_paths
from structpe.syntax.conllu_io import read_conllu
from structpe.syntax.hexatag_prefix import determined_arcs
from structpe.syntax.hexatags import encode
from structpe.syntax.trees import projectivize_with_count

DEFAULT = (
    Path(os.environ.get("STRUCTPE_DATA", "/work/shared/data")) / "ud/UD_English-EWT/en_ewt-ud-dev.conllu.gz"
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conllu", default=str(DEFAULT))
    args = ap.parse_args()
    t0 = time.process_time()
    arcs = exact_v1 = exact_v2 = joined_v2 = determined_by_both = words = zero_v1 = lifted = 0
    sentences = 0
    for sent in read_conllu(args.conllu):
        heads, lifts = projectivize_with_count(sent.heads)
        lifted += lifts > 0
        sentences += 1
        terms, nts = encode(heads)
        t, n = torch.tensor([terms]), torch.tensor([nts])
        v1 = tree_paths(t, n, None, 2)[0]
        v2, joined = joined_tree_paths(t, n, None, 2, len(heads))
        v2, joined = v2[0], joined[0]
        known_at = {arc: w for w, got in enumerate(determined_arcs(terms, nts), 1) for arc in got}
        words += len(heads)
        zero_v1 += int((v1 == 0).all(dim=-1).sum())
        for d, h in enumerate(heads, 1):
            if h == 0:
                continue
            arcs += 1
            unit = torch.zeros(2)
            unit[int(d > h)] = 1.0
            late, early = max(h, d) - 1, min(h, d) - 1  # 0-based positions
            sign = 1.0 if late == d - 1 else -1.0  # journey from the earlier word to the later one
            exact_v1 += bool(torch.equal(v1[late] - v1[early], sign * unit))
            joined_v2 += bool(joined[late, early])
            exact_v2 += bool(joined[late, early]) and bool(torch.equal(v2[late] - v2[early], sign * unit))
            determined_by_both += known_at[(h, d)] <= max(h, d)
    print(
        json.dumps(
            {
                "conllu": str(args.conllu),
                "sentences": sentences,
                "sentences_projectivised": lifted,
                "words": words,
                "arcs": arcs,
                "share_exact": {
                    "lis_tree": round(exact_v1 / arcs, 4),
                    "lis_tree2": round(exact_v2 / arcs, 4),
                },
                "share_joined_lis_tree2": round(joined_v2 / arcs, 4),
                "share_determined_once_both_read": round(determined_by_both / arcs, 4),
                "share_words_at_address_0_lis_tree": round(zero_v1 / words, 4),
                "cpu_s": round(time.process_time() - t0, 1),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()

"""CoNLL-U from spaCy speaks UD: its ClearNLP relations mapped (structpe.syntax.deprels.ud_labels),
measured on spaCy's parse of the gold words of a sample of UD English EWT dev."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import conllu as conllu_lib
import pytest

from structpe.syntax.conllu_io import read_conllu
from structpe.syntax.conllu_write import to_conllu
from structpe.syntax.deprels import UD_RELATIONS, ud_labels


def test_spacy_conllu_labels_are_ud_on_ewt_dev(shared_data: Path) -> None:
    pytest.importorskip("spacy")
    from structpe.parser.registry import get_parser

    gold = list(read_conllu(shared_data / "ud" / "UD_English-EWT" / "en_ewt-ud-dev.conllu.gz"))
    valid = set(UD_RELATIONS) | {r for s in gold for r in s.deprels}  # universal + EWT's subtypes
    sample = gold[::20]  # 101 sentences, ~1,300 words
    parsed = get_parser("spacy").parse_words([s.words for s in sample])
    blocks = list(to_conllu(parsed))
    written = [t["deprel"] for block in blocks for sent in conllu_lib.parse(block) for t in sent]
    unmapped = Counter(label for label in written if label not in valid)
    share = 1 - sum(unmapped.values()) / len(written)
    assert share >= 0.99, f"valid UD share {share:.3f}; unmapped: {unmapped.most_common()}"
    assert all("# labels = ud, mapped from clearnlp" in b for b in blocks)
    # on the arcs where spaCy found the gold head, the mapped label is mostly the gold one
    same = agree = raw = 0
    for g, p in zip(sample, parsed, strict=True):
        mapped, _ = ud_labels(p.deprels, p.heads, p.words)
        for i, head in enumerate(p.heads):
            if head == g.heads[i]:
                same += 1
                agree += mapped[i] == g.deprels[i]
                raw += p.deprels[i] == g.deprels[i]
    assert agree / same >= 0.85 and agree / same > raw / same + 0.15, (agree / same, raw / same)


def test_ud_labels_per_head_and_word() -> None:
    # "the cat of the house sat on the mat to rest": pobj under a noun -> nmod, under a verb -> obl
    words = ["cat", "of", "house", "sat", "on", "mat", "to", "rest"]
    heads = [4, 1, 2, 0, 4, 5, 8, 4]
    deprels = ["nsubj", "prep", "pobj", "ROOT", "prep", "pobj", "aux", "advcl"]
    labels, mapped = ud_labels(deprels, heads, words)
    assert mapped and labels == ["nsubj", "case", "nmod", "root", "case", "obl", "mark", "advcl"]
    ud = ["nsubj", "aux", "root"]  # UD labels pass unchanged ("aux" of a UD parse is never remapped)
    assert ud_labels(ud, [3, 3, 0], ["to", "to", "go"]) == (ud, False)

"""Evaluation of the hexatagger against gold CoNLL-U trees (``structpe parser eval``).

Metrics (``evaluate``): UAS and LAS over all syntactic words, punctuation included (the CoNLL 2018
UD convention), and the same without words whose gold relation is ``punct``; LAS compares universal
relations (subtype after ':' dropped, as CoNLL 2018); tag accuracy of the terminal, the
non-terminal and both, against the tags of the projectivised gold tree. Separate from training
because evaluation also scores parsers that were never trained here.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from structpe.parser.data import gold_tags
from structpe.parser.hexatagger import predict
from structpe.parser.model import HexataggerModel
from structpe.syntax.conllu_io import ConlluSentence


def _universal(label: str) -> str:
    return label.split(":", 1)[0]


def evaluate(predicted: Sequence[Any], gold: Sequence[ConlluSentence]) -> dict[str, Any]:
    """Attachment scores and tag accuracies of predictions (``.heads``, ``.terminals``,
    ``.nonterminals``, optional ``.deprels``) against gold CoNLL-U trees; see the module docstring."""
    if len(predicted) != len(gold):
        raise ValueError(f"{len(predicted)} predictions for {len(gold)} gold sentences")
    c = Counter()
    has_labels = all(getattr(p, "deprels", None) is not None for p in predicted)
    for p, g in zip(predicted, gold, strict=True):
        if len(p.heads) != len(g.heads):
            raise ValueError(
                f"sentence {g.sent_id!r}: {len(p.heads)} predicted heads for {len(g.heads)} words"
            )
        gt, gnt, _ = gold_tags(g)
        for i, (ph, gh) in enumerate(zip(p.heads, g.heads, strict=True)):
            punct = _universal(g.deprels[i]) == "punct"
            ua = ph == gh
            la = ua and has_labels and _universal(p.deprels[i]) == _universal(g.deprels[i])
            c["words"] += 1
            c["uas"] += ua
            c["las"] += la
            if not punct:
                c["words_np"] += 1
                c["uas_np"] += ua
                c["las_np"] += la
            c["term"] += p.terminals[i] == gt[i]
            c["nonterm"] += p.nonterminals[i] == gnt[i]
            c["tags"] += p.terminals[i] == gt[i] and p.nonterminals[i] == gnt[i]
        c["sentences"] += 1
        c["exact"] += list(p.heads) == list(g.heads)
    w, wn = max(c["words"], 1), max(c["words_np"], 1)
    res: dict[str, Any] = {
        "sentences": c["sentences"],
        "words": c["words"],
        "uas": 100 * c["uas"] / w,
        "uas_no_punct": 100 * c["uas_np"] / wn,
        "terminal_acc": 100 * c["term"] / w,
        "nonterminal_acc": 100 * c["nonterm"] / w,
        "tag_acc": 100 * c["tags"] / w,
        "exact_match": 100 * c["exact"] / max(c["sentences"], 1),
        "punctuation": "uas/las: all words incl. punctuation (CoNLL 2018 UD); "
        "*_no_punct: words with gold deprel 'punct' excluded",
    }
    if has_labels:
        res["las"] = 100 * c["las"] / w
        res["las_no_punct"] = 100 * c["las_np"] / wn
    return res


def evaluate_model(
    model: HexataggerModel, tokenizer: Any, gold: Sequence[ConlluSentence], batch_tokens: int = 8192
) -> dict[str, Any]:
    was_training = model.training
    model.eval()
    try:
        preds = predict(model, tokenizer, [g.words for g in gold], batch_tokens=batch_tokens)
    finally:
        model.train(was_training)
    return evaluate(preds, gold)


def evaluate_parser(
    parser_name: str, gold: list[Any], model: str | None = None, **kwargs: Any
) -> dict[str, Any]:
    """Parse the gold words with ``parser_name`` (any registered parser) and score; timing covers
    parsing only. The hexatagger is scored on its decoded tags, the others on their own trees."""
    from structpe.parser.registry import get_parser
    from structpe.syntax.hexatags import encode
    from structpe.syntax.trees import projectivize

    words = [g.words for g in gold]
    if parser_name == "hexatagger":
        p = get_parser("hexatagger", model=model, **kwargs)
        t0 = time.perf_counter()
        preds = predict(p.model, p.tokenizer, words, p.batch_tokens)
        seconds = time.perf_counter() - t0
    else:
        from types import SimpleNamespace

        p = get_parser(parser_name)
        t0 = time.perf_counter()
        trees = p.predict_words(words)  # the parser's own trees, before any projectivisation
        seconds = time.perf_counter() - t0
        preds = []
        for heads, _labels in trees:
            t, nt = encode(projectivize(heads))
            preds.append(SimpleNamespace(heads=heads, terminals=t, nonterminals=nt, deprels=None))
    res = evaluate(preds, gold)
    res.update(
        quantize=kwargs.get("quantize", "none"),
        parser=parser_name, seconds=round(seconds, 3), sentences_per_second=round(len(gold) / seconds, 1)
    )
    return res

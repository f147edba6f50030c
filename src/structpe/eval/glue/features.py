"""GLUE features: token ids with per-sentence hexatags on each word's first token, and their batches.

Each sentence is parsed on its own (pairs: tag each separately) and its tags are placed on the
first token of each word within that sentence's segment of the pair encoding (character offsets).
Kept apart from the fine-tuning loop (``structpe.eval.glue.finetune``): featurizing depends only on the
tokenizer and the parser, not on the classifier.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from structpe.eval.glue.tasks import GlueExample
from structpe.eval.scoring.inputs import parse_texts
from structpe.eval.scoring.types import Parser, is_structpe_model
from structpe.syntax.alignment import align_tags_by_offsets, first_tokens_of_words, get_field
from structpe.syntax.hexatags import IGNORE_INDEX as IGNORE


@dataclass
class Features:
    input_ids: list[list[int]]
    terminal_ids: list[list[int]]
    nonterminal_ids: list[list[int]]
    labels: list[float | int]
    unaligned_words: int = 0
    token_type_ids: list[list[int]] | None = None  # segment ids, for HF models that use them (BERT)
    deprel_ids: list[list[int]] | None = None  # DEPREL prior models (n_deprels > 0): UD label ids


def uses_deprels(model: Any) -> bool:
    """True for a structpe model whose prior has a DEPREL table (SiPE table 12)."""
    return is_structpe_model(model) and getattr(model.config, "n_deprels", 0) > 0


def _deprel_row(text: str, offsets: Sequence[tuple[int, int]], parse: Any, scorable: Sequence[bool],
                row: list[int]) -> None:
    """Put each word's UD label id on its first token (where its tags go) in ``row``."""
    from structpe.syntax.deprels import deprel_ids

    labels = get_field(parse, "deprels")
    if labels is None:
        raise ValueError("this model's prior reads dependency labels (n_deprels > 0), but the parser "
                         "gives none; tag with a labelling parser (spacy, or a hexatagger with labels)")
    ids, _ = deprel_ids(labels)
    for tok, label in zip(first_tokens_of_words(text, offsets, get_field(parse, "words"), scorable), ids,
                          strict=True):
        if tok is not None:
            row[tok] = label


def frame_sentences(tokenizer: Any) -> Any:
    """A copy of ``tokenizer`` that frames each text as pre-training's packed rows do (``<s> A </s>``,
    pairs ``<s> A </s> B </s>``): the input of our decoder's classifier, which pools the last token.

    structpe's byte-level BPE adds no special tokens (``structpe prepare`` inserts BOS / EOS), so
    without this a pair would run its two sentences together with no boundary and no final EOS. A
    tokenizer that already adds special tokens (WordPiece's ``[CLS] A [SEP] B [SEP]``) is returned
    as it is.
    """
    from tokenizers import processors

    probe = "a b"
    if tokenizer(probe)["input_ids"] != tokenizer(probe, add_special_tokens=False)["input_ids"]:
        return tokenizer
    bos, eos = tokenizer.bos_token, tokenizer.eos_token
    if bos is None or eos is None:
        raise ValueError("a decoder's GLUE input is framed <s> A </s> (B </s>): its tokenizer needs BOS, EOS")
    framed = copy.deepcopy(tokenizer)
    backend = framed.backend_tokenizer
    template = processors.TemplateProcessing(
        single=f"{bos} $A {eos}",
        pair=f"{bos} $A {eos} $B:1 {eos}:1",
        special_tokens=[(bos, tokenizer.bos_token_id), (eos, tokenizer.eos_token_id)],
    )
    own = backend.post_processor  # e.g. a byte-level offset trimmer: kept, the template after it
    backend.post_processor = template if own is None else processors.Sequence([own, template])
    return framed


def featurize(
    examples: Sequence[GlueExample],
    tokenizer: Any,
    parser: Parser | None,
    *,
    max_length: int = 128,
    tagged: bool = True,
    parse_cache: dict[str, Any] | None = None,
    deprels: bool = False,
) -> Features:
    """Tokenize (pairs as pairs) and put each sentence's own tags (and, with ``deprels``, its UD
    labels) on its words' first tokens."""
    n_seg = len(examples[0].texts) if examples else 1
    if tagged and parser is None:
        raise ValueError("this model reads hexatags: give a parser")
    cache = parse_cache if parse_cache is not None else {}
    if tagged:
        todo = sorted({t for e in examples for t in e.texts if t not in cache})
        if todo:
            for t, ps in zip(todo, parse_texts(parser, todo) or [], strict=True):
                cache[t] = ps
    cols = [[e.texts[i] for e in examples] for i in range(n_seg)]
    enc = tokenizer(*cols, truncation=True, max_length=max_length, return_offsets_mapping=True)
    feats = Features([], [], [], [e.label for e in examples])
    if "token_type_ids" in enc:
        feats.token_type_ids = [list(x) for x in enc["token_type_ids"]]
    if deprels:
        feats.deprel_ids = []
    for k, ex in enumerate(examples):
        ids = list(enc["input_ids"][k])
        offs = [tuple(o) for o in enc["offset_mapping"][k]]
        seq = enc.sequence_ids(k)
        t = [IGNORE] * len(ids)
        n = [IGNORE] * len(ids)
        d = [IGNORE] * len(ids)
        if tagged:
            for s, text in enumerate(ex.texts):
                scorable = [sid == s for sid in seq]
                ts, ns, missed = align_tags_by_offsets(text, offs, cache[text], scorable)
                feats.unaligned_words += missed
                for i in range(len(ids)):
                    if scorable[i] and ts[i] != IGNORE:
                        t[i], n[i] = ts[i], ns[i]
                if deprels:
                    _deprel_row(text, offs, cache[text], scorable, d)
        if feats.deprel_ids is not None:
            feats.deprel_ids.append(d)
        feats.input_ids.append(ids)
        feats.terminal_ids.append(t)
        feats.nonterminal_ids.append(n)
    return feats


def collate_features(f: Features, idx: Sequence[int], pad_id: int) -> dict[str, torch.Tensor]:
    """The examples ``idx`` of ``f`` as one padded batch (tag ids padded with ``IGNORE``), for training
    and for prediction alike."""
    L = max(len(f.input_ids[i]) for i in idx)
    B = len(idx)
    ids = torch.full((B, L), pad_id, dtype=torch.long)
    mask = torch.zeros((B, L), dtype=torch.long)
    t = torch.full((B, L), IGNORE, dtype=torch.long)
    n = torch.full((B, L), IGNORE, dtype=torch.long)
    for b, i in enumerate(idx):
        m = len(f.input_ids[i])
        ids[b, :m] = torch.tensor(f.input_ids[i])
        mask[b, :m] = 1
        t[b, :m] = torch.tensor(f.terminal_ids[i])
        n[b, :m] = torch.tensor(f.nonterminal_ids[i])
    batch = {"input_ids": ids, "attention_mask": mask, "terminal_ids": t, "nonterminal_ids": n}
    if f.deprel_ids is not None:
        d = torch.full((B, L), IGNORE, dtype=torch.long)
        for b, i in enumerate(idx):
            d[b, : len(f.deprel_ids[i])] = torch.tensor(f.deprel_ids[i])
        batch["deprel_ids"] = d
    if f.token_type_ids is not None:
        tt = torch.zeros((B, L), dtype=torch.long)
        for b, i in enumerate(idx):
            tt[b, : len(f.token_type_ids[i])] = torch.tensor(f.token_type_ids[i])
        batch["token_type_ids"] = tt
    return batch

"""Verb -> object attention on BLiMP ``causative`` (docs/design.md §4; SiPE §5 attention analysis).

For each grammatical sentence of the ``causative`` paradigm ("Aaron breaks the glass.") the parser
finds the verb and its direct object (the dependent labelled ``dobj``/``obj``; both words are
located by their first token). We read the attention weight between them in every layer
(averaged over heads) for a base model and a SiPE model, and report per-layer means, the overall
mean, and the share of sentences where SiPE's attention is higher than the base model's.

Direction: encoders attend both ways, so we read query = verb, key = object (verb -> object). A
causal decoder cannot attend from the verb to a later object (that weight is 0 by construction),
so for decoders we read query = object, key = verb and say so in the result (``direction``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from structpe.eval.scoring.inputs import parse_texts
from structpe.eval.scoring.types import Parser, forward_logits, model_device, model_kind, uses_tags
from structpe.syntax.alignment import align_tags_by_offsets, word_spans
from structpe.syntax.hexatags import IGNORE_INDEX as IGNORE

OBJECT_DEPRELS = ("dobj", "obj")
DIRECTIONS = ("auto", "verb_to_object", "object_to_verb")


def verb_object(parse: Any) -> tuple[int, int] | None:
    """(verb, object) word indices: the first word with a ``dobj``/``obj`` dependent, or None."""
    deprels = getattr(parse, "deprels", None)
    if deprels is None:
        raise ValueError("the parser gives no dependency labels; verb/object need deprels (use spacy)")
    for i, (h, rel) in enumerate(zip(parse.heads, deprels, strict=True)):
        if rel.lower() in OBJECT_DEPRELS and h > 0:
            return h - 1, i
    return None


def _first_tokens(
    text: str, offsets: Sequence[tuple[int, int]], words: Sequence[str], special: Sequence[bool]
):
    """Index of the first token overlapping each word (None when the word is not found)."""
    out: list[int | None] = []
    for span in word_spans(text, words):
        if span is None:
            out.append(None)
            continue
        ws, we = span
        idx = next(
            (i for i, (a, b) in enumerate(offsets) if not special[i] and b > ws and a < we and b > a),
            None,
        )
        out.append(idx)
    return out


@torch.no_grad()
def attention_between(
    model: Any,
    tokenizer: Any,
    texts: Sequence[str],
    parses: Sequence[Any],
    pairs: Sequence[tuple[int, int]],
    *,
    direction: str = "auto",
    batch_size: int = 16,
) -> tuple[np.ndarray, str]:
    """Head-averaged attention [n_texts, n_layers] from word a to word b of each (a, b) pair.

    ``pairs`` are (verb, object) word indices; ``direction`` picks query/key (see module doc).
    """
    kind = model_kind(model)
    if direction == "auto":
        direction = "object_to_verb" if kind == "causal" else "verb_to_object"
    if direction not in DIRECTIONS[1:]:
        raise ValueError(f"direction must be one of {DIRECTIONS}")
    tagged = uses_tags(model)
    rows = []
    for k, text in enumerate(texts):
        if kind == "causal":
            enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
            bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
            ids = [bos, *enc["input_ids"]]
            offs = [(0, 0), *[tuple(o) for o in enc["offset_mapping"]]]
            special = [True] + [False] * len(enc["input_ids"])
        else:
            enc = tokenizer(text, return_offsets_mapping=True, return_special_tokens_mask=True)
            ids = list(enc["input_ids"])
            offs = [tuple(o) for o in enc["offset_mapping"]]
            special = [bool(s) for s in enc["special_tokens_mask"]]
        first = _first_tokens(text, offs, parses[k].words, special)
        v, o = pairs[k]
        if first[v] is None or first[o] is None:
            raise ValueError(f"sentence {k}: verb or object not found among the tokens of {text!r}")
        q, key = (first[v], first[o]) if direction == "verb_to_object" else (first[o], first[v])
        if tagged:
            t, n, _ = align_tags_by_offsets(text, offs, parses[k], [not s for s in special])
        else:
            t, n = [IGNORE] * len(ids), [IGNORE] * len(ids)
        rows.append((ids, t, n, q, key))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    device = model_device(model)
    out_rows: list[np.ndarray] = []
    for s in range(0, len(rows), batch_size):
        chunk = rows[s : s + batch_size]
        L = max(len(r[0]) for r in chunk)
        B = len(chunk)
        ids = torch.full((B, L), pad, dtype=torch.long)
        mask = torch.zeros((B, L), dtype=torch.long)
        tt = torch.full((B, L), IGNORE, dtype=torch.long)
        nn_ = torch.full((B, L), IGNORE, dtype=torch.long)
        for b, (i_, t_, n_, _, _) in enumerate(chunk):
            ids[b, : len(i_)] = torch.tensor(i_)
            mask[b, : len(i_)] = 1
            tt[b, : len(i_)] = torch.tensor(t_)
            nn_[b, : len(i_)] = torch.tensor(n_)
        try:
            out = forward_logits(
                model,
                ids.to(device),
                mask.to(device),
                tt.to(device) if tagged else None,
                nn_.to(device) if tagged else None,
                output_attentions=True,
            )
        except TypeError as err:
            raise ValueError(f"{type(model).__name__} cannot return attentions ({err})") from err
        att = getattr(out, "attentions", None)
        if not att or att[0] is None:
            raise ValueError(
                f"{type(model).__name__} returned no attentions; for Hugging Face models load them with "
                "attn_implementation='eager'"
            )
        per_layer = torch.stack([a.float().mean(1) for a in att], dim=1)  # [B, layers, L, L]
        for b, (_, _, _, q, key) in enumerate(chunk):
            out_rows.append(per_layer[b, :, q, key].cpu().numpy())
    return np.stack(out_rows), direction


def load_causative(data_dir: str | Path | None = None, limit: int | None = None) -> list[str]:
    from structpe.eval.blimp import load_blimp

    return [p.good for p in load_blimp(data_dir, ["causative"], limit)]


def evaluate_attention(
    base_model: Any,
    sipe_model: Any,
    tokenizer: Any,
    parser: Parser,
    data_dir: str | Path | None = None,
    *,
    sipe_tokenizer: Any | None = None,
    limit: int | None = None,
    direction: str = "auto",
    batch_size: int = 16,
    sentences: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Verb/object attention of a base and a SiPE model on BLiMP ``causative`` good sentences."""
    texts = list(sentences) if sentences is not None else load_causative(data_dir, limit)
    parses = parse_texts(parser, texts) or []
    keep = []
    for i, p in enumerate(parses):
        vo = verb_object(p)
        if vo is not None:
            keep.append((i, vo))
    if not keep:
        raise ValueError("no sentence has a verb with a direct object under this parser")
    texts_k = [texts[i] for i, _ in keep]
    parses_k = [parses[i] for i, _ in keep]
    vo_k = [vo for _, vo in keep]
    base, d_base = attention_between(
        base_model, tokenizer, texts_k, parses_k, vo_k, direction=direction, batch_size=batch_size
    )
    sipe, d_sipe = attention_between(
        sipe_model,
        sipe_tokenizer or tokenizer,
        texts_k,
        parses_k,
        vo_k,
        direction=direction,
        batch_size=batch_size,
    )
    if d_base != d_sipe:
        raise ValueError(f"base reads {d_base} but SiPE reads {d_sipe}; pass direction= explicitly")
    base_mean = base.mean(1)
    sipe_mean = sipe.mean(1)
    diff = sipe_mean - base_mean
    return {
        "benchmark": "attention",
        "paradigm": "causative",
        "direction": d_base,
        "n_sentences": len(texts),
        "n_with_object": len(keep),
        "base_mean": float(base_mean.mean()),
        "sipe_mean": float(sipe_mean.mean()),
        "share_sipe_higher": float((diff > 0).mean()),
        "per_layer_base": base.mean(0).tolist(),
        "per_layer_sipe": sipe.mean(0).tolist(),
        "per_sentence_diff": diff.tolist(),
        "examples": [
            {"text": t, "verb": p.words[v], "object": p.words[o]}
            for t, p, (v, o) in list(zip(texts_k, parses_k, vo_k, strict=True))[:5]
        ],
    }


def format_results(result: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    rows = [
        {"layer": i + 1, "base": b, "sipe": s}
        for i, (b, s) in enumerate(zip(result["per_layer_base"], result["per_layer_sipe"], strict=False))
    ]
    rows.append({"layer": "mean", "base": result["base_mean"], "sipe": result["sipe_mean"]})
    return rows, ["layer", "base", "sipe"]


def plot(result: Mapping[str, Any], out_dir: str | Path) -> list[Path]:
    from structpe.eval.report import hist_plot, line_plot

    out = Path(out_dir)
    n = max(len(result["per_layer_base"]), len(result["per_layer_sipe"]))
    p1 = line_plot(
        out / "attention_per_layer.png",
        list(range(1, n + 1)),
        {"base": result["per_layer_base"], "SiPE": result["per_layer_sipe"]},
        title=f"causative: {result['direction'].replace('_', ' ')} attention",
        xlabel="layer",
        ylabel="attention (mean over heads, sentences)",
    )
    p2 = hist_plot(
        out / "attention_diff.png",
        result["per_sentence_diff"],
        title=f"SiPE - base (SiPE higher in {result['share_sipe_higher']:.1%})",
        xlabel="attention difference (mean over layers and heads)",
    )
    return [p1, p2]

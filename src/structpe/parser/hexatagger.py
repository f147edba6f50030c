"""A trained hexatagger: a small Transformer encoder that predicts every word's hexatags (docs/design.md §1).

The SiPE paper tags text with its own parser, a Transformer encoder with two per-token heads that
predict each word's terminal tau_i in T = {tl, tr} and non-terminal nu_i in N = {nl-L, nl-R, nr-L,
nr-R, eos} at the word's **first subword** (Amini, Liu & Cotterell, ACL 2023, "Hexatagging", §3).
The pieces live in sibling modules, one responsibility each, and are all importable from here:

* ``structpe.parser.model`` - ``HexataggerConfig`` and ``HexataggerModel`` (the network,
  its Transformer or ``BiLSTMEncoder`` encoder and its heads, loss = CE_T + CE_N (+ CE_label));
* ``structpe.parser.tokenizer`` - the subword tokenizer (train, save, load, encode words);
* ``structpe.parser.decode`` - scores -> well-formed tags (arg-max when well formed, else
  the constrained Viterbi decoder, run once per length bucket).

This module holds inference on top of them: ``predict`` (length-bucketed batches, decoded per
sentence), ``quantize_for_cpu`` and ``HexatagParser`` - the ``Parser`` used by ``structpe tag
--parser hexatagger --model DIR``: batched tokenize -> encode -> decode, so the output is always a
tree. ``quantize="int8"`` swaps the Linear layers for dynamic int8 ones (CPU speed).

A saved model is one folder (``save_pretrained``): ``config.json``, ``model.safetensors`` and the
subword tokenizer (``tokenizer.json`` + ``tokenizer_config.json``, loadable with
``transformers.AutoTokenizer``). No pickles.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from structpe.parser.base import QUANTIZE_MODES, Parser, ParserInputError
from structpe.parser.decode import decode_scores_batch
from structpe.parser.model import (
    HexataggerModel,
)
from structpe.parser.tokenizer import (
    encode_words,
    fit_subwords,
    load_tokenizer,
)
from structpe.syntax.sentences import split_sentences as split_into_sentences
from structpe.syntax.tagged import TaggedSentence


def quantize_for_cpu(model: HexataggerModel, mode: str = "int8") -> HexataggerModel:
    """A CPU inference copy of ``model``: ``int8`` quantizes every Linear (and LSTM) layer
    dynamically (weights int8, activations quantized per batch; about 1.6x fp32 on one AVX-512/VNNI
    core with the same EWT test UAS); ``bf16`` casts the weights to bfloat16, fast only where the
    CPU has native bf16 (AVX-512 BF16 / AMX; elsewhere several times slower than fp32);
    ``none`` returns the model unchanged. benchmarks/parser_speed.py times each mode.

    int8 uses ``torch.ao.quantization.quantize_dynamic``, which torch 2.13 still ships but has
    deprecated; its successor (torchao) needs ``torch.compile`` to be fast on CPU.
    """
    if mode not in QUANTIZE_MODES:
        raise ValueError(f"quantize must be one of {QUANTIZE_MODES}, got {mode!r}")
    if mode == "none":
        return model
    if next(model.parameters()).device.type != "cpu":
        raise ValueError(f"{mode} inference runs on CPU only; load the model with device='cpu'")
    if mode == "bf16":
        return copy.deepcopy(model).eval().to(torch.bfloat16)
    import warnings

    from torch.ao.quantization import quantize_dynamic

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*deprecated.*")
        # a bilstm's LSTM layers too (torch's dynamic int8 LSTM; packed sequences work unchanged)
        return quantize_dynamic(model.eval(), {nn.Linear, nn.LSTM}, dtype=torch.qint8)


# -- batched prediction ---------------------------------------------------------------------------


@dataclass
class Prediction:
    """One decoded sentence: tag ids, heads (1-based, 0 = root) and labels (None without a label head)."""

    terminals: list[int]
    nonterminals: list[int]
    heads: list[int]
    deprels: list[str] | None


def length_batches(lengths: Sequence[int], batch_tokens: int, max_sentences: int = 512) -> list[list[int]]:
    """Indices grouped by similar length so that (longest x count) <= ``batch_tokens``: little padding."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    cur: list[int] = []
    longest = 0
    for i in order:
        n = lengths[i]
        if cur and (max(longest, n) * (len(cur) + 1) > batch_tokens or len(cur) >= max_sentences):
            batches.append(cur)
            cur, longest = [], 0
        cur.append(i)
        longest = max(longest, n)
    if cur:
        batches.append(cur)
    return batches


def pad_batch(seqs: Sequence[Sequence[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad id lists into (input_ids [B, L], attention_mask [B, L])."""
    longest = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), longest), pad, dtype=torch.long)
    mask = torch.zeros((len(seqs), longest), dtype=torch.long)
    for r, s in enumerate(seqs):
        ids[r, : len(s)] = torch.as_tensor(s, dtype=torch.long)
        mask[r, : len(s)] = 1
    return ids, mask


@torch.inference_mode()
def predict(
    model: HexataggerModel,
    tokenizer: Any,
    sentences: Sequence[Sequence[str]],
    batch_tokens: int = 8192,
    progress: bool = False,
) -> list[Prediction]:
    """Tag pre-split sentences end to end: subword-encode (a sentence past the encoder's positions
    keeps its longest words' first subwords only, :func:`fit_subwords`), run the encoder in
    length-sorted batches, read the scores at first subwords, decode each sentence to a well-formed
    tree."""
    if any(len(s) == 0 for s in sentences):
        raise ValueError("every sentence needs at least one word")
    limit = model.config.max_positions
    for k, s in enumerate(sentences):  # words per sentence, checked before any encoding
        if len(s) + 2 > limit:
            raise ParserInputError(
                f"sentence {k}: {len(s):,} words, over the hexatagger's limit of {limit - 2} words per "
                "sentence (its encoder's positions); split the sentence, or use --parser spacy"
            )
    encoded = []
    for k, (ids, firsts) in enumerate(encode_words(tokenizer, sentences)):
        try:  # past the encoder's positions the longest words keep only their first subwords
            encoded.append(fit_subwords(ids, firsts, limit))
        except ValueError as err:
            raise ValueError(f"sentence {k}: {err}") from None
    device = next(model.parameters()).device
    deprels = model.config.deprels
    root_id = deprels.index("root") if "root" in deprels else -1
    out: list[Prediction | None] = [None] * len(sentences)
    batches = length_batches([len(ids) for ids, _ in encoded], batch_tokens)
    it: Any = batches
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(batches, desc="tagging", unit="batch")
    for batch in it:
        ids, mask = pad_batch([encoded[i][0] for i in batch], model.config.pad_token_id)
        res = model(ids.to(device), mask.to(device))
        t_scores = torch.log_softmax(res.terminal_logits.float(), -1).cpu().numpy()
        n_scores = torch.log_softmax(res.nonterminal_logits.float(), -1).cpu().numpy()
        d_scores = res.deprel_logits.float().cpu().numpy() if res.deprel_logits is not None else None
        firsts = [encoded[i][1] for i in batch]
        decoded = decode_scores_batch(
            [t_scores[r, f] for r, f in enumerate(firsts)], [n_scores[r, f] for r, f in enumerate(firsts)]
        )
        for r, (i, (terms, nts, heads)) in enumerate(zip(batch, decoded, strict=True)):
            labels = None
            if d_scores is not None:
                labels = _labels(d_scores[r, firsts[r]], heads, root_id, deprels)
            out[i] = Prediction(terms, nts, heads, labels)
    return out  # type: ignore[return-value]


def _labels(scores: np.ndarray, heads: Sequence[int], root_id: int, deprels: Sequence[str]) -> list[str]:
    """Arg-max labels, made consistent with the tree: 'root' exactly on the word headed by 0."""
    if root_id >= 0:
        scores = scores.copy()
        is_root = np.asarray(heads) == 0
        scores[~is_root, root_id] = -np.inf
        scores[is_root, :] = -np.inf
        scores[is_root, root_id] = 0.0
    return [deprels[j] for j in scores.argmax(-1).tolist()]


# -- the Parser -----------------------------------------------------------------------------------


class HexatagParser(Parser):
    """``get_parser("hexatagger", model=DIR)``: the trained tagger behind the ``Parser`` interface.

    Its trees come from decoded tags, so they are projective by construction (every sentence counts
    as ``projective`` in ``stats``; the non-projectivity policy never fires). Raw text is split
    into sentences and words by spaCy's rule-based English tokenizer and sentencizer (no parser).
    """

    name = "hexatagger"

    def __init__(
        self,
        model: str | os.PathLike,
        nonprojective: str = "lift",
        device: str = "cpu",
        batch_tokens: int = 8192,
        threads: int | None = None,
        quantize: str = "none",
    ) -> None:
        super().__init__(nonprojective)
        if threads:
            torch.set_num_threads(threads)
        self.model_dir = Path(model)
        if not self.model_dir.is_dir():
            raise FileNotFoundError(f"hexatagger model folder {self.model_dir} not found")
        self.quantize = quantize
        model_fp32 = HexataggerModel.from_pretrained(self.model_dir, device=device)
        self.model = quantize_for_cpu(model_fp32, quantize)
        self.tokenizer = load_tokenizer(self.model_dir)
        self.batch_tokens = batch_tokens

    def predict_words(self, sentences: Sequence[Sequence[str]]) -> list[tuple[list[int], list[str] | None]]:
        return [
            (p.heads, p.deprels) for p in predict(self.model, self.tokenizer, sentences, self.batch_tokens)
        ]

    def parse_words(
        self, sentences: Sequence[Sequence[str]], sent_ids: Sequence[str | None] | None = None
    ) -> list[TaggedSentence]:
        """Tag pre-split sentences; tags are the decoded ones (no re-encoding of the heads)."""
        if sent_ids is not None and len(sent_ids) != len(sentences):
            raise ValueError(f"{len(sentences)} sentences but {len(sent_ids)} sent_ids")
        for i, words in enumerate(sentences):
            if isinstance(words, str) or len(words) == 0:
                raise ValueError(f"sentence {i}: parse_words takes non-empty lists of words")
        preds = predict(self.model, self.tokenizer, sentences, self.batch_tokens)
        out = []
        for i, (words, p) in enumerate(zip(sentences, preds, strict=True)):
            sid = sent_ids[i] if sent_ids is not None else None
            out.append(TaggedSentence(list(words), p.heads, p.terminals, p.nonterminals, p.deprels, sid, 0))
        self.stats.sentences += len(out)
        self.stats.projective += len(out)
        return out

    def predict_text(
        self, texts: Sequence[str], split_sentences: bool = True
    ) -> list[list[tuple[list[str], list[int], list[str] | None]]]:
        """Sentences of each text (:func:`structpe.syntax.sentences.split_sentences`); with
        ``split_sentences=False`` each text is tagged as one sentence, which the scorers' character
        alignment needs."""
        split = split_into_sentences(texts)
        if not split_sentences:
            split = [[[w for sent in sents for w in sent]] if sents else [] for sents in split]
        flat = [s for sents in split for s in sents]
        trees = self.predict_words(flat) if flat else []
        out, k = [], 0
        for sents in split:
            out.append([(w, *trees[k + j]) for j, w in enumerate(sents)])
            k += len(sents)
        return out



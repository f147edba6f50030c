"""The training losses of SiPE's parser-free rivals (its Table 2): Tree-Planted Transformers and TreeReg.

Both read the dependency parse only in training, from the hexatags the batches already carry
(one (terminal, non-terminal) pair on each word's first subword, ``-100`` elsewhere; ``eos`` ends a
sentence, so packed rows hold several), and both leave the model's logits untouched: at inference
such a model is a plain decoder and every likelihood is its exact p(x). docs/studies/README.md
("Rivals") says where these follow the papers and where they deviate.

* ``tpt`` (Yoshida, Someya & Oseki 2024, "Tree-Planted Transformers"): the syntactic distance
  D_ij (arcs on the dependency path between words i and j) becomes, for each word i, the target
  distribution S_ij = exp(-D_ij) / sum_{k <= i} exp(-D_ik) over the words j <= i a unidirectional
  model can see; the loss is KL(S_i || A_i) with A_i the planted head's word-level attention from
  word i (the attention of word i's first subword, summed over each word's subwords and
  renormalised over the sentence's words j <= i), averaged over words and planted heads.
* ``treereg`` (Nandi, Manning & Murty 2025, "Sneaking Syntax into Transformer Language Models
  with Tree Regularization"): SCIN(a, b) = || orth(h_b ; h_{a-1}) ||, the norm of h_b's component
  orthogonal to h_{a-1} (how independent the span a..b is of its left context; 0 for a span that
  starts the sentence), on the chosen heads' outputs h. A constituent (st, en) split at token k
  scores SCIN(st, k) + SCIN(k+1, en) + SCIN(k+1, k+1) + SCIN(en+1, en+1) (the last 0 at the
  sentence's end); the loss is the cross-entropy of the gold split among the constituent's word
  boundaries, averaged over the constituents of a sentence (those of 3 or more words: a 2-word
  one has one split) and then over sentences. The constituents are the hexatag binary head
  tree's nodes (``structpe.syntax.hexatags.bht_splits``): TreeReg needs one gold split per
  constituent, i.e. a binary tree, and the BHT is the binarisation the tags themselves encode.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from structpe.syntax.hexatags import EOS, IGNORE_INDEX, InvalidTagsError, bht_splits, decode
from structpe.syntax.trees import InvalidTreeError, tree_distances

__all__ = ["Sentence", "row_sentences", "scin_chart", "tpt_loss", "tpt_targets", "treereg_loss",
           "treereg_split_scores"]


@dataclass
class Sentence:
    """One parsed sentence of a packed row: each word's token extent [start, end) and its heads."""

    starts: list[int]
    ends: list[int]
    heads: list[int]


def row_sentences(
    input_ids: Sequence[int], terminals: Sequence[int], nonterminals: Sequence[int], specials: set[int]
) -> list[Sentence]:
    """The complete, well-formed sentences of one row. A word runs from its first subword to the
    next word or special token (BOS / EOS / padding); a sentence ends at the word tagged ``eos``.
    A sentence cut by the row's edge (a long one packed over two rows) does not decode and is left
    out, as is any whose tags are ill-formed."""
    out: list[Sentence] = []
    starts: list[int] = []
    terms: list[int] = []
    nts: list[int] = []
    length = len(input_ids)
    for p in range(length):
        if terminals[p] == IGNORE_INDEX:
            continue
        starts.append(p)
        terms.append(int(terminals[p]))
        nts.append(int(nonterminals[p]))
        if nts[-1] == EOS:
            ends = []
            for s in starts:
                q = s + 1
                while q < length and terminals[q] == IGNORE_INDEX and int(input_ids[q]) not in specials:
                    q += 1
                ends.append(q)
            with contextlib.suppress(InvalidTagsError, InvalidTreeError):
                out.append(Sentence(list(starts), ends, decode(terms, nts)))
            starts, terms, nts = [], [], []
    return out


# -- Tree-Planted Transformers -----------------------------------------------------------------------
def tpt_targets(heads: Sequence[int]) -> torch.Tensor:
    """S [n, n]: row i is softmax_j(-D_ij) over the words j <= i (zero above the diagonal)."""
    dist = torch.tensor(tree_distances(heads), dtype=torch.float64)
    causal = torch.ones_like(dist, dtype=torch.bool).tril()
    return (-dist).masked_fill(~causal, -math.inf).softmax(dim=-1)


def tpt_loss(probs: torch.Tensor, sentences: list[list[Sentence]]) -> torch.Tensor:
    """Mean KL(S_i || A_i) over the planted heads and every word of every sentence.

    ``probs`` [B, H, L, L]: the planted heads' attention probabilities (query, key);
    ``sentences``: each row's ``row_sentences``."""
    total = probs.new_zeros((), dtype=torch.float32)
    count = 0
    for b, row in enumerate(sentences):
        for s in row:
            n = len(s.starts)
            member = torch.zeros(probs.shape[-1], n, dtype=probs.dtype, device=probs.device)
            for j, (a, e) in enumerate(zip(s.starts, s.ends, strict=True)):
                member[a:e, j] = 1
            attn = probs[b][:, s.starts, :] @ member  # [H, n, n]: word i's mass on word j's subwords
            target = tpt_targets(s.heads).to(device=probs.device, dtype=torch.float32)
            causal = target > 0
            attn = attn.float().masked_fill(~causal, 0)
            attn = attn / attn.sum(-1, keepdim=True).clamp_min(1e-12)
            kl = torch.where(causal, target * (target.log() - attn.clamp_min(1e-12).log()), 0.0)
            total = total + kl.sum()
            count += n * probs.shape[1]
    return total / max(count, 1)


# -- TreeReg ---------------------------------------------------------------------------------------
def scin_chart(h: torch.Tensor) -> torch.Tensor:
    """O[i, j] = || h_j - <h_j, u_i> u_i ||, u_i = h_i / ||h_i||, for one row's vectors h [L, d]."""
    unit = F.normalize(h, dim=-1)
    along = unit @ h.T  # [i, j] = <u_i, h_j>
    sq = (h * h).sum(-1)[None, :] - along.square()
    return sq.clamp_min(0).sqrt()


def treereg_split_scores(chart: torch.Tensor, s: Sentence) -> list[tuple[torch.Tensor, int]]:
    """Each constituent's split scores over its word boundaries and the gold one's index, for the
    BHT nodes of 3 or more words (token positions from ``s``; ``chart`` is the row's ``scin_chart``)."""
    first, last = s.starts[0], s.ends[-1] - 1
    zero = chart.new_zeros(())

    def scin(a: int, b: int) -> torch.Tensor:  # span a..b (token positions, inclusive)
        return zero if a == first or a > last else chart[a - 1, b]

    out = []
    for lo, hi, gold in bht_splits(s.heads):
        if hi - lo < 2:
            continue
        st, en = s.starts[lo - 1], s.ends[hi - 1] - 1
        scores = []
        for k in range(lo, hi):  # left child words lo..k
            left_end, right_start = s.ends[k - 1] - 1, s.starts[k]
            scores.append(scin(st, left_end) + scin(right_start, en) + scin(right_start, right_start)
                          + scin(en + 1, en + 1))
        out.append((torch.stack(scores), gold - lo))
    return out


def treereg_loss(hidden: torch.Tensor, sentences: list[list[Sentence]]) -> torch.Tensor:
    """Mean over sentences of the mean cross-entropy of the gold splits; ``hidden`` [B, L, d]."""
    per_sentence = []
    for b, row in enumerate(sentences):
        if not row:
            continue
        chart = scin_chart(hidden[b].float())
        for s in row:
            nodes = treereg_split_scores(chart, s)
            if nodes:
                ce = [F.cross_entropy(sc[None], torch.tensor([g], device=sc.device)) for sc, g in nodes]
                per_sentence.append(torch.stack(ce).mean())
    if not per_sentence:
        return hidden.new_zeros((), dtype=torch.float32)
    return torch.stack(per_sentence).mean()

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

__all__ = ["Sentence", "orth_norms", "row_sentences", "tpt_loss", "tpt_targets", "treereg_loss",
           "treereg_nodes"]


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
    out, as is one whose tags encode several trees (the parser split the corpus sentence) or are
    ill-formed: the rivals' losses need one tree."""
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
Pair = tuple[int, int] | None  # SCIN's (context position a - 1, span end b); None: the score is 0


def orth_norms(context: torch.Tensor, end: torch.Tensor) -> torch.Tensor:
    """|| h_b - <h_b, u> u ||, u = h_{a-1} / ||h_{a-1}||, row by row ([N, d] -> [N]).

    The square root is taken of at least 1e-12: an exactly parallel pair would otherwise give an
    infinite gradient."""
    unit = F.normalize(context, dim=-1)
    along = (end * unit).sum(-1)
    return ((end * end).sum(-1) - along.square()).clamp_min(1e-12).sqrt()


def treereg_nodes(s: Sentence) -> list[tuple[list[tuple[Pair, Pair, Pair, Pair]], int]]:
    """Each constituent of 3 or more words (a BHT node of ``s``): per candidate split after word k
    the four SCIN terms SCIN(st, k) + SCIN(k+1, en) + SCIN(k+1, k+1) + SCIN(en+1, en+1) as token
    pairs (a - 1, b), and the gold split's index. A span starting at the sentence's first token, or
    past its last, scores 0 (None)."""
    first, last = s.starts[0], s.ends[-1] - 1

    def scin(a: int, b: int) -> Pair:
        return None if a == first or a > last else (a - 1, b)

    out = []
    for lo, hi, gold in bht_splits(s.heads):
        if hi - lo < 2:  # one split only: nothing to choose
            continue
        st, en = s.starts[lo - 1], s.ends[hi - 1] - 1
        cands = []
        for k in range(lo, hi):  # left child words lo..k
            left_end, right_start = s.ends[k - 1] - 1, s.starts[k]
            cands.append((scin(st, left_end), scin(right_start, en), scin(right_start, right_start),
                          scin(en + 1, en + 1)))
        out.append((cands, gold - lo))
    return out


def treereg_loss(hidden: torch.Tensor, sentences: list[list[Sentence]]) -> torch.Tensor:
    """Mean over sentences of the mean cross-entropy of the gold splits; ``hidden`` [B, L, d].

    Every SCIN term of the batch is computed once, in one batched call; the splits' scores are
    gathered from them (the loop over sentences only builds integer indices)."""
    pairs: dict[tuple[int, int, int], int] = {}
    rows: list[list[list[int]]] = []  # per node: per candidate the 4 term indices (-1: zero)
    gold, sentence_of, width = [], [], 0
    n_sentences = 0
    for b, row in enumerate(sentences):
        for s in row:
            nodes = treereg_nodes(s)
            if not nodes:
                continue
            for cands, g in nodes:
                rows.append([[pairs.setdefault((b, *t), len(pairs)) if t else -1 for t in c] for c in cands])
                gold.append(g)
                sentence_of.append(n_sentences)
                width = max(width, len(cands))
            n_sentences += 1
    if not rows:
        return hidden.new_zeros((), dtype=torch.float32)
    device = hidden.device
    key = torch.tensor(list(pairs), device=device)  # [P, 3]: row, context position, end position
    h = hidden.float()
    terms = orth_norms(h[key[:, 0], key[:, 1]], h[key[:, 0], key[:, 2]])
    terms = torch.cat([terms, terms.new_zeros(1)])  # index -1: a zero term
    pad = [-1, -1, -1, -1]
    idx = torch.tensor([r + [pad] * (width - len(r)) for r in rows], device=device)  # [N, C, 4]
    valid = torch.tensor([[True] * len(r) + [False] * (width - len(r)) for r in rows], device=device)
    scores = terms[idx].sum(-1).masked_fill(~valid, -math.inf)
    ce = F.cross_entropy(scores, torch.tensor(gold, device=device), reduction="none")
    owner = torch.tensor(sentence_of, device=device)
    per_sentence = torch.zeros(n_sentences, device=device).index_add(0, owner, ce)
    count = torch.zeros(n_sentences, device=device).index_add(0, owner, torch.ones_like(ce))
    return (per_sentence / count).mean()

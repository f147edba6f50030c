"""The SiPE hexatag prior and its auxiliary objective (SiPE §3.1, docs/design.md §2).

    prior_p = m_p * (E_T[tau_p] + E_N[nu_p] (+ E_D[deprel_p]))

tau_p in {tl=0, tr=1}, nu_p in {nl-L=0, nl-R=1, nr-L=2, nr-R=3, eos=4}; m_p = 1 on a word's first
subword and 0 elsewhere (tag id -100). E_T is 2 x d and E_N is 5 x d: the prior itself is 7d
parameters (+ n_deprels x d with E_D). That is the whole cost of *input* injection only: the other
sites add their projections (PP-SiPE's W_E is d x d per layer, or one shared; the attention-bias
sites add W_K^tag and W_V^tag), and the tag heads add (d + 1) x 7.
``structpe.models.registry.sipe_parameter_count`` gives the exact extra count of a config
(``structpe pretrain --list`` prints it per recipe).

Because the prior at a position takes one of only 1 + 2*5 (x n_deprels) values, every consumer
that projects it (W_E, W_delta, W_K^tag ...) can project the small ``pair_table()`` and gather
with ``pair_ids()`` instead of projecting an [L, d] tensor -- this is what keeps the position
pathway's c_ij an [L x 11] table per query rather than an O(L^2 d) product.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from structpe.errors import StructpeError

# the tag inventory lives in structpe.syntax.hexatags (docs/design.md §1)
from structpe.syntax.hexatags import IGNORE_INDEX, N_NONTERMINALS, N_TERMINALS


class TagIdError(StructpeError):
    """Tag tensors hold an id outside the tag inventory (and not -100)."""


def _refuse(bad: torch.Tensor, summary: str, detail: Callable[[int, int], str]) -> None:
    """Raise TagIdError with ``detail(row, col)`` of the first True in ``bad``. Inside a compiled
    graph (torch.compile training) a data-dependent branch would break the graph, so the check
    asserts in it instead, with ``summary`` (no position)."""
    if torch.compiler.is_compiling():
        torch._assert_async(~bad.any(), summary)
    elif bool(bad.any()):
        row, col = (int(v) for v in bad.nonzero()[0])
        raise TagIdError(detail(row, col))


def check_tag_ids(name: str, ids: torch.Tensor, n: int) -> None:
    """Raise TagIdError naming the first (row, position) whose id is neither -100 nor in [0, n)."""
    bad = (ids != IGNORE_INDEX) & ((ids < 0) | (ids >= n))
    _refuse(bad, f"{name} holds an id that is neither -100 nor in 0..{n - 1}",
            lambda r, c: f"{name}[{r}, {c}] = {int(ids[r, c])} is not a valid id "
            f"(expected -100 or 0..{n - 1})")


def tagged_positions(terminal_ids: torch.Tensor, nonterminal_ids: torch.Tensor) -> torch.Tensor:
    """m_p (positions with a tag), after checking that both tag tensors are -100 at the same places;
    raise TagIdError naming the first position where they disagree."""
    mask = terminal_ids != IGNORE_INDEX
    _refuse(mask != (nonterminal_ids != IGNORE_INDEX),
            "terminal_ids and nonterminal_ids disagree on which positions carry a tag",
            lambda r, c: f"terminal_ids and nonterminal_ids disagree on which positions carry a tag "
            f"(first at [{r}, {c}]); both must be -100 at the same positions")
    return mask


class HexatagPrior(nn.Module):
    """prior_p = m_p (E_T[tau_p] + E_N[nu_p] (+ E_D[deprel_p])), zero where a position has no tag."""

    def __init__(self, d_model: int, n_deprels: int = 0, init_std: float = 0.02):
        super().__init__()
        self.d_model = d_model
        self.n_deprels = n_deprels
        self.terminal = nn.Embedding(N_TERMINALS, d_model)  # E_T
        self.nonterminal = nn.Embedding(N_NONTERMINALS, d_model)  # E_N
        self.deprel = nn.Embedding(n_deprels, d_model) if n_deprels else None  # E_D (optional)
        for emb in (self.terminal, self.nonterminal, self.deprel):
            if emb is not None:
                nn.init.normal_(emb.weight, std=init_std)

    @property
    def n_pair_values(self) -> int:
        """Number of distinct prior vectors, including the all-zero "no tag" vector at index 0."""
        return 1 + N_TERMINALS * N_NONTERMINALS * max(self.n_deprels, 1)

    def tag_mask(
        self, terminal_ids: torch.Tensor, nonterminal_ids: torch.Tensor, keep: torch.Tensor | None = None
    ) -> torch.Tensor:
        """m_p as a bool tensor [B, L]; validates the ids and that both tag tensors agree on m_p."""
        check_tag_ids("terminal_ids", terminal_ids, N_TERMINALS)
        check_tag_ids("nonterminal_ids", nonterminal_ids, N_NONTERMINALS)
        mask = tagged_positions(terminal_ids, nonterminal_ids)
        return mask if keep is None else mask & keep

    def forward(
        self, terminal_ids: torch.Tensor, nonterminal_ids: torch.Tensor,
        deprel_ids: torch.Tensor | None = None, keep: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The prior [B, L, d]; ``keep`` (bool [B, L]) zeroes more positions, e.g. MLM-masked ones."""
        return self.pair_table()[self.pair_ids(terminal_ids, nonterminal_ids, deprel_ids, keep)]

    def pair_ids(
        self, terminal_ids: torch.Tensor, nonterminal_ids: torch.Tensor,
        deprel_ids: torch.Tensor | None = None, keep: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Index into ``pair_table()`` per position [B, L]: 0 = no tag, else 1 + ((d*2 + tau)*5 + nu)."""
        mask = self.tag_mask(terminal_ids, nonterminal_ids, keep)
        t = terminal_ids.clamp_min(0)
        n = nonterminal_ids.clamp_min(0)
        idx = t * N_NONTERMINALS + n
        if self.deprel is not None:
            if deprel_ids is None:
                raise ValueError("this prior has a DEPREL table (n_deprels > 0): pass deprel_ids")
            check_tag_ids("deprel_ids", deprel_ids, self.n_deprels)
            idx = idx + deprel_ids.clamp_min(0) * (N_TERMINALS * N_NONTERMINALS)
        return torch.where(mask, idx + 1, torch.zeros_like(idx))

    def pair_table(self) -> torch.Tensor:
        """All distinct prior vectors [n_pair_values, d]; row 0 is the zero vector (no tag)."""
        t, n = self.terminal.weight, self.nonterminal.weight
        table = (t[:, None, :] + n[None, :, :]).reshape(-1, self.d_model)
        if self.deprel is not None:
            table = (self.deprel.weight[:, None, :] + table[None, :, :]).reshape(-1, self.d_model)
        return torch.cat([table.new_zeros(1, self.d_model), table], dim=0)


class TagHeads(nn.Module):
    """The auxiliary heads: terminal (2-way) and non-terminal (5-way) logits from hidden states."""

    def __init__(self, d_model: int):
        super().__init__()
        self.terminal = nn.Linear(d_model, N_TERMINALS)
        self.nonterminal = nn.Linear(d_model, N_NONTERMINALS)

    def forward(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.terminal(hidden), self.nonterminal(hidden)


def mlm_tag_targets(
    terminal_ids: torch.Tensor, nonterminal_ids: torch.Tensor, labels: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Masked LM rule: at masked positions (labels != -100) predict the position's own tags."""
    masked = labels != IGNORE_INDEX
    ignore = torch.full_like(terminal_ids, IGNORE_INDEX)
    return torch.where(masked, terminal_ids, ignore), torch.where(masked, nonterminal_ids, ignore)


def causal_tag_targets(
    terminal_ids: torch.Tensor, nonterminal_ids: torch.Tensor, from_start: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """Causal LM rule (SiPE §A.1): each first-subword position predicts the tags of the next tagged
    position, L_T = -sum_{p: m_p = 1} log p_T(tau_next(p) | h_p) (and L_N likewise).

    ``from_start`` (structpe's choice, ``SiPEConfig.joint_tag_loss``, default on): position 0 (BOS,
    or the first token of a packed row) is a source too when it carries no tag, so the first word's
    tags are also predicted and a joint p(x, T) pays for every tag. The paper has no such term;
    ``from_start=False`` gives exactly its sum over m_p = 1. Positions with no later tagged position
    get -100.
    """
    bsz, length = terminal_ids.shape
    tagged = terminal_ids != IGNORE_INDEX
    idx = torch.arange(length, device=terminal_ids.device).expand(bsz, length)
    none = torch.full_like(idx, length)
    pos = torch.where(tagged, idx, none)
    # nearest tagged position at or after p, then shift by one to get "strictly after p"
    at_or_after = torch.flip(torch.cummin(torch.flip(pos, [1]), dim=1).values, [1])
    after = torch.cat([at_or_after[:, 1:], none[:, :1]], dim=1)
    source = tagged | (idx == 0) if from_start else tagged
    valid = source & (after < length)
    gather_at = after.clamp_max(length - 1)
    ignore = torch.full_like(terminal_ids, IGNORE_INDEX)
    t = torch.where(valid, terminal_ids.gather(1, gather_at), ignore)
    n = torch.where(valid, nonterminal_ids.gather(1, gather_at), ignore)
    return t, n


def tag_losses(
    terminal_logits: torch.Tensor,
    nonterminal_logits: torch.Tensor,
    terminal_targets: torch.Tensor,
    nonterminal_targets: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """CE_T and CE_N (mean over positions with a target; exactly 0 when there is none)."""

    def ce(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        # sum / count rather than the mean reduction: 0 (not NaN) when no position has a target,
        # with no data-dependent branch (which would break a torch.compile graph)
        total = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), target.reshape(-1),
                                reduction="sum")
        return total / (target != IGNORE_INDEX).sum().clamp(min=1)

    return ce(terminal_logits, terminal_targets), ce(nonterminal_logits, nonterminal_targets)


def add_causal_tag_loss(
    loss: torch.Tensor | None,
    terminal_logits: torch.Tensor,
    nonterminal_logits: torch.Tensor,
    terminal_ids: torch.Tensor,
    nonterminal_ids: torch.Tensor,
    weight: float,
    from_start: bool = True,
) -> tuple[torch.Tensor | None, torch.Tensor, torch.Tensor]:
    """The causal next-tag terms of a decoder: (loss + weight (CE_T + CE_N), CE_T, CE_N).

    One rule for every causal model (Transformer-XL, the HF adapter): the heads at position p
    predict the tags of the next tagged position (``causal_tag_targets``); the terms are added to
    the LM loss only when there is one and ``weight`` > 0, and are always returned for logging.
    """
    device = terminal_logits.device
    t_target, n_target = causal_tag_targets(
        terminal_ids.to(device), nonterminal_ids.to(device), from_start=from_start
    )
    terminal_loss, nonterminal_loss = tag_losses(terminal_logits, nonterminal_logits, t_target, n_target)
    if loss is not None and weight > 0:
        loss = loss + weight * (terminal_loss + nonterminal_loss)
    return loss, terminal_loss, nonterminal_loss

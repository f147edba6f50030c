"""Input-side SiPE injection and its fusion ablations (SiPE eq. 2, 11 and table 12; docs/design.md §2).

      add       x'_p = x_p + prior_p                         (eq. 2 / 11; ADD_T_NT)
      alpha     x'_p = a x_p + (1 - a) prior_p               (ADD_T_NT (alpha), ADD_DNT (alpha))
      concat    x'_p = W [x_p; part_1; part_2 (; part_3)]    (CONCAT_T_NT, CONCAT_POS_*)
      residual  h^(1) = LN(x + prior + Attn(x))              (prior on the first skip branch)

where x_p is the raw embedding sum before the embedding LayerNorm and prior_p =
m_p (E_T[tau_p] + E_N[nu_p]) (or with E_D[deprel_p]; ``parts`` picks which tables form it).
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import initialization as init

from structpe.modules.init_rules import apply_init_rule, set_init
from structpe.modules.prior import HexatagPrior
from structpe.syntax.hexatags import N_NONTERMINALS, N_TERMINALS

PRIOR_PART_ORDER = {  # concatenation order of SiPE table 12 (x first)
    "t_nt": ("t", "nt"),
    "t_nt_dr": ("nt", "t", "dr"),  # CONCAT_POS_NT_T_DR = W [x; n; t; dr]
    "dr_nt": ("dr", "nt"),  # CONCAT_POS_DNT = W [x; dr; n]
}


class InputPrior(nn.Module):
    """Input-side SiPE injection with one of the fusions of SiPE table 12.

    The prior at a position takes one of at most 1 + 2*5 (x n_deprels) values, so every fusion
    builds that small table once per forward and gathers it by ``HexatagPrior.pair_ids``: for
    ``concat``, W [x; t; n] = W_x x + (W_t E_T)[tau] + (W_n E_N)[nu] -- the tag blocks of W are
    applied to the tables, never to [B, L, d] tensors, and the whole fusion costs one d x d product.
    """

    def __init__(
        self,
        d_model: int,
        fusion: str = "add",
        parts: str = "t_nt",
        n_deprels: int = 0,
        init_std: float = 0.02,
        proj_init_std: float = 0.0,
        alpha_init: float = 0.5,
    ):
        super().__init__()
        if parts not in PRIOR_PART_ORDER:
            raise ValueError(f"parts must be one of {sorted(PRIOR_PART_ORDER)}, got {parts!r}")
        self.fusion = fusion
        self.parts = PRIOR_PART_ORDER[parts]
        self.index_order = [name for name in ("dr", "t", "nt") if name in self.parts]  # pair-id layout
        self.d_model = d_model
        self.tags = HexatagPrior(d_model, n_deprels, init_std=init_std)
        self.alpha_init = alpha_init
        if self.fusion == "alpha":
            self.alpha = nn.Parameter(torch.tensor(float(alpha_init)))
        if self.fusion == "concat":  # W = [I | ~0]: starts as the unmodified encoder
            self.proj = nn.Linear(d_model * (1 + len(self.parts)), d_model)
            set_init(self.proj, "identity_concat", proj_init_std)
            apply_init_rule(self.proj)

    def reset_sipe_parameters(self) -> None:
        """alpha = alpha_init (the concat projection carries its own init rule)."""
        if self.fusion == "alpha":
            init.constant_(self.alpha, self.alpha_init)

    def _tables(self) -> dict[str, torch.Tensor]:
        """Each part's embedding table, through its block of W for ``concat``."""
        tables = {"t": self.tags.terminal.weight, "nt": self.tags.nonterminal.weight}
        if self.tags.deprel is not None:
            tables["dr"] = self.tags.deprel.weight
        if self.fusion == "concat":
            d = self.d_model
            blocks = self.proj.weight.split(d, dim=1)[1:]  # W_part, in the concat order of table 12
            tables = {name: tables[name] @ w.T for name, w in zip(self.parts, blocks, strict=True)}
        return tables

    def _pair_ids(self, terminal_ids, nonterminal_ids, deprel_ids, keep) -> torch.Tensor:
        """``HexatagPrior.pair_ids`` (0 = no prior, else 1 + (dr * 2 + t) * 5 + nt); ``dr_nt`` has no
        terminal part, so its ids drop t: 1 + dr * 5 + nt."""
        ids = self.tags.pair_ids(terminal_ids, nonterminal_ids, deprel_ids, keep)
        if "t" in self.parts:
            return ids
        flat = ids - 1
        dr_nt = flat // (N_TERMINALS * N_NONTERMINALS) * N_NONTERMINALS + flat % N_NONTERMINALS
        return torch.where(ids > 0, dr_nt + 1, ids)

    def _summed_table(self) -> torch.Tensor:
        """[1 + prod(sizes), d]: row 0 is zero, then every sum of one row per part (pair-id order)."""
        tables = self._tables()
        out = tables[self.index_order[0]]
        for name in self.index_order[1:]:
            out = (out[:, None, :] + tables[name][None, :, :]).reshape(-1, out.shape[-1])
        return torch.cat([out.new_zeros(1, out.shape[-1]), out], dim=0)

    def prior(self, terminal_ids, nonterminal_ids, deprel_ids=None, keep=None) -> torch.Tensor:
        """The summed (for concat: projected) prior [B, L, d], zero where no tag or not kept."""
        return self._summed_table()[self._pair_ids(terminal_ids, nonterminal_ids, deprel_ids, keep)]

    def forward(
        self, x: torch.Tensor, terminal_ids, nonterminal_ids, deprel_ids=None, keep=None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(x', skip_prior): x' enters the embedding LayerNorm; skip_prior goes on layer 1's skip branch."""
        prior = self.prior(terminal_ids, nonterminal_ids, deprel_ids, keep)
        if self.fusion == "concat":  # W [x; parts] = W_x x + b + sum_k W_k part_k
            w_x = self.proj.weight[:, : self.d_model]
            return nn.functional.linear(x, w_x, self.proj.bias) + prior, None
        if self.fusion == "residual":
            return x, prior
        if self.fusion == "alpha":
            return self.alpha * x + (1.0 - self.alpha) * prior, None
        return x + prior, None

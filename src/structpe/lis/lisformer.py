"""LISformer: a character-level causal Transformer whose rotary angles are LIS addresses.

LIS paper App. F.1 (and the KG models of App. F.3-F.4). One file, top to bottom: config, the
per-token structure of a character stream, the address module, attention, block, model.

Positional schemes (``LISformerConfig.pe``):
  rope    continuous RoPE, or any per-token positions the caller supplies (single score term)
  alibi   no rotation; score bias -m_h (i - j), slopes m_h = 2^-2, 2^-4, 2^-6, 2^-8 for 4 heads
  lis     local position (reset per instance) + optional learned role angles + a content-derived
          angle for every *completed* instance (the line address of F.1, the fact address of F.4)
  random  as ``lis`` but each completed instance gets xi_e ~ N(0, 1)^(d/2), resampled every pass

Causality (docs/design.md §5, "Causality pitfall"). The address of instance e is computed from all of its
characters, so from the point of view of a query inside e, e is not complete yet. The score is
therefore two terms selected by a same-instance mask:

    score_ij = (R_loc(i) q_i)^T (R_loc(j) k_j)          if inst(j) == inst(i)   (local only)
    score_ij = (R_loc(i) q_i)^T (R_e(j) R_loc(j) k_j)   if inst(j) <  inst(i)   (+ address of e(j))

i.e. the query's own, still incomplete, instance acts with R_e = I. ``query_address="previous"``
(an ablation, not the default) rotates the query of the addressed term by the address of the
instance just before its own, R_e(i)-1, so that term becomes the paper's relative journey
A(i)^-1 A(j) with the query's incomplete instance replaced by the latest complete one. Both terms go through
``F.scaled_dot_product_attention`` over the keys stacked twice ([addressed; local]) with a boolean
mask that keeps exactly one copy of every causal key; queries are processed in chunks so each chunk
only sees the keys it can reach (``token_structure.two_term_plan``). ``attn_backend="flex"`` runs
the same score as one block-sparse FlexAttention call that skips fully masked blocks
(``structpe.lis.flex``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from transformers.modeling_outputs import CausalLMOutput

from structpe.io import load_module, save_module
from structpe.lis.addresses import ContentInstanceAddress, RoleAngles
from structpe.lis.flex import FlexPlan, alibi_flex_plan, flex_attend, two_term_flex_plan, use_flex
from structpe.lis.token_structure import TokenStructure, continuous_structure, line_structure, two_term_plan
from structpe.modules.init_rules import gpt2_init
from structpe.modules.rotary import apply_rotary, rope_angles, rope_frequencies
from structpe.modules.token_ids import check_token_ids

MODEL_TYPE = "structpe-lisformer"
PE_SCHEMES = ("rope", "alibi", "lis", "random")
QUERY_ADDRESSES = ("none", "previous")
ACTIVATIONS = {"gelu": nn.GELU, "relu": nn.ReLU}


@dataclass
class LISformerConfig:
    vocab_size: int = 65
    n_layers: int = 4
    n_heads: int = 4
    d_model: int = 128
    dropout: float = 0.0
    theta: float = 10000.0
    pe: str = "lis"
    n_roles: int = 0  # > 0: learned role/slot angle table (role 0 = no role)
    # False: the table has exactly n_roles rows (ids 0..n_roles-1) and -1 marks "no role", so the
    # slot-angle table of App. F.3 is 57 x 4 x d_head/2 parameters with no unused row
    null_role_row: bool = True
    role_init_std: float = 0.5
    bias: bool = True
    attn_chunk: int = 256  # query chunk of the two-term score (exact for any value; speed only)
    # instance addresses in R^(d_model/2): every head gets its own angles (LIS App. F.1 maps a line
    # to an angle vector in R^{d/2}); False: one d_head/2 vector shared by all heads
    head_addresses: bool = True
    # extension, not in the paper: ALiBi over instance (line) distance on the addressed term, so
    # distant lines fade; the own-line attention diagnostic motivates it (docs/lis.md)
    instance_alibi: bool = False
    # ablation, not the default: what rotates the query on the addressed (earlier-instance) term.
    # "none": nothing (the query's own instance is incomplete, R_e = I); "previous": the address of
    # the instance before the query's (complete, so causal), giving the relative journey
    # R_e(i)-1^-1 R_e(j) of the paper's A(i)^-1 A(j) form (docs/lis.md, "Why the curve rises")
    query_address: str = "none"
    activation: str = "gelu"  # feed-forward nonlinearity: gelu (F.1) or relu (the KG models of F.3)
    # two-term / ALiBi attention: sdpa (chunked masked SDPA, runs everywhere), flex (block-sparse
    # FlexAttention where it can run, else sdpa; see structpe.lis.flex), auto (flex on CUDA only)
    attn_backend: str = "sdpa"

    def __post_init__(self) -> None:
        if self.pe not in PE_SCHEMES:
            raise ValueError(f"pe must be one of {PE_SCHEMES}, got {self.pe!r}")
        if self.d_model % self.n_heads or (self.d_model // self.n_heads) % 2:
            raise ValueError("d_model / n_heads must be an even integer (rotary pairs)")
        if self.instance_alibi and self.pe not in ("lis", "random"):
            raise ValueError("instance_alibi biases the two-term score; it needs pe='lis' or 'random'")
        if self.query_address not in QUERY_ADDRESSES:
            raise ValueError(f"query_address must be one of {QUERY_ADDRESSES}, got {self.query_address!r}")
        if self.query_address != "none" and self.pe not in ("lis", "random"):
            raise ValueError(
                "query_address rotates the two-term score's queries; it needs pe='lis' or 'random'"
            )
        if self.query_address != "none" and self.attn_backend == "flex":
            raise ValueError("query_address runs on the SDPA path only (attn_backend sdpa or auto)")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {list(ACTIVATIONS)}, got {self.activation!r}")
        if self.attn_backend not in ("sdpa", "flex", "auto"):
            raise ValueError(f"attn_backend must be sdpa, flex or auto, got {self.attn_backend!r}")
        if self.n_roles and self.pe == "alibi":
            raise ValueError("role angles are rotary; they do not combine with pe='alibi'")

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """m_h = 2^(-8 h / H), h = 1..H (for H = 4: 2^-2, 2^-4, 2^-6, 2^-8; Press et al. 2022)."""
    return torch.tensor([2.0 ** (-8.0 * (h + 1) / n_heads) for h in range(n_heads)])


# --- addresses ----------------------------------------------------------------------------------------
class Addresses(nn.Module):
    """Computes, once per forward, the rotary angles every layer uses.

    Returns (q_angles, k_angles_local, k_angles_addressed or None, q_angles_addressed or None):
    [B, 1, L, d_head/2], the addressed keys' angles [B, H, L, d_head/2] (one address per head) or
    [B, 1, L, d_head/2], and, with ``query_address="previous"`` only, the queries' angles on the
    addressed term (local + the address of the instance before the query's), shaped like the keys'.
    A(p, s, e) = R_pos^p R_s R_e (LIS Prop. 4.7): angles = p * w + phi_s + phi_e.
    """

    def __init__(self, cfg: LISformerConfig):
        super().__init__()
        self.cfg = cfg
        n_pairs = cfg.d_head // 2
        self.address_heads = cfg.n_heads if cfg.head_addresses else 1
        self.register_buffer("freqs", rope_frequencies(cfg.d_head, cfg.theta), persistent=False)
        self.roles = (
            RoleAngles(cfg.n_roles, n_pairs, cfg.role_init_std, zero_role=0 if cfg.null_role_row else None)
            if cfg.n_roles
            else None
        )
        n_addr = self.address_heads * n_pairs
        self.content = ContentInstanceAddress(cfg.d_model, n_addr) if cfg.pe == "lis" else None

    def forward(self, x: torch.Tensor, st: TokenStructure):
        cfg = self.cfg
        local = st.position.float()[..., None] * self.freqs  # R_pos^p
        role = self.roles(st.role) if (self.roles is not None and st.role is not None) else None
        if role is not None:
            local = local + role  # R_pos^p R_s
        if cfg.pe == "rope":
            return local[:, None], local[:, None], None, None
        if cfg.pe == "alibi":
            return None, None, None, None
        n_inst = int(st.instance.max().item()) + 1
        if cfg.pe == "lis":
            # rotate embeddings by their local angles at the embedding width (roles repeated per head)
            emb_local = rope_angles(st.position, cfg.d_model, cfg.theta)
            if role is not None:
                emb_local = emb_local + role.repeat(1, 1, cfg.n_heads)
            table = self.content.instance_angles(x, emb_local, st.address, n_inst)
        else:  # random line addresses, fresh every pass
            # one draw per possible instance index (L of them), so a line's draw never depends on
            # how many lines follow it; instances no token addresses keep R_e = I
            n_addr = self.address_heads * local.shape[-1]
            xi = torch.randn(x.shape[0], x.shape[1], n_addr, device=x.device)
            addressed = torch.zeros_like(st.address).scatter_add_(
                1, st.address.clamp(min=0), (st.address >= 0).long()
            )
            table = xi * (addressed > 0)[..., None]
        local = local[:, None]
        k_addr = local + self._heads(_rows(table, st.address))  # ... R_e for keys of completed instances
        q_addr = None
        if cfg.query_address == "previous":  # the instance before the query's is complete: causal
            q_addr = local + self._heads(_rows(table, st.instance - 1))
        return local, local, k_addr, q_addr

    def _heads(self, inst: torch.Tensor) -> torch.Tensor:
        """[B, L, heads * pairs] -> [B, heads, L, pairs]."""
        B, L, _ = inst.shape
        return inst.view(B, L, self.address_heads, -1).transpose(1, 2)


def _rows(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Per-token rows of a per-instance table [B, N, A] at ``index`` [B, L]; zero where index < 0."""
    rows = torch.gather(table, 1, index.clamp(min=0)[..., None].expand(-1, -1, table.shape[-1]))
    return rows * (index >= 0)[..., None]


# --- the Transformer -----------------------------------------------------------------------------------
class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: LISformerConfig):
        super().__init__()
        self.cfg = cfg
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=cfg.bias)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=cfg.bias)
        self.drop = nn.Dropout(cfg.dropout)

    def _qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        B, L, D = x.shape
        H = self.cfg.n_heads
        q, k, v = self.qkv(x).view(B, L, 3, H, D // H).permute(2, 0, 3, 1, 4)  # each [B, H, L, hd]
        return q, k, v

    @staticmethod
    def two_term_qk(q, k, q_ang, k_ang, k_ang_addr, q_ang_addr=None):
        """Rotated queries and (addressed, local) keys of the two-term score.

        With a query-side address (``q_ang_addr``) the two terms rotate the query differently yet
        share one softmax: the query becomes [q_addressed | q_local], the addressed keys
        [k_addressed | 0] and the local keys [0 | k_local], so each dot product is exactly one
        term's; the caller keeps the scale at 1/sqrt(d_head).
        """
        q_loc, ka, kl = apply_rotary(q, q_ang), apply_rotary(k, k_ang_addr), apply_rotary(k, k_ang)
        if q_ang_addr is None:
            return q_loc, ka, kl
        zero = torch.zeros_like(kl)
        q_addr = apply_rotary(q, q_ang_addr)
        return torch.cat([q_addr, q_loc], -1), torch.cat([ka, zero], -1), torch.cat([zero, kl], -1)

    @torch.no_grad()
    def own_instance_mass(self, x, q_ang, k_ang, k_ang_addr, plan, q_ang_addr=None) -> torch.Tensor:
        """Attention probability each query puts on keys of its own instance, [B, H, L].

        A diagnostic for the two-term score: the explicit softmax over the plan's
        [addressed | local] keys, summed over the local (same-instance) block.
        """
        q, k, v = self._qkv(x)
        q, ka, kl = self.two_term_qk(q, k, q_ang, k_ang, k_ang_addr, q_ang_addr)
        out = []
        for s, e, s0, m in plan:
            keys = torch.cat([ka[:, :, :e], kl[:, :, s0:e]], dim=2)
            scores = q[:, :, s:e] @ keys.transpose(-1, -2) / math.sqrt(v.shape[-1])
            bias = m
            if m.dtype == torch.bool:
                bias = torch.zeros_like(m, dtype=q.dtype).masked_fill(~m, float("-inf"))
            out.append(torch.softmax(scores + bias, -1)[..., e:].sum(-1))
        return torch.cat(out, dim=2)

    def forward(self, x, q_ang, k_ang, k_ang_addr, mask, q_ang_addr=None):
        B, L, D = x.shape
        q, k, v = self._qkv(x)
        p = self.cfg.dropout if self.training else 0.0
        if isinstance(mask, FlexPlan):  # block-sparse path (two-term or ALiBi)
            if k_ang_addr is not None:
                q, ka, kl = apply_rotary(q, q_ang), apply_rotary(k, k_ang_addr), apply_rotary(k, k_ang)
                y = flex_attend(q, kl, v, mask, ka)
            else:
                y = flex_attend(q, k, v, mask)
        elif k_ang_addr is not None:  # two-term LIS score (see module docstring); mask = plan
            q, ka, kl = self.two_term_qk(q, k, q_ang, k_ang, k_ang_addr, q_ang_addr)
            scale = None if q_ang_addr is None else 1 / math.sqrt(v.shape[-1])  # None: 1/sqrt(d_head)
            ys = []
            for s, e, s0, m in mask:
                keys = torch.cat([ka[:, :, :e], kl[:, :, s0:e]], dim=2)
                vals = torch.cat([v[:, :, :e], v[:, :, s0:e]], dim=2)
                ys.append(
                    F.scaled_dot_product_attention(
                        q[:, :, s:e], keys, vals, attn_mask=m, dropout_p=p, scale=scale
                    )
                )
            y = torch.cat(ys, dim=2)
        elif mask is not None:  # ALiBi bias
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        else:
            q, k = apply_rotary(q, q_ang), apply_rotary(k, k_ang)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=p)
        return self.drop(self.proj(y.transpose(1, 2).reshape(B, L, D)))


class Block(nn.Module):
    def __init__(self, cfg: LISformerConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.d_model, 4 * cfg.d_model, bias=cfg.bias),
            ACTIVATIONS[cfg.activation](),
            nn.Linear(4 * cfg.d_model, cfg.d_model, bias=cfg.bias),
            nn.Dropout(cfg.dropout),
        )

    def forward(self, x, *attn_args):
        x = x + self.attn(self.ln1(x), *attn_args)
        return x + self.mlp(self.ln2(x))


class LISformer(nn.Module):
    """Pre-norm causal character LM; ``forward(idx, targets=None, structure=None)``.

    ``structure`` defaults to lines split at ``newline_id`` (pe lis/random) or continuous
    positions (pe rope); KG models pass their own (facts as instances, slot roles).
    """

    def __init__(self, cfg: LISformerConfig, newline_id: int | None = None):
        super().__init__()
        self.cfg = cfg
        self.newline_id = newline_id
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)
        self.addresses = Addresses(cfg)
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layers)])
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.pe == "alibi":
            self.register_buffer("slopes", alibi_slopes(cfg.n_heads), persistent=False)
        self.apply(gpt2_init)

    def _instance_slopes(self) -> torch.Tensor | None:
        if not self.cfg.instance_alibi:
            return None
        return alibi_slopes(self.cfg.n_heads).to(self.tok_emb.weight.device)

    def default_structure(self, idx: torch.Tensor) -> TokenStructure:
        if self.cfg.pe in ("lis", "random"):
            if self.newline_id is None:
                raise ValueError("pe='lis'/'random' without a structure needs newline_id")
            return line_structure(idx, self.newline_id)
        return continuous_structure(idx)

    def forward(
        self, idx: torch.Tensor, targets: torch.Tensor | None = None, structure: TokenStructure | None = None
    ) -> CausalLMOutput:
        check_token_ids(idx, self.cfg.vocab_size, "idx")
        B, L = idx.shape
        st = structure if structure is not None else self.default_structure(idx)
        x = self.tok_emb(idx)
        q_ang, k_ang, k_addr, q_addr = self.addresses(x, st)
        mask = None
        # FlexAttention has no dropout: the block-sparse path serves dropout-free passes only; a
        # query-side address (an ablation) runs on the SDPA path
        flex = (
            (self.cfg.dropout == 0 or not self.training)
            and q_addr is None
            and use_flex(self.cfg.attn_backend, idx.device)
        )
        if k_addr is not None and flex:
            mask = two_term_flex_plan(st.instance, self._instance_slopes())
        elif k_addr is not None:
            mask = two_term_plan(st.instance, self.cfg.attn_chunk, x.dtype, self._instance_slopes())
        elif self.cfg.pe == "alibi" and flex:
            mask = alibi_flex_plan(B, L, self.slopes)
        elif self.cfg.pe == "alibi":
            t = torch.arange(L, device=idx.device)
            dist = (t[:, None] - t[None, :]).float()
            mask = (-self.slopes[:, None, None] * dist).masked_fill(dist < 0, float("-inf"))[None]
        x = self.drop(x)
        for block in self.blocks:
            x = block(x, q_ang, k_ang, k_addr, mask, q_addr)
        logits = self.lm_head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-100)
        return CausalLMOutput(loss=loss, logits=logits)

    @torch.no_grad()
    def own_instance_attention(
        self, idx: torch.Tensor, structure: TokenStructure | None = None
    ) -> torch.Tensor:
        """Per layer, the attention mass every query puts on its own instance: [n_layers, B, H, L].

        Lines (facts) compete with earlier, addressed ones for attention; how much mass stays on
        the query's own line shows whether longer contexts dilute it (pe lis / random only).
        """
        if self.cfg.pe not in ("lis", "random"):
            raise ValueError("own-instance attention is defined for the two-term score (pe lis / random)")
        st = structure if structure is not None else self.default_structure(idx)
        x = self.tok_emb(idx)
        q_ang, k_ang, k_addr, q_addr = self.addresses(x, st)
        plan = two_term_plan(st.instance, self.cfg.attn_chunk, x.dtype, self._instance_slopes())
        masses = []
        for block in self.blocks:
            masses.append(block.attn.own_instance_mass(block.ln1(x), q_ang, k_ang, k_addr, plan, q_addr))
            x = block(x, q_ang, k_ang, k_addr, plan, q_addr)
        return torch.stack(masses)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    # --- persistence (config JSON + safetensors; never pickle) ---
    def save_pretrained(self, folder: str | Path) -> Path:
        meta = {"config": asdict(self.cfg), "newline_id": self.newline_id}
        return save_module(self, folder, meta, MODEL_TYPE)

    @classmethod
    def from_pretrained(cls, folder: str | Path, device: str = "cpu") -> LISformer:
        def build(meta: dict) -> LISformer:
            return cls(LISformerConfig(**meta["config"]), newline_id=meta["newline_id"])

        return load_module(folder, build, "LISformer", device)

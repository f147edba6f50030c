"""Transformer-XL-style causal decoder with every SiPE injection site (SiPE §3.3, App. A.2-A.4).

No cross-segment memory (mem_len = 0, purely causal), sinusoidal relative positions, a per-layer
W_R and per-layer u/v biases (HF's ``untie_r``), token embeddings scaled by sqrt(d_model) as in
TXL, a tied output projection (no adaptive softmax), pre- or post-LN, ReLU MLP.
For a query i, key j and head n of layer l (SiPE eq. 3, 5-9; Dai et al. 2019):

    AC_ij = <q_i + u, k_j>                               content
    BD_ij = <q_i + v, W_R r_{i-j}>                       position (r: sinusoid of the offset)
    c_ij  = <q_i + v, [W_E^l prior_j]_n> / sqrt(d_head)  tag alignment, prior_j = m_j (E_T[tau_j] + E_N[nu_j])

    none / input      logit = (AC + BD) / sqrt(d_head)              (input: h0 = e_tok + prior, eq. 4)
    position (PP)     logit = (AC + (1 + c) * BD) / sqrt(d_head)                                (eq. 6)
    disentangled      logit = (AC + BD) / sqrt(d_head) + c                                      (eq. 7)
    attn_bias         logit += <q_i, [W_K^tag prior_j]_n> / sqrt(d_head),
                      z_i = sum_j a_ij (v_j + [W_V^tag prior_j]_n)                         (eq. 8-9)
    lis_tree          AC_ij = <A(i) (q_i + u), A(j) k_j>, BD as in none      (LIS Def. 4.6; not SiPE)
                      A(i): rotation by word i's tree address theta_i (modules/tree_address.py)
    lis_tree2         AC_ij = <A(i) (q_i + u), A(j) k_j> where i and j are joined by arcs the tags up
                      to i determine, else <q_i + u, k_j>; A over joined components (two-term score)

(c, like the key bias, is "on the standard attention scale": it carries its own 1/sqrt(d_head).)

How the score reaches the fused kernel (``F.scaled_dot_product_attention``):
* BD is not bilinear in (q_i, something of j) -- it depends on i - j -- so it is materialised once
  as [B, H, L, L] (TXL's own cost) and passed as the additive float mask, together with the causal
  and padding -inf. `position` multiplies that mask by (1 + c) in ``TagGate``: c is read out of the
  [L x P] table by a product with one-hot(pair_j), and kept for backward.
  (On CPU a mask that needs a gradient -- BD always does -- sends SDPA to its math path in
  training; on CUDA the memory-efficient kernel takes the bias and returns its gradient. A bf16
  model training on CPU, ``train.fast_bf16``, computes the same softmax explicitly instead:
  ``_explicit_attention``, 2.2x faster than the math path there.)
* prior_j takes one of P <= 11 values (``HexatagPrior.pair_table``), so any term <q_i, f(prior_j)>
  is  sum_p <q_i, f_p> [pair_j = p]: the [L x P] per-query table rides in P extra query dims and
  one-hot(pair_j) in P extra key dims. `disentangled` and the attn_bias key term use this.
* the value bias rides in P extra value dims (one-hot(pair_j)): the kernel returns the attention
  mass per tag pair, [B, H, L, P], which one small matmul with the [P, d_head] table turns into
  sum_j a_ij [W_V^tag prior_j]_n.
No variant forms a [B, H, L, L, d] tensor. ``output_attentions=True`` takes a plain path that
writes the same equations out with an explicit softmax (and is what the tests compare against).
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import Cache, GenerationMixin, PreTrainedModel
from transformers import initialization as init

from structpe.models.config import SiPEConfig
from structpe.models.outputs import LastTokenClassifier, SiPEOutput, causal_lm_loss
from structpe.models.sipe_parts import hexatag_prior, prior_projection, tree_address
from structpe.models.txl_cache import SiPECache
from structpe.models.txl_parts import JoinedAddress, LayerPrior, TagGate, rel_shift, relative_embedding
from structpe.models.validate import CheckedModel, check_inputs
from structpe.modules.init_rules import apply_init_rule
from structpe.modules.prior import TagHeads, add_causal_tag_loss, check_tag_ids, tagged_positions
from structpe.modules.prior_projection import gather_per_key, pair_scores, tag_alignment
from structpe.modules.rotary import rotary_tables, rotate_with
from structpe.modules.syntax_losses import row_sentences, tpt_loss, treereg_loss
from structpe.modules.tree_address import joined_tree_paths, tree_paths
from structpe.syntax.hexatags import IGNORE_INDEX, N_NONTERMINALS, N_TERMINALS


class RelPartialLearnableAttention(nn.Module):
    """TXL relative multi-head attention (AC + BD) plus the SiPE score terms (or the LIS tree
    rotation) of one layer."""

    def __init__(self, config: SiPEConfig):
        super().__init__()
        self.n_heads, self.d_head = config.n_heads, config.d_head
        self.scale = 1.0 / math.sqrt(self.d_head)
        self.multiplicative = config.uses_position_prior  # (1 + c) * BD  vs  + c
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model, bias=False)
        self.r_net = nn.Linear(config.d_model, config.d_model, bias=False)  # W_R
        self.o_net = nn.Linear(config.d_model, config.d_model, bias=False)
        self.u = nn.Parameter(torch.zeros(self.n_heads, self.d_head))  # content bias
        self.v = nn.Parameter(torch.zeros(self.n_heads, self.d_head))  # position bias
        self.attn_dropout = config.attention_dropout

    def forward(
        self,
        h: torch.Tensor,
        r: torch.Tensor,
        allowed: torch.Tensor | None,
        prior: LayerPrior | None = None,
        output_attentions: bool = False,
        cache: SiPECache | None = None,
        layer_idx: int = 0,
        address: torch.Tensor | JoinedAddress | None = None,
        planted_heads: int = 0,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """h [B, L, D]; r [K, D] (offsets K-1..0) or, with a cache, (K, clamp_len);
        allowed bool [B, 1, L, K] (causal & padding; None: every key); K = cached + new keys;
        address [B, H, L, d_head/2]: the new positions' tree-address angles (lis_tree), a
        JoinedAddress (lis_tree2) or None; planted_heads: also return the attention probabilities
        of the first that many heads (``tpt``'s loss reads them; see ``_planted_probs``)."""
        bsz, length, _ = h.shape
        q, k, val = self.qkv(h).view(bsz, length, 3, self.n_heads, self.d_head).permute(2, 0, 3, 1, 4)
        joined = address if isinstance(address, JoinedAddress) else None
        if joined is not None:  # keys are cached unrotated: their addresses change as components join
            address = None
        if address is not None:  # A(j) k_j, cached as rotated: a word's address never changes
            cos, sin = rotary_tables(address)  # once per layer, shared by q and k
            k = rotate_with(k, cos, sin)
        if cache is None:
            r_k = self.r_net(r).view(-1, self.n_heads, self.d_head)
        else:  # earlier keys and values as they were computed; W_R r_o per offset kept, not redone
            k, val = cache.update(k, val, layer_idx)
            d_model = self.n_heads * self.d_head

            def project(offsets: torch.Tensor) -> torch.Tensor:
                return self.r_net(relative_embedding(offsets.to(h.device), d_model, h.dtype))

            klen, clamp = r
            r_k = cache.relative_keys(layer_idx, klen, clamp, project).view(-1, self.n_heads, self.d_head)
            if length > 1:
                r_k = r_k.flip(0)  # offsets K-1 .. 0, as the uncached r
        q_u = q + self.u[:, None, :]
        if address is not None:  # AC_ij = <A(i) (q_i + u), A(j) k_j> = <q_i + u, P(j->i) k_j>
            q_u = rotate_with(q_u, cos, sin)
        q_v = q + self.v[:, None, :]
        if cache is not None and length == 1:
            # a lone newest query needs no shift: its key j is at offset K-1-j, so the scores
            # against the ascending offsets 0 .. K-1 are BD flipped along the keys
            bd = torch.einsum("bhid,jhd->bhij", q_v, r_k).flip(-1)
        else:
            bd = torch.einsum("bhid,jhd->bhij", q_v, r_k)  # column k: offset K-1-k of the newest query
            if length > 1:  # a single query (no cache) reads its offsets K-1-j directly
                bd = rel_shift(bd)  # BD_ij = <q_i + v, W_R r_{i-j}>
        dropout_p = self.attn_dropout if self.training else 0.0
        if joined is not None:
            out, probs = self._joined(q_u, k, val, bd, allowed, joined, dropout_p)
            probs = probs if output_attentions else None
        elif output_attentions:
            out, probs = self._plain(q, k, val, q_u, q_v, bd, allowed, prior, dropout_p)
        else:
            out, probs = self._fused(q, k, val, q_u, q_v, bd, allowed, prior, dropout_p), None
            if planted_heads:
                probs = self._planted_probs(q_u, k, bd, allowed, planted_heads)
        return self.o_net(out.transpose(1, 2).reshape(bsz, length, -1)), probs

    def _fused(self, q, k, val, q_u, q_v, bd, allowed, prior, dropout_p):
        """One F.scaled_dot_product_attention call; see the module docstring for the layout."""
        bias = bd * self.scale
        q_parts, k_parts, v_parts = [q_u], [k], [val]
        if prior is not None:
            if prior.alignment is not None and self.multiplicative:
                per_pair = pair_scores(q_v, _pad_pairs(prior.alignment)) * self.scale
                bias = TagGate.apply(bias, per_pair, prior.pair_ids)  # (1 + c) * BD / sqrt(d_head)
            # per-pair query table [B, H, L, P]; SDPA's scale turns it into c / the key bias
            table = None
            if prior.alignment is not None and not self.multiplicative:
                table = pair_scores(q_v, _pad_pairs(prior.alignment))
            if prior.key_bias is not None:
                kb = pair_scores(q, _pad_pairs(prior.key_bias))
                table = kb if table is None else table + kb
            if table is not None or prior.value_bias is not None:  # one-hot(pair_j) as key / value dims
                onehot = _pair_onehot(prior.pair_ids, self.n_heads, _pad8(prior.n_pairs()), q.dtype)
            if table is not None:
                q_parts.append(table)
                k_parts.append(onehot)
            if prior.value_bias is not None:
                v_parts.append(onehot)
            elif table is not None:  # equal q/k/v widths keep SDPA on its fused kernel (not the math path)
                v_parts.append(torch.zeros_like(onehot))
        if allowed is not None:
            bias = bias.masked_fill(~allowed, float("-inf"))
        cat = lambda parts: parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)  # noqa: E731
        qs, ks, vs = cat(q_parts), cat(k_parts), cat(v_parts)
        if _bf16_cpu_training(self.qkv.weight, bias):
            out = _explicit_attention(qs, ks, vs, bias, dropout_p, self.scale)
        else:
            out = F.scaled_dot_product_attention(
                qs, ks, vs, attn_mask=bias, dropout_p=dropout_p, scale=self.scale
            )
        if prior is not None and prior.value_bias is not None:
            mass = out[..., self.d_head :]  # attention mass per tag pair [B, H, L, P]
            return out[..., : self.d_head] + torch.einsum(
                "bhip,hpd->bhid", mass, _pad_pairs(prior.value_bias)
            )
        return out[..., : self.d_head]

    def _joined(self, q_u, k, val, bd, allowed, address: JoinedAddress, dropout_p):
        """lis_tree2's two-term score with an explicit softmax: the tree term <A(i)(q_i + u), A(j) k_j>
        for joined pairs, the plain content term otherwise; BD for both. Rotating every key once per
        step is what re-addressing joined components costs under the cache (O(K d), as reading them)."""
        cos, sin = rotary_tables(address.angles)
        length = q_u.shape[-2]
        q_rot = rotate_with(q_u, cos[..., -length:, :], sin[..., -length:, :])
        tree = q_rot @ rotate_with(k, cos, sin).transpose(-1, -2)
        ac = torch.where(address.joined, tree, q_u @ k.transpose(-1, -2))
        logits = (ac + bd) * self.scale
        probs = (logits if allowed is None else logits.masked_fill(~allowed, float("-inf"))).softmax(dim=-1)
        return (F.dropout(probs, dropout_p) if dropout_p > 0 else probs) @ val, probs

    def _planted_probs(self, q_u, k, bd, allowed, heads: int) -> torch.Tensor:
        """softmax((AC + BD) / sqrt(d_head)) of the first ``heads`` heads [B, heads, L, K], computed
        beside the SDPA pass that carries the LM (injection is ``none`` for ``tpt``: no prior).
        Routing the whole layer through ``_plain`` instead stalled training under bf16 autocast at
        the unigram plateau although each step's gradients matched SDPA's to under 1% (cpu-mini,
        3 of 3 runs, with and without the loss, with ``_plain`` in float32 too; float32 training
        was fine): the LM's path is now exactly ``none``'s."""
        part = slice(0, heads)
        logits = (q_u[:, part] @ k[:, part].transpose(-1, -2) + bd[:, part]) * self.scale
        return (logits if allowed is None else logits.masked_fill(~allowed, float("-inf"))).softmax(dim=-1)

    def _plain(self, q, k, val, q_u, q_v, bd, allowed, prior, dropout_p):
        """The same equations with an explicit softmax; returns (z, attention probabilities)."""
        ac = q_u @ k.transpose(-1, -2)  # AC_ij = <q_i + u, k_j>
        logits = (ac + bd) * self.scale
        if prior is not None and prior.alignment is not None:
            c = tag_alignment(q_v, prior.alignment, prior.pair_ids)
            logits = (ac + (1 + c) * bd) * self.scale if self.multiplicative else logits + c
        if prior is not None and prior.key_bias is not None:
            logits = logits + tag_alignment(q, prior.key_bias, prior.pair_ids)
        probs = (logits if allowed is None else logits.masked_fill(~allowed, float("-inf"))).softmax(dim=-1)
        dropped = F.dropout(probs, dropout_p) if dropout_p > 0 else probs
        out = dropped @ val
        if prior is not None and prior.value_bias is not None:
            out = out + dropped @ gather_per_key(prior.value_bias, prior.pair_ids)
        return out, probs


def _bf16_cpu_training(weight: torch.Tensor, bias: torch.Tensor) -> bool:
    """A bf16 model (``train.fast_bf16``) training on CPU: the bias needs a gradient, so SDPA would
    take its math path, which measured 2.2x slower than ``_explicit_attention`` for a quickstart
    layer's forward and backward (16 x 128, 4 heads, one AMD EPYC core). Autocast runs (float32
    weights) keep SDPA, and with it the numbers they trained with."""
    return weight.dtype == torch.bfloat16 and bias.requires_grad and bias.device.type == "cpu"


def _explicit_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor, dropout_p: float, scale: float
) -> torch.Tensor:
    """softmax(q k^T * scale + bias) v, what SDPA computes, as one baddbmm, a softmax and a product."""
    *lead, q_len, d = q.shape
    k_len = k.shape[-2]
    bias = bias.expand(*lead, q_len, k_len).reshape(-1, q_len, k_len)
    keys_t = k.reshape(-1, k_len, d).transpose(1, 2)
    logits = torch.baddbmm(bias, q.reshape(-1, q_len, d), keys_t, alpha=scale)
    probs = logits.softmax(dim=-1)
    if dropout_p > 0:
        probs = F.dropout(probs, dropout_p)
    return (probs @ v.reshape(-1, k_len, v.shape[-1])).view(*lead, q_len, v.shape[-1])


def _pad8(n: int) -> int:
    """Pair-axis width rounded up to a multiple of 8 (friendlier head dims for the fused kernels)."""
    return -(-n // 8) * 8


def _pad_pairs(table: torch.Tensor) -> torch.Tensor:
    """[H, P, d] -> [H, P_pad, d] with zero rows, matching ``_pair_onehot``'s width."""
    return F.pad(table, (0, 0, 0, _pad8(table.shape[1]) - table.shape[1]))


def _pair_onehot(pair_ids: torch.Tensor, n_heads: int, width: int, dtype: torch.dtype) -> torch.Tensor:
    """one-hot(pair_j) as extra key / value dims, [B, H, L, width] (an expanded view)."""
    onehot = F.one_hot(pair_ids, width).to(dtype)
    return onehot[:, None].expand(-1, n_heads, -1, -1)


class FeedForward(nn.Module):
    """TXL's position-wise ReLU MLP."""

    def __init__(self, config: SiPEConfig):
        super().__init__()
        self.fc1 = nn.Linear(config.d_model, config.d_ff)
        self.fc2 = nn.Linear(config.d_ff, config.d_model)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.dropout(F.relu(self.fc1(h))))


class Block(nn.Module):
    """Attention + ReLU MLP; post-LN (TXL default, LN(h + f(h))) or pre-LN (h + f(LN(h)))."""

    def __init__(self, config: SiPEConfig):
        super().__init__()
        self.pre_norm = config.pre_norm
        self.attn = RelPartialLearnableAttention(config)
        self.ln_attn = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.ff = FeedForward(config)
        self.ln_ff = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)

    def forward(
        self,
        h: torch.Tensor,
        r: torch.Tensor,
        allowed: torch.Tensor | None,
        prior: LayerPrior | None = None,
        output_attentions: bool = False,
        cache: SiPECache | None = None,
        layer_idx: int = 0,
        address: torch.Tensor | JoinedAddress | None = None,
        planted_heads: int = 0,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        args = (r, allowed, prior, output_attentions, cache, layer_idx, address, planted_heads)
        if self.pre_norm:
            a, probs = self.attn(self.ln_attn(h), *args)
            h = h + self.dropout(a)
            return h + self.dropout(self.ff(self.ln_ff(h))), probs
        a, probs = self.attn(h, *args)
        h = self.ln_attn(h + self.dropout(a))
        return self.ln_ff(h + self.dropout(self.ff(h))), probs


class TransfoXLSiPEForCausalLM(CheckedModel, PreTrainedModel, GenerationMixin):
    """The SiPE Transformer-XL decoder: causal LM + auxiliary next-tag heads (docs/design.md §6)."""

    config_class = SiPEConfig
    config: SiPEConfig
    base_model_prefix = "txl"
    main_input_name = "input_ids"
    _tied_weights_keys = {"lm_head.weight": "embed.weight"}
    _no_split_modules = ["Block"]

    def __init__(self, config: SiPEConfig):
        if config.family != "txl":
            raise ValueError(f"{type(self).__name__} needs family='txl', got {config.family!r}")
        super().__init__(config)
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.embed_scale = math.sqrt(config.d_model)
        self.dropout = nn.Dropout(config.dropout)
        self.layers = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.ln_f = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.pre_norm else None
        self.build_heads(config)  # here, so that the modules register (and initialise) in this order
        inj = config.injection
        self.prior = hexatag_prior(config) if config.uses_hexatag_prior else None
        self.tree_address = tree_address(config) if config.uses_tree_address else None  # lis_tree(2)
        score_side = config.uses_position_prior or inj == "disentangled"
        self.prior_proj = prior_projection(config) if score_side else None  # W_E^l
        self.tag_key = prior_projection(config) if config.uses_attn_bias else None  # W_K^tag
        self.tag_value = prior_projection(config) if config.uses_attn_bias else None  # W_V^tag
        self.post_init()

    def build_heads(self, config: SiPEConfig) -> None:
        """The output heads: the LM head (tied to the embedding) and the auxiliary tag heads."""
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=True)
        # no tag heads for the plain `none` baseline (config.multitask_baseline keeps them)
        self.tag_heads = TagHeads(config.d_model) if config.has_tag_heads else None

    # -- Hugging Face plumbing -------------------------------------------------------------------
    def get_input_embeddings(self) -> nn.Embedding:
        return self.embed

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.embed = value

    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head

    def _init_weights(self, module: nn.Module) -> None:
        """N(0, initializer_range) everywhere; W_E / W^tag near zero so training starts from plain TXL."""
        super()._init_weights(module)
        std = self.config.initializer_range
        if isinstance(module, RelPartialLearnableAttention):
            init.normal_(module.u, std=std)
            init.normal_(module.v, std=std)
        else:  # W_E / W^tag carry their near-zero rule (PriorProjection)
            apply_init_rule(module)

    # -- forward ---------------------------------------------------------------------------------
    def layer_priors(
        self,
        terminal_ids: torch.Tensor | None,
        nonterminal_ids: torch.Tensor | None,
        deprel_ids: torch.Tensor | None,
        shape: torch.Size,
        device: torch.device,
        cache: SiPECache | None = None,
    ) -> tuple[torch.Tensor | None, list[LayerPrior | None]]:
        """Input-side prior [B, L, D] (or None) and each layer's LayerPrior (None below the entry layer).

        With a cache whose positions carry tags, a tagged model builds the LayerPriors over cached
        and new keys, with pair 0 where no tags are given (its prior is the zero vector, so c and
        the tag terms vanish); until the first tagged position the prior is skipped, as without a
        cache.
        """
        no_prior = [None] * self.config.n_layers
        if terminal_ids is None and nonterminal_ids is None:
            if cache is None or self.prior is None or cache.pair_ids is None:
                return None, no_prior  # no parse given (and none cached): m_p = 0 everywhere
            terminal_ids = nonterminal_ids = torch.full(shape, IGNORE_INDEX, dtype=torch.long, device=device)
            deprel_ids = terminal_ids if self.prior.deprel is not None else None  # all -100 as well
        if terminal_ids is None or nonterminal_ids is None:
            raise ValueError("pass both terminal_ids and nonterminal_ids (or neither)")
        if terminal_ids.shape != shape or nonterminal_ids.shape != shape:
            raise ValueError(
                f"tag tensors must match input_ids {tuple(shape)}, got terminal_ids "
                f"{tuple(terminal_ids.shape)} and nonterminal_ids {tuple(nonterminal_ids.shape)}"
            )
        if self.prior is None:  # `none`: tags only feed the auxiliary loss, but must still be valid
            check_tag_ids("terminal_ids", terminal_ids, N_TERMINALS)
            check_tag_ids("nonterminal_ids", nonterminal_ids, N_NONTERMINALS)
            tagged_positions(terminal_ids, nonterminal_ids)
            return None, no_prior
        deprel_ids = deprel_ids.to(device) if deprel_ids is not None else None
        pair_ids = self.prior.pair_ids(terminal_ids.to(device), nonterminal_ids.to(device), deprel_ids)
        table, projected = self._prior_tables() if cache is None else cache.layer_tables(self._prior_tables)
        # an embedding lookup, not table[pair_ids]: the same rows, and its backward (a per-row sum)
        # is ~4x cheaper on CPU than indexing's index_put (SiPE eq. 4's prior per position)
        input_prior = F.embedding(pair_ids, table) if self.config.uses_input_prior else None
        past = cache.get_seq_length() if cache is not None else 0
        key_pairs = pair_ids if cache is None else cache.append_pairs(pair_ids, past)
        layers = [LayerPrior(key_pairs, **proj) if proj is not None else None for proj in projected]
        return input_prior, layers

    def layer_addresses(
        self,
        terminal_ids: torch.Tensor | None,
        nonterminal_ids: torch.Tensor | None,
        deprel_ids: torch.Tensor | None,
        shape: torch.Size,
        cache: SiPECache | None = None,
    ) -> list[torch.Tensor | JoinedAddress | None]:
        """lis_tree: each layer's tree-address angles for the new positions [B, H, L, d_head/2], read
        from the tags of every position so far (cached ones too); None without tags (A = I)."""
        no_address = [None] * self.config.n_layers
        if self.tree_address is None:
            return no_address
        device = self.embed.weight.device
        if terminal_ids is None:  # validated by layer_priors: neither tag tensor is given
            if cache is None or cache.tags is None:
                return no_address  # no parse given (and none cached): every address is zero
            terminal_ids = torch.full(shape, IGNORE_INDEX, dtype=torch.long, device=device)
        labelled = self.config.n_deprels > 0 and deprel_ids is not None
        if labelled:
            check_tag_ids("deprel_ids", deprel_ids, self.config.n_deprels)
        none = torch.full_like(terminal_ids, IGNORE_INDEX)
        tags = torch.stack(
            [
                terminal_ids,
                nonterminal_ids if nonterminal_ids is not None else none,
                deprel_ids.to(terminal_ids.device) if labelled else none,
            ],
            dim=-1,
        ).to(device)
        if cache is not None:
            tags = cache.append_tags(tags, cache.get_seq_length())
        n_labels = 2 + self.config.n_deprels
        if self.config.joins_tree_components:  # lis_tree2: every key's address, and who is joined
            paths, joined = joined_tree_paths(tags[..., 0], tags[..., 1], tags[..., 2], n_labels, shape[1])
            return [
                JoinedAddress(self.tree_address(paths, i), joined[:, None])
                if self.tree_address.has_layer(i)
                else None
                for i in range(self.config.n_layers)
            ]
        paths = tree_paths(tags[..., 0], tags[..., 1], tags[..., 2], n_labels)
        paths = paths[:, -shape[1] :]  # the new positions
        return [
            self.tree_address(paths, i) if self.tree_address.has_layer(i) else None
            for i in range(self.config.n_layers)
        ]

    def _prior_tables(self) -> tuple[torch.Tensor, list[dict[str, torch.Tensor | None] | None]]:
        """The pair table [P, D] (row 0 = no tag) and, per layer, its projections (None: no prior)."""
        table = self.prior.pair_table()
        projected: list[dict[str, torch.Tensor | None] | None] = []
        for i in range(self.config.n_layers):
            proj = {
                name: (m(table, i) if m is not None and m.has_layer(i) else None)
                for name, m in (
                    ("alignment", self.prior_proj),
                    ("key_bias", self.tag_key),
                    ("value_bias", self.tag_value),
                )
            }
            projected.append(proj if any(v is not None for v in proj.values()) else None)
        return table, projected

    def decode(
        self,
        input_ids: torch.LongTensor,
        attention_mask: torch.Tensor | None,
        terminal_ids: torch.LongTensor | None,
        nonterminal_ids: torch.LongTensor | None,
        deprel_ids: torch.LongTensor | None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        cache: Cache | None = None,
        use_cache: bool | None = None,
        probs_layer: int | None = None,
    ) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor], SiPECache | None]:
        """The decoder stack shared by every head: the final hidden states [B, L, D] (after ``ln_f``,
        before the output dropout), the per-layer hidden states / attentions when asked, the cache.
        ``probs_layer`` (0-based): that layer's first ``syntax_heads`` heads' attention
        probabilities are the attentions returned (the ``tpt`` loss reads them)."""
        check_inputs(self.config, input_ids, attention_mask, terminal_ids, nonterminal_ids, deprel_ids,
                     past_length=cache.get_seq_length() if cache is not None else 0)
        bsz, length = input_ids.shape
        device = input_ids.device
        if cache is not None and not isinstance(cache, SiPECache):
            if cache.get_seq_length() > 0:
                name = type(cache).__name__
                raise ValueError(f"TXL needs a SiPECache (it keeps each key's tags), not a filled {name}")
            cache = None
            use_cache = True
        if cache is None and use_cache:
            cache = SiPECache()
        past = cache.get_seq_length() if cache is not None else 0
        klen = past + length
        input_prior, priors = self.layer_priors(
            terminal_ids, nonterminal_ids, deprel_ids, input_ids.shape, device, cache
        )
        addresses = self.layer_addresses(terminal_ids, nonterminal_ids, deprel_ids, input_ids.shape, cache)

        h = self.embed(input_ids)
        if input_prior is not None:
            h = h + input_prior  # h_p = e_tok + m_p (E_T[tau_p] + E_N[nu_p])   (eq. 4)
        # TXL scales the (tied) embedding by sqrt(d_model); the prior shares the token's units. Under
        # post-LN layer 1 sees this input un-normalised: unscaled, its q is ~0 and so are BD and c.
        h = self.dropout(h * self.embed_scale)
        if cache is not None:  # the layers look W_R r_o up per offset (SiPECache.relative_keys)
            r = (klen, self.config.clamp_len)
        else:
            pos_seq = torch.arange(klen - 1, -1, -1, device=device)  # offsets of the newest query
            if self.config.clamp_len > 0:
                pos_seq = pos_seq.clamp_max(self.config.clamp_len)
            r = self.dropout(relative_embedding(pos_seq, self.config.d_model, h.dtype))

        # query i (absolute position past + i) sees keys j <= past + i; a lone newest query without
        # padding sees every key (None: no mask to build or apply, the common decoding step)
        allowed = None
        if length > 1 or attention_mask is not None:
            allowed = torch.ones(length, klen, dtype=torch.bool, device=device).tril(past)[None, None]
        if attention_mask is not None:
            mask = attention_mask.to(device=device, dtype=torch.bool)
            if mask.shape[1] == length and past:
                mask = torch.cat([mask.new_ones(bsz, past), mask], dim=1)
            if mask.shape != (bsz, klen):
                raise ValueError(
                    f"attention_mask must be [B, {klen}] (cached + new) or [B, {length}], "
                    f"got {tuple(mask.shape)}"
                )
            keys = torch.arange(klen, device=device)
            own = keys[None, :] == (past + torch.arange(length, device=device))[:, None]  # j = past + i
            allowed = allowed & (mask[:, None, None, :] | own)

        hidden_states, attentions = [], []
        for idx, (layer, prior, address) in enumerate(zip(self.layers, priors, addresses, strict=True)):
            if output_hidden_states:
                hidden_states.append(h)
            planted = self.config.syntax_heads if idx == probs_layer and not output_attentions else 0
            want = output_attentions or planted > 0
            h, probs = layer(h, r, allowed, prior, output_attentions, cache, idx, address, planted)
            if want:
                attentions.append(probs)
        if self.ln_f is not None:
            h = self.ln_f(h)
        if output_hidden_states:
            hidden_states.append(h)
        return h, hidden_states, attentions, cache

    def forward(
        self, input_ids: torch.LongTensor, attention_mask: torch.Tensor | None = None,
        terminal_ids: torch.LongTensor | None = None, nonterminal_ids: torch.LongTensor | None = None,
        labels: torch.LongTensor | None = None, deprel_ids: torch.LongTensor | None = None,
        output_attentions: bool = False, output_hidden_states: bool = False, cache: Cache | None = None,
        use_cache: bool | None = None, past_key_values: Cache | None = None, **kwargs: Any,
    ) -> SiPEOutput:
        """Causal LM. ``labels`` are unshifted (HF style); tags [B, L] with -100 where a position has none.

        ``attention_mask`` (1 keep, 0 pad) hides padded keys; a padded query still sees itself so no
        softmax row is empty (its outputs are meaningless -- give its label -100). Without tag tensors
        the prior is absent (m_p = 0 everywhere) and no tag loss is computed.

        Incremental decoding (Hugging Face conventions; ``past_key_values`` is transformers' name for
        ``cache``): with ``use_cache=True`` or a ``cache`` (a :class:`SiPECache`; an empty Cache of
        another class is replaced by one), ``input_ids`` and the tags are the *new* positions, which
        follow the cached ones, ``attention_mask`` covers cached and new positions (or the new ones),
        and ``out.cache`` holds every position so far. Other keyword arguments that ``generate``
        passes (``position_ids`` ...) are ignored: positions are relative, counted from the cache.
        """
        cache = cache if cache is not None else past_key_values
        cfg = self.config
        # a parser-free rival's loss (SiPEConfig.syntax_loss): training only, from the tags; it
        # never touches the logits, and at weight 0 nothing of it runs (exactly `none`)
        syntax = (
            cfg.syntax_loss != "none" and cfg.syntax_loss_weight > 0 and self.training
            and labels is not None and terminal_ids is not None and nonterminal_ids is not None
        )
        layer = cfg.syntax_layer_index
        probs_layer = layer if syntax and cfg.syntax_loss == "tpt" else None
        captured: dict[str, torch.Tensor] = {}
        hook = None
        if syntax and cfg.syntax_loss == "treereg":  # the chosen heads' outputs, before W_O
            hook = self.layers[layer].attn.o_net.register_forward_pre_hook(
                lambda _module, args: captured.__setitem__("z", args[0])
            )
        try:
            h, hidden_states, attentions, cache = self.decode(
                input_ids, attention_mask, terminal_ids, nonterminal_ids, deprel_ids,
                output_attentions, output_hidden_states, cache, use_cache, probs_layer,
            )
        finally:
            if hook is not None:
                hook.remove()
        syntax_loss = None
        if syntax:
            syntax_loss = self._syntax_loss(input_ids, terminal_ids, nonterminal_ids, attentions, captured)
            if probs_layer is not None and not output_attentions:
                attentions = []
        h = self.dropout(h)
        logits = self.lm_head(h) if cache is None else cache.output_logits(self.lm_head, h)
        heads = self.tag_heads(h) if self.tag_heads is not None else (None, None)
        terminal_logits, nonterminal_logits = heads

        lm_loss = terminal_loss = nonterminal_loss = loss = None
        if labels is not None:
            lm_loss = loss = causal_lm_loss(logits, labels)
        if self.tag_heads is not None and terminal_ids is not None and nonterminal_ids is not None:
            loss, terminal_loss, nonterminal_loss = add_causal_tag_loss(
                loss, terminal_logits, nonterminal_logits, terminal_ids, nonterminal_ids,
                self.config.tag_loss_weight, from_start=self.config.joint_tag_loss,
            )
        if syntax_loss is not None:
            loss = loss + cfg.syntax_loss_weight * syntax_loss
        return SiPEOutput(
            loss=loss,
            logits=logits,
            terminal_logits=terminal_logits,
            nonterminal_logits=nonterminal_logits,
            lm_loss=lm_loss,
            terminal_loss=terminal_loss,
            nonterminal_loss=nonterminal_loss,
            syntax_loss=syntax_loss,
            hidden_states=tuple(hidden_states) if output_hidden_states else None,
            attentions=tuple(attentions) if output_attentions else None,
            cache=cache,
        )

    def _syntax_loss(
        self,
        input_ids: torch.Tensor,
        terminal_ids: torch.Tensor,
        nonterminal_ids: torch.Tensor,
        attentions: list[torch.Tensor],
        captured: dict[str, torch.Tensor],
    ) -> torch.Tensor:
        """The ``tpt`` / ``treereg`` loss of the first ``syntax_heads`` heads of ``syntax_layer``."""
        cfg = self.config
        specials = {i for i in (cfg.bos_token_id, cfg.eos_token_id, cfg.pad_token_id) if i is not None}
        ids, terms, nts = input_ids.tolist(), terminal_ids.tolist(), nonterminal_ids.tolist()
        sentences = [row_sentences(i, t, n, specials) for i, t, n in zip(ids, terms, nts, strict=True)]
        k = cfg.syntax_heads
        if cfg.syntax_loss == "tpt":
            probs = attentions[cfg.syntax_layer_index] if len(attentions) == cfg.n_layers else attentions[-1]
            return tpt_loss(probs[:, :k], sentences)
        return treereg_loss(captured["z"][..., : k * cfg.d_head], sentences)


class TransfoXLSiPEForSequenceClassification(LastTokenClassifier, TransfoXLSiPEForCausalLM):
    """The decoder with a GLUE head: the last real token's final state -> one linear layer.

    A causal decoder's last position is the only one that has read the whole input, so it is the
    one pooled (as Hugging Face's ``TransfoXLForSequenceClassification`` and GPT-2's classifier
    do); padding is on the right, so that is position ``attention_mask.sum(-1) - 1``. The LM and
    tag heads are not built (a pre-trained checkpoint's are left unused); tags enter as in
    pre-training and there is no auxiliary loss. The GLUE features frame each sentence as
    pre-training's packed rows do (``<s> A </s>``, pairs ``<s> A </s> B </s>``), so the pooled
    token is the last ``</s>``.
    """

    # loading a pre-trained LM: its output heads are left out and the score layer is new, as meant
    _keys_to_ignore_on_load_unexpected = [r"^lm_head\.", r"^tag_heads\."]

    def classifier_states(self, input_ids, attention_mask, terminal_ids, nonterminal_ids, deprel_ids,
                          output_attentions, output_hidden_states):
        h, hidden_states, attentions, _ = self.decode(input_ids, attention_mask, terminal_ids,
                                                      nonterminal_ids, deprel_ids, output_attentions,
                                                      output_hidden_states)
        return h, (tuple(hidden_states) if output_hidden_states else None), (
            tuple(attentions) if output_attentions else None)

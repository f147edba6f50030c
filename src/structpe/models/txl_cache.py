"""The key/value cache of the Transformer-XL decoder (``structpe.models.txl``): a ``DynamicCache``
whose layers write new positions into buffers with spare room (``BufferedLayer``), plus what the
SiPE prior adds per cached key (``SiPECache``). Used by incremental decoding, the marginal
likelihood's beam and joint text + tree generation (docs/generation.md)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from structpe.syntax.hexatags import IGNORE_INDEX


class BufferedLayer(DynamicLayer):
    """A ``DynamicLayer`` whose keys / values are views into buffers with spare capacity.

    ``DynamicLayer.update`` concatenates, copying every cached key and value at each decoding step
    (O(L) per step, about a tenth of a small model's step on CPU). Here a step writes its new
    positions into the buffers, which double when full. The views hold the same values, so scores
    are unchanged; whatever replaces ``keys`` (beam reordering, cropping: the inherited methods)
    is taken as the new contents the next time the layer grows. A batch selection by index (the
    marginal beam's copy-on-branch) gathers the rows' buffers with room for as many positions
    again, so later steps still write in place instead of a gather and then a refill (0.30 -> 0.25
    s/sentence at k = 100, docs/generation.md). (Gathering straight into a strided buffer view was
    4x slower than gathering, then copying.)
    """

    buffers: tuple[torch.Tensor, torch.Tensor] | None = None
    rows = 0  # batch rows of the cache (the buffers' first dimension)

    def _viewing_buffers(self) -> bool:
        return (
            self.buffers is not None
            and self.keys.data_ptr() == self.buffers[0].data_ptr()
            and self.values.data_ptr() == self.buffers[1].data_ptr()
            and self.keys.shape[0] == self.rows  # not a view of some rows
            and self.buffers[0].shape[1:-2] == self.keys.shape[1:-2]
        )

    def _refill(self, keys: torch.Tensor, values: torch.Tensor, room: int) -> None:
        """Fresh buffers with space for ``room`` positions, holding ``keys`` / ``values`` [B, H, n, d]."""
        n, size = keys.shape[-2], max(2 * room, 64)
        self.rows = keys.shape[0]
        self.buffers = tuple(
            torch.empty(self.rows, *x.shape[1:-2], size, x.shape[-1], dtype=x.dtype, device=x.device)
            for x in (keys, values)
        )
        for buf, x in zip(self.buffers, (keys, values), strict=True):
            buf[: self.rows, ..., :n, :] = x
        self._views(n)

    def _views(self, n: int) -> None:
        self.keys, self.values = (buf[: self.rows, ..., :n, :] for buf in self.buffers)

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        past, new = self.get_seq_length(), key_states.shape[-2]
        fits = (
            self._viewing_buffers()  # still views of our buffers
            and key_states.shape[0] == self.rows
            and past + new <= self.buffers[0].shape[-2]
        )
        if not fits:
            old = (self.keys, self.values) if past else (key_states[..., :0, :], value_states[..., :0, :])
            self._refill(*old, room=past + new)
        for buf, x in zip(self.buffers, (key_states, value_states), strict=True):
            buf[: self.rows, ..., past : past + new, :] = x
        self._views(past + new)
        return self.keys, self.values

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if not isinstance(indices, torch.Tensor) or self.get_seq_length() == 0 or not self._viewing_buffers():
            return super().batch_select_indices(indices)  # e.g. a slice: a view of some rows
        n = self.keys.shape[-2]
        room = min(self.buffers[0].shape[-2], max(2 * n, 16))  # spare room, as a refill would leave
        rows = indices.to(self.keys.device)
        self.buffers = tuple(buf[..., :room, :].index_select(0, rows) for buf in self.buffers)
        self.rows = rows.shape[0]
        self._views(n)

    def copy_rows(self, dst: torch.Tensor, src: torch.Tensor) -> None:
        """Rows ``dst`` take the cached states of rows ``src`` in place (all sources read first)."""
        if not self._viewing_buffers():
            self.keys = self.keys.index_copy(0, dst, self.keys.index_select(0, src))
            self.values = self.values.index_copy(0, dst, self.values.index_select(0, src))
            return
        for x in (self.keys, self.values):  # views of the buffers' filled part
            x.index_copy_(0, dst, x.index_select(0, src))


class SiPECache(DynamicCache):
    """Key/value cache of the TXL decoder: a ``DynamicCache`` plus what the prior adds per key.

    Tags are committed once per position, before its keys and values are computed (the causal tag
    head makes the model generate its own tags, docs/generation.md), so nothing cached goes stale.
    For a key j of any layer the later scores need: k_j and v_j (AC, the value sum; the layer's
    ``DynamicLayer``), pair_j (``pair_ids`` [B, K], shared by all layers: c_ij, the attn-bias key
    and value terms, through the layer's pair tables, which are parameters), and its absolute
    position (BD through each new query's offset i - j). ``rel`` keeps W_R r_o per layer for the
    offsets seen so far, so a step projects only its new offsets. ``lis_tree`` caches its keys
    already rotated (a word's address is fixed when it is read) and keeps every position's tags
    (``tags`` [B, K, 3]: terminal, non-terminal, DEPREL) to read the new positions' addresses. Batch
    reordering (beam search, the marginal beam's copy-on-branch) moves ``pair_ids`` and ``tags``
    with the keys; ``rel`` is batch-free.
    """

    def __init__(self) -> None:
        super().__init__()
        self.layer_class_to_replicate = BufferedLayer  # DynamicCache's layers, without the per-step copy
        self.pair_ids: torch.Tensor | None = None  # None: no position so far carries a tag
        self.tags: torch.Tensor | None = None  # lis_tree: [B, K, 3], None until a position has tags
        self.rel: dict[int, torch.Tensor] = {}
        self.tables: tuple | None = None  # the prior's projected pair tables, see layer_tables
        self.head: tuple | None = None  # (the LM head weight, its [D, V] copy), see output_logits

    def append_pairs(self, pair_ids: torch.Tensor, past: int) -> torch.Tensor:
        """Add the new positions' pair ids [B, L] after ``past`` cached ones; return all [B, K]."""
        old = self.pair_ids if self.pair_ids is not None else pair_ids.new_zeros(pair_ids.shape[0], past)
        self.pair_ids = torch.cat([old, pair_ids], dim=1)
        return self.pair_ids

    def append_tags(self, tags: torch.Tensor, past: int) -> torch.Tensor:
        """Add the new positions' tags [B, L, 3] after ``past`` cached ones (-100: none); return all."""
        old = self.tags if self.tags is not None else tags.new_full((tags.shape[0], past, 3), IGNORE_INDEX)
        self.tags = torch.cat([old, tags], dim=1)
        return self.tags

    def layer_tables(self, compute):
        """The prior's pair table and per-layer projections, computed once per cache: within one
        decoding run the weights do not change, and recomputing them is most of a small step."""
        if self.tables is None:
            self.tables = compute()
        return self.tables

    def relative_keys(self, layer_idx: int, klen: int, clamp: int, project) -> torch.Tensor:
        """W_R r_o for the offsets 0 .. klen-1 (clamped at ``clamp`` > 0), [klen, D], row o = offset o
        (ascending: a lone query flips its [B, H, 1, K] scores instead of copying the table every
        step). Each offset is projected once per cache. The table grows geometrically (at least
        doubling, up to the clamp), so one-token steps project new offsets O(log L) times instead of
        at every step; rows are independent, so the extra ones are exactly what later steps would
        project."""
        need = min(klen, clamp + 1) if clamp > 0 else klen
        table = self.rel.get(layer_idx)
        have = 0 if table is None else table.shape[0]
        if need > have:
            grow = max(need, 2 * have, 64)
            grow = min(grow, clamp + 1) if clamp > 0 else grow
            device = table.device if table is not None else None
            new = project(torch.arange(have, grow, device=device))
            table = new if table is None else torch.cat([table, new])
            self.rel[layer_idx] = table
        rows = table[:need]
        if need < klen:  # offsets beyond clamp_len share the clamp_len row
            rows = torch.cat([rows, rows[-1:].expand(klen - need, -1)])
        return rows

    def output_logits(self, head: nn.Linear, h: torch.Tensor) -> torch.Tensor:
        """``head(h)`` through a [D, V] contiguous copy of its weight, made once per cache (the weights
        do not change within a decoding run). For the few rows of a decoding step MKL's matrix-vector
        product is ~2.5x faster in this layout than in nn.Linear's [V, D] one on the CPUs we measured
        (docs/generation.md), and the LM head is a step's largest matrix. Training keeps nn.Linear."""
        if torch.is_grad_enabled():
            return head(h)
        if self.head is None or self.head[0] is not head.weight:
            self.head = (head.weight, head.weight.t().contiguous())
        out = h.reshape(-1, h.shape[-1]) @ self.head[1]
        if head.bias is not None:
            out += head.bias
        return out.view(*h.shape[:-1], -1)

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        super().reorder_cache(beam_idx)
        if self.pair_ids is not None:
            self.pair_ids = self.pair_ids.index_select(0, beam_idx.to(self.pair_ids.device))
        if self.tags is not None:
            self.tags = self.tags.index_select(0, beam_idx.to(self.tags.device))

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        super().batch_select_indices(indices)
        if self.pair_ids is not None:
            self.pair_ids = self.pair_ids[indices]
        if self.tags is not None:
            self.tags = self.tags[indices]

    def copy_rows(self, dst: torch.Tensor, src: torch.Tensor) -> None:
        """Rows ``dst`` become copies of rows ``src`` in place, every layer's keys / values and the
        per-key tags: a particle filter's resampling or a beam's re-selection copies only the rows
        whose parent changed, instead of gathering the whole cache (docs/likelihoods.md, cost)."""
        for layer in self.layers:
            layer.copy_rows(dst, src)
        for name in ("pair_ids", "tags"):
            x = getattr(self, name)
            if x is not None:
                setattr(self, name, x.index_copy(0, dst.to(x.device), x.index_select(0, src.to(x.device))))

    def batch_repeat_interleave(self, repeats: int) -> None:
        super().batch_repeat_interleave(repeats)
        if self.pair_ids is not None:
            self.pair_ids = self.pair_ids.repeat_interleave(repeats, dim=0)
        if self.tags is not None:
            self.tags = self.tags.repeat_interleave(repeats, dim=0)

    def crop(self, tokens_to_remove: int) -> None:
        super().crop(tokens_to_remove)
        if self.pair_ids is not None:
            self.pair_ids = self.pair_ids[:, : self.get_seq_length()]
        if self.tags is not None:
            self.tags = self.tags[:, : self.get_seq_length()]

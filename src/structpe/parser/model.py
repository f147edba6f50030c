"""The hexatagger network (docs/design.md §1): its config, its encoders and the model with its heads.

Kept apart from inference (``structpe.parser.hexatagger``: ``predict``, ``HexatagParser``,
``quantize_for_cpu``) and from the subword tokenizer (``structpe.parser.tokenizer``) so
the network reads top to bottom on its own:

* ``HexataggerConfig`` - sizes plus the dependency-label inventory (empty: no label head);
* ``HexataggerModel`` - pre-LN encoder (learned absolute positions, fused attention) with a
  terminal head [.., 2], a non-terminal head [.., 5] and an optional label head [.., |deprels|];
  loss = CE_T + CE_N (+ CE_label), every CE ignoring -100; ``encoder="bilstm"`` replaces the
  Transformer by ``BiLSTMEncoder`` over pretrained + trainable subword vectors (same heads).
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from structpe.io import load_module, save_module
from structpe.modules.init_rules import gpt2_init
from structpe.parser.tokenizer import save_tokenizer
from structpe.syntax.hexatags import IGNORE_INDEX, N_NONTERMINALS, N_TERMINALS

MODEL_TYPE = "structpe-hexatagger"


ENCODERS = ("transformer", "bilstm")
LSTM_WEIGHTS = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")  # one layer, one direction, torch's order


@dataclass
class HexataggerConfig:
    """Model sizes; ``deprels`` is the label inventory of the optional dependency-label head."""

    vocab_size: int
    d_model: int = 256
    n_layers: int = 4
    n_heads: int = 4
    d_ff: int = 1024
    max_positions: int = 512
    dropout: float = 0.1
    pad_token_id: int = 0
    deprels: list[str] = field(default_factory=list)
    # the non-terminal tag of word i is the node between words i and i+1 of the binarised tree, so
    # its head may read the next subword's state too: [h_t ; h_t+1] (False: h_t only, as in the paper)
    pair_nonterminal: bool = False
    # "transformer" (pre-LN blocks above) or "bilstm": a BiLSTM of n_layers over the sum of a frozen
    # pretrained subword-vector table and a trainable one (both d_emb wide), d_model = 2 x hidden
    encoder: str = "transformer"
    d_emb: int = 100
    model_type: str = MODEL_TYPE

    def __post_init__(self) -> None:
        if self.encoder not in ENCODERS:
            raise ValueError(f"encoder must be one of {ENCODERS}, got {self.encoder!r}")
        if self.encoder == "bilstm" and (self.d_model % 2 or self.d_emb < 1):
            raise ValueError(
                f"a bilstm encoder needs an even d_model and d_emb >= 1, got {self.d_model}, {self.d_emb}"
            )
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        if self.vocab_size < 1 or self.n_layers < 1 or self.max_positions < 2:
            raise ValueError("vocab_size, n_layers must be >= 1 and max_positions >= 2")
        if self.model_type != MODEL_TYPE:
            raise ValueError(f"not a hexatagger config (model_type {self.model_type!r})")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HexataggerConfig:
        known = set(cls.__dataclass_fields__)
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown hexatagger config keys: {sorted(unknown)}")
        return cls(**d)


@dataclass
class HexataggerOutput:
    """Per-token logits ([B, L, 2], [B, L, 5], [B, L, |deprels|] or None) and, given targets, losses."""

    terminal_logits: torch.Tensor
    nonterminal_logits: torch.Tensor
    deprel_logits: torch.Tensor | None = None
    loss: torch.Tensor | None = None
    terminal_loss: torch.Tensor | None = None
    nonterminal_loss: torch.Tensor | None = None
    deprel_loss: torch.Tensor | None = None


class SelfAttention(nn.Module):
    """Bidirectional multi-head attention on the fused kernel; padding keys are masked out."""

    def __init__(self, cfg: HexataggerConfig) -> None:
        super().__init__()
        self.n_heads = cfg.n_heads
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.out = nn.Linear(cfg.d_model, cfg.d_model)
        self.dropout = cfg.dropout

    def forward(self, x: torch.Tensor, key_mask: torch.Tensor | None) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.n_heads, d // self.n_heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=key_mask, dropout_p=self.dropout if self.training else 0.0
        )
        return self.out(y.transpose(1, 2).reshape(b, n, d))


class Block(nn.Module):
    """Pre-LN Transformer block: x + attn(LN x), then x + MLP(LN x). Pre-LN tolerates large LRs."""

    def __init__(self, cfg: HexataggerConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = SelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.d_model, cfg.d_ff), nn.GELU(), nn.Linear(cfg.d_ff, cfg.d_model)
        )
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, key_mask: torch.Tensor | None) -> torch.Tensor:
        x = x + self.drop(self.attn(self.ln1(x), key_mask))
        return x + self.drop(self.mlp(self.ln2(x)))


class BiLSTMEncoder(nn.Module):
    """Subword vectors -> BiLSTM states [B, L, d_model] (Kiperwasser & Goldberg 2016 style inputs).

    The input vector of a subword is ``pretrained[id] + trainable[id]``: the pretrained table
    (word2vec on the treebank + corpus text, ``structpe.parser.word_vectors``) is frozen and the
    trainable one starts at zero, so a subword never seen in a training tree keeps exactly its
    pretrained vector instead of drifting away from the ones the tagger learned on. Padding never
    reaches a sentence's states (packed sequences in training; ``_by_direction`` at CPU inference),
    so they do not depend on its batch.
    """

    def __init__(self, cfg: HexataggerConfig) -> None:
        super().__init__()
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_emb, padding_idx=cfg.pad_token_id)
        self.pretrained_emb = nn.Embedding(cfg.vocab_size, cfg.d_emb, padding_idx=cfg.pad_token_id)
        self.pretrained_emb.weight.requires_grad_(False)
        self.emb_drop = nn.Dropout(cfg.dropout)
        self.lstm = nn.LSTM(
            cfg.d_emb,
            cfg.d_model // 2,
            num_layers=cfg.n_layers,
            bidirectional=True,
            batch_first=True,
            dropout=cfg.dropout if cfg.n_layers > 1 else 0.0,
        )

    def reset_embeddings(self) -> None:
        with torch.no_grad():
            self.tok_emb.weight.zero_()
            self.pretrained_emb.weight.zero_()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

        b, n = input_ids.shape
        x = self.emb_drop(self.tok_emb(input_ids) + self.pretrained_emb(input_ids))
        if attention_mask is None:
            return self.lstm(x)[0]
        if type(self.lstm) is nn.LSTM and x.device.type == "cpu" and not torch.is_grad_enabled():
            return self._by_direction(x, attention_mask)
        lengths = attention_mask.sum(-1).clamp(min=1).cpu()
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        return pad_packed_sequence(self.lstm(packed)[0], batch_first=True, total_length=n)[0]

    def _by_direction(self, x: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """CPU inference: the packed path's states from padded inputs. Each direction of each layer
        is one unidirectional ``torch.lstm`` call over the padded batch, the reverse one over every
        sentence reversed within its length, so padding only ever follows a sentence's real steps
        and cannot reach its states. A padded input takes oneDNN's fused LSTM kernel, which packed
        sequences cannot (benchmarks/parser_speed.py has the speed-up; the test compares the paths)."""
        lstm, n = self.lstm, x.shape[1]
        mask = attention_mask.to(x.dtype)[..., None]
        t = torch.arange(n, device=x.device)[None]
        last = attention_mask.sum(-1, keepdim=True).clamp(min=1) - 1
        flip = torch.where(t <= last, last - t, t)[..., None]  # reverses each sentence; its own inverse
        h = x
        for layer in range(lstm.num_layers):
            outs = []
            for suffix in ("", "_reverse"):
                weights = [getattr(lstm, f"{w}_l{layer}{suffix}") for w in LSTM_WEIGHTS]
                inp = h.gather(1, flip.expand_as(h)) if suffix else h
                zeros = inp.new_zeros(1, inp.shape[0], lstm.hidden_size)
                out = torch.lstm(inp, (zeros, zeros), weights, True, 1, 0.0, False, False, True)[0]
                outs.append(out.gather(1, flip.expand_as(out)) if suffix else out)
            h = torch.cat(outs, -1)
        return h * mask  # zeros after the end, as pad_packed_sequence gives (the pair head reads t + 1)


class HexataggerModel(nn.Module):
    """Encoder + tag heads. ``forward`` follows the Hugging Face convention: loss when given targets."""

    def __init__(self, config: HexataggerConfig) -> None:
        super().__init__()
        self.config = config
        c = config
        self.drop = nn.Dropout(c.dropout)
        if c.encoder == "bilstm":
            self.encoder: nn.Module = BiLSTMEncoder(c)
        else:
            self.tok_emb = nn.Embedding(c.vocab_size, c.d_model, padding_idx=c.pad_token_id)
            self.pos_emb = nn.Embedding(c.max_positions, c.d_model)
            self.blocks = nn.ModuleList(Block(c) for _ in range(c.n_layers))
            self.ln_f = nn.LayerNorm(c.d_model)
        self.terminal_head = nn.Linear(c.d_model, N_TERMINALS)
        self.nonterminal_head = nn.Linear((2 if c.pair_nonterminal else 1) * c.d_model, N_NONTERMINALS)
        self.deprel_head = nn.Linear(c.d_model, len(c.deprels)) if c.deprels else None
        self.apply(gpt2_init)
        if c.encoder == "bilstm":
            self.encoder.reset_embeddings()
        # GPT-2 style: scale residual output projections by 1/sqrt(2 * n_layers)
        for name, p in self.named_parameters():
            if name.endswith(("attn.out.weight", "mlp.2.weight")):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * c.n_layers))

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
        terminal_ids: torch.Tensor | None = None, nonterminal_ids: torch.Tensor | None = None,
        deprel_ids: torch.Tensor | None = None,
    ) -> HexataggerOutput:
        """``input_ids`` [B, L]; ``attention_mask`` [B, L] (1 = token); tag targets [B, L], -100 = no tag."""
        b, n = input_ids.shape
        if n > self.config.max_positions:
            raise ValueError(f"sequence of {n} subwords exceeds max_positions={self.config.max_positions}")
        if self.config.encoder == "bilstm":
            x = self.drop(self.encoder(input_ids, attention_mask))
        else:
            pos = torch.arange(n, device=input_ids.device)
            x = self.drop(self.tok_emb(input_ids) + self.pos_emb(pos))
            key_mask = None
            if attention_mask is not None and not bool(attention_mask.all()):
                key_mask = attention_mask[:, None, None, :].bool()  # [B, 1, 1, L], True = attend
            for blk in self.blocks:
                x = blk(x, key_mask)
            x = self.ln_f(x)
        nt_in = x
        if self.config.pair_nonterminal:  # [h_t ; h_t+1], zeros after the last position
            nt_in = torch.cat([x, F.pad(x[:, 1:], (0, 0, 0, 1))], dim=-1)
        out = HexataggerOutput(
            terminal_logits=self.terminal_head(x),
            nonterminal_logits=self.nonterminal_head(nt_in),
            deprel_logits=self.deprel_head(x) if self.deprel_head is not None else None,
        )
        if terminal_ids is not None and nonterminal_ids is not None:
            out.terminal_loss = _ce(out.terminal_logits, terminal_ids)
            out.nonterminal_loss = _ce(out.nonterminal_logits, nonterminal_ids)
            out.loss = out.terminal_loss + out.nonterminal_loss
            if deprel_ids is not None and out.deprel_logits is not None:
                out.deprel_loss = _ce(out.deprel_logits, deprel_ids)
                out.loss = out.loss + out.deprel_loss
        return out

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    # -- save / load: one folder, config JSON + safetensors (+ tokenizer) --------------------------

    def save_pretrained(self, directory: str | os.PathLike, tokenizer: Any | None = None) -> Path:
        """Write ``config.json`` and ``model.safetensors`` (and the tokenizer, if given) to ``directory``."""
        out = save_module(self, directory, self.config.to_dict(), MODEL_TYPE)
        if tokenizer is not None:
            save_tokenizer(tokenizer, out)
        return out

    @classmethod
    def from_pretrained(
        cls, directory: str | os.PathLike, device: str | torch.device = "cpu"
    ) -> HexataggerModel:
        """Load a folder written by ``save_pretrained``; clear errors when a file is missing."""
        build = HexataggerConfig.from_dict
        return load_module(directory, lambda c: cls(build(c)), "hexatagger", str(device)).eval()


def _ce(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Cross-entropy over tagged positions only (-100 ignored); 0 when a batch has none."""
    if not bool((target != IGNORE_INDEX).any()):
        return logits.sum() * 0.0
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(), target.reshape(-1), ignore_index=IGNORE_INDEX
    )

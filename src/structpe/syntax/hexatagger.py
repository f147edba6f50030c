"""A trained hexatagger: a small Transformer encoder that predicts every word's hexatags (docs/design.md §1).

The SiPE paper tags text with its own parser, a Transformer encoder with two per-token heads that
predict each word's terminal tau_i in T = {tl, tr} and non-terminal nu_i in N = {nl-L, nl-R, nr-L,
nr-R, eos} at the word's **first subword** (Amini, Liu & Cotterell, ACL 2023, "Hexatagging", §3).
This module holds the whole model, readable top to bottom:

* ``HexataggerConfig`` - sizes plus the dependency-label inventory (empty: no label head);
* ``HexataggerModel`` - pre-LN encoder (learned absolute positions, fused attention) with a
  terminal head [.., 2], a non-terminal head [.., 5] and an optional label head [.., |deprels|];
  loss = CE_T + CE_N (+ CE_label), every CE ignoring -100; ``encoder="bilstm"`` replaces the
  Transformer by ``BiLSTMEncoder`` over pretrained + trainable subword vectors (same heads);
* ``HexatagParser`` - the ``Parser`` used by ``structpe tag --parser hexatagger --model DIR``:
  batched tokenize -> encode -> decode. The arg-max tag sequence is used when it is well formed (it
  is then also the Viterbi optimum); otherwise the constrained Viterbi decoder (run once per length
  bucket, ``constrained_decode_batch``) returns the best well-formed sequence, so the output is
  always a tree. ``quantize="int8"`` swaps the Linear layers for dynamic int8 ones (CPU speed).

A saved model is one folder (``save_pretrained``): ``config.json``, ``model.safetensors`` and the
subword tokenizer (``tokenizer.json`` + ``tokenizer_config.json``, loadable with
``transformers.AutoTokenizer``). No pickles.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from structpe.io import atomic_files, load_module, save_module
from structpe.syntax.hexatags import (
    EOS,
    IGNORE_INDEX,
    N_NONTERMINALS,
    N_TERMINALS,
    NR_L,
    NR_R,
    TL,
    constrained_decode_batch,
    decode,
)
from structpe.syntax.parsers import Parser
from structpe.syntax.tagged import TaggedSentence

TOKENIZER_NAME = "tokenizer.json"
MODEL_TYPE = "structpe-hexatagger"
ENCODERS = ("transformer", "bilstm")


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
    (word2vec on the treebank + corpus text, ``structpe.syntax.word_vectors``) is frozen and the
    trainable one starts at zero, so a subword never seen in a training tree keeps exactly its
    pretrained vector instead of drifting away from the ones the tagger learned on. Padding is
    skipped with packed sequences, so a sentence's states do not depend on its batch.
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
        lengths = attention_mask.sum(-1).clamp(min=1).cpu()
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        return pad_packed_sequence(self.lstm(packed)[0], batch_first=True, total_length=n)[0]


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
        self.apply(self._init_weights)
        if c.encoder == "bilstm":
            self.encoder.reset_embeddings()
        # GPT-2 style: scale residual output projections by 1/sqrt(2 * n_layers)
        for name, p in self.named_parameters():
            if name.endswith(("attn.out.weight", "mlp.2.weight")):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * c.n_layers))

    @staticmethod
    def _init_weights(m: nn.Module) -> None:
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, std=0.02)
            if m.padding_idx is not None:
                with torch.no_grad():
                    m.weight[m.padding_idx].zero_()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        terminal_ids: torch.Tensor | None = None,
        nonterminal_ids: torch.Tensor | None = None,
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


QUANTIZE_MODES = ("none", "int8")


def quantize_for_cpu(model: HexataggerModel, mode: str = "int8") -> HexataggerModel:
    """Dynamic int8 quantization of every Linear (and LSTM) layer (weights int8, activations quantized per
    batch) for CPU inference: about 1.6x the fp32 throughput on one AVX-512/VNNI core with the
    same EWT test UAS (benchmarks/parser_speed.py). ``mode="none"`` returns the model unchanged.

    Uses ``torch.ao.quantization.quantize_dynamic``, which torch 2.13 still ships but has deprecated;
    its successor (torchao) needs ``torch.compile`` to be fast on CPU.
    """
    if mode not in QUANTIZE_MODES:
        raise ValueError(f"quantize must be one of {QUANTIZE_MODES}, got {mode!r}")
    if mode == "none":
        return model
    if next(model.parameters()).device.type != "cpu":
        raise ValueError("int8 dynamic quantization runs on CPU only; load the model with device='cpu'")
    import warnings

    from torch.ao.quantization import quantize_dynamic

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*deprecated.*")
        # a bilstm's LSTM layers too (torch's dynamic int8 LSTM; packed sequences work unchanged)
        return quantize_dynamic(model.eval(), {nn.Linear, nn.LSTM}, dtype=torch.qint8)


def _ce(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Cross-entropy over tagged positions only (-100 ignored); 0 when a batch has none."""
    if not bool((target != IGNORE_INDEX).any()):
        return logits.sum() * 0.0
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(), target.reshape(-1), ignore_index=IGNORE_INDEX
    )


# -- subword tokenizer ----------------------------------------------------------------------------

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def train_tokenizer(texts: Any, vocab_size: int = 16000, min_frequency: int = 2) -> Any:
    """A cased WordPiece vocabulary trained on ``texts`` (an iterator of strings), [PAD] = id 0.

    Cased because capitalisation is a strong syntactic cue (proper nouns, sentence starts) for a
    parser without pretrained embeddings; BERT-style pre-tokenisation splits punctuation.
    """
    from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece
    from tokenizers.trainers import WordPieceTrainer

    tok = Tokenizer(WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, lowercase=False, strip_accents=False)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = WordPieceTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    return tok


def save_tokenizer(tokenizer: Any, directory: Path) -> None:
    """Save as a Hugging Face fast tokenizer (tokenizer.json + tokenizer_config.json)."""
    from transformers import PreTrainedTokenizerFast

    raw = getattr(tokenizer, "backend_tokenizer", tokenizer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )
    with atomic_files(directory) as staging:
        fast.save_pretrained(str(staging))


def load_tokenizer(directory: str | os.PathLike) -> Any:
    """The raw ``tokenizers.Tokenizer`` of a saved folder (the fastest path for batch encoding)."""
    from tokenizers import Tokenizer

    path = Path(directory) / TOKENIZER_NAME
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: the model folder must contain its tokenizer")
    return Tokenizer.from_file(str(path))


def encode_words(tokenizer: Any, sentences: Sequence[Sequence[str]]) -> list[tuple[list[int], list[int]]]:
    """Subword ids with [CLS]/[SEP] and each word's first-subword position, for pre-split sentences.

    A word the normaliser erases entirely (e.g. only control characters) is replaced by [UNK], so
    every word owns exactly one tagged position (the mask m_p of docs/design.md §1).
    """
    encs = tokenizer.encode_batch([list(s) for s in sentences], is_pretokenized=True, add_special_tokens=True)
    out = []
    for words, enc in zip(sentences, encs, strict=True):
        firsts = _first_positions(enc.word_ids, len(words))
        if firsts is None:
            fixed = [w if tokenizer.encode(w, add_special_tokens=False).ids else "[UNK]" for w in words]
            enc = tokenizer.encode(fixed, is_pretokenized=True, add_special_tokens=True)
            firsts = _first_positions(enc.word_ids, len(words))
            if firsts is None:
                raise ValueError(f"could not align subwords to words for sentence {list(words)!r}")
        out.append((list(enc.ids), firsts))
    return out


def _first_positions(word_ids: Sequence[int | None], n_words: int) -> list[int] | None:
    firsts = [-1] * n_words
    for pos, w in enumerate(word_ids):
        if w is not None and firsts[w] < 0:
            firsts[w] = pos
    return None if (n_words and min(firsts) < 0) else firsts


# -- decoding -------------------------------------------------------------------------------------


def greedy_is_well_formed(terminals: Sequence[int], nonterminals: Sequence[int]) -> bool:
    """Depth check of docs/design.md §1 on an arg-max sequence (tl +1, tr needs >= 1, nr needs >= 2 and -1,
    eos exactly on the last word, final depth 1); cheaper than decoding and raising."""
    depth = 0
    last = len(terminals) - 1
    for i, (t, nt) in enumerate(zip(terminals, nonterminals, strict=True)):
        if t == TL:
            depth += 1
        elif depth < 1:
            return False
        if i == last:
            return nt == EOS and depth == 1
        if nt == EOS:
            return False
        if nt in (NR_L, NR_R):
            if depth < 2:
                return False
            depth -= 1
    return False


def decode_scores(
    terminal_scores: np.ndarray, nonterminal_scores: np.ndarray
) -> tuple[list[int], list[int], list[int]]:
    """(terminals, nonterminals, heads) of the best well-formed tag sequence for one sentence."""
    return decode_scores_batch([terminal_scores], [nonterminal_scores])[0]


def decode_scores_batch(
    terminal_scores: Sequence[np.ndarray], nonterminal_scores: Sequence[np.ndarray]
) -> list[tuple[list[int], list[int], list[int]]]:
    """``decode_scores`` for many sentences (per-word scores [n_i, 2] and [n_i, 5] each).

    If a sentence's per-word arg-max is well formed it maximises the summed scores over *all*
    sequences, so it is also the constrained optimum; only ill-formed arg-maxes pay for Viterbi,
    and those run together, vectorised over the batch (``constrained_decode_batch``).
    """
    out: list[tuple[list[int], list[int], list[int]] | None] = []
    viterbi = []
    for k, (ts, ns) in enumerate(zip(terminal_scores, nonterminal_scores, strict=True)):
        n = ts.shape[0]
        terms = ts.argmax(-1).tolist()
        nts = ns[:, :EOS].argmax(-1).tolist()
        nts[n - 1] = EOS
        if greedy_is_well_formed(terms, nts):
            out.append((terms, nts, decode(terms, nts)))
        else:
            out.append(None)
            viterbi.append(k)
    if viterbi:
        longest = max(terminal_scores[k].shape[0] for k in viterbi)
        ts_pad = np.zeros((len(viterbi), longest, N_TERMINALS))
        ns_pad = np.zeros((len(viterbi), longest, N_NONTERMINALS))
        for r, k in enumerate(viterbi):
            n = terminal_scores[k].shape[0]
            ts_pad[r, :n] = terminal_scores[k]
            ns_pad[r, :n] = nonterminal_scores[k]
        lengths = [terminal_scores[k].shape[0] for k in viterbi]
        for k, res in zip(viterbi, constrained_decode_batch(ts_pad, ns_pad, lengths), strict=True):
            out[k] = res
    return out  # type: ignore[return-value]


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
    """Tag pre-split sentences end to end: subword-encode, run the encoder in length-sorted batches,
    read the scores at first subwords, decode each sentence to a well-formed tree."""
    if any(len(s) == 0 for s in sentences):
        raise ValueError("every sentence needs at least one word")
    encoded = encode_words(tokenizer, sentences)
    limit = model.config.max_positions
    for k, (ids, _) in enumerate(encoded):
        if len(ids) > limit:
            raise ValueError(
                f"sentence {k} has {len(ids)} subwords; the model takes at most {limit} (split the sentence)"
            )
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
        self._splitter: Any = None

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

    def _split(self, texts: Sequence[str]) -> list[list[list[str]]]:
        if self._splitter is None:
            import spacy

            nlp = spacy.blank("en")
            nlp.add_pipe("sentencizer")
            self._splitter = nlp
        out = []
        for doc in self._splitter.pipe(list(texts)):
            sents = [[t.text for t in s if not t.is_space] for s in doc.sents]
            out.append([s for s in sents if s])
        return out

    def predict_text(
        self, texts: Sequence[str], split_sentences: bool = True
    ) -> list[list[tuple[list[str], list[int], list[str] | None]]]:
        """Sentences of each text (spaCy's rule-based sentencizer); with ``split_sentences=False``
        each text is tagged as one sentence, which the scorers' character alignment needs."""
        split = self._split(texts)
        if not split_sentences:
            split = [[[w for sent in sents for w in sent]] if sents else [] for sents in split]
        flat = [s for sents in split for s in sents]
        trees = self.predict_words(flat) if flat else []
        out, k = [], 0
        for sents in split:
            out.append([(w, *trees[k + j]) for j, w in enumerate(sents)])
            k += len(sents)
        return out

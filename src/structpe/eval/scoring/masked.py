"""The masked scorer: pseudo-log-likelihood of encoders (Salazar et al. 2020; docs/design.md §4).

``original`` masks only the target token; ``within_word_l2r`` (Kauf & Ivanova 2023) masks the
target and every later subword of the same word, following minicons' ``MaskedLMScorer``. Tags are
placed as for the causal scorer (``structpe.eval.scoring.inputs``). Kept apart from the causal
scorer and the scorer factory (``structpe.eval.scoring.scorer``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from structpe.choices import PLL_METRICS
from structpe.eval.scoring.inputs import batched, padded_batch, parse_texts, progress_bar
from structpe.eval.scoring.types import Parser, TokenScores, forward_logits, model_device, uses_tags
from structpe.syntax.alignment import align_tags_by_offsets
from structpe.syntax.hexatags import IGNORE_INDEX as IGNORE


class MaskedScorer:
    """Pseudo-log-likelihood for encoders (docs/design.md §4; minicons ``MaskedLMScorer``).

    One copy of the text per scored token; in each copy the target (and, for ``within_word_l2r``,
    the later subwords of its word, by the fast tokenizer's ``word_ids``) is replaced by the mask
    token, and its tags are set to -100 so the prior cannot leak the masked word (docs/design.md §2:
    "zero the prior" at masked positions). PLL = sum over tokens of log P(x_t | copy_t).
    """

    def __init__(
        self, model: Any, tokenizer: Any, parser: Parser | None = None, *, metric: str = "within_word_l2r",
        batch_size: int = 64, max_length: int | None = None, progress: bool = False,
    ) -> None:
        if metric not in PLL_METRICS:
            raise ValueError(f"PLL metric {metric!r} unknown; expected one of {PLL_METRICS}")
        if tokenizer.mask_token_id is None:
            raise ValueError("a masked-LM scorer needs a tokenizer with a mask token")
        self.model = model
        self.tokenizer = tokenizer
        self.parser = parser
        self.metric = metric
        self.batch_size = batch_size
        self.max_length = max_length
        self.progress = progress
        self.tagged = uses_tags(model)
        self.likelihood = f"pll-{metric}"
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    def score(self, texts: Sequence[str], parses: list[Any] | None = None) -> list[TokenScores]:
        texts = list(texts)
        if self.tagged and parses is None:
            if self.parser is None:
                raise ValueError("this model reads hexatags: give the scorer a parser or parses")
            parses = parse_texts(self.parser, texts)
        enc = self.tokenizer(texts, return_offsets_mapping=True, return_special_tokens_mask=True)
        seqs = []
        jobs: list[tuple[int, int, list[int]]] = []  # (text index, target position, masked positions)
        for k, text in enumerate(texts):
            ids = list(enc["input_ids"][k])
            if self.max_length is not None and len(ids) > self.max_length:
                raise ValueError(f"text {k} needs {len(ids)} tokens > max_length {self.max_length}")
            offs = [tuple(o) for o in enc["offset_mapping"][k]]
            special = [bool(s) for s in enc["special_tokens_mask"][k]]
            wids = enc.word_ids(k)
            scorable = [not s for s in special]
            if self.tagged:
                t, n, missed = align_tags_by_offsets(text, offs, parses[k], scorable)  # type: ignore[index]
            else:
                t, n, missed = [IGNORE] * len(ids), [IGNORE] * len(ids), 0
            seqs.append((ids, offs, scorable, t, n, missed))
            for p in range(len(ids)):
                if not scorable[p]:
                    continue
                masked = [p]
                if self.metric == "within_word_l2r" and wids[p] is not None:
                    q = p + 1
                    while q < len(ids) and scorable[q] and wids[q] == wids[p]:
                        masked.append(q)
                        q += 1
                jobs.append((k, p, masked))
        lps: list[dict[int, float]] = [{} for _ in texts]
        device = model_device(self.model)
        batches = list(batched(jobs, self.batch_size))
        with torch.no_grad():
            for batch in progress_bar(batches, self.progress, f"PLL ({self.metric})", len(batches)):
                B = len(batch)
                input_ids, mask, term, nonterm = padded_batch(
                    [(seqs[k][0], seqs[k][3], seqs[k][4]) for k, _, _ in batch], self.pad_id
                )
                for b, (_k, _p, masked) in enumerate(batch):
                    input_ids[b, masked] = self.tokenizer.mask_token_id
                    term[b, masked] = IGNORE
                    nonterm[b, masked] = IGNORE
                out = forward_logits(
                    self.model, input_ids.to(device), mask.to(device),
                    term.to(device) if self.tagged else None, nonterm.to(device) if self.tagged else None,
                )
                rows = torch.arange(B)
                pos = torch.tensor([p for _, p, _ in batch])
                tgt = torch.tensor([seqs[k][0][p] for k, p, _ in batch])
                logits = out.logits[rows.to(out.logits.device), pos.to(out.logits.device)].float()
                lp = torch.log_softmax(logits, dim=-1).gather(-1, tgt.to(logits.device).unsqueeze(-1))
                for (k, p, _), v in zip(batch, lp.squeeze(-1).tolist(), strict=True):
                    lps[k][p] = v
        res = []
        for k, text in enumerate(texts):
            ids, offs, scorable, _, _, missed = seqs[k]
            keep = [p for p in range(len(ids)) if scorable[p]]
            res.append(
                TokenScores(
                    text=text,
                    token_ids=[ids[p] for p in keep],
                    offsets=[offs[p] for p in keep],
                    logprobs=[lps[k][p] for p in keep],
                    likelihood=self.likelihood,
                    tagged=self.tagged,
                    unaligned_words=missed,
                )
            )
        return res

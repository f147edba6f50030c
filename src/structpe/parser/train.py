"""Training the hexatagger (``structpe parser train``): the loop, its schedule and its checkpoints.

Data: UD English train splits, projectivised by arc lifting (Nivre & Nilsson 2005, via
``structpe.syntax.trees``) and hexatagged (docs/design.md §1). The default mix is the prose treebanks EWT,
GUM, LinES and ParTUT. Atis (lower-cased air-travel queries) and ESLSpok (transcribed learner
speech) are left out by default: their sentences are short and their domains are far from the
web/prose text we evaluate (EWT) and tag (LM corpora). Model selection is on EWT dev UAS.

Recipe choices for accuracy per CPU-minute: a pre-LN encoder that trains stably with a large
learning rate, linear warm-up, then cosine decay driven by
``progress = max(step / max_steps, elapsed / max_minutes)`` so a run always finishes its schedule
inside its time budget; dynamic batches of similar-length sentences capped by a subword budget
(little padding); subwords of the tokenizer never seen in the training sentences get the [UNK]
embedding at save time (corpus-only vocabulary would otherwise keep random vectors).

The recipe (``ParserTrainConfig``) lives in ``structpe.parser.recipe``, the data in
``structpe.parser.data`` and the metrics (``evaluate``) in ``structpe.parser.evaluate``.
"""

from __future__ import annotations

import copy
import json
import math
import os
import random
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from structpe.errors import StructpeError
from structpe.io import atomic_write_text
from structpe.parser.data import (
    Example,
    build_examples,
    collate,
    corpus_lines,
    load_sentences,
    shuffled_batches,
    treebank_file,
)
from structpe.parser.evaluate import evaluate_model
from structpe.parser.model import HexataggerConfig, HexataggerModel
from structpe.parser.recipe import (
    ParserTrainConfig,
)
from structpe.parser.tokenizer import train_tokenizer
from structpe.syntax.conllu_io import ConlluSentence


def _lr_factor(step: int, progress: float, warmup: int, min_ratio: float) -> float:
    if step < warmup:
        return (step + 1) / warmup
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))


def _unk_unseen(model: HexataggerModel, examples: Sequence[Example], unk_id: int, keep: set[int]) -> int:
    """Give every subword never seen in training the [UNK] vector; returns how many were reset."""
    seen = torch.zeros(model.config.vocab_size, dtype=torch.bool)
    for e in examples:
        seen[torch.as_tensor(e.ids)] = True
    for k in keep:
        seen[k] = True
    with torch.no_grad():
        w = model.tok_emb.weight
        unseen = (~seen).nonzero().flatten().to(w.device)
        w[unseen] = w[unk_id].clone()
    return int(unseen.numel())


class _Log:
    """``train_log.jsonl``: one JSON object a line, each stamped with the seconds since the start."""

    def __init__(self, path: Path, t0: float) -> None:
        self.fh = path.open("w")
        self.t0 = t0

    def __call__(self, record: dict[str, Any]) -> None:
        record = {"time_s": round(time.time() - self.t0, 1), **record}
        self.fh.write(json.dumps(record) + "\n")
        self.fh.flush()


def _load_data(cfg: ParserTrainConfig, root: Path) -> tuple[list[ConlluSentence], list[ConlluSentence], dict]:
    """The train sentences of every treebank of the mix, the dev sentences, and the count per treebank."""
    train_sents: list[ConlluSentence] = []
    per_bank = {}
    for name in cfg.data.train:
        sents = load_sentences(treebank_file(root, name, "train"), cfg.data.limit_train)
        per_bank[name] = len(sents)
        train_sents.extend(sents)
    dev_sents = load_sentences(treebank_file(root, cfg.data.dev, "dev"), cfg.data.limit_dev)
    return train_sents, dev_sents, per_bank


def _build_model(
    cfg: ParserTrainConfig, tokenizer: Any, deprels: list[str], texts: Any, stage_s: dict, log: _Log
) -> HexataggerModel:
    """The model of the recipe, its frozen subword vectors trained first when the recipe asks."""
    m = cfg.model
    mcfg = HexataggerConfig(
        vocab_size=tokenizer.get_vocab_size(),
        d_model=m.d_model,
        n_layers=m.n_layers,
        n_heads=m.n_heads,
        d_ff=m.d_ff,
        max_positions=m.max_positions,
        dropout=m.dropout,
        pad_token_id=tokenizer.token_to_id("[PAD]"),
        deprels=deprels,
        pair_nonterminal=m.pair_nonterminal,
        encoder=m.encoder,
        d_emb=m.d_emb,
    )
    model = HexataggerModel(mcfg)
    if cfg.vectors.enabled:
        from structpe.parser.word_vectors import train_subword_vectors

        tv, cv = time.time(), time.process_time()
        v = cfg.vectors
        table, vstats = train_subword_vectors(
            tokenizer, texts(), m.d_emb, v.epochs, v.window, v.min_count, cfg.seed, workers=cfg.threads or 1
        )
        with torch.no_grad():
            model.encoder.pretrained_emb.weight.copy_(torch.from_numpy(table))
        stage_s["word_vectors"] = (time.time() - tv, time.process_time() - cv)
        log({"event": "vectors", "seconds": round(stage_s["word_vectors"][0], 1), **vstats})
    return model


def _optimizer(model: HexataggerModel, o: Any, device: torch.device) -> tuple[torch.optim.Optimizer, Any]:
    """AdamW (no decay on embeddings, norms and biases) and, when the recipe keeps one, the EMA model:
    Polyak/EMA weights smooth the noise of short large-LR runs (torch's own averaging utility)."""
    ema = None
    if o.ema:
        from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

        ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(o.ema), use_buffers=True)
    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    decay = [p for n, p in trainable if p.ndim >= 2 and "emb" not in n]
    no_decay = [p for n, p in trainable if not (p.ndim >= 2 and "emb" not in n)]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": o.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=o.lr,
        betas=o.betas,
        fused=device.type == "cuda",
    )
    return opt, ema


class _Loop:
    """The training loop: steps on length-bucketed batches until the schedule's progress reaches 1
    (steps, the training clock or the wall clock), with dev evaluations that keep the best checkpoint."""

    def __init__(
        self, cfg: ParserTrainConfig, out: Path, log: _Log, model: HexataggerModel, tokenizer: Any,
        examples: list[Example], dev_sents: list[ConlluSentence], labelled: bool, progress: bool,
    ) -> None:
        o = self.o = cfg.optim
        self.out, self.log, self.model, self.tokenizer = out, log, model, tokenizer
        self.examples, self.dev_sents, self.labelled = examples, dev_sents, labelled
        self.device = torch.device(cfg.device)
        self.model = model.to(self.device)
        self.opt, self.ema = _optimizer(self.model, o, self.device)
        self.unk_id = tokenizer.token_to_id("[UNK]")
        self.specials = {tokenizer.token_to_id(t) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")}
        mcfg = model.config
        log({"event": "model", "parameters": model.num_parameters(),
             "config": mcfg.to_dict() | {"deprels": len(mcfg.deprels)}})
        self.max_s = o.max_minutes * 60 if o.max_minutes else math.inf
        self.max_wall = o.max_wall_minutes * 60 if o.max_wall_minutes else math.inf
        self.best: dict[str, Any] = {"uas": -1.0}
        self.step = 0
        self.bar = None
        if progress:
            from tqdm.auto import tqdm

            total = o.max_steps if not o.max_minutes else None
            self.bar = tqdm(total=total, desc="train", unit="step", dynamic_ncols=True)
        if o.clock not in ("wall", "cpu"):
            raise ValueError(f"optim.clock must be 'wall' or 'cpu', got {o.clock!r}")
        self.n_threads = torch.get_num_threads()

    def clock(self) -> float:
        # cpu: a shared machine slows the run down but does not shorten its training
        return time.process_time() / self.n_threads if self.o.clock == "cpu" else time.time()

    def evaluate(self) -> None:
        """Evaluate exactly what would be saved: a copy (of the EMA weights, if kept) with unseen
        subwords mapped to [UNK]; with EMA the raw weights' UAS is logged alongside."""
        model, ema, o = self.model, self.ema, self.o
        transformer = model.config.encoder == "transformer"
        te = time.time()
        snapshot = copy.deepcopy(ema.module if ema is not None else model).eval()
        # a bilstm's unseen subwords keep their pretrained vectors (trainable part zero): no reset
        n_unk = _unk_unseen(snapshot, self.examples, self.unk_id, self.specials) if transformer else 0
        res = evaluate_model(snapshot, self.tokenizer, self.dev_sents, o.eval_batch_tokens)
        if ema is not None:
            raw = copy.deepcopy(model).eval()
            if transformer:
                _unk_unseen(raw, self.examples, self.unk_id, self.specials)
            raw_res = evaluate_model(raw, self.tokenizer, self.dev_sents, o.eval_batch_tokens)
            res["uas_raw_weights"] = raw_res["uas"]
        self.log({"event": "dev", "step": self.step, "eval_s": round(time.time() - te, 1), **res})
        best = self.best
        if res["uas"] > best["uas"]:
            best.update(res, step=self.step, unseen_subwords_to_unk=n_unk)
            snapshot.cpu().save_pretrained(self.out, tokenizer=self.tokenizer)
        if self.bar is not None:
            self.bar.write(f"step {self.step}: dev UAS {res['uas']:.2f} tag acc {res['tag_acc']:.2f} "
                           f"(best {best['uas']:.2f})")

    def train_step(self, batch: list[int], prog: float, ema_loss: float | None) -> float:
        """One optimiser step on ``batch`` (the LR of the schedule at ``prog``, [UNK] dropout); logs
        every 50 steps; returns the smoothed loss."""
        o, opt, model, device, unk_id = self.o, self.opt, self.model, self.device, self.unk_id
        for g in opt.param_groups:
            g["lr"] = o.lr * _lr_factor(self.step, prog, o.warmup_steps, o.min_lr_ratio)
        b = collate([self.examples[i] for i in batch], model.config.pad_token_id)
        ids = b["input_ids"]
        if o.unk_dropout > 0:
            drop = (torch.rand(ids.shape) < o.unk_dropout) & (b["attention_mask"] == 1)
            for s in self.specials:
                drop &= ids != s
            ids = ids.masked_fill(drop, unk_id)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=o.amp_bf16):
            res = model(
                ids.to(device),
                b["attention_mask"].to(device),
                b["terminals"].to(device),
                b["nonterminals"].to(device),
                b["deprels"].to(device) if self.labelled else None,
            )
        opt.zero_grad(set_to_none=True)
        res.loss.backward()
        if o.grad_clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), o.grad_clip)
        opt.step()
        if self.ema is not None:
            self.ema.update_parameters(model)
        self.step += 1
        loss = float(res.loss.detach())
        ema_loss = loss if ema_loss is None else 0.98 * ema_loss + 0.02 * loss
        if self.step % 50 == 0 or self.step == 1:
            self.log({
                "event": "train", "step": self.step, "loss": loss, "ema_loss": ema_loss,
                "terminal_loss": float(res.terminal_loss.detach()),
                "nonterminal_loss": float(res.nonterminal_loss.detach()),
                "lr": opt.param_groups[0]["lr"],
            })
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(loss=f"{ema_loss:.3f}", lr=f"{opt.param_groups[0]['lr']:.2e}", refresh=False)
        return ema_loss

    def run(self, rng: random.Random) -> None:
        """Train until the schedule ends, evaluating every ``eval_every`` steps or minutes and at the end."""
        o = self.o
        self.train_start, self.train_cpu = time.time(), time.process_time()
        self.clock_start = last_eval = self.clock()
        lengths = [len(e.ids) for e in self.examples]
        self.model.train()
        done = False
        ema_loss = None
        while not done:
            for batch in shuffled_batches(lengths, o.batch_tokens, rng):
                elapsed = self.clock() - self.clock_start
                prog = max(self.step / o.max_steps, elapsed / self.max_s,
                           (time.time() - self.train_start) / self.max_wall)
                if prog >= 1.0:
                    done = True
                    break
                ema_loss = self.train_step(batch, prog, ema_loss)
                due = bool(o.eval_every) and self.step % o.eval_every == 0
                if o.eval_every_minutes and self.clock() - last_eval >= 60 * o.eval_every_minutes:
                    due = True
                if due:
                    self.evaluate()
                    last_eval = self.clock()
        self.evaluate()
        if self.bar is not None:
            self.bar.close()


def train(
    cfg: ParserTrainConfig, output_dir: str | os.PathLike | None = None, progress: bool = True
) -> dict[str, Any]:
    """Train with ``cfg``; the best dev-UAS checkpoint is saved in ``output_dir``. Returns a summary."""
    from structpe.data.paths import data_root

    if cfg.vectors.enabled and cfg.model.encoder != "bilstm":
        raise StructpeError("vectors.enabled needs model.encoder: bilstm (the frozen subword table)")
    out = Path(output_dir or cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    rng = random.Random(cfg.seed)
    root = data_root(cfg.data.root)
    t0 = time.time()
    log = _Log(out / "train_log.jsonl", t0)
    train_sents, dev_sents, per_bank = _load_data(cfg, root)

    def texts() -> Iterator[str]:
        for s in train_sents:
            yield " ".join(s.words)
        yield from corpus_lines(root, cfg.tokenizer.corpora)

    tokenizer = train_tokenizer(texts(), cfg.tokenizer.vocab_size, cfg.tokenizer.min_frequency)
    # wall and process-CPU seconds of each stage (the recipe's time budget is the sum)
    stage_s = {"data_and_tokenizer": (time.time() - t0, time.process_time())}
    deprels = sorted({d for s in train_sents for d in s.deprels}) if cfg.model.labels else []
    deprel_to_id = {d: i for i, d in enumerate(deprels)} if deprels else None
    examples, stats = build_examples(train_sents, tokenizer, deprel_to_id, cfg.data.max_train_subwords)
    if not examples:
        raise ValueError("no training sentences left (all longer than data.max_train_subwords?)")
    log({"event": "data", "treebanks": per_bank, "dev": len(dev_sents), **stats,
         "vocab_size": tokenizer.get_vocab_size(), "deprels": len(deprels)})
    model = _build_model(cfg, tokenizer, deprels, texts, stage_s, log)
    loop = _Loop(cfg, out, log, model, tokenizer, examples, dev_sents, bool(deprels), progress)
    loop.run(rng)
    summary = {
        "output_dir": str(out),
        "steps": loop.step,
        "train_minutes": round((time.time() - loop.train_start) / 60, 2),
        "train_clock_minutes": round((loop.clock() - loop.clock_start) / 60, 2),
        "clock": cfg.optim.clock,
        "cpu_minutes": round(time.process_time() / 60, 2),
        "total_minutes": round((time.time() - t0) / 60, 2),
        "stage_seconds": {
            k: {"wall": round(w, 1), "cpu": round(c, 1)}
            for k, (w, c) in {
                **stage_s, "training": (time.time() - loop.train_start, time.process_time() - loop.train_cpu)
            }.items()
        },
        "best_step": loop.best.get("step"),
        "best_dev": {k: v for k, v in loop.best.items() if k not in ("step",)},
        "data": {"treebanks": per_bank, **stats},
        "config": cfg.to_dict(),
    }
    atomic_write_text(out / "train_summary.json", json.dumps(summary, indent=2) + "\n")
    log({"event": "done", **{k: v for k, v in summary.items() if k != "config"}})
    log.fh.close()
    return summary

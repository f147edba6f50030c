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
``structpe.parser.data`` and the metrics (``evaluate``) in
``structpe.parser.evaluate``; their names stay importable from here.
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
    log_path = out / "train_log.jsonl"
    log_fh = log_path.open("w")

    def log(record: dict[str, Any]) -> None:
        record = {"time_s": round(time.time() - t0, 1), **record}
        log_fh.write(json.dumps(record) + "\n")
        log_fh.flush()

    # data
    train_sents: list[ConlluSentence] = []
    per_bank = {}
    for name in cfg.data.train:
        sents = load_sentences(treebank_file(root, name, "train"), cfg.data.limit_train)
        per_bank[name] = len(sents)
        train_sents.extend(sents)
    dev_sents = load_sentences(treebank_file(root, cfg.data.dev, "dev"), cfg.data.limit_dev)

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
    log(
        {
            "event": "data",
            "treebanks": per_bank,
            "dev": len(dev_sents),
            **stats,
            "vocab_size": tokenizer.get_vocab_size(),
            "deprels": len(deprels),
        }
    )

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
    device = torch.device(cfg.device)
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
    model = model.to(device)
    o = cfg.optim
    # Polyak/EMA weights smooth the noise of short large-LR runs; torch's own averaging utility
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
    unk_id = tokenizer.token_to_id("[UNK]")
    specials = {tokenizer.token_to_id(t) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")}
    log(
        {
            "event": "model",
            "parameters": model.num_parameters(),
            "config": mcfg.to_dict() | {"deprels": len(deprels)},
        }
    )

    max_s = o.max_minutes * 60 if o.max_minutes else math.inf
    max_wall = o.max_wall_minutes * 60 if o.max_wall_minutes else math.inf
    best: dict[str, Any] = {"uas": -1.0}
    step = 0
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(
            total=o.max_steps if not o.max_minutes else None, desc="train", unit="step", dynamic_ncols=True
        )
    if o.clock not in ("wall", "cpu"):
        raise ValueError(f"optim.clock must be 'wall' or 'cpu', got {o.clock!r}")
    n_threads = torch.get_num_threads()

    def clock() -> float:
        # cpu: a shared machine slows the run down but does not shorten its training
        return time.process_time() / n_threads if o.clock == "cpu" else time.time()

    train_start, train_cpu = time.time(), time.process_time()
    clock_start = clock()
    last_eval = [clock_start]

    def run_eval() -> None:
        # evaluate exactly what would be saved: a copy (of the EMA weights, if kept) with unseen
        # subwords mapped to [UNK]; with EMA the raw weights' UAS is logged alongside
        te = time.time()
        snapshot = copy.deepcopy(ema.module if ema is not None else model).eval()
        # a bilstm's unseen subwords keep their pretrained vectors (trainable part zero): no reset
        n_unk = _unk_unseen(snapshot, examples, unk_id, specials) if mcfg.encoder == "transformer" else 0
        res = evaluate_model(snapshot, tokenizer, dev_sents, o.eval_batch_tokens)
        if ema is not None:
            raw = copy.deepcopy(model).eval()
            if mcfg.encoder == "transformer":
                _unk_unseen(raw, examples, unk_id, specials)
            res["uas_raw_weights"] = evaluate_model(raw, tokenizer, dev_sents, o.eval_batch_tokens)["uas"]
        log({"event": "dev", "step": step, "eval_s": round(time.time() - te, 1), **res})
        if res["uas"] > best["uas"]:
            best.update(res, step=step, unseen_subwords_to_unk=n_unk)
            snapshot.cpu().save_pretrained(out, tokenizer=tokenizer)
        if bar is not None:
            bar.write(
                f"step {step}: dev UAS {res['uas']:.2f} tag acc {res['tag_acc']:.2f} (best {best['uas']:.2f})"
            )

    lengths = [len(e.ids) for e in examples]
    model.train()
    done = False
    ema_loss = None
    while not done:
        for batch in shuffled_batches(lengths, o.batch_tokens, rng):
            elapsed = clock() - clock_start
            prog = max(step / o.max_steps, elapsed / max_s, (time.time() - train_start) / max_wall)
            if prog >= 1.0:
                done = True
                break
            for g in opt.param_groups:
                g["lr"] = o.lr * _lr_factor(step, prog, o.warmup_steps, o.min_lr_ratio)
            b = collate([examples[i] for i in batch], mcfg.pad_token_id)
            ids = b["input_ids"]
            if o.unk_dropout > 0:
                drop = (torch.rand(ids.shape) < o.unk_dropout) & (b["attention_mask"] == 1)
                for s in specials:
                    drop &= ids != s
                ids = ids.masked_fill(drop, unk_id)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=o.amp_bf16):
                res = model(
                    ids.to(device),
                    b["attention_mask"].to(device),
                    b["terminals"].to(device),
                    b["nonterminals"].to(device),
                    b["deprels"].to(device) if deprels else None,
                )
            opt.zero_grad(set_to_none=True)
            res.loss.backward()
            if o.grad_clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), o.grad_clip)
            opt.step()
            if ema is not None:
                ema.update_parameters(model)
            step += 1
            loss = float(res.loss.detach())
            ema_loss = loss if ema_loss is None else 0.98 * ema_loss + 0.02 * loss
            if step % 50 == 0 or step == 1:
                log(
                    {
                        "event": "train",
                        "step": step,
                        "loss": loss,
                        "ema_loss": ema_loss,
                        "terminal_loss": float(res.terminal_loss.detach()),
                        "nonterminal_loss": float(res.nonterminal_loss.detach()),
                        "lr": opt.param_groups[0]["lr"],
                    }
                )
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{ema_loss:.3f}", lr=f"{opt.param_groups[0]['lr']:.2e}", refresh=False)
            due = bool(o.eval_every) and step % o.eval_every == 0
            if o.eval_every_minutes and clock() - last_eval[0] >= 60 * o.eval_every_minutes:
                due = True
            if due:
                run_eval()
                last_eval[0] = clock()
    run_eval()
    if bar is not None:
        bar.close()
    summary = {
        "output_dir": str(out),
        "steps": step,
        "train_minutes": round((time.time() - train_start) / 60, 2),
        "train_clock_minutes": round((clock() - clock_start) / 60, 2),
        "clock": o.clock,
        "cpu_minutes": round(time.process_time() / 60, 2),
        "total_minutes": round((time.time() - t0) / 60, 2),
        "stage_seconds": {
            k: {"wall": round(w, 1), "cpu": round(c, 1)}
            for k, (w, c) in {
                **stage_s, "training": (time.time() - train_start, time.process_time() - train_cpu)
            }.items()
        },
        "best_step": best.get("step"),
        "best_dev": {k: v for k, v in best.items() if k not in ("step",)},
        "data": {"treebanks": per_bank, **stats},
        "config": cfg.to_dict(),
    }
    atomic_write_text(out / "train_summary.json", json.dumps(summary, indent=2) + "\n")
    log({"event": "done", **{k: v for k, v in summary.items() if k != "config"}})
    log_fh.close()
    return summary



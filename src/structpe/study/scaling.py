"""One study's claims across its profiles (scales), read against the baseline's own quality
(``structpe study scaling``).

Each study folder is aggregated by its own :func:`structpe.study.aggregate.aggregate` (paired
per-seed differences signed so that > 0 is the paper's direction, their paired-t 95% interval,
the verdict under that study's Holm family); nothing here recomputes a statistic. What this
module adds is the comparison between two scales, a description and not a test (:func:`change`):

- **flips sign**: the two 95% intervals exclude zero on opposite sides;
- **grows** / **shrinks**: the later scale's interval lies wholly above / below the earlier
  scale's mean (the signed effect moves towards / away from the paper's direction);
- **stays within noise**: both intervals contain zero;
- **not distinguishable at these seed counts**: anything else, or fewer than two paired seeds;
- **not run**: the claim's recipe or metric has no cells at one of the two scales;
- **protocols differ**: the two scales scored the metric under other evaluation settings (the
  pairs, suites or beam width that ``spec.json`` records, :func:`structpe.study.spec.score_settings`):
  their effects are not the same measurement, so no change word is given.

The rules are checked in this order, "protocols differ" first. "Later" is the page's order of
scales (the order given, or the baseline's quality, worst first). The page itself (Markdown, plot,
JSON) is :mod:`structpe.study.scaling_page`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from structpe.io import read_json
from structpe.study.aggregate import aggregate, better_of
from structpe.study.cell_metrics import load_cell_metrics, load_rerun_cells
from structpe.study.cells import StudyError
from structpe.study.selection import folder_commands, folder_plan, folder_spec
from structpe.study.spec import StudySpec, score_settings
from structpe.study.wording import COLUMNS

NOT_DISTINGUISHABLE = "not distinguishable at these seed counts"
PROTOCOLS_DIFFER = "protocols differ"
CHANGES = (
    "flips sign",
    "grows",
    "shrinks",
    "stays within noise",
    NOT_DISTINGUISHABLE,
    "not run",
    PROTOCOLS_DIFFER,
)
KINDS = ("val LM loss", "word PPL", "BLiMP", "SG")  # the baseline's scores per scale, COLUMNS' names
X_CHOICES = {"syntaxgym": "SG", "val_lm_loss": "val LM loss"}  # --x: the plot's baseline quality
ORDERS = ("given", "quality")


@dataclass
class Scale:
    """One study folder: its spec (at its profile), finished cells, aggregate and chance row."""

    folder: Path
    spec: StudySpec
    cells: list[dict[str, Any]]
    agg: dict[str, Any]
    chance: dict[str, Any] | None
    commands: list[str]  # the folder's runs, in order (a study run in slices has several)
    saved: dict[str, Any]  # spec.json's `spec`: the settings its cells were evaluated under

    @property
    def profile(self) -> str:
        return self.spec.profile

    def baseline_score(self, metric: str | None) -> dict[str, Any]:
        """The baseline's mean ± sd (and n seeds) of ``metric``; n = 0 when it has none."""
        scores = self.agg["recipes"][self.spec.baseline]["scores"]
        return scores.get(metric or "", {"mean": math.nan, "sd": math.nan, "n": 0})


def load_scale(folder: str | Path) -> Scale:
    """Read and aggregate one study folder (its ``spec.json``, ``cells/*/seed-*/metrics.json`` and the
    baseline's re-runs on other machines, ``machines/*/cells``, as its report pairs them)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise StudyError(f"{folder}: not a folder (expected a study folder written by `structpe study run`)")
    spec = folder_spec(folder)
    cells = load_cell_metrics(folder)
    if not cells:
        raise StudyError(f"{folder}: no finished cells (no cells/<recipe>/seed-<s>/metrics.json)")
    chance = read_json(folder / "chance.json") if (folder / "chance.json").is_file() else None
    saved = read_json(folder / "spec.json").get("spec") or {}
    agg = aggregate(cells, spec, folder_plan(folder), load_rerun_cells(folder))
    return Scale(folder, spec, cells, agg, chance, folder_commands(folder), saved)


def protocol_difference(a: Scale, b: Scale, metric: str) -> str | None:
    """The evaluation settings of ``metric`` in which scale ``b`` differs from ``a`` (as their
    ``spec.json`` record them), in words; None when they scored it alike."""
    sa, sb = score_settings(a.saved, metric), score_settings(b.saved, metric)
    unset = "not recorded"
    keys = [k for k in dict.fromkeys([*sa, *sb]) if sa.get(k, unset) != sb.get(k, unset)]
    said = [
        f"`{k}` {_setting(sa.get(k, unset))} at `{a.profile}`, {_setting(sb.get(k, unset))} at `{b.profile}`"
        for k in keys
    ]
    return "; ".join(said) or None


def _setting(value: Any) -> str:
    if isinstance(value, list) and len(value) > 4:
        return f"{len(value)} named ({', '.join(map(str, value[:2]))}, ...)"
    return "null" if value is None else str(value)


def check_scales(scales: Sequence[Scale]) -> None:
    """One study at different profiles: anything else is no scaling comparison."""
    names = {s.spec.name for s in scales}
    if len(names) > 1:
        found = ", ".join(f"{s.folder} is {s.spec.name!r}" for s in scales)
        raise StudyError(f"the folders hold different studies ({found}); compare one study's profiles")
    seen: dict[str, Path] = {}
    for s in scales:
        if s.profile in seen:
            raise StudyError(
                f"{seen[s.profile]} and {s.folder} are both profile {s.profile!r}; "
                "a scaling page compares different profiles"
            )
        seen[s.profile] = s.folder


def kind_metric(kind: str, scales: Sequence[Scale]) -> str | None:
    """The first metric of ``kind`` (a short name of ``COLUMNS``) that some scale's baseline has.
    The baseline reads no tags, so its score is its exact p(x)'s in every likelihood mode."""
    for name, metric in COLUMNS:
        if name == kind and any(s.baseline_score(metric)["n"] for s in scales):
            return metric
    return None


def x_metric(x: str | None, scales: Sequence[Scale]) -> str:
    """The baseline score on the plot's x axis: ``--x``, else SyntaxGym where every scale has it,
    else the validation loss."""
    choices = [x] if x else list(X_CHOICES)
    for choice in choices:
        if choice not in X_CHOICES:
            raise StudyError(f"--x {choice}: choose from {', '.join(X_CHOICES)}")
        metric = kind_metric(X_CHOICES[choice], scales)
        missing = [s for s in scales if not s.baseline_score(metric)["n"]]
        if not missing:
            return str(metric)
        if x:
            raise StudyError(
                f"--x {x}: the baseline of {missing[0].folder} has no {X_CHOICES[x]} score; "
                f"choose from {', '.join(X_CHOICES)}"
            )
    raise StudyError("no baseline score (SyntaxGym or validation loss) at every scale to plot against")


def order_scales(scales: list[Scale], order: str, metric: str) -> list[Scale]:
    """``given``: as listed; ``quality``: by the baseline's ``metric``, worst first."""
    if order not in ORDERS:
        raise StudyError(f"--order {order}: choose from {', '.join(ORDERS)}")
    if order == "given":
        return list(scales)
    sign = 1.0 if better_of(metric) == "higher" else -1.0
    return sorted(scales, key=lambda s: sign * s.baseline_score(metric)["mean"])


def change(a: dict[str, Any] | None, b: dict[str, Any] | None) -> str:
    """How a signed effect moves from an earlier scale's row ``a`` to a later one's ``b`` (rows as
    :func:`structpe.study.aggregate.paired` builds them; None = not in that study). The rule is
    the module docstring's; a description, not a test."""
    if a is None or b is None or not a["ran"] or not b["ran"] or not a["n"] or not b["n"]:
        return "not run"
    if a["n"] < 2 or b["n"] < 2:
        return NOT_DISTINGUISHABLE
    (alo, ahi), (blo, bhi) = a["ci95"], b["ci95"]
    if (alo > 0 and bhi < 0) or (ahi < 0 and blo > 0):
        return "flips sign"
    if blo > a["mean"]:
        return "grows"
    if bhi < a["mean"]:
        return "shrinks"
    if alo <= 0 <= ahi and blo <= 0 <= bhi:
        return "stays within noise"
    return NOT_DISTINGUISHABLE


def claims_across(scales: Sequence[Scale]) -> list[dict[str, Any]]:
    """Per claim (in first-seen order): its verdicts per scale and, per decision metric (role,
    metric), the scale's aggregate row (None: not in that study) and the change between each
    pair of neighbouring scales."""
    found: dict[str, dict[str, Any]] = {}
    for s in scales:
        for c in s.agg["claims"]:
            found.setdefault(c["id"], c)
    out = []
    for cid, first in found.items():
        per = {s.profile: next((c for c in s.agg["claims"] if c["id"] == cid), None) for s in scales}
        keys: list[tuple[str, str]] = []
        for c in per.values():
            for role, group in (("replication", "metrics"), ("honest", "honest")):
                for r in (c or {}).get(group, []):
                    if (role, r["metric"]) not in keys:
                        keys.append((role, r["metric"]))
        rows = []
        for role, metric in keys:
            group = "metrics" if role == "replication" else "honest"
            at = {
                p: next((r for r in c[group] if r["metric"] == metric), None) if c else None
                for p, c in per.items()
            }
            steps = []
            for a, b in zip(scales, scales[1:], strict=False):
                differs = protocol_difference(a, b, metric)
                word = PROTOCOLS_DIFFER if differs else change(at[a.profile], at[b.profile])
                step = {"from": a.profile, "to": b.profile, "change": word}
                steps.append({**step, "protocol": differs} if differs else step)
            rows.append({"role": role, "metric": metric, "at": at, "changes": steps})
        out.append(
            {
                "id": cid,
                "claim": first["claim"],
                "recipe": first["recipe"],
                "against": first["against"],
                "better": first["better"],
                "verdicts": {
                    p: {"replication": c["verdict"], "honest": c["honest_verdict"] if c["honest"] else None}
                    if c
                    else None
                    for p, c in per.items()
                },
                "rows": rows,
            }
        )
    return out

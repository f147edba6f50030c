"""Which cells of a study spec run: a selection of recipes and seeds (``--recipes`` / ``--seeds``),
the union of a folder's selections, and what a study folder's ``spec.json`` records (the spec it
ran with, its runs, the cells its profile plans, its commands)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from structpe.io import read_json
from structpe.study.spec import StudySpec, load_spec
from structpe.study.spec_checks import StudySpecError


def select(spec: StudySpec, recipes: list[str] | None = None, seeds: list[int] | None = None) -> StudySpec:
    """The spec restricted to some recipes / seeds (the baseline is always kept: claims need it)."""
    out = copy.deepcopy(spec)
    if recipes:
        unknown = [r for r in recipes if r not in [x.label for x in spec.recipes]]
        if unknown:
            raise StudySpecError(
                f"--recipes: unknown {unknown}; the spec has {', '.join(x.label for x in spec.recipes)}"
            )
        keep = {spec.baseline, *recipes}
        out.recipes = [r for r in out.recipes if r.label in keep]  # the copies: `spec` stays as it was
        out.claims = [c for c in out.claims if c.recipe in keep and c.against in keep]
    if seeds:
        every = spec.all_seeds()
        unknown_s = [s for s in seeds if s not in every]
        if unknown_s:
            raise StudySpecError(f"--seeds: {unknown_s} not in the spec's seeds {every}")
        out.seeds = [s for s in spec.seeds if s in seeds]
        for r in out.recipes:
            if r.seeds is not None:
                r.seeds = [s for s in r.seeds if s in seeds]
    return out


def with_recipes_of(spec: dict[str, Any], earlier: dict[str, Any] | None) -> dict[str, Any]:
    """A ``spec.json`` ``spec`` (``StudySpec.to_dict()``) with the recipes of ``earlier`` that it
    lacks added, as they ran (their entries and ``profile_recipe_overrides``): a folder run in
    slices (``--recipes none position``, then ``--recipes gpt2 tpt``) keeps the settings of every
    recipe it holds cells of, which a reader of the folder compares against (the quickstart's
    ``--reference``); the rest (data, evaluations, claims) is ``spec``'s own."""
    have = {r["label"] for r in spec.get("recipes", [])}
    gained = [r for r in (earlier or {}).get("recipes", []) if r["label"] not in have]
    if not gained:
        return spec
    theirs = (earlier or {}).get("profile_recipe_overrides") or {}
    overrides = dict(spec.get("profile_recipe_overrides") or {})
    for r in gained:
        if r["label"] in theirs:
            overrides.setdefault(r["label"], theirs[r["label"]])
    return {**spec, "recipes": [*spec.get("recipes", []), *gained], "profile_recipe_overrides": overrides}


def select_union(spec: StudySpec, selections: list[tuple[list[str] | None, list[int] | None]]) -> StudySpec:
    """The spec restricted to every cell that some selection (recipes, seeds; see :func:`select`)
    picks: a study run in slices (``--recipes none position --seeds 1 2 3``, then ``--recipes
    position --seeds 4 5``) plans the cells of all its slices, which no single selection expresses."""
    parts = [select(spec, recipes, seeds) for recipes, seeds in selections]
    picked: dict[str, set[int]] = {}
    for part in parts:
        for r in part.recipes:
            picked.setdefault(r.label, set()).update(part.recipe_seeds(r.label))
    out = copy.deepcopy(spec)
    out.recipes = [r for r in out.recipes if r.label in picked]
    for r in out.recipes:  # each recipe's own seeds: the union need not be recipes x seeds
        r.seeds = [s for s in spec.recipe_seeds(r.label) if s in picked[r.label]]
    out.seeds = [s for s in spec.seeds if any(s in seeds for seeds in picked.values())]
    out.claims = [c for c in spec.claims if c.recipe in picked and c.against in picked]
    return out


def saved_runs(saved: dict[str, Any]) -> list[dict[str, Any]]:
    """The selections (recipes, seeds, command) recorded in a study folder's ``spec.json``; a
    folder written before ``runs`` existed holds one, at the top level."""
    return list(saved.get("runs") or [{k: saved.get(k) for k in ("recipes", "seeds", "command")}])


def folder_spec(out: str | Path) -> StudySpec:
    """The spec a study folder was run with: its ``spec.json`` names the spec file (or, for a folder
    copied from another machine where that path is gone, the shipped spec by name), the profile
    and the recipes / seeds that its runs selected (``runs``: one entry per distinct command)."""
    spec_file = Path(out) / "spec.json"
    if not spec_file.is_file():
        raise StudySpecError(f"{spec_file} not found (not a study folder)")
    saved = read_json(spec_file)
    selections = [(r["recipes"], r["seeds"]) for r in saved_runs(saved)]
    return select_union(_saved_profile(saved), selections)


def _saved_profile(saved: dict[str, Any]) -> StudySpec:
    """The whole profile a ``spec.json`` names: its spec file, or for a folder copied from another
    machine where that path is gone, the shipped spec by name."""
    source = saved["source"] if Path(saved["source"]).is_file() else saved["spec"]["name"]
    return load_spec(source, saved["profile"])


def folder_plan(out: str | Path) -> list[tuple[str, int]] | None:
    """Every (recipe, seed) cell the folder's profile plans, whatever its runs selected (None for a
    folder without ``spec.json``): "cells finished" counts against the profile, not the slices run."""
    spec_file = Path(out) / "spec.json"
    if not spec_file.is_file():
        return None
    spec = _saved_profile(read_json(spec_file))
    return [(r.label, s) for r in spec.recipes for s in spec.recipe_seeds(r.label)]


def folder_commands(out: str | Path) -> list[str]:
    """The distinct commands that ran into a study folder, in order (its ``spec.json``'s ``runs``)."""
    spec_file = Path(out) / "spec.json"
    if not spec_file.is_file():
        return []
    saved = read_json(spec_file)
    return list(dict.fromkeys(r["command"] for r in saved_runs(saved) if r["command"]))

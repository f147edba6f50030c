"""Study specs: which recipes, seeds, data and evaluations make up one replication study.

A study spec is a YAML file (``configs/studies/<name>.yaml``, or any path) with these keys::

    name:        study name (default: the file's stem)
    description: free text
    baseline:    the recipe every claim is compared with unless it names another (``against``)
    seeds:       list of ints; every recipe runs once per seed
    recipes:     {label: {recipe: <family>/<injection>, overrides: [key=value, ...],
                          tags: parse | prefix | shuffled, seeds: [int, ...]}}
                 (the profile's ``recipe_profile`` is appended: ``txl/position`` -> ``txl/position-tiny``;
                 ``tags``: where the cell's hexatags come from, in training and evaluation
                 (structpe.parser.tag_controls; default the parse); ``seeds``: this recipe's seeds,
                 replacing the spec's list; the baseline must have every seed of every recipe)
    dataset:     {corpus, parser, vocab_size, train_sentences, valid_sentences, test_sentences, seq_len,
                  max_sentence_words, num_proc, shard_units}
    evaluations: {ppl: {...}, leakage: {...}, blimp: {...}, syntaxgym: {...}, glue: {...}}  (each
                 optional; null switches one off; ``glue`` fine-tunes each cell's final model)
    profiles:    {name: {recipe_profile, overrides, recipe_overrides: {label: [key=value]},
                         dataset: {...}, evaluations: {...}, recipes: [label], seeds: [int]}}
                 a profile overrides dataset / evaluation fields and adds recipe overrides (to
                 every recipe, or with ``recipe_overrides`` to one, after the recipe's own: e.g.
                 a width that matches another recipe's parameter count at that profile's size);
                 its ``recipes`` run some of the study's recipes and its ``seeds`` replace every
                 seed list (the spec's and the recipes' own)
    claims:      [{id, claim, recipe, against, metrics, honest, show, better, paper: {...}}]
                 ``metrics`` decide the replication verdict (the paper's protocol), ``honest`` a
                 second verdict on leak-free likelihoods, ``show`` are reported beside them;
                 ``cost: true`` makes the claim a cost check (shown, never decided);
                 ``against`` (default: the baseline) may be any recipe; ``paper`` is optional
                 (for GLUE also ``tasks: {task: [comparison, recipe]}``, the paper's per-task
                 scores the report prints); a claim whose every metric comes from evaluations a
                 profile switches off is not part of that profile

Every key is checked before anything runs; an unknown key or recipe fails with one line naming
the file, the key and the valid choices (the same contract as the pre-training recipes).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from structpe.errors import RecipeError
from structpe.names import check_name
from structpe.parser.tag_controls import TAG_SOURCES
from structpe.study.claims import Claim, parse_claim
from structpe.study.spec_checks import (
    StudySpecError,
    build_spec,
    check_choices,
    check_dataset,
    check_dataset_input,
    check_keys,
    check_sizes,
    merge_raw,
    seed_list,
)
from structpe.study.stages import STAGES, stage
from structpe.study.stages import build as build_stage
from structpe.study.stages.blimp import BlimpSpec
from structpe.study.stages.glue import GlueSpec
from structpe.study.stages.leakage import LeakageSpec
from structpe.study.stages.ppl import PplSpec
from structpe.study.stages.syntaxgym import SyntaxGymSpec
from structpe.train.recipe import CONFIG_ROOT, load_recipe
from structpe.yamlio import load_yaml

STUDY_ROOT = CONFIG_ROOT / "studies"


@dataclass
class DatasetSpec:
    """How the study's data is prepared (the quickstart's data path: Brown, spaCy hexatags)."""

    corpus: str = "brown"
    parser: str = "spacy"
    tokenizer: str = "bpe"  # bpe (decoders) | wordpiece (encoders); see structpe tokenizer train
    vocab_size: int = 8192
    train_sentences: int = 20000
    valid_sentences: int = 2000
    test_sentences: int = 500
    test_seed: int = 0  # the stratified test sample's draw (study.data.read_test_units)
    seq_len: int = 128
    # text corpora: a sentence of more words is cut into pieces (structpe.syntax.sentences); None: no
    # cap. Enters the prepared data's fingerprint (and so every cell's hash) only when set
    max_sentence_words: int | None = None
    # how the data stage runs, not what it builds (so not in TRAIN_DATA_FIELDS): parse processes,
    # and units per resumable parse shard (None: one pass); see structpe.train.prepare.prepare
    num_proc: int = 1
    shard_units: int | None = None


@dataclass
class EvaluationsSpec:
    """A study's evaluations, one optional section per stage (``structpe.study.stages``; None: off).
    Its field order is the order of ``spec.json``'s ``evaluations`` and of the valid keys named in
    an error."""

    ppl: PplSpec | None = None
    leakage: LeakageSpec | None = None
    blimp: BlimpSpec | None = None
    syntaxgym: SyntaxGymSpec | None = None
    glue: GlueSpec | None = None


@dataclass
class RecipeSpec:
    label: str
    recipe: str  # family/injection, without the profile suffix
    overrides: list[str] = field(default_factory=list)
    tags: str = "parse"  # the tag source of training and evaluation (structpe.parser.tag_controls)
    seeds: list[int] | None = None  # None: the spec's seeds


@dataclass
class StudySpec:
    name: str
    source: str
    profile: str
    recipe_profile: str
    baseline: str
    seeds: list[int]
    recipes: list[RecipeSpec]
    dataset: DatasetSpec
    evaluations: EvaluationsSpec
    claims: list[Claim]
    profile_overrides: list[str] = field(default_factory=list)
    profile_recipe_overrides: dict[str, list[str]] = field(default_factory=dict)
    description: str = ""
    profile_description: str = ""

    def recipe(self, label: str) -> RecipeSpec:
        return next(r for r in self.recipes if r.label == label)

    def recipe_name(self, label: str) -> str:
        return f"{self.recipe(label).recipe}-{self.recipe_profile}"

    def recipe_seeds(self, label: str) -> list[int]:
        """The seeds this recipe runs (its own list, else the spec's)."""
        own = self.recipe(label).seeds
        return list(own) if own is not None else list(self.seeds)

    def all_seeds(self) -> list[int]:
        """Every seed some recipe runs, in first-seen order (the spec's list, then recipes' own)."""
        out: list[int] = []
        for s in [*self.seeds, *(s for r in self.recipes for s in self.recipe_seeds(r.label))]:
            if s not in out:
                out.append(s)
        return out

    def reads_tags(self, label: str) -> bool:
        """Whether the recipe's model reads hexatags (injection other than ``none``): its joint and
        marginal perplexities are then bounds, not its exact p(x)."""
        model = load_recipe(self.recipe_name(label), self.cell_overrides(label)).model
        return str(model.get("injection", "none")) != "none"

    def cell_overrides(self, label: str) -> list[str]:
        """Profile overrides first, then the recipe's own (a recipe's setting wins), then the
        profile's for this recipe."""
        return [
            *self.profile_overrides,
            *self.recipe(label).overrides,
            *self.profile_recipe_overrides.get(label, []),
        ]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


TOP_KEYS = (
    "name",
    "description",
    "baseline",
    "seeds",
    "recipes",
    "dataset",
    "evaluations",
    "profiles",
    "claims",
)
PROFILE_KEYS = (
    "description",
    "recipe_profile",
    "overrides",
    "recipe_overrides",
    "dataset",
    "evaluations",
    "recipes",
    "seeds",
)
RECIPE_KEYS = ("recipe", "overrides", "tags", "seeds")
# each evaluation's section class, in the order of EvaluationsSpec's fields (its stage module's SPEC)
EVAL_SPECS: dict[str, type] = {f.name: stage(f.name).SPEC for f in dataclasses.fields(EvaluationsSpec)}


def resolve_spec_path(spec: str | Path) -> Path:
    """A path to a YAML file, or the name of a shipped study (``sipe-txl``)."""
    p = Path(spec)
    if p.is_file():
        return p
    cand = STUDY_ROOT / f"{spec}.yaml"
    if cand.is_file():
        return cand
    shipped = sorted(q.stem for q in STUDY_ROOT.glob("*.yaml"))
    raise StudySpecError(f"no study spec file or name {str(spec)!r}; shipped studies: {', '.join(shipped)}")


def load_spec(spec: str | Path, profile: str | None = None) -> StudySpec:
    """Read and validate a study spec at ``profile`` (default: the first profile in the file)."""
    path = resolve_spec_path(spec)
    where = str(path)
    raw = check_keys(load_yaml(path, StudySpecError) or {}, TOP_KEYS, where)
    profile, prof = _profile(raw, profile, where)
    dataset = build_spec(
        DatasetSpec,
        merge_raw(raw.get("dataset") or {}, prof.get("dataset") or {}),
        f"{where}: dataset",
    )
    check_dataset(dataset, f"{where}: dataset")
    evals = _evaluations(raw, prof, where)
    seeds = seed_list(prof.get("seeds", raw.get("seeds")), f"{where}: seeds")
    recipes, overrides, per_recipe = _recipes(raw, prof, profile, where)
    labels = [r.label for r in recipes]
    baseline = _baseline(raw.get("baseline"), recipes, seeds, where)
    claims = []
    for i, c in enumerate(raw.get("claims") or []):
        claim = parse_claim(c, f"{where}: claims[{i}]", prof, baseline, labels, evals)
        if claim is not None:
            claims.append(claim)
    check_sizes(evals, f"{where}: evaluations")
    check_dataset_input(dataset, sorted({r.tags for r in recipes} - {"parse"}), f"{where}: dataset")
    return StudySpec(
        name=check_name(f"{where}: name", raw.get("name") or path.stem, StudySpecError),
        source=str(path),
        profile=profile,
        recipe_profile=str(prof["recipe_profile"]),
        baseline=str(baseline),
        seeds=list(seeds),
        recipes=recipes,
        dataset=dataset,
        evaluations=evals,
        claims=claims,
        profile_overrides=overrides,
        profile_recipe_overrides=per_recipe,
        description=str(raw.get("description") or ""),
        profile_description=str(prof.get("description") or "").strip(),
    )


def _profile(raw: dict[str, Any], profile: str | None, where: str) -> tuple[str, dict[str, Any]]:
    """The profile's name (default: the first) and its checked section."""
    profiles = raw.get("profiles") or {}
    if not isinstance(profiles, dict) or not profiles:
        raise StudySpecError(f"{where}: 'profiles' must name at least one profile (e.g. cpu-mini)")
    for name in profiles:
        check_name(f"{where}: profile", name, StudySpecError)
    profile = profile or next(iter(profiles))
    if profile not in profiles:
        raise StudySpecError(f"{where}: unknown profile {profile!r}; this spec has {', '.join(profiles)}")
    prof = check_keys(profiles[profile], PROFILE_KEYS, f"{where}: profiles.{profile}")
    if "recipe_profile" not in prof:
        raise StudySpecError(f"{where}: profiles.{profile}.recipe_profile is required (e.g. tiny)")
    return profile, prof


def _evaluations(raw: dict[str, Any], prof: dict[str, Any], where: str) -> EvaluationsSpec:
    """The spec's evaluations with the profile's laid over them, each built and checked by its
    stage (``structpe.study.stages``); an evaluation set to null is off (a profile can switch one off)."""
    evals_raw = check_keys(
        merge_raw(raw.get("evaluations") or {}, prof.get("evaluations") or {}),
        list(EVAL_SPECS),
        f"{where}: evaluations",
    )
    evals = EvaluationsSpec(
        **{k: build_stage(k, v, f"{where}: evaluations.{k}") for k, v in evals_raw.items() if v is not None}
    )
    for module in STAGES:
        sub = getattr(evals, module.KEY)
        if sub is not None:
            module.check(sub, f"{where}: evaluations.{module.KEY}")
    return evals


def _recipes(
    raw: dict[str, Any], prof: dict[str, Any], profile: str, where: str
) -> tuple[list[RecipeSpec], list[str], dict[str, list[str]]]:
    """The recipes the profile runs (each resolved with its overrides before any cell runs), the
    profile's overrides, and its per-recipe overrides."""
    recipes_raw = raw.get("recipes")
    if not isinstance(recipes_raw, dict) or not recipes_raw:
        raise StudySpecError(f"{where}: recipes must be a mapping label -> {{recipe: family/injection}}")
    if "recipes" in prof:  # a profile that runs some of the study's recipes
        check_choices(prof["recipes"], tuple(recipes_raw), f"{where}: profiles.{profile}.recipes")
        recipes_raw = {label: r for label, r in recipes_raw.items() if label in prof["recipes"]}
    recipe_profile = str(prof["recipe_profile"])
    profile_overrides = [str(o) for o in prof.get("overrides") or []]
    per_recipe = prof.get("recipe_overrides") or {}
    if not isinstance(per_recipe, dict):
        raise StudySpecError(f"{where}: profiles.{profile}.recipe_overrides: expected label -> [key=value]")
    unknown = [k for k in per_recipe if k not in (recipes_raw or {})]
    if unknown:
        raise StudySpecError(f"{where}: profiles.{profile}.recipe_overrides: unknown recipe(s) {unknown}")
    profile_recipe_overrides = {str(k): [str(o) for o in v or []] for k, v in per_recipe.items()}
    recipes = []
    for label, r in recipes_raw.items():
        rs = _recipe(label, r, "seeds" in prof, where)
        try:  # every recipe and override must resolve before any cell runs
            load_recipe(
                f"{rs.recipe}-{recipe_profile}",
                [*profile_overrides, *rs.overrides, *profile_recipe_overrides.get(rs.label, [])],
            )
        except RecipeError as err:
            raise StudySpecError(f"{where}: recipes.{label}: {err}") from None
        recipes.append(rs)
    return recipes, profile_overrides, profile_recipe_overrides


def _recipe(label: Any, r: Any, profile_seeds: bool, where: str) -> RecipeSpec:
    """One recipe entry, checked (its own seeds dropped when the profile gives every recipe's)."""
    check_name(f"{where}: recipe label", label, StudySpecError)
    r = check_keys(r, RECIPE_KEYS, f"{where}: recipes.{label}")
    if "recipe" not in r:
        raise StudySpecError(f"{where}: recipes.{label}: 'recipe' is required (e.g. txl/position)")
    tags = r.get("tags", "parse")
    if tags not in TAG_SOURCES:
        at, choices = f"{where}: recipes.{label}.tags", ", ".join(TAG_SOURCES)
        raise StudySpecError(f"{at}: unknown tag source {tags!r}; choose from {choices}")
    own_seeds = seed_list(r["seeds"], f"{where}: recipes.{label}.seeds") if "seeds" in r else None
    if profile_seeds:  # the profile's seeds are every recipe's
        own_seeds = None
    return RecipeSpec(
        str(label), str(r["recipe"]), [str(o) for o in r.get("overrides") or []], str(tags), own_seeds
    )


def _baseline(baseline: Any, recipes: list[RecipeSpec], seeds: list[int], where: str) -> Any:
    """The baseline recipe, which must have every seed of every recipe: every cell is paired with
    (and audited against) the same seed's baseline."""
    labels = [r.label for r in recipes]
    if baseline not in labels:
        raise StudySpecError(
            f"{where}: baseline {baseline!r} is not one of the recipes ({', '.join(labels)})"
        )
    base = next(r for r in recipes if r.label == baseline)
    base_seeds = base.seeds if base.seeds is not None else seeds
    for r in recipes:
        extra = [s for s in (r.seeds if r.seeds is not None else seeds) if s not in base_seeds]
        if extra:
            raise StudySpecError(
                f"{where}: recipes.{r.label}.seeds: seeds {extra} have no baseline cell "
                f"(the baseline {baseline!r} runs seeds {base_seeds})"
            )
    return baseline


def with_defaults(cls: type, saved: dict[str, Any]) -> dict[str, Any]:
    """A ``spec.json`` section with the fields it lacks at their defaults: a field added after a
    folder ran defaults to the behaviour from before it existed (e.g. BLiMP's ``marginal_limit``:
    None = ``limit``), so its absence is no difference."""
    return {**dataclasses.asdict(cls()), **saved}


def score_settings(saved: dict[str, Any], metric: str) -> dict[str, Any]:
    """The evaluation settings that shape ``metric``'s number (``bench.mode.score``) in a spec as
    ``spec.json`` records it (``StudySpec.to_dict()``): the bench's fields by name, less the list
    of modes run (it changes which numbers exist, not their values), outside the marginal mode
    its beam width, outside ``smc`` its particles, proposal and largest budget, outside BLiMP's
    ``exact`` its word limit, and BLiMP's ``marginal_limit`` (as the cache keys of
    ``structpe.study.stages.likelihood.cache_keys``); BLiMP's ``limit`` is the pairs this mode
    scores. Empty for a score no evaluation setting shapes (``val_lm_loss``) or a bench the spec
    does not run."""
    bench, _, rest = metric.partition(".")
    cls = EVAL_SPECS.get(bench)
    likelihood_bench = cls is not None and "likelihoods" in {f.name for f in dataclasses.fields(cls)}
    if not likelihood_bench or not (saved.get("evaluations") or {}).get(bench):
        return {}
    sub = with_defaults(cls, saved["evaluations"][bench])
    mode = rest.split(".")[0]
    if hasattr(cls, "limit_for"):  # the items this mode scores (BLiMP's marginal_limit)
        sub["limit"] = cls(**sub).limit_for(mode)
    drop = {
        "likelihoods",
        "marginal_limit",
        *(() if mode == "marginal" else ("k",)),
        *(() if mode == "smc" else ("particles", "proposal", "particles_max")),
        *(() if mode == "exact" else ("exact_max_words",)),
    }
    kept = {f"evaluations.{bench}.{k}": v for k, v in sub.items() if k not in drop}
    return json.loads(json.dumps(kept))  # tuples as lists, as spec.json holds them

"""Study spec validation: the shipped spec loads at every profile; a bad key or recipe is one clear line."""

from __future__ import annotations

from pathlib import Path

import pytest

from structpe.cli import main
from structpe.study.selection import select
from structpe.study.spec import load_spec
from structpe.study.spec_checks import StudySpecError


@pytest.mark.parametrize("profile", ["cpu-mini", "smoke", "paper"])
def test_shipped_spec_loads(profile: str) -> None:
    spec = load_spec("sipe-txl", profile)
    assert [r.label for r in spec.recipes] == [
        "none",
        "input",
        "position",
        "disentangled",
        "attn_bias",
        "position_k2",
        "lis_tree",
        "lis_tree2",
        "none_tagloss",
        "none_wide",
        "position_shuffled",
        "position_causal",
        "gpt2",
        "tpt",
        "treereg",
    ]
    assert spec.seeds == [1, 2, 3] and spec.baseline == "none"
    assert spec.recipe_name("position_k2") == f"txl/position-{spec.recipe_profile}"
    assert "model.entry_layer=2" in spec.cell_overrides("position_k2")
    ppl = next(c for c in spec.claims if c.id == "pp-ppl")
    assert ppl.paper["baseline"] == 18.63 and ppl.paper["recipe"] == 16.95
    assert all(".conditional." not in m for m in ppl.metrics)  # the PPL verdict uses honest likelihoods
    k2 = next(c for c in spec.claims if c.id == "k2-sg")
    assert k2.against == "position" and k2.better == "lower"


def test_claims_have_honest_verdicts_and_may_omit_the_paper(tiny_spec: Path) -> None:
    spec = load_spec("sipe-txl", "cpu-mini")
    for c in spec.claims:
        if not (spec.reads_tags(c.recipe) or spec.reads_tags(c.against or spec.baseline)):
            assert c.honest == []  # two tag-free models (the rivals, `none`): their metrics are exact p(x)
            continue
        if c.metrics[0].startswith("syntaxgym."):
            assert c.honest == ["syntaxgym.smc.sg_score"]
        if c.metrics[0].startswith("blimp."):  # the estimate on every pair, the exact p(x) on the short ones
            assert c.honest == ["blimp.smc.overall", "blimp.exact.overall"]
    assert spec.evaluations.blimp.exact_max_words == 5
    assert (
        {"marginal", "smc"} <= set(spec.evaluations.blimp.likelihoods)
        and {"marginal", "smc"} <= set(spec.evaluations.syntaxgym.likelihoods)
    )
    assert not spec.reads_tags("none") and spec.reads_tags("position")
    text = tiny_spec.read_text()
    control = _write(
        tiny_spec.parent,
        text.replace("    paper: {baseline: 18.63, recipe: 16.95, source: Table 2}\n", "")
        .replace("[conditional, joint], sentences: 12", "[conditional, joint, marginal], sentences: 12")
        .replace("    show: [ppl.conditional.word_ppl]\n", "    honest: [ppl.marginal.word_ppl]\n"),
    )
    claim = load_spec(control, "test").claims[0]
    assert claim.paper == {} and claim.honest == ["ppl.marginal.word_ppl"]


def test_paper_profile_is_the_papers_depth() -> None:
    spec = load_spec("sipe-txl", "paper")
    assert "model.n_layers=16" in spec.profile_overrides
    assert spec.evaluations.blimp.limit is None  # every BLiMP pair


def test_cpu_small_is_the_sweeps_size_on_the_studys_protocol() -> None:
    """cpu-small: the size sweep's 4 x 256 (docs/pretraining.md), its four recipes and
    the widened baseline, the study's one evaluation protocol (the same BLiMP pairs in every mode,
    the same suites and beam widths as cpu-mini and quickstart), GLUE as cpu-mini's (bf16 where
    it is native)."""
    spec = load_spec("sipe-txl", "cpu-small")
    assert [r.label for r in spec.recipes] == ["none", "input", "position", "none_wide", "position_shuffled"]
    assert {"model.n_layers=4", "model.d_model=256", "train.max_steps=1200"} <= set(spec.profile_overrides)
    blimp = spec.evaluations.blimp
    assert blimp.paradigms == "all"
    assert [blimp.limit_for(m) for m in blimp.likelihoods] == [100] * len(blimp.likelihoods)
    for profile in ("cpu-mini", "quickstart"):
        other = load_spec("sipe-txl", profile).evaluations
        for bench in ("ppl", "blimp", "syntaxgym"):
            assert getattr(spec.evaluations, bench) == getattr(other, bench), (profile, bench)
    glue, mini = spec.evaluations.glue, load_spec("sipe-txl", "cpu-mini").evaluations.glue
    assert glue == mini and glue.bf16 == "auto"
    assert {c.recipe for c in spec.claims} == {"input", "position"}


def test_scaled_profiles_train_on_the_gutenberg_corpus() -> None:
    """cpu-small and paper read gutenberg-pd-10m (a corpus `--corpus` knows and `data fetch` builds);
    cpu-mini stays on Brown, and how the data stage runs never enters a cell's training hash."""
    import dataclasses

    from structpe.data.registry import registry
    from structpe.study.runner import train_config
    from structpe.train.prepare_settings import KNOWN_CORPORA

    for profile in ("cpu-small", "paper"):
        ds = load_spec("sipe-txl", profile).dataset
        assert ds.corpus == "gutenberg-pd-10m" and ds.parser == "hexatagger"
        assert KNOWN_CORPORA[ds.corpus][0] == registry()["gutenberg-pd-10m"].folder
        assert ds.num_proc == 2 and ds.shard_units
    mini = load_spec("sipe-txl", "cpu-mini")
    assert mini.dataset.corpus == "brown" and (mini.dataset.num_proc, mini.dataset.shard_units) == (1, None)
    before = train_config(mini, "position", 1, "fp")
    mini.dataset = dataclasses.replace(mini.dataset, num_proc=2, shard_units=64)
    assert train_config(mini, "position", 1, "fp") == before


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    return p


def _edit(tiny_spec: Path, old: str, new: str) -> Path:
    text = tiny_spec.read_text()
    assert old in text
    return _write(tiny_spec.parent, text.replace(old, new))


@pytest.mark.parametrize(("k", "ok"), [(10, True), (100, True), (4, False)])
def test_a_claim_may_read_the_marginal_at_a_width_of_the_ladder(tiny_spec: Path, k: int, ok: bool) -> None:
    edited = _edit(
        tiny_spec,
        "likelihoods: [conditional, joint], sentences: 12}",
        f"likelihoods: [conditional, joint, marginal], sentences: 12, k: {k}}}",
    )
    edited = _edit(edited, "[ppl.joint.word_ppl]", "[ppl.marginal_k10.word_ppl]")
    if ok:
        assert load_spec(edited, "test").claims[0].metrics == ["ppl.marginal_k10.word_ppl"]
    else:
        with pytest.raises(StudySpecError, match="not produced"):
            load_spec(edited, "test")


@pytest.mark.parametrize(
    ("old", "new", "expect"),
    [
        ("baseline: none", "baseline: none\nseed: [1]", "unknown key 'seed'. Did you mean 'seeds'"),
        ("{recipe: txl/position}", "{recipe: txl/positon}", "recipes.position: no recipe file or name"),
        ("{recipe: txl/position}", "{recipe: txl/position, overides: []}", "unknown key 'overides'"),
        ("model.d_ff=64", "model.d_fff=64", "unknown model key 'd_fff'"),
        ("ppl: {likelihoods", "ppl: {k_best: 3, likelihoods", "evaluations.ppl: unknown key 'k_best'"),
        ("[conditional, joint]", "[conditional, jiont]", "unknown value(s) ['jiont']"),
        ("recipe: position\n", "recipe: positio\n", "unknown recipe 'positio'"),
        ("[ppl.joint.word_ppl]", "[ppl.marginal.word_ppl]", "not produced by this spec's evaluations"),
        (
            "    show: [ppl.conditional.word_ppl]\n",
            "    honest: [blimp.marginal.overall]\n",
            "metric 'blimp.marginal.overall' is not produced by this spec's evaluations",
        ),
        ("[ppl.joint.word_ppl]", "[ppl.marginal_k10.word_ppl]", "not produced by this spec's evaluations"),
        ("sentences: 12}", "sentences: 12, k: 0}", "evaluations.ppl.k must be an integer >= 1, got 0"),
        ("seeds: [1, 2]", "seeds: [1, 1]", "seeds has duplicates"),
        ("baseline: none", "baseline: nothing", "baseline 'nothing' is not one of the recipes"),
        ("better: lower", "better: smaller", "better must be one of"),
        (
            "sentences: 12}",
            "sentences: twelve}",
            "evaluations.ppl.sentences: expected int or null, got 'twelve'",
        ),
        ("seq_len: 64", "seq_len: null", "dataset.seq_len: expected int, got None"),
        (
            "sentences: 12}",
            "sentences: 12}\n  blimp: {limit: 5, marginal_limit: 3}",
            "evaluations.blimp.marginal_limit is set but neither 'marginal' nor 'smc' is a likelihood",
        ),
        (
            "sentences: 12}",
            "sentences: 12}\n  blimp: {limit: 5, marginal_limit: 9, likelihoods: [conditional, marginal]}",
            "evaluations.blimp.marginal_limit 9 exceeds limit 5",
        ),
        (
            "sentences: 12}",
            "sentences: 12}\n  blimp: {limit: 5, particles_max: 32}",
            "evaluations.blimp.particles_max is set but 'smc' is not a likelihood",
        ),
        (
            "sentences: 12}",
            "sentences: 12}\n  blimp: {likelihoods: [smc], particles: 16, particles_max: 8}",
            "evaluations.blimp.particles_max must be an integer >= particles (16), got 8",
        ),
    ],
)
def test_bad_spec_names_the_key(tiny_spec: Path, old: str, new: str, expect: str) -> None:
    bad = _edit(tiny_spec, old, new)
    with pytest.raises(StudySpecError) as err:
        load_spec(bad, "test")
    assert str(bad) in str(err.value) and expect in str(err.value)


def test_unknown_profile(tiny_spec: Path) -> None:
    with pytest.raises(StudySpecError, match="unknown profile 'gpu'; this spec has test"):
        load_spec(tiny_spec, "gpu")


def test_select_keeps_the_baseline(tiny_spec: Path) -> None:
    spec = select(load_spec(tiny_spec), ["position"], [2])
    assert [r.label for r in spec.recipes] == ["none", "position"] and spec.seeds == [2]
    with pytest.raises(StudySpecError, match="--seeds"):
        select(spec, None, [7])


def test_select_leaves_the_spec_it_restricts_as_it_was() -> None:
    """Selecting recipes and seeds restricts a copy: the same spec can then be sliced again (a study
    run in slices selects the seeds 1-3 of some recipes, then 4-5 of one of them)."""
    full = load_spec("sipe-txl", "cpu-small")
    before = [(r.label, list(r.seeds or [])) for r in full.recipes]
    assert select(full, ["position"], [1, 2, 3]).recipe_seeds("position") == [1, 2, 3]
    assert [(r.label, list(r.seeds or [])) for r in full.recipes] == before
    assert select(full, ["position"], [4, 5]).recipe_seeds("position") == [4, 5]


def test_cli_error_is_one_line(tiny_spec: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = _edit(tiny_spec, "{recipe: txl/position}", "{recipe: txl/nonsense}")
    assert main(["study", "run", str(bad), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("structpe study: error:") and "\n" not in err and "Traceback" not in err


def test_dry_run_lists_cells(tiny_spec: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["study", "run", str(tiny_spec), "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split(":")[0] for ln in lines] == [
        "none/seed-1",
        "position/seed-1",
        "none/seed-2",
        "position/seed-2",
    ]


@pytest.mark.parametrize("profile", ["cpu-mini", "smoke"])
def test_encoder_spec_loads(profile: str) -> None:
    spec = load_spec("sipe-encoders", profile)
    assert spec.dataset.tokenizer == "wordpiece"
    # each encoder is compared with its own family only (its `none`, or its position-side SiPE)
    assert {c.against for c in spec.claims} == {"roberta_none", "deberta_none", "modernbert_none",
                                                  "modernbert_position"}
    assert all(c.recipe.split("_")[0] == c.against.split("_")[0] for c in spec.claims)
    assert all(
        m == ["conditional"] for m in (spec.evaluations.blimp.likelihoods, spec.evaluations.ppl.likelihoods)
    )


def test_text_test_sentences_are_cut_and_scored_as_trained() -> None:
    """A ``text`` corpus's test paragraphs: cut by ``split_sentences`` (as in training), parsed
    pre-tokenized, each scored as the detokenized text of its words (the form the LM saw)."""
    from structpe.parser.registry import get_parser
    from structpe.study.data import parse_units

    paras = ["The dog barked at me. It ran away!", '"Who is there?" she asked.']
    sents = parse_units(get_parser("hexatagger"), paras, "text", 3)
    assert [s.words for s in sents] == [
        ["The", "dog", "barked", "at", "me", "."],
        ["It", "ran", "away", "!"],
        ['"', "Who", "is", "there", "?", '"'],
    ]
    assert [s.meta["text"] for s in sents] == ["The dog barked at me.", "It ran away!", '"Who is there?"']


def test_test_sentences_take_the_training_sentence_cap() -> None:
    from structpe.parser.registry import get_parser
    from structpe.study.data import parse_units

    para = ["one two three four five six seven eight nine ten eleven ."]
    sents = parse_units(get_parser("hexatagger"), para, "text", 5, max_words=5)
    assert [s.words for s in sents] == [
        ["one", "two", "three", "four"],
        ["five", "six", "seven", "eight"],
        ["nine", "ten", "eleven", "."],
    ]
    assert load_spec("sipe-txl", "cpu-small").dataset.max_sentence_words == 128
    # no cap at cpu-mini: Brown's prepared data and cells keep their fingerprints and hashes
    assert load_spec("sipe-txl", "cpu-mini").dataset.max_sentence_words is None


def test_a_profile_runs_some_recipes_at_its_own_seeds(tiny_spec: Path) -> None:
    """A profile's ``recipes`` keep those recipes (and the claims about them only); its ``seeds``
    replace the spec's; bad values name the key."""
    text = tiny_spec.read_text()
    tiny = "    recipe_profile: tiny\n"
    p = _edit(tiny_spec, tiny, tiny + "    recipes: [none]\n    seeds: [7]\n")
    spec = load_spec(p, "test")
    assert [r.label for r in spec.recipes] == ["none"] and spec.seeds == [7] and spec.claims == []
    assert load_spec(tiny_spec, "test").seeds == [1, 2] and "recipes: [none]" not in text
    bad = _edit(tiny_spec, "    recipe_profile: tiny\n", "    recipe_profile: tiny\n    recipes: [nothing]\n")
    with pytest.raises(StudySpecError, match=r"profiles.test.recipes: unknown value"):
        load_spec(bad, "test")
    bad = _edit(
        tiny_spec, "  ppl: {likelihoods", "  leakage: {sentences: 4, full_parse: whole}\n  ppl: {likelihoods"
    )
    with pytest.raises(StudySpecError, match=r"evaluations.leakage.full_parse: unknown value"):
        load_spec(bad, "test")

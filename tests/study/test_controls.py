"""The study's controls: prefix (causal) tags never read a later word, shuffled tags change the tags
and nothing else, the widened baseline matches PP-SiPE's parameter count, per-recipe seeds, and the
tag-control cells train and score end to end on the tiny synthetic study."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from structpe.models import SiPEConfig, build_model, load
from structpe.parser.base import Parser
from structpe.parser.tag_controls import POOL_FILE, PrefixParser, ShuffledParser, shuffle_within_lengths
from structpe.study.cells import cell_dir, cells
from structpe.study.data import StudyData, TagVariant
from structpe.study.runner import run_study, train_config
from structpe.study.selection import select
from structpe.study.spec import load_spec
from structpe.study.spec_checks import StudySpecError
from structpe.train.prepare import load_prepared, prepare
from structpe.train.prepare_settings import PrepareSettings
from structpe.train.trainer import read_metrics


class LastWordHeadParser(Parser):
    """A toy parser whose every tree depends on the sentence's length: the words attach to the
    last word when it is odd, to the first when it is even."""

    name = "toy"

    def predict_words(self, sentences: Sequence[Sequence[str]]) -> list[tuple[list[int], None]]:
        def heads(n: int) -> list[int]:
            return [n] * (n - 1) + [0] if n % 2 else [0] + [1] * (n - 1)

        return [(heads(len(w)), None) for w in sentences]


def test_a_prefix_parse_never_reads_a_later_word() -> None:
    a = ["the", "dog", "sees", "a", "cat"]
    b = ["the", "dog", "sees", "every", "bird", "today"]
    plain = LastWordHeadParser().parse_words([a, b])
    # the whole-sentence parse does depend on later words (so the check below can fail)
    assert (
        plain[0].terminals[:3] + plain[0].nonterminals[:3]
        != plain[1].terminals[:3] + plain[1].nonterminals[:3]
    )
    pa, pb = PrefixParser(LastWordHeadParser()).parse_words([a, b])
    assert pa.words == a and pb.words == b
    assert (pa.terminals[:3], pa.nonterminals[:3], pa.heads[:3]) == (
        pb.terminals[:3],
        pb.nonterminals[:3],
        pb.heads[:3],
    )
    # word i's tags are those of the last word of the parse of words 1..i
    for i in range(1, len(a) + 1):
        alone = LastWordHeadParser().parse_words([a[:i]])[0]
        assert (pa.terminals[i - 1], pa.nonterminals[i - 1]) == (alone.terminals[-1], alone.nonterminals[-1])


def test_spacy_prefix_tags_of_a_shared_prefix_are_identical() -> None:
    from structpe.parser.registry import get_parser

    a = ["The", "keys", "to", "the", "cabinet", "are", "on", "the", "table", "."]
    b = ["The", "keys", "to", "the", "cabinet", "is", "lost", ",", "they", "said", "."]
    pa, pb = PrefixParser(get_parser("spacy")).parse_words([a, b])
    assert (pa.terminals[:5], pa.nonterminals[:5], pa.heads[:5]) == (
        pb.terminals[:5],
        pb.nonterminals[:5],
        pb.heads[:5],
    )
    # the text parse (segmented by the parser) keeps the same property
    ta, tb = PrefixParser(get_parser("spacy")).parse_text([" ".join(a), " ".join(b)], split_sentences=False)
    assert ta.words[:5] == a[:5] and (ta.terminals[:5], ta.nonterminals[:5]) == (
        tb.terminals[:5],
        tb.nonterminals[:5],
    )


def test_shuffle_within_lengths_is_a_seeded_derangement_per_length() -> None:
    lengths = [5, 7, 5, 5, 9, 7, 5]
    donor = shuffle_within_lengths(lengths)
    assert donor == shuffle_within_lengths(lengths)  # fixed
    assert all(lengths[d] == lengths[i] for i, d in enumerate(donor))
    assert sorted(donor) == list(range(len(lengths)))  # a permutation: every parse used once
    assert donor[4] == 4 and all(d != i for i, d in enumerate(donor) if i != 4)  # 9 is alone


def _sentences(dataset, eos_id: int) -> list[tuple[list[int], list[tuple[int, int]], list[int]]]:
    """Per packed sentence: its token ids, its (terminal, non-terminal) pairs and the tagged positions."""
    out = []
    for row in dataset:
        ids, t, n = row["input_ids"], row["terminal_ids"], row["nonterminal_ids"]
        cur: tuple[list[int], list[tuple[int, int]], list[int]] = ([], [], [])
        for j, tok in enumerate(ids[1:], start=1):
            if tok == eos_id:
                out.append(cur)
                cur = ([], [], [])
                continue
            cur[0].append(tok)
            if t[j] != -100:
                cur[1].append((t[j], n[j]))
                cur[2].append(len(cur[0]) - 1)
    return out


def write_conllu(path: Path, n: int, seed: int) -> Path:
    """'the (adj) N V the (adj) N .': sentences of 7 words have two different trees (the adjective
    on the subject or on the object), so shuffling among equal lengths moves real structure."""
    import random

    rng = random.Random(seed)
    blocks = []
    for i in range(n):
        subj_adj, obj_adj = rng.random() < 0.5, rng.random() < 0.5
        rows, subj = [("the", "det")], len(["the", *(["old"] if subj_adj else []), "dog"])
        rows += [("old", "amod")] if subj_adj else []
        rows += [(rng.choice(["dog", "cat", "bird"]), "nsubj"), (rng.choice(["sees", "likes"]), "root")]
        v = subj + 1
        obj = v + 2 + int(obj_adj)
        rows += (
            [("the", "det")] + ([("small", "amod")] if obj_adj else []) + [("horse", "obj"), (".", "punct")]
        )
        heads = [subj] * (subj - 1) + [v, 0] + [obj] * (obj - v - 1) + [v, v]
        lines = [f"# sent_id = v{seed}-{i}"]
        lines += [
            f"{j}\t{w}\t{w}\t_\t_\t_\t{h}\t{d}\t_\t_"
            for j, ((w, d), h) in enumerate(zip(rows, heads, strict=True), 1)
        ]
        blocks.append("\n".join(lines))
    path.write_text("\n\n".join(blocks) + "\n\n")
    return path


@pytest.fixture(scope="module")
def shuffled_pair(tmp_path_factory: pytest.TempPathFactory, tiny_data: StudyData) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("shuffled")
    train = write_conllu(d / "train.conllu", 160, 1)
    valid = write_conllu(d / "valid.conllu", 30, 2)
    splits = {"train": [train], "validation": [valid]}
    plain = prepare(
        splits, tiny_data.tokenizer_dir, d / "parse", settings=PrepareSettings(parser="gold", seq_len=64)
    )
    shuffled = prepare(
        splits,
        tiny_data.tokenizer_dir,
        d / "shuffled",
        settings=PrepareSettings(parser="gold", seq_len=64, tags="shuffled"),
    )
    return plain, shuffled


def test_the_shuffled_control_changes_the_tags_and_nothing_else(
    shuffled_pair: tuple[Path, Path], tiny_data: StudyData
) -> None:
    plain_dir, shuffled_dir = shuffled_pair
    dp, meta_p = load_prepared(plain_dir)
    ds, meta_s = load_prepared(shuffled_dir)
    assert "tags" not in meta_p["settings"] and meta_s["settings"]["tags"] == "shuffled"
    assert meta_p["fingerprint"] != meta_s["fingerprint"]
    assert not (plain_dir / POOL_FILE).exists() and (shuffled_dir / POOL_FILE).is_file()
    for split in ("train", "validation"):
        assert dp[split]["input_ids"] == ds[split]["input_ids"]  # same tokens, same rows
        plain = _sentences(dp[split], meta_p["eos_token_id"])
        shuf = _sentences(ds[split], meta_s["eos_token_id"])
        assert [s[0] for s in plain] == [s[0] for s in shuf] and [s[2] for s in plain] == [s[2] for s in shuf]
        parses = {tuple(s[1]) for s in plain}
        # every sentence carries a real parse of a sentence of its length, mostly another one
        assert all(tuple(s[1]) in parses for s in shuf)
        moved = sum(a[1] != b[1] for a, b in zip(plain, shuf, strict=True))
        assert moved >= len(plain) // 10  # about 1/4: the 7-word sentences have two trees

    # evaluation: a test sentence takes the parse of a training sentence of its word count
    parser = ShuffledParser(None, shuffled_dir / POOL_FILE)
    test = tiny_data.test_sentences
    out = parser.retag(test)
    pool = parser.pool
    assert [s.words for s in out] == [s.words for s in test]
    assert parser.retag(test)[0].terminals == out[0].terminals  # fixed rule
    assert any(
        o.terminals != t.terminals or o.nonterminals != t.nonterminals for o, t in zip(out, test, strict=True)
    )
    for o in out:
        assert [o.terminals, o.nonterminals] in pool[len(o.words)]
        o.check(canonical=True)  # a well-formed parse: its tags decode to its heads
    # a length no training sentence has: training parses joined into one well-formed tree
    longest = max(pool)
    (long,) = parser.retag(
        [
            dataclasses.replace(
                test[0],
                words=["w"] * (longest + 6),
                heads=[0] + [1] * (longest + 5),
                terminals=[0] * (longest + 6),
                nonterminals=[0] * (longest + 6),
                deprels=None,
            )
        ]
    )
    assert (
        len(long.words) == longest + 6 and (long.terminals, long.nonterminals) != ([0] * (longest + 6),) * 2
    )
    long.check(canonical=True)


@pytest.mark.parametrize("profile", ["cpu-mini", "quickstart", "cpu-small", "smoke", "paper"])
def test_none_wide_matches_position_parameters_within_2_percent(profile: str) -> None:
    """The widened baseline's d_ff (profiles.*.recipe_overrides) against the real counts."""
    from structpe.train.recipe import load_recipe

    def params(spec, label: str, vocab: int) -> int:
        r = load_recipe(spec.recipe_name(label), spec.cell_overrides(label))
        return sum(
            p.numel() for p in build_model(SiPEConfig(**{**r.model, "vocab_size": vocab})).parameters()
        )

    spec = load_spec("sipe-txl", profile)
    target = params(spec, "position", spec.dataset.vocab_size)
    assert abs(params(spec, "none_wide", spec.dataset.vocab_size) / target - 1) < 0.02
    assert abs(params(spec, "none", spec.dataset.vocab_size) / target - 1) > 0.02  # what it corrects


def test_per_recipe_seeds_of_the_shipped_spec(capsys: pytest.CaptureFixture[str]) -> None:
    from structpe.cli import main

    spec = load_spec("sipe-txl", "cpu-mini")
    five = {"none", "position", "input", "none_tagloss", "position_shuffled", "none_wide", "position_causal"}
    five |= {"lis_tree", "lis_tree2"}  # LIS tree addresses (docs/lis.md): 5 seeds against none and position
    five |= {"gpt2", "tpt", "treereg"}  # the parser-free rivals of Table 2
    expect = {(r.label, s) for r in spec.recipes for s in ([1, 2, 3, 4, 5] if r.label in five else [1, 2, 3])}
    assert set(cells(spec)) == expect and len(cells(spec)) == 12 * 5 + 3 * 3
    assert {r.label for r in spec.recipes} >= five | {"disentangled", "attn_bias", "position_k2"}
    assert main(["study", "run", "sipe-txl", "--profile", "cpu-mini", "--dry-run", "--seeds", "4", "5"]) == 0
    listed = {ln.split(":")[0] for ln in capsys.readouterr().out.splitlines()}
    assert listed == {f"{lab}/seed-{s}" for lab in five for s in (4, 5)}
    sub = select(spec, ["position"], [2, 5])
    assert cells(sub) == [("none", 2), ("position", 2), ("none", 5), ("position", 5)]
    by_id = {c.id: c for c in spec.claims}
    assert by_id["pp-not-tagloss"].against == "none_tagloss" and by_id["causal-ppl"].against == "none"
    assert (
        spec.recipe("position_causal").tags == "prefix"
        and spec.recipe("position_shuffled").tags == "shuffled"
    )


@pytest.mark.parametrize(
    ("old", "new", "expect"),
    [
        (
            "{recipe: txl/position}",
            "{recipe: txl/position, seeds: [1, 2, 7]}",
            r"seeds \[7\] have no baseline cell",
        ),
        ("{recipe: txl/position}", "{recipe: txl/position, seeds: []}", "seeds must be a non-empty list"),
        ("{recipe: txl/position}", "{recipe: txl/position, tags: shufled}", "unknown tag source 'shufled'"),
    ],
)
def test_bad_control_keys_name_the_key(tiny_spec: Path, old: str, new: str, expect: str) -> None:
    bad = tiny_spec.parent / "bad.yaml"
    bad.write_text(tiny_spec.read_text().replace(old, new))
    with pytest.raises(StudySpecError, match=expect):
        load_spec(bad, "test")


# the tiny spec's recipes plus two controls (old, new)
CONTROLS = (
    "  position: {recipe: txl/position}\n",
    "  position: {recipe: txl/position}\n"
    "  none_tagloss:\n"
    "    recipe: txl/none\n"
    "    overrides: [model.multitask_baseline=true, model.tag_loss_weight=1.0]\n"
    "  position_shuffled: {recipe: txl/position, tags: shuffled}\n",
)


def test_tag_control_cells_train_and_score(
    tiny_data: StudyData, shuffled_pair: tuple[Path, Path], tmp_path: Path, tiny_spec_text: str
) -> None:
    p = tmp_path / "controls.yaml"
    no_paper = (
        "  - id: not-tagloss\n    claim: the gain is not the tag loss\n    recipe: position\n"
        "    against: none_tagloss\n    metrics: [ppl.joint.word_ppl]\n    better: lower\n"
    )
    p.write_text(tiny_spec_text.replace(*CONTROLS).replace("seeds: [1, 2]", "seeds: [1]") + no_paper)
    spec = load_spec(p, "test")
    shuffled_dir = shuffled_pair[1]
    data = dataclasses.replace(
        tiny_data,
        variants={"shuffled": TagVariant(shuffled_dir, "synthetic-shuffled", shuffled_dir / POOL_FILE)},
    )
    # the tag source enters the training hash only for the controls
    assert "tags" not in train_config(spec, "position", 1, "fp")
    assert train_config(spec, "position_shuffled", 1, "fp")["tags"] == "shuffled"
    out = tmp_path / "study"
    run_study(spec, out, data=data)
    study = json.loads((out / "study.json").read_text())
    assert study["cells_finished"] == study["cells_planned"] == 4
    assert {c["id"]: c["against"] for c in study["claims"]}["not-tagloss"] == "none_tagloss"
    assert "the gain is not the tag loss" in (out / "study.md").read_text()  # a claim with no paper numbers

    def metrics(label: str) -> dict:
        return json.loads((cell_dir(out, label, 1) / "metrics.json").read_text())

    tagloss = metrics("none_tagloss")
    # tag heads and their loss in training, no tags read: scored as p(x) in every mode like the baseline
    model = load(cell_dir(out, "none_tagloss", 1) / "run" / "final")
    assert model.tag_heads is not None and model.config.injection == "none"
    assert tagloss["scores"]["ppl.joint.word_ppl"] == tagloss["scores"]["ppl.conditional.word_ppl"]
    assert tagloss["train"]["parameters"] > metrics("none")["train"]["parameters"]
    rows = read_metrics(cell_dir(out, "none_tagloss", 1) / "run" / "metrics.csv")
    assert any(float(r.get("terminal_loss") or 0) > 0 for r in rows)  # trained with tags in its batches
    plain_rows = read_metrics(cell_dir(out, "none", 1) / "run" / "metrics.csv")
    assert not any(float(r.get("terminal_loss") or 0) > 0 for r in plain_rows)
    shuf = json.loads((cell_dir(out, "position_shuffled", 1) / "cell.json").read_text())
    assert shuf["config"]["data_fingerprint"] == "synthetic-shuffled" and shuf["config"]["tags"] == "shuffled"
    recipe = (cell_dir(out, "position_shuffled", 1) / "run").rglob("*.yaml")
    assert any(str(shuffled_dir) in f.read_text() for f in recipe)  # trained on the shuffled data
    # scored on shuffled tags: not the position-style conditional of the true parse
    assert metrics("position_shuffled")["scores"]["ppl.conditional.word_ppl"] > 1.0


def test_the_leakage_audit_scores_position_causal_on_its_own_tags(tiny_data: StudyData) -> None:
    """The audit's `causal` condition is the full-sequence score under word-prefix tags."""
    import torch

    from structpe.eval.leakage import leakage_audit
    from structpe.train.tokenizer import load_tokenizer

    tok = load_tokenizer(tiny_data.tokenizer_dir)
    torch.manual_seed(0)
    config = SiPEConfig(
        family="txl",
        injection="position",
        d_model=32,
        n_layers=2,
        n_heads=2,
        d_ff=64,
        prior_proj_init_std=1.0,
    )
    config.vocab_size = len(tok)
    model = build_model(config).eval()
    with torch.no_grad():  # every weight away from its near-zero start, so the tags matter
        for p in model.parameters():
            p.normal_(0.0, 0.3)
    plain = tiny_data.test_sentences[:3]
    texts = [" ".join(s.words) for s in plain]
    parser = LastWordHeadParser()
    causal = leakage_audit(model, tok, texts, parser, parses=plain, variants=["full", "causal"])["variants"]
    retagged = PrefixParser(parser).retag(plain)
    as_full = leakage_audit(model, tok, texts, parser, parses=retagged, variants=["full"])["variants"]
    assert causal["causal"]["nll_sum"] == pytest.approx(as_full["full"]["nll_sum"], rel=1e-6)
    # the prefix tags differ from the full parse's, and the model reads them
    assert causal["causal"]["nll_sum"] != pytest.approx(causal["full"]["nll_sum"], rel=1e-4)


@pytest.fixture(scope="module")
def prefix_data(tmp_path_factory: pytest.TempPathFactory, tiny_data: StudyData) -> Path:
    """The synthetic treebank's words prepared with spaCy prefix parses (the causal control's data)."""
    d = tmp_path_factory.mktemp("prefix")
    splits = {
        "train": [write_conllu(d / "train.conllu", 60, 1)],
        "validation": [write_conllu(d / "v.conllu", 12, 2)],
    }
    settings = PrepareSettings(parser="spacy", seq_len=64, tags="prefix")
    return prepare(splits, tiny_data.tokenizer_dir, d / "prefix", settings=settings)


def test_prefix_data_resumes_from_its_shards(
    tiny_data: StudyData, prefix_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import structpe.train.prepare as prepare_module

    splits = {
        "train": [write_conllu(tmp_path / "train.conllu", 60, 1)],
        "validation": [write_conllu(tmp_path / "v.conllu", 12, 2)],
    }
    settings = PrepareSettings(parser="spacy", seq_len=64, tags="prefix")
    monkeypatch.setattr(prepare_module, "PREFIX_SHARD", 25)  # train: 3 shards, validation: 1
    real = prepare_module.parse_batch
    calls: list[int] = []

    def killed_at_the_third_shard(batch, **kw):
        calls.append(len(next(iter(batch.values()))))
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(batch, **kw)

    monkeypatch.setattr(prepare_module, "parse_batch", killed_at_the_third_shard)
    out = tmp_path / "prefix"
    with pytest.raises(KeyboardInterrupt):
        prepare(splits, tiny_data.tokenizer_dir, out, settings=settings)
    shards = list(tmp_path.glob(".prefix.shards-*/train/shard-*"))
    assert len(shards) == 2 and not out.exists()
    calls.clear()
    prepare(splits, tiny_data.tokenizer_dir, out, settings=settings)
    assert calls == [10, 12]  # the third train shard and the validation split, nothing again
    assert not list(tmp_path.glob(".prefix.shards-*"))  # removed once the dataset is in place
    done, meta = load_prepared(out)
    whole, _ = load_prepared(prefix_data)  # the same data prepared in one go
    assert done["train"]["terminal_ids"] == whole["train"]["terminal_ids"]
    assert meta["settings"]["tags"] == "prefix"


def test_position_causal_cell_trains_on_prefix_parses(
    tiny_data: StudyData, prefix_data: Path, tmp_path: Path, tiny_spec_text: str
) -> None:
    from structpe.parser.cached import CachedParser
    from structpe.parser.registry import get_parser

    spec_text = tiny_spec_text.replace(
        "  position: {recipe: txl/position}\n",
        "  position: {recipe: txl/position}\n  position_causal: {recipe: txl/position, tags: prefix}\n",
    ).replace("seeds: [1, 2]", "seeds: [1]")
    # prefix tags come from a parser run on each word prefix (never the gold trees): the data stage's
    # output is given here (prefix_data), the spec names the parser that would make it
    spec_text = spec_text.replace("parser: gold", "parser: spacy")
    p = tmp_path / "causal.yaml"
    p.write_text(spec_text)
    spec = select(load_spec(p, "test"), ["position_causal"])
    data = dataclasses.replace(tiny_data, variants={"prefix": TagVariant(prefix_data, "synthetic-prefix")})
    parser = CachedParser(get_parser("spacy"))
    run_study(spec, tmp_path / "study", data=data, parser=parser, report=False)
    m = json.loads((cell_dir(tmp_path / "study", "position_causal", 1) / "metrics.json").read_text())
    cell = json.loads((cell_dir(tmp_path / "study", "position_causal", 1) / "cell.json").read_text())
    assert cell["config"]["tags"] == "prefix" and cell["config"]["data_fingerprint"] == "synthetic-prefix"
    assert m["scores"]["ppl.conditional.word_ppl"] > 1.0 and m["scores"]["ppl.joint.word_ppl"] > 1.0

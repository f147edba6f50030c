"""Joint text + tree generation: every generated tag sequence is a tree; fixed trees are filled exactly."""

from __future__ import annotations

import json
import random
import xml.etree.ElementTree as ET

import conllu as conllu_lib
import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from structpe.eval.scoring.prefixes import allowed_pairs
from structpe.generation.decoding import generate
from structpe.models import SiPEConfig, build_model
from structpe.syntax.conllu_io import read_conllu
from structpe.syntax.hexatags import decode, encode, is_well_formed
from structpe.syntax.tagged import TaggedSentence

CORPUS = [
    "the quick brown fox jumps over the lazy dog .",
    "a dog sleeps in the warm afternoon sun , and she reads .",
    "colourless green ideas sleep furiously tonight !",
    "the keys to the cabinet are on the table ( really ) .",
]


@pytest.fixture(scope="module")
def tok() -> PreTrainedTokenizerFast:
    """A byte-level BPE like the project's (word-initial tokens carry their space)."""
    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<pad>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    t.train_from_iterator(CORPUS * 3, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=t, bos_token="<s>", eos_token="</s>", pad_token="<pad>")


@pytest.fixture(scope="module")
def model(tok):
    torch.manual_seed(0)
    cfg = SiPEConfig(
        family="txl",
        injection="position",
        vocab_size=len(tok),
        d_model=32,
        n_layers=2,
        n_heads=2,
        d_ff=64,
        dropout=0.0,
        attention_dropout=0.0,
        prior_proj_init_std=0.3,
    )
    m = build_model(cfg).eval()
    with torch.no_grad():  # a random tag head with opinions, so that sampling explores many trees
        m.tag_heads.terminal.weight.mul_(20)
        m.tag_heads.nonterminal.weight.mul_(20)
    return m


def test_generated_tags_always_decode_to_a_tree(tok, model):
    """Property: over seeds, temperatures, top-k/p, word caps and strategies, the tags are a tree."""
    seen = set()
    for seed in range(12):
        rng = random.Random(seed)
        kw = dict(
            temperature=rng.choice([0.5, 1.0, 2.0, 5.0]),
            top_k=rng.choice([None, 5, 50]),
            top_p=rng.choice([None, 0.9]),
            max_words=rng.randrange(1, 12),
            max_tokens_per_word=rng.randrange(1, 4),
        )
        for s in generate(model, tok, seed=seed, n=2, **kw):
            assert 1 <= len(s.words) <= kw["max_words"]
            assert is_well_formed(s.terminals, s.nonterminals)
            assert decode(s.terminals, s.nonterminals) == s.heads
            seen.add(tuple(s.heads))
            json.loads(s.to_json())
    assert len(seen) > 5  # not one fixed tree
    for strategy in ("greedy", "beam"):
        (s,) = generate(model, tok, strategy=strategy, max_words=6, num_beams=3)
        assert is_well_formed(s.terminals, s.nonterminals) and len(s.words) <= 6


def test_sampling_is_reproducible_with_a_seed(tok, model):
    a = generate(model, tok, seed=3, n=2, max_words=8)
    b = generate(model, tok, seed=3, n=2, max_words=8)
    assert [s.to_dict() for s in a] == [s.to_dict() for s in b]


@pytest.mark.parametrize("strategy", ["sample", "greedy", "beam"])
def test_tree_controlled_generation_reproduces_the_tags(tok, model, strategy):
    rng = random.Random(1)
    for n_words in (1, 4, 9):
        terms, nts, depth = [], [], 0
        for w in range(1, n_words + 1):
            t, nt, depth = rng.choice(allowed_pairs(depth, w, n_words))
            terms.append(t)
            nts.append(nt)
        (s,) = generate(model, tok, tags=(terms, nts), strategy=strategy, seed=n_words, num_beams=2)
        assert (s.terminals, s.nonterminals) == (terms, nts)
        assert len(s.words) == n_words


def test_a_tree_from_heads_and_a_tagged_prompt(tok, model):
    heads = [2, 0, 4, 2, 2]  # encoded like a CoNLL-U tree
    tree = TaggedSentence.from_heads(["_"] * 5, heads)
    (s,) = generate(model, tok, "the dog", tags=tree, seed=0)
    assert s.heads == heads and s.words[:2] == ["the", "dog"]
    # a parsed prompt keeps its tags; the eos of its last word is chosen again (the prompt is a prefix)
    t, nt = encode([2, 0])
    parse = TaggedSentence(["the", "dog"], [2, 0], t, nt)
    for seed in range(4):
        (s,) = generate(model, tok, "the dog", prompt_parse=parse, seed=seed, max_words=6)
        assert s.words[:2] == ["the", "dog"] and s.terminals[0] == t[0] and s.nonterminals[0] == nt[0]
        assert is_well_formed(s.terminals, s.nonterminals)


def test_bad_requests_are_refused(tok, model):
    none = build_model(
        SiPEConfig(family="txl", injection="none", vocab_size=len(tok), d_model=16, n_layers=1, n_heads=2)
    )
    if getattr(none, "tag_heads", None) is not None:
        none.tag_heads = None
    with pytest.raises(ValueError, match="tag heads"):
        generate(none, tok)
    with pytest.raises(ValueError, match="strategy"):
        generate(model, tok, strategy="nucleus")
    with pytest.raises(ValueError):
        generate(model, tok, tags=([0, 0], [0, 4]))  # not a tree


def test_generate_command(tok, model, tmp_path, capsys):
    from structpe.cli import main

    model.save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    out = tmp_path / "gen.jsonl"
    assert (
        main(
            [
                "generate",
                "--model",
                str(tmp_path / "m"),
                "-n",
                "3",
                "--max-words",
                "7",
                "--top-p",
                "0.9",
                "-o",
                str(out),
                "--svg",
                str(tmp_path / "tree.svg"),
            ]
        )
        == 0
    )
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 3
    for r in rows:
        assert decode(r["terminals"], r["nonterminals"]) == r["heads"] and len(r["words"]) <= 7
    svg = (tmp_path / "tree.svg").read_text()  # every sentence drawn, stacked in one SVG
    assert svg.startswith("<svg") and svg.count('class="displacy"') == 3
    assert svg.count("displacy-arc") == sum(len(r["words"]) - 1 for r in rows)
    ET.fromstring(svg)  # well-formed XML
    # the same sentences as CoNLL-U: read back by the conllu package and by structpe's reader
    out_conllu = tmp_path / "gen.conllu"
    args = ["generate", "--model", str(tmp_path / "m"), "-n", "3", "--max-words", "7", "--top-p", "0.9"]
    assert main([*args, "--output-format", "conllu", "-o", str(out_conllu)]) == 0
    parsed = conllu_lib.parse(out_conllu.read_text())
    ours = list(read_conllu(out_conllu))
    assert [s.metadata["sent_id"] for s in parsed] == ["1", "2", "3"]
    for r, sent, mine in zip(rows, parsed, ours, strict=True):
        assert [t["form"] for t in sent] == r["words"] == mine.words and mine.heads == r["heads"]
        assert [t["misc"]["Hexatag"] for t in sent] == r["terminals"]
        assert [t["misc"]["HexatagNT"] for t in sent] == r["nonterminals"]
        assert sent.metadata["text"] == r["text"]  # the raw sentence, first-level as `tag` writes it
    conllu = tmp_path / "t.conllu"
    conllu.write_text(
        "# sent_id = a\n1\tthe\t_\tDET\t_\t_\t2\tdet\t_\t_\n2\tdog\t_\tNOUN\t_\t_\t3\tnsubj\t_\t_\n"
        "3\tsleeps\t_\tVERB\t_\t_\t0\troot\t_\t_\n\n"
    )
    assert (
        main(
            [
                "generate",
                "--model",
                str(tmp_path / "m"),
                "--tags",
                str(conllu),
                "--strategy",
                "greedy",
                "--prompt",
                "the",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    (r,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert r["heads"] == [2, 3, 0] and r["sent_id"] == "a-generated" and r["words"][0].startswith("the")
    tagged = tmp_path / "t.jsonl"
    tagged.write_text(TaggedSentence.from_heads(["a", "b"], [0, 1]).to_json() + "\n")
    assert (
        main(["generate", "--model", str(tmp_path / "m"), "--tags", str(tagged), "--strategy", "beam"]) == 0
    )
    assert json.loads(capsys.readouterr().out)["heads"] == [0, 1]
    # bad input: one line naming the problem, non-zero exit, no output file touched
    tagged.write_text('{"words": ["a"]}\n')
    assert main(["generate", "--model", str(tmp_path / "m"), "--tags", str(tagged), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "line 1" in err and len(err.splitlines()) == 1 and out.read_text().startswith("{")


def test_a_wider_beam_never_scores_worse(tok, model):
    """One prompt, beams of 1..8: the joint log p (one definition, end token included) never falls."""
    for prompt in ("", "the dog"):
        scores = [
            generate(model, tok, prompt, strategy="beam", num_beams=k, max_words=6)[0].meta["logprob"]
            for k in (1, 2, 4, 8)
        ]
        assert all(b >= a - 1e-9 for a, b in zip(scores, scores[1:], strict=False)), scores


def test_logprob_counts_the_end_for_every_strategy(tok, model):
    """A tree-controlled one-word sentence: greedy's logprob is that word's token(s), tags *and* the
    token that ends it, the same sum beam search ranks by."""
    tree = encode([0])  # one word
    (g,) = generate(model, tok, tags=tree, strategy="greedy", max_tokens_per_word=1)
    (b,) = generate(model, tok, tags=tree, strategy="beam", num_beams=8, max_tokens_per_word=1)
    assert b.meta["logprob"] >= g.meta["logprob"] - 1e-9  # the beam searches the same sum
    if g.meta["text"] == b.meta["text"]:
        assert g.meta["logprob"] == pytest.approx(b.meta["logprob"])


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"top_k": -3}, "top_k"),
        ({"top_k": 0}, "top_k"),
        ({"temperature": float("nan")}, "temperature"),
        ({"n": 2, "strategy": "greedy"}, "repeat"),
        ({"n": 2, "strategy": "beam"}, "repeat"),
        ({"n": 2, "temperature": 0.0}, "repeat"),
    ],
)
def test_options_that_cannot_be_honoured_are_refused(tok, model, kw, match):
    with pytest.raises(ValueError, match=match):
        generate(model, tok, **kw)


def test_an_unicode_prompt_keeps_its_words(tok, model):
    """Without a parser the prompt's words are `structpe tag`'s (accents, CJK, emoji, a URL as one
    word): never byte pieces of the byte-level BPE, never U+FFFD."""
    from structpe.syntax.sentences import split_words

    prompt = "The naïve café 你好 😀 https://example.com/a?b=1"
    expected = ["The", "naïve", "café", "你好", "😀", "https://example.com/a?b=1"]
    assert split_words(prompt) == expected
    for strategy in ("greedy", "sample"):
        (s,) = generate(model, tok, prompt, strategy=strategy, seed=1, max_words=12)
        assert s.meta["prompt_words"] == len(expected)
        assert s.words[: len(expected) - 1] == expected[:-1]
        assert s.words[len(expected) - 1].startswith(expected[-1])  # the model may continue the last word
        assert not any("\ufffd" in w for w in s.words[: len(expected)])
        assert s.meta["text"].startswith(prompt)

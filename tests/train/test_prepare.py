"""Prepared data: tags only on first subwords, packed sequences decode back to the input sentences,
deterministic and cached by fingerprint, clear errors for missing or corrupt datasets."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from datasets import load_from_disk

from structpe.errors import PreparedDataError
from structpe.parser.registry import get_parser
from structpe.train.corpus import detokenize_words
from structpe.train.prepare import load_prepared, prepare
from structpe.train.prepare_settings import METADATA_FILE, PrepareSettings
from structpe.train.prepare_steps import pack_sentences
from structpe.train.tokenizer import load_tokenizer

SEQ_LEN = 64  # as in conftest.py

IGN = -100


def unpack(rows: list[dict], bos: int, eos: int) -> list[tuple[list[int], list[int], list[int]]]:
    """Invert the packing: sentences (ids, terminal ids, nonterminal ids) in order."""
    out, cur = [], ([], [], [])
    for r in rows:
        ids, t, n = r["input_ids"], r["terminal_ids"], r["nonterminal_ids"]
        assert ids[0] == bos and len(ids) <= SEQ_LEN
        for i, a, b in zip(ids, t, n, strict=True):
            if i in (bos, eos):
                assert a == IGN and b == IGN  # special tokens carry no tags
            if i == bos:
                continue
            if i == eos:
                out.append(cur)
                cur = ([], [], [])
                continue
            cur[0].append(i)
            cur[1].append(a)
            cur[2].append(b)
    assert cur == ([], [], []), "the last sequence must close its sentence"
    return out


def test_tags_on_first_subwords_and_decode_back(
    ewt_slices: dict, bpe_tokenizer: Path, tmp_path: Path
) -> None:
    """The ``tokenized`` text form: pre-split words, tags on each word's first subword."""
    settings = PrepareSettings(parser="gold", seq_len=SEQ_LEN, text_form="tokenized")
    out = prepare({k: [v] for k, v in ewt_slices.items()}, bpe_tokenizer, tmp_path / "tok", settings=settings)
    dd, meta = load_prepared(out)
    assert meta["text_form"]["text_form"] == "tokenized"
    tok = load_tokenizer(bpe_tokenizer)
    gold = list(get_parser("gold").parse_conllu(ewt_slices["train"]))
    assert meta["stats"]["train"]["sentences"] == len(gold) == 300
    sents = unpack(list(dd["train"]), meta["bos_token_id"], meta["eos_token_id"])
    assert len(sents) == len(gold)
    multi = 0
    for (ids, t, n), g in zip(sents, gold, strict=True):
        assert tok.decode(ids).strip() == " ".join(g.words)  # decodes back to the input sentence
        enc = tok(g.words, is_split_into_words=True, add_special_tokens=False)
        assert enc.input_ids == ids
        wids = enc.word_ids()
        first = [j for j, w in enumerate(wids) if j == 0 or wids[j - 1] != w]
        assert [j for j, x in enumerate(t) if x != IGN] == first  # tags exactly on first subwords
        assert [j for j, x in enumerate(n) if x != IGN] == first
        assert [t[j] for j in first] == g.terminals and [n[j] for j in first] == g.nonterminals
        multi += len(ids) > len(first)
    assert multi > 50  # the 600-token BPE splits many words: the first-subword rule is exercised


def test_raw_form_tags_follow_the_detokenized_text(
    gold_dataset: Path, ewt_slices: dict, bpe_tokenizer: Path
) -> None:
    """The default ``raw`` form (the tokenizer's): ids are the detokenized text's tokens, as the
    scorers tokenize it, and each word's tags sit on the first token overlapping its characters."""
    dd, meta = load_prepared(gold_dataset)
    assert meta["text_form"]["text_form"] == "raw" and meta["settings"]["text_form"] == "raw"
    tok = load_tokenizer(bpe_tokenizer)
    gold = list(get_parser("gold").parse_conllu(ewt_slices["train"]))
    sents = unpack(list(dd["train"]), meta["bos_token_id"], meta["eos_token_id"])
    assert len(sents) == len(gold)
    glued = 0
    for (ids, t, _), g in zip(sents, gold, strict=True):
        words, text, spans = detokenize_words(g.words)
        assert words == list(g.words)  # UD words need no Brown normalisation
        enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
        assert enc.input_ids == ids and tok.decode(ids).strip() == text
        offsets = enc["offset_mapping"]
        tagged = [j for j, x in enumerate(t) if x != IGN]
        expect = []
        for a, b in spans:
            j = next(j for j, (s0, s1) in enumerate(offsets) if s1 > a and s0 < b)
            if j not in expect:
                expect.append(j)
        assert tagged == expect
        glued += " " not in text[spans[0][1] :] or any(
            text[spans[i][1] : spans[i + 1][0]] == "" for i in range(len(spans) - 1)
        )
    assert glued > 100  # most sentences end in a period glued to its word: the raw form is exercised
    assert meta["stats"]["train"]["unaligned_words"] >= 0


def test_pack_long_sentence_and_bos_per_sentence() -> None:
    s1 = ([10, 11, 12], [0, IGN, 1], [1, IGN, 4])
    long = (list(range(20, 32)), [0] * 12, [4] * 12)
    rows = pack_sentences([s1, long, s1], seq_len=8, bos_id=1, eos_id=2)
    assert all(len(r["input_ids"]) <= 8 for r in rows)
    flat = [i for r in rows for i in r["input_ids"]]
    assert flat == [
        1,
        10,
        11,
        12,
        2,
        1,
        20,
        21,
        22,
        23,
        24,
        25,
        26,
        1,
        27,
        28,
        29,
        30,
        31,
        2,
        1,
        10,
        11,
        12,
        2,
    ]
    rows = pack_sentences([s1, s1], seq_len=16, bos_id=1, eos_id=2, bos="sentence")
    assert rows[0]["input_ids"] == [1, 10, 11, 12, 2, 1, 10, 11, 12, 2]
    assert rows[0]["terminal_ids"] == [IGN, 0, IGN, 1, IGN, IGN, 0, IGN, 1, IGN]


def test_cache_determinism_and_rebuild(
    gold_dataset: Path, ewt_slices: dict, bpe_tokenizer: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    splits = {k: [v] for k, v in ewt_slices.items()}
    settings = PrepareSettings(parser="gold", seq_len=SEQ_LEN)
    meta0 = json.loads((gold_dataset / METADATA_FILE).read_text())
    again = prepare(splits, bpe_tokenizer, gold_dataset, settings=settings)
    assert again == gold_dataset and "cache hit" in capsys.readouterr().out
    # two processes, another folder: the same fingerprint and the very same rows
    other = prepare(splits, bpe_tokenizer, tmp_path / "p2", settings=settings, num_proc=2)
    meta1 = json.loads((other / METADATA_FILE).read_text())
    assert meta1["fingerprint"] == meta0["fingerprint"]
    a, b = load_from_disk(str(gold_dataset)), load_from_disk(str(other))
    for split in ("train", "validation"):
        assert a[split].to_dict() == b[split].to_dict()
    # a changed setting changes the fingerprint and rebuilds the folder
    prepare(splits, bpe_tokenizer, other, settings=PrepareSettings(parser="gold", seq_len=32))
    meta2 = json.loads((other / METADATA_FILE).read_text())
    assert meta2["fingerprint"] != meta0["fingerprint"] and meta2["settings"]["seq_len"] == 32
    assert max(len(r) for r in load_from_disk(str(other))["train"]["input_ids"]) <= 32


def test_spacy_parser_on_raw_text(bpe_tokenizer: Path, tmp_path: Path) -> None:
    text = tmp_path / "prose.txt"
    text.write_text("The old man saw the boat. It was red and\nvery small.\n\nShe ran home quickly.\n")
    settings = PrepareSettings(parser="spacy", input_format="text", seq_len=SEQ_LEN)
    out = prepare({"train": [text], "validation": [text]}, bpe_tokenizer, tmp_path / "ds", settings=settings)
    dd, meta = load_prepared(out)
    tok = load_tokenizer(bpe_tokenizer)
    sents = unpack(list(dd["train"]), meta["bos_token_id"], meta["eos_token_id"])
    assert [tok.decode(s[0]).strip() for s in sents] == [
        "The old man saw the boat.",
        "It was red and very small.",
        "She ran home quickly.",
    ]
    assert meta["stats"]["train"] == {**meta["stats"]["train"], "units": 2, "sentences": 3}


def test_missing_and_corrupt_datasets(gold_dataset: Path, tmp_path: Path) -> None:
    with pytest.raises(PreparedDataError, match="not found"):
        load_prepared(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(PreparedDataError, match="not a structpe prepared dataset"):
        load_prepared(tmp_path / "empty")
    broken = tmp_path / "broken"
    shutil.copytree(gold_dataset, broken)
    arrow = next((broken / "train").glob("*.arrow"))
    arrow.write_bytes(arrow.read_bytes()[: arrow.stat().st_size // 2])  # a half-copied file
    with pytest.raises(PreparedDataError, match="cannot load the dataset"):
        load_prepared(broken)


PROSE = [
    "The old man saw the boat. It was red and\nvery small.",
    "She ran home quickly!",
    "Nobody answered. The door stayed shut; the lamp burned low.",
    "Why did he come? Nobody knew.",
    "At dawn the rain stopped.",
]


def test_text_units_are_cut_by_one_rule_whatever_the_parser(tmp_path: Path) -> None:
    """``text`` paragraphs reach the parser as the sentences of ``split_sentences``, pre-tokenized."""
    from structpe.syntax.sentences import split_sentences
    from structpe.train.prepare_steps import parse_batch

    cut = split_sentences(PROSE)
    assert [len(p) for p in cut] == [2, 1, 2, 2, 1]
    assert cut[0][1] == ["It", "was", "red", "and", "very", "small", "."]  # the line break is no word
    words = [s for p in cut for s in p]
    for parser in ("spacy", "hexatagger"):
        out = parse_batch({"text": PROSE}, parser, {"nonprojective": "lift"})
        assert out["words"] == words, parser


def test_sentence_cap_cuts_long_sentences_into_near_equal_pieces() -> None:
    """``max_words``: a longer sentence becomes consecutive pieces (no word lost, reordered or longer
    than the cap, lengths within one of each other); shorter sentences and no cap change nothing."""
    from structpe.syntax.sentences import split_sentences
    from structpe.train.prepare_steps import parse_batch

    long = " ; ".join(f"word{i} and more{i}" for i in range(20)) + " ."  # 80 words, one sentence
    [[uncut]] = split_sentences([long])
    assert len(uncut) == 80
    [pieces] = split_sentences([long], max_words=27)
    assert [len(p) for p in pieces] == [27, 27, 26]  # ceil(80 / 27) = 3 near-equal pieces
    assert [w for p in pieces for w in p] == uncut
    assert split_sentences(PROSE, max_words=27) == split_sentences(PROSE)
    assert split_sentences([long], max_words=80) == [[uncut]]
    with pytest.raises(ValueError, match="max_words must be >= 1"):
        split_sentences([long], max_words=0)
    out = parse_batch({"text": [long]}, "hexatagger", {"nonprojective": "lift"}, max_words=27)
    assert out["words"] == pieces  # each piece parsed as a sentence of its own


def test_sentence_cap_enters_the_fingerprint_only_when_set(tmp_path: Path) -> None:
    from structpe.train.prepare_settings import settings_record

    assert "max_words" not in settings_record(PrepareSettings())  # earlier data keeps its fingerprint
    assert settings_record(PrepareSettings(max_words=128))["max_words"] == 128
    with pytest.raises(ValueError, match="max_words must be >= 1"):
        PrepareSettings(max_words=0).validate()


def test_sentence_cap_refused_for_given_sentences(
    ewt_slices: dict, bpe_tokenizer: Path, tmp_path: Path
) -> None:
    settings = PrepareSettings(parser="gold", seq_len=SEQ_LEN, max_words=10)
    with pytest.raises(ValueError, match="max_words cuts sentences of raw text"):
        prepare({"train": [ewt_slices["train"]]}, bpe_tokenizer, tmp_path / "x", settings=settings)


def test_sharded_parse_resumes_after_a_kill_and_matches_one_pass(
    bpe_tokenizer: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import structpe.train.prepare as prep

    text = tmp_path / "prose.txt"
    text.write_text("\n\n".join(PROSE) + "\n")
    settings = PrepareSettings(parser="spacy", input_format="text", seq_len=SEQ_LEN)
    one_pass = prepare({"train": [text]}, bpe_tokenizer, tmp_path / "one", settings=settings)

    real, calls = prep.parse_batch, []

    def killed_at_third_shard(batch: dict, **kw: object) -> dict:
        calls.append(len(batch["text"]))
        if len(calls) == 3:
            raise KeyboardInterrupt("killed")
        return real(batch, **kw)

    monkeypatch.setattr(prep, "parse_batch", killed_at_third_shard)
    out = tmp_path / "sharded"
    with pytest.raises(KeyboardInterrupt):
        prepare({"train": [text]}, bpe_tokenizer, out, settings=settings, shard_units=2)
    (shards,) = tmp_path.glob(".sharded.shards-*")
    assert sorted(p.name for p in (shards / "train").iterdir()) == ["shard-00000", "shard-00001"]
    assert not out.exists()

    calls.clear()

    def counted(batch: dict, **kw: object) -> dict:
        calls.append(len(batch["text"]))
        return real(batch, **kw)

    monkeypatch.setattr(prep, "parse_batch", counted)
    prepare({"train": [text]}, bpe_tokenizer, out, settings=settings, shard_units=2)
    assert calls == [1]  # only the last shard (paragraph 5) was parsed again
    assert not shards.exists()
    a, b = load_from_disk(str(one_pass))["train"], load_from_disk(str(out))["train"]
    assert a.to_dict() == b.to_dict()
    meta = json.loads((out / METADATA_FILE).read_text())
    assert meta["fingerprint"] == json.loads((one_pass / METADATA_FILE).read_text())["fingerprint"]
    with pytest.raises(ValueError, match="shard_units must be >= 1"):
        prepare({"train": [text]}, bpe_tokenizer, tmp_path / "x", settings=settings, shard_units=0)

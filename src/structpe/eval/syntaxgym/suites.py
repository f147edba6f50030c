"""SyntaxGym suites: loading the stored JSON suites and placing their regions in sentence text.

``load_suite`` reads one suite (items, conditions, region contents, predictions) with clear errors
naming the file; ``sentence_and_spans`` joins a condition's regions into the sentence the model
scores and returns each region's character span, so surprisals can be summed per region. Kept
apart from the formulas (``structpe.eval.syntaxgym.formula``) and the scoring protocol
(``structpe.eval.syntaxgym.evaluate``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from structpe.errors import StructpeError
from structpe.eval.syntaxgym.formula import Formula, FormulaError, parse_formula
from structpe.io import read_json


@dataclass
class Item:
    number: int
    # condition name -> region contents, in region order (1..N)
    conditions: dict[str, list[str]]


@dataclass
class Suite:
    name: str
    region_names: list[str]
    predictions: list[Formula]
    items: list[Item]
    metric: str = "sum"
    path: Path | None = None

    @property
    def condition_names(self) -> list[str]:
        return list(self.items[0].conditions) if self.items else []


def load_suite(path: str | Path) -> Suite:
    """Read a SyntaxGym suite JSON; conditions are keyed by name (order differs between items)."""
    path = Path(path)
    data = read_json(path)
    name = data["meta"]["name"]
    metric = data["meta"].get("metric", "sum")
    if metric != "sum":
        raise StructpeError(f"{path}: region metric {metric!r} is not supported (all paper suites use 'sum')")
    rm = data["region_meta"]
    region_names = [rm[str(i)] for i in range(1, len(rm) + 1)]
    preds = []
    for k, p in enumerate(data["predictions"]):
        if p.get("type", "formula") != "formula":
            raise StructpeError(f"{path}: prediction {k} has unsupported type {p.get('type')!r}")
        try:
            preds.append(parse_formula(p["formula"]))
        except FormulaError as err:
            raise FormulaError(f"{path}: prediction {k}: {err}") from err
    items = []
    for it in data["items"]:
        conds: dict[str, list[str]] = {}
        for c in it["conditions"]:
            regions = sorted(c["regions"], key=lambda r: r["region_number"])
            nums = [r["region_number"] for r in regions]
            if nums != list(range(1, len(region_names) + 1)):
                raise StructpeError(
                    f"{path}: item {it['item_number']} condition {c['condition_name']!r} has regions {nums}"
                )
            conds[c["condition_name"]] = [r["content"] for r in regions]
        items.append(Item(int(it["item_number"]), conds))
    suite = Suite(name, region_names, preds, items, metric, path)
    for k, f in enumerate(preds):
        for cond, region in f.references():
            if cond not in suite.condition_names:
                raise StructpeError(f"{path}: prediction {k} names unknown condition {cond!r}")
            if region is not None and not 1 <= region <= len(region_names):
                raise StructpeError(
                    f"{path}: prediction {k} names region {region} (suite has {len(region_names)})"
                )
    return suite


def suites_dir(data_dir: str | Path | None = None) -> Path:
    from structpe.data.paths import data_root

    if data_dir is not None and (Path(data_dir) / "suites").is_dir():
        return Path(data_dir) / "suites"
    return data_root(data_dir, sub="syntaxgym/suites")


def load_suites(data_dir: str | Path | None = None, names: Sequence[str] | None = None) -> list[Suite]:
    """All suites (or ``names``) from ``<data>/syntaxgym/suites``, sorted by name."""
    d = suites_dir(data_dir)
    available = sorted(p.stem for p in d.glob("*.json"))
    if names:
        unknown = [n for n in names if n not in available]
        if unknown:
            raise StructpeError(f"unknown suites {unknown}; available in {d}: {available}")
        chosen = list(names)
    else:
        chosen = available
    return [load_suite(d / f"{n}.json") for n in chosen]


def sentence_and_spans(
    contents: Sequence[str], text: str = "as_written"
) -> tuple[str, list[tuple[int, int] | None]]:
    """Join non-empty regions by single spaces (syntaxgym-core ``Suite.iter_sentences``).

    Returns the sentence and, per region, the character span it owns: from the joining space
    before it to its end (None for an empty region). ``text="raw"`` detokenizes the sentence
    first: the suites are written PTB-style (``shot , the``, ``book .``, ``teacher 's``), while
    our models (like any Hugging Face LM) are trained on raw text; a region then owns the text
    from the end of the previous region's last word (so a glued ``,`` owns no space).
    """
    if text == "raw":
        return _raw_sentence_and_spans(contents)
    if text != "as_written":
        raise ValueError(f"text must be 'as_written' or 'raw', got {text!r}")
    parts: list[str] = []
    spans: list[tuple[int, int] | None] = []
    pos = 0
    for c in contents:
        c = c.strip()
        if not c:
            spans.append(None)
            continue
        start = pos if not parts else pos + 1
        owned_from = pos  # the joining space goes with this region
        parts.append(c)
        pos = start + len(c)
        spans.append((owned_from, pos))
    return " ".join(parts), spans


def _raw_sentence_and_spans(contents: Sequence[str]) -> tuple[str, list[tuple[int, int] | None]]:
    from structpe.train.corpus import detokenize_words

    words, owner = [], []
    for i, c in enumerate(contents):
        for w in c.split():
            words.append(w)
            owner.append(i)
    _, sentence, word_spans = detokenize_words(words, brown=False)
    spans: list[tuple[int, int] | None] = [None] * len(contents)
    prev_end = 0
    for i in range(len(contents)):
        mine = [sp for sp, o in zip(word_spans, owner, strict=True) if o == i]
        if mine:
            spans[i] = (prev_end, mine[-1][1])
            prev_end = mine[-1][1]
    return sentence, spans

"""SyntaxGym targeted syntactic evaluation (Hu et al., ACL 2020; docs/design.md §4).

Pipeline, as in ``syntaxgym-core`` + LM-Zoo (docs/design.md §7; the data's PROVENANCE.md):

1. a condition's sentence is its non-empty regions joined by single spaces, then (``text="raw"``,
   the default) detokenized like our training text: the suites are PTB-tokenized (``book .``);
2. token surprisal in bits, -log2 p(x_t | x_<t), from the shared scorer (BOS-conditioned for
   decoders, PLL-word-l2r for encoders); a token belongs to the region whose character span holds
   the token's start offset (the joining space before a region belongs to that region, so GPT-2's
   leading-space tokens land on the word they start); region value = sum of its tokens' surprisals;
3. each suite's prediction formulas are evaluated per item; an item is correct iff prediction 0 is
   True (the paper's protocol; ``protocol="conjunction"`` gives Brain-Score's all-predictions
   variant);
4. suite accuracy = mean item correctness; SG score = unweighted mean over the paper's 31 suites
   (``fgd-embed3/4`` and ``nn-nv-rpl`` excluded); circuit score = mean of its suites' accuracies.

The formula parser is a small recursive-descent parser written here on purpose: the reference
grammar lives in ``cpllab/syntaxgym-core`` (``syntaxgym/prediction.py``, pyparsing), which is marked
DEPRECATED upstream, pins 2021-era pandas/pyparsing/click and pulls in LM-Zoo/Docker; PyPI has only
an old sdist (``syntaxgym==0.6.0``). Twenty lines of parser are cheaper than that dependency.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from structpe.errors import StructpeError
from structpe.eval.scoring import (
    LN2,
    CausalScorer,
    MaskedScorer,
    Parser,
    ScoringSpec,
    TokenScores,
    describe_scoring,
    make_scorer,
)

EXCLUDE_RE = re.compile(r"^fgd-embed[34]|^gardenpath|^nn-nv")
CIRCUITS: dict[str, list[str]] = {
    "Agreement": ["number"],
    "Licensing": ["npi", "reflexive"],
    "Garden-Path Effects": ["npz", "mvrr"],
    "Gross Syntactic State": ["subordination"],
    "Center Embedding": ["center"],
    "Long-Distance Dependencies": ["fgd", "cleft"],
}
PROTOCOLS = ("prediction0", "conjunction")


class FormulaError(ValueError):
    """A prediction formula that does not parse; the message shows where."""


# ----------------------------------------------------------------------------------------------
# formulas


@dataclass(frozen=True)
class Number:
    value: float

    def evaluate(self, values: Mapping[tuple[str, int | None], float]) -> float:
        return self.value


@dataclass(frozen=True)
class RegionRef:
    """``(r;%cond%)``: summed surprisal of region r (``None`` = ``*``, all regions) in ``cond``."""

    region: int | None
    condition: str

    def evaluate(self, values: Mapping[tuple[str, int | None], float]) -> float:
        key = (self.condition, self.region)
        if key not in values:
            raise KeyError(f"no surprisal for region {self.region} of condition {self.condition!r}")
        return values[key]


@dataclass(frozen=True)
class BinOp:
    op: str
    left: Any
    right: Any

    def evaluate(self, values: Mapping[tuple[str, int | None], float]) -> Any:
        a = self.left.evaluate(values)
        b = self.right.evaluate(values)
        if self.op == "+":
            return a + b
        if self.op == "-":
            return a - b
        if self.op == "<":
            return a < b
        if self.op == ">":
            return a > b
        if self.op == "=":  # syntaxgym-core: numpy.isclose(a, b, rtol=1e-5, atol=1e-3)
            return bool(np.isclose(a, b, rtol=1e-5, atol=1e-3))
        if self.op == "&":
            return bool(a) and bool(b)
        if self.op == "|":
            return bool(a) or bool(b)
        raise AssertionError(self.op)


_TOKEN_RE = re.compile(
    r"\s*(?:(?P<cond>%[A-Za-z0-9_-]+%)|(?P<num>\d+(?:\.\d*)?|\.\d+)|(?P<op>[()*;+\-<>=&|]))"
)


def _tokenize(formula: str) -> list[tuple[str, str, int]]:
    toks = []
    pos = 0
    while pos < len(formula):
        if formula[pos:].strip() == "":
            break
        m = _TOKEN_RE.match(formula, pos)
        if not m:
            raise FormulaError(f"unexpected character at {pos}: {formula[pos : pos + 10]!r} in {formula!r}")
        kind = m.lastgroup or ""
        toks.append((kind, m.group(kind), m.start(kind)))
        pos = m.end()
    return toks


class _Parser:
    """Grammar (tightest first): atom; ``+ -``; ``< > =``; ``& |``; all left-associative.

    atom := NUMBER | '-' atom | '(' (INT | '*') ';' COND ')' | '(' expr ')'
    """

    LEVELS = (("&", "|"), ("<", ">", "="), ("+", "-"))

    def __init__(self, formula: str) -> None:
        self.formula = formula
        self.toks = _tokenize(formula)
        self.i = 0

    def peek(self, k: int = 0) -> tuple[str, str, int] | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def fail(self, msg: str) -> FormulaError:
        tok = self.peek()
        where = tok[2] if tok else len(self.formula)
        return FormulaError(f"{msg} at character {where} of {self.formula!r}")

    def expect(self, value: str) -> None:
        tok = self.peek()
        if tok is None or tok[1] != value:
            raise self.fail(f"expected {value!r}")
        self.i += 1

    def parse(self) -> Any:
        node = self.level(0)
        if self.peek() is not None:
            raise self.fail("unexpected trailing input")
        return node

    def level(self, k: int) -> Any:
        if k == len(self.LEVELS):
            return self.atom()
        node = self.level(k + 1)
        while (tok := self.peek()) is not None and tok[0] == "op" and tok[1] in self.LEVELS[k]:
            self.i += 1
            node = BinOp(tok[1], node, self.level(k + 1))
        return node

    def atom(self) -> Any:
        tok = self.peek()
        if tok is None:
            raise self.fail("unexpected end of formula")
        kind, text, _ = tok
        if kind == "num":
            self.i += 1
            return Number(float(text))
        if text == "-":
            self.i += 1
            return BinOp("-", Number(0.0), self.atom())
        if text == "(":
            nxt, nxt2 = self.peek(1), self.peek(2)
            if nxt is not None and nxt2 is not None and nxt2[1] == ";" and (nxt[0] == "num" or nxt[1] == "*"):
                self.i += 3
                region = None if nxt[1] == "*" else int(nxt[1])
                cond = self.peek()
                if cond is None or cond[0] != "cond":
                    raise self.fail("expected %condition%")
                self.i += 1
                self.expect(")")
                return RegionRef(region, cond[1].strip("%"))
            self.i += 1
            node = self.level(0)
            self.expect(")")
            return node
        raise self.fail(f"unexpected {text!r}")


@dataclass(frozen=True)
class Formula:
    """A parsed prediction formula; ``evaluate(values)`` with values[(condition, region)]."""

    text: str
    tree: Any

    def evaluate(self, values: Mapping[tuple[str, int | None], float]) -> bool:
        return bool(self.tree.evaluate(values))

    def references(self) -> list[tuple[str, int | None]]:
        out: list[tuple[str, int | None]] = []

        def walk(n: Any) -> None:
            if isinstance(n, RegionRef):
                if (n.condition, n.region) not in out:
                    out.append((n.condition, n.region))
            elif isinstance(n, BinOp):
                walk(n.left)
                walk(n.right)

        walk(self.tree)
        return out


def parse_formula(text: str) -> Formula:
    """Parse one SyntaxGym prediction formula (grammar of syntaxgym-core ``prediction.py``)."""
    return Formula(text, _Parser(text).parse())


# ----------------------------------------------------------------------------------------------
# suites


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
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise StructpeError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from err
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


def region_surprisals(
    scores: TokenScores, spans: Sequence[tuple[int, int] | None], include_eos: bool = True
) -> list[float]:
    """Sum of token surprisals (bits) per region; tokens go to the region holding their start."""
    out = [0.0] * len(spans)
    bounds = [(i, s) for i, s in enumerate(spans) if s is not None]
    for (start, _end), lp in zip(scores.offsets, scores.logprobs, strict=True):
        region = None
        for i, (a, b) in bounds:
            if a <= start < b:
                region = i
                break
        if region is None:
            raise ValueError(f"token at character {start} of {scores.text!r} falls in no region")
        out[region] += -lp / LN2
    if include_eos and scores.eos_logprob is not None and bounds:
        out[bounds[-1][0]] += -scores.eos_logprob / LN2  # LM-Zoo puts P(EOS) in the last region
    return out


# ----------------------------------------------------------------------------------------------
# protocol


def circuit_of(suite: str) -> str | None:
    tag = re.split(r"[-_0-9]", suite)[0]
    for circuit, tags in CIRCUITS.items():
        if tag in tags:
            return circuit
    return None


def aggregate(suite_accuracy: Mapping[str, float]) -> dict[str, Any]:
    """SG score over the paper's suites present (unweighted), circuit means, and which were used."""
    used = {s: a for s, a in suite_accuracy.items() if not EXCLUDE_RE.match(s)}
    circuits: dict[str, list[float]] = {}
    for s, a in used.items():
        c = circuit_of(s)
        if c is not None:
            circuits.setdefault(c, []).append(a)
    return {
        "sg_score": float(np.mean(list(used.values()))) if used else math.nan,
        "n_suites": len(used),
        "circuits": {c: float(np.mean(v)) for c, v in circuits.items()},
        "excluded": sorted(s for s in suite_accuracy if EXCLUDE_RE.match(s)),
    }


def sg_score_from_reference(csv_path: str | Path) -> dict[str, Any]:
    """Recompute the SG score from a per-item reference file (``model,suite,item,correct``)."""
    csv_path = Path(csv_path)
    per_suite: dict[str, list[bool]] = {}
    with csv_path.open(newline="") as f:
        reader = csv.DictReader(f)
        for line, row in enumerate(reader, start=2):
            val = row["correct"]
            if val not in ("True", "False"):
                raise ValueError(f"{csv_path}:{line}: 'correct' is {val!r}, expected True/False")
            per_suite.setdefault(row["suite"], []).append(val == "True")
    acc = {s: float(np.mean(v)) for s, v in sorted(per_suite.items())}
    return {"suite_accuracy": acc, **aggregate(acc)}


def evaluate_item(suite: Suite, values: Mapping[tuple[str, int | None], float]) -> list[bool]:
    return [p.evaluate(values) for p in suite.predictions]


def chance_scores(
    suites: Sequence[Suite], *, draws: int = 100, seed: int = 0, protocol: str = "prediction0"
) -> dict[str, Any]:
    """Expected scores of a model whose surprisals carry no information: the chance row.

    Every (condition, region) surprisal of every item is an independent draw from Exponential(1)
    (non-negative, like a surprisal; an empty region has none, so 0), and the suite's predictions
    are evaluated on it exactly as for a model. ``draws`` Monte Carlo draws per item with a fixed
    ``seed``; returns per-suite accuracy, circuit means and the SG score like a model's result.
    Chance is not 0.5 everywhere: a prediction that compares one region with a sum of two, or
    that conjoins several comparisons, is met by chance more or less often than half the time.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}")
    rng = np.random.default_rng(seed)
    acc: dict[str, float] = {}
    for suite in suites:
        hits = 0
        for item in suite.items:
            conds = list(item.conditions.items())
            n_regions = len(conds[0][1])
            empty = np.array([[not c.strip() for c in contents] for _, contents in conds])
            for x in rng.exponential(size=(draws, len(conds), n_regions)):
                x[empty] = 0.0
                values: dict[tuple[str, int | None], float] = {}
                for (cond, _), row in zip(conds, x, strict=True):
                    values.update({(cond, r): float(v) for r, v in enumerate(row, start=1)})
                    values[(cond, None)] = float(row.sum())
                preds = evaluate_item(suite, values)
                hits += bool(preds[0] if protocol == "prediction0" else all(preds))
        acc[suite.name] = hits / (draws * len(suite.items)) if suite.items else math.nan
    return {
        "benchmark": "syntaxgym-chance",
        "distribution": "independent Exponential(1) surprisal per (condition, region)",
        "draws_per_item": draws,
        "seed": seed,
        "protocol": protocol,
        "suite_accuracy": acc,
        **aggregate(acc),
    }


def evaluate_syntaxgym(
    model: Any,
    tokenizer: Any,
    parser: Parser | None = None,
    data_dir: str | Path | None = None,
    suites: Sequence[str] | None = None,
    *,
    protocol: str = "prediction0",
    spec: ScoringSpec | None = None,
    max_items: int | None = None,
    progress: bool = True,
    scorer: CausalScorer | MaskedScorer | None = None,
    text: str = "raw",
    **scoring: Any,
) -> dict[str, Any]:
    """Run SyntaxGym suites on a model; returns per-item results, suite accuracy, SG score, circuits.

    ``text`` = ``raw`` scores the detokenized sentences (the form LMs are trained on; see
    :func:`sentence_and_spans`), ``as_written`` the suites' PTB-tokenized text.

    Decoders: BOS-conditioned surprisal (``likelihood`` as in :class:`CausalScorer`); encoders:
    PLL (``pll_metric``, word-l2r by default as docs/design.md §7 explains). How items are scored:
    ``spec`` (a ScoringSpec), or its fields as keywords, which override the spec.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}")
    scorer = scorer or make_scorer(model, tokenizer, parser, spec, **scoring)
    loaded = load_suites(data_dir, suites)
    it = loaded
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(loaded, desc="SyntaxGym suites")
    per_suite: dict[str, Any] = {}
    for suite in it:
        items = suite.items[:max_items] if max_items else suite.items
        keys, texts, spans = [], [], []
        for item in items:
            for cond, contents in item.conditions.items():
                s, sp = sentence_and_spans(contents, text)
                keys.append((item.number, cond))
                texts.append(s)
                spans.append(sp)
        scores = scorer.score(texts)
        values: dict[int, dict[tuple[str, int | None], float]] = {}
        for (num, cond), sc, sp in zip(keys, scores, spans, strict=True):
            regs = region_surprisals(sc, sp)
            v = values.setdefault(num, {})
            for r, x in enumerate(regs, start=1):
                v[(cond, r)] = x
            v[(cond, None)] = float(sum(regs))
        item_rows = []
        for item in items:
            preds = evaluate_item(suite, values[item.number])
            correct = preds[0] if protocol == "prediction0" else all(preds)
            item_rows.append({"item": item.number, "predictions": preds, "correct": bool(correct)})
        acc = float(np.mean([r["correct"] for r in item_rows])) if item_rows else math.nan
        per_suite[suite.name] = {
            "accuracy": acc,
            "n_items": len(item_rows),
            "circuit": circuit_of(suite.name),
            "in_paper_31": not bool(EXCLUDE_RE.match(suite.name)),
            "items": item_rows,
            "region_surprisal_bits": {
                str(n): {f"{c}:{r}": x for (c, r), x in v.items() if r is not None} for n, v in values.items()
            },
        }
    acc = {s: d["accuracy"] for s, d in per_suite.items()}
    agg = aggregate(acc)
    return {
        "benchmark": "syntaxgym",
        "scoring": describe_scoring(scorer),
        "likelihood": scorer.likelihood,
        "protocol": protocol,
        "text": text,
        "suite_accuracy": acc,
        **agg,
        "complete_31": agg["n_suites"] == 31,
        "suites": per_suite,
    }


def format_results(result: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows for the Markdown table: one per suite, then circuits and the SG score."""
    rows = []
    for s, d in result["suites"].items() if "suites" in result else []:
        rows.append(
            {"suite": s, "circuit": d["circuit"] or "-", "items": d["n_items"], "accuracy": d["accuracy"]}
        )
    for c, v in result["circuits"].items():
        rows.append({"suite": f"**{c}**", "circuit": "circuit mean", "items": "", "accuracy": v})
    rows.append(
        {
            "suite": "**SG score**",
            "circuit": f"{result['n_suites']} suites",
            "items": "",
            "accuracy": result["sg_score"],
        }
    )
    return rows, ["suite", "circuit", "items", "accuracy"]

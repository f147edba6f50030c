"""SyntaxGym prediction formulas: a small parser and evaluator (Hu et al., ACL 2020).

A suite states each prediction as a formula over region surprisals, e.g.
``(2;%mismatch%) > (2;%match%)``; ``parse_formula`` turns one into a tree of ``BinOp`` /
``RegionRef`` / ``Number`` that evaluates against one item's surprisals. A formula that does not
parse is a ``FormulaError`` whose message shows where. Pure syntax, no model: kept apart from the
suites (``structpe.eval.syntaxgym.suites``) and the protocol (``structpe.eval.syntaxgym.evaluate``).

The formula parser is a small recursive-descent parser written here on purpose: the reference
grammar lives in ``cpllab/syntaxgym-core`` (``syntaxgym/prediction.py``, pyparsing), which is marked
DEPRECATED upstream, pins 2021-era pandas/pyparsing/click and pulls in LM-Zoo/Docker; PyPI has only
an old sdist (``syntaxgym==0.6.0``). Twenty lines of parser are cheaper than that dependency.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from structpe.errors import StructpeError


class FormulaError(StructpeError):
    """A prediction formula that does not parse; the message shows where."""


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

    def slack(self, values: Mapping[tuple[str, int | None], float]) -> float:
        """How far the prediction is from changing its truth value, in bits: positive where it holds
        (``evaluate``), zero or negative where it fails. ``a > b``: a - b; ``a < b``: b - a; ``a = b``:
        the tolerance of ``=`` less |a - b|; ``&``: the smaller, ``|``: the larger of its sides. The
        particle estimator's budgets (``structpe.eval.scoring.smc_budget``) read it as a margin."""
        return _slack(self.tree, values)

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


def _slack(node: Any, values: Mapping[tuple[str, int | None], float]) -> float:
    if not isinstance(node, BinOp) or node.op in ("+", "-"):
        raise FormulaError(f"{node} is a value, not a prediction: it has no slack")
    if node.op in ("&", "|"):
        sides = (_slack(node.left, values), _slack(node.right, values))
        return min(sides) if node.op == "&" else max(sides)
    a, b = node.left.evaluate(values), node.right.evaluate(values)
    if node.op == ">":
        return a - b
    if node.op == "<":
        return b - a
    return 1e-3 + 1e-5 * abs(b) - abs(a - b)  # "=": numpy.isclose's tolerance, as evaluate uses


def parse_formula(text: str) -> Formula:
    """Parse one SyntaxGym prediction formula (grammar of syntaxgym-core ``prediction.py``)."""
    return Formula(text, _Parser(text).parse())

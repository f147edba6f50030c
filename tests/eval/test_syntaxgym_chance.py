"""The chance row: expected SyntaxGym accuracy when every region surprisal is a random draw."""

from __future__ import annotations

from pathlib import Path

import pytest

from structpe.eval.syntaxgym.evaluate import chance_scores
from structpe.eval.syntaxgym.formula import parse_formula
from structpe.eval.syntaxgym.suites import Item, Suite, load_suites


def _suite(name: str, formula: str, conditions: dict[str, list[str]], n_items: int = 20) -> Suite:
    regions = [f"r{i}" for i in range(1, len(next(iter(conditions.values()))) + 1)]
    return Suite(name, regions, [parse_formula(formula)], [Item(i, conditions) for i in range(n_items)])


def test_chance_on_toy_suites() -> None:
    two = _suite("number_toy", "(1;%a%) < (1;%b%)", {"a": ["x"], "b": ["y"]})
    three = _suite(
        "center_toy", "(1;%a%) < (1;%b%) & (1;%a%) < (1;%c%)", {"a": ["x"], "b": ["y"], "c": ["z"]}
    )
    empty = _suite("npi_toy", "(1;%a%) < (1;%b%)", {"a": [""], "b": ["y"]})  # 0 < draw: always met
    res = chance_scores([two, three, empty], draws=400, seed=3)
    acc = res["suite_accuracy"]
    assert acc["number_toy"] == pytest.approx(0.5, abs=0.03)
    assert acc["center_toy"] == pytest.approx(1 / 3, abs=0.03)  # a is the smallest of three
    assert acc["npi_toy"] == 1.0
    assert res["circuits"]["Agreement"] == acc["number_toy"]
    assert res["circuits"]["Center Embedding"] == acc["center_toy"]
    assert res["sg_score"] == pytest.approx((acc["number_toy"] + acc["center_toy"] + 1.0) / 3)
    assert chance_scores([two, three], draws=50, seed=3) == chance_scores([two, three], draws=50, seed=3)


def test_chance_on_the_stored_suites(shared_data: Path) -> None:
    res = chance_scores(load_suites(shared_data / "syntaxgym"), draws=20, seed=0)
    assert res["n_suites"] == 31
    assert 0.2 < res["sg_score"] < 0.6
    assert set(res["circuits"]) == {
        "Agreement", "Licensing", "Garden-Path Effects", "Gross Syntactic State", "Center Embedding",
        "Long-Distance Dependencies",
    }

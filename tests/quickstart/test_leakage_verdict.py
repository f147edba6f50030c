"""The quickstart's one-line leakage verdict says something true in every case of the audit."""

from __future__ import annotations

import pytest

from structpe.quickstart.run import leakage_verdict


def _scores(full: float, prefix: float) -> dict[str, float]:
    out = {}
    for cond, gain in (("full", full), ("prefix", prefix), ("baseline", 0.0)):
        out[f"leakage.{cond}.gain"] = gain
        out[f"leakage.{cond}.word_ppl"] = 100 * (1 - gain)
        out[f"leakage.{cond}.token_ppl"] = 50.0
    return out


@pytest.mark.parametrize(
    ("full", "prefix", "says"),
    [
        (0.10, -0.02, "none of the full-parse gain survives without the future words' tags"),
        (0.10, 0.0, "cannot credit any of it to syntax: all of it may be leakage"),
        (0.10, 0.04, "40% of the full-parse gain survives without the future words' tags, so at most 60%"),
        (0.10, 0.12, "the causal parses keep the whole gain: no sign of leakage"),
        (-0.01, 0.02, "does not beat the baseline"),
    ],
)
def test_the_leakage_line(full: float, prefix: float, says: str) -> None:
    verdict = leakage_verdict(_scores(full, prefix), 40)["verdict"]
    assert says in verdict
    assert "at most 100%" not in verdict

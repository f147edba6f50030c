"""The shared scorer layer: per-token log-probabilities in the conditional, joint and marginal
likelihoods (``scorer``), the masked PLL scorer, tag inputs and the nested beam (docs/likelihoods.md)."""

from structpe.exports import lazy_exports

_WHERE = {  # public name -> the module that defines it
    "ScoringSpec": "scorer",
    "make_scorer": "scorer",
    "spec_with": "scorer",
    "CausalScorer": "scorer",
    "describe_scoring": "scorer",
}
__all__ = list(_WHERE)
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)

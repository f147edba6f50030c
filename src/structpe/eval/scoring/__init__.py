"""The shared scorer layer: per-token log-probabilities in the conditional, joint and marginal
likelihoods (``scorer``), the masked PLL scorer, tag inputs and the nested beam (docs/likelihoods.md)."""

from structpe.exports import lazy_exports

# each module -> the public names it defines, imported when first asked for
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "scorer": ("ScoringSpec", "make_scorer", "spec_with", "CausalScorer", "describe_scoring"),
})

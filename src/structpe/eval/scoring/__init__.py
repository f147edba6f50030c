"""The shared scorer layer: per-token log-probabilities in the conditional, joint and marginal
likelihoods (``scorer``), the masked PLL scorer, tag inputs and the nested beam (docs/likelihoods.md)."""

"""Names of the modes the CLI offers, importable without torch (``structpe --help`` must stay fast).

The code that implements them checks at import that it implements exactly these names
(``CausalScorer.LIKELIHOODS`` in ``structpe.eval.scoring``, ``structpe.generation``), so the CLI's
choices cannot drift from the code.
"""

from __future__ import annotations

# the model families that are causal decoders (structpe.models.config.FAMILIES): the SiPE
# Transformer-XL and transformers' GPT-2 from scratch (the SiPE paper's "GPT-2 (tokens)" row)
CAUSAL_FAMILIES = ("txl", "gpt2")
# causal scoring: p(x | T) with tags from a parser, p(x, T), the k-best bound on p(x), or the
# particle estimate of p(x)
LIKELIHOODS = ("conditional", "joint", "marginal", "smc")
# particles N per system of `smc` by default: a cpu-mini cell's honest evaluation at N and 4N stays
# near 20 CPU-minutes (benchmarks/smc_cost.py, docs/likelihoods.md)
DEFAULT_PARTICLES = 8
# the proposal of `smc`: the model's own tag heads (`prior`), the locally optimal one that sums
# every allowed tag pair of a word against the tokens it conditions (`adapted`), or a mixture of the
# text's own parse and the prior for the sentence estimates (`parse`; docs/likelihoods.md)
PROPOSALS = ("prior", "adapted", "parse")
DEFAULT_PROPOSAL = "prior"
# the exact p(x) enumerates every tree of a sentence: 8,448 at 7 words, 54,912 at 8
EXACT_MAX_WORDS = 7
# masked LMs: pseudo-log-likelihood variants (Salazar et al. 2020; Kauf & Ivanova 2023)
PLL_METRICS = ("original", "within_word_l2r")
# ``structpe eval leakage``: the scorings of the leakage audit (structpe.eval.leakage); `causal`
# (word-prefix tags, the tags a prefix-parse model trains on) runs when asked for: it needs a parser
# that parses word lists
LEAKAGE_VARIANTS = ("full", "untagged", "no_eos", "prefix", "prefix_drop_last", "causal")
LEAKAGE_DEFAULT = ("full", "untagged", "no_eos", "prefix", "prefix_drop_last")
# token choice of ``structpe generate``
STRATEGIES = ("sample", "greedy", "beam")

"""LIS -- labeled incidence structures (the LIS paper; docs/design.md §5).

* ``structure``  -- (C, V, E, S, tau, I, sigma), builders (sequence, KG triples, trees, grids,
  hyperedges) and the batched per-endpoint tensor form.
* ``addresses``  -- rotary position/role/instance factors A(p, s, e) = R_pos^p R_s R_e, content-derived
  instance addresses, a non-commuting SO(k) family, journey operators P(j->i) = A(i)^-1 A(j).
* ``lisformer``  -- the causal character LISformer and its baselines (RoPE, ALiBi, random addresses).
* ``token_structure`` -- each token's position, instance and address, and the two-term attention plan.
* ``flex``       -- block-sparse FlexAttention for the two-term / ALiBi scores (SDPA fallback).
* ``shakespeare``, ``kg``, ``kg_roles`` -- the paper's diagnostics (App. F.1, F.4, F.3), with their
  data (``kg_data``, ``kg_encode``, ``kg_roles_data``) and report (``kg_report``);
* ``training``   -- the one training loop of every diagnostic; ``commands`` -- ``structpe lis ...``.
"""

from structpe.exports import lazy_exports

# each module -> the public names it defines, imported when first asked for
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "structure": ("IncidenceStructure", "from_sequence", "from_kg_triples", "from_tree"),
    "lisformer": ("LISformer", "LISformerConfig"),
})

"""LIS -- labeled incidence structures (the LIS paper; DESIGN §5).

* ``structure``  -- (C, V, E, S, tau, I, sigma), builders (sequence, KG triples, trees, grids,
  hyperedges) and the batched per-endpoint tensor form.
* ``addresses``  -- rotary position/role/instance factors A(p, s, e) = R_pos^p R_s R_e, content-derived
  instance addresses, a non-commuting SO(k) family, journey operators P(j->i) = A(i)^-1 A(j).
* ``lisformer``  -- the causal character LISformer and its baselines (RoPE, ALiBi, random addresses).
* ``shakespeare``, ``kg`` -- the paper's diagnostics; ``commands`` -- ``structpe lis ...``.
"""

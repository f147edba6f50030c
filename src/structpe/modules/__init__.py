"""Building blocks shared by every model family and by LIS.

* ``rotary``  -- rotary operators from arbitrary per-token angles (RoPE, SiPE phase offsets,
  LIS structural addresses all reduce to "rotate q and k by these angles").
* ``prior``   -- the SiPE hexatag prior m_p (E_T[tau_p] + E_N[nu_p]), its tag-pair table, the
  auxiliary tag heads and their targets.
"""

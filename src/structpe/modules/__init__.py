"""Building blocks shared by every model family and by LIS.

* ``rotary``  -- rotary operators from arbitrary per-token angles (RoPE, SiPE phase offsets,
  LIS structural addresses all reduce to "rotate q and k by these angles").
* ``prior``   -- the SiPE hexatag prior m_p (E_T[tau_p] + E_N[nu_p]), its tag-pair table, the
  auxiliary tag heads and their targets.
* ``prior_projection`` -- W_E^(l): the prior projected into attention heads, and the tag scores.
* ``input_prior`` -- input-side injection and its fusion ablations.
* ``init_rules`` -- init rules carried by leaf modules, applied by whichever model owns them.
* ``syntax_losses`` -- the parser-free rivals' training losses (Tree-Planted Transformers, TreeReg).
* ``tree_address`` -- dependency-tree addresses in the LIS form, read causally from hexatags.
* ``token_ids`` -- the token-id check every model's ``forward`` runs at entry.
"""

from structpe.exports import lazy_exports

# each module -> the public names it defines, imported when first asked for
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "rotary": ("apply_rotary", "rope_angles"), "prior": ("HexatagPrior", "TagHeads", "TagIdError"),
})

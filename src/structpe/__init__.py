"""structpe: structure-informed positional encodings for Transformers.

Two lines of work share this package (see docs/, docs/design.md first):

* SiPE  -- dependency parses linearised as hexatags feed a prior into the input or the positional
  pathway of RoBERTa-, DeBERTa-v3-, ModernBERT- and Transformer-XL-style models. The prior tables
  are 7d parameters, the whole cost only of input injection; the positional pathway (PP-SiPE) adds
  a d x d W_E per layer (``structpe pretrain --list`` prints each recipe's extra count).
* LIS   -- labeled incidence structures: content/role/instance addresses applied as rotary
  operators inside attention (``structpe.lis``, its own floor beside the SiPE stack).

The packages form floors, each importing only the floors below it (checked by ``lint-imports``;
docs/design.md has the plan): ``data``, ``errors``, ``io``, ``hardware`` -> ``syntax`` ->
``modules`` -> ``parser`` | ``models`` -> ``adapters`` -> ``train`` -> ``eval`` -> ``generation``
-> ``study`` -> ``quickstart``; ``cli`` registers each area's commands.
"""

from structpe.hf_auto import install as _install_auto_classes  # noqa: E402  (cheap: imports no torch)
from structpe.version import __version__  # noqa: F401  (structpe.__version__)

# transformers' Auto classes learn structpe's config and models once transformers loads them
_install_auto_classes()

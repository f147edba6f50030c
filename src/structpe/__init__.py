"""structpe: structure-informed positional encodings for Transformers.

Two lines of work share this package (see docs/, docs/design.md first):

* SiPE  -- dependency parses linearised as hexatags feed a 7d-parameter prior into the positional
  pathway of RoBERTa-, DeBERTa-v3-, ModernBERT- and Transformer-XL-style models
  (``structpe.syntax``, ``structpe.models``, ``structpe.train``, ``structpe.eval``).
* LIS   -- labeled incidence structures: content/role/instance addresses applied as rotary
  operators inside attention (``structpe.lis``).

The rotary and prior building blocks both lines rely on live in ``structpe.modules``.
"""

__version__ = "0.1.0"

from structpe.hf_auto import install as _install_auto_classes  # noqa: E402  (cheap: imports no torch)

# transformers' Auto classes learn structpe's config and models once transformers loads them
_install_auto_classes()


def __getattr__(name: str):
    """``structpe.generate`` (joint text + tree generation), imported on first use (torch is heavy)."""
    if name == "generate":
        from structpe.generation import generate

        return generate
    raise AttributeError(f"module 'structpe' has no attribute {name!r}")

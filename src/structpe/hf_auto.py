"""structpe's models in transformers' Auto classes, registered without slowing ``import structpe``.

``import structpe`` calls :func:`install`. Registering needs transformers and torch (seconds), so it
waits until transformers' own Auto modules are imported: ``AutoConfig`` learns ``structpe-sipe``
when ``transformers.models.auto.configuration_auto`` has loaded (so ``AutoTokenizer`` reads a
structpe ``config.json`` without the "model of type ``structpe-sipe`` to instantiate a model of
type ..." warning), and ``AutoModelForCausalLM`` / ``AutoModelForMaskedLM`` /
``AutoModelForSequenceClassification`` learn the model classes when
``transformers.models.auto.modeling_auto`` has loaded. Whoever uses an Auto class has imported
that module, so the registration is there before the first ``from_pretrained``; a program that
never touches transformers never pays for it.

Every family shares one config class (``SiPEConfig``), so the masked-LM Auto class gets one class
per encoder family and the classification one a class per family; transformers picks among them
by the checkpoint's ``architectures`` (what ``save_pretrained`` writes). The hook is an
import-system finder (the standard post-import-hook pattern, as in ``wrapt``; duck-typed, since
``importlib.abc`` alone costs 60 ms): Python has no other way to run code after someone else's
module has loaded.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

CONFIG_MODULE = "transformers.models.auto.configuration_auto"
MODELING_MODULE = "transformers.models.auto.modeling_auto"

# Auto class -> the (family, head) pairs of ``models.registry.FAMILY_CLASSES`` it learns; the first
# is the default when a config names no architecture
AUTO_MODELS: dict[str, tuple[tuple[str, str], ...]] = {
    "AutoModelForCausalLM": (("txl", "lm"),),
    "AutoModelForMaskedLM": (("roberta", "lm"), ("deberta", "lm"), ("modernbert", "lm")),
    "AutoModelForSequenceClassification": (
        ("roberta", "classification"),
        ("deberta", "classification"),
        ("modernbert", "classification"),
        ("txl", "classification"),
    ),
}

_done: set[str] = set()


def register_config() -> None:
    """``AutoConfig`` learns ``structpe-sipe`` (idempotent)."""
    if "config" in _done:
        return
    from transformers import AutoConfig

    from structpe.models.config import SiPEConfig

    AutoConfig.register(SiPEConfig.model_type, SiPEConfig, exist_ok=True)
    _done.add("config")


def register_models() -> None:
    """The Auto model classes learn structpe's model classes (idempotent; registers the config too)."""
    if "models" in _done:
        return
    register_config()
    import transformers

    from structpe.models.config import SiPEConfig
    from structpe.models.registry import model_class

    for auto_name, targets in AUTO_MODELS.items():
        classes = tuple(model_class(family, head) for family, head in targets)
        auto = getattr(transformers, auto_name)
        auto.register(SiPEConfig, classes[0] if len(classes) == 1 else classes, exist_ok=True)
    _done.add("models")


_ACTIONS: dict[str, Callable[[], None]] = {CONFIG_MODULE: register_config, MODELING_MODULE: register_models}


class _RunAfter:
    """A loader that runs ``action`` once the wrapped loader has executed the module."""

    def __init__(self, loader: Any, action: Callable[[], None]) -> None:
        self._loader = loader
        self._action = action

    def create_module(self, spec: Any) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        self._action()

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename ... of the real loader
        return getattr(self._loader, name)


class _AfterImport:
    """Finds the transformers Auto modules through the other finders and wraps their loader."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        action = _ACTIONS.get(fullname)
        if action is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _RunAfter(spec.loader, action)
                return spec
        return None


def install() -> None:
    """Register now what transformers has already loaded; hook the rest to run when it loads."""
    if MODELING_MODULE in sys.modules:
        register_models()
        return
    if CONFIG_MODULE in sys.modules:
        register_config()
    if not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport())

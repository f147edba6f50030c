"""Each package exports its public names from ``__init__`` (``from structpe.adapters import add_sipe``),
and importing a package stays cheap: the defining module loads when a name is first asked for."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

LAZY = ["adapters", "data", "eval", "eval.glue", "eval.scoring", "eval.syntaxgym", "generation", "lis",
        "modules", "parser", "quickstart", "train"]


@pytest.mark.parametrize("package", LAZY)
def test_every_public_name_is_its_module_s_object(package: str) -> None:
    pkg = importlib.import_module(f"structpe.{package}")
    assert pkg.__all__ and set(pkg.__all__) <= set(dir(pkg))
    for name in pkg.__all__:
        value = getattr(pkg, name)
        assert value.__module__.startswith(f"structpe.{package}."), name  # defined in the package
        assert value is getattr(sys.modules[value.__module__], name), name
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        pkg.no_such_name  # noqa: B018


def test_importing_the_packages_imports_no_torch() -> None:
    code = "; ".join(f"import structpe.{p}" for p in LAZY) + "; import sys; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_add_sipe_from_the_package() -> None:
    from structpe.adapters import add_sipe
    from structpe.adapters.sipe import add_sipe as defined

    assert add_sipe is defined

"""The names users import, importable from ``coordkit`` itself (#32: core grouped by concept),
and the module paths from before the grouping still importable, as the same modules, with a
warning naming the new path."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

import coordkit
from coordkit import _moved


@pytest.mark.parametrize("name", sorted(coordkit.__all__))
def test_each_public_name_is_the_defining_modules_own(name: str) -> None:
    value = getattr(coordkit, name)
    defining = coordkit._LAZY.get(name)
    if defining is not None:
        assert value is getattr(importlib.import_module(defining), name)
    assert name in dir(coordkit)


def test_all_names_exactly_the_public_names() -> None:
    assert set(coordkit.__all__) == {*coordkit._LAZY, "NAME", "__version__"} | {
        "get_plugin_manager",
        "hookimpl",
        "open_store",
    }


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        coordkit.Nope  # noqa: B018


def test_importing_coordkit_loads_no_strategy_model_or_store_module() -> None:
    """``import coordkit`` (every CLI start) stays cheap: the public names load when used."""
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, coordkit; print(sorted(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for package in ("coordkit.strategies", "coordkit.kafka", "coordkit.store", "coordkit.engine"):
        assert f"'{package}" not in loaded, package


@pytest.mark.parametrize("old", sorted(_moved.MOVED))
def test_an_old_module_path_is_the_new_module_with_a_warning(old: str) -> None:
    new = _moved.MOVED[old]
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {new}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert module.__spec__ is not None
    assert module.__spec__.name == new
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        importlib.import_module(new)


def test_a_name_that_never_existed_is_still_not_found() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("coordkit.nonexistent")

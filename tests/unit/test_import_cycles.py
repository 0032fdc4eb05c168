"""The lint check that fails on an import cycle (tools/import_cycles.py): what it counts as one."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "import_cycles.py"


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_cycles", TOOL)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["import_cycles"] = module
    spec.loader.exec_module(module)
    return module


def test_a_chain_without_a_way_back_is_no_cycle(tool: ModuleType) -> None:
    assert tool.cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_two_modules_importing_each_other_are_a_cycle(tool: ModuleType) -> None:
    assert tool.cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]


def test_a_long_cycle_is_reported_once_with_every_module_in_it(tool: ModuleType) -> None:
    edges = {
        "a": {"b"},
        "b": {"c"},
        "c": {"d"},
        "d": {"a", "e"},
        "e": set(),
        "x": {"y"},
        "y": {"x"},
    }
    assert tool.cycles(edges) == [["a", "b", "c", "d"], ["x", "y"]]


def test_imports_of_modules_outside_the_graph_are_left_out(tool: ModuleType) -> None:
    assert tool.cycles({"a": {"os", "b"}, "b": {"attrs"}}) == []


def test_a_deep_chain_does_not_overflow_the_stack(tool: ModuleType) -> None:
    depth = 5000
    edges = {f"m{i}": {f"m{i + 1}"} for i in range(depth)}
    edges[f"m{depth}"] = {"m0"}
    (found,) = tool.cycles(edges)
    assert len(found) == depth + 1

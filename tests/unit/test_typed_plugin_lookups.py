"""Typed plugin lookups (#32 item 6): every registration hook's callback is typed by what it
registers, and every lookup of the plugin manager returns the kind it looks up, never ``Any``
(mypy, strict, holds the call sites to those types)."""

from __future__ import annotations

import inspect

import pytest

from coordkit import hookspecs
from coordkit.plugins import PluginManager

REGISTRATION_HOOKS = sorted(
    name for name in dir(hookspecs) if name.startswith("coordkit_register_")
)
LOOKUPS = {
    "assignor": "Assignor",
    "server_assignor": "ServerAssignor",
    "placement": "ReplicaPlacement",
    "partitioner": "PartitionerFactory",
    "offset_store": "OffsetStorageFactory",
    "workload": "Workload",
    "metric": "Metric",
}


@pytest.mark.parametrize("hook", REGISTRATION_HOOKS)
def test_a_registration_callback_is_typed_by_what_it_registers(hook: str) -> None:
    annotation = inspect.signature(getattr(hookspecs, hook)).parameters["register"].annotation
    assert annotation.startswith("Callable[["), annotation
    assert "Any" not in annotation, f"{hook}: register is typed {annotation}"


@pytest.mark.parametrize(("lookup", "kind"), sorted(LOOKUPS.items()))
def test_a_lookup_returns_its_kind(lookup: str, kind: str) -> None:
    assert inspect.signature(getattr(PluginManager, lookup)).return_annotation == kind

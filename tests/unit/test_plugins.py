"""The plugin manager: load order, environment switches, registration errors, lookups."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import pytest

from coordkit import hookimpl
from coordkit.errors import DuplicateNameError, PluginError, UnknownNameError
from coordkit.plugins import BUILTIN_PLUGINS, ENV_DISABLE, ENV_NO_AUTOLOAD, PluginManager


class FakeAssignor:
    protocols: ClassVar[tuple[()]] = ()

    def __init__(self, name: str):
        self.name = name

    def assign(self, group: Any) -> Any:  # pragma: no cover - never called here
        raise AssertionError


class ExtraPlugin:
    """A plugin object registering one assignor and one store scheme."""

    def __init__(self, assignor: str = "extra", scheme: str = "extra"):
        self.assignor_name = assignor
        self.scheme = scheme

    @hookimpl
    def coordkit_register_assignors(self, register: Callable[[Any], None]) -> None:
        register(FakeAssignor(self.assignor_name))

    @hookimpl
    def coordkit_register_stores(self, register: Callable[[str, Any], None]) -> None:
        register(self.scheme, lambda url, **options: ("opened", url.scheme, options))


def test_builtins_are_registered_without_entry_points() -> None:
    manager = PluginManager(autoload=False)
    names = {info.name for info in manager.plugins()}
    assert set(BUILTIN_PLUGINS) <= names
    assert "memory" in manager.stores


def test_autoload_switch_comes_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    loaded: list[bool] = []
    monkeypatch.setattr(PluginManager, "_load_entry_points", lambda self: loaded.append(True))
    PluginManager(environ={ENV_NO_AUTOLOAD: "1"})
    assert loaded == []
    PluginManager(environ={})
    assert loaded == [True]


def test_disabled_plugins_are_blocked(monkeypatch: pytest.MonkeyPatch) -> None:
    manager = PluginManager(autoload=False, environ={ENV_DISABLE: "memory, assignors"})
    assert manager.disabled == ["memory", "assignors"]
    assert "memory" not in manager.stores
    with pytest.raises(UnknownNameError) as info:
        manager.store_for("memory://x")
    assert "memory" in str(info.value)
    with pytest.raises(PluginError, match="blocked"):
        manager.register(ExtraPlugin(), name="memory")


def test_runtime_plugin_registers_components() -> None:
    manager = PluginManager(autoload=False)
    manager.register(ExtraPlugin(), name="extra-plugin")
    assert manager.assignor("extra").name == "extra"
    assert manager.store_for("extra://host:1/x", opt=1) == ("opened", "extra", {"opt": 1})
    info = next(p for p in manager.plugins() if p.name == "extra-plugin")
    assert not info.builtin
    assert info.registered == {"assignor": ("extra",), "store scheme": ("extra",)}
    manager.unregister("extra-plugin")
    assert "extra" not in manager.assignors


def test_duplicate_names_are_an_error_naming_both_plugins() -> None:
    manager = PluginManager(autoload=False)
    manager.register(ExtraPlugin("same", "s1"), name="first")
    manager.register(ExtraPlugin("same", "s2"), name="second")
    with pytest.raises(DuplicateNameError) as info:
        manager.assignor("same")
    message = str(info.value)
    assert "'first'" in message
    assert "'second'" in message
    assert "assignor 'same'" in message


def test_unknown_names_list_what_is_available() -> None:
    manager = PluginManager(autoload=False)
    manager.register(ExtraPlugin("alpha", "a"), name="a")
    with pytest.raises(UnknownNameError) as info:
        manager.store_for("nosuch://x")
    assert "unknown store scheme 'nosuch'" in str(info.value)
    assert "memory" in str(info.value)
    with pytest.raises(UnknownNameError, match="alpha"):
        manager.assignor("beta")
    with pytest.raises(UnknownNameError, match="unknown controller election strategy 'x'"):
        manager.election("controller", "x")


def test_failing_registration_names_the_plugin() -> None:
    class Broken:
        @hookimpl
        def coordkit_register_metrics(self, register: Callable[[Any], None]) -> None:
            raise RuntimeError("boom")

    manager = PluginManager(autoload=False)
    manager.register(Broken(), name="broken")
    with pytest.raises(
        PluginError, match="plugin 'broken' failed in coordkit_register_metrics: boom"
    ):
        manager.metric("anything")


def test_registration_without_name_is_rejected() -> None:
    class Nameless:
        @hookimpl
        def coordkit_register_workloads(self, register: Callable[[Any], None]) -> None:
            register(object())

    manager = PluginManager(autoload=False)
    manager.register(Nameless(), name="nameless")
    with pytest.raises(PluginError, match="'nameless' registered a workload without a name"):
        manager.workloads.names()


def test_elections_are_keyed_by_kind_and_name() -> None:
    class Strategy:
        def __init__(self, kind: str, name: str):
            self.kind, self.name = kind, name

    class Elections:
        @hookimpl
        def coordkit_register_elections(self, register: Callable[[Any], None]) -> None:
            register(Strategy("controller", "shared-name"))
            register(Strategy("group-leader", "shared-name"))

    manager = PluginManager(autoload=False)
    manager.register(Elections(), name="elections-test")
    assert manager.election("controller", "shared-name").kind == "controller"
    assert manager.election("group-leader", "shared-name").kind == "group-leader"


def test_observer_hooks_are_forwarded() -> None:
    seen: list[tuple[Any, ...]] = []

    class Observer:
        @hookimpl
        def coordkit_controller_changed(self, broker_id: int | None, epoch: int) -> None:
            seen.append(("controller", broker_id, epoch))

        @hookimpl
        def coordkit_leader_elected(
            self,
            topic: str,
            partition: int,
            leader: int,
            leader_epoch: int,
            isr: list[int],
            reason: str,
        ) -> None:
            seen.append(("leader", topic, partition, leader, leader_epoch, tuple(isr), reason))

    manager = PluginManager(autoload=False)
    manager.register(Observer(), name="observer")
    manager.notify_controller_changed(2, 5)
    manager.notify_leader_elected("t", 0, 2, 1, [2, 3], "offline")
    assert seen == [("controller", 2, 5), ("leader", "t", 0, 2, 1, (2, 3), "offline")]


def test_entry_point_load_failure_names_plugin_and_distribution(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.metadata

    class FakeDist:
        name = "broken-dist"
        version = "9.9"

    class FakeEntryPoint:
        name = "broken"
        value = "no_such_module_xyz"
        dist = FakeDist()

        def load(self) -> Any:
            raise ImportError("No module named 'no_such_module_xyz'")

    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [FakeEntryPoint()])
    with pytest.raises(PluginError) as info:
        PluginManager(environ={})
    assert "broken" in str(info.value)
    assert "broken-dist 9.9" in str(info.value)
    # Blocking the broken plugin lets everything else load.
    manager = PluginManager(environ={ENV_DISABLE: "broken"})
    assert "memory" in manager.stores

"""The plugin manager: finds plugins, collects what they register, looks components up by name.

Load order: add the hook specs → block the names in ``COORDKIT_DISABLE_PLUGINS`` (comma separated)
→ load the ``coordkit`` entry points (unless ``COORDKIT_DISABLE_PLUGIN_AUTOLOAD`` is set) →
register any built-in plugin not loaded yet → ``check_pending()``. Built-ins normally arrive
through the project's own entry points; the last step covers running from a source tree.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

import attrs
import pluggy

from coordkit import hookspecs
from coordkit.errors import DuplicateNameError, PluginError, UnknownNameError, UnsupportedError
from coordkit.hookspecs import NAME

if TYPE_CHECKING:
    import click

    from coordkit.hookspecs import ElectionStrategy, StoreFactory
    from coordkit.kafka.coordinators import GroupCoordinatorSelection
    from coordkit.lab import Metric, Workload
    from coordkit.store import MetadataStore, SessionState
    from coordkit.strategies.assignment import Assignor
    from coordkit.strategies.authorization import AuthorizerFactory
    from coordkit.strategies.elections import (
        ControllerElection,
        GroupLeaderSelection,
        PartitionLeaderElection,
    )
    from coordkit.strategies.offsets import OffsetStorageFactory
    from coordkit.strategies.partitioning import PartitionerFactory
    from coordkit.strategies.placement import ReplicaPlacement
    from coordkit.strategies.share_assignment import ShareAssignor
    from coordkit.strategies.target_assignment import ServerAssignor

ENV_DISABLE = "COORDKIT_DISABLE_PLUGINS"
ENV_NO_AUTOLOAD = "COORDKIT_DISABLE_PLUGIN_AUTOLOAD"

#: Built-in plugins: entry point name → module. Later components add themselves here and to the
#: ``[project.entry-points.coordkit]`` table of pyproject.toml.
BUILTIN_PLUGINS: dict[str, str] = {
    "memory": "coordkit_memory",
    "zookeeper": "coordkit_zookeeper",
    "redis": "coordkit_redis",
    "assignors": "coordkit_assignors",
    "elections": "coordkit_elections",
    "placements": "coordkit_placements",
    "partitioners": "coordkit_partitioners",
    "offsets": "coordkit_offsets",
    "authorizers": "coordkit_authorizers",
    "share_assignors": "coordkit_share_assignors",
    "lab": "coordkit_lab",
}

T = TypeVar("T")


@attrs.frozen
class Registration(Generic[T]):
    """One registered component and the plugin that registered it."""

    kind: str
    name: str
    value: T
    plugin: str


@attrs.frozen
class PluginInfo:
    """What ``coordkit plugins`` shows for one plugin."""

    name: str
    module: str
    distribution: str | None
    version: str | None
    builtin: bool
    registered: Mapping[str, tuple[str, ...]]


class Registry(Generic[T]):
    """The components of one kind, collected lazily from one registration hook."""

    def __init__(self, manager: PluginManager, kind: str, hook_name: str, key: Callable[..., str]):
        self.kind = kind
        self._manager = manager
        self._hook_name = hook_name
        self._key = key
        self._items: dict[str, Registration[T]] | None = None
        self._lock = threading.Lock()

    def _collect(self) -> dict[str, Registration[T]]:
        items: dict[str, Registration[T]] = {}
        caller = getattr(self._manager.pm.hook, self._hook_name)
        # Call each implementation ourselves so every registration is attributed to its plugin.
        for impl in reversed(caller.get_hookimpls()):
            plugin_name = impl.plugin_name

            def register(*args: Any, _plugin: str = plugin_name) -> None:
                name = self._key(*args)
                value = args[-1]
                if not isinstance(name, str) or not name:
                    raise PluginError(
                        f"plugin {_plugin!r} registered a {self.kind} without a name: {value!r}"
                    )
                previous = items.get(name)
                if previous is not None:
                    raise DuplicateNameError(
                        f"{self.kind} {name!r} is registered by plugin {previous.plugin!r} "
                        f"({self._manager.module_of(previous.plugin)}) and by plugin {_plugin!r} "
                        f"({self._manager.module_of(_plugin)}); disable one with "
                        f"{ENV_DISABLE}={_plugin}"
                    )
                items[name] = Registration(self.kind, name, value, _plugin)

            try:
                impl.function(register=register)
            except (PluginError, UnknownNameError):
                raise
            except Exception as exc:
                raise PluginError(
                    f"plugin {plugin_name!r} failed in {self._hook_name}: {exc}"
                ) from exc
        return items

    @property
    def items(self) -> dict[str, Registration[T]]:
        if self._items is None:
            with self._lock:
                if self._items is None:
                    self._items = self._collect()
        return self._items

    def get(self, name: str) -> T:
        try:
            return self.items[name].value
        except KeyError:
            raise UnknownNameError(self.kind, name, list(self.items)) from None

    def names(self) -> list[str]:
        return sorted(self.items)

    def __contains__(self, name: object) -> bool:
        return name in self.items

    def __iter__(self) -> Iterator[Registration[T]]:
        return iter(sorted(self.items.values(), key=lambda r: r.name))

    def invalidate(self) -> None:
        self._items = None


def _name_of(component: Any) -> str:
    name = getattr(component, "name", None)
    return name if isinstance(name, str) else ""


def _election_key(strategy: Any) -> str:
    kind = getattr(strategy, "kind", None)
    kind = getattr(kind, "value", kind)
    return f"{kind}/{_name_of(strategy)}"


class PluginManager:
    """Wraps :class:`pluggy.PluginManager` with typed lookups and event forwarding.

    :param autoload: load third-party entry points (default: unless ``COORDKIT_DISABLE_PLUGIN_AUTOLOAD``).
    :param disabled: plugin names to block (default: ``COORDKIT_DISABLE_PLUGINS``).
    """

    def __init__(
        self,
        *,
        autoload: bool | None = None,
        disabled: list[str] | None = None,
        environ: Mapping[str, str] | None = None,
    ):
        env = os.environ if environ is None else environ
        self.pm = pluggy.PluginManager(NAME)
        self.pm.add_hookspecs(hookspecs)
        self._dists: dict[str, tuple[str, str]] = {}
        if disabled is None:
            disabled = [n.strip() for n in env.get(ENV_DISABLE, "").split(",") if n.strip()]
        self.disabled = list(disabled)
        for name in self.disabled:
            self.pm.set_blocked(name)
        if autoload is None:
            autoload = not env.get(ENV_NO_AUTOLOAD)
        if autoload:
            self._load_entry_points()
        for name, module in BUILTIN_PLUGINS.items():
            if not self.pm.has_plugin(name) and not self.pm.is_blocked(name):
                self.pm.register(importlib.import_module(module), name=name)
        self.pm.check_pending()
        self.stores: Registry[StoreFactory] = Registry(
            self, "store scheme", "coordkit_register_stores", lambda scheme, _f: scheme
        )
        self.assignors: Registry[Assignor] = Registry(
            self, "assignor", "coordkit_register_assignors", _name_of
        )
        self.server_assignors: Registry[ServerAssignor] = Registry(
            self, "server assignor", "coordkit_register_server_assignors", _name_of
        )
        self.share_assignors: Registry[ShareAssignor] = Registry(
            self, "share assignor", "coordkit_register_share_assignors", _name_of
        )
        self.elections: Registry[ElectionStrategy] = Registry(
            self, "election strategy", "coordkit_register_elections", _election_key
        )
        self.partitioners: Registry[PartitionerFactory] = Registry(
            self, "partitioner", "coordkit_register_partitioners", _name_of
        )
        self.placements: Registry[ReplicaPlacement] = Registry(
            self, "placement strategy", "coordkit_register_placements", _name_of
        )
        self.offset_stores: Registry[OffsetStorageFactory] = Registry(
            self, "offset storage", "coordkit_register_offset_stores", _name_of
        )
        self.authorizers: Registry[AuthorizerFactory] = Registry(
            self, "authorizer", "coordkit_register_authorizers", _name_of
        )
        self.workloads: Registry[Workload] = Registry(
            self, "workload", "coordkit_register_workloads", _name_of
        )
        self.metrics: Registry[Metric] = Registry(
            self, "metric", "coordkit_register_metrics", _name_of
        )
        self.commands: Registry[click.Command] = Registry(
            self, "command", "coordkit_register_commands", _name_of
        )

    # -- loading
    def _load_entry_points(self) -> None:
        seen: dict[str, str] = {}
        for ep in importlib.metadata.entry_points(group=NAME):
            dist = ep.dist.name if ep.dist is not None else "?"
            version = ep.dist.version if ep.dist is not None else "?"
            if ep.name in seen and seen[ep.name] != ep.value:
                raise DuplicateNameError(
                    f"plugin name {ep.name!r} is claimed by entry points {seen[ep.name]!r} and "
                    f"{ep.value!r} (distribution {dist})"
                )
            seen[ep.name] = ep.value
            if self.pm.is_blocked(ep.name) or self.pm.has_plugin(ep.name):
                continue
            try:
                plugin = ep.load()
            except Exception as exc:
                raise PluginError(
                    f"plugin {ep.name!r} ({ep.value}, distribution {dist} {version}) failed to load: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            self.pm.register(plugin, name=ep.name)
            self._dists[ep.name] = (dist, version)

    def register(self, plugin: object, name: str | None = None) -> str:
        """Register a plugin object at run time (tests, embedding applications)."""
        registered = self.pm.register(plugin, name=name)
        if registered is None:
            raise PluginError(f"plugin {name!r} is blocked ({ENV_DISABLE})")
        for registry in self._registries():
            registry.invalidate()
        return registered

    def unregister(self, name: str) -> None:
        self.pm.unregister(name=name)
        for registry in self._registries():
            registry.invalidate()

    def _registries(self) -> list[Registry[Any]]:
        return [
            self.stores,
            self.assignors,
            self.server_assignors,
            self.share_assignors,
            self.elections,
            self.partitioners,
            self.placements,
            self.offset_stores,
            self.authorizers,
            self.workloads,
            self.metrics,
            self.commands,
        ]

    def module_of(self, plugin_name: str) -> str:
        plugin = self.pm.get_plugin(plugin_name)
        return getattr(plugin, "__name__", type(plugin).__name__)

    def plugins(self) -> list[PluginInfo]:
        """Every registered plugin with its distribution and what it registered."""
        registered: dict[str, dict[str, list[str]]] = {}
        for registry in self._registries():
            for reg in registry:
                registered.setdefault(reg.plugin, {}).setdefault(registry.kind, []).append(reg.name)
        out = []
        for name, plugin in self.pm.list_name_plugin():
            if plugin is None:
                continue
            dist, version = self._dists.get(name, (None, None))
            if dist is None and name in BUILTIN_PLUGINS:
                from coordkit import __version__

                dist, version = "coordkit", __version__
            out.append(
                PluginInfo(
                    name=name,
                    module=getattr(plugin, "__name__", type(plugin).__name__),
                    distribution=dist,
                    version=version,
                    builtin=name in BUILTIN_PLUGINS,
                    registered={k: tuple(sorted(v)) for k, v in registered.get(name, {}).items()},
                )
            )
        return sorted(out, key=lambda p: (not p.builtin, p.name))

    # -- lookups
    def store_for(self, url: str, **options: Any) -> MetadataStore:
        """Open a store client for ``url`` (``memory://``, ``zookeeper://``, ``redis://`` ...).

        The option ``read_only=True`` opens it without writing anything: no chroot or root is
        created (a missing one is a :class:`~coordkit.errors.NoNodeError`) and every write method
        of the store raises :class:`~coordkit.store.ReadOnlyError`. It is passed to the backend's
        factory only when true, so factories that predate it keep working for ordinary opens; one
        that does not take it fails with :class:`~coordkit.errors.UnsupportedError`.
        """
        from coordkit.store.urls import StoreURL

        read_only = options.pop("read_only", False)
        if not isinstance(read_only, bool):
            raise TypeError(f"read_only must be True or False, got {read_only!r}")
        parsed = StoreURL.parse(url)
        factory = self.stores.get(parsed.scheme)
        if not read_only:
            return factory(parsed, **options)
        plugin = self.stores.items[parsed.scheme].plugin
        unsupported = (
            f"store scheme {parsed.scheme!r} (plugin {plugin!r}) cannot open a store read-only"
        )
        try:
            store = factory(parsed, read_only=True, **options)
        except TypeError as exc:
            if "read_only" not in str(exc):
                raise
            raise UnsupportedError(f"{unsupported}: its factory does not take read_only") from None
        if getattr(store, "read_only", False) is not True:
            # It took the option but did not honour it: refuse rather than risk a write.
            close = getattr(store, "close", None)
            if callable(close):
                close()
            raise UnsupportedError(f"{unsupported}: its store does not report read_only")
        return store

    def assignor(self, name: str) -> Assignor:
        """The assignor registered as ``name``."""
        return self.assignors.get(name)

    def server_assignor(self, name: str) -> ServerAssignor:
        """The server-side assignor registered as ``name`` (a ``group.remote.assignor`` value)."""
        return self.server_assignors.get(name)

    def server_assignor_names(self) -> list[str]:
        """Every registered server-side assignor's name, sorted."""
        return self.server_assignors.names()

    def share_assignor(self, name: str) -> ShareAssignor:
        """The share-partition assignor registered as ``name`` (a ``group.share.assignors``
        value)."""
        return self.share_assignors.get(name)

    def election(self, kind: str, name: str) -> ElectionStrategy:
        """The election strategy of ``kind`` (an :class:`~coordkit.strategies.elections.ElectionKind` value)
        registered as ``name``; the typed lookups below say which contract it keeps."""
        try:
            return self.elections.get(f"{kind}/{name}")
        except UnknownNameError:
            names = [
                r.name.split("/", 1)[1] for r in self.elections if r.name.startswith(f"{kind}/")
            ]
            raise UnknownNameError(f"{kind} election strategy", name, names) from None

    def controller_election(self, name: str) -> ControllerElection:
        """The controller election strategy ``name``."""
        return cast("ControllerElection", self.election("controller", name))

    def partition_election(self, name: str) -> PartitionLeaderElection:
        """The partition leader election strategy ``name``."""
        return cast("PartitionLeaderElection", self.election("partition-leader", name))

    def group_coordinator_selection(self, name: str) -> GroupCoordinatorSelection:
        """The group-coordinator strategy ``name`` (group → offsets-topic partition)."""
        return cast("GroupCoordinatorSelection", self.election("group-coordinator", name))

    def group_leader_selection(self, name: str) -> GroupLeaderSelection:
        """The group-leader strategy ``name`` (which member computes the assignment)."""
        return cast("GroupLeaderSelection", self.election("group-leader", name))

    def partitioner(self, name: str) -> PartitionerFactory:
        """The partitioner factory registered as ``name``."""
        return self.partitioners.get(name)

    def placement(self, name: str) -> ReplicaPlacement:
        """The replica placement strategy registered as ``name``."""
        return self.placements.get(name)

    def offset_store(self, name: str) -> OffsetStorageFactory:
        """The offset storage factory registered as ``name``."""
        return self.offset_stores.get(name)

    def authorizer(self, name: str) -> AuthorizerFactory:
        """The authorizer registered as ``name``."""
        return self.authorizers.get(name)

    def workload(self, name: str) -> Workload:
        """The lab workload registered as ``name``."""
        return self.workloads.get(name)

    def metric(self, name: str) -> Metric:
        """The lab metric registered as ``name``."""
        return self.metrics.get(name)

    def wants_leader_elections(self) -> bool:
        """Whether a plugin listens to leader elections (the engine skips building the calls
        for 100,000s of partitions when none does)."""
        return bool(self.pm.hook.coordkit_leader_elected.get_hookimpls())

    # -- event forwarding
    @property
    def hook(self) -> Any:
        return self.pm.hook

    def notify_session_state(self, store_url: str, session_id: int, state: SessionState) -> None:
        self.pm.hook.coordkit_session_state_changed(
            store_url=store_url, session_id=session_id, state=state
        )

    def notify_broker_registered(self, broker_id: int, host: str, port: int) -> None:
        self.pm.hook.coordkit_broker_registered(broker_id=broker_id, host=host, port=port)

    def notify_controller_changed(self, broker_id: int | None, epoch: int) -> None:
        self.pm.hook.coordkit_controller_changed(broker_id=broker_id, epoch=epoch)

    def notify_leader_elected(
        self,
        topic: str,
        partition: int,
        leader: int,
        leader_epoch: int,
        isr: list[int],
        reason: str,
    ) -> None:
        self.pm.hook.coordkit_leader_elected(
            topic=topic,
            partition=partition,
            leader=leader,
            leader_epoch=leader_epoch,
            isr=isr,
            reason=reason,
        )

    def notify_rebalance_completed(
        self,
        group: str,
        generation: int,
        assignment: Mapping[str, list[str]],
        rounds: int,
        duration_s: float,
    ) -> None:
        self.pm.hook.coordkit_rebalance_completed(
            group=group,
            generation=generation,
            assignment=assignment,
            rounds=rounds,
            duration_s=duration_s,
        )


@functools.cache
def get_plugin_manager() -> PluginManager:
    """The process-wide plugin manager, created on first use."""
    return PluginManager()


def reset_plugin_manager() -> None:
    """Forget the process-wide manager (after changing the environment, in tests)."""
    get_plugin_manager.cache_clear()


def open_store(url: str, *, read_only: bool = False, **options: Any) -> MetadataStore:
    """Open a metadata store by URL through the process-wide plugin manager; ``read_only=True``
    opens it without writing anything (see :meth:`PluginManager.store_for`)."""
    return get_plugin_manager().store_for(url, read_only=read_only, **options)

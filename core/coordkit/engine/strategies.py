"""The strategies an engine runs with, resolved once and handed down; the engine's one edge to the
plugin registry.

A cluster, a broker of ``coordkit serve``, a producer or a consumer is built with one
:class:`Strategies` value: the controller election, the partition leader elections, the group
coordinator and group leader strategies, replica placement, offset storage, the assignors and the
partitioners, and where plugin events go. The engine's parts receive it; none of them looks a
strategy up. This module is the engine's one edge to the plugin registry (:meth:`Strategies.from_plugins`,
and :func:`open_store_session` for the store plugins; an import contract in lint holds it), so a test or an embedding
application can hand a cluster strategy objects of its own with :func:`attrs.evolve`::

    strategies = attrs.evolve(Strategies.from_plugins(config), placement=MyPlacement())
    Cluster("memory://demo", 3, config=config, strategies=strategies)
"""

from __future__ import annotations

import types
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import attrs

from coordkit.engine.config import EngineConfig
from coordkit.errors import UnknownNameError
from coordkit.kafka.coordinators import GroupCoordinatorSelection
from coordkit.strategies.assignment import Assignor
from coordkit.strategies.authorization import AuthorizerFactory
from coordkit.strategies.elections import (
    ControllerElection,
    ElectionKind,
    GroupLeaderSelection,
    PartitionLeaderElection,
)
from coordkit.strategies.offsets import OffsetStorageFactory
from coordkit.strategies.partitioning import PartitionerFactory
from coordkit.strategies.placement import ReplicaPlacement
from coordkit.strategies.share_assignment import ShareAssignor
from coordkit.strategies.target_assignment import ServerAssignor

if TYPE_CHECKING:
    from coordkit.plugins import PluginManager
    from coordkit.store import MetadataStore

__all__ = ["NO_PLUGIN_EVENTS", "PluginEvents", "Strategies", "open_store_session"]

T = TypeVar("T")


class PluginEvents(Protocol):
    """Where the engine reports the events plugins may listen to (the ``coordkit_*`` event hooks;
    :class:`~coordkit.plugins.PluginManager` forwards them)."""

    def wants_leader_elections(self) -> bool:
        """Whether anything listens to leader elections (skips building 100,000s of calls)."""
        ...

    def notify_broker_registered(self, broker_id: int, host: str, port: int) -> None: ...

    def notify_controller_changed(self, broker_id: int | None, epoch: int) -> None: ...

    def notify_leader_elected(
        self, topic: str, partition: int, leader: int, leader_epoch: int, isr: list[int],
        reason: str,
    ) -> None: ...  # fmt: skip

    def notify_rebalance_completed(
        self, group: str, generation: int, assignment: Mapping[str, list[str]], rounds: int,
        duration_s: float,
    ) -> None: ...  # fmt: skip


class _NoPluginEvents:
    """Events told to no one."""

    def wants_leader_elections(self) -> bool:
        return False

    def notify_broker_registered(self, broker_id: int, host: str, port: int) -> None:
        pass

    def notify_controller_changed(self, broker_id: int | None, epoch: int) -> None:
        pass

    def notify_leader_elected(
        self, topic: str, partition: int, leader: int, leader_epoch: int, isr: list[int],
        reason: str,
    ) -> None:  # fmt: skip
        pass

    def notify_rebalance_completed(
        self, group: str, generation: int, assignment: Mapping[str, list[str]], rounds: int,
        duration_s: float,
    ) -> None:  # fmt: skip
        pass


#: For strategies whose events no plugin hears (tests of one part).
NO_PLUGIN_EVENTS: PluginEvents = _NoPluginEvents()


def _frozen_mapping(value: Mapping[str, Any]) -> Mapping[str, Any]:
    return types.MappingProxyType(dict(value))


@attrs.frozen
class Strategies:
    """Every strategy an engine needs, each already an object.

    :param controller_election: how brokers win the controller.
    :param partition_elections: partition leader elections by name; the controller uses the ones
        :class:`~coordkit.engine.config.EngineConfig` names and Kafka's fixed ``offline``,
        ``offline-unclean`` and ``reassign``.
    :param group_coordinator: which offsets-topic partition (so broker) coordinates a group.
    :param group_leader: which member of a classic group computes the assignment.
    :param placement: where new topics' and partitions' replicas go.
    :param offset_storage: what committed offsets are written to.
    :param assignors: assignors by name (a group picks one by its protocol name at run time).
    :param partitioners: partitioner factories by name (a producer's config names one).
    :param server_assignors: server-side (KIP-848) assignors by name (a consumer group's
        ``group.remote.assignor`` names one).
    :param events: where plugin events go.
    """

    controller_election: ControllerElection
    partition_elections: Mapping[str, PartitionLeaderElection] = attrs.field(
        converter=_frozen_mapping
    )
    group_coordinator: GroupCoordinatorSelection
    group_leader: GroupLeaderSelection
    placement: ReplicaPlacement
    offset_storage: OffsetStorageFactory
    assignors: Mapping[str, Assignor] = attrs.field(converter=_frozen_mapping)
    partitioners: Mapping[str, PartitionerFactory] = attrs.field(converter=_frozen_mapping)
    server_assignors: Mapping[str, ServerAssignor] = attrs.field(
        factory=dict, converter=_frozen_mapping
    )
    #: Share-partition assignors (KIP-932) by name (``group.share.assignors`` names them).
    share_assignors: Mapping[str, ShareAssignor] = attrs.field(
        factory=dict, converter=_frozen_mapping
    )
    #: Authorizers by name (``authorizer.class.name`` names one; none: no authorization).
    authorizers: Mapping[str, AuthorizerFactory] = attrs.field(
        factory=dict, converter=_frozen_mapping
    )
    events: PluginEvents = attrs.field(default=NO_PLUGIN_EVENTS, eq=False)

    def partition_election(self, name: str) -> PartitionLeaderElection:
        """The partition leader election ``name``."""
        return _named(self.partition_elections, name, "partition-leader election strategy")

    def assignor(self, name: str) -> Assignor:
        """The assignor ``name`` (a classic group's protocol name)."""
        return _named(self.assignors, name, "assignor")

    def server_assignor(self, name: str) -> ServerAssignor:
        """The server-side assignor ``name`` (a consumer group's ``group.remote.assignor``)."""
        return _named(self.server_assignors, name, "server assignor")

    def share_assignor(self, name: str) -> ShareAssignor:
        """The share-partition assignor ``name`` (a ``group.share.assignors`` entry)."""
        return _named(self.share_assignors, name, "share assignor")

    def partitioner(self, name: str) -> PartitionerFactory:
        """The partitioner factory ``name``."""
        return _named(self.partitioners, name, "partitioner")

    def authorizer(self, name: str) -> AuthorizerFactory:
        """The authorizer ``name`` (what ``authorizer.class.name`` names)."""
        return _named(self.authorizers, name, "authorizer")

    def check_assignors(self, names: Sequence[str]) -> None:
        """Raise :class:`~coordkit.errors.UnknownNameError` for the first of ``names`` not known."""
        for name in names:
            self.assignor(name)

    @classmethod
    def from_plugins(
        cls,
        config: EngineConfig | None = None,
        *,
        manager: PluginManager | None = None,
        placement: str | None = None,
        offset_storage: str | None = None,
    ) -> Strategies:
        """The strategies ``config`` names, looked up in ``manager`` (the process-wide plugin
        manager by default); ``placement`` and ``offset_storage`` override the config's names.

        :raises UnknownNameError: a name that no plugin registered, with the registered ones.
        """
        from coordkit.plugins import get_plugin_manager

        config = config or EngineConfig()
        manager = manager or get_plugin_manager()
        partition_kind = f"{ElectionKind.PARTITION_LEADER.value}/"
        elections = {
            name: manager.partition_election(name)
            for r in manager.elections
            if (name := r.name.removeprefix(partition_kind)) != r.name
        }
        strategies = cls(
            controller_election=manager.controller_election(config.controller_election),
            partition_elections=elections,
            group_coordinator=manager.group_coordinator_selection(config.group_coordinator),
            group_leader=manager.group_leader_selection(config.group_leader),
            placement=manager.placement(placement or config.placement),
            offset_storage=manager.offset_store(offset_storage or config.offset_storage),
            assignors={r.name: r.value for r in manager.assignors},
            partitioners={r.name: r.value for r in manager.partitioners},
            server_assignors={r.name: r.value for r in manager.server_assignors},
            share_assignors={r.name: r.value for r in manager.share_assignors},
            authorizers={r.name: r.value for r in manager.authorizers},
            events=manager,
        )
        # The names the controller will use, checked now rather than at its first election.
        for name in (
            config.offline_election, config.preferred_election,
            config.controlled_shutdown_election, "offline", "offline-unclean", "reassign",
        ):  # fmt: skip
            strategies.partition_election(name)
        return strategies


def open_store_session(url: str, **options: object) -> MetadataStore:
    """A new session on the store at ``url``, opened by the store plugin of its scheme."""
    from coordkit.plugins import get_plugin_manager

    return get_plugin_manager().store_for(url, **options)


def _named(items: Mapping[str, T], name: str, kind: str) -> T:
    found = items.get(name)
    if found is None:
        raise UnknownNameError(kind, name, sorted(items))
    return found

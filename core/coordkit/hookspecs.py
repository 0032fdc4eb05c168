"""Hook specifications for coordkit plugins.

A plugin is a module (or object) with functions marked ``@coordkit.hookimpl`` named after the
hooks below. Built-in plugins and third-party ones are found the same way: through the entry
point group ``coordkit`` (see :mod:`coordkit.plugins`).

Hooks come in two groups:

* **registration** hooks, called once per kind of component when it is first needed, receive a
  ``register`` callback (as in simonw/llm) and call it once per component they provide;
* **event** hooks, called by the engine as things happen, let a plugin observe (log, trace, export
  metrics) without touching the engine. Their return values are ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TypeAlias

import pluggy

if TYPE_CHECKING:
    import click

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

    #: Opens a store session on a parsed URL (``read_only=True`` only when asked for).
    StoreFactory: TypeAlias = Callable[..., MetadataStore]
    #: What ``coordkit_register_elections`` registers: one of the four election contracts.
    ElectionStrategy: TypeAlias = (
        ControllerElection | PartitionLeaderElection | GroupCoordinatorSelection
        | GroupLeaderSelection
    )  # fmt: skip

#: The project name: hook markers, plugin manager and entry point group all use it.
NAME = "coordkit"

_hookspec = pluggy.HookspecMarker(NAME)
#: Marks a function as the implementation of a coordkit hook.
hookimpl = pluggy.HookimplMarker(NAME)


# -- registration ---------------------------------------------------------------------------------


@_hookspec
def coordkit_register_stores(register: Callable[[str, StoreFactory], None]) -> None:
    """Register metadata store backends.

    :param register: call ``register(scheme, factory)`` for each URL scheme served; ``factory(url,
        **options)`` receives a :class:`coordkit.store.urls.StoreURL` and returns a
        :class:`coordkit.store.MetadataStore`. Import optional client libraries inside the factory,
        not at module level, so discovery never fails for a missing extra.

    Read-only opens (``open_store(url, read_only=True)``, used by commands that only look):
    the factory receives ``read_only=True`` only when it is asked for, never ``read_only=False``,
    so a factory without the parameter keeps working for ordinary opens (a read-only open of its
    scheme then fails with :class:`coordkit.errors.UnsupportedError`). A factory that takes it must
    then write nothing at all — no chroot or root node, no session records — raise
    :class:`coordkit.errors.NoNodeError` (naming it, "nothing was created") when the store's root
    does not exist, and return a store whose ``read_only`` attribute is ``True`` and whose write
    methods raise :class:`coordkit.store.ReadOnlyError` (:meth:`MetadataStore.check_writable`).
    """


@_hookspec
def coordkit_register_assignors(register: Callable[[Assignor], None]) -> None:
    """Register consumer partition assignors.

    :param register: call ``register(assignor)`` with an object implementing
        :class:`coordkit.strategies.assignment.Assignor`; its ``name`` (e.g. ``"range"``) is the lookup key.
    """


@_hookspec
def coordkit_register_server_assignors(register: Callable[[ServerAssignor], None]) -> None:
    """Register server-side (KIP-848) assignors: what a group's ``group.remote.assignor`` names.

    :param register: call ``register(assignor)`` with an object implementing
        :class:`coordkit.strategies.target_assignment.ServerAssignor`; its ``name`` (e.g.
        ``"uniform"``) is the lookup key. Server-side and classic (client-side) assignors are
        separate kinds: a ``range`` of each can coexist.
    """


@_hookspec
def coordkit_register_share_assignors(register: Callable[[ShareAssignor], None]) -> None:
    """Register share-partition assignors (KIP-932): what the broker config
    ``group.share.assignors`` names.

    :param register: call ``register(assignor)`` with an object implementing
        :class:`coordkit.strategies.share_assignment.ShareAssignor`; its ``name`` (e.g.
        ``"simple"``) is the lookup key. A separate kind from server-side (KIP-848) assignors.
    """


@_hookspec
def coordkit_register_elections(register: Callable[[ElectionStrategy], None]) -> None:
    """Register election strategies (controller, partition leader, group coordinator, group leader).

    :param register: call ``register(strategy)``; the strategy's ``kind`` and ``name`` together are
        the lookup key, so a ``kafka`` controller strategy and a ``kafka`` group-leader strategy
        can coexist.
    """


@_hookspec
def coordkit_register_placements(register: Callable[[ReplicaPlacement], None]) -> None:
    """Register replica placement strategies.

    :param register: call ``register(strategy)`` with an object implementing
        :class:`coordkit.strategies.placement.ReplicaPlacement`; its ``name`` is the lookup key.
    """


@_hookspec
def coordkit_register_partitioners(register: Callable[[PartitionerFactory], None]) -> None:
    """Register producer partitioners.

    :param register: call ``register(partitioner_factory)``; the factory's ``name`` is the lookup
        key and calling it returns a fresh (possibly stateful) partitioner.
    """


@_hookspec
def coordkit_register_offset_stores(register: Callable[[OffsetStorageFactory], None]) -> None:
    """Register consumer offset storage strategies.

    :param register: call ``register(factory)``; the factory's ``name`` (e.g. ``"zookeeper"``,
        ``"offsets-topic"``) is the lookup key and ``factory(store, **options)`` returns a
        :class:`coordkit.strategies.offsets.OffsetStorage` working on that metadata store session.
    """


@_hookspec
def coordkit_register_authorizers(register: Callable[[AuthorizerFactory], None]) -> None:
    """Register authorizers: what the broker config ``authorizer.class.name`` names.

    :param register: call ``register(factory)`` with a
        :class:`coordkit.strategies.authorization.AuthorizerFactory`; its ``name`` (e.g.
        ``"kafka"``) is the lookup key.
    """


@_hookspec
def coordkit_register_workloads(register: Callable[[Workload], None]) -> None:
    """Register lab workload generators.

    :param register: call ``register(workload)`` with a :class:`coordkit.lab.Workload`;
        ``workload.name`` is the lookup key.
    """


@_hookspec
def coordkit_register_metrics(register: Callable[[Metric], None]) -> None:
    """Register lab metrics.

    :param register: call ``register(metric)`` with a :class:`coordkit.lab.Metric`;
        ``metric.name`` is the lookup key.
    """


@_hookspec
def coordkit_register_commands(register: Callable[[click.Command], None]) -> None:
    """Register subcommands of the ``coordkit`` command line.

    :param register: call ``register(command)`` with a :class:`click.Command` (or group); its
        ``name`` becomes ``coordkit NAME``.
    """


# -- control-plane events ---------------------------------------------------------------------------


@_hookspec
def coordkit_session_state_changed(store_url: str, session_id: int, state: SessionState) -> None:
    """A component's store session changed state.

    :param store_url: the store URL, credentials redacted.
    :param session_id: the session the change concerns.
    :param state: the new state.
    """


@_hookspec
def coordkit_broker_registered(broker_id: int, host: str, port: int) -> None:
    """A broker registered itself under ``/brokers/ids``.

    :param broker_id: the broker id.
    :param host: the advertised host.
    :param port: the advertised port.
    """


@_hookspec
def coordkit_controller_changed(broker_id: int | None, epoch: int) -> None:
    """A broker became controller (or the controller resigned: ``broker_id`` is ``None``).

    :param broker_id: the new controller, or ``None``.
    :param epoch: the controller epoch in force.
    """


@_hookspec
def coordkit_leader_elected(
    topic: str, partition: int, leader: int, leader_epoch: int, isr: list[int], reason: str
) -> None:
    """The controller wrote a new leader for a partition.

    :param reason: the election that chose it (``offline``, ``preferred``, ``reassign``,
        ``controlled_shutdown``, ``new``).
    """


# -- consumer-group events --------------------------------------------------------------------------


@_hookspec
def coordkit_rebalance_completed(
    group: str, generation: int, assignment: Mapping[str, list[str]], rounds: int, duration_s: float
) -> None:
    """A consumer group reached a stable assignment.

    :param group: the group id.
    :param generation: the generation of the stable assignment.
    :param assignment: member id → partitions written ``topic-partition``.
    :param rounds: join rounds it took (1 for eager, usually 2 for cooperative).
    :param duration_s: seconds from the first trigger to stability.
    """

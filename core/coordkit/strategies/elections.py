"""Election strategies: the kinds, the contracts plugins implement, and Kafka's exact algorithms.

Partition leader elections are plain functions over replica lists, exactly as Kafka's controller
decides (``PartitionLeaderElectionAlgorithms`` and the ISR rules of ``PartitionStateMachine``):
"first" always means first in replica-assignment order, never ISR order. A strategy plugin wraps one
of them behind :class:`PartitionLeaderElection`, registered through
``coordkit_register_elections`` and found with ``get_plugin_manager().election(kind, name)``.

Group leader selections (:class:`GroupLeaderSelection`) choose which member of a classic group
computes its assignment, at the end of every join round, over the members that rejoined in the
order they first joined the group (a static member that restarts keeps its place). Kafka's rule
(strategy ``kafka``): the first member to join leads; when the leader leaves, another takes over.

Controller elections are strategies too (:class:`ControllerElection`): each gives every broker a
:class:`ControllerCandidate` that wins or loses controllership of the cluster. Whatever the
strategy, the winner holds Kafka's ephemeral ``/controller`` and has bumped ``/controller_epoch``
in the same multi, so epochs are monotonic and every later controller write can be fenced by a
check on that node's version.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

if TYPE_CHECKING:
    from coordkit.store import MetadataStore
    from coordkit.support.clock import Clock

__all__ = [
    "ControllerCandidate",
    "ControllerElection",
    "ControllerImage",
    "ControllerTerm",
    "ElectionKind",
    "ElectionReason",
    "GroupLeaderSelection",
    "LeaderAndIsr",
    "LeaderCandidate",
    "PartitionElectionInput",
    "PartitionLeaderElection",
    "controlled_shutdown_election",
    "controlled_shutdown_partition_leader",
    "new_partition_election",
    "offline_election",
    "offline_partition_leader",
    "preferred_replica_election",
    "preferred_replica_partition_leader",
    "reassign_election",
    "reassign_partition_leader",
]


class ElectionKind(enum.Enum):
    """What an election chooses; with the strategy name it is the registry key."""

    CONTROLLER = "controller"
    PARTITION_LEADER = "partition-leader"
    GROUP_COORDINATOR = "group-coordinator"
    GROUP_LEADER = "group-leader"


class ElectionReason(enum.Enum):
    """Why a partition got a (new) leader: the ``reason`` of the leader-elected hook."""

    NEW = "new"
    OFFLINE = "offline"
    UNCLEAN = "unclean"
    REASSIGN = "reassign"
    PREFERRED = "preferred"
    CONTROLLED_SHUTDOWN = "controlled_shutdown"


# -- Kafka's leader selection (PartitionLeaderElectionAlgorithms) ---------------------------------


def offline_partition_leader(
    assignment: Sequence[int], isr: Iterable[int], live: Iterable[int], unclean_enabled: bool
) -> int | None:
    """First assigned replica that is live and in the ISR; failing that, and only when unclean
    election is enabled, the first live assigned replica."""
    in_sync, alive = set(isr), set(live)
    for replica in assignment:
        if replica in alive and replica in in_sync:
            return replica
    if unclean_enabled:
        for replica in assignment:
            if replica in alive:
                return replica
    return None


def reassign_partition_leader(
    target: Sequence[int], isr: Iterable[int], live: Iterable[int]
) -> int | None:
    """First replica of the target assignment that is live and in the ISR."""
    in_sync, alive = set(isr), set(live)
    return next((r for r in target if r in alive and r in in_sync), None)


def preferred_replica_partition_leader(
    assignment: Sequence[int], isr: Iterable[int], live: Iterable[int]
) -> int | None:
    """The first assigned replica, only if it is live and in the ISR."""
    if not assignment:
        return None
    preferred = assignment[0]
    return preferred if preferred in set(live) and preferred in set(isr) else None


def controlled_shutdown_partition_leader(
    assignment: Sequence[int], isr: Iterable[int], live: Iterable[int], shutting_down: Iterable[int]
) -> int | None:
    """First assigned replica that is live, in the ISR and not shutting down."""
    in_sync, alive, leaving = set(isr), set(live), set(shutting_down)
    return next((r for r in assignment if r in alive and r in in_sync and r not in leaving), None)


# -- leader plus new ISR (PartitionStateMachine) --------------------------------------------------


def _broker_tuple(values: Iterable[int]) -> tuple[int, ...]:
    # Elections run for 100,000s of partitions at once: pass tuples through untouched.
    return values if type(values) is tuple else tuple(int(v) for v in values)


def _broker_set(values: Iterable[int]) -> frozenset[int]:
    return values if type(values) is frozenset else frozenset(int(v) for v in values)


@attrs.frozen
class PartitionElectionInput:
    """What a partition leader election sees.

    :param assignment: the replica assignment, preferred replica first.
    :param isr: the current in-sync replicas (in the order the state node lists them).
    :param live: brokers currently registered under ``/brokers/ids``.
    :param shutting_down: brokers in controlled shutdown.
    :param target: for a reassignment, the new replica list (defaults to ``assignment``).
    """

    assignment: tuple[int, ...] = attrs.field(converter=_broker_tuple)
    isr: tuple[int, ...] = attrs.field(converter=_broker_tuple)
    live: frozenset[int] = attrs.field(converter=_broker_set)
    shutting_down: frozenset[int] = attrs.field(default=frozenset(), converter=_broker_set)
    target: tuple[int, ...] | None = attrs.field(
        default=None, converter=attrs.converters.optional(_broker_tuple)
    )


@attrs.frozen
class LeaderAndIsr:
    """An election's outcome: the new leader and ISR (the caller bumps the leader epoch).

    :param unclean: the leader was taken from outside the ISR (acknowledged records may be lost).
    """

    leader: int
    isr: tuple[int, ...] = attrs.field(converter=_broker_tuple)
    reason: ElectionReason
    unclean: bool = False


def offline_election(inp: PartitionElectionInput, unclean_enabled: bool) -> LeaderAndIsr | None:
    """The leader is gone. New ISR: the live members of the old ISR if the new leader was in it,
    else just the leader (an unclean election)."""
    leader = offline_partition_leader(inp.assignment, inp.isr, inp.live, unclean_enabled)
    if leader is None:
        return None
    if leader in inp.isr:
        return LeaderAndIsr(leader, (r for r in inp.isr if r in inp.live), ElectionReason.OFFLINE)
    return LeaderAndIsr(leader, (leader,), ElectionReason.UNCLEAN, unclean=True)


def reassign_election(inp: PartitionElectionInput) -> LeaderAndIsr | None:
    """Leader from the target assignment; the ISR is unchanged."""
    target = inp.target if inp.target is not None else inp.assignment
    leader = reassign_partition_leader(target, inp.isr, inp.live)
    return None if leader is None else LeaderAndIsr(leader, inp.isr, ElectionReason.REASSIGN)


def preferred_replica_election(inp: PartitionElectionInput) -> LeaderAndIsr | None:
    """Leadership back to the preferred replica; the ISR is unchanged."""
    leader = preferred_replica_partition_leader(inp.assignment, inp.isr, inp.live)
    return None if leader is None else LeaderAndIsr(leader, inp.isr, ElectionReason.PREFERRED)


def controlled_shutdown_election(inp: PartitionElectionInput) -> LeaderAndIsr | None:
    """Leadership away from shutting-down brokers; the new ISR drops them."""
    leader = controlled_shutdown_partition_leader(
        inp.assignment, inp.isr, inp.live, inp.shutting_down
    )
    if leader is None:
        return None
    return LeaderAndIsr(
        leader,
        (r for r in inp.isr if r not in inp.shutting_down),
        ElectionReason.CONTROLLED_SHUTDOWN,
    )


def new_partition_election(assignment: Sequence[int], live: Iterable[int]) -> LeaderAndIsr | None:
    """A new partition: leader = first live replica, ISR = all live replicas (assignment order)."""
    alive = set(live)
    live_replicas = [r for r in assignment if r in alive]
    if not live_replicas:
        return None
    return LeaderAndIsr(live_replicas[0], live_replicas, ElectionReason.NEW)


# -- strategy contracts ---------------------------------------------------------------------------


@runtime_checkable
class PartitionLeaderElection(Protocol):
    """A partition leader election strategy (kind :attr:`ElectionKind.PARTITION_LEADER`)."""

    kind: ElectionKind
    name: str
    description: str

    def elect(self, inp: PartitionElectionInput) -> LeaderAndIsr | None:
        """The new leader and ISR, or ``None`` when no replica qualifies. A function of ``inp``
        (the election kit checks it): a controller may decide once for every partition with the
        same input."""
        ...


class ControllerImage(Protocol):
    """What a warm election hands the controller with its term: the cluster's metadata, caught up
    past the claim (the engine's :class:`~coordkit.engine.controller.image.MetadataImage` is one).
    The term's first load asks it to fill the controller's context."""

    def fill(self, context: Any) -> bool:
        """Fill ``context`` (the controller's) from the image; ``False`` when the image is not
        current (the context then reads the store)."""
        ...

    def topic_names(self) -> list[str]:
        """The topics the image holds."""
        ...

    def follow_assignments(
        self, listener: Callable[[str | None, int | None], None]
    ) -> Callable[[], None]:
        """Call ``listener(topic, mzxid)`` after a topic's assignment changed (``mzxid`` None:
        deleted; ``(None, None)``: any may have); returns the function that stops the calls."""
        ...


@attrs.frozen
class ControllerTerm:
    """A won controller election: who, which epoch, and the ``/controller_epoch`` version that
    every write of this term checks.

    :param image: what a warm election hands the controller (:class:`ControllerImage`): the
        candidate's image, caught up past the claim, from which the term's first load fills the
        controller's context (a cold election hands none; not part of the term's identity).
    """

    broker_id: int
    epoch: int
    epoch_version: int
    image: ControllerImage | None = attrs.field(default=None, eq=False, repr=False)


#: Called with the term won (on the candidate's own thread).
ElectedCallback = Callable[[ControllerTerm], None]
#: Called when a held term ends (deposed, session lost, resigned).
DeposedCallback = Callable[[ControllerTerm], None]


class ControllerCandidate(Protocol):
    """One broker's participation in a controller election."""

    @property
    def term(self) -> ControllerTerm | None:
        """The term this candidate holds, if it is the controller."""
        ...

    def start(self) -> None:
        """Enter the election (asynchronous: callbacks report the outcome)."""
        ...

    def resign(self, term: ControllerTerm | None = None) -> None:
        """Give up the held term, if it is still ``term`` (any held term when ``None``); the
        candidate stays in the running for later terms."""
        ...

    def close(self) -> None:
        """Leave the election for good (a held term ends first)."""
        ...


class ControllerElection(Protocol):
    """A controller election strategy (kind :attr:`ElectionKind.CONTROLLER`)."""

    kind: ElectionKind
    name: str
    description: str

    def candidate(
        self,
        store: MetadataStore,
        broker_id: int,
        clock: Clock,
        on_elected: ElectedCallback,
        on_deposed: DeposedCallback,
    ) -> ControllerCandidate:
        """A candidate for ``broker_id`` on ``store`` (the broker's own session)."""
        ...


@attrs.frozen
class LeaderCandidate:
    """A member that completed the join round.

    :param join_order: when it first joined the group (smaller is earlier).
    """

    member_id: str = attrs.field(validator=attrs.validators.min_len(1))
    group_instance_id: str | None
    join_order: int


@runtime_checkable
class GroupLeaderSelection(Protocol):
    """A group-leader strategy."""

    kind: ElectionKind
    name: str
    description: str

    def choose_leader(self, current: str | None, members: Sequence[LeaderCandidate]) -> str:
        """The leader's member id among ``members`` (non-empty, earliest joined first).

        :param current: the leader of the previous generation if it rejoined, else ``None``.
        """
        ...

"""What consumer groups tell observers: in-process :class:`GroupObserver` objects (the
:class:`~coordkit.engine.groups.history.GroupHistory`, the lab, tests) and the plugin hook
``coordkit_rebalance_completed``.

Coordinators report rebalances (started, join rounds, synced assignments, completed); consumers
report what they actually own (partitions assigned, revoked or lost) and when they start and stop.
Times are the engine clock's ``monotonic()``. Observer failures are logged, never raised into the
coordinator or the consumer.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping

from attrs import field, frozen

from coordkit.engine.strategies import NO_PLUGIN_EVENTS, PluginEvents
from coordkit.kafka.model import TopicPartition

log = logging.getLogger("coordkit.engine.groups")


def _assignment(
    value: Mapping[str, Iterable[TopicPartition]],
) -> dict[str, frozenset[TopicPartition]]:
    return {member: frozenset(parts) for member, parts in value.items()}


def _counts(value: Mapping[str, int]) -> dict[str, int]:
    return dict(value)


@frozen
class AssignmentRound:
    """A generation's assignment, as the leader's SyncGroup set it and the coordinator stored it.

    :param owned: what each member said it owned when it joined this generation.
    :param assigned: what each member got.
    :param cooperative: the group rebalances cooperatively (members keep what they still own).
    :param topic_partitions: partition counts of the subscribed topics the leader assigned from.
    """

    group_id: str
    generation: int
    protocol: str
    cooperative: bool
    owned: Mapping[str, frozenset[TopicPartition]] = field(converter=_assignment)
    assigned: Mapping[str, frozenset[TopicPartition]] = field(converter=_assignment)
    topic_partitions: Mapping[str, int] = field(converter=_counts)
    time: float

    def revocations_pending(self) -> bool:
        """Some member owned a partition it was not assigned: it revokes, then rejoins."""
        return any(
            parts - self.assigned.get(member, frozenset()) for member, parts in self.owned.items()
        )


@frozen
class RebalanceCompleted:
    """A group reached a stable assignment.

    :param started: when the coordinator first saw a reason to rebalance (a member joining,
        leaving or timing out); ``completed``: when the last round's assignment was stored.
    :param rounds: join rounds it took (1 for eager, 2 when cooperative members had to revoke).
    """

    group_id: str
    generation: int
    protocol: str
    reason: str
    rounds: int
    started: float
    completed: float
    assignment: Mapping[str, frozenset[TopicPartition]] = field(converter=_assignment)

    @property
    def duration(self) -> float:
        return self.completed - self.started


class GroupObserver:
    """Base class for in-process observers of consumer groups; override what you need."""

    def consumer_started(self, group_id: str, client_id: str, time: float) -> None:
        """A consumer of ``group_id`` started."""

    def consumer_stopped(self, group_id: str, client_id: str, crashed: bool, time: float) -> None:
        """A consumer stopped (``crashed``: without committing or leaving the group)."""

    def partitions_assigned(
        self,
        group_id: str,
        member_id: str,
        generation: int,
        partitions: frozenset[TopicPartition],
        time: float,
    ) -> None:
        """A consumer started owning ``partitions`` in ``generation``."""

    def partitions_revoked(
        self,
        group_id: str,
        member_id: str,
        generation: int,
        partitions: frozenset[TopicPartition],
        lost: bool,
        time: float,
    ) -> None:
        """A consumer stopped owning ``partitions`` (``lost``: without committing, because it
        crashed or found itself out of the group)."""

    def rebalance_started(self, group_id: str, generation: int, reason: str, time: float) -> None:
        """The coordinator moved a group to PreparingRebalance (``generation`` is the old one)."""

    def join_completed(
        self, group_id: str, generation: int, protocol: str | None, leader: str | None,
        members: tuple[str, ...], time: float,
    ) -> None:  # fmt: skip
        """A join round ended: ``generation`` begins with ``members`` (none: the group is empty)."""

    def assignment_synced(self, round_: AssignmentRound) -> None:
        """The leader's assignment for a generation was stored and handed to the members."""

    def rebalance_completed(self, record: RebalanceCompleted) -> None:
        """A group reached a stable assignment."""


class GroupObservers(GroupObserver):
    """Fans group events out to registered observers; completed rebalances also go to
    ``events`` (the plugins' ``coordkit_rebalance_completed`` hook)."""

    def __init__(self, *observers: GroupObserver, events: PluginEvents = NO_PLUGIN_EVENTS):
        self._observers: list[GroupObserver] = list(observers)
        self.events = events
        self._lock = threading.Lock()

    def add(self, observer: GroupObserver) -> None:
        with self._lock:
            self._observers.append(observer)

    def remove(self, observer: GroupObserver) -> None:
        with self._lock:
            if observer in self._observers:
                self._observers.remove(observer)

    def _each(self) -> list[GroupObserver]:
        with self._lock:
            return list(self._observers)

    def consumer_started(self, group_id: str, client_id: str, time: float) -> None:
        for o in self._each():
            _safely(o.consumer_started, group_id, client_id, time)

    def consumer_stopped(self, group_id: str, client_id: str, crashed: bool, time: float) -> None:
        for o in self._each():
            _safely(o.consumer_stopped, group_id, client_id, crashed, time)

    def partitions_assigned(
        self,
        group_id: str,
        member_id: str,
        generation: int,
        partitions: frozenset[TopicPartition],
        time: float,
    ) -> None:
        for o in self._each():
            _safely(o.partitions_assigned, group_id, member_id, generation, partitions, time)

    def partitions_revoked(
        self,
        group_id: str,
        member_id: str,
        generation: int,
        partitions: frozenset[TopicPartition],
        lost: bool,
        time: float,
    ) -> None:
        for o in self._each():
            _safely(o.partitions_revoked, group_id, member_id, generation, partitions, lost, time)

    def rebalance_started(self, group_id: str, generation: int, reason: str, time: float) -> None:
        for o in self._each():
            _safely(o.rebalance_started, group_id, generation, reason, time)

    def join_completed(
        self, group_id: str, generation: int, protocol: str | None, leader: str | None,
        members: tuple[str, ...], time: float,
    ) -> None:  # fmt: skip
        for o in self._each():
            _safely(o.join_completed, group_id, generation, protocol, leader, members, time)

    def assignment_synced(self, round_: AssignmentRound) -> None:
        for o in self._each():
            _safely(o.assignment_synced, round_)

    def rebalance_completed(self, record: RebalanceCompleted) -> None:
        _safely(
            self.events.notify_rebalance_completed,
            record.group_id,
            record.generation,
            {m: sorted(str(tp) for tp in parts) for m, parts in record.assignment.items()},
            record.rounds,
            record.duration,
        )
        for o in self._each():
            _safely(o.rebalance_completed, record)


def _safely(fn: Callable[..., object], *args: object) -> None:
    try:
        fn(*args)
    except Exception:
        log.exception("group observer %r failed", fn)

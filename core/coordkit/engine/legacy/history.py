"""Who owned which ``/consumers/G/owners/T/P`` node, and when: recorded by the consumers, checked
for double ownership.

A consumer records a *claim* after the store created its owner node and a *release* before it asks
the store to delete the node (or closes the session holding it), so every recorded interval lies
inside the time the node really existed. Two overlapping recorded intervals for one partition
therefore prove that two owners held it at once; a clean history is the invariant the legacy
consumer must keep. Events carry a process-wide sequence number, which orders them across
consumers sharing one :class:`OwnershipHistory`.

A node lost with an expired session ends at an unknown moment before the consumer hears of it, so
such intervals (``ended_by == "session-lost"``) are left out of the overlap check. That includes a
release the store refused because the session had already ended (relabelled when refused).
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Iterable

import attrs

from coordkit.kafka.model import TopicPartition

SESSION_LOST = "session-lost"


class OwnershipChange(enum.Enum):
    CLAIMED = "claimed"
    RELEASED = "released"


@attrs.frozen
class OwnershipEvent:
    """One claim or release of a partition's owner node.

    :param sequence: position in the history (process-wide order).
    :param at: the consumer clock's monotonic seconds.
    :param reason: why (``rebalance``, ``conflict-rollback``, ``close``, ``crash``,
        ``session-lost``).
    """

    sequence: int
    at: float
    group_id: str
    tp: TopicPartition
    thread_id: str
    consumer_id: str
    change: OwnershipChange
    reason: str


@attrs.frozen
class OwnershipInterval:
    """A partition owned by one thread from ``start`` to ``end`` (sequence numbers; ``end`` is
    ``None`` while it is still owned)."""

    group_id: str
    tp: TopicPartition
    thread_id: str
    start: int
    end: int | None
    ended_by: str | None

    def overlaps(self, other: OwnershipInterval) -> bool:
        first, second = sorted((self, other), key=lambda i: i.start)
        return first.end is None or second.start < first.end


class OwnershipHistory:
    """A thread-safe record of ownership events; share one between the consumers of a check."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: list[OwnershipEvent] = []

    def record(
        self,
        at: float,
        group_id: str,
        changes: Iterable[tuple[TopicPartition, str]],
        consumer_id: str,
        change: OwnershipChange,
        reason: str,
    ) -> range:
        """Append one event per change; returns their sequence numbers."""
        with self._lock:
            first = len(self._events)
            for tp, thread_id in changes:
                self._events.append(
                    OwnershipEvent(
                        len(self._events), at, group_id, tp, thread_id, consumer_id, change, reason
                    )
                )
            return range(first, len(self._events))

    def relabel(self, sequences: Iterable[int], reason: str) -> None:
        """Give recorded events another reason: a release recorded before its delete was sent, which
        the store refused because the session had ended (the nodes went with it, earlier), is a
        ``session-lost`` end."""
        with self._lock:
            for sequence in sequences:
                self._events[sequence] = attrs.evolve(self._events[sequence], reason=reason)

    @property
    def events(self) -> tuple[OwnershipEvent, ...]:
        with self._lock:
            return tuple(self._events)

    def intervals(self) -> list[OwnershipInterval]:
        """Every ownership interval, in order of its claim."""
        open_: dict[tuple[str, TopicPartition, str], OwnershipEvent] = {}
        out: list[OwnershipInterval] = []
        for event in self.events:
            key = (event.group_id, event.tp, event.thread_id)
            if event.change is OwnershipChange.CLAIMED:
                open_[key] = event
                continue
            claim = open_.pop(key, None)
            if claim is not None:
                out.append(
                    OwnershipInterval(
                        event.group_id,
                        event.tp,
                        event.thread_id,
                        claim.sequence,
                        event.sequence,
                        event.reason,
                    )
                )
        out.extend(
            OwnershipInterval(c.group_id, c.tp, c.thread_id, c.sequence, None, None)
            for c in open_.values()
        )
        return sorted(out, key=lambda i: i.start)

    def violations(self) -> list[str]:
        """Every pair of overlapping owners of one partition, described; empty when clean."""
        by_partition: dict[tuple[str, TopicPartition], list[OwnershipInterval]] = {}
        for interval in self.intervals():
            if interval.ended_by != SESSION_LOST:
                by_partition.setdefault((interval.group_id, interval.tp), []).append(interval)
        found: list[str] = []
        for (group, tp), intervals in by_partition.items():
            latest: OwnershipInterval | None = None  # the interval reaching furthest so far
            for interval in intervals:
                if latest is not None and latest.overlaps(interval):
                    found.append(
                        f"group {group!r} partition {tp}: {latest.thread_id} (from event "
                        f"{latest.start}) and {interval.thread_id} (from event {interval.start}) "
                        "owned it at once"
                    )
                if latest is None or _end(interval) > _end(latest):
                    latest = interval
        return found

    def owners(self) -> dict[tuple[str, TopicPartition], str]:
        """The current owner of every partition still owned."""
        return {(i.group_id, i.tp): i.thread_id for i in self.intervals() if i.end is None}


def _end(interval: OwnershipInterval) -> float:
    return float("inf") if interval.end is None else interval.end

"""What a new controller tells its observers: only the states they were not told yet.

Kafka's ZooKeeper-mode controller sends every live broker the full metadata (UpdateMetadata,
LeaderAndIsr) when it takes over, because a broker's cache may have missed anything while there
was no controller; that is O(partitions) work on every failover, which KRaft avoids by having
brokers follow the metadata log from the offset they have applied. Here the brokers of a process
share one :class:`~coordkit.engine.events.Observers` fan-out (the replication model, the group
coordinators, the lab), and every state written in the process reaches it as it is written. A new
controller's announcement therefore has one job: deliver what those observers may have missed —
states written by another process, a write whose writer died between its commit and telling, a
fan-out that has never been told anything (a fresh process, or the first controller).

:class:`ToldStates` is the record of what one fan-out delivered, kept as an observer of it: per
topic, columns of the leader epoch and node version last delivered (``partition_states_changed``
and ``partition_states_known`` alike). :func:`states_to_announce` compares a controller's
partitions with it — vectorised over the column rows a warm hand-over brought, a loop over the
rest — and builds a :class:`~coordkit.engine.events.StateChange` only where they differ. The first
announcement to a fan-out is full (nothing recorded yet), later ones are O(what changed) in Python
work, so a warm failover no longer grows with the cluster. The observers end up holding exactly the
states the controller loaded (or newer ones told since), as with a full announcement.

Observers added to the fan-out after the record started (a restarted broker's group coordinator)
are not owed the past: they read what they need, as the coordinator's partition hosting does
(:mod:`coordkit.engine.groups.hosting`).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence

import numpy as np

from coordkit.engine.controller.partition_map import READABLE, PartitionMap
from coordkit.engine.events import EngineObserver, Observers, StateChange
from coordkit.engine.states import TP

#: A partition never told (no leader epoch or node version is negative).
_NEVER = -1


class _TopicTold:
    """One topic's columns: leader epoch and node version last delivered, by partition."""

    __slots__ = ("epochs", "versions")

    def __init__(self, size: int) -> None:
        self.epochs = np.full(size, _NEVER, dtype=np.int64)
        self.versions = np.full(size, _NEVER, dtype=np.int64)

    def grow(self, size: int) -> None:
        have = len(self.epochs)
        if size <= have:
            return
        size = max(size, 2 * have)
        epochs = np.full(size, _NEVER, dtype=np.int64)
        versions = np.full(size, _NEVER, dtype=np.int64)
        epochs[:have] = self.epochs
        versions[:have] = self.versions
        self.epochs, self.versions = epochs, versions


class ToldStates(EngineObserver):
    """The partition states one :class:`Observers` fan-out has delivered (see the module doc).

    Use :func:`told_states` to get the record of a fan-out: it registers one on first use.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._topics: dict[str, _TopicTold] = {}

    def partition_states_changed(self, changes: Sequence[StateChange]) -> None:
        # Columns per topic first, then one vectorised update per topic (a controlled shutdown
        # tells 1,333,334 changes at once at 2,000,000 partitions).
        by_topic: dict[str, tuple[list[int], list[int], list[int]]] = {}
        for change in changes:
            topic, partition = change.tp
            if partition < 0:
                continue
            columns = by_topic.get(topic)
            if columns is None:
                columns = by_topic[topic] = ([], [], [])
            current = change.current
            columns[0].append(partition)
            columns[1].append(current.leader_epoch)
            columns[2].append(current.zk_version)
        with self._lock:
            for topic, (partitions, epochs, versions) in by_topic.items():
                self._tell(topic, np.array(partitions), np.array(epochs), np.array(versions))

    def _tell(
        self, topic: str, partitions: np.ndarray, epochs: np.ndarray, versions: np.ndarray
    ) -> None:
        """Keep the newest (leader epoch, node version) of each partition: deliveries can cross
        threads, and one delivery may name a partition twice."""
        size = int(partitions.max()) + 1
        told = self._topics.get(topic)
        if told is None:
            told = self._topics[topic] = _TopicTold(size)
        else:
            told.grow(size)
        # Sorted by partition, then key: the last row of each partition is its newest.
        order = np.lexsort((versions, epochs, partitions))
        partitions, epochs, versions = partitions[order], epochs[order], versions[order]
        last = np.ones(len(partitions), dtype=bool)
        last[:-1] = partitions[1:] != partitions[:-1]
        partitions, epochs, versions = partitions[last], epochs[last], versions[last]
        held_epochs, held_versions = told.epochs[partitions], told.versions[partitions]
        newer = (epochs > held_epochs) | ((epochs == held_epochs) & (versions > held_versions))
        told.epochs[partitions[newer]] = epochs[newer]
        told.versions[partitions[newer]] = versions[newer]

    def partition_states_known(self, states: Sequence[StateChange]) -> None:
        self.partition_states_changed(states)

    def topic_deleted(self, topic: str) -> None:
        with self._lock:
            self._topics.pop(topic, None)

    def told(self, tp: TP) -> tuple[int, int] | None:
        """``(leader epoch, node version)`` last delivered for ``tp``, or None."""
        with self._lock:
            told = self._topics.get(tp[0])
            if told is None or not 0 <= tp[1] < len(told.epochs):
                return None
            key = (int(told.epochs[tp[1]]), int(told.versions[tp[1]]))
            return None if key[0] == _NEVER else key

    def partitions(self) -> int:
        """Partitions with a state delivered."""
        with self._lock:
            return sum(int(np.count_nonzero(t.epochs != _NEVER)) for t in self._topics.values())

    def untold(self, parts: PartitionMap, writer: int) -> list[StateChange]:
        """The states of ``parts`` that differ from what was delivered, as announcements by
        broker ``writer`` (``previous`` and ``current`` the same state)."""
        out: list[StateChange] = []
        with self._lock:
            topics = self._topics
            for tp, replicas, state in parts.object_states():
                if state is None:
                    continue
                told = topics.get(tp[0])
                if (
                    told is None
                    or tp[1] >= len(told.epochs)
                    or int(told.epochs[tp[1]]) != state.leader_epoch
                    or int(told.versions[tp[1]]) != state.zk_version
                ):
                    out.append(StateChange(tp, state, state, None, writer, replicas))
            for topic, columns in parts.column_topics():
                rows = columns.states
                differs = rows["status"] == READABLE
                differs &= ~columns.taken
                told = topics.get(topic)
                if told is not None:
                    n = min(len(rows), len(told.epochs))
                    same = (rows["leader_epoch"][:n] == told.epochs[:n]) & (
                        rows["zk_version"][:n] == told.versions[:n]
                    )
                    differs[:n] &= ~same
                chosen = np.flatnonzero(differs)
                if len(chosen):
                    out.extend(
                        StateChange((topic, partition), state, state, None, writer, replicas)
                        for partition, replicas, state in columns.rows(chosen)
                        if state is not None
                    )
        return out


_records: weakref.WeakKeyDictionary[Observers, ToldStates] = weakref.WeakKeyDictionary()
_records_lock = threading.Lock()


def told_states(observers: Observers) -> ToldStates:
    """The record of what ``observers`` delivered, registered as one of them on first use (so
    the first announcement to a fan-out is full)."""
    with _records_lock:
        record = _records.get(observers)
        if record is None:
            record = _records[observers] = ToldStates()
            observers.add(record)
        return record


def states_to_announce(observers: Observers, parts: PartitionMap, writer: int) -> list[StateChange]:
    """What a controller of broker ``writer`` holding ``parts`` must announce to ``observers``."""
    return told_states(observers).untold(parts, writer)

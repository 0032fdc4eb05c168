"""The cluster as read back from the store (what ``coordkit cluster`` prints and tests check):
controller, epoch, registered brokers and every partition's assignment and state.

Reading never raises on what the store holds: partitions without a state are listed as
``uninitialised``, nodes that cannot be decoded as ``unreadable``.
"""

from __future__ import annotations

import attrs

from coordkit import layout
from coordkit.engine import states
from coordkit.engine.controllership import (
    UnreadableControllerNodeError,
    read_controller,
    stored_controller_epoch,
)
from coordkit.engine.states import TP
from coordkit.errors import LayoutError, NoNodeError, StoreError
from coordkit.model import NO_LEADER, TopicAssignment
from coordkit.paths import numeric_name
from coordkit.store import MetadataStore


@attrs.frozen
class PartitionView:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int

    @property
    def tp(self) -> TP:
        return (self.topic, self.partition)


@attrs.frozen
class ClusterView:
    """The cluster as read from the store."""

    controller: int | None
    epoch: int
    brokers: tuple[int, ...]
    partitions: tuple[PartitionView, ...]
    uninitialised: tuple[TP, ...] = ()
    #: Nodes whose values could not be decoded (left out of ``partitions``).
    unreadable: tuple[str, ...] = ()
    #: Topic → its id, for the topics whose node has one (Kafka 2.8+'s version 3).
    topic_ids: dict[str, str] = attrs.field(factory=dict)

    def leaders_per_broker(self) -> dict[int, int]:
        counts = dict.fromkeys(self.brokers, 0)
        for p in self.partitions:
            if p.leader != NO_LEADER:
                counts[p.leader] = counts.get(p.leader, 0) + 1
        return counts

    def offline(self) -> list[TP]:
        """Partitions without a live leader."""
        live = set(self.brokers)
        return [p.tp for p in self.partitions if p.leader not in live]

    def partition(self, topic: str, partition: int) -> PartitionView:
        for p in self.partitions:
            if p.topic == topic and p.partition == partition:
                return p
        raise KeyError(f"{topic}-{partition}")


def children(store: MetadataStore, path: str) -> list[str]:
    """``path``'s children, or none when the node does not exist."""
    try:
        return store.children(path)
    except NoNodeError:
        return []


def registered_brokers(store: MetadataStore) -> list[int]:
    """Broker ids registered under ``/brokers/ids`` (names that are not ids left out)."""
    return sorted(
        b for c in children(store, layout.BROKER_IDS) if (b := numeric_name(c)) is not None
    )


def read_view(store: MetadataStore) -> ClusterView:
    """Controller, epoch, brokers and every partition state, read from ``store``."""
    try:
        current = read_controller(store)
    except UnreadableControllerNodeError:
        current = None  # no controller can be elected until it is cleared
    try:
        stored_epoch = stored_controller_epoch(store)
    except UnreadableControllerNodeError:
        stored_epoch = None
    epoch = 0 if stored_epoch is None else stored_epoch[0]
    topics = sorted(children(store, layout.BROKER_TOPICS))
    topic_paths = [f"{layout.BROKER_TOPICS}/{t}" for t in topics]
    assignments: dict[str, TopicAssignment] = {}
    unreadable: list[str] = []
    for topic, path, result in zip(topics, topic_paths, store.get_many(topic_paths), strict=True):
        if not isinstance(result, StoreError):
            try:
                assignments[topic] = layout.TOPIC.decode(result[0], path)
            except LayoutError:
                unreadable.append(path)
    tps = [(t, p) for t, a in assignments.items() for p in sorted(a.partitions)]
    paths = [states.state_path(tp) for tp in tps]
    views: list[PartitionView] = []
    missing: list[TP] = []
    for tp, path, result in zip(tps, paths, store.get_many(paths), strict=True):
        if isinstance(result, StoreError):
            missing.append(tp)
            continue
        try:
            state = states.decode_state(path, result[0], result[1].version)
        except LayoutError:
            unreadable.append(path)
            continue
        views.append(
            PartitionView(
                tp[0],
                tp[1],
                tuple(assignments[tp[0]].partitions[tp[1]]),
                state.leader,
                state.leader_epoch,
                state.isr,
                state.controller_epoch,
            )
        )
    return ClusterView(
        controller=None if current is None else current[0].broker_id,
        epoch=epoch,
        brokers=tuple(registered_brokers(store)),
        partitions=tuple(views),
        uninitialised=tuple(missing),
        unreadable=tuple(unreadable),
        topic_ids={t: a.topic_id for t, a in assignments.items() if a.topic_id is not None},
    )

"""The cluster as read back from the store (what ``coordkit cluster`` prints and tests check):
controller, epoch, registered brokers and every partition's assignment and state.

Reading never raises on what the store holds: partitions without a state are listed as
``uninitialised``, nodes that cannot be decoded as ``unreadable``.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from coordkit.engine import states
from coordkit.engine.controllership import (
    UnreadableControllerNodeError,
    read_controller,
    stored_controller_epoch,
)
from coordkit.engine.states import TP
from coordkit.errors import LayoutError
from coordkit.kafka import layout
from coordkit.kafka.model import NO_LEADER
from coordkit.kafka.reader import read_topic_nodes
from coordkit.store import MetadataStore
from coordkit.store.paths import numeric_name
from coordkit.store.tree import children


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


def registered_brokers(store: MetadataStore) -> list[int]:
    """Broker ids registered under ``/brokers/ids`` (names that are not ids left out)."""
    return sorted(
        b for c in children(store, layout.BROKER_IDS) if (b := numeric_name(c)) is not None
    )


#: Partition-state node → (version, value, decoded state) last decoded in this process: a node
#: read again unchanged (every Metadata request reads its topics' states) is not decoded again.
_DECODED: dict[str, tuple[int, bytes, states.LeaderIsr]] = {}
#: Nodes remembered before the memo starts over (a bound on its memory, not a working set).
_DECODED_LIMIT = 1_000_000


def _decoded_state(path: str, data: bytes, version: int) -> states.LeaderIsr:
    known = _DECODED.get(path)
    if known is not None and known[0] == version and known[1] == data:
        return known[2]
    state = states.decode_state(path, data, version)  # raises LayoutError: nothing remembered
    if len(_DECODED) >= _DECODED_LIMIT:
        _DECODED.clear()
    _DECODED[path] = (version, data, state)
    return state


def read_view(store: MetadataStore, topics: Iterable[str] | None = None) -> ClusterView:
    """Controller, epoch, brokers and the partition states of ``topics`` (those that exist;
    ``None``: every topic), read from ``store``. Naming the topics keeps a read of one topic
    from decoding every partition of the cluster (a Metadata request names its topics)."""
    try:
        current = read_controller(store)
    except UnreadableControllerNodeError:
        current = None  # no controller can be elected until it is cleared
    try:
        stored_epoch = stored_controller_epoch(store)
    except UnreadableControllerNodeError:
        stored_epoch = None
    epoch = 0 if stored_epoch is None else stored_epoch[0]
    existing = children(store, layout.BROKER_TOPICS)
    if topics is not None:
        wanted = set(topics)
        existing = [t for t in existing if t in wanted]
    nodes = read_topic_nodes(store, sorted(existing), strict=False)
    assignments = nodes.assignments
    unreadable = list(nodes.unreadable)
    views: list[PartitionView] = []
    missing: list[TP] = []
    for tp, node in nodes.states.items():
        if node is None:
            missing.append(tp)
            continue
        path = states.state_path(tp)
        try:
            state = _decoded_state(path, node[0], node[1])
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

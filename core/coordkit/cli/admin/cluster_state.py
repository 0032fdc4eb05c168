"""What Kafka's tree holds, as the admin commands read it: broker registrations, topics with their
replica assignments, partition states and configs, and the pending admin requests.

Only reads (the commands that merely look open the store read-only); bulk reads go through
``get_many`` so a large cluster costs a few round trips. A node that does not match Kafka's schema
is refused with its path (:class:`~coordkit.errors.LayoutError`), never guessed at; a node that
vanished between listing and reading (a broker going away) is simply absent.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from coordkit.engine.controllership import read_controller
from coordkit.engine.snapshot import registered_brokers
from coordkit.errors import NoNodeError, StoreError
from coordkit.kafka import layout
from coordkit.kafka.model import NO_LEADER, BrokerInfo, PartitionState, TopicAssignment
from coordkit.kafka.reader import read_topic_nodes
from coordkit.store import MetadataStore
from coordkit.store.tree import children


@attrs.frozen
class Registration:
    """``/brokers/ids/N``: where broker N listens, and whether a live session owns the node (a
    broker's registration is ephemeral; a persistent one was written by hand or by a tool)."""

    id: int
    info: BrokerInfo
    ephemeral: bool


@attrs.frozen
class PartitionInfo:
    """One partition: its replicas (``/brokers/topics/T``) and state (``.../P/state``; ``None``
    when the controller has not created it yet)."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]
    state: PartitionState | None

    @property
    def leader(self) -> int:
        return NO_LEADER if self.state is None else self.state.leader

    @property
    def isr(self) -> tuple[int, ...]:
        return () if self.state is None else self.state.isr

    @property
    def under_replicated(self) -> bool:
        """Fewer in-sync replicas than replicas (kafka-topics.sh ``--under-replicated-partitions``)."""
        return len(self.isr) < len(self.replicas)

    def unavailable(self, live: frozenset[int]) -> bool:
        """No leader, or a leader that is not registered (``--unavailable-partitions``)."""
        return self.leader == NO_LEADER or self.leader not in live


@attrs.frozen
class TopicInfo:
    name: str
    assignment: TopicAssignment
    partitions: tuple[PartitionInfo, ...]
    config: dict[str, str]
    marked_for_deletion: bool

    @property
    def replication_factor(self) -> int:
        """Replicas per partition once any reassignment in progress completes."""
        return len(self.assignment.target_replicas(0)) if self.assignment.partitions else 0


def registrations(store: MetadataStore) -> dict[int, Registration]:
    """Every broker registered under ``/brokers/ids``, by id (children that are not broker ids
    are not registrations, and are left out)."""
    ids = registered_brokers(store)
    paths = [layout.broker_path(b) for b in ids]
    out: dict[int, Registration] = {}
    for broker, path, result in zip(ids, paths, store.get_many(paths), strict=True):
        if isinstance(result, NoNodeError):
            continue  # the broker went away since the listing
        if isinstance(result, StoreError):
            raise result
        data, stat = result
        out[broker] = Registration(broker, layout.BROKER.decode(data, path), stat.ephemeral)
    return out


def topic_names(store: MetadataStore) -> list[str]:
    return sorted(children(store, layout.BROKER_TOPICS))


def marked_for_deletion(store: MetadataStore) -> set[str]:
    """Topics queued under ``/admin/delete_topics``."""
    return set(children(store, layout.DELETE_TOPICS))


def controller(store: MetadataStore) -> int | None:
    """The broker holding ``/controller`` (``None`` when no controller is elected).

    :raises UnreadableControllerNodeError: ``/controller`` holds something else (the message
        says how to clear it).
    """
    current = read_controller(store)
    return None if current is None else current[0].broker_id


def pending_reassignment(store: MetadataStore) -> dict[tuple[str, int], tuple[int, ...]]:
    """What ``/admin/reassign_partitions`` still asks for (empty when no reassignment runs)."""
    try:
        data, _ = store.get(layout.REASSIGN_PARTITIONS)
    except NoNodeError:
        return {}
    return layout.decode_reassignment(data)


def pending_election(store: MetadataStore) -> list[tuple[str, int]] | None:
    """The partitions ``/admin/preferred_replica_election`` lists (``None`` when there is none)."""
    try:
        data, _ = store.get(layout.PREFERRED_REPLICA_ELECTION)
    except NoNodeError:
        return None
    return layout.decode_preferred_election(data)


def assignments(store: MetadataStore, topics: Sequence[str]) -> dict[str, TopicAssignment]:
    """``/brokers/topics/T`` of each of ``topics`` that exists."""
    return read_topic_nodes(store, topics, strict=True).assignments


def read_topics(store: MetadataStore, topics: Sequence[str]) -> list[TopicInfo]:
    """Assignment, partition states, config and deletion mark of each of ``topics`` that exists,
    in the order given."""
    nodes = read_topic_nodes(store, topics, strict=True)
    found = nodes.assignments
    deleting = marked_for_deletion(store) if found else set()
    config_paths = [layout.topic_config_path(t) for t in found]
    configs: dict[str, dict[str, str]] = {}
    for topic, path, result in zip(found, config_paths, store.get_many(config_paths), strict=True):
        if isinstance(result, NoNodeError):
            configs[topic] = {}
        elif isinstance(result, StoreError):
            raise result
        else:
            configs[topic] = dict(layout.TOPIC_CONFIG.decode(result[0], path).config)
    states = {
        tp: None
        if node is None
        else layout.PARTITION_STATE.decode(node[0], layout.partition_state_path(*tp))
        for tp, node in nodes.states.items()
    }
    out = []
    for topic, assignment in found.items():
        partitions = tuple(
            PartitionInfo(
                topic,
                p,
                tuple(assignment.partitions[p]),
                tuple(assignment.adding.get(p, ())),
                tuple(assignment.removing.get(p, ())),
                states[(topic, p)],
            )
            for p in sorted(assignment.partitions)
        )
        out.append(TopicInfo(topic, assignment, partitions, configs[topic], topic in deleting))
    return out

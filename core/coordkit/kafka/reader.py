"""The one reader of a cluster's topics in Kafka's layout: each topic's assignment node
(``/brokers/topics/T``) and its partitions' state nodes, two batched reads for any number of
topics. The admin commands read it strictly (a node that cannot be decoded, or a failed read, is
an error naming its path); the engine's snapshot leniently (such nodes are listed as unreadable
and left out), because what the store holds must never stop a broker answering."""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from coordkit.errors import LayoutError, NoNodeError, StoreError
from coordkit.kafka import layout
from coordkit.kafka.model import TopicAssignment
from coordkit.store import MetadataStore

TP = tuple[str, int]


@attrs.frozen
class TopicNodes:
    """What :func:`read_topic_nodes` found.

    :param assignments: topic → its decoded assignment, for the topics that exist.
    :param states: (topic, partition) → the raw state node (value, version), ``None`` when the
        partition has no state node yet; each reader decodes it into its own form.
    :param unreadable: paths of assignment nodes that could not be decoded (lenient reads only).
    """

    assignments: dict[str, TopicAssignment]
    states: dict[TP, tuple[bytes, int] | None]
    unreadable: tuple[str, ...] = ()


def read_topic_nodes(store: MetadataStore, topics: Iterable[str], *, strict: bool) -> TopicNodes:
    """The assignment and partition-state nodes of each of ``topics`` that exists.

    :raises LayoutError: (``strict``) an assignment node cannot be decoded.
    :raises StoreError: (``strict``) a read failed other than for a missing node.
    """
    names = list(topics)
    paths = [layout.topic_path(t) for t in names]
    assignments: dict[str, TopicAssignment] = {}
    unreadable: list[str] = []
    for topic, path, result in zip(names, paths, store.get_many(paths), strict=True):
        if isinstance(result, NoNodeError):
            continue
        if isinstance(result, StoreError):
            if strict:
                raise result
            continue  # lenient: a topic that cannot be read now is not there for this reader
        try:
            assignments[topic] = layout.TOPIC.decode(result[0], path)
        except LayoutError:
            if strict:
                raise
            unreadable.append(path)
    tps = [(t, p) for t, a in assignments.items() for p in sorted(a.partitions)]
    state_paths = [layout.partition_state_path(t, p) for t, p in tps]
    states: dict[TP, tuple[bytes, int] | None] = {}
    for tp, result in zip(tps, store.get_many(state_paths), strict=True):
        if isinstance(result, StoreError):
            if strict and not isinstance(result, NoNodeError):
                raise result
            states[tp] = None
        else:
            states[tp] = (result[0], result[1].version)
    return TopicNodes(assignments, states, tuple(unreadable))

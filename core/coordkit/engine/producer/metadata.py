"""Where a producer's cluster metadata comes from: the partition states in the store.

A real client asks a broker for metadata; here the producer reads what the brokers would answer
from: ``/brokers/topics/T`` (the partitions) and ``/brokers/topics/T/partitions/P/state`` (their
leaders), pipelined in one exchange per refresh. A partition whose state node is missing or says
leader ``-1`` has no leader. Which leaders are *reachable* comes from broker discovery.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Protocol, runtime_checkable

from coordkit.engine import states
from coordkit.engine.producer.discovery import BrokerDiscovery
from coordkit.errors import StoreError
from coordkit.kafka import layout
from coordkit.kafka.model import NO_LEADER
from coordkit.store import MetadataStore
from coordkit.strategies.partitioning import ClusterMetadata


@runtime_checkable
class MetadataSource(Protocol):
    """Answers metadata requests for a producer."""

    def fetch(self, topics: Collection[str]) -> ClusterMetadata:
        """Leaders of every partition of ``topics`` (topics that do not exist are left out)."""
        ...

    def reachable(self) -> frozenset[int] | None:
        """Brokers the producer can send to now (``None``: any)."""
        ...


class StoreMetadata:
    """Metadata read from the store; reachability from ``discovery``."""

    def __init__(self, store: MetadataStore, discovery: BrokerDiscovery):
        self.store = store
        self.discovery = discovery

    def reachable(self) -> frozenset[int] | None:
        return self.discovery.brokers()

    def fetch(self, topics: Collection[str]) -> ClusterMetadata:
        names = sorted(set(topics))
        topic_paths = [f"{layout.BROKER_TOPICS}/{t}" for t in names]
        partition_counts: dict[str, int] = {}
        for topic, path, result in zip(
            names, topic_paths, self.store.get_many(topic_paths), strict=True
        ):
            if not isinstance(result, StoreError):
                partition_counts[topic] = len(states.decode_assignment(path, result[0]))
        tps = [(t, p) for t, count in partition_counts.items() for p in range(count)]
        paths = [states.state_path(tp) for tp in tps]
        leaders: dict[str, list[int]] = {t: [NO_LEADER] * n for t, n in partition_counts.items()}
        for (topic, partition), path, result in zip(
            tps, paths, self.store.get_many(paths), strict=True
        ):
            if not isinstance(result, StoreError):
                leaders[topic][partition] = states.decode_state(path, result[0], -1).leader
        return ClusterMetadata(leaders, self.reachable())


class FixedMetadata:
    """Metadata set by hand (the lab's simulated cluster, tests without a store)."""

    def __init__(
        self,
        leaders: Mapping[str, Collection[int]],
        reachable: Collection[int] | None = None,
    ):
        self.set(leaders, reachable)

    def set(
        self, leaders: Mapping[str, Collection[int]], reachable: Collection[int] | None = None
    ) -> None:
        self._metadata = ClusterMetadata(
            {t: tuple(ls) for t, ls in leaders.items()},
            None if reachable is None else frozenset(reachable),
        )

    def reachable(self) -> frozenset[int] | None:
        return self._metadata.reachable

    def fetch(self, topics: Collection[str]) -> ClusterMetadata:
        return self._metadata

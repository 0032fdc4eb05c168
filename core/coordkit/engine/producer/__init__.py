"""The producer on the engine: partitioner plugins choose partitions, batches go to the leaders
named in the store's partition states, broker discovery decides which brokers a producer reaches.

* :mod:`~coordkit.engine.producer.producer` — :class:`Producer`, :class:`ProducerConfig`;
* :mod:`~coordkit.engine.producer.discovery` — ``static`` (four-layer) vs ``zookeeper``;
* :mod:`~coordkit.engine.producer.metadata` — metadata from the store (or fixed, for the lab);
* :mod:`~coordkit.engine.producer.accumulator` — per-partition batches;
* :mod:`~coordkit.engine.producer.transport` — produce requests into the replication model;
* :mod:`~coordkit.engine.producer.stats` — per-partition / per-broker counts and skew.
"""

from coordkit.engine.producer.accumulator import RecordMetadata
from coordkit.engine.producer.discovery import (
    DISCOVERY_NAMES,
    BrokerDiscovery,
    StaticDiscovery,
    ZooKeeperDiscovery,
    open_discovery,
)
from coordkit.engine.producer.errors import (
    BrokerUnavailableError,
    LeaderNotAvailableError,
    NotLeaderError,
    ProducerClosedError,
    ProducerError,
    RetriableSendError,
    UnknownTopicOrPartitionError,
)
from coordkit.engine.producer.metadata import FixedMetadata, MetadataSource, StoreMetadata
from coordkit.engine.producer.producer import Producer, ProducerConfig
from coordkit.engine.producer.stats import ProducerStats, ProducerTotals, skew
from coordkit.engine.producer.transport import ProduceTransport, ReplicationTransport

__all__ = [
    "DISCOVERY_NAMES",
    "BrokerDiscovery",
    "BrokerUnavailableError",
    "FixedMetadata",
    "LeaderNotAvailableError",
    "MetadataSource",
    "NotLeaderError",
    "ProduceTransport",
    "Producer",
    "ProducerClosedError",
    "ProducerConfig",
    "ProducerError",
    "ProducerStats",
    "ProducerTotals",
    "RecordMetadata",
    "ReplicationTransport",
    "RetriableSendError",
    "StaticDiscovery",
    "StoreMetadata",
    "UnknownTopicOrPartitionError",
    "ZooKeeperDiscovery",
    "open_discovery",
    "skew",
]

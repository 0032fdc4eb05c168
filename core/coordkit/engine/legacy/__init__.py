"""The legacy ZooKeeper consumer (Kafka 0.8's ``ZookeeperConsumerConnector``, seed 004) on any
metadata store, split by concept:

* :mod:`~coordkit.engine.legacy.registration` — consumer ids, consumer threads,
  ``/consumers/G/ids/C``;
* :mod:`~coordkit.engine.legacy.assignment` — assignment over consumer threads with the registered
  assignors (``range``, ``roundrobin``, ``range-ceil``);
* :mod:`~coordkit.engine.legacy.ownership` — claiming and releasing ``/consumers/G/owners/T/P``;
* :mod:`~coordkit.engine.legacy.rebalancer` — the rebalance with its retries and records;
* :mod:`~coordkit.engine.legacy.fetching` — what is being consumed, and offsets to commit;
* :mod:`~coordkit.engine.legacy.history` — ownership history and the double-owner check;
* :mod:`~coordkit.engine.legacy.consumer` — :class:`LegacyConsumer`, the lifecycle;
* :mod:`~coordkit.engine.legacy.view` — the group read back from the store.

Typical use::

    consumer = LegacyConsumer(store, "billing", {"orders": 2}, assignor="range",
                              config=LegacyConsumerConfig(rebalance_backoff_ms=200))
    consumer.start()            # registers, watches, first rebalance
    consumer.owned()            # {TopicPartition("orders", 0): "billing_host-...-0", ...}
    consumer.rebalances.count   # rebalances so far; .attempts, .conflicts, .ops, .records
    consumer.close()            # or .crash()
"""

from coordkit.engine.legacy.assignment import AssignmentContext, assign_threads
from coordkit.engine.legacy.config import LegacyConsumerConfig
from coordkit.engine.legacy.consumer import ConsumerState, LegacyConsumer
from coordkit.engine.legacy.errors import (
    ConsumerIdInUseError,
    LegacyConsumerError,
    LegacyRebalanceFailedError,
)
from coordkit.engine.legacy.history import (
    OwnershipChange,
    OwnershipEvent,
    OwnershipHistory,
    OwnershipInterval,
)
from coordkit.engine.legacy.rebalancer import RebalanceLog, RebalanceRecord
from coordkit.engine.legacy.registration import ConsumerThreadId, new_consumer_id
from coordkit.engine.legacy.view import LegacyGroupView, read_group

__all__ = [
    "AssignmentContext",
    "ConsumerIdInUseError",
    "ConsumerState",
    "ConsumerThreadId",
    "LegacyConsumer",
    "LegacyConsumerConfig",
    "LegacyConsumerError",
    "LegacyGroupView",
    "LegacyRebalanceFailedError",
    "OwnershipChange",
    "OwnershipEvent",
    "OwnershipHistory",
    "OwnershipInterval",
    "RebalanceLog",
    "RebalanceRecord",
    "assign_threads",
    "new_consumer_id",
    "read_group",
]

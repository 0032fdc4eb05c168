"""Consumer offset storage strategies: ``zookeeper`` (seed 001's ``/consumers/G/offsets/T/P``) and
``offsets-topic`` (Kafka's ``__consumer_offsets`` model).

Look one up with ``get_plugin_manager().offset_store(name)`` and call it with a store session and
options: ``offset_store("offsets-topic")(store, num_partitions=50)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from coordkit import hookimpl
from coordkit_offsets.offsets_topic import OffsetsTopicStorage, OffsetsTopicStorageFactory
from coordkit_offsets.writes import ConcurrentModificationError
from coordkit_offsets.zookeeper import ZooKeeperOffsetStorage, ZooKeeperOffsetStorageFactory

__all__ = [
    "ConcurrentModificationError",
    "OffsetsTopicStorage",
    "OffsetsTopicStorageFactory",
    "ZooKeeperOffsetStorage",
    "ZooKeeperOffsetStorageFactory",
]


@hookimpl
def coordkit_register_offset_stores(register: Callable[[Any], None]) -> None:
    register(ZooKeeperOffsetStorageFactory())
    register(OffsetsTopicStorageFactory())

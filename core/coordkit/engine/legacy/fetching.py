"""The consumer's view of its partitions while it consumes (Kafka's ``topicRegistry`` of
``PartitionTopicInfo`` and the fetcher threads, minus the network).

Fetching starts only after every owner node of a rebalance was claimed and stops before any is
released, so "this consumer fetches partition P" implies "its thread owns ``/consumers/G/owners/T/P``".
Consuming is modelled as advancing a partition's consumed offset; committing writes the consumed
offsets that moved since the last checkpoint.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

import attrs

from coordkit.engine.legacy.registration import ConsumerThreadId
from coordkit.kafka.model import TopicPartition


@attrs.define
class PartitionTopicInfo:
    """A partition being consumed: its thread, consumed offset, and the offset last committed or
    fetched (only offsets that moved from it are committed, as Kafka's ``checkpointedZkOffsets``)."""

    tp: TopicPartition
    thread: ConsumerThreadId
    consumed_offset: int
    checkpointed_offset: int


class Fetcher:
    """The partitions one consumer is fetching; safe to use from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._infos: dict[TopicPartition, PartitionTopicInfo] = {}

    @property
    def running(self) -> bool:
        with self._lock:
            return bool(self._infos)

    def start(self, infos: Mapping[TopicPartition, PartitionTopicInfo]) -> None:
        with self._lock:
            self._infos = dict(infos)

    def stop(self) -> dict[TopicPartition, PartitionTopicInfo]:
        """Stop fetching; returns what was being fetched (to commit and release)."""
        with self._lock:
            stopped, self._infos = self._infos, {}
            return stopped

    def owners(self) -> dict[TopicPartition, ConsumerThreadId]:
        with self._lock:
            return {tp: info.thread for tp, info in self._infos.items()}

    def positions(self) -> dict[TopicPartition, int]:
        with self._lock:
            return {tp: info.consumed_offset for tp, info in self._infos.items()}

    def consume(self, tp: TopicPartition, count: int) -> int:
        """Advance ``tp``'s consumed offset by ``count`` records; returns the new offset.

        :raises KeyError: ``tp`` is not being fetched by this consumer.
        """
        if not isinstance(count, int) or count < 0:
            raise ValueError(f"record count must be a non-negative integer, got {count!r}")
        with self._lock:
            info = self._infos[tp]
            info.consumed_offset += count
            return info.consumed_offset

    def uncommitted(
        self, infos: Mapping[TopicPartition, PartitionTopicInfo] | None = None
    ) -> dict[TopicPartition, int]:
        """Consumed offsets that moved since their checkpoint (of ``infos``, default: current)."""
        with self._lock:
            source = self._infos if infos is None else infos
            return {
                tp: info.consumed_offset
                for tp, info in source.items()
                if info.consumed_offset != info.checkpointed_offset
            }

    def checkpointed(
        self,
        offsets: Mapping[TopicPartition, int],
        infos: Mapping[TopicPartition, PartitionTopicInfo] | None = None,
    ) -> None:
        with self._lock:
            source = self._infos if infos is None else infos
            for tp, offset in offsets.items():
                info = source.get(tp)
                if info is not None:
                    info.checkpointed_offset = offset

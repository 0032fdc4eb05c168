"""Kafka's consumer protocol (``ConsumerProtocolSubscription`` / ``ConsumerProtocolAssignment``),
read only to describe a group, never to run it.

The group coordinator hands a client's metadata and assignment bytes back untouched. ``coordkit
serve`` also reads them, when a group's protocol type is ``consumer``, to give the engine the
subscribed topics and assigned partitions its observers, its persisted metadata and ``coordkit
group describe`` show. Bytes that do not parse describe nothing (no topics, no partitions); the
group works the same.
"""

from __future__ import annotations

import struct

from attrs import frozen

from coordkit.engine.groups import Subscription
from coordkit.model import TopicPartition
from coordkit.protocol import wire

CONSUMER = "consumer"
_int16 = struct.Struct(">h")
_int32 = struct.Struct(">i")
_NOTHING = Subscription(())


@frozen
class _Reader:
    data: bytes

    def int16(self, pos: int) -> tuple[int, int]:
        return _int16.unpack_from(self.data, pos)[0], pos + 2

    def int32(self, pos: int) -> tuple[int, int]:
        return _int32.unpack_from(self.data, pos)[0], pos + 4

    def partitions(self, pos: int) -> tuple[list[TopicPartition], int]:
        """``[topic string, [int32]]`` pairs."""
        out: list[TopicPartition] = []
        count, pos = wire.read_array_len(self.data, pos, 4)
        for _ in range(count):
            topic, pos = wire.read_string(self.data, pos)
            n, pos = wire.read_array_len(self.data, pos, 4)
            for _ in range(n):
                partition, pos = self.int32(pos)
                out.append(TopicPartition(topic, partition))
        return out, pos


def read_subscription(data: bytes) -> Subscription:
    """The topics (and, from version 1, the owned partitions, generation and rack) of a
    subscription; an empty one when ``data`` is not a consumer subscription."""
    reader = _Reader(data)
    try:
        version, pos = reader.int16(0)
        if version < 0:
            return _NOTHING
        count, pos = wire.read_array_len(data, pos, 2)
        topics = []
        for _ in range(count):
            topic, pos = wire.read_string(data, pos)
            topics.append(topic)
        _user_data, pos = wire.read_nullable_bytes(data, pos)
        owned: list[TopicPartition] = []
        generation, rack = -1, None
        if version >= 1 and pos < len(data):
            owned, pos = reader.partitions(pos)
        if version >= 2 and pos < len(data):
            generation, pos = reader.int32(pos)
        if version >= 3 and pos < len(data):
            rack, pos = wire.read_nullable_string(data, pos)
        return Subscription(tuple(t for t in topics if t), owned, generation, rack)
    except (wire.Fail, struct.error, IndexError, ValueError):
        return _NOTHING


def read_assignment(data: bytes) -> frozenset[TopicPartition]:
    """The partitions of an assignment; none when ``data`` is not a consumer assignment."""
    reader = _Reader(data)
    try:
        version, pos = reader.int16(0)
        if version < 0:
            return frozenset()
        partitions, _ = reader.partitions(pos)
        return frozenset(partitions)
    except (wire.Fail, struct.error, IndexError, ValueError):
        return frozenset()


def _string(out: bytearray, text: str) -> None:
    raw = text.encode()
    out += _int16.pack(len(raw)) + raw


def _partitions(
    out: bytearray, partitions: frozenset[TopicPartition] | set[TopicPartition]
) -> None:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out += _int32.pack(len(by_topic))
    for topic, numbers in by_topic.items():
        _string(out, topic)
        out += _int32.pack(len(numbers))
        for number in numbers:
            out += _int32.pack(number)


def subscription_bytes(topics: list[str], *, version: int = 0) -> bytes:
    """A consumer subscription (no user data, nothing owned), as clients encode it."""
    out = bytearray(_int16.pack(version))
    out += _int32.pack(len(topics))
    for topic in topics:
        _string(out, topic)
    out += _int32.pack(-1)  # no user data
    if version >= 1:
        out += _int32.pack(0)
    if version >= 2:
        out += _int32.pack(-1)
    return bytes(out)


def assignment_bytes(partitions: set[TopicPartition] | frozenset[TopicPartition]) -> bytes:
    """A consumer assignment of version 0 (no user data)."""
    out = bytearray(_int16.pack(0))
    _partitions(out, frozenset(partitions))
    out += _int32.pack(-1)
    return bytes(out)

"""Consumer-protocol bytes as a client sends them, for tests that play a group member by hand:
written with the one codec (:mod:`coordkit.protocol.consumer`) from engine values."""

from __future__ import annotations

from collections.abc import Iterable

from coordkit.kafka.model import TopicPartition
from coordkit.protocol.consumer import encode_assignment, encode_subscription


def subscription_bytes(topics: Iterable[str], *, version: int = 0) -> bytes:
    """A subscription to ``topics`` (no user data, nothing owned)."""
    return encode_subscription(topics, version=version)


def assignment_bytes(partitions: Iterable[TopicPartition]) -> bytes:
    """An assignment of ``partitions`` (version 0, no user data)."""
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return encode_assignment(by_topic)

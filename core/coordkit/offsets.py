"""Committed consumer offsets: the value type and the storage contract offset plugins implement.

A storage strategy is registered with ``coordkit_register_offset_stores`` as a factory with a
``name``; ``factory(store, **options)`` returns an :class:`OffsetStorage` bound to one metadata
store session. Built-ins (plugin ``coordkit_offsets``):

* ``zookeeper`` — seed 001's layout, one node per partition: ``/consumers/G/offsets/T/P`` holding
  the offset as decimal text;
* ``offsets-topic`` — Kafka's ``__consumer_offsets`` model: records keyed by
  (group, topic, partition), placed in partition ``coordinator_partition(group)`` of the topic,
  last value per key wins (compaction).

A commit returns only once the backend has acknowledged it (durably, as far as the backend's
``characteristics.durable`` says) and is all-or-nothing: either every offset of the call is stored
or none is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol, runtime_checkable

import attrs
from attrs import validators

from coordkit.model import TopicPartition


@attrs.frozen
class OffsetAndMetadata:
    """A committed position: the offset of the *next* record to consume, as Kafka stores it.

    :param offset: next offset to read (>= 0).
    :param metadata: free text the committer attached (``OffsetCommitRequest``'s metadata).
    :param commit_timestamp: milliseconds since the epoch when the commit was made.
    :param leader_epoch: leader epoch of the last consumed record, -1 when unknown.
    """

    offset: int = attrs.field(validator=[validators.instance_of(int), validators.ge(0)])
    metadata: str = attrs.field(default="", validator=validators.instance_of(str))
    commit_timestamp: int = -1
    leader_epoch: int = -1


@runtime_checkable
class OffsetStorage(Protocol):
    """Where a group's committed offsets live, bound to one store session."""

    name: str

    def commit(self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """Store ``offsets`` for ``group_id`` atomically; returns once acknowledged.

        :raises coordkit.errors.StoreError: nothing was stored.
        """

    def fetch(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Committed offsets of ``group_id`` (all, or only ``partitions``); missing ones are absent."""

    def groups(self) -> list[str]:
        """Groups with at least one committed offset."""

    def delete_group(self, group_id: str) -> None:
        """Forget every offset of ``group_id`` (no error if it has none)."""


@runtime_checkable
class OffsetStorageFactory(Protocol):
    """What ``coordkit_register_offset_stores`` registers."""

    name: str

    def __call__(self, store: object, **options: object) -> OffsetStorage: ...

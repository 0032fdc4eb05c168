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
``characteristics.durable`` says; ``require_durable=True`` refuses a backend that is not) and is
all-or-nothing: either every offset of the call is stored or none is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol, runtime_checkable

import attrs
from attrs import validators

from coordkit.errors import CoordkitError
from coordkit.kafka.model import TopicPartition, validate_topic_name
from coordkit.store import Check


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

    def commit(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        *,
        fence: Sequence[Check] = (),
    ) -> None:
        """Store ``offsets`` for ``group_id`` atomically; returns once acknowledged.

        :param fence: version checks placed first in the same atomic write: a coordinator passes
            the version of its offsets partition's state node, so that a broker that has lost the
            partition cannot write (as a deposed leader cannot append to the log in Kafka).
        :raises coordkit.errors.BadVersionError: a fence check failed (``op_index`` names it);
            nothing was stored.
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

    def delete_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition], *, fence: Sequence[Check] = ()
    ) -> None:
        """Forget the offsets of ``partitions`` of ``group_id`` (those it has none of are
        skipped), in one atomic write after the ``fence`` checks (Kafka's OffsetDelete).

        :raises coordkit.errors.BadVersionError: a fence check failed; nothing was deleted.
        """


@runtime_checkable
class OffsetStorageFactory(Protocol):
    """What ``coordkit_register_offset_stores`` registers."""

    name: str

    def __call__(self, store: object, **options: object) -> OffsetStorage: ...


# -- input checks shared by every storage -----------------------------------------------------------


class InvalidOffsetRequestError(CoordkitError, ValueError):
    """An offset commit or fetch was given bad input; the message names the group and the entry.

    :param group_id: the group of the request (as given).
    :param reason: what is wrong, naming the partition or field.
    """

    def __init__(self, group_id: object, reason: str):
        self.group_id = group_id
        self.reason = reason
        super().__init__(f"offsets of group {group_id!r}: {reason}")


_FORBIDDEN_GROUP_IDS = ("", ".", "..")


def validate_group_id(group_id: object) -> str:
    """A group id every storage can use as one node name: a non-empty string without ``/``, not
    ``.`` or ``..``, and without control characters (ZooKeeper's path rules)."""
    if not isinstance(group_id, str):
        raise InvalidOffsetRequestError(
            group_id, f"group id must be a string, got {type(group_id).__name__}"
        )
    if group_id in _FORBIDDEN_GROUP_IDS or "/" in group_id:
        raise InvalidOffsetRequestError(
            group_id, "group id must be non-empty, must not be '.' or '..' and must not contain '/'"
        )
    if any(ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F for ch in group_id):
        raise InvalidOffsetRequestError(group_id, "group id must not contain control characters")
    return group_id


def validate_partition(group_id: str, tp: object) -> TopicPartition:
    """``tp`` as a :class:`TopicPartition` with a legal topic name and a non-negative int partition."""
    if not isinstance(tp, TopicPartition):
        raise InvalidOffsetRequestError(
            group_id, f"expected a TopicPartition, got {tp!r} ({type(tp).__name__})"
        )
    try:
        validate_topic_name(tp.topic)
    except ValueError as exc:
        raise InvalidOffsetRequestError(group_id, f"partition {tp!r}: {exc}") from None
    partition = tp.partition
    if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
        raise InvalidOffsetRequestError(
            group_id, f"partition {tp!r}: partition must be a non-negative integer"
        )
    return tp


def validate_commit(
    group_id: object, offsets: Mapping[TopicPartition, OffsetAndMetadata]
) -> dict[TopicPartition, OffsetAndMetadata]:
    """Check a commit request before anything is written; returns it as a plain dict."""
    group = validate_group_id(group_id)
    if not isinstance(offsets, Mapping):
        raise InvalidOffsetRequestError(
            group,
            f"offsets must be a mapping of TopicPartition to OffsetAndMetadata, got "
            f"{type(offsets).__name__}",
        )
    checked: dict[TopicPartition, OffsetAndMetadata] = {}
    for tp, value in offsets.items():
        validate_partition(group, tp)
        if not isinstance(value, OffsetAndMetadata):
            raise InvalidOffsetRequestError(
                group, f"{tp}: expected an OffsetAndMetadata, got {value!r}"
            )
        offset = value.offset
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise InvalidOffsetRequestError(
                group, f"{tp}: field 'offset' must be a non-negative integer, got {offset!r}"
            )
        checked[tp] = value
    return checked


def validate_fetch(
    group_id: object, partitions: Iterable[TopicPartition] | None
) -> tuple[str, list[TopicPartition] | None]:
    """Check a fetch request; returns the group id and the partitions (``None`` means all)."""
    group = validate_group_id(group_id)
    if partitions is None:
        return group, None
    return group, [validate_partition(group, tp) for tp in partitions]

"""The state of in-flight records of a share partition (Kafka's ``RecordState``,
``AcknowledgeType`` and ``InFlightState``), and the acknowledgement batches a client sends.

A record is in flight from its first acquisition until the share partition's start offset moves
past it. Its state:

* AVAILABLE: may be acquired by the next fetch of any member;
* ACQUIRED: delivered to one member, under an acquisition lock that ends at a deadline;
* ACKNOWLEDGED: accepted by its member (consumed);
* ARCHIVED: rejected, a gap, or released once its delivery count reached the limit: never
  delivered again.

(Kafka 4.4 also has ARCHIVING, a record on its way to a dead-letter queue; coordkit has no
dead-letter queue, so a record is never in it.)
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence

import attrs


class RecordState(enum.IntEnum):
    """Kafka's ``RecordState``, with its ids (the persisted ``deliveryState``)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVING = 3
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    """Kafka's ``AcknowledgeType`` (the ids of ShareFetch/ShareAcknowledge ``AcknowledgeTypes``);
    0 is a gap (an offset the batch does not hold, e.g. compacted away)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


@attrs.define
class InFlightRecord:
    """One in-flight record (Kafka's ``InFlightState`` of one offset): its state, how often it
    was delivered, and while ACQUIRED its owner and lock deadline (milliseconds, monotonic)."""

    state: RecordState
    delivery_count: int
    member_id: str | None = None
    lock_deadline: float | None = None

    def release(self, delivery_count_limit: int) -> None:
        """Back to AVAILABLE — or ARCHIVED once it was delivered ``delivery_count_limit`` times
        (Kafka's ``InFlightState.tryUpdateState`` to AVAILABLE)."""
        archived = self.delivery_count >= delivery_count_limit
        self.state = RecordState.ARCHIVED if archived else RecordState.AVAILABLE
        self.member_id = None
        self.lock_deadline = None

    def settle(self, state: RecordState) -> None:
        """ACKNOWLEDGED or ARCHIVED: the record is done."""
        self.state = state
        self.member_id = None
        self.lock_deadline = None


@attrs.frozen
class AcquiredRange:
    """Offsets ``first_offset..last_offset`` (inclusive) acquired with one delivery count (a
    ShareFetch response's ``AcquiredRecords`` entry)."""

    first_offset: int
    last_offset: int
    delivery_count: int


def _types(value: Iterable[int]) -> tuple[int, ...]:
    return tuple(value)


@attrs.frozen
class AcknowledgementBatch:
    """Offsets ``first_offset..last_offset`` (inclusive) and their acknowledge types: one type
    for the whole range, or one per offset (Kafka's ``ShareAcknowledgementBatch``)."""

    first_offset: int
    last_offset: int
    acknowledge_types: tuple[int, ...] = attrs.field(converter=_types)

    def type_of(self, offset: int) -> int:
        if len(self.acknowledge_types) == 1:
            return self.acknowledge_types[0]
        return self.acknowledge_types[offset - self.first_offset]


def batches_error(batches: Sequence[AcknowledgementBatch], *, renew_allowed: bool) -> str | None:
    """What is wrong with one partition's acknowledgement batches (INVALID_REQUEST, as Kafka
    4.4 answers them), or ``None``: each batch's first offset at most its last, one type or one
    per offset, known types (renew, 4, only in a request that says it carries renewals).
    Overlapping batches are not refused here: the second sight of an offset is
    INVALID_RECORD_STATE (:meth:`~.share_partition.SharePartition.acknowledge`), as Kafka's."""
    highest = AcknowledgeType.RENEW if renew_allowed else AcknowledgeType.REJECT
    for batch in batches:
        if batch.first_offset > batch.last_offset:
            return f"batch {batch.first_offset}..{batch.last_offset}: first offset after last"
        size = batch.last_offset - batch.first_offset + 1
        if len(batch.acknowledge_types) not in (1, size):
            return (
                f"batch {batch.first_offset}..{batch.last_offset}: "
                f"{len(batch.acknowledge_types)} acknowledge types for {size} offsets"
            )
        if any(not 0 <= t <= highest for t in batch.acknowledge_types):
            return f"batch {batch.first_offset}..{batch.last_offset}: unknown acknowledge type"
    return None

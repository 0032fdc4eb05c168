"""One share partition of one share group on its leader (Kafka's ``SharePartition``).

The records from the start offset up to the end offset (the first never acquired) are in
flight, each with its state (:mod:`.in_flight`). A fetch acquires AVAILABLE records in the
window and then new records past its end, whole log batches at a time, until the fetch has
``max_records`` (a batch is never split) or the window holds ``max_record_locks`` records
(Kafka's ``group.share.partition.max.record.locks``: no new records are acquired then, released
ones still are). Each acquisition locks its records for ``record_lock_duration_ms`` to the
fetching member and counts a delivery. A lock that expires, or a release, makes the record
AVAILABLE again — or ARCHIVED once it was delivered ``delivery_count_limit`` times. Accepted
records are ACKNOWLEDGED, rejected ones (and gaps) ARCHIVED. The start offset moves over every
ACKNOWLEDGED or ARCHIVED record at the front of the window.

Time is handed in (milliseconds of a monotonic clock), so the model is tested without waiting.
The object lives on the event loop's thread: nothing here takes a lock.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Iterator, Sequence

import attrs

from coordkit.serve import errors
from coordkit.serve.dataplane.share.in_flight import (
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRange,
    InFlightRecord,
    RecordState,
)
from coordkit.serve.dataplane.share.share_state import ShareState, StateBatch

#: Kafka 4.4's defaults (``ShareGroupConfig``).
DEFAULT_DELIVERY_COUNT_LIMIT = 5
DEFAULT_RECORD_LOCK_DURATION_MS = 30_000
DEFAULT_MAX_RECORD_LOCKS = 2_000

_DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
_ACKNOWLEDGED_STATE = {
    AcknowledgeType.ACCEPT: RecordState.ACKNOWLEDGED,
    AcknowledgeType.REJECT: RecordState.ARCHIVED,
    AcknowledgeType.GAP: RecordState.ARCHIVED,
}


@attrs.frozen
class SharePartitionConfig:
    """The settings of a share partition (Kafka's broker configs ``group.share.*``, or the
    group's own configs where the group sets them)."""

    delivery_count_limit: int = DEFAULT_DELIVERY_COUNT_LIMIT
    record_lock_duration_ms: int = DEFAULT_RECORD_LOCK_DURATION_MS
    max_record_locks: int = DEFAULT_MAX_RECORD_LOCKS


class SharePartition:
    """The in-flight records of one share partition, from ``start_offset`` on."""

    def __init__(self, start_offset: int, config: SharePartitionConfig | None = None) -> None:
        self.config = config or SharePartitionConfig()
        self.start_offset = start_offset
        #: The first offset never acquired (Kafka's ``endOffset`` + 1).
        self.end_offset = start_offset
        #: Every offset of ``[start_offset, end_offset)``.
        self._records: dict[int, InFlightRecord] = {}
        #: The ACQUIRED records (a subset of ``_records``), for lock expiry and releases.
        self._acquired: dict[int, InFlightRecord] = {}
        #: The start offset the next write carries, and the settled records from there to the
        #: start offset: Kafka writes a change's state with the start offset it had before the
        #: change and moves the start offset once the write is done (the next write carries it).
        self.written_start = start_offset
        self._trail: dict[int, InFlightRecord] = {}

    # -- reading ------------------------------------------------------------------------------

    def record(self, offset: int) -> InFlightRecord | None:
        """The in-flight state of ``offset`` (``None``: not in flight)."""
        return self._records.get(offset)

    def in_flight(self) -> int:
        """How many records the window holds (what ``max_record_locks`` bounds)."""
        return self.end_offset - self.start_offset

    def next_fetch_offset(self) -> int:
        """Where the next fetch reads the log from: the first AVAILABLE record in flight, else
        the end offset (Kafka's ``nextFetchOffset``)."""
        for offset in range(self.start_offset, self.end_offset):
            if self._records[offset].state == RecordState.AVAILABLE:
                return offset
        return self.end_offset

    def can_acquire(self) -> bool:
        """Whether a fetch could acquire anything: an AVAILABLE record in flight, or room for
        new records (Kafka's ``canAcquireRecords``)."""
        return self.next_fetch_offset() < self.end_offset or (
            self.in_flight() < self.config.max_record_locks
        )

    def next_lock_deadline(self) -> float | None:
        """The earliest deadline of an acquisition lock (``None``: no record is acquired)."""
        return min((r.lock_deadline or 0.0 for r in self._acquired.values()), default=None)

    def acquired_by(self, member_id: str) -> list[int]:
        return sorted(o for o, r in self._acquired.items() if r.member_id == member_id)

    # -- acquiring ----------------------------------------------------------------------------

    def acquire(
        self,
        member_id: str,
        batches: Iterable[tuple[int, int]],
        max_records: int,
        now_ms: float,
        held: Container[int] = frozenset(),
        aborted: Container[int] = frozenset(),
    ) -> list[AcquiredRange]:
        """Acquire for ``member_id`` from the log batches ``batches`` (each ``(first offset,
        last offset)``, in log order, as read from :meth:`next_fetch_offset`); whole batches,
        until ``max_records`` records are acquired; the acquired offsets as ranges of one
        delivery count each. ``held``: AVAILABLE offsets not to acquire now (released by the
        request that fetches). ``aborted``: offsets of aborted transactions (a read_committed
        fetch): acquired, then ARCHIVED at once and left out of the answer, as Kafka's
        ``filterAbortedTransactionalAcquiredRecords`` does — they are never delivered."""
        deadline = now_ms + self.config.record_lock_duration_ms
        acquired: list[tuple[int, int]] = []  # (offset, delivery count)
        for first, last in batches:
            if len(acquired) >= max_records:
                break
            if last < self.start_offset:
                continue
            for offset in range(max(first, self.start_offset), min(last + 1, self.end_offset)):
                record = self._records[offset]
                if record.state == RecordState.AVAILABLE and offset not in held:
                    self._lock(offset, record, member_id, deadline)
                    acquired.append((offset, record.delivery_count))
            if last < self.end_offset:
                continue
            if self.in_flight() >= self.config.max_record_locks:
                break
            # Offsets between the window's end and the batch are none of the log's (compacted
            # away): they are never delivered.
            for offset in range(self.end_offset, first):
                self._records[offset] = InFlightRecord(RecordState.ARCHIVED, 0)
            for offset in range(max(first, self.end_offset), last + 1):
                record = self._records[offset] = InFlightRecord(RecordState.AVAILABLE, 0)
                self._lock(offset, record, member_id, deadline)
                acquired.append((offset, 1))
            self.end_offset = last + 1
        if aborted:
            delivered = []
            for offset, count in acquired:
                if offset in aborted:
                    self._acquired.pop(offset).settle(RecordState.ARCHIVED)
                else:
                    delivered.append((offset, count))
            acquired = delivered
        self._advance_start()
        return list(_ranges(acquired))

    def _lock(self, offset: int, record: InFlightRecord, member_id: str, deadline: float) -> None:
        record.state = RecordState.ACQUIRED
        record.delivery_count += 1
        record.member_id = member_id
        record.lock_deadline = deadline
        self._acquired[offset] = record

    # -- acknowledging and releasing ----------------------------------------------------------

    def acknowledge(
        self, member_id: str, batches: Sequence[AcknowledgementBatch], now_ms: float
    ) -> int:
        """Apply ``member_id``'s acknowledgements (batches checked by
        :func:`~.in_flight.batches_error`), all or none, as Kafka 4.4 answers them: offsets
        before the start offset are passed over (already settled); an offset at or past the end
        offset is INVALID_REQUEST; one not ACQUIRED by ``member_id`` — or acknowledged twice in
        the request — INVALID_RECORD_STATE; the first such offset decides, and nothing
        changes."""
        seen: set[int] = set()
        for batch in batches:
            for offset in range(max(batch.first_offset, self.start_offset), batch.last_offset + 1):
                if offset >= self.end_offset:
                    return errors.INVALID_REQUEST
                record = self._acquired.get(offset)
                if record is None or record.member_id != member_id or offset in seen:
                    return errors.INVALID_RECORD_STATE
                seen.add(offset)
        self._begin_change()
        for batch in batches:
            for offset in range(max(batch.first_offset, self.start_offset), batch.last_offset + 1):
                kind = AcknowledgeType(batch.type_of(offset))
                record = self._acquired[offset]
                if kind == AcknowledgeType.RENEW:
                    record.lock_deadline = now_ms + self.config.record_lock_duration_ms
                    continue
                del self._acquired[offset]
                if kind == AcknowledgeType.RELEASE:
                    record.release(self.config.delivery_count_limit)
                else:
                    record.settle(_ACKNOWLEDGED_STATE[kind])
        self._advance_start()
        return errors.NONE

    def expire_locks(self, now_ms: float) -> bool:
        """Release every record whose acquisition lock ended by ``now_ms``; whether any did."""
        expired = [o for o, r in self._acquired.items() if (r.lock_deadline or 0.0) <= now_ms]
        return self._release(expired)

    def release_member(self, member_id: str) -> bool:
        """Release every record ``member_id`` holds (it left its group, or closed its share
        session); whether it held any."""
        return self._release(self.acquired_by(member_id))

    def _release(self, offsets: Iterable[int]) -> bool:
        releasing = list(offsets)
        if not releasing:
            return False
        self._begin_change()
        for offset in releasing:
            self._acquired.pop(offset).release(self.config.delivery_count_limit)
        self._advance_start()
        return True

    def move_start_to(self, log_start: int) -> bool:
        """The log's start moved to ``log_start`` (retention, DeleteRecords): records before it
        are gone, whatever their state (Kafka's ``updateCacheAndOffsets``); whether the start
        offset moved."""
        if log_start <= self.start_offset:
            return False
        for offset in range(self.start_offset, min(log_start, self.end_offset)):
            self._records.pop(offset, None)
            self._acquired.pop(offset, None)
        self.start_offset = log_start
        self.end_offset = max(self.end_offset, log_start)
        self._advance_start()
        self._begin_change()  # the records before the log start are gone: written from here
        return True

    def _advance_start(self) -> None:
        """Move the start offset over the ACKNOWLEDGED and ARCHIVED records at the front (kept
        for the next write, see :attr:`written_start`)."""
        offset = self.start_offset
        while offset < self.end_offset and self._records[offset].state in _DONE:
            self._trail[offset] = self._records.pop(offset)
            offset += 1
        self.start_offset = offset

    def _begin_change(self) -> None:
        """A change to be written begins: it is written with the start offset as it is now."""
        self.written_start = self.start_offset
        self._trail.clear()

    # -- persisted state ----------------------------------------------------------------------

    def persisted(self, leader_epoch: int, state_epoch: int) -> ShareState:
        """What is persisted of this partition, from :attr:`written_start` (as Kafka writes
        it: DescribeShareGroupOffsets shows the same start offset and lag): an ACQUIRED record as
        it was before it was acquired (AVAILABLE, one delivery fewer), since an acquisition is not
        written; trailing records never delivered are left out."""
        batches: list[StateBatch] = []
        for offset, state, count in self._settled():
            last = batches[-1] if batches else None
            if (
                last is not None
                and last.last_offset == offset - 1
                and (last.delivery_state, last.delivery_count) == (state, count)
            ):
                batches[-1] = attrs.evolve(last, last_offset=offset)
            else:
                batches.append(StateBatch(offset, offset, state, count))
        while (
            batches
            and batches[-1].delivery_state == RecordState.AVAILABLE
            and (batches[-1].delivery_count == 0)
        ):
            batches.pop()
        return ShareState(self.written_start, leader_epoch, state_epoch, tuple(batches))

    def _settled(self) -> Iterator[tuple[int, RecordState, int]]:
        for offset in range(self.written_start, self.end_offset):
            record = self._records.get(offset) or self._trail[offset]
            if record.state == RecordState.ACQUIRED:
                yield offset, RecordState.AVAILABLE, record.delivery_count - 1
            else:
                yield offset, record.state, record.delivery_count

    @classmethod
    def restored(
        cls, state: ShareState, config: SharePartitionConfig | None = None
    ) -> SharePartition:
        """The partition a new leader resumes from ``state``: its batches in flight, offsets
        between them AVAILABLE and never delivered."""
        partition = cls(state.start_offset, config)
        for batch in state.batches:
            for offset in range(partition.end_offset, batch.first_offset):
                partition._records[offset] = InFlightRecord(RecordState.AVAILABLE, 0)
            for offset in range(batch.first_offset, batch.last_offset + 1):
                partition._records[offset] = InFlightRecord(
                    batch.delivery_state, batch.delivery_count
                )
            partition.end_offset = batch.last_offset + 1
        partition._advance_start()
        partition._begin_change()
        return partition


def _ranges(acquired: Sequence[tuple[int, int]]) -> Iterator[AcquiredRange]:
    """Consecutive offsets of one delivery count, as ranges."""
    start = 0
    for i in range(1, len(acquired) + 1):
        if i == len(acquired) or acquired[i] != (acquired[i - 1][0] + 1, acquired[start][1]):
            yield AcquiredRange(acquired[start][0], acquired[i - 1][0], acquired[start][1])
            start = i

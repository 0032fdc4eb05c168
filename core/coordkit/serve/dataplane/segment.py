"""One segment of a partition's log, in memory (Kafka's ``LogSegment``): the record batches
from its base offset on, as they sit in its ``.log`` file, with its offset and time indexes
(:mod:`coordkit.serve.dataplane.index`) kept as Kafka keeps them, so that the files written
beside it (:mod:`coordkit.serve.dataplane.segment_files`) are Kafka's.

A read finds its first batch by binary search over the batches' last offsets; a lookup by
timestamp starts where the time index points (the first batch whose timestamps reach past the
largest indexed timestamp at or below the target) and reads on from there, at most an index
interval's worth of batches, as Kafka's ``LogSegment.findOffsetByTimestamp`` does.
"""

from __future__ import annotations

import bisect

import attrs

from coordkit.protocol.records import BatchHeader
from coordkit.serve.dataplane.index import (
    DEFAULT_INDEX_INTERVAL_BYTES,
    DEFAULT_MAX_INDEX_SIZE,
    OFFSET_ENTRY_SIZE,
    TIME_ENTRY_SIZE,
    OffsetIndex,
    TimeIndex,
)
from coordkit.serve.dataplane.transaction_index import TransactionIndex

#: Offsets within a segment are 32-bit (relative to its base offset in Kafka's indexes).
MAX_RELATIVE_OFFSET = 2**31 - 1


@attrs.frozen
class RollParams:
    """What Kafka's ``LogSegment.shouldRoll`` weighs for the batch about to be appended."""

    max_segment_bytes: int
    max_segment_ms: int
    max_timestamp_in_messages: int
    max_offset_in_messages: int
    messages_size: int
    now: int


class LogSegment:
    """Batches from ``base_offset`` on; ``created_ms``: when the segment was made (wall clock,
    for ``segment.ms`` when its batches carry no timestamp)."""

    def __init__(
        self,
        base_offset: int,
        *,
        created_ms: int,
        index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
    ) -> None:
        self.base_offset = base_offset
        self.created_ms = created_ms
        self.index_interval_bytes = index_interval_bytes
        self.batches: list[bytes] = []
        self.headers: list[BatchHeader] = []
        #: Each batch's byte position in the segment and last offset (bisected by reads).
        self.positions: list[int] = []
        self.last_offsets: list[int] = []
        self.size = 0
        self.offset_index = OffsetIndex(base_offset, max_index_size // OFFSET_ENTRY_SIZE)
        self.time_index = TimeIndex(base_offset, max_index_size // TIME_ENTRY_SIZE)
        #: The transactions aborted by a marker in this segment (``.txnindex``).
        self.txn_index = TransactionIndex()
        self._bytes_since_last_index_entry = 0
        #: The first batch's max timestamp (Kafka's ``rollingBasedTimestamp``).
        self.rolling_based_timestamp: int | None = None
        self.max_timestamp_so_far = -1
        self.offset_of_max_timestamp_so_far = -1

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size})"

    @property
    def next_offset(self) -> int:
        return self.last_offsets[-1] + 1 if self.last_offsets else self.base_offset

    @property
    def largest_timestamp(self) -> int:
        """The newest record's timestamp (Kafka falls back to the file's modification time when
        no record has one; here, when the segment was made)."""
        return self.max_timestamp_so_far if self.max_timestamp_so_far >= 0 else self.created_ms

    # -- writing ------------------------------------------------------------------------------

    def append(self, batch: bytes, header: BatchHeader) -> None:
        """Append one batch (its offsets follow on), indexing it when an index interval of
        bytes went by since the last entry (Kafka's ``LogSegment.append``)."""
        position = self.size
        if position == 0:
            self.rolling_based_timestamp = header.max_timestamp
        if header.max_timestamp > self.max_timestamp_so_far:
            self.max_timestamp_so_far = header.max_timestamp
            self.offset_of_max_timestamp_so_far = header.last_offset
        if self._bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(header.last_offset, position)
            self.time_index.maybe_append(
                self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far
            )
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += len(batch)
        self.batches.append(batch)
        self.headers.append(header)
        self.positions.append(position)
        self.last_offsets.append(header.last_offset)
        self.size += len(batch)

    def should_roll(self, params: RollParams) -> bool:
        """Kafka's ``LogSegment.shouldRoll``: the batch would take the segment past
        ``segment.bytes``, or it is ``segment.ms`` newer than the segment's first batch, or an
        index is full, or its offsets do not fit 32 bits relative to the base."""
        if self.size == 0:
            return False  # Kafka replaces an empty active segment by one at the same offset
        if self.rolling_based_timestamp is not None and self.rolling_based_timestamp >= 0:
            waited = params.max_timestamp_in_messages - self.rolling_based_timestamp
        else:
            waited = params.now - self.created_ms
        return (
            self.size > params.max_segment_bytes - params.messages_size
            or waited > params.max_segment_ms
            or self.offset_index.is_full
            or self.time_index.is_full
            or params.max_offset_in_messages - self.base_offset > MAX_RELATIVE_OFFSET
        )

    def on_become_inactive(self) -> None:
        """The segment stops being the active one: the time index gets the largest timestamp
        (Kafka's ``onBecomeInactiveSegment``, so that a lookup past every entry finds it)."""
        self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far)

    def truncate_to(self, offset: int) -> None:
        """Cut every batch from the one holding ``offset`` on; the indexes and timestamps as
        they were before those batches came (the rest appended again)."""
        kept = bisect.bisect_left(self.last_offsets, offset)
        batches, headers = self.batches[:kept], self.headers[:kept]
        self.batches, self.headers, self.positions, self.last_offsets = [], [], [], []
        self.size = 0
        self.offset_index = OffsetIndex(self.base_offset, self.offset_index.max_entries)
        self.time_index = TimeIndex(self.base_offset, self.time_index.max_entries)
        self.txn_index.truncate_to(offset)
        self._bytes_since_last_index_entry = 0
        self.rolling_based_timestamp = None
        self.max_timestamp_so_far = self.offset_of_max_timestamp_so_far = -1
        for batch, header in zip(batches, headers, strict=True):
            self.append(batch, header)

    # -- reading ------------------------------------------------------------------------------

    def slot_of(self, offset: int) -> int:
        """The index of the first batch whose last offset is at or past ``offset`` (the batch
        count when none is)."""
        return bisect.bisect_left(self.last_offsets, offset)

    def slot_by_timestamp(self, target: int, starting_offset: int) -> int | None:
        """The first batch holding a record at or past ``starting_offset`` whose max timestamp
        is at or past ``target``, from where the time index points; ``None`` when none is."""
        _, indexed = self.time_index.lookup(target)
        slot = self.slot_of(max(indexed, starting_offset))
        for position in range(slot, len(self.headers)):
            if self.headers[position].max_timestamp >= target:
                return position
        return None

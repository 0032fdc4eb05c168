"""A log segment's sparse indexes, as Kafka keeps them beside each ``<base offset>.log``:

* :class:`OffsetIndex` (``.index``): entries of 8 bytes, a 4-byte offset relative to the
  segment's base offset and the 4-byte byte position of the batch it is found in, big-endian;
* :class:`TimeIndex` (``.timeindex``): entries of 12 bytes, an 8-byte timestamp and the 4-byte
  relative offset from which every record with a later timestamp is found.

Both grow by one entry every ``index.interval.bytes`` of batches (Kafka's ``LogSegment.append``
and ``recover`` rule), so a read starts near its target instead of at the segment's start; the
time index takes an entry only when the largest timestamp so far grew. A file is exactly its
entries (Kafka trims its preallocated files to that when a segment stops being active, and reads
``length / entry size`` entries when it opens one).

:meth:`OffsetIndex.parse` and :meth:`TimeIndex.parse` read a file and refuse what Kafka's index
sanity checks refuse (a length that is not whole entries, offsets going back or below the base);
:mod:`coordkit.serve.dataplane.segment_files` also checks every entry against the segment's
batches before trusting a file, and rebuilds one that fails, as Kafka's log recovery does.
"""

from __future__ import annotations

import bisect
import struct

import attrs

#: Kafka's defaults: ``log.index.interval.bytes`` and ``log.index.size.max.bytes``.
DEFAULT_INDEX_INTERVAL_BYTES = 4096
DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
OFFSET_ENTRY_SIZE = _OFFSET_ENTRY.size
TIME_ENTRY_SIZE = _TIME_ENTRY.size
#: Kafka's ``RecordBatch.NO_TIMESTAMP``: what a time index lookup finds below every entry.
NO_TIMESTAMP = -1


class CorruptIndexError(ValueError):
    """An index file Kafka's sanity checks would refuse (Kafka's ``CorruptIndexException``)."""


@attrs.define
class OffsetIndex:
    """Offsets (absolute here, relative in the file) and the byte positions of their batches."""

    base_offset: int
    max_entries: int = DEFAULT_MAX_INDEX_SIZE // OFFSET_ENTRY_SIZE
    offsets: list[int] = attrs.field(factory=list)
    positions: list[int] = attrs.field(factory=list)

    def __len__(self) -> int:
        return len(self.offsets)

    @property
    def is_full(self) -> bool:
        return len(self.offsets) >= self.max_entries

    def append(self, offset: int, position: int) -> None:
        if self.offsets and offset <= self.offsets[-1]:
            raise ValueError(f"offset {offset} is not above the last indexed {self.offsets[-1]}")
        self.offsets.append(offset)
        self.positions.append(position)

    def lookup(self, target: int) -> tuple[int, int]:
        """The largest entry at or below ``target``: ``(offset, position)``; the segment's start
        when there is none (Kafka's ``OffsetIndex.lookup``)."""
        slot = bisect.bisect_right(self.offsets, target) - 1
        if slot < 0:
            return self.base_offset, 0
        return self.offsets[slot], self.positions[slot]

    def truncate_to(self, offset: int) -> None:
        """Drop the entries at or above ``offset``."""
        kept = bisect.bisect_left(self.offsets, offset)
        del self.offsets[kept:], self.positions[kept:]

    def entry_bytes(self, start: int = 0) -> bytes:
        """The file's bytes of entries ``start`` on."""
        return b"".join(
            _OFFSET_ENTRY.pack(offset - self.base_offset, position)
            for offset, position in zip(self.offsets[start:], self.positions[start:], strict=True)
        )

    @classmethod
    def parse(cls, data: bytes, base_offset: int, where: str) -> OffsetIndex:
        """:raises CorruptIndexError: not whole entries, or offsets not growing from the base."""
        if len(data) % OFFSET_ENTRY_SIZE:
            raise CorruptIndexError(f"{where}: {len(data)} bytes is not whole 8-byte entries")
        index = cls(base_offset)
        for relative, position in _OFFSET_ENTRY.iter_unpack(data):
            if relative < 0 or (index.offsets and base_offset + relative <= index.offsets[-1]):
                raise CorruptIndexError(
                    f"{where}: entry {len(index)}: offset {base_offset + relative} does not "
                    "follow the last"
                )
            index.append(base_offset + relative, position)
        return index


@attrs.define
class TimeIndex:
    """Timestamps, growing, and the offset from which a record of each is found."""

    base_offset: int
    max_entries: int = DEFAULT_MAX_INDEX_SIZE // TIME_ENTRY_SIZE
    timestamps: list[int] = attrs.field(factory=list)
    offsets: list[int] = attrs.field(factory=list)

    def __len__(self) -> int:
        return len(self.timestamps)

    @property
    def is_full(self) -> bool:
        return len(self.timestamps) >= self.max_entries

    def maybe_append(self, timestamp: int, offset: int) -> bool:
        """Kafka's ``TimeIndex.maybeAppend``: an entry only for a timestamp above the last
        one's; whether it was added."""
        if self.timestamps and timestamp <= self.timestamps[-1]:
            return False
        if timestamp <= NO_TIMESTAMP:
            return False
        self.timestamps.append(timestamp)
        self.offsets.append(offset)
        return True

    def lookup(self, target: int) -> tuple[int, int]:
        """The largest entry whose timestamp is at or below ``target``: ``(timestamp, offset)``;
        ``(NO_TIMESTAMP, base offset)`` when there is none."""
        slot = bisect.bisect_right(self.timestamps, target) - 1
        if slot < 0:
            return NO_TIMESTAMP, self.base_offset
        return self.timestamps[slot], self.offsets[slot]

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose offset is at or above ``offset``."""
        kept = bisect.bisect_left(self.offsets, offset)
        del self.timestamps[kept:], self.offsets[kept:]

    def entry_bytes(self, start: int = 0) -> bytes:
        return b"".join(
            _TIME_ENTRY.pack(timestamp, offset - self.base_offset)
            for timestamp, offset in zip(self.timestamps[start:], self.offsets[start:], strict=True)
        )

    @classmethod
    def parse(cls, data: bytes, base_offset: int, where: str) -> TimeIndex:
        """:raises CorruptIndexError: not whole entries, timestamps or offsets going back."""
        if len(data) % TIME_ENTRY_SIZE:
            raise CorruptIndexError(f"{where}: {len(data)} bytes is not whole 12-byte entries")
        index = cls(base_offset)
        for timestamp, relative in _TIME_ENTRY.iter_unpack(data):
            offset = base_offset + relative
            if (
                relative < 0
                or (index.offsets and offset < index.offsets[-1])
                or not index.maybe_append(timestamp, offset)
            ):
                raise CorruptIndexError(
                    f"{where}: entry {len(index)}: timestamp {timestamp} at offset {offset} does "
                    "not follow the last"
                )
        return index

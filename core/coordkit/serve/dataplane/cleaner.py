"""The log cleaner of compacted topics (Kafka's ``LogCleaner.Cleaner``): it keeps the newest
record of every key, at its offset.

One cleaning of a log (:meth:`Cleaner.clean`) is given its dirty section, the offsets from the
first dirty one (where the last cleaning ended) to the first uncleanable one (the first segment
reaching the high watermark, the active segment, or ``min.compaction.lag.ms``; see
:mod:`coordkit.serve.dataplane.cleaner_manager`). It

1. builds an :class:`OffsetMap` of the dirty section: each key's last offset there;
2. groups every segment below the end of that map (clean and dirty alike) into groups no larger
   than a segment (``segment.bytes``, Kafka's ``groupSegmentsBySize``);
3. copies each group into one new segment, batch by batch (:func:`filter_batch`, Kafka's
   ``MemoryRecords.filterTo``): a record stays when it is past the map, or is the newest of its
   key — a tombstone (null value) only until its batch's delete horizon; a record without key
   goes. A batch keeps its base offset, last offset, leader epoch and producer fields; a batch
   that lost every record goes, unless it is an idempotent producer's last (kept empty, for its
   sequence) or the last of the cleaning; a batch that keeps tombstones gets its delete horizon
   (``delete.retention.ms`` from now, in its base timestamp, attribute bit 6) the first time;
4. swaps the new segment in for the group (:meth:`PartitionLog.replace_segments
   <coordkit.serve.dataplane.log.PartitionLog.replace_segments>`; on disk through Kafka's
   ``.cleaned``/``.swap`` files) with its indexes built as it is filled.

Offsets never change, so a consumer reading from the start sees the latest value of every key
at the offset it was written at, and fewer records below it.
"""

from __future__ import annotations

import logging

import attrs

from coordkit.protocol import records
from coordkit.protocol.records import Record, RecordBatch
from coordkit.serve.dataplane.log import PartitionLog
from coordkit.serve.dataplane.producer_state import CONTROL, TRANSACTIONAL
from coordkit.serve.dataplane.segment import LogSegment

log = logging.getLogger("coordkit.serve")

#: Kafka's ``log.cleaner.dedupe.buffer.size`` (128 MiB) over its 24 bytes per entry (a 16-byte
#: MD5 of the key and an 8-byte offset), times ``log.cleaner.io.buffer.load.factor`` (0.9): the
#: keys one cleaning maps at most (Kafka keeps hashes; this map keeps the keys themselves).
MAX_MAP_ENTRIES = int(134_217_728 / 24 * 0.9)
#: A batch attribute: its base timestamp is the delete horizon of its tombstones (KIP-534).
DELETE_HORIZON = 0x40
_TRANSACTION_BITS = TRANSACTIONAL | CONTROL


class OffsetMap:
    """Each key's latest offset in the dirty section (Kafka's ``SkimpyOffsetMap``), and the
    latest offset mapped."""

    def __init__(self, max_entries: int = MAX_MAP_ENTRIES) -> None:
        self.max_entries = max_entries
        self._offsets: dict[bytes, int] = {}
        self.latest_offset = -1

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def full(self) -> bool:
        return len(self._offsets) >= self.max_entries

    def put(self, key: bytes, offset: int) -> None:
        self._offsets[key] = offset
        self.latest_offset = max(self.latest_offset, offset)

    def get(self, key: bytes) -> int:
        """The key's latest offset; -1 when the dirty section does not hold it."""
        return self._offsets.get(key, -1)

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = max(self.latest_offset, offset)


@attrs.frozen
class LogToClean:
    """A log and its dirty section (Kafka's ``LogToClean``): ``first_dirty`` up to
    ``first_uncleanable`` (a segment's base offset); the bytes of its clean and dirty segments."""

    log: PartitionLog
    first_dirty: int
    first_uncleanable: int
    clean_bytes: int
    cleanable_bytes: int
    #: ``max.compaction.lag.ms`` passed for a dirty segment: cleaned whatever its ratio.
    needs_compaction_now: bool = False

    @property
    def cleanable_ratio(self) -> float:
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0


@attrs.frozen
class CleanerStats:
    """What one cleaning did: batches and records read and kept, segments replaced."""

    records_read: int = 0
    records_kept: int = 0
    segments_before: int = 0
    segments_after: int = 0


class Cleaner:
    """Cleans one log at a time (Kafka's ``Cleaner``); ``max_map_entries`` bounds its map."""

    def __init__(self, max_map_entries: int = MAX_MAP_ENTRIES) -> None:
        self.max_map_entries = max_map_entries

    def clean(self, to_clean: LogToClean, now: int) -> tuple[int, CleanerStats]:
        """Clean ``to_clean``'s log: ``(the offset the next cleaning starts from, stats)``."""
        partition_log = to_clean.log
        offset_map = self.build_offset_map(partition_log, to_clean.first_dirty,
                                           to_clean.first_uncleanable)  # fmt: skip
        end_offset = offset_map.latest_offset + 1
        producers_last = _last_batches_of_producers(partition_log)
        below = [s for s in partition_log.segments[:-1] if s.base_offset < end_offset]
        read = kept = 0
        groups = group_segments_by_size(below, partition_log.config.segment_bytes)
        for group in groups:
            cleaned, group_read, group_kept = self._clean_segments(
                partition_log, group, offset_map, producers_last, to_clean.first_uncleanable, now
            )
            partition_log.replace_segments(cleaned, group)
            read += group_read
            kept += group_kept
        return end_offset, CleanerStats(read, kept, len(below), len(groups))

    def build_offset_map(self, partition_log: PartitionLog, start: int, end: int) -> OffsetMap:
        """Kafka's ``buildOffsetMap``: each key's last offset in the segments from the one
        holding ``start`` up to ``end`` (a segment's base offset), records from ``start`` on;
        the map's latest offset reaches ``end - 1`` unless the map filled up first."""
        offset_map = OffsetMap(self.max_map_entries)
        dirty = [s for s in partition_log.segments[:-1] if s.next_offset > start
                 and s.base_offset < end]  # fmt: skip
        for number, segment in enumerate(dirty):
            following = dirty[number + 1].base_offset if number + 1 < len(dirty) else end
            for batch_bytes, header in zip(segment.batches, segment.headers, strict=True):
                if header.last_offset < start:
                    continue
                if header.attributes & _TRANSACTION_BITS:
                    offset_map.update_latest_offset(header.last_offset)
                    continue  # see _clean_segments: transactional batches are kept whole
                batch = records.decode_batch(batch_bytes, verify_crc=False)
                keyed = [r for r in batch.records if r.key is not None and r.offset >= start]
                if len(offset_map) + len(keyed) > offset_map.max_entries:
                    log.info("cleaner: offset map full at %s keys, cleaning up to offset %s",
                             len(offset_map), offset_map.latest_offset)  # fmt: skip
                    return offset_map
                for record in keyed:
                    assert record.key is not None
                    offset_map.put(record.key, record.offset)
                offset_map.update_latest_offset(header.last_offset)
            # Kafka's fast forward over a gap of offsets at a segment's end.
            offset_map.update_latest_offset(following - 1)
        return offset_map

    def _clean_segments(
        self,
        partition_log: PartitionLog,
        group: list[LogSegment],
        offset_map: OffsetMap,
        producers_last: dict[int, int],
        upper_bound: int,
        now: int,
    ) -> tuple[LogSegment, int, int]:
        """Kafka's ``cleanSegments``: ``group`` copied into one new segment at its first base
        offset; ``(the segment, records read, records kept)``."""
        config = partition_log.config
        cleaned = LogSegment(group[0].base_offset, created_ms=group[-1].created_ms,
                             index_interval_bytes=config.index_interval_bytes,
                             max_index_size=config.max_index_size)  # fmt: skip
        read = kept = 0
        for segment in group:
            for batch_bytes, header in zip(segment.batches, segment.headers, strict=True):
                # Kafka's RETAIN_EMPTY: a producer's last batch (its sequence), and the last
                # batch of the cleaning (the log's last offset below it).
                producer_last = producers_last.get(header.producer_id, -1) == header.last_offset
                retain_empty = producer_last or header.last_offset + 1 == upper_bound
                if header.attributes & _TRANSACTION_BITS:
                    # Transactional records and markers are kept whole, with the segments'
                    # aborted transactions (Kafka removes aborted records and, past the delete
                    # horizon, markers; coordkit's cleaner does not yet: it keeps more).
                    out: bytes | None = batch_bytes
                    batch_read = batch_kept = header.record_count
                else:
                    out, batch_read, batch_kept = filter_batch(
                        batch_bytes, offset_map, now, config.delete_retention_ms,
                        retain_empty=retain_empty,
                    )  # fmt: skip
                read += batch_read
                kept += batch_kept
                if out is not None:
                    cleaned.append(out, records.read_batch_header(out))
            for aborted in segment.txn_index.entries:
                cleaned.txn_index.append(aborted)
        cleaned.on_become_inactive()
        return cleaned, read, kept


def filter_batch(
    batch_bytes: bytes,
    offset_map: OffsetMap,
    now: int,
    delete_retention_ms: int,
    *,
    retain_empty: bool,
) -> tuple[bytes | None, int, int]:
    """One batch as Kafka's ``MemoryRecords.filterTo`` leaves it: ``(its bytes, or None when it
    goes; records read; records kept)``. A batch keeping all its records and needing no new
    delete horizon keeps its bytes."""
    batch = records.decode_batch(batch_bytes, verify_crc=False)
    horizon = batch.base_timestamp if batch.has_delete_horizon else None
    retain_deletes = horizon is None or now < horizon
    kept = [r for r in batch.records if _retain(r, offset_map, retain_deletes)]
    read = len(batch.records)
    if kept:
        tombstones = any(r.value is None for r in kept)
        set_horizon = tombstones and horizon is None
        if len(kept) == read and not set_horizon:
            return batch_bytes, read, len(kept)
        if set_horizon:
            horizon = now + delete_retention_ms
        return _rebuilt(batch, tuple(kept), horizon), read, len(kept)
    if retain_empty:
        empty = attrs.evolve(batch, records=(), base_timestamp=-1, compression="none",
                             has_delete_horizon=False)  # fmt: skip
        return records.encode_batch(empty), read, 0
    return None, read, 0


def _retain(record: Record, offset_map: OffsetMap, retain_deletes: bool) -> bool:
    """Kafka's ``Cleaner.shouldRetainRecord``."""
    if record.offset > offset_map.latest_offset:
        return True
    if record.key is None:
        return False  # Kafka counts it as invalid and drops it
    newest = record.offset >= offset_map.get(record.key)
    return newest and (record.value is not None or retain_deletes)


def _rebuilt(batch: RecordBatch, kept: tuple[Record, ...], horizon: int | None) -> bytes:
    """``batch`` with only ``kept``, as Kafka's ``buildRetainedRecordsInto`` writes it: the same
    base and last offset, producer fields, codec and timestamp type; the base timestamp the
    delete horizon when there is one, else the first record's; the max timestamp the records'
    (a log-append-time batch keeps its own)."""
    append_time = batch.timestamp_type == records.TIMESTAMP_LOG_APPEND_TIME
    rebuilt = attrs.evolve(
        batch,
        records=kept,
        base_timestamp=horizon if horizon is not None else kept[0].timestamp,
        max_timestamp=batch.max_timestamp if append_time else max(r.timestamp for r in kept),
        has_delete_horizon=horizon is not None,
    )
    return records.encode_batch(rebuilt)


def group_segments_by_size(segments: list[LogSegment], max_size: int) -> list[list[LogSegment]]:
    """Kafka's ``groupSegmentsBySize``: consecutive segments whose sizes together stay within
    ``max_size`` (and whose offsets stay within 32 bits of the group's base), each group one
    cleaned segment."""
    groups: list[list[LogSegment]] = []
    for segment in segments:
        if groups:
            group = groups[-1]
            size = sum(s.size for s in group)
            if (size + segment.size <= max_size
                    and segment.next_offset - 1 - group[0].base_offset <= 2**31 - 1):  # fmt: skip
                group.append(segment)
                continue
        groups.append([segment])
    return groups


def _last_batches_of_producers(partition_log: PartitionLog) -> dict[int, int]:
    """Each idempotent producer's last batch's last offset in the log (Kafka's
    ``lastRecordsOfActiveProducers``: that batch keeps the producer's sequence)."""
    last: dict[int, int] = {}
    for segment in partition_log.segments:
        for header in segment.headers:
            if header.producer_id >= 0:
                last[header.producer_id] = header.last_offset
    return last

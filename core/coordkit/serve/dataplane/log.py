"""A partition replica's records, in memory: record batches (format v2) kept as the bytes the
producer sent, with the leader's offsets and leader epoch written into them.

Every broker of a partition's replica set keeps its own :class:`PartitionLog`: the leader appends
what producers send (:meth:`PartitionLog.append`: CRC-32C, lengths and record counts checked,
idempotent producers' sequences checked, offsets assigned) and followers copy the leader's
batches as they are (:meth:`PartitionLog.append_copied`, see :mod:`coordkit.serve.dataplane.replicas`).
Each log keeps Kafka's leader epoch cache (which epoch began at which offset), so that a follower
of a new leader cuts exactly the records the new leader does not have
(:meth:`PartitionLog.divergence`), and the producer state of its batches.

Compression: batches are kept as sent, so any codec passes through (none, gzip, snappy, lz4,
zstd; the consumer decompresses); an unknown codec id is refused.

A log is a list of segments (:mod:`coordkit.serve.dataplane.segment`, Kafka's ``LogSegment``
with its offset and time indexes), the last one active: a new one rolls as Kafka's roll
(``segment.bytes``, ``segment.ms``, a full index). Retention (:mod:`coordkit.serve.dataplane.retention`) deletes whole
segments and moves the log start; a follower's log start follows its leader's. The settings are
the topic's :class:`~coordkit.serve.dataplane.log_config.LogConfig`.

Logs live in memory; with a log directory (``coordkit serve --data-dir``) they are written
through to it and loaded from it (:mod:`coordkit.serve.dataplane.logdir`), fsynced as
``flush.messages`` and ``flush.ms`` say.

A broker's logs are its :class:`~coordkit.serve.dataplane.broker_logs.BrokerLogs`. Every log
lives on the event loop's thread (see :mod:`coordkit.serve.listener`), so nothing here takes a
lock.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs

from coordkit.protocol import records
from coordkit.protocol.errors import ProtocolError
from coordkit.protocol.records import BatchHeader
from coordkit.serve import errors
from coordkit.serve.dataplane import log_validator
from coordkit.serve.dataplane.log_config import LogConfig
from coordkit.serve.dataplane.produced_batches import checked_batches
from coordkit.serve.dataplane.producer_state import (
    BatchMetadata,
    ProducerStates,
    VerificationGuard,
)
from coordkit.serve.dataplane.segment import LogSegment, RollParams

if TYPE_CHECKING:
    from coordkit.serve.dataplane.segment_files import PartitionSegments


#: ListOffsets' special timestamps (Kafka's ``ListOffsetsRequest.LATEST_TIMESTAMP`` and so on).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
_AFTER_EVERY_OFFSET = 2**63


@attrs.frozen
class Appended:
    """What a leader's append did: ``error`` (``NONE``: appended, or a duplicate of an earlier
    batch of an idempotent producer, answered with that batch's offset), the first offset, the
    records appended now and the offset after the last record the producer waits for."""

    error: int
    base_offset: int = -1
    records: int = 0
    end_offset: int = -1
    #: What Kafka answers as the append time: -1 for an append (create-time topics), the
    #: original batch's max timestamp for a duplicate (Kafka's ``UnifiedLog`` answers a
    #: duplicate with the metadata kept for it).
    log_append_time: int = -1


def wall_ms() -> int:
    return int(time.time() * 1000)


class PartitionLog:
    """One replica's log (Kafka's ``UnifiedLog`` over its ``LocalLog``): segments in offset
    order, the last one active; ``log_start`` is the first offset a reader may ask for,
    ``log_end`` the next offset to assign."""

    def __init__(
        self,
        files: PartitionSegments | None = None,
        config: LogConfig | None = None,
        *,
        log_start: int = 0,
        clock: Callable[[], int] = wall_ms,
    ) -> None:
        self.config = config or LogConfig()
        self.clock = clock
        self.segments: list[LogSegment] = []
        #: The segments' base offsets, for bisecting a fetch position.
        self._bases: list[int] = []
        #: Kafka's leader epoch cache: ``(epoch, first offset)``, epochs ascending.
        self._epochs: list[tuple[int, int]] = []
        self.producers = ProducerStates()
        self.log_start = self.log_end = log_start
        self._add_segment(log_start)
        #: Where appends and truncations are written through (``None``: memory only).
        self.files = files
        #: Records appended since the last fsync (Kafka's ``unflushedMessages``), and when.
        self.unflushed_messages = 0
        self.last_flush_ms = clock()
        if files is not None:
            files.log_start, files.end_offset = self.log_start, self.log_end

    @classmethod
    def loaded(
        cls,
        stored: list[tuple[int, bytes]],
        files: PartitionSegments,
        config: LogConfig | None = None,
        *,
        checkpointed_start: int = 0,
        clock: Callable[[], int] = wall_ms,
    ) -> PartitionLog:
        """The log whose segments ``stored`` holds (``(base offset, checked batches)``, see
        :meth:`~coordkit.serve.dataplane.segment_files.PartitionSegments.load`), writing on to
        ``files``: the leader epoch cache and the producers' state rebuilt from the batches'
        headers. It starts at its first segment's base offset, or at the checkpointed log start
        past it, and ends after its last batch (an empty last segment's base: Kafka rolls one
        at the log end)."""
        first = stored[0][0] if stored else 0
        partition_log = cls(config=config, log_start=first, clock=clock)
        partition_log.segments, partition_log._bases = [], []
        for base, data in stored:
            partition_log.log_end = max(partition_log.log_end, base)
            partition_log._add_segment(partition_log.log_end if partition_log.segments else base)
            for header, raw in records.iter_batches(data, verify_crc=False):
                partition_log._new_epoch(header.partition_leader_epoch)
                partition_log._keep(bytes(raw), header, roll=False)
        if not partition_log.segments:
            partition_log._add_segment(first)
        for inactive in partition_log.segments[:-1]:
            inactive.on_become_inactive()
        partition_log.files = files
        files.check_indexes(partition_log.segments)
        files.end_offset = partition_log.log_end
        files.log_start = partition_log.log_start
        partition_log.maybe_increment_log_start(min(checkpointed_start, partition_log.log_end))
        files.epochs_changed(partition_log._epochs)
        return partition_log

    def __len__(self) -> int:
        return sum(len(segment.batches) for segment in self.segments)

    @property
    def active(self) -> LogSegment:
        return self.segments[-1]

    @property
    def size(self) -> int:
        return sum(segment.size for segment in self.segments)

    def _add_segment(self, base: int) -> LogSegment:
        segment = LogSegment(base, created_ms=self.clock(),
                             index_interval_bytes=self.config.index_interval_bytes,
                             max_index_size=self.config.max_index_size)  # fmt: skip
        self.segments.append(segment)
        self._bases.append(base)
        return segment

    # -- writing ------------------------------------------------------------------------------

    def append(
        self,
        data: bytes,
        leader_epoch: int,
        *,
        verify_crc: bool = True,
        verified: VerificationGuard | None = None,
        verification: bool = False,
    ) -> Appended:
        """Append every batch of a Produce request's records field as the leader.

        All batches are checked (magic 2, CRC-32C unless the caller checked it, lengths, record
        counts, codec, producer sequences) before any is kept, so a refused request appends
        nothing. With ``verification`` (the broker's ``transaction.partition.verification.
        enable``) a batch opening a transaction needs the guard it was verified under,
        ``verified`` (see :mod:`coordkit.serve.dataplane.producer_state`).

        :raises ProtocolError: a batch is malformed.
        """
        checked = checked_batches(data, verify_crc)
        pending: dict[int, tuple[int, int]] = {}
        verdicts: list[int | BatchMetadata] = []
        for header, _raw in checked:
            verdict = self.producers.check(header, pending, verified, verification=verification)
            if isinstance(verdict, int) and verdict != errors.NONE:
                return Appended(verdict)
            verdicts.append(verdict)
        if all(isinstance(v, BatchMetadata) for v in verdicts):
            # The producer retried what was appended before: the original's offsets, once.
            first = verdicts[0]
            assert isinstance(first, BatchMetadata)
            last = verdicts[-1]
            assert isinstance(last, BatchMetadata)
            return Appended(errors.NONE, first.first_offset, 0, last.last_offset + 1,
                            log_append_time=first.timestamp)  # fmt: skip
        first_offset = self.log_end
        appended = 0
        self._new_epoch(leader_epoch)
        now = self.clock()
        for (header, raw), verdict in zip(checked, verdicts, strict=True):
            if isinstance(verdict, BatchMetadata):
                continue  # a duplicate within a request that brought new batches too
            base = self.log_end
            converted, found = log_validator.convert(raw, header, self.config, now)
            kept = attrs.evolve(found, base_offset=base, partition_leader_epoch=leader_epoch)
            self._keep(records.assign_offsets(converted, base, leader_epoch), kept)
            appended += header.last_offset_delta + 1
        self._appended(appended)
        return Appended(errors.NONE, first_offset, appended, self.log_end,
                        log_append_time=now if self.config.log_append_time else -1)  # fmt: skip

    def append_marker(self, batch: bytes, leader_epoch: int) -> int:
        """Append a coordinator's control batch as the leader (see
        :mod:`coordkit.serve.dataplane.log_transactions`, which checks it); its offset."""
        base = self.log_end
        self._new_epoch(leader_epoch)
        header = attrs.evolve(records.read_batch_header(batch), base_offset=base,
                              partition_leader_epoch=leader_epoch)  # fmt: skip
        self._keep(records.assign_offsets(batch, base, leader_epoch), header)
        self._appended(1)
        return base

    def append_copied(self, data: bytes) -> int:
        """Append batches copied from the leader (offsets and epochs already in them), as a
        follower does; returns the records appended.

        :raises ProtocolError: a batch starts below this log's end. (One may start past it:
            a compacted leader's cleaner removes whole batches, and Kafka's follower takes it.)
        """
        count = 0
        for header, raw in records.iter_batches(data, verify_crc=False):
            if header.base_offset < self.log_end:
                raise ProtocolError(
                    f"copied batch starts at offset {header.base_offset}, the log ends at "
                    f"{self.log_end}",
                    kind="record batch",
                )
            self.log_end = header.base_offset
            self._new_epoch(header.partition_leader_epoch)
            self._keep(bytes(raw), header)
            count += header.last_offset_delta + 1
        self._appended(count)
        return count

    def _keep(self, batch: bytes, header: BatchHeader, *, roll: bool = True) -> None:
        if roll:
            self._maybe_roll(header, len(batch))
        active = self.active
        active.append(batch, header)
        self.log_end = header.base_offset + header.last_offset_delta + 1
        completed = self.producers.record(header, batch)
        if completed is not None and completed.aborted:
            # Kafka's segment.updateTxnIndex: the segment of the marker indexes the abort.
            active.txn_index.append(completed.as_aborted())
        if self.files is not None:
            self.files.append(active, batch)
            self.files.end_offset = self.log_end

    def _maybe_roll(self, header: BatchHeader, size: int) -> None:
        """Kafka's ``UnifiedLog.maybeRoll``: a new active segment at the log end when the
        active one should roll before this batch."""
        config = self.config
        params = RollParams(max_segment_bytes=config.segment_bytes,
                            max_segment_ms=config.segment_ms,
                            max_timestamp_in_messages=header.max_timestamp,
                            max_offset_in_messages=header.last_offset, messages_size=size,
                            now=self.clock())  # fmt: skip
        if self.active.should_roll(params):
            self.roll()

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end (the old one keeps its batches)."""
        old = self.active
        if old.size == 0 and old.base_offset == self.log_end:
            return old
        old.on_become_inactive()
        new = self._add_segment(self.log_end)
        if self.files is not None:
            self.files.roll(old, new.base_offset)
        return new

    def _appended(self, count: int) -> None:
        """Kafka's ``flush.messages``: fsync once so many records were not."""
        self.unflushed_messages += count
        if self.unflushed_messages >= self.config.flush_messages:
            self.flush()

    def flush(self) -> None:
        """fsync the log's files up to its end (the recovery point moves there)."""
        if self.files is not None:
            self.files.flush(self.log_end)
        self.unflushed_messages = 0
        self.last_flush_ms = self.clock()

    def flush_if_due(self, now: int) -> bool:
        """Kafka's ``flush.ms``, checked by the log manager's flusher: whether it flushed."""
        if self.unflushed_messages and now - self.last_flush_ms >= self.config.flush_ms:
            self.flush()
            return True
        return False

    def _new_epoch(self, epoch: int) -> None:
        if not self._epochs or epoch > self._epochs[-1][0]:
            self._epochs.append((epoch, self.log_end))
            if self.files is not None:
                self.files.epochs_changed(self._epochs)

    def truncate_to(self, offset: int) -> int:
        """Cut every batch from the one holding ``offset`` on; returns the records cut."""
        if offset < self.log_start:
            cut = self.log_end - offset
            self.truncate_fully_and_start_at(offset)
            return max(cut, 0)
        number = bisect.bisect_right(self._bases, offset) - 1
        floor = self.segments[number]
        if number == len(self.segments) - 1 and floor.slot_of(offset) >= len(floor.batches):
            return 0
        gone = self.segments[number + 1 :]
        del self.segments[number + 1 :], self._bases[number + 1 :]
        floor.truncate_to(offset)
        cut_from = floor.next_offset
        cut = self.log_end - cut_from
        self.log_end = cut_from
        if self.files is not None:
            self.files.truncated(self.segments)
            self.files.end_offset = self.log_end
        del gone
        self._epochs = [(e, start) for e, start in self._epochs if start < cut_from]
        if self.files is not None:
            self.files.epochs_changed(self._epochs)
        self.producers.rebuild(
            pair
            for segment in self.segments
            for pair in zip(segment.headers, segment.batches, strict=True)
        )
        return cut

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment and start again, empty, at ``offset`` (Kafka's follower whose
        leader's log starts past its end)."""
        gone = [segment.base_offset for segment in self.segments]
        self.segments, self._bases = [], []
        self._add_segment(offset)
        self.log_start = self.log_end = offset
        self._epochs = []
        self.producers.rebuild([])
        if self.files is not None:
            self.files.started_at(gone, offset)
            self.files.epochs_changed(self._epochs)

    # -- the log start and retention -------------------------------------------------------------

    def maybe_increment_log_start(self, offset: int) -> bool:
        """Move the log start up to ``offset`` (a follower following its leader's; a segment
        deleted): Kafka's ``maybeIncrementLogStartOffset``; the leader epoch cache keeps the
        epoch in force there, starting there."""
        offset = min(offset, self.log_end)
        if offset <= self.log_start:
            return False
        self.log_start = offset
        before = [entry for entry in self._epochs if entry[1] <= offset]
        if before:
            self._epochs = [(before[-1][0], offset), *self._epochs[len(before) :]]
        if self.files is not None:
            self.files.log_start = offset
            self.files.epochs_changed(self._epochs)
        return True

    def delete_segments(self, deletable: list[LogSegment]) -> None:
        """Delete the oldest segments ``deletable`` (Kafka's ``deleteSegments``): the log rolls
        first when every segment goes, and starts at the first segment left."""
        if len(deletable) == len(self.segments):
            self.roll()
        del self.segments[: len(deletable)], self._bases[: len(deletable)]
        self.maybe_increment_log_start(self.segments[0].base_offset)
        if self.files is not None:
            self.files.delete_segments([segment.base_offset for segment in deletable])

    def replace_segments(self, cleaned: LogSegment, old: list[LogSegment]) -> None:
        """The log cleaner's ``cleaned`` segment takes the place of the consecutive inactive
        segments ``old`` (its base offset is the first's): Kafka's ``replaceSegments``."""
        first = next(n for n, segment in enumerate(self.segments) if segment is old[0])
        if self.files is not None:
            self.files.replace_segments(cleaned, [segment.base_offset for segment in old])
        self.segments[first : first + len(old)] = [cleaned]
        self._bases[first : first + len(old)] = [cleaned.base_offset]

    # -- leader epochs ------------------------------------------------------------------------

    @property
    def latest_epoch(self) -> int:
        return self._epochs[-1][0] if self._epochs else -1

    def epoch_start(self, epoch: int) -> int:
        """Where ``epoch`` starts here: its first batch's offset, or the log end while it has
        none (a leader enters its epoch at its first append; Kafka's at its election, when its
        log ended there too)."""
        for known, start in reversed(self._epochs):
            if known == epoch:
                return start
            if known < epoch:
                break
        return self.log_end

    def end_offset_for(self, epoch: int) -> tuple[int, int]:
        """Kafka's OffsetsForLeaderEpoch: ``(the largest epoch at or below epoch, the offset
        after its last record here)``; ``(-1, log_start)`` when no epoch is that old."""
        index = bisect.bisect_right(self._epochs, (epoch, _AFTER_EVERY_OFFSET)) - 1
        if index < 0:
            return -1, self.log_start
        if index + 1 < len(self._epochs):
            return self._epochs[index][0], self._epochs[index + 1][1]
        return self._epochs[index][0], self.log_end

    def leader_end_offset_for(self, requested: int, current_epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch as the leader of ``current_epoch`` answers it (Kafka's
        ``LeaderEpochFileCache.endOffsetFor``): ``(epoch, end offset)`` — the latest epoch ends
        at the log end, an older one where the next epoch starts; an epoch older than every
        epoch here gets the first epoch's start; ``(-1, -1)`` for -1 or a future epoch.

        Kafka's leader enters its epoch in the cache when it takes over; here an epoch enters
        at its first append, so the current epoch counts as starting at the log end until then.
        """
        epochs = self._epochs
        if current_epoch > self.latest_epoch:
            epochs = [*epochs, (current_epoch, self.log_end)]
        if requested < 0 or not epochs:
            return -1, -1
        if requested == epochs[-1][0]:
            return requested, self.log_end
        higher = bisect.bisect_right(epochs, (requested, _AFTER_EVERY_OFFSET))
        if higher == len(epochs):
            return -1, -1
        floor = epochs[higher - 1][0] if higher > 0 else requested
        return floor, epochs[higher][1]

    def divergence(self, leader: PartitionLog) -> int:
        """Where this (follower) log stops agreeing with ``leader``'s: the offset to truncate to
        before copying from it (Kafka's truncation by leader epoch)."""
        if not self._epochs:
            return self.log_end
        epoch, leader_end = leader.end_offset_for(self.latest_epoch)
        _, own_end = self.end_offset_for(epoch)
        return min(self.log_end, leader_end, own_end)

    # -- reading ------------------------------------------------------------------------------

    def read(
        self, offset: int, max_bytes: int, *, at_least_one: bool = True, upto: int | None = None
    ) -> bytes:
        """Whole batches from the one holding ``offset``, below offset ``upto`` (consumers read
        up to the high watermark; default: the log end), at most ``max_bytes`` of them — but
        with ``at_least_one`` the first, however large (Kafka's rule since Fetch v3 for the first
        partition with data, so that a consumer never stalls on a large batch). The segment and
        the batch are found by binary search, not by reading from the start.

        :raises IndexError: ``offset`` is outside ``[log_start, log_end]`` (Kafka's
            OFFSET_OUT_OF_RANGE).
        """
        if not self.log_start <= offset <= self.log_end:
            raise IndexError(offset)
        limit = self.log_end if upto is None else min(upto, self.log_end)
        number = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        out = bytearray()
        slot = self.segments[number].slot_of(offset)
        for segment in self.segments[number:]:
            for position in range(slot, len(segment.batches)):
                if segment.last_offsets[position] >= limit:
                    return bytes(out)
                batch = segment.batches[position]
                if (out or not at_least_one) and len(out) + len(batch) > max_bytes:
                    return bytes(out)
                out += batch
            slot = 0
        return bytes(out)

    def offset_for(self, timestamp: int, upto: int | None = None) -> tuple[int, int]:
        """ListOffsets: ``(offset, timestamp)`` for a timestamp or one of the special values,
        answered only below ``upto`` (the high watermark; latest is ``upto`` itself);
        ``(-1, -1)`` when no record has a timestamp at or after it (Kafka's
        ``UnifiedLog.fetchOffsetByTimestamp``: the first segment whose newest record reaches
        the timestamp, searched from where its time index points)."""
        limit = self.log_end if upto is None else min(upto, self.log_end)
        if timestamp == LATEST_TIMESTAMP:
            return limit, -1
        if timestamp == EARLIEST_TIMESTAMP:
            return self.log_start, -1
        found: tuple[int, int] = (-1, -1)
        if timestamp == MAX_TIMESTAMP:
            newest = max(self.segments, key=lambda s: s.max_timestamp_so_far)
            if newest.max_timestamp_so_far >= 0:
                slot = newest.slot_of(newest.offset_of_max_timestamp_so_far)
                most = newest.max_timestamp_so_far
                found = self._first_record_at(newest, slot, lambda t: t == most)
        else:
            for segment in self.segments:
                if segment.max_timestamp_so_far < timestamp:
                    continue
                reaching = segment.slot_by_timestamp(timestamp, self.log_start)
                if reaching is not None:
                    found = self._first_record_at(segment, reaching, lambda t: t >= timestamp)
                break
        return found if 0 <= found[0] < limit else (-1, -1)

    def _first_record_at(
        self, segment: LogSegment, slot: int, wanted: Callable[[int], bool]
    ) -> tuple[int, int]:
        """The first record of ``segment``'s batch ``slot`` at or past the log start whose
        timestamp is ``wanted``."""
        batch = records.decode_batch(segment.batches[slot], verify_crc=False)
        for record in batch.records:
            if record.offset >= self.log_start and wanted(record.timestamp):
                return record.offset, record.timestamp
        # Log-append-time batches give every record the batch's max timestamp.
        return max(batch.base_offset, self.log_start), batch.max_timestamp

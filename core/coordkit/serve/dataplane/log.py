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

Logs live in memory; with a log directory (``coordkit serve --data-dir``) they are written
through to it and loaded from it (:mod:`coordkit.serve.dataplane.logdir`). Limits: no retention: a log
coordkit began starts at offset 0 for good (one loaded from Kafka's segments starts where its
first segment does).

Every log lives on the event loop's thread (see :mod:`coordkit.serve.listener`), so nothing here
takes a lock. Fetches that found too little wait on :meth:`BrokerLogs.changed` (long polling):
every append, and every move of a high watermark, sets the current event and replaces it.
"""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import attrs

from coordkit.engine.states import TP
from coordkit.protocol import compression, records
from coordkit.protocol.errors import ProtocolError
from coordkit.protocol.records import BatchHeader
from coordkit.serve import errors
from coordkit.serve.dataplane.producer_state import BatchMetadata, ProducerIds, ProducerStates

if TYPE_CHECKING:
    from coordkit.engine.broker import Broker
    from coordkit.serve.dataplane.logdir import LogDirectory, PartitionSegments

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


class PartitionLog:
    """One replica's batches in offset order; ``log_end`` is the next offset to assign."""

    def __init__(self, segment: PartitionSegments | None = None) -> None:
        self._batches: list[bytes] = []
        self._headers: list[BatchHeader] = []
        #: Each batch's last offset, for bisecting a fetch position.
        self._last_offsets: list[int] = []
        #: Kafka's leader epoch cache: ``(epoch, first offset)``, epochs ascending.
        self._epochs: list[tuple[int, int]] = []
        self.producers = ProducerStates()
        self.log_start = 0
        self.log_end = 0
        #: Where appends and truncations are written through (``None``: memory only).
        self.segment = segment

    @classmethod
    def loaded(cls, data: bytes, segment: PartitionSegments) -> PartitionLog:
        """The log whose batches ``data`` holds (its segments' checked contents, see
        :func:`coordkit.serve.dataplane.logdir.valid_prefix`), writing on to ``segment``: the leader
        epoch cache and the producers' state rebuilt from the batches' headers. It starts where
        its first segment does and ends where its last batch or segment does (a Kafka log whose
        old segments retention deleted starts past 0, and an empty active segment's name is
        the log end)."""
        partition_log = cls()
        partition_log.log_start = partition_log.log_end = segment.log_start
        for header, raw in records.iter_batches(data, verify_crc=False):
            partition_log._new_epoch(header.partition_leader_epoch)
            partition_log._keep(bytes(raw), header)
        partition_log.log_end = max(partition_log.log_end, segment.end_offset)
        partition_log.segment = segment
        return partition_log

    def __len__(self) -> int:
        return len(self._batches)

    # -- writing ------------------------------------------------------------------------------

    def append(self, data: bytes, leader_epoch: int, *, verify_crc: bool = True) -> Appended:
        """Append every batch of a Produce request's records field as the leader.

        All batches are checked (magic 2, CRC-32C unless the caller checked it, lengths, record
        counts, codec, producer sequences) before any is kept, so a refused request appends
        nothing.

        :raises ProtocolError: a batch is malformed.
        """
        checked = _checked(data, verify_crc)
        pending: dict[int, tuple[int, int]] = {}
        verdicts: list[int | BatchMetadata] = []
        for header, _raw in checked:
            verdict = self.producers.check(header, pending)
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
        for (header, raw), verdict in zip(checked, verdicts, strict=True):
            if isinstance(verdict, BatchMetadata):
                continue  # a duplicate within a request that brought new batches too
            base = self.log_end
            kept = attrs.evolve(header, base_offset=base, partition_leader_epoch=leader_epoch)
            self._keep(records.assign_offsets(raw, base, leader_epoch), kept)
            appended += header.last_offset_delta + 1
        return Appended(errors.NONE, first_offset, appended, self.log_end)

    def append_copied(self, data: bytes) -> int:
        """Append batches copied from the leader (offsets and epochs already in them), as a
        follower does; returns the records appended.

        :raises ProtocolError: the batches do not start at this log's end or do not follow on.
        """
        count = 0
        for header, raw in records.iter_batches(data, verify_crc=False):
            if header.base_offset != self.log_end:
                raise ProtocolError(
                    f"copied batch starts at offset {header.base_offset}, the log ends at "
                    f"{self.log_end}",
                    kind="record batch",
                )
            self._new_epoch(header.partition_leader_epoch)
            self._keep(bytes(raw), header)
            count += header.last_offset_delta + 1
        return count

    def _keep(self, batch: bytes, header: BatchHeader) -> None:
        self._batches.append(batch)
        self._headers.append(header)
        self.log_end = header.base_offset + header.last_offset_delta + 1
        self._last_offsets.append(self.log_end - 1)
        self.producers.record(header)
        if self.segment is not None:
            self.segment.append(batch)

    def _new_epoch(self, epoch: int) -> None:
        if not self._epochs or epoch > self._epochs[-1][0]:
            self._epochs.append((epoch, self.log_end))

    def truncate_to(self, offset: int) -> int:
        """Cut every batch from the one holding ``offset`` on; returns the records cut."""
        index = bisect.bisect_left(self._last_offsets, offset)
        if index >= len(self._batches):
            return 0
        cut_from = self._headers[index].base_offset
        cut = self.log_end - cut_from
        if self.segment is not None:
            self.segment.truncate(sum(len(batch) for batch in self._batches[:index]))
        del self._batches[index:], self._headers[index:], self._last_offsets[index:]
        self.log_end = cut_from
        self._epochs = [(e, start) for e, start in self._epochs if start < cut_from]
        self.producers.rebuild(self._headers)
        return cut

    # -- leader epochs ------------------------------------------------------------------------

    @property
    def latest_epoch(self) -> int:
        return self._epochs[-1][0] if self._epochs else -1

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
        partition with data, so that a consumer never stalls on a large batch).

        :raises IndexError: ``offset`` is outside ``[log_start, log_end]``.
        """
        if not self.log_start <= offset <= self.log_end:
            raise IndexError(offset)
        limit = self.log_end if upto is None else min(upto, self.log_end)
        index = bisect.bisect_left(self._last_offsets, offset)
        out = bytearray()
        for position in range(index, len(self._batches)):
            if self._last_offsets[position] >= limit:
                break
            batch = self._batches[position]
            if (out or not at_least_one) and len(out) + len(batch) > max_bytes:
                break
            out += batch
        return bytes(out)

    def offset_for(self, timestamp: int, upto: int | None = None) -> tuple[int, int]:
        """ListOffsets: ``(offset, timestamp)`` for a timestamp or one of the special values,
        among records below ``upto`` (the high watermark; latest is ``upto`` itself);
        ``(-1, -1)`` when no record has a timestamp at or after it."""
        limit = self.log_end if upto is None else min(upto, self.log_end)
        if timestamp == LATEST_TIMESTAMP:
            return limit, -1
        if timestamp == EARLIEST_TIMESTAMP:
            return self.log_start, -1
        visible = bisect.bisect_left(self._last_offsets, limit)
        stamps = [h.max_timestamp for h in self._headers[:visible]]
        if timestamp == MAX_TIMESTAMP:
            if not stamps:
                return -1, -1
            index = max(range(len(stamps)), key=stamps.__getitem__)
            newest = stamps[index]
            return self._first_record_at(index, lambda t: t == newest)
        for index, newest in enumerate(stamps):
            if newest >= timestamp:
                return self._first_record_at(index, lambda t: t >= timestamp)
        return -1, -1

    def _first_record_at(self, index: int, wanted: Callable[[int], bool]) -> tuple[int, int]:
        """The first record of batch ``index`` whose timestamp is ``wanted``."""
        batch = records.decode_batch(self._batches[index], verify_crc=False)
        for record in batch.records:
            if wanted(record.timestamp):
                return record.offset, record.timestamp
        # Log-append-time batches give every record the batch's max timestamp.
        return batch.base_offset, batch.max_timestamp


def _checked(data: bytes, verify_crc: bool = True) -> list[tuple[BatchHeader, memoryview]]:
    """The batches of a produce request's records, each checked; at least one."""
    checked = []
    for header, raw in records.iter_batches(data, verify_crc=verify_crc):
        if header.record_count != header.last_offset_delta + 1:
            raise ProtocolError(
                f"record count {header.record_count} does not match last offset delta "
                f"{header.last_offset_delta}",
                kind="record batch",
            )
        if header.attributes & 0x07 not in compression.CODECS:
            raise ProtocolError(
                f"compression codec id {header.attributes & 0x07} is unknown",
                kind="record batch",
            )
        checked.append((header, raw))
    if not checked:
        raise ProtocolError("no record batch in the produce request", kind="record batch")
    return checked


class LocalBroker(Protocol):
    """A broker of this process as replication sees it (``coordkit serve``'s
    :class:`~coordkit.serve.context.BrokerContext` is one)."""

    @property
    def broker_id(self) -> int: ...

    @property
    def broker(self) -> Broker:
        """The engine broker (replication stops with it)."""
        ...

    @property
    def logs(self) -> BrokerLogs: ...


class Replication(Protocol):
    """What a broker's logs tell the process's replication, and ask it
    (:class:`~coordkit.serve.dataplane.replicas.Replicas` keeps this protocol)."""

    def appended(self, host: LocalBroker, tp: TP, partition_log: PartitionLog, count: int) -> None:
        """Leader ``host`` appended ``count`` records to ``tp``."""
        ...

    def follower_fetched(self, host: LocalBroker, follower: int, tp: TP, offset: int) -> None:
        """A follower in another process fetched ``tp`` from leader ``host`` at ``offset``."""
        ...

    def high_watermark(self, tp: TP, partition_log: PartitionLog) -> int:
        """The leader's high watermark of ``tp``."""
        ...

    async def wait_committed(self, host: LocalBroker, tp: TP, offset: int, timeout: float) -> int:
        """Wait until ``tp``'s high watermark reaches ``offset``; an error code."""
        ...


class BrokerLogs:
    """The logs of the partition replicas one broker holds (created on first use); with a
    ``directory``, loaded from it and written through to it."""

    def __init__(self, directory: LogDirectory | None = None) -> None:
        self.directory = directory
        self._logs: dict[TP, PartitionLog] = {}
        if directory is not None:
            for tp, data in directory.stored().items():
                self._logs[tp] = PartitionLog.loaded(data, directory.segment(tp))
        self._changed = asyncio.Event()
        #: The process's replication (set by :class:`~coordkit.serve.dataplane.replicas.Replicas`).
        self.replicas: Replication | None = None
        #: The producer ids this broker hands out (InitProducerId).
        self.producer_ids = ProducerIds()

    def get(self, tp: TP) -> PartitionLog:
        log = self._logs.get(tp)
        if log is None:
            segment = None if self.directory is None else self.directory.segment(tp)
            log = self._logs[tp] = PartitionLog(segment)
        return log

    def find(self, tp: TP) -> PartitionLog | None:
        return self._logs.get(tp)

    def drop_topic(self, topic: str) -> None:
        """Forget every log of ``topic`` (it was deleted: a topic created again under its name
        starts empty)."""
        for tp in [tp for tp in self._logs if tp[0] == topic]:
            del self._logs[tp]
            if self.directory is not None:
                self.directory.remove(tp)

    def stored_topics(self) -> set[str]:
        """The topics this broker holds a log of."""
        return {topic for topic, _ in self._logs}

    def close(self) -> None:
        """Close the log directory's files (the logs stay readable in memory)."""
        if self.directory is not None:
            self.directory.close()

    def changed(self) -> asyncio.Event:
        """Set at the next append to any of this broker's logs or move of a high watermark."""
        return self._changed

    def appended(self) -> None:
        event, self._changed = self._changed, asyncio.Event()
        event.set()

"""A partition's records on its leader, in memory: record batches kept as the bytes the producer
sent, with the leader's offsets and leader epoch written into them.

Every log lives on the event loop's thread (see :mod:`coordkit.serve.listener`), so nothing here
takes a lock. Fetches that found too little wait on :meth:`BrokerLogs.changed` (long polling):
every append sets the current event and replaces it.
"""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import Callable

from coordkit.engine.states import TP
from coordkit.protocol import records
from coordkit.protocol.errors import ProtocolError

#: ListOffsets' special timestamps (Kafka's ``ListOffsetsRequest.LATEST_TIMESTAMP`` and so on).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3


class PartitionLog:
    """One partition's batches in offset order; ``log_end`` is the next offset to assign.

    The high watermark equals ``log_end``: in this slice a leader keeps the only copy of the
    records (followers replicate metadata, not bytes), so what the leader has is all there is.
    """

    def __init__(self) -> None:
        self._batches: list[bytes] = []
        #: Each batch's last offset, for bisecting a fetch position.
        self._last_offsets: list[int] = []
        self._max_timestamps: list[int] = []
        self.log_start = 0
        self.log_end = 0

    @property
    def high_watermark(self) -> int:
        return self.log_end

    def append(self, data: bytes, leader_epoch: int) -> int:
        """Append every batch of a Produce request's records field; returns the first offset.

        All batches are checked (magic 2, CRC-32C, lengths, record counts) before any is kept, so
        a bad request appends nothing.

        :raises ProtocolError: a batch is malformed.
        """
        checked = []
        for header, raw in records.iter_batches(data):
            if header.record_count != header.last_offset_delta + 1:
                raise ProtocolError(
                    f"record count {header.record_count} does not match last offset delta "
                    f"{header.last_offset_delta}",
                    kind="record batch",
                )
            checked.append((header, raw))
        if not checked:
            raise ProtocolError("no record batch in the produce request", kind="record batch")
        first = self.log_end
        for header, raw in checked:
            base = self.log_end
            self._batches.append(records.assign_offsets(raw, base, leader_epoch))
            self.log_end = base + header.last_offset_delta + 1
            self._last_offsets.append(self.log_end - 1)
            self._max_timestamps.append(header.max_timestamp)
        return first

    def read(self, offset: int, max_bytes: int, *, at_least_one: bool = True) -> bytes:
        """Whole batches from the one holding ``offset``, at most ``max_bytes`` of them — but
        with ``at_least_one`` the first, however large (Kafka's rule since Fetch v3 for the first
        partition with data, so that a consumer never stalls on a large batch).

        :raises IndexError: ``offset`` is outside ``[log_start, log_end]``.
        """
        if not self.log_start <= offset <= self.log_end:
            raise IndexError(offset)
        index = bisect.bisect_left(self._last_offsets, offset)
        out = bytearray()
        for batch in self._batches[index:]:
            if (out or not at_least_one) and len(out) + len(batch) > max_bytes:
                break
            out += batch
        return bytes(out)

    def offset_for(self, timestamp: int) -> tuple[int, int]:
        """ListOffsets: ``(offset, timestamp)`` for a timestamp or one of the special values;
        ``(-1, -1)`` when no record has a timestamp at or after it."""
        if timestamp == LATEST_TIMESTAMP:
            return self.log_end, -1
        if timestamp == EARLIEST_TIMESTAMP:
            return self.log_start, -1
        if timestamp == MAX_TIMESTAMP:
            if not self._batches:
                return -1, -1
            index = max(range(len(self._batches)), key=self._max_timestamps.__getitem__)
            newest = self._max_timestamps[index]
            return self._first_record_at(index, lambda t: t == newest)
        for index, newest in enumerate(self._max_timestamps):
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


class BrokerLogs:
    """The logs of the partitions one broker leads (created on its first produce or fetch)."""

    def __init__(self) -> None:
        self._logs: dict[TP, PartitionLog] = {}
        self._changed = asyncio.Event()

    def get(self, tp: TP) -> PartitionLog:
        log = self._logs.get(tp)
        if log is None:
            log = self._logs[tp] = PartitionLog()
        return log

    def changed(self) -> asyncio.Event:
        """Set at the next append to any of this broker's logs."""
        return self._changed

    def appended(self) -> None:
        event, self._changed = self._changed, asyncio.Event()
        event.set()

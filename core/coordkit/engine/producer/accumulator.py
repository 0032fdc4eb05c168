"""Kafka's ``RecordAccumulator``, in records and bytes: per-partition queues of batches.

Only the last batch of a partition takes appends; it closes (becomes ready to send) when the
next record does not fit in ``batch.size`` bytes, when it is full, when it has waited
``linger.ms``, or on flush. A record larger
than ``batch.size`` gets a batch of its own, as in Kafka.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future

import attrs

from coordkit.engine.states import TP
from coordkit.strategies.partitioning import BATCH_HEADER_BYTES


@attrs.frozen
class RecordMetadata:
    """Where a record landed: its partition's leader appended it at ``offset``."""

    topic: str
    partition: int
    offset: int
    broker: int


class Batch:
    """Records of one partition sent together; each record's future resolves on delivery."""

    __slots__ = ("attempts", "bytes", "closed", "created", "futures", "last_error", "tp")

    def __init__(self, tp: TP, created: float):
        self.tp = tp
        self.created = created
        self.bytes = BATCH_HEADER_BYTES
        self.futures: list[Future[RecordMetadata]] = []
        self.closed = False
        self.attempts = 0
        self.last_error: Exception | None = None

    @property
    def records(self) -> int:
        return len(self.futures)

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<Batch {self.tp[0]}-{self.tp[1]} {self.records} records {self.bytes}B {state}>"


class RecordAccumulator:
    def __init__(self, batch_size: int):
        self.batch_size = batch_size
        self._queues: dict[TP, deque[Batch]] = {}

    def _open_batch(self, tp: TP) -> Batch | None:
        queue = self._queues.get(tp)
        if queue:
            last = queue[-1]
            if not last.closed:
                return last
        return None

    def needs_new_batch(self, tp: TP, size: int) -> bool:
        """Appending a ``size``-byte record to ``tp`` would open a new batch. An open batch the
        record does not fit in is closed now, whether the record then goes there or not (Kafka's
        ``tryAppend`` closes it for appends)."""
        batch = self._open_batch(tp)
        if batch is None:
            return True
        if batch.records > 0 and batch.bytes + size > self.batch_size:
            batch.closed = True
            return True
        return False

    def append(self, tp: TP, size: int, future: Future[RecordMetadata], now: float) -> bool:
        """Append a record; returns whether a batch was closed (became ready) by it."""
        closed = False
        batch = self._open_batch(tp)
        if batch is not None and batch.records > 0 and batch.bytes + size > self.batch_size:
            batch.closed = True
            closed = True
            batch = None
        if batch is None:
            batch = Batch(tp, now)
            self._queues.setdefault(tp, deque()).append(batch)
        batch.futures.append(future)
        batch.bytes += size
        if batch.bytes >= self.batch_size:
            batch.closed = True
            closed = True
        return closed

    def last_batch_full(self, tp: TP) -> bool:
        """Kafka's ``allBatchesFull``: the partition's last batch takes no more records."""
        queue = self._queues.get(tp)
        return not queue or queue[-1].closed

    def close_lingered(self, cutoff: float) -> None:
        """Close open batches created at or before ``cutoff`` (``linger.ms`` has passed)."""
        for queue in self._queues.values():
            if queue and not queue[-1].closed and queue[-1].created <= cutoff:
                queue[-1].closed = True

    def close_all(self) -> None:
        for queue in self._queues.values():
            if queue:
                queue[-1].closed = True

    def heads(self) -> Iterator[Batch]:
        """The oldest ready batch of each partition (a partition's batches go out in order)."""
        for queue in self._queues.values():
            if queue and queue[0].closed:
                yield queue[0]

    def remove(self, batch: Batch) -> None:
        queue = self._queues[batch.tp]
        queue.remove(batch)
        if not queue:
            del self._queues[batch.tp]

    def queue_size(self, tp: TP) -> int:
        queue = self._queues.get(tp)
        return len(queue) if queue else 0

    def pending_batches(self) -> int:
        return sum(len(q) for q in self._queues.values())

    def drain_all(self) -> list[Batch]:
        batches = [b for q in self._queues.values() for b in q]
        self._queues.clear()
        return batches

"""A broker's log manager tasks (Kafka's ``LogManager``): every ``log.retention.check.interval.ms``
each of the broker's logs deletes the segments its retention no longer keeps
(:func:`delete_old_segments`: below the log start, over ``retention.bytes``, older than
``retention.ms``), on leaders and followers alike, as Kafka's
``cleanupLogs`` does; every ``log.cleaner.backoff.ms`` its log cleaner cleans the compacted logs
dirty enough (:mod:`coordkit.serve.dataplane.cleaner_manager`; Kafka's ``LogCleaner`` threads);
and every ``log.flush.scheduler.interval.ms`` (Kafka's default: never) a
log not fsynced for ``flush.ms`` is (Kafka's ``flushDirtyLogs``).

Retention never deletes past a log's high watermark (the leader's; a follower's is the leader's
as it last heard, capped by its own log end), so the log start never passes it. A log start that
moves is what the leader's Fetch answers report (``log_start_offset``), and what its followers
follow.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from coordkit.engine.states import TP
from coordkit.serve.dataplane.broker_logs import BrokerLogs
from coordkit.serve.dataplane.cleaner_manager import DEFAULT_CLEANER_BACKOFF_MS, LogCleanerManager
from coordkit.serve.dataplane.log import PartitionLog, wall_ms
from coordkit.serve.dataplane.segment import LogSegment

log = logging.getLogger("coordkit.serve")

#: Kafka's defaults: ``log.retention.check.interval.ms`` (5 minutes) and
#: ``log.flush.scheduler.interval.ms`` (``Long.MAX_VALUE``: the flusher never runs).
DEFAULT_RETENTION_CHECK_INTERVAL_MS = 300_000
DEFAULT_FLUSH_SCHEDULER_INTERVAL_MS = 2**63 - 1


class LogManager:
    """The retention check and the flusher of one broker's ``logs``; ``high_watermark`` gives a
    log's high watermark as the broker knows it."""

    def __init__(
        self,
        broker_id: int,
        logs: BrokerLogs,
        high_watermark: Callable[[TP, PartitionLog], int],
        *,
        retention_check_interval_ms: int = DEFAULT_RETENTION_CHECK_INTERVAL_MS,
        flush_scheduler_interval_ms: int = DEFAULT_FLUSH_SCHEDULER_INTERVAL_MS,
        cleaner_backoff_ms: int = DEFAULT_CLEANER_BACKOFF_MS,
        clock: Callable[[], int] = wall_ms,
    ) -> None:
        self.broker_id = broker_id
        self.logs = logs
        self.high_watermark = high_watermark
        self.retention_check_interval_ms = retention_check_interval_ms
        self.flush_scheduler_interval_ms = flush_scheduler_interval_ms
        self.clock = clock
        self.cleaner_backoff_ms = cleaner_backoff_ms
        self.cleaner = LogCleanerManager(logs, high_watermark)
        self._tasks: list[asyncio.Task[None]] = []

    def cleanup_logs(self) -> int:
        """One retention check over every log (Kafka's ``cleanupLogs``): the segments deleted."""
        now = self.clock()
        deleted = 0
        for tp, partition_log in self.logs.logs():
            start = partition_log.log_start
            count = delete_old_segments(partition_log, now, self.high_watermark(tp, partition_log))
            if count:
                log.info("broker %s: %s-%s: deleted %s segments by retention, log start %s -> %s",
                         self.broker_id, *tp, count, start, partition_log.log_start)  # fmt: skip
            deleted += count
        return deleted

    def clean_logs(self) -> int:
        """One pass of the log cleaner over the compacted logs: the logs cleaned."""
        return len(self.cleaner.clean_logs(self.clock()))

    def flush_dirty_logs(self) -> int:
        """Kafka's ``flushDirtyLogs``: each log whose ``flush.ms`` passed is fsynced."""
        now = self.clock()
        return sum(1 for _, partition_log in self.logs.logs() if partition_log.flush_if_due(now))

    def start(self) -> None:
        """Schedule both tasks on the running event loop (where the logs live)."""
        self._tasks.append(asyncio.create_task(
            self._every(self.retention_check_interval_ms, self.cleanup_logs),
            name=f"coordkit-serve-log-retention-{self.broker_id}"))  # fmt: skip
        self._tasks.append(asyncio.create_task(
            self._every(self.cleaner_backoff_ms, self.clean_logs),
            name=f"coordkit-serve-log-cleaner-{self.broker_id}"))  # fmt: skip
        if self.flush_scheduler_interval_ms < DEFAULT_FLUSH_SCHEDULER_INTERVAL_MS:
            self._tasks.append(asyncio.create_task(
                self._every(self.flush_scheduler_interval_ms, self.flush_dirty_logs),
                name=f"coordkit-serve-log-flusher-{self.broker_id}"))  # fmt: skip

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()

    async def _every(self, interval_ms: int, work: Callable[[], int]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                work()
            except OSError as exc:
                log.warning("broker %s: log manager task failed: %s", self.broker_id, exc)


def delete_old_segments(log: PartitionLog, now: int, high_watermark: int) -> int:
    """Kafka's ``UnifiedLog.deleteOldSegments``: whole segments wholly below the log start,
    then (``cleanup.policy`` delete) the oldest while the log is over ``retention.bytes``, then
    those whose newest record is older than ``retention.ms``; never a segment reaching past
    ``high_watermark``. Returns the segments deleted."""
    deleted = _delete_while(
        log,
        lambda segment, following: following is not None and following.base_offset <= log.log_start,
        high_watermark,
    )
    config = log.config
    if not config.delete:
        return deleted
    if config.retention_bytes >= 0 and log.size >= config.retention_bytes:
        excess = log.size - config.retention_bytes

        def over_size(segment: LogSegment, following: LogSegment | None) -> bool:
            nonlocal excess
            if excess - segment.size < 0:
                return False
            excess -= segment.size
            return True

        deleted += _delete_while(log, over_size, high_watermark)
    if config.retention_ms >= 0:
        deleted += _delete_while(
            log,
            lambda segment, following: now - segment.largest_timestamp > config.retention_ms,
            high_watermark,
        )
    return deleted


def _delete_while(
    log: PartitionLog,
    predicate: Callable[[LogSegment, LogSegment | None], bool],
    high_watermark: int,
) -> int:
    """Kafka's ``deletableSegments``: the oldest segments while ``predicate`` holds (never an
    empty active segment, never one reaching past the high watermark), deleted."""
    deletable: list[LogSegment] = []
    segments = log.segments
    for number, segment in enumerate(segments):
        following = segments[number + 1] if number + 1 < len(segments) else None
        upper = following.base_offset if following is not None else log.log_end
        if following is None and segment.size == 0:
            break
        if high_watermark < upper or not predicate(segment, following):
            break
        deletable.append(segment)
    if deletable:
        log.delete_segments(deletable)
    return len(deletable)

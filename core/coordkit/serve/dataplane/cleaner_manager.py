"""Which compacted logs a broker's cleaner cleans, and where each cleaning starts (Kafka's
``LogCleanerManager``).

Each pass (:meth:`LogCleanerManager.clean_logs`, every ``log.cleaner.backoff.ms`` from the
broker's :class:`~coordkit.serve.dataplane.retention.LogManager`) looks at every log whose
``cleanup.policy`` has ``compact`` — leaders' and followers' alike, each replica cleaned by its
own broker, as Kafka — and cleans those dirty enough, the dirtiest first:

* the dirty section starts at the log's cleaner checkpoint (Kafka's
  ``cleaner-offset-checkpoint``; the log start when there is none, or when it is below the log
  start or past the log end) and ends before the first of: the high watermark, the active
  segment, a segment with a record newer than ``min.compaction.lag.ms`` — rounded down to the
  segment holding it, so only whole inactive segments below the high watermark are cleaned;
* a log is cleaned when its dirty bytes are more than ``min.cleanable.dirty.ratio`` of its
  bytes, or when a dirty segment's first batch is older than ``max.compaction.lag.ms``.

After a cleaning the checkpoint moves to where it ended, in the log directory's
``cleaner-offset-checkpoint`` (in memory without one), so the next pass does not clean again
what is clean.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from coordkit.engine.states import TP
from coordkit.protocol.errors import ProtocolError
from coordkit.serve.dataplane.broker_logs import BrokerLogs
from coordkit.serve.dataplane.cleaner import Cleaner, CleanerStats, LogToClean
from coordkit.serve.dataplane.log import PartitionLog

log = logging.getLogger("coordkit.serve")

#: Kafka's ``log.cleaner.backoff.ms``: how long the cleaner sleeps when no log needs cleaning.
DEFAULT_CLEANER_BACKOFF_MS = 15_000


class LogCleanerManager:
    """The cleaner of one broker's ``logs``; ``high_watermark`` gives a log's high watermark as
    the broker knows it (the leader's, or what a follower last heard)."""

    def __init__(
        self,
        logs: BrokerLogs,
        high_watermark: Callable[[TP, PartitionLog], int],
        cleaner: Cleaner | None = None,
    ) -> None:
        self.logs = logs
        self.high_watermark = high_watermark
        self.cleaner = cleaner or Cleaner()
        directory = logs.directory
        #: Where each log's next cleaning starts (Kafka's cleaner checkpoints).
        self.checkpoints: dict[TP, int] = {} if directory is None else directory.cleaner_offsets()
        #: Logs a cleaning failed on (Kafka's uncleanable partitions): left alone.
        self.uncleanable: set[TP] = set()

    def clean_logs(self, now: int) -> dict[TP, CleanerStats]:
        """One pass: every compacted log dirty enough cleaned, the dirtiest first."""
        cleanable: list[tuple[TP, LogToClean]] = []
        for tp, partition_log in self.logs.logs():
            if not partition_log.config.compact or tp in self.uncleanable:
                continue
            to_clean = self.log_to_clean(tp, partition_log, now)
            if to_clean.cleanable_bytes > 0 and (
                to_clean.needs_compaction_now
                or to_clean.cleanable_ratio > partition_log.config.min_cleanable_ratio
            ):
                cleanable.append((tp, to_clean))
        cleanable.sort(key=lambda item: item[1].cleanable_ratio, reverse=True)
        done: dict[TP, CleanerStats] = {}
        for tp, to_clean in cleanable:
            try:
                end, stats = self.cleaner.clean(to_clean, now)
            except (ProtocolError, OSError) as exc:
                # Kafka marks such a partition uncleanable; its log is served as it is.
                log.warning("cleaner: %s-%s: not cleaned any more: %s", *tp, exc)
                self.uncleanable.add(tp)
                continue
            log.info("cleaner: %s-%s: cleaned offsets %s to %s, kept %s of %s records, %s "
                     "segments now %s", *tp, to_clean.first_dirty, end - 1, stats.records_kept,
                     stats.records_read, stats.segments_before, stats.segments_after)  # fmt: skip
            self.checkpoint(tp, end)
            done[tp] = stats
        return done

    def checkpoint(self, tp: TP, offset: int) -> None:
        """``tp``'s next cleaning starts at ``offset`` (written through to the log directory)."""
        self.checkpoints[tp] = offset
        # A deleted topic's logs are gone, and so are their checkpoints.
        self.checkpoints = {t: o for t, o in self.checkpoints.items() if self.logs.find(t)}
        directory = self.logs.directory
        if directory is not None:
            directory.write_cleaner_offsets(self.checkpoints)

    def log_to_clean(self, tp: TP, partition_log: PartitionLog, now: int) -> LogToClean:
        """``tp``'s dirty section and bytes (Kafka's ``cleanableOffsets`` and
        ``calculateCleanableBytes``)."""
        config = partition_log.config
        first_dirty = self.checkpoints.get(tp, partition_log.log_start)
        if not partition_log.log_start <= first_dirty <= partition_log.log_end:
            first_dirty = partition_log.log_start
        inactive = partition_log.segments[:-1]
        uncleanable = min(self.high_watermark(tp, partition_log), partition_log.active.base_offset)
        lag = max(config.min_compaction_lag_ms, 0)
        if lag > 0:
            for segment in inactive:
                if segment.next_offset > first_dirty and segment.largest_timestamp > now - lag:
                    uncleanable = min(uncleanable, segment.base_offset)
                    break
        uncleanable = max(uncleanable, first_dirty)
        # Down to the base of the segment holding it: only whole segments are cleaned.
        first_uncleanable = partition_log.active.base_offset
        for segment in inactive:
            if segment.next_offset > uncleanable or segment.base_offset >= uncleanable:
                first_uncleanable = segment.base_offset
                break
        start = partition_log.log_start
        clean_bytes = sum(s.size for s in inactive
                          if s.base_offset < first_dirty and s.next_offset > start)  # fmt: skip
        dirty = [s for s in inactive if s.next_offset > first_dirty
                 and s.base_offset < first_uncleanable]  # fmt: skip
        cleanable_bytes = sum(s.size for s in dirty)
        max_lag = max(config.max_compaction_lag_ms, 0)
        firsts = [s.rolling_based_timestamp for s in dirty if (s.rolling_based_timestamp or 0) > 0]
        now_needed = bool(firsts) and min(t for t in firsts if t is not None) < now - max_lag
        return LogToClean(partition_log, first_dirty, max(first_uncleanable, first_dirty),
                          clean_bytes, cleanable_bytes, now_needed)  # fmt: skip

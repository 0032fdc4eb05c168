"""Retention of a partition log (Kafka's ``UnifiedLog.deleteOldSegments``): whole segments by
size and by time, never past the high watermark, the log start moving (and a follower's
following its leader's), on disk too; and ``flush.messages`` moving the recovery point."""

from __future__ import annotations

from pathlib import Path

import pytest

from coordkit.protocol.records import decode_batches, encode_batch, new_batch
from coordkit.serve.dataplane import kafka_files
from coordkit.serve.dataplane.broker_logs import BrokerLogs
from coordkit.serve.dataplane.log import EARLIEST_TIMESTAMP, PartitionLog
from coordkit.serve.dataplane.log_config import LogConfig
from coordkit.serve.dataplane.logdir import LogDirectory, segment_name
from coordkit.serve.dataplane.retention import LogManager, delete_old_segments

TP = ("orders", 0)


def _batch(value: bytes, timestamp: int = 1_000) -> bytes:
    return encode_batch(new_batch([(None, value)], timestamp=timestamp))


ONE = len(_batch(b"v-00"))


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def _filled(config: LogConfig, count: int = 10, clock: Clock | None = None) -> PartitionLog:
    log = PartitionLog(config=config, clock=clock or Clock(0))
    for i in range(count):
        log.append(_batch(b"v-%02d" % i, timestamp=1_000 * i), leader_epoch=i // 4)
    return log


def test_retention_by_size_deletes_whole_segments_below_the_high_watermark() -> None:
    log = _filled(LogConfig(segment_bytes=3 * ONE, retention_bytes=5 * ONE, retention_ms=-1))
    assert [s.base_offset for s in log.segments] == [0, 3, 6, 9]
    assert delete_old_segments(log, now=0, high_watermark=2) == 0  # segment 0 reaches past it
    # 10 batches, 5 kept at most: segment 0 goes (7 left); segment 3 would leave 4.
    assert delete_old_segments(log, now=0, high_watermark=10) == 1
    assert (log.log_start, [s.base_offset for s in log.segments]) == (3, [3, 6, 9])
    with pytest.raises(IndexError):
        log.read(2, 1 << 20)
    assert log.offset_for(EARLIEST_TIMESTAMP) == (3, -1)
    assert log.offset_for(0) == (3, 3_000)  # the oldest record left
    assert log.end_offset_for(0) == (0, 4)  # the epoch in force at the log start starts there


def test_retention_by_time_rolls_and_deletes_even_the_active_segment() -> None:
    clock = Clock(10_000)
    log = _filled(LogConfig(segment_bytes=3 * ONE, retention_ms=5_000), clock=clock)
    # Segments' newest records: 2 000, 5 000, 8 000, 9 000; now 10 000: older than 5 s goes.
    assert delete_old_segments(log, now=clock.now, high_watermark=10) == 1
    assert log.log_start == 3
    clock.now = 100_000  # every record is older: the log rolls an empty segment and keeps it
    assert delete_old_segments(log, now=clock.now, high_watermark=10) == 3
    assert (log.log_start, log.log_end, [s.base_offset for s in log.segments]) == (10, 10, [10])
    assert log.read(10, 1 << 20) == b""
    assert delete_old_segments(log, now=clock.now, high_watermark=10) == 0  # empty: kept
    log.append(_batch(b"next", timestamp=99_000), leader_epoch=5)
    assert [r.offset for b in decode_batches(log.read(10, 1 << 20)) for r in b.records] == [10]


def test_compacted_topics_are_not_retained_by_time_or_size() -> None:
    log = _filled(LogConfig(segment_bytes=3 * ONE, retention_ms=0, retention_bytes=0,
                            delete=False))  # fmt: skip
    assert delete_old_segments(log, now=10**9, high_watermark=10) == 0


def test_a_follower_follows_its_leaders_log_start() -> None:
    log = _filled(LogConfig(segment_bytes=3 * ONE, retention_ms=-1))
    assert log.maybe_increment_log_start(5)
    assert not log.maybe_increment_log_start(4)  # never back
    with pytest.raises(IndexError):
        log.read(4, 1 << 20)
    assert [r.offset for b in decode_batches(log.read(5, ONE)) for r in b.records] == [5]
    # Segments wholly below the log start go at the next check; segment 3 holds it.
    assert delete_old_segments(log, now=0, high_watermark=10) == 1
    assert [s.base_offset for s in log.segments] == [3, 6, 9]
    assert log.log_start == 5
    log.truncate_fully_and_start_at(42)  # the leader's log starts past this one's end
    assert (log.log_start, log.log_end, log.latest_epoch) == (42, 42, -1)


def test_on_disk_segments_go_and_the_log_start_is_checkpointed(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=3 * ONE, retention_bytes=5 * ONE, retention_ms=-1)
    directory = LogDirectory(tmp_path)
    logs = BrokerLogs(directory, config)
    log = logs.get(TP)
    for i in range(10):
        log.append(_batch(b"v-%02d" % i), leader_epoch=0)
    manager = LogManager(0, logs, lambda tp, partition_log: partition_log.log_end)
    assert manager.cleanup_logs() == 1
    partition = tmp_path / "orders-0"
    assert sorted(p.name for p in partition.glob("*.log")) == [
        segment_name(3), segment_name(6), segment_name(9)
    ]  # fmt: skip
    assert not list(partition.glob(f"{0:020d}.*"))  # its indexes too
    assert log.maybe_increment_log_start(4)  # as a follower would
    logs.close()
    assert (tmp_path / kafka_files.LOG_START_OFFSETS).read_bytes() == b"0\n1\norders 0 4\n"
    epochs = kafka_files.read_leader_epoch_checkpoint(
        (partition / kafka_files.LEADER_EPOCHS).read_bytes(), "e"
    )
    assert epochs == [(0, 4)]
    directory = LogDirectory(tmp_path)
    again = BrokerLogs(directory, config).get(TP)
    assert (again.log_start, again.log_end) == (4, 10)
    assert again.offset_for(EARLIEST_TIMESTAMP) == (4, -1)
    directory.close()


def test_flush_messages_fsyncs_and_moves_the_recovery_point(tmp_path: Path) -> None:
    directory = LogDirectory(tmp_path)
    logs = BrokerLogs(directory, LogConfig(flush_messages=3))
    log = logs.get(TP)
    for i in range(2):
        log.append(_batch(b"v-%02d" % i), leader_epoch=0)
    assert (directory.recovery_point(TP), log.unflushed_messages) == (0, 2)
    log.append(_batch(b"v-02"), leader_epoch=0)
    assert (directory.recovery_point(TP), log.unflushed_messages) == (3, 0)
    log.append(_batch(b"v-03"), leader_epoch=0)
    assert directory.recovery_point(TP) == 3
    log.truncate_to(1)  # below the recovery point: it comes down, on disk at once
    recovery = (tmp_path / kafka_files.RECOVERY_POINTS).read_bytes()
    assert kafka_files.read_offsets_checkpoint(recovery, "r") == {TP: 1}
    directory.close()


def test_flush_ms_is_the_flushers(tmp_path: Path) -> None:
    clock = Clock(1_000)
    directory = LogDirectory(tmp_path)
    logs = BrokerLogs(directory, LogConfig(flush_ms=500))
    log = logs.get(TP)
    log.clock, log.last_flush_ms = clock, clock.now
    log.append(_batch(b"a"), leader_epoch=0)
    manager = LogManager(0, logs, lambda tp, partition_log: 0, clock=clock)
    clock.now = 1_400
    assert manager.flush_dirty_logs() == 0
    clock.now = 2_000
    assert manager.flush_dirty_logs() == 1
    assert directory.recovery_point(TP) == 1
    assert manager.flush_dirty_logs() == 0  # nothing new
    directory.close()

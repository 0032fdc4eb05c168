"""A partition log's segments and their indexes: when a segment rolls (Kafka's
``LogSegment.shouldRoll``), the offset and time indexes in Kafka's binary format, in memory and
on disk, lookups from the middle of a long log, and an index rebuilt when it is missing or
astray. (A Kafka 3.9 broker reading these files: tests/apache_kafka/test_takeover.py.)"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from coordkit.protocol.records import decode_batches, encode_batch, new_batch
from coordkit.serve.dataplane import kafka_files
from coordkit.serve.dataplane.broker_logs import BrokerLogs
from coordkit.serve.dataplane.index import CorruptIndexError, OffsetIndex, TimeIndex
from coordkit.serve.dataplane.log import MAX_TIMESTAMP, PartitionLog
from coordkit.serve.dataplane.log_config import LogConfig
from coordkit.serve.dataplane.logdir import LogDirectory, segment_name

TP = ("orders", 0)


def _batch(*values: bytes, timestamp: int = 1_000) -> bytes:
    return encode_batch(new_batch([(None, v) for v in values], timestamp=timestamp))


def _offsets(data: bytes) -> list[int]:
    return [r.offset for b in decode_batches(data) for r in b.records]


ONE = len(_batch(b"v-0000"))


def test_index_entries_are_kafkas_bytes() -> None:
    offsets = OffsetIndex(100)
    offsets.append(103, 0)
    offsets.append(110, 4_200)
    # A 4-byte offset relative to the base, a 4-byte position, big-endian.
    assert offsets.entry_bytes() == struct.pack(">iiii", 3, 0, 10, 4_200)
    assert OffsetIndex.parse(offsets.entry_bytes(), 100, "i") == offsets
    assert offsets.lookup(109) == (103, 0)
    assert offsets.lookup(99) == (100, 0)  # below every entry: the segment's start
    times = TimeIndex(100)
    assert times.maybe_append(5_000, 103)
    assert not times.maybe_append(5_000, 104)  # only a larger timestamp is indexed
    assert times.maybe_append(7_000, 110)
    assert times.entry_bytes() == struct.pack(">qiqi", 5_000, 3, 7_000, 10)
    assert TimeIndex.parse(times.entry_bytes(), 100, "t") == times
    assert times.lookup(6_999) == (5_000, 103)
    assert times.lookup(4_000) == (-1, 100)
    for bad, complaint in (
        (b"\x00" * 7, "not whole 8-byte entries"),
        (struct.pack(">iiii", 3, 0, 3, 10), "does not follow"),
    ):
        with pytest.raises(CorruptIndexError, match=complaint):
            OffsetIndex.parse(bad, 100, "orders-0/x.index")
    with pytest.raises(CorruptIndexError, match="does not follow"):
        TimeIndex.parse(struct.pack(">qiqi", 7_000, 3, 5_000, 4), 100, "x.timeindex")


def test_an_entry_every_index_interval_of_bytes() -> None:
    """Kafka's rule: a batch is indexed when more than index.interval.bytes went by since the
    last entry, at its position with its last offset; the time index takes the largest
    timestamp so far at the offset that brought it."""
    log = PartitionLog(config=LogConfig(index_interval_bytes=2 * ONE))
    stamps = [1_000, 3_000, 2_000, 2_500, 5_000, 4_000, 4_500, 6_000]
    for i, stamp in enumerate(stamps):
        log.append(_batch(b"v-%04d" % i, timestamp=stamp), leader_epoch=0)
    segment = log.active
    # After 3 batches (3 ONE > 2 ONE) batch 3 is indexed; then batch 6.
    assert (segment.offset_index.offsets, segment.offset_index.positions) == (
        [3, 6], [3 * ONE, 6 * ONE]
    )  # fmt: skip
    assert (segment.time_index.timestamps, segment.time_index.offsets) == ([3_000, 5_000], [1, 4])


def test_segments_roll_by_size_and_by_age() -> None:
    log = PartitionLog(config=LogConfig(segment_bytes=3 * ONE, segment_ms=10_000))
    for i in range(7):
        log.append(_batch(b"v-%04d" % i, timestamp=1_000), leader_epoch=0)
    assert [s.base_offset for s in log.segments] == [0, 3, 6]
    # A batch more than segment.ms newer than the active segment's first rolls it.
    log.append(_batch(b"late", timestamp=11_001), leader_epoch=0)
    assert [s.base_offset for s in log.segments] == [0, 3, 6, 7]
    # The segment left behind indexes its largest timestamp (Kafka's onBecomeInactiveSegment).
    assert (log.segments[2].time_index.timestamps, log.segments[2].time_index.offsets) == (
        [1_000], [6]
    )  # fmt: skip
    log.append(_batch(b"same", timestamp=11_002), leader_epoch=0)
    assert len(log.segments) == 4


def test_reads_and_timestamps_from_the_middle_of_a_long_log() -> None:
    log = PartitionLog(config=LogConfig(segment_bytes=50 * ONE, index_interval_bytes=4 * ONE))
    for i in range(1_000):
        # Timestamps grow, but not every batch's: batch i is stamped 10 i, every fifth older.
        stamp = 10 * i - (25 if i % 5 == 0 and i else 0)
        log.append(_batch(b"v-%04d" % i, timestamp=stamp), leader_epoch=0)
    assert len(log.segments) == 20
    assert _offsets(log.read(617, 3 * ONE))[:3] == [617, 618, 619]
    assert _offsets(log.read(999, 1 << 20)) == [999]
    assert log.offset_for(6_170) == (617, 6_170)
    assert log.offset_for(6_171) == (618, 6_180)
    assert log.offset_for(6_175) == (618, 6_180)  # 620 is stamped 6 175 but comes after 618
    assert log.offset_for(6_176) == (618, 6_180)
    assert log.offset_for(10_000) == (-1, -1)
    assert log.offset_for(MAX_TIMESTAMP) == (999, 9_990)
    # Every answer agrees with reading the whole log.
    stamps = [
        (r.offset, r.timestamp) for b in decode_batches(log.read(0, 1 << 30)) for r in b.records
    ]
    for target in range(0, 10_000, 97):
        expected = next(((o, t) for o, t in stamps if t >= target), (-1, -1))
        assert log.offset_for(target) == expected, target


def test_truncation_cuts_segments_and_their_indexes() -> None:
    log = PartitionLog(config=LogConfig(segment_bytes=4 * ONE, index_interval_bytes=ONE))
    for i in range(10):
        log.append(_batch(b"v-%04d" % i, timestamp=100 * i), leader_epoch=0)
    assert [s.base_offset for s in log.segments] == [0, 4, 8]
    assert log.truncate_to(6) == 4
    assert [s.base_offset for s in log.segments] == [0, 4]
    assert log.active.offset_index.offsets == []  # its entry at 6 went with batch 6
    assert log.offset_for(MAX_TIMESTAMP) == (5, 500)
    log.append(_batch(b"again", timestamp=50), leader_epoch=1)
    assert _offsets(log.read(4, 1 << 20)) == [4, 5, 6]


# -- on disk ---------------------------------------------------------------------------------


def _written(tmp_path: Path, config: LogConfig, count: int) -> Path:
    directory = LogDirectory(tmp_path)
    logs = BrokerLogs(directory, config)
    for i in range(count):
        logs.get(TP).append(_batch(b"v-%04d" % i, timestamp=1_000 + i), leader_epoch=0)
    logs.close()
    return tmp_path / "orders-0"


def _index_files(partition: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(partition.iterdir()) if "index" in p.suffix}


def test_the_files_hold_the_indexes_in_memory(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=10 * ONE, index_interval_bytes=2 * ONE)
    partition = _written(tmp_path, config, 25)
    assert sorted(p.name for p in partition.glob("*.log")) == [
        segment_name(0), segment_name(10), segment_name(20)
    ]  # fmt: skip
    files = _index_files(partition)
    # Segment 0: batches 3, 6, 9 indexed (relative offsets, positions), the same in the time
    # index (whose last entry, its largest timestamp, is there already when it rolls).
    assert files[f"{0:020d}.index"] == struct.pack(">6i", 3, 3 * ONE, 6, 6 * ONE, 9, 9 * ONE)
    assert files[f"{0:020d}.timeindex"] == struct.pack(">qiqiqi", 1_003, 3, 1_006, 6, 1_009, 9)
    assert files[f"{10:020d}.index"] == struct.pack(">6i", 3, 3 * ONE, 6, 6 * ONE, 9, 9 * ONE)
    assert files[f"{20:020d}.index"] == struct.pack(">2i", 3, 3 * ONE)
    assert files[f"{20:020d}.timeindex"] == struct.pack(">qi", 1_023, 3)
    # Closed as Kafka stops: flushed, the recovery point at the log end.
    recovery = (tmp_path / kafka_files.RECOVERY_POINTS).read_bytes()
    assert kafka_files.read_offsets_checkpoint(recovery, "r") == {TP: 25}
    # Loaded again: the same files, nothing rewritten.
    before = {p.name: p.stat().st_mtime_ns for p in partition.iterdir()}
    directory = LogDirectory(tmp_path)
    logs = BrokerLogs(directory, config)
    assert logs.get(TP).offset_for(1_017) == (17, 1_017)
    assert {p.name: p.stat().st_mtime_ns for p in partition.iterdir() if "index" in p.suffix} == {
        name: stamp for name, stamp in before.items() if "index" in name
    }
    directory.close()


@pytest.mark.parametrize("damage", ["missing", "torn", "astray"])
def test_a_missing_or_wrong_index_is_rebuilt(tmp_path: Path, damage: str) -> None:
    config = LogConfig(segment_bytes=10 * ONE, index_interval_bytes=2 * ONE)
    partition = _written(tmp_path, config, 25)
    right = _index_files(partition)
    index = partition / f"{10:020d}.index"
    if damage == "missing":
        index.unlink()
    elif damage == "torn":
        index.write_bytes(right[index.name][:-3])
    else:  # an entry whose position is not its batch's
        index.write_bytes(struct.pack(">6i", 3, 3 * ONE, 6, 6 * ONE + 1, 9, 9 * ONE))
    directory = LogDirectory(tmp_path)
    BrokerLogs(directory, config)
    directory.close()
    assert _index_files(partition) == right


def test_a_sparser_index_kafka_wrote_is_kept(tmp_path: Path) -> None:
    """Kafka indexes a produce request's batches at its first batch: other entries than
    coordkit's, as right for a lookup; they stay until the segment changes."""
    config = LogConfig(segment_bytes=10 * ONE, index_interval_bytes=2 * ONE)
    partition = _written(tmp_path, config, 25)
    kafkas = struct.pack(">2i", 5, 4 * ONE)  # batches 4 and 5 appended by one request
    (partition / f"{10:020d}.index").write_bytes(kafkas)
    directory = LogDirectory(tmp_path)
    BrokerLogs(directory, config)
    directory.close()
    assert (partition / f"{10:020d}.index").read_bytes() == kafkas

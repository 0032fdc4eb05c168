"""The log cleaner of compacted topics (#35 item 3) on a partition's log and its files: the
newest record of every key kept at its offset, tombstones kept until their delete horizon, the
active segment and whatever reaches the high watermark left alone, an idempotent producer's last
batch kept (empty) for its sequence, the cleaner checkpoint, ``compact,delete``, and a crash
between the steps of a segment swap. (Served, through clients: test_compaction.py.)"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from coordkit.protocol import ProtocolError
from coordkit.protocol.records import decode_batches, encode_batch, new_batch
from coordkit.serve.dataplane import kafka_files, segment_swap
from coordkit.serve.dataplane.broker_logs import BrokerLogs
from coordkit.serve.dataplane.cleaner import DELETE_HORIZON
from coordkit.serve.dataplane.cleaner_manager import LogCleanerManager
from coordkit.serve.dataplane.log import PartitionLog
from coordkit.serve.dataplane.log_config import LogConfig
from coordkit.serve.dataplane.logdir import LogDirectory
from coordkit.serve.dataplane.retention import delete_old_segments

TP = ("compacted", 0)
NOW = int(time.time() * 1000)
KEYS = 5
ROUNDS = 8


def _config(**changes: object) -> LogConfig:
    fields: dict[str, object] = {
        "segment_bytes": 4 * len(_batch(b"k0", b"v-00-0")), "compact": True, "delete": False,
        "min_cleanable_ratio": 0.0, "delete_retention_ms": 1_000,
    }  # fmt: skip
    fields.update(changes)
    return LogConfig(**fields)  # type: ignore[arg-type]


def _batch(key: bytes | None, value: bytes | None, timestamp: int = NOW - 10) -> bytes:
    return encode_batch(new_batch([(key, value)], timestamp=timestamp))


Kept = list[tuple[int, bytes | None, bytes | None]]


def _fill(partition_log: PartitionLog, rounds: int = ROUNDS) -> dict[bytes, tuple[int, bytes]]:
    """``rounds`` updates of each key, one batch each: each key's last ``(offset, value)``."""
    latest: dict[bytes, tuple[int, bytes]] = {}
    for round_ in range(rounds):
        for k in range(KEYS):
            key, value = f"k{k}".encode(), f"v-{round_:02d}-{k}".encode()
            appended = partition_log.append(_batch(key, value), leader_epoch=0)
            latest[key] = (appended.base_offset, value)
    return latest


def _records(partition_log: PartitionLog) -> Kept:
    data = partition_log.read(partition_log.log_start, 1 << 30)
    return [(r.offset, r.key, r.value) for b in decode_batches(data) for r in b.records]


def _manager(logs: BrokerLogs, high_watermark: int | None = None) -> LogCleanerManager:
    return LogCleanerManager(
        logs, lambda _tp, log: log.log_end if high_watermark is None else high_watermark
    )


def test_the_newest_record_of_every_key_stays_at_its_offset() -> None:
    logs = BrokerLogs(config=_config())
    partition_log = logs.get(TP)
    latest = _fill(partition_log)
    active_before = _records_of(partition_log.active)
    size_before = partition_log.size
    manager = _manager(logs)
    assert TP in manager.clean_logs(NOW)
    kept = _records(partition_log)
    active_base = partition_log.active.base_offset
    # Below the active segment: exactly the newest record of each key, at its offset.
    below = [(o, k, v) for o, k, v in kept if o < active_base]
    newest = {key: offset for key, (offset, _value) in latest.items()}
    assert all(newest[k] >= o for o, k, _v in below if k is not None)
    by_key: dict[bytes, list[int]] = {}
    for offset, key, _value in below:
        assert key is not None
        by_key.setdefault(key, []).append(offset)
    assert all(len(offsets) == 1 for offsets in by_key.values()), by_key
    # The active segment is as it was; a consumer from the start sees every key's latest value.
    assert _records_of(partition_log.active) == active_before
    seen = {k: (o, v) for o, k, v in kept if k is not None}
    assert seen == latest
    assert partition_log.size < size_before
    # Full segments are not merged (Kafka's groups stay within segment.bytes); the next cleaning
    # merges the ones this one emptied.
    emptied = len(partition_log.segments)
    manager.checkpoint(TP, 0)
    manager.clean_logs(NOW)
    assert len(partition_log.segments) < emptied
    assert {k: (o, v) for o, k, v in _records(partition_log) if k is not None} == latest
    assert (partition_log.log_start, partition_log.log_end) == (0, KEYS * ROUNDS)
    # The checkpoint is where the cleaning ended; a second pass finds nothing dirty.
    assert manager.checkpoints[TP] == active_base
    assert manager.clean_logs(NOW) == {}


def _records_of(segment: object) -> list[bytes]:
    return list(segment.batches)  # type: ignore[attr-defined]


def test_nothing_at_or_past_the_high_watermark_is_cleaned() -> None:
    logs = BrokerLogs(config=_config())
    partition_log = logs.get(TP)
    _fill(partition_log)
    high_watermark = 14  # inside the fourth segment (offsets 12 to 15)
    before = {s.base_offset: list(s.batches) for s in partition_log.segments}
    manager = _manager(logs, high_watermark)
    manager.clean_logs(NOW)
    holding = max(b for b in before if b <= high_watermark)
    for segment in partition_log.segments:
        if segment.base_offset >= holding:
            assert segment.batches == before[segment.base_offset]
    assert manager.checkpoints[TP] == holding
    # Below it, each key once (keys 0 to 4 were written at 0 to 11 twice and more).
    cleaned = [r for r in _records(partition_log) if r[0] < holding]
    keys = [k for _o, k, _v in cleaned]
    assert len(keys) == len(set(keys))


def test_a_tombstone_stays_until_its_delete_horizon() -> None:
    logs = BrokerLogs(config=_config(delete_retention_ms=1_000))
    partition_log = logs.get(TP)
    _fill(partition_log, rounds=2)
    deleted = partition_log.append(_batch(b"k0", None), leader_epoch=0).base_offset
    _fill(partition_log, rounds=0)
    for filler in range(8):  # other keys, so the tombstone's segment is not active
        partition_log.append(_batch(f"x{filler}".encode(), b"x"), leader_epoch=0)
    manager = _manager(logs)
    manager.clean_logs(NOW)
    # Kept, and its batch now carries its delete horizon in its base timestamp.
    tombstone = [b for b in decode_batches(partition_log.read(0, 1 << 30))
                 if any(r.offset == deleted for r in b.records)]  # fmt: skip
    assert tombstone[0].has_delete_horizon
    assert tombstone[0].base_timestamp == NOW + 1_000
    assert (deleted, b"k0", None) in _records(partition_log)
    assert all(k != b"k0" or o == deleted for o, k, _v in _records(partition_log))
    # Cleaned again before the horizon: still there; at the horizon: gone, and k0 with it.
    manager.checkpoint(TP, 0)
    manager.clean_logs(NOW + 999)
    assert (deleted, b"k0", None) in _records(partition_log)
    manager.checkpoint(TP, 0)
    manager.clean_logs(NOW + 1_000)
    assert all(k != b"k0" for _o, k, _v in _records(partition_log))
    assert DELETE_HORIZON == 0x40


def test_an_idempotent_producers_last_batch_stays_empty() -> None:
    logs = BrokerLogs(config=_config())
    partition_log = logs.get(TP)
    for sequence in range(2):
        batch = new_batch([(b"k0", f"p{sequence}".encode())], timestamp=NOW - 10, producer_id=7,
                          producer_epoch=0, base_sequence=sequence)  # fmt: skip
        partition_log.append(encode_batch(batch), leader_epoch=0)
    producer_last = partition_log.log_end - 1
    _fill(partition_log, rounds=4)  # k0 written again after the producer's last batch
    _manager(logs).clean_logs(NOW)
    batches = decode_batches(partition_log.read(0, 1 << 30))
    last = [b for b in batches if b.producer_id == 7]
    assert [(b.base_offset, b.base_sequence, len(b.records)) for b in last] == [
        (producer_last, 1, 0)
    ]


def test_compact_and_delete_both_apply() -> None:
    config = _config(delete=True, retention_ms=100)
    logs = BrokerLogs(config=config)
    partition_log = logs.get(TP)
    latest = _fill(partition_log)
    _manager(logs).clean_logs(NOW)
    assert {k: (o, v) for o, k, v in _records(partition_log) if k is not None} == latest
    # Retention by time deletes whole segments of a compacted log too (its records are old).
    # By the wall clock: a segment the cleaner emptied is as old as the segments it replaced,
    # made by the wall clock while this test ran (NOW is when the module was imported).
    later = int(time.time() * 1000) + 10_000
    deleted = delete_old_segments(partition_log, later, partition_log.log_end)
    assert deleted > 0
    assert partition_log.log_start > 0


def test_cleaned_segments_reload_and_the_checkpoint_is_kafkas(tmp_path: Path) -> None:
    directory = LogDirectory(tmp_path / "broker-0")
    directory.claim(0, "cluster")
    logs = BrokerLogs(directory, _config())
    partition_log = logs.get(TP)
    latest = _fill(partition_log)
    manager = _manager(logs)
    manager.clean_logs(NOW)
    cleaned = _records(partition_log)
    end = manager.checkpoints[TP]
    logs.close()
    checkpoint = (tmp_path / "broker-0" / kafka_files.CLEANER_OFFSETS).read_bytes()
    assert checkpoint == f"0\n1\n{TP[0]} {TP[1]} {end}\n".encode()
    again = BrokerLogs(LogDirectory(tmp_path / "broker-0"), _config())
    reloaded = again.get(TP)
    assert _records(reloaded) == cleaned
    assert {k: (o, v) for o, k, v in cleaned if k is not None} == latest
    assert _manager(again).checkpoints == {TP: end}
    again.close()


def _crash_mid_swap(tmp_path: Path, steps: int) -> tuple[Path, Kept, Kept]:
    """A log cleaned in a copy of its directory; the original left as a crash after ``steps``
    steps of the first group's swap would leave it: ``(directory, records before, after)``."""
    directory = LogDirectory(tmp_path / "broker-0")
    directory.claim(0, "cluster")
    logs = BrokerLogs(directory, _config(segment_bytes=10 * len(_batch(b"k0", b"v-00-0"))))
    partition_log = logs.get(TP)
    _fill(partition_log)
    before = _records(partition_log)
    logs.close()
    partition = tmp_path / "broker-0" / "compacted-0"
    shutil.copytree(tmp_path / "broker-0", tmp_path / "copy")
    copied = BrokerLogs(LogDirectory(tmp_path / "copy"), _config(segment_bytes=1 << 20))
    cleaned_log = copied.get(TP)
    _manager(copied).clean_logs(NOW)
    after = _records(cleaned_log)
    first = cleaned_log.segments[0]
    stem = f"{first.base_offset:020d}"
    copied.close()
    # The first cleaned segment covers several of the original's segments.
    contents = {suffix: (tmp_path / "copy" / "compacted-0" / f"{stem}{suffix}").read_bytes()
                for suffix in segment_swap.SUFFIXES}  # fmt: skip
    segment_swap.write_cleaned(partition, stem, contents)
    if steps >= 2:
        segment_swap.cleaned_to_swap(partition, stem)
    if steps >= 3:  # the old segments deleted but the second
        olds = sorted(p for p in partition.glob("*.log") if int(p.name[:20]) < first.next_offset)
        for old in olds[2:] + olds[:1]:
            old.unlink()
    return tmp_path / "broker-0", before, after


def test_a_crash_before_the_swap_leaves_the_old_segments(tmp_path: Path) -> None:
    path, before, _after = _crash_mid_swap(tmp_path, steps=1)
    logs = BrokerLogs(LogDirectory(path), _config())
    assert _records(logs.get(TP)) == before
    assert not list((path / "compacted-0").glob("*.cleaned"))
    logs.close()


def test_a_crash_after_the_swap_began_completes_it(tmp_path: Path) -> None:
    for steps in (2, 3):
        path, _before, after = _crash_mid_swap(tmp_path / str(steps), steps=steps)
        logs = BrokerLogs(LogDirectory(path), _config())
        reloaded = _records(logs.get(TP))
        # The first group's records are the cleaned ones, the rest as before the cleaning.
        first_end = max(o for o, _k, _v in after if o < logs.get(TP).segments[1].base_offset)
        assert [r for r in reloaded if r[0] <= first_end] == [r for r in after if r[0] <= first_end]
        assert not list((path / "compacted-0").glob("*.swap"))
        logs.close()


def test_a_follower_behind_copies_a_compacted_log_across_its_gaps() -> None:
    """A follower that was behind (or new) copies the leader's cleaned batches, whose offsets
    skip the batches the cleaner removed, as Kafka's follower takes a batch past its log end;
    a batch below its log end is still refused (the logs diverged)."""
    logs = BrokerLogs(config=_config())
    leader = logs.get(TP)
    _fill(leader)
    _manager(logs).clean_logs(NOW)
    follower = PartitionLog(config=_config())
    follower.append_copied(leader.read(0, 1 << 30))
    assert _records(follower) == _records(leader)
    assert follower.log_end == leader.log_end
    with pytest.raises(ProtocolError, match="the log ends at"):
        follower.append_copied(leader.read(leader.log_end - 1, 1 << 30))


def test_compressed_batches_are_rebuilt_in_their_codec() -> None:
    """A batch losing some records is written again with its codec, offsets, producer fields
    and timestamps as Kafka's ``buildRetainedRecordsInto`` writes them."""
    logs = BrokerLogs(config=_config(segment_bytes=1 << 20, min_compaction_lag_ms=0))
    partition_log = logs.get(TP)
    first = new_batch([(b"a", b"a-0"), (b"b", b"b-0"), (b"c", b"c-0")], timestamp=NOW - 30,
                      compression="gzip")  # fmt: skip
    partition_log.append(encode_batch(first), leader_epoch=3)
    partition_log.append(_batch(b"b", b"b-1", timestamp=NOW - 20), leader_epoch=3)
    partition_log.roll()
    partition_log.append(_batch(b"x", b"x", timestamp=NOW - 10), leader_epoch=3)
    _manager(logs).clean_logs(NOW)
    batches = decode_batches(partition_log.read(0, 1 << 30))
    rebuilt = batches[0]
    assert (rebuilt.base_offset, rebuilt.last_offset_delta, rebuilt.compression) == (0, 2, "gzip")
    assert [(r.offset, r.key) for r in rebuilt.records] == [(0, b"a"), (2, b"c")]
    assert (rebuilt.partition_leader_epoch, rebuilt.base_timestamp) == (3, NOW - 30)
    assert [b.base_offset for b in batches] == [0, 3, 4]


def test_segments_newer_than_min_compaction_lag_ms_wait() -> None:
    logs = BrokerLogs(config=_config(min_compaction_lag_ms=60_000))
    partition_log = logs.get(TP)
    _fill(partition_log)  # every record 10 ms old
    manager = _manager(logs)
    assert manager.clean_logs(NOW) == {}
    # A minute later every inactive segment may be cleaned.
    assert TP in manager.clean_logs(NOW + 60_000)
    assert manager.checkpoints[TP] == partition_log.active.base_offset

"""Logs on disk (``coordkit serve --data-dir``): what a broker appends and truncates is in its
partition's segment file, a broker started again loads the same log (offsets, leader epochs,
idempotent producers' state), a torn tail is cut, a directory in use is refused."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from coordkit.plugins import open_store
from coordkit.protocol.records import decode_batches, encode_batch, new_batch
from coordkit.serve.dataplane.broker_logs import BrokerLogs
from coordkit.serve.dataplane.log import PartitionLog
from coordkit.serve.dataplane.logdir import (
    SEGMENT_NAME,
    LogDirectory,
    LogDirError,
    partition_dir_name,
    valid_prefix,
)
from coordkit.testing.waiting import wait_for
from serve.inprocess import InProcessFactory, in_process_fixture  # noqa: F401
from serve.test_replication import _replica_bytes, _state, _topic

TP = ("orders", 3)


def _batch(*values: bytes, producer_id: int = -1, sequence: int = -1) -> bytes:
    return encode_batch(
        new_batch(
            [(None, v) for v in values],
            timestamp=1_000,
            producer_id=producer_id,
            producer_epoch=0 if producer_id >= 0 else -1,
            base_sequence=sequence,
        )
    )


def _values(log: PartitionLog) -> list[tuple[int, bytes | None]]:
    return [(r.offset, r.value) for b in decode_batches(log.read(0, 1 << 30)) for r in b.records]


def _reopened(path: Path) -> tuple[LogDirectory, BrokerLogs]:
    directory = LogDirectory(path)
    return directory, BrokerLogs(directory)


def test_appends_and_truncations_are_on_disk_and_load_again(tmp_path: Path) -> None:
    directory, logs = _reopened(tmp_path / "broker-0")
    log = logs.get(TP)
    log.append(_batch(b"a", b"b"), leader_epoch=1)
    log.append(_batch(b"c"), leader_epoch=2)
    log.append(_batch(b"d"), leader_epoch=4)
    segment = tmp_path / "broker-0" / "orders-3" / SEGMENT_NAME
    assert segment.stat().st_size == log.size
    assert log.truncate_to(3) == 1  # cuts the epoch-4 batch
    assert segment.stat().st_size == log.size
    log.append(_batch(b"e", b"f"), leader_epoch=5)
    expected = _values(log)
    epochs = [log.end_offset_for(e) for e in range(7)]
    directory.close()

    directory, logs = _reopened(tmp_path / "broker-0")
    again = logs.find(TP)
    assert again is not None
    assert _values(again) == expected == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"e"), (4, b"f")]
    assert again.log_end == 5
    assert [again.end_offset_for(e) for e in range(7)] == epochs
    assert again.latest_epoch == 5
    # It goes on where it stopped, on disk too.
    again.append(_batch(b"g"), leader_epoch=5)
    directory.close()
    directory, logs = _reopened(tmp_path / "broker-0")
    assert [v for _, v in _values(logs.get(TP))] == [b"a", b"b", b"c", b"e", b"f", b"g"]
    directory.close()


def test_an_idempotent_producers_retry_is_still_recognised_after_a_restart(
    tmp_path: Path,
) -> None:
    directory, logs = _reopened(tmp_path)
    sent = _batch(b"x", producer_id=7, sequence=0)
    first = logs.get(TP).append(sent, leader_epoch=0)
    directory.close()
    directory, logs = _reopened(tmp_path)
    retried = logs.get(TP).append(sent, leader_epoch=0)
    assert (retried.base_offset, retried.records) == (first.base_offset, 0)
    assert logs.get(TP).log_end == 1
    directory.close()


@pytest.mark.parametrize("damage", ["torn", "flipped", "garbage"])
def test_a_damaged_tail_is_cut_at_the_last_whole_batch(tmp_path: Path, damage: str) -> None:
    directory, logs = _reopened(tmp_path)
    log = logs.get(TP)
    for value in (b"one", b"two", b"three"):
        log.append(_batch(value), leader_epoch=0)
    sizes = [len(b) for b in [b for segment in log.segments for b in segment.batches]]
    directory.close()
    segment = tmp_path / partition_dir_name(TP) / SEGMENT_NAME
    data = bytearray(segment.read_bytes())
    if damage == "torn":  # a process killed in the middle of a write
        data = data[: sizes[0] + sizes[1] + 5]
    elif damage == "flipped":  # the last batch's CRC no longer matches
        data[-1] ^= 0x01
    else:
        data += b"\xff" * 40
    segment.write_bytes(bytes(data))

    directory, logs = _reopened(tmp_path)
    kept = logs.get(TP)
    wanted = [b"one", b"two"] if damage != "garbage" else [b"one", b"two", b"three"]
    assert [v for _, v in _values(kept)] == wanted
    assert segment.stat().st_size == sum(sizes[: len(wanted)])
    kept.append(_batch(b"four"), leader_epoch=1)  # appends after the cut, not after the damage
    directory.close()
    directory, logs = _reopened(tmp_path)
    assert [v for _, v in _values(logs.get(TP))] == [*wanted, b"four"]
    directory.close()


def test_valid_prefix_stops_where_offsets_go_back() -> None:
    """Offsets grow from the segment's base offset; they may skip (Kafka's log cleaner leaves
    gaps in a compacted topic's log)."""
    log = PartitionLog()
    log.append(_batch(b"a"), leader_epoch=0)
    log.append(_batch(b"b"), leader_epoch=0)
    first, second = [b for segment in log.segments for b in segment.batches]
    assert valid_prefix(first + second) == len(first) + len(second)
    assert valid_prefix(second + first) == len(second)  # offset 1, then 0
    assert valid_prefix(first + first) == len(first)  # offset 0 twice
    assert valid_prefix(second) == len(second)  # from offset 1: a gap, as after compaction
    assert valid_prefix(first, first_offset=1) == 0  # below the segment's base offset
    assert valid_prefix(b"") == 0


def test_deleting_a_topic_deletes_its_directories(tmp_path: Path) -> None:
    directory, logs = _reopened(tmp_path)
    logs.get(("gone", 0)).append(_batch(b"a"), leader_epoch=0)
    logs.get(("gone", 1)).append(_batch(b"a"), leader_epoch=0)
    logs.get(("kept", 0)).append(_batch(b"a"), leader_epoch=0)
    logs.drop_topic("gone")
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["kept-0"]
    directory.close()


def test_a_name_that_is_not_a_topic_is_not_a_path(tmp_path: Path) -> None:
    for name in ("..", "a/b", "../../etc", "x\n"):
        with pytest.raises(LogDirError, match="not a legal topic name"):
            partition_dir_name((name, 0))
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "strange dir").mkdir()
    directory, logs = _reopened(tmp_path)  # other entries are left alone
    assert logs.stored_topics() == set()
    assert (tmp_path / "notes.txt").read_text() == "mine"
    directory.close()


def test_a_directory_in_use_is_refused(tmp_path: Path) -> None:
    directory = LogDirectory(tmp_path)
    with pytest.raises(LogDirError, match="in use by another process"):
        LogDirectory(tmp_path)
    directory.close()
    LogDirectory(tmp_path).close()  # free again


def test_serve_refuses_a_data_dir_in_use_in_one_line(tmp_path: Path) -> None:
    directory = LogDirectory(tmp_path / "broker-0")
    try:
        done = subprocess.run(
            [sys.executable, "-c", "from coordkit.cli import main; main()", "serve",
             "--store", "memory://", "--port", "0", "--data-dir", str(tmp_path)],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    finally:
        directory.close()
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "broker-0" in lines[0]
    assert "in use by another process" in lines[0]
    assert done.stdout == ""


# -- a whole server restarted on the same store and data directory ----------------------------


def _send(bootstrap: str, prefix: bytes, count: int) -> None:
    """``count`` keyed records ``<prefix>-<i>`` to topic ``kept``, acks=all, all acknowledged."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(count):
        producer.send("kept", key=b"k%d" % (i % 5), value=b"%s-%d" % (prefix, i))
    producer.flush(timeout=60)
    producer.close(timeout=30)


def _read(consumer: KafkaConsumer, count: int, seconds: float = 60) -> list[bytes]:
    """The values ``consumer`` polls until it has ``count`` (or ``seconds`` passed), and then
    for one more second: anything beyond ``count`` would show."""
    values: list[bytes] = []
    deadline = time.monotonic() + seconds
    while len(values) < count and time.monotonic() < deadline:
        for batch in consumer.poll(200).values():
            values.extend(r.value for r in batch)
    extra_until = time.monotonic() + 1
    while time.monotonic() < extra_until:
        for batch in consumer.poll(200).values():
            values.extend(r.value for r in batch)
    return values


def test_a_restarted_server_serves_its_records_and_the_committed_offsets(
    in_process: InProcessFactory, tmp_path: Path
) -> None:
    """Every broker stops, then starts again on the same store and directory: the records are
    there again, each replica's log as it was, the high watermark where it was, and a group
    resumes from its committed offsets."""
    data_dir = tmp_path / "logs"
    server = in_process(brokers=3, data_dir=data_dir)
    _topic(server, "kept", 2, 3)
    _send(server.bootstrap, b"old", 40)
    consumer = KafkaConsumer("kept", bootstrap_servers=server.bootstrap, group_id="readers",
                             auto_offset_reset="earliest", enable_auto_commit=False)  # fmt: skip
    assert sorted(_read(consumer, 40)) == sorted(b"old-%d" % i for i in range(40))
    consumer.commit()
    consumer.close()
    # Every replica holds all 40 before the stop (acks=all), byte for byte the same.
    replicas = {p: {b: _replica_bytes(server, ("kept", p), b) for b in range(3)} for p in range(2)}
    assert all(len(set(by_broker.values())) == 1 for by_broker in replicas.values())
    ends = {p: replicas[p][0][0] for p in range(2)}
    assert sum(ends.values()) == 40
    server.close()

    again = in_process(brokers=3, store_url=server.store_url, data_dir=data_dir)
    wait_for(lambda: all(_state(again, ("kept", p)) for p in range(2)), 60, "leaders again")
    for p in range(2):
        for b in range(3):
            assert _replica_bytes(again, ("kept", p), b) == replicas[p][b]
    wait_for(lambda: all(_state(again, ("kept", p)).hw == ends[p] for p in range(2)), 60,
             "the high watermarks where they were")  # fmt: skip
    # A reader without a group sees the old records; the group resumes after them.
    everything = KafkaConsumer(bootstrap_servers=again.bootstrap, auto_offset_reset="earliest")
    everything.assign([TopicPartition("kept", p) for p in range(2)])
    assert sorted(_read(everything, 40)) == sorted(b"old-%d" % i for i in range(40))
    everything.close()
    _send(again.bootstrap, b"new", 10)
    group = KafkaConsumer("kept", bootstrap_servers=again.bootstrap, group_id="readers",
                          auto_offset_reset="earliest", enable_auto_commit=False)  # fmt: skip
    assert sorted(_read(group, 10)) == sorted(b"new-%d" % i for i in range(10))
    group.close()


def test_logs_of_a_topic_deleted_while_the_server_was_down_are_dropped(
    in_process: InProcessFactory, tmp_path: Path
) -> None:
    data_dir = tmp_path / "logs"
    server = in_process(brokers=1, data_dir=data_dir)
    _topic(server, "doomed", 1, 1)
    _topic(server, "spared", 1, 1)
    producer = KafkaProducer(bootstrap_servers=server.bootstrap, acks=1)
    producer.send("doomed", value=b"x")
    producer.send("spared", value=b"y")
    producer.flush(timeout=60)
    producer.close(timeout=30)
    server.close()
    # Deleted while no broker runs: only the store changes (the topic is gone).
    with open_store(server.store_url) as store:
        store.delete("/brokers/topics/doomed", recursive=True)
    again = in_process(brokers=1, store_url=server.store_url, data_dir=data_dir)
    assert sorted(p.name for p in (data_dir / "broker-0").iterdir() if p.is_dir()) == ["spared-0"]
    assert again.on_loop(lambda: again.context(0).logs.find(("doomed", 0))) is None

"""What a ``coordkit serve --data-dir`` log directory shares with a Kafka 3.9 broker's: the small
files as Kafka writes them (``meta.properties``, ``partition.metadata``, the checkpoints), logs of
several segments, and what becomes of Kafka's index files, producer snapshots, recovery points
and clean-shutdown marker when coordkit changes a log. (``tests/apache_kafka/
test_records_both_ways.py`` holds these against files a real Kafka broker wrote.)"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pytest

from coordkit.plugins import open_store
from coordkit.protocol.records import decode_batches, encode_batch, new_batch
from coordkit.serve.dataplane import kafka_files
from coordkit.serve.dataplane.broker_logs import BrokerLogs
from coordkit.serve.dataplane.kafka_files import KafkaFileError
from coordkit.serve.dataplane.log import EARLIEST_TIMESTAMP
from coordkit.serve.dataplane.log_config import LogConfig
from coordkit.serve.dataplane.logdir import LogDirectory, LogDirError, segment_name
from serve.inprocess import InProcessFactory, in_process_fixture  # noqa: F401
from serve.test_replication import _topic

TP = ("orders", 0)
CLUSTER = "jXoBBtUsT3uTdIRVf-ubwg"
TOPIC_ID = "WK7YmY5DRbu4QHXNHarPwA"


def _batch(*values: bytes) -> bytes:
    return encode_batch(new_batch([(None, v) for v in values], timestamp=1_000))


def _values(logs: BrokerLogs, tp: TP = TP) -> list[tuple[int, bytes | None]]:
    log = logs.get(tp)
    data = log.read(log.log_start, 1 << 30)
    return [(r.offset, r.value) for b in decode_batches(data) for r in b.records]


# -- the files, byte for byte -------------------------------------------------------------------


def test_meta_properties_as_java_stores_them() -> None:
    when = datetime.datetime(2026, 11, 29, 6, 3, 53, tzinfo=datetime.UTC)
    # What Kafka 3.9.2 wrote in a ZooKeeper-mode broker's directory.
    kafkas = b"#\n#Sun Nov 29 06:03:53 UTC 2026\nbroker.id=3\nversion=0\ncluster.id=%s\n" % (
        CLUSTER.encode()
    )
    assert kafka_files.meta_properties(3, CLUSTER, when) == kafkas
    read = kafka_files.read_properties(kafkas, "meta.properties")
    assert read == {"broker.id": "3", "version": "0", "cluster.id": CLUSTER}
    assert kafka_files.read_properties(b"! comment\n a : b \n\nc=\n", "x") == {"a": "b", "c": ""}
    with pytest.raises(KafkaFileError, match="line 1: not key=value"):
        kafka_files.read_properties(b"cluster.id=a\\\n  b\n", "meta.properties")


def test_partition_metadata_has_no_final_newline() -> None:
    written = kafka_files.partition_metadata(TOPIC_ID)
    assert written == b"version: 0\ntopic_id: " + TOPIC_ID.encode()
    assert kafka_files.read_partition_metadata(written, "p") == TOPIC_ID
    assert kafka_files.read_partition_metadata(written + b"\n", "p") == TOPIC_ID
    for bad in (b"version: 1\ntopic_id: " + TOPIC_ID.encode(), b"version: 0\ntopic_id: short"):
        with pytest.raises(KafkaFileError, match=r"partition\.metadata"):
            kafka_files.read_partition_metadata(bad, "orders-0/partition.metadata")


def test_checkpoints_as_kafka_writes_them() -> None:
    assert kafka_files.leader_epoch_checkpoint([(0, 0), (6, 12)]) == b"0\n2\n0 0\n6 12\n"
    assert kafka_files.read_leader_epoch_checkpoint(b"0\n2\n0 0\n6 12\n", "e") == [(0, 0), (6, 12)]
    offsets = {("orders", 1): 12, ("audit", 0): 6, ("orders", 0): 0}
    written = kafka_files.offsets_checkpoint(offsets)
    assert written == b"0\n3\naudit 0 6\norders 0 0\norders 1 12\n"
    assert kafka_files.read_offsets_checkpoint(written, "c") == offsets
    assert kafka_files.offsets_checkpoint({}) == b"0\n0\n"  # Kafka's log starts when all are 0
    assert kafka_files.read_offsets_checkpoint(b"", "cleaner-offset-checkpoint") == {}
    for bad, complaint in (
        (b"1\n0\n", "version '1'"),
        (b"0\n2\norders 0 1\n", "expected 2 entries, found 1"),
        (b"0\n1\norders 0\n", "expected 3 fields"),
        (b"0\n1\norders x 1\n", "'x' is not a number"),
    ):
        with pytest.raises(KafkaFileError, match=complaint):
            kafka_files.read_offsets_checkpoint(bad, "recovery-point-offset-checkpoint")


# -- whose directory -------------------------------------------------------------------------


def test_a_directory_of_another_broker_or_cluster_is_refused(tmp_path: Path) -> None:
    directory = LogDirectory(tmp_path)
    directory.claim(3, CLUSTER)
    meta = tmp_path / kafka_files.META_PROPERTIES
    assert kafka_files.read_properties(meta.read_bytes(), "m") == {
        "broker.id": "3", "version": "0", "cluster.id": CLUSTER,
    }  # fmt: skip
    assert (tmp_path / kafka_files.CLEANER_OFFSETS).read_bytes() == b""
    directory.claim(3, CLUSTER)  # its own: fine
    with pytest.raises(LogDirError, match="broker id '3' is not 4: the directory is another"):
        directory.claim(4, CLUSTER)
    with pytest.raises(LogDirError, match="is not the store's 'other'"):
        directory.claim(3, "other")
    meta.write_bytes(b"version=1\nnode.id=3\ncluster.id=%s\n" % CLUSTER.encode())
    with pytest.raises(LogDirError, match="a KRaft node's"):
        directory.claim(3, CLUSTER)
    directory.close()


def test_two_directories_cannot_share_a_lock_with_kafka(tmp_path: Path) -> None:
    """The POSIX record lock is the one Java's FileChannel.tryLock takes: another process (a
    Kafka broker) is refused; a second open in this process is refused by the flock."""
    directory = LogDirectory(tmp_path)
    with pytest.raises(LogDirError, match="in use by another process"):
        LogDirectory(tmp_path)
    directory.close()


# -- logs of several segments -----------------------------------------------------------------


def test_a_log_rolls_into_segments_and_loads_them_all(tmp_path: Path) -> None:
    one = len(_batch(b"v-00"))
    directory = LogDirectory(tmp_path)
    logs = BrokerLogs(directory, LogConfig(segment_bytes=3 * one))
    for i in range(8):
        logs.get(TP).append(_batch(b"v-%02d" % i), leader_epoch=i // 3)
    partition = tmp_path / "orders-0"
    assert sorted(p.name for p in partition.glob("*.log")) == [
        segment_name(0), segment_name(3), segment_name(6)
    ]  # fmt: skip
    assert (partition / kafka_files.LEADER_EPOCHS).read_bytes() == b"0\n3\n0 0\n1 3\n2 6\n"
    directory.close()

    directory = LogDirectory(tmp_path)
    logs = BrokerLogs(directory, LogConfig(segment_bytes=3 * one))
    assert _values(logs) == [(i, b"v-%02d" % i) for i in range(8)]
    assert logs.get(TP).truncate_to(2) == 6  # into the first segment: the others go
    assert sorted(p.name for p in partition.glob("*.log")) == [segment_name(0)]
    assert (partition / kafka_files.LEADER_EPOCHS).read_bytes() == b"0\n1\n0 0\n"
    logs.get(TP).append(_batch(b"again"), leader_epoch=5)
    directory.close()
    directory = LogDirectory(tmp_path)
    logs = BrokerLogs(directory, LogConfig(segment_bytes=3 * one))
    assert _values(logs) == [(0, b"v-00"), (1, b"v-01"), (2, b"again")]
    assert logs.get(TP).end_offset_for(5) == (5, 3)
    directory.close()


def test_a_log_whose_first_segments_retention_deleted_starts_past_zero(tmp_path: Path) -> None:
    """Kafka's retention deletes whole segments: the log starts at the first one left, and an
    empty last segment (rolled at the log end) names where the log ends."""
    partition = tmp_path / "orders-0"
    partition.mkdir()
    (partition / segment_name(100)).write_bytes(
        _with_offset(_batch(b"a"), 100) + _with_offset(_batch(b"b"), 101)
    )
    (partition / segment_name(102)).write_bytes(b"")
    directory = LogDirectory(tmp_path)
    logs = BrokerLogs(directory)
    log = logs.get(TP)
    assert (log.log_start, log.log_end) == (100, 102)
    assert log.offset_for(EARLIEST_TIMESTAMP) == (100, -1)
    assert _values(logs) == [(100, b"a"), (101, b"b")]
    log.append(_batch(b"c"), leader_epoch=0)
    directory.close()
    assert (partition / segment_name(102)).stat().st_size == len(_batch(b"c"))
    directory = LogDirectory(tmp_path)
    assert _values(BrokerLogs(directory)) == [(100, b"a"), (101, b"b"), (102, b"c")]
    directory.close()

    empty = tmp_path / "audit-0"
    empty.mkdir()
    (empty / segment_name(40)).write_bytes(b"")
    directory = LogDirectory(tmp_path)
    log = BrokerLogs(directory).get(("audit", 0))
    assert (log.log_start, log.log_end) == (40, 40)
    directory.close()


def test_a_corrupt_segment_cuts_the_log_there(tmp_path: Path) -> None:
    one = len(_batch(b"v-00"))
    directory = LogDirectory(tmp_path)
    logs = BrokerLogs(directory, LogConfig(segment_bytes=2 * one))
    for i in range(6):
        logs.get(TP).append(_batch(b"v-%02d" % i), leader_epoch=0)
    directory.close()
    middle = tmp_path / "orders-0" / segment_name(2)
    data = bytearray(middle.read_bytes())
    data[-1] ^= 1  # the second batch of the middle segment
    middle.write_bytes(bytes(data))
    directory = LogDirectory(tmp_path)
    logs = BrokerLogs(directory, LogConfig(segment_bytes=2 * one))
    assert _values(logs) == [(i, b"v-%02d" % i) for i in range(3)]
    assert sorted(p.name for p in (tmp_path / "orders-0").glob("*.log")) == [
        segment_name(0), segment_name(2)
    ]  # fmt: skip
    directory.close()


def test_an_older_record_format_is_refused_not_cut(tmp_path: Path) -> None:
    partition = tmp_path / "orders-0"
    partition.mkdir()
    batch = bytearray(_batch(b"x"))
    batch[16] = 1  # magic 1: a message set of Kafka before 0.11
    (partition / segment_name(0)).write_bytes(bytes(batch))
    directory = LogDirectory(tmp_path)
    with pytest.raises(LogDirError, match=r"record format v1 at byte 0 .* nothing was changed"):
        BrokerLogs(directory)
    directory.close()
    assert (partition / segment_name(0)).read_bytes() == bytes(batch)


# -- Kafka's files when coordkit changes a log ---------------------------------------------------


def _kafka_like_directory(path: Path, one: int) -> None:
    """A directory as a Kafka broker leaves it after a clean shutdown: two segments with their
    indexes, producer snapshots, checkpoints, the clean-shutdown marker."""
    partition = path / "orders-0"
    partition.mkdir(parents=True)
    (partition / segment_name(0)).write_bytes(_batch(b"a") + _with_offset(_batch(b"b"), 1))
    (partition / segment_name(2)).write_bytes(_with_offset(_batch(b"c"), 2))
    for stem in (f"{0:020d}", f"{2:020d}"):
        for suffix in (".index", ".timeindex"):
            (partition / f"{stem}{suffix}").write_bytes(b"")
    for offset in (2, 3):
        (partition / f"{offset:020d}.snapshot").write_bytes(b"")
    (partition / kafka_files.PARTITION_METADATA).write_bytes(
        kafka_files.partition_metadata(TOPIC_ID)
    )
    (path / kafka_files.CLEAN_SHUTDOWN).write_bytes(b'{"version":0,"brokerEpoch":-1}')
    (path / kafka_files.RECOVERY_POINTS).write_bytes(kafka_files.offsets_checkpoint({TP: 3}))
    assert one > 0


def _with_offset(batch: bytes, offset: int) -> bytes:
    return offset.to_bytes(8, "big") + batch[8:]


def test_changing_a_kafka_log_leaves_kafka_nothing_stale(tmp_path: Path) -> None:
    one = len(_batch(b"a"))
    _kafka_like_directory(tmp_path, one)
    partition = tmp_path / "orders-0"
    recovery = tmp_path / kafka_files.RECOVERY_POINTS
    directory = LogDirectory(tmp_path)
    logs = BrokerLogs(directory)
    assert not (tmp_path / kafka_files.CLEAN_SHUTDOWN).exists()
    assert _values(logs) == [(0, b"a"), (1, b"b"), (2, b"c")]
    assert directory.stored_topic_ids == {TP: TOPIC_ID}
    # Loading changes nothing of Kafka's but the marker: its (empty) indexes agree with the
    # batches (too few bytes for an entry).
    assert sorted((p.name, p.stat().st_size) for p in partition.glob("*index")) == [
        (f"{base:020d}{suffix}", 0) for base in (0, 2) for suffix in (".index", ".timeindex")
    ]  # fmt: skip
    logs.get(TP).append(_batch(b"d"), leader_epoch=0)
    # An append past the recovery point leaves it: Kafka checks from there anyway.
    assert kafka_files.read_offsets_checkpoint(recovery.read_bytes(), "r") == {TP: 3}
    logs.get(TP).truncate_to(1)
    # Into the first segment: the later one goes with its indexes, the snapshots past offset 1
    # too, and the recovery point comes down to the cut at once.
    assert sorted(p.name for p in partition.iterdir() if p.suffix in (".log", ".index")) == [
        f"{0:020d}.index", f"{0:020d}.log"
    ]  # fmt: skip
    assert list(partition.glob("*.snapshot")) == []
    assert kafka_files.read_offsets_checkpoint(recovery.read_bytes(), "r") == {TP: 1}
    directory.write_high_watermarks({TP: 7})
    logs.close()
    # Closed as Kafka stops: flushed, so the recovery point is the log end.
    assert kafka_files.read_offsets_checkpoint(recovery.read_bytes(), "r") == {TP: 1}
    hws = (tmp_path / kafka_files.HIGH_WATERMARKS).read_bytes()
    assert kafka_files.read_offsets_checkpoint(hws, "h") == {TP: 1}  # not past the log end
    assert (tmp_path / kafka_files.LOG_START_OFFSETS).read_bytes() == b"0\n0\n"


def test_new_partitions_get_their_topic_id(tmp_path: Path) -> None:
    directory = LogDirectory(tmp_path)
    logs = BrokerLogs(directory)
    logs.get(TP).append(_batch(b"a"), leader_epoch=0)
    metadata = tmp_path / "orders-0" / kafka_files.PARTITION_METADATA
    assert not metadata.exists()  # the id is not known yet
    directory.topic_ids_known({"orders": TOPIC_ID, "other": "AAAAAAAAAAAAAAAAAAAAAA"})
    assert metadata.read_bytes() == kafka_files.partition_metadata(TOPIC_ID)
    logs.get(("orders", 1)).append(_batch(b"b"), leader_epoch=0)  # known: written at once
    assert (tmp_path / "orders-1" / kafka_files.PARTITION_METADATA).exists()
    directory.close()


def test_a_server_drops_the_logs_of_a_topic_created_again(
    in_process: InProcessFactory, tmp_path: Path
) -> None:
    """A topic deleted and created again while the brokers were down: the logs on disk name the
    old topic id in their partition.metadata, and are dropped rather than served as the new
    topic's; the server writes meta.properties with the store's cluster id."""
    data_dir = tmp_path / "logs"
    server = in_process(brokers=1, data_dir=data_dir)
    _topic(server, "kept", 1, 1)
    server.on_loop(lambda: server.context(0).logs.get(("kept", 0)).append(_batch(b"old"), 0))
    metadata = data_dir / "broker-0" / "kept-0" / kafka_files.PARTITION_METADATA
    store = open_store(server.store_url)
    try:
        data, _ = store.get("/brokers/topics/kept")
        old_id = json.loads(data)["topic_id"]
        server.close()
        assert kafka_files.read_partition_metadata(metadata.read_bytes(), "m") == old_id
        meta = kafka_files.read_properties(
            (data_dir / "broker-0" / "meta.properties").read_bytes(), "m"
        )
        cluster_id = json.loads(store.get("/cluster/id")[0])["id"]
        assert (meta["broker.id"], meta["cluster.id"]) == ("0", cluster_id)
        created_again = json.loads(data)
        created_again["topic_id"] = "AAAAAAAAAAAAAAAAAAAAAQ"
        store.set("/brokers/topics/kept", json.dumps(created_again).encode())
    finally:
        store.close()
    again = in_process(brokers=1, store_url=server.store_url, data_dir=data_dir)
    log = again.on_loop(lambda: again.context(0).logs.find(("kept", 0)))
    assert log is None or log.log_end == 0
    again.close()

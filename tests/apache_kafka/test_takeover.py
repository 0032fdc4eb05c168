"""Take-over both ways between coordkit and Kafka 3.9 on one ZooKeeper chroot and the same log
directories (issue #30, item 4), in one scenario whose stages the tests look at in order:

1. a coordkit cluster — ``coordkit serve --broker-id N --data-dir DIR`` processes, brokers 1-3 —
   gets topics (replication factors 3 and 2) and records produced with acks=all by kafka-python;
   every replica copies them (the logs of each partition end byte for byte alike), and the
   cluster is stopped with leaders, ISRs and the controller epoch in ZooKeeper;
2. Kafka 3.9 brokers 1-3 start on the chroot, each on coordkit's directory of its id as
   ``log.dirs``: every partition comes online with full ISRs, Kafka's logs hold no complaint
   about a node or a file, and Kafka serves coordkit's records at their offsets, with their keys,
   values and timestamps; then Kafka gets a topic of small segments, more records and a consumer
   group, and is stopped;
3. Kafka's files are held to coordkit's (byte for byte where Kafka's order is not a hash map's);
4. ``coordkit serve --broker-id N`` processes start on the tree and the directories Kafka left:
   ``coordkit cluster check`` converges, they serve every record Kafka served (several segments a
   partition) at the same offsets, and clients produce and consume.
"""

from __future__ import annotations

import datetime
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from coordkit.engine.cluster_id import kafka_uuid
from coordkit.plugins import open_store
from coordkit.protocol import messages
from coordkit.protocol.records import decode_batches
from coordkit.serve.dataplane import kafka_files
from coordkit.serve.dataplane.logdir import LogDirectory, LogDirError, segment_name
from coordkit.testing.servers import KafkaCluster, StandaloneZooKeeper
from coordkit.testing.waiting import wait_for
from serve.conftest import STOP_SECONDS, RawClient, ServeProcess

BROKERS = (1, 2, 3)
CHROOT = "/takeover"
#: Seconds to wait for what a cluster does on its own (elections, followers catching up).
WAIT_SECONDS = 60
#: coordkit's topics: name → (partitions, replication factor), and records each.
COORDKIT_TOPICS = {"orders": (3, 3), "audit": (2, 2)}
COORDKIT_RECORDS = 60
#: Kafka's topic of small segments (``segment.bytes``): a log of several segments for coordkit.
ROLLED = "rolled"
ROLLED_SEGMENT_BYTES = 1024
ROLLED_RECORDS = 120
#: coordkit's own logs are of small segments too, with an index entry every few batches, so that
#: Kafka reads them from the middle through coordkit's indexes.
COORDKIT_LOG_CONFIGS = ("log.segment.bytes=512", "log.index.interval.bytes=100")
#: Kafka's own words for a node or a file it cannot use; any in an ERROR or WARN line fails.
COMPLAINT = re.compile(
    r"json|parse|znode|format|corrupt|checkpoint|inconsistent|could not find|KeeperException",
    re.IGNORECASE,
)
#: What an ERROR or WARN line mentions to be looked at (the brief's words).
NOTABLE = re.compile(r"json|parse|znode|format|exception", re.IGNORECASE)
_LOG_LEVEL = re.compile(r"^\[[^]]+\] (ERROR|WARN) ")

Record = tuple[str, int, int, bytes | None, bytes | None, int]


@attrs.define
class Scenario:
    """What the stages found, for the tests to look at."""

    url: str
    data_dir: Path
    #: Every record as coordkit served it before it stopped.
    coordkit_records: list[Record] = attrs.field(factory=list)
    #: Partition states and controller epoch in ZooKeeper when coordkit had stopped.
    coordkit_states: dict[tuple[str, int], dict[str, Any]] = attrs.field(factory=dict)
    coordkit_controller_epoch: int = 0
    #: ERROR and WARN lines of Kafka's logs, from its start until it stopped.
    kafka_log_lines: list[str] = attrs.field(factory=list)
    #: Every record as Kafka served it before it stopped.
    kafka_records: list[Record] = attrs.field(factory=list)
    coordkit_again: dict[int, ServeProcess] = attrs.field(factory=dict)
    #: The index files of coordkit's segments as it left them (path → bytes).
    coordkit_indexes: dict[Path, bytes] = attrs.field(factory=dict)


# -- helpers -------------------------------------------------------------------------------------


def _coordkit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from coordkit.cli import main; main()", *args],
        check=False, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _start_coordkit(url: str, data_dir: Path) -> dict[int, ServeProcess]:
    """``coordkit serve --broker-id N`` for each broker, in a process of its own."""
    common = ["--store", url, "--port", "0", "--data-dir", str(data_dir)]
    common += [word for config in COORDKIT_LOG_CONFIGS for word in ("--config", config)]
    return {b: ServeProcess([*common, "--broker-id", str(b)]) for b in BROKERS}


def _stop_coordkit(servers: dict[int, ServeProcess]) -> None:
    for server in servers.values():
        status, _out, err = server.stop()
        assert status == 0, err


def _bootstrap(servers: dict[int, ServeProcess]) -> str:
    return ",".join(server.bootstrap for server in servers.values())


def _metadata(address: str) -> Any:
    client = RawClient(address)
    try:
        return client.call(messages.MetadataRequest(topics=None), 12)
    finally:
        client.close()


def _partitions(address: str) -> dict[tuple[str, int], Any]:
    """Every partition's Metadata (leader, replicas, ISR) as one broker answers it."""
    answer = _metadata(address)
    return {(t.name, p.partition_index): p for t in answer.topics for p in t.partitions}


def _online_with_full_isrs(address: str, topics: set[str]) -> bool:
    try:
        found = _partitions(address)
    except OSError:
        return False
    mine = {tp: p for tp, p in found.items() if tp[0] in topics}
    return (
        bool(mine)
        and {t for t, _ in mine} == topics
        and all(
            p.error_code == 0
            and p.leader_id >= 0
            and sorted(p.isr_nodes) == sorted(p.replica_nodes)
            for p in mine.values()
        )
    )


def _read_all(bootstrap: str, topics: dict[str, int], expected: int) -> list[Record]:
    """Every record of ``topics`` (name → partitions) from the start, sorted; polls until
    ``expected`` came (bounded), then a second more, so that extra records would show."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest")  # fmt: skip
    try:
        consumer.assign([TopicPartition(t, p) for t, count in topics.items() for p in range(count)])
        found: list[Record] = []
        deadline = time.monotonic() + WAIT_SECONDS
        settle: float | None = None
        while time.monotonic() < deadline and (settle is None or time.monotonic() < settle):
            for batch in consumer.poll(200).values():
                found.extend((r.topic, r.partition, r.offset, r.key, r.value, r.timestamp)
                             for r in batch)  # fmt: skip
            if len(found) >= expected and settle is None:
                settle = time.monotonic() + 1
        return sorted(found)
    finally:
        consumer.close()


def _produce(
    bootstrap: str, topic: str, count: int, prefix: str, pad_to: int = 0, **options: Any
) -> None:
    """``count`` records ``<prefix>-<i>`` (padded with dots to ``pad_to`` bytes) under seven
    keys, acks=all, every one acknowledged."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0, **options)
    try:
        sent = [producer.send(topic, key=b"key-%d" % (i % 7),
                              value=f"{prefix}-{i}".ljust(pad_to, ".").encode())
                for i in range(count)]  # fmt: skip
        for future in sent:
            future.get(timeout=WAIT_SECONDS)
    finally:
        producer.close(timeout=STOP_SECONDS)


def _zookeeper_states(url: str) -> tuple[dict[tuple[str, int], dict[str, Any]], int]:
    store = open_store(url)
    try:
        states = {}
        for topic in store.children("/brokers/topics"):
            for partition in store.children(f"/brokers/topics/{topic}/partitions"):
                data, _ = store.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
                states[(topic, int(partition))] = json.loads(data)
        epoch = int(store.get("/controller_epoch")[0])
        return states, epoch
    finally:
        store.close()


def _error_and_warning_lines(kafka: KafkaCluster) -> list[str]:
    return [
        f"node {node.node_id}: {line}"
        for node in kafka.nodes.values()
        for line in node.log_since_start().splitlines()
        if _LOG_LEVEL.match(line)
    ]


def _segments(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob("*.log"))


# -- the stages ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def scenario(zookeeper: StandaloneZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    return Scenario(f"zookeeper://{zookeeper.hosts}{CHROOT}", tmp_path_factory.mktemp("logs"))


@pytest.fixture(scope="module")
def coordkit_stopped(scenario: Scenario) -> Scenario:
    """Stage 1: a coordkit cluster with topics and records, every replica in step, stopped."""
    servers = _start_coordkit(scenario.url, scenario.data_dir)
    try:
        bootstrap = _bootstrap(servers)
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
        try:
            admin.create_topics([NewTopic(name, partitions, factor)
                                 for name, (partitions, factor) in COORDKIT_TOPICS.items()])  # fmt: skip
        finally:
            admin.close()
        first = next(iter(servers.values())).bootstrap
        wait_for(lambda: _online_with_full_isrs(first, set(COORDKIT_TOPICS)), WAIT_SECONDS,
                 "coordkit's partitions online with full ISRs")  # fmt: skip
        for topic in COORDKIT_TOPICS:
            _produce(bootstrap, topic, COORDKIT_RECORDS, topic, batch_size=16)  # a batch each
        partitions = {name: count for name, (count, _) in COORDKIT_TOPICS.items()}
        scenario.coordkit_records = _read_all(bootstrap, partitions, 2 * COORDKIT_RECORDS)
        wait_for(lambda: _replicas_alike(scenario.data_dir, COORDKIT_TOPICS), WAIT_SECONDS,
                 "every replica's log alike, byte for byte")  # fmt: skip
    finally:
        _stop_coordkit(servers)
    scenario.coordkit_states, scenario.coordkit_controller_epoch = _zookeeper_states(scenario.url)
    scenario.coordkit_indexes = {path: path.read_bytes()
                                 for path in sorted(scenario.data_dir.glob("*/*/*index"))}  # fmt: skip
    # Broker 3's meta.properties goes, so that Kafka writes its own (held to coordkit's below).
    (scenario.data_dir / "broker-3" / kafka_files.META_PROPERTIES).unlink()
    return scenario


def _replicas_alike(data_dir: Path, topics: Mapping[str, tuple[int, int]]) -> bool:
    """Whether every replica of every partition of ``topics`` (name → partitions, replication
    factor) holds the same segments, byte for byte."""
    replicas: dict[str, set[tuple[tuple[str, bytes], ...]]] = {}
    for broker in BROKERS:
        for partition in (data_dir / f"broker-{broker}").glob("*-*"):
            segments = tuple(
                (log.name, log.read_bytes()) for log in sorted(partition.glob("*.log"))
            )
            if segments:
                replicas.setdefault(partition.name, set()).add(segments)
    expected = {f"{t}-{p}": f for t, (n, f) in topics.items() for p in range(n)}
    return all(
        len(replicas.get(name, set())) == 1 and _holders(data_dir, name) == factor
        for name, factor in expected.items()
    )


def _holders(data_dir: Path, partition_dir: str) -> int:
    return sum((data_dir / f"broker-{b}" / partition_dir).is_dir() for b in BROKERS)


@pytest.fixture(scope="module")
def kafka_on_coordkit(coordkit_stopped: Scenario) -> Iterator[KafkaCluster]:
    """Stage 2: Kafka 3.9 brokers 1-3 on coordkit's chroot and log directories."""
    scenario = coordkit_stopped
    zookeeper, chroot = scenario.url.removeprefix("zookeeper://").split("/", 1)
    kafka = KafkaCluster(
        zookeeper=zookeeper,
        chroot=f"/{chroot}",
        broker_ids=BROKERS,
        log_dirs={b: scenario.data_dir / f"broker-{b}" for b in BROKERS},
        # The last broker's controlled shutdown cannot move its leaderships: fewer, shorter
        # retries than Kafka's 3 of 5 s before it stops without.
        properties={
            "controlled.shutdown.max.retries": "1",
            "controlled.shutdown.retry.backoff.ms": "200",
        },
    )
    with kafka:
        yield kafka


@pytest.fixture(scope="module")
def kafka_stopped(kafka_on_coordkit: KafkaCluster, coordkit_stopped: Scenario) -> Scenario:
    """Stage 2, end: Kafka gets a topic of small segments, more records and a consumer group,
    serves everything once more, and stops (each broker's controlled shutdown)."""
    scenario = coordkit_stopped
    kafka = kafka_on_coordkit
    bootstrap = kafka.bootstrap
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
    try:
        admin.create_topics([NewTopic(ROLLED, 2, 3,
                                      topic_configs={"segment.bytes": str(ROLLED_SEGMENT_BYTES)})])  # fmt: skip
    finally:
        admin.close()
    wait_for(lambda: _online_with_full_isrs(kafka.node(1).address, {ROLLED}), WAIT_SECONDS,
             "Kafka's new topic online")  # fmt: skip
    _produce(bootstrap, ROLLED, ROLLED_RECORDS, "rolled", pad_to=100, batch_size=300)
    _produce(bootstrap, "orders", 20, "orders-on-kafka")
    group = KafkaConsumer("orders", bootstrap_servers=bootstrap, group_id="billing",
                          auto_offset_reset="earliest", enable_auto_commit=False)  # fmt: skip
    wait_for(lambda: group.poll(500), WAIT_SECONDS, "a group's first records on Kafka")
    group.commit()
    group.close()
    topics = {"orders": 3, "audit": 2, ROLLED: 2}
    expected = 2 * COORDKIT_RECORDS + 20 + ROLLED_RECORDS
    wait_for(lambda: _online_with_full_isrs(kafka.node(1).address, set(topics)), WAIT_SECONDS,
             "every follower caught up")  # fmt: skip
    scenario.kafka_records = _read_all(bootstrap, topics, expected)
    # The controller last: the others' controlled shutdowns move their leaderships to it.
    controller = kafka.metadata().controller_id
    for broker_id in sorted(BROKERS, key=lambda b: b == controller):
        kafka.stop(broker_id)
    scenario.kafka_log_lines = _error_and_warning_lines(kafka)
    return scenario


@pytest.fixture(scope="module")
def coordkit_on_kafka(kafka_stopped: Scenario) -> Iterator[Scenario]:
    """Stage 4: coordkit brokers 1-3 on the tree and the directories Kafka left."""
    scenario = kafka_stopped
    scenario.coordkit_again = _start_coordkit(scenario.url, scenario.data_dir)
    try:
        yield scenario
    finally:
        for server in scenario.coordkit_again.values():
            if server.process.poll() is None:
                server.process.kill()
                server.process.communicate(timeout=STOP_SECONDS)


# -- coordkit → Kafka ------------------------------------------------------------------------


def test_coordkit_leaves_leaders_isrs_and_its_controller_epoch(coordkit_stopped: Scenario) -> None:
    states = coordkit_stopped.coordkit_states
    expected = {(t, p) for t, (n, _) in COORDKIT_TOPICS.items() for p in range(n)}
    assert set(states) == expected
    assert coordkit_stopped.coordkit_controller_epoch >= 1
    for state in states.values():
        assert state["controller_epoch"] <= coordkit_stopped.coordkit_controller_epoch
        assert state["isr"]  # the last replica standing stays in the ISR, as Kafka's
    assert len(coordkit_stopped.coordkit_records) == 2 * COORDKIT_RECORDS


def test_coordkit_leaves_a_kafka_log_directory_per_broker(coordkit_stopped: Scenario) -> None:
    """What Kafka reads besides the segments, as coordkit wrote it: whose directory it is, each
    partition's topic id, the high watermarks (every record was acknowledged: each log's end,
    on followers too) and recovery points (each log's end: coordkit flushed its logs at its
    stop, as Kafka does, so Kafka takes their segments and indexes as they are)."""
    ends: dict[tuple[str, int], int] = {}
    for topic, partition, offset, *_ in coordkit_stopped.coordkit_records:
        ends[(topic, partition)] = max(ends.get((topic, partition), 0), offset + 1)
    store = open_store(coordkit_stopped.url)
    try:
        cluster_id = json.loads(store.get("/cluster/id")[0])["id"]
        topic_ids = {t: json.loads(store.get(f"/brokers/topics/{t}")[0])["topic_id"]
                     for t in COORDKIT_TOPICS}  # fmt: skip
    finally:
        store.close()
    for broker in BROKERS:
        directory = coordkit_stopped.data_dir / f"broker-{broker}"
        if broker != 3:  # broker 3's is gone already, for Kafka to write its own
            meta = (directory / kafka_files.META_PROPERTIES).read_bytes()
            fields = kafka_files.read_properties(meta, "meta.properties")
            assert fields == {"broker.id": str(broker), "version": "0", "cluster.id": cluster_id}
        held = {tp for tp in ends if (directory / f"{tp[0]}-{tp[1]}").is_dir()}
        for topic, partition in held:
            metadata = directory / f"{topic}-{partition}" / kafka_files.PARTITION_METADATA
            assert (
                kafka_files.read_partition_metadata(metadata.read_bytes(), "p") == topic_ids[topic]
            )
        checkpoint = (directory / kafka_files.HIGH_WATERMARKS).read_bytes()
        assert kafka_files.read_offsets_checkpoint(checkpoint, "hw") == {
            tp: ends[tp] for tp in held
        }
        checkpoint = (directory / kafka_files.RECOVERY_POINTS).read_bytes()
        assert kafka_files.read_offsets_checkpoint(checkpoint, "rp") == {
            tp: ends[tp] for tp in held
        }


def test_kafka_brings_every_partition_of_coordkit_online(
    kafka_on_coordkit: KafkaCluster, coordkit_stopped: Scenario
) -> None:
    address = kafka_on_coordkit.node(1).address
    wait_for(lambda: _online_with_full_isrs(address, set(COORDKIT_TOPICS)), WAIT_SECONDS,
             "every partition online on Kafka, with full ISRs")  # fmt: skip
    states, epoch = _zookeeper_states(coordkit_stopped.url)
    assert epoch > coordkit_stopped.coordkit_controller_epoch  # Kafka's controller took over
    for tp, before in coordkit_stopped.coordkit_states.items():
        assert states[tp]["leader_epoch"] >= before["leader_epoch"]
    # Kafka's ids: the cluster's and the topics' are the ones coordkit wrote.
    answer = _metadata(address)
    store = open_store(coordkit_stopped.url)
    try:
        assert answer.cluster_id == json.loads(store.get("/cluster/id")[0])["id"]
        for topic in COORDKIT_TOPICS:
            written = json.loads(store.get(f"/brokers/topics/{topic}")[0])["topic_id"]
            (served,) = [t.topic_id for t in answer.topics if t.name == topic]
            assert served == kafka_uuid(written)
    finally:
        store.close()


def test_kafka_logs_no_complaint_about_coordkits_nodes_or_files(
    kafka_on_coordkit: KafkaCluster,
) -> None:
    """ERROR and WARN lines in Kafka's logs (server.log holds the state-change and controller
    loggers here) mentioning a node's or a file's format. Startup races are expected and are not
    complaints: brokers told of leaders not registered yet ("cannot become follower since the
    new leader -1 is unavailable", "failed to change state ... OfflinePartition to
    OnlinePartition"), connections to brokers still starting."""
    wait_for(lambda: _online_with_full_isrs(kafka_on_coordkit.node(1).address,
                                            set(COORDKIT_TOPICS)), WAIT_SECONDS, "Kafka settled")  # fmt: skip
    lines = _error_and_warning_lines(kafka_on_coordkit)
    complaints = [line for line in lines if COMPLAINT.search(line)]
    notable = [line for line in lines if NOTABLE.search(line)]
    assert complaints == [], "\n".join(notable)


def test_kafka_serves_coordkits_records_at_their_offsets(
    kafka_on_coordkit: KafkaCluster, coordkit_stopped: Scenario
) -> None:
    partitions = {name: count for name, (count, _) in COORDKIT_TOPICS.items()}
    served = _read_all(kafka_on_coordkit.bootstrap, partitions, 2 * COORDKIT_RECORDS)
    assert served == coordkit_stopped.coordkit_records


def _fetch_from(address: str, topic: str, partition: int, offset: int) -> Any:
    """A consumer's Fetch (v12) of one partition at ``offset``, a small batch at most."""
    fetch = messages.FetchRequest
    wanted = fetch.FetchPartition(partition=partition, current_leader_epoch=-1,
                                  fetch_offset=offset, last_fetched_epoch=-1,
                                  log_start_offset=-1, partition_max_bytes=1)  # fmt: skip
    request = fetch(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1, isolation_level=0,
                    session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
                    topics=[fetch.FetchTopic(topic=topic, partitions=[wanted])])  # fmt: skip
    client = RawClient(address)
    try:
        return client.call(request, 12).responses[0].partitions[0]
    finally:
        client.close()


def _offset_for(address: str, topic: str, partition: int, timestamp: int) -> tuple[int, int]:
    request = messages.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        messages.ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            messages.ListOffsetsRequest.ListOffsetsPartition(
                partition_index=partition, current_leader_epoch=-1, timestamp=timestamp)])])  # fmt: skip
    client = RawClient(address)
    try:
        found = client.call(request, 7).topics[0].partitions[0]
        return int(found.offset), int(found.timestamp)
    finally:
        client.close()


def test_kafka_reads_coordkits_segments_from_the_middle_through_its_indexes(
    kafka_on_coordkit: KafkaCluster, coordkit_stopped: Scenario
) -> None:
    """coordkit's logs are several segments each, below the recovery point it wrote at its
    stop: Kafka 3.9 takes their offset and time indexes as they are (it recovers only the active
    segments, and leaves the others' files untouched) and answers Fetch from the middle of a log
    and ListOffsets by timestamp through them, as coordkit served them."""
    scenario = coordkit_stopped
    addresses = {b: kafka_on_coordkit.node(b).address for b in BROKERS}
    leaders = {
        tp: p.leader_id for tp, p in _partitions(kafka_on_coordkit.bootstrap.split(",")[0]).items()
    }
    indexed = 0
    for (topic, partition), leader in leaders.items():
        if topic not in COORDKIT_TOPICS:
            continue
        directory = scenario.data_dir / f"broker-{leader}" / f"{topic}-{partition}"
        segments = _segments(directory)
        assert len(segments) >= 2, (topic, partition, segments)
        for name in segments[:-1]:  # below the active segment: Kafka's as coordkit wrote them
            for suffix in (".index", ".timeindex"):
                path = directory / name.replace(".log", suffix)
                assert path.read_bytes() == scenario.coordkit_indexes[path], path
                indexed += bool(path.stat().st_size)
        records = [r for r in scenario.coordkit_records if r[:2] == (topic, partition)]
        for _, _, offset, key, value, timestamp in records[len(records) // 3 : -2 : 3]:
            answer = _fetch_from(addresses[leader], topic, partition, offset)
            assert answer.error_code == 0
            found = {
                r.offset: (r.key, r.value)
                for b in decode_batches(answer.records)
                for r in b.records
            }
            assert found[offset] == (key, value)
            expected = min((r[2], r[5]) for r in records if r[5] >= timestamp)
            assert _offset_for(addresses[leader], topic, partition, timestamp) == expected
    assert indexed > 0  # entries, not only empty files


def test_a_log_directory_kafka_holds_is_refused(kafka_on_coordkit: KafkaCluster) -> None:
    """coordkit's lock on a log directory is the kind Java's FileChannel.tryLock takes: a
    directory a running Kafka broker holds is refused (placed here, while Kafka runs)."""
    node = kafka_on_coordkit.node(1)
    assert node.running
    with pytest.raises(LogDirError, match="in use by another process"):
        LogDirectory(node.data_dir)


# -- Kafka's files and coordkit's --------------------------------------------------------------------


def test_kafka_ran_and_stopped_without_a_complaint(kafka_stopped: Scenario) -> None:
    """The whole of Kafka's run on coordkit's tree and directories, its topic, group and
    controlled shutdowns included (the last broker's cannot move its leaderships: its WARN
    "Proceeding to do an unclean shutdown" is no complaint)."""
    complaints = [line for line in kafka_stopped.kafka_log_lines if COMPLAINT.search(line)]
    assert complaints == [], "\n".join(kafka_stopped.kafka_log_lines)


def test_kafkas_files_are_coordkits(kafka_stopped: Scenario) -> None:
    data_dir = kafka_stopped.data_dir
    # meta.properties Kafka wrote itself (broker 3's was removed): coordkit's but for the date.
    kafkas = (data_dir / "broker-3" / kafka_files.META_PROPERTIES).read_bytes()
    fields = kafka_files.read_properties(kafkas, "meta.properties")
    lines = kafkas.decode().splitlines()
    assert re.fullmatch(r"#\w{3} \w{3} \d\d \d\d:\d\d:\d\d \w+ \d{4}", lines[1]), lines[1]
    ours = kafka_files.meta_properties(3, fields["cluster.id"], _utc(lines[1])).decode()
    assert ours.splitlines() == lines
    for broker in BROKERS:
        directory = data_dir / f"broker-{broker}"
        for partition in directory.glob(f"{ROLLED}-*"):
            # Written by Kafka alone: partition.metadata and the leader epochs, byte for byte.
            metadata = (partition / kafka_files.PARTITION_METADATA).read_bytes()
            topic_id = kafka_files.read_partition_metadata(metadata, str(partition))
            assert kafka_files.partition_metadata(topic_id) == metadata
            epochs = (partition / kafka_files.LEADER_EPOCHS).read_bytes()
            read = kafka_files.read_leader_epoch_checkpoint(epochs, str(partition))
            assert kafka_files.leader_epoch_checkpoint(read) == epochs
        for name in (kafka_files.RECOVERY_POINTS, kafka_files.HIGH_WATERMARKS,
                     kafka_files.LOG_START_OFFSETS):  # fmt: skip
            # Kafka's entries come in its hash map's order: the same lines, sorted.
            written = (directory / name).read_bytes()
            offsets = kafka_files.read_offsets_checkpoint(written, name)
            ours_lines = kafka_files.offsets_checkpoint(offsets).decode().splitlines()
            theirs = written.decode().splitlines()
            assert ours_lines[:2] == theirs[:2]
            assert sorted(ours_lines[2:]) == sorted(theirs[2:])
        assert (directory / kafka_files.CLEANER_OFFSETS).read_bytes() == b""
    # Kafka rolled the small-segment topic's logs: several segments a partition (a follower
    # rolls where its appends fall, so counts may differ between replicas).
    for partition in range(2):
        replicas = [data_dir / f"broker-{b}" / f"{ROLLED}-{partition}" for b in BROKERS]
        assert all(segment_name(0) in _segments(r) for r in replicas)
        assert max(len(_segments(r)) for r in replicas) >= 3


def _utc(comment: str) -> datetime.datetime:
    """The date of a meta.properties comment line (Java's ``Date.toString()`` in UTC)."""
    stamp = comment.lstrip("#").replace(" UTC ", " +0000 ")
    return datetime.datetime.strptime(stamp, "%a %b %d %H:%M:%S %z %Y").astimezone(datetime.UTC)


# -- Kafka → coordkit ------------------------------------------------------------------------


def test_coordkit_takes_over_the_tree_kafka_left(coordkit_on_kafka: Scenario) -> None:
    checked = wait_for(
        lambda: (
            (r := _coordkit("cluster", "check", "--store", coordkit_on_kafka.url)).returncode == 0
            and r
        ),
        WAIT_SECONDS,
        "coordkit cluster check to pass on the tree Kafka left",
    )
    assert "converged" in checked.stdout
    first = next(iter(coordkit_on_kafka.coordkit_again.values())).bootstrap
    topics = {"orders", "audit", ROLLED}
    wait_for(lambda: _online_with_full_isrs(first, topics), WAIT_SECONDS,
             "every partition online on coordkit")  # fmt: skip


def test_coordkit_serves_kafkas_records_at_their_offsets(coordkit_on_kafka: Scenario) -> None:
    bootstrap = _bootstrap(coordkit_on_kafka.coordkit_again)
    topics = {"orders": 3, "audit": 2, ROLLED: 2}
    expected = coordkit_on_kafka.kafka_records
    served = _read_all(bootstrap, topics, len(expected))
    assert served == expected


def test_clients_produce_and_consume_on_the_cluster_taken_over(
    coordkit_on_kafka: Scenario,
) -> None:
    bootstrap = _bootstrap(coordkit_on_kafka.coordkit_again)
    _produce(bootstrap, ROLLED, 30, "after")
    served = _read_all(bootstrap, {ROLLED: 2}, ROLLED_RECORDS + 30)
    values = [value for *_, value, _ in served]
    assert sorted(v for v in values if v is not None and v.startswith(b"after-")) == sorted(
        b"after-%d" % i for i in range(30)
    )
    # Offsets go on from where Kafka's logs ended, in each partition.
    for partition in range(2):
        offsets = [offset for topic, p, offset, *_ in served if p == partition]
        assert offsets == list(range(len(offsets)))

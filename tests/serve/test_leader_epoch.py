"""OffsetForLeaderEpoch (KIP-320): the leader tells a consumer where an epoch of its log ends,
with Kafka's answers and errors; a kafka-python consumer reads on, losing nothing, while the
leader of its partitions crashes under a producer; and stopping brokers with connections open
(idle, or with a fetch waiting) ends them without a traceback."""

from __future__ import annotations

import collections
import logging
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from coordkit.engine.states import TP
from coordkit.protocol import messages
from coordkit.protocol.records import encode_batch, new_batch
from coordkit.serve.dataplane.log import PartitionLog
from coordkit.testing.waiting import wait_for
from serve.conftest import RawClient, ServeFactory
from serve.inprocess import InProcessFactory, InProcessServer, in_process_fixture  # noqa: F401
from serve.test_replication import _fetch, _produce, _state
from serve.workers import ProcessOutput

pytestmark = pytest.mark.timeout(300)

# Typed Any: the generated classes' nested structs are set at import time.
OffsetForLeaderEpoch: Any = messages.OffsetForLeaderEpochRequest
Fetch: Any = messages.FetchRequest
ApiVersions: Any = messages.ApiVersionsRequest
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
UNDEFINED = (-1, -1)


def _ask(client: RawClient, tp: TP, epoch: int, current: int = -1, version: int = 4) -> Any:
    request = OffsetForLeaderEpoch(
        replica_id=-1,
        topics=[
            OffsetForLeaderEpoch.OffsetForLeaderTopic(
                topic=tp[0],
                partitions=[
                    OffsetForLeaderEpoch.OffsetForLeaderPartition(
                        partition=tp[1], current_leader_epoch=current, leader_epoch=epoch
                    )
                ],
            )
        ],
    )
    [topic] = client.call(request, version).topics
    assert topic.topic == tp[0]
    [answer] = topic.partitions
    assert answer.partition == tp[1]
    return answer


def _end(client: RawClient, tp: TP, epoch: int, current: int = -1) -> tuple[int, int]:
    answer = _ask(client, tp, epoch, current)
    assert answer.error_code == NONE
    return answer.leader_epoch, answer.end_offset


# -- the epoch index of a log -----------------------------------------------------------------


def _log(*epochs_and_counts: tuple[int, int]) -> PartitionLog:
    log = PartitionLog()
    for epoch, count in epochs_and_counts:
        log.append(encode_batch(new_batch([(b"k", b"v")] * count)), epoch)
    return log


def test_a_leaders_log_answers_as_kafkas_epoch_cache() -> None:
    # Epoch 1 wrote offsets 0-1, epoch 3 offsets 2-4, epoch 6 offset 5.
    log = _log((1, 2), (3, 3), (6, 1))
    assert log.log_end == 6
    answers = {epoch: log.leader_end_offset_for(epoch, 6) for epoch in range(-1, 8)}
    assert answers == {
        -1: UNDEFINED,
        0: (0, 0),  # older than every epoch: the first epoch's start (Kafka's floor-less case)
        1: (1, 2),
        2: (1, 2),
        3: (3, 5),
        4: (3, 5),
        5: (3, 5),
        6: (6, 6),  # the latest epoch ends at the log end
        7: UNDEFINED,  # a future epoch
    }
    # A new leader (epoch 8) that has not appended yet: its epoch starts at the log end.
    assert log.leader_end_offset_for(6, 8) == (6, 6)
    assert log.leader_end_offset_for(7, 8) == (6, 6)
    assert log.leader_end_offset_for(8, 8) == (8, 6)
    assert log.leader_end_offset_for(9, 8) == UNDEFINED
    # Cutting the log (a follower truncating) drops the epochs that started in the cut.
    assert log.truncate_to(3) == 4
    assert log.leader_end_offset_for(3, 6) == (1, 2)
    assert log.leader_end_offset_for(6, 6) == (6, 2)
    assert PartitionLog().leader_end_offset_for(0, 0) == (0, 0)
    assert PartitionLog().leader_end_offset_for(1, 0) == UNDEFINED


# -- the api --------------------------------------------------------------------------------------


def _placed(server: InProcessServer, topic: str, replicas: list[int]) -> TP:
    server.server.cluster.create_topic(topic, 1, len(replicas), assignment={0: replicas})
    tp = (topic, 0)
    wait_for(lambda: _state(server, tp) is not None, 30, f"a leader of {topic}")
    wait_for(lambda: len(_state(server, tp).isr) == len(replicas), 30, f"{topic}'s full ISR")
    return tp


def _wait_moved(server: InProcessServer, tp: TP) -> None:
    """Broker 1 leads ``tp`` and broker 0 left its ISR (the epoch settled)."""
    wait_for(
        lambda: _state(server, tp).leader == 1 and 0 not in _state(server, tp).isr,
        60,
        "broker 1 to lead without broker 0",
    )


def test_only_the_leader_answers_and_the_epoch_fences(
    in_process: InProcessFactory, raw_client: Any
) -> None:
    server = in_process(brokers=3)
    tp = _placed(server, "fenced", [0, 1])
    epoch = _state(server, tp).leader_epoch
    leader, follower, outsider = (raw_client(server.address(b)) for b in range(3))
    assert _ask(follower, tp, epoch).error_code == NOT_LEADER_OR_FOLLOWER
    assert _ask(outsider, tp, epoch).error_code == NOT_LEADER_OR_FOLLOWER
    assert _ask(leader, ("nosuch", 0), 0).error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert _ask(leader, (tp[0], 7), 0).error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert _ask(leader, tp, epoch, current=epoch + 1).error_code == UNKNOWN_LEADER_EPOCH
    # A follower checks the epoch first, as Kafka's does.
    assert _ask(follower, tp, epoch, current=epoch + 1).error_code == UNKNOWN_LEADER_EPOCH
    failed = _ask(leader, tp, epoch, current=epoch + 1)
    assert (failed.leader_epoch, failed.end_offset) == UNDEFINED
    assert _end(leader, tp, epoch, current=epoch) == (epoch, 0)

    server.server.stop_broker(0)
    _wait_moved(server, tp)
    moved = _state(server, tp).leader_epoch
    assert moved > epoch
    assert _ask(follower, tp, moved, current=epoch).error_code == FENCED_LEADER_EPOCH
    assert _end(follower, tp, moved, current=moved) == (moved, 0)


def test_the_end_of_each_epoch_across_a_failover(
    in_process: InProcessFactory, raw_client: Any
) -> None:
    server = in_process(brokers=3)
    tp = _placed(server, "epochs", [0, 1, 2])
    first = _state(server, tp).leader_epoch
    old = raw_client(server.address(0))
    assert _produce(old, tp, b"a", b"b").error_code == NONE  # offsets 0-1, on every replica
    assert _end(old, tp, first, current=first) == (first, 2)
    assert _end(old, tp, first + 1) == UNDEFINED

    server.server.stop_broker(0)
    _wait_moved(server, tp)
    second = _state(server, tp).leader_epoch
    new = raw_client(server.address(1))
    # Nothing written in the new epoch yet: both epochs end at the log end.
    assert _end(new, tp, first) == (first, 2)
    assert _end(new, tp, second) == (second, 2)
    answer = _produce(new, tp, b"c", b"d", b"e")
    assert (answer.error_code, answer.base_offset) == (NONE, 2)
    assert _end(new, tp, first, current=second) == (first, 2)
    assert _end(new, tp, second, current=second) == (second, 5)
    assert _end(new, tp, second + 1) == UNDEFINED
    assert _end(new, tp, -1) == UNDEFINED
    if second > first + 1:  # an epoch that wrote nothing ends where the next one starts
        assert _end(new, tp, first + 1) == (first, 2)
    # Every version the server advertises gives the same answer (v2-4: Kafka 4 removed v0-1).
    for version in range(2, 5):
        answer = _ask(new, tp, first, version=version)
        assert (answer.error_code, answer.end_offset) == (NONE, 2)
        assert answer.leader_epoch == first
    assert _ask(raw_client(server.address(2)), tp, first).error_code == NOT_LEADER_OR_FOLLOWER


# -- stopping with connections open ---------------------------------------------------------


def _hold_connections(address: str, tp: TP) -> list[RawClient]:
    """An idle connection and one whose fetch waits for records that never come."""
    idle = RawClient(address)
    waiting = RawClient(address)
    assert waiting.call(ApiVersions(), 0).error_code == NONE  # the connection is served
    waiting.send(
        Fetch(
            replica_id=-1,
            max_wait_ms=120_000,
            min_bytes=1,
            max_bytes=1 << 20,
            topics=[
                Fetch.FetchTopic(
                    topic=tp[0],
                    partitions=[
                        Fetch.FetchPartition(
                            partition=tp[1], fetch_offset=0, partition_max_bytes=1 << 20
                        )
                    ],
                )
            ],
        ),
        12,
    )
    time.sleep(0.5)  # let the fetch reach the broker (it waits either way)
    return [idle, waiting]


def test_stopping_a_broker_with_connections_open_logs_no_traceback(
    in_process: InProcessFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    server = in_process(brokers=2)
    tp = _placed(server, "quiet", [0])
    held = _hold_connections(server.address(0), tp)
    server.server.stop_broker(0)
    server.on_loop(lambda: None)  # the loop ran every callback the stop scheduled
    for client in held:
        client.close()
    problems = [
        r
        for r in caplog.records
        if r.name == "asyncio" or r.exc_info or "CancelledError" in r.getMessage()
    ]
    assert problems == [], [r.getMessage() for r in problems]


def test_a_stopped_broker_ends_a_connection_whose_peer_stops_reading(
    in_process: InProcessFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """A client asks for far more than the socket buffers hold and never reads: the broker's
    writes back up. Stopping the broker still ends that connection (aborted after the grace) and
    returns, and nothing listens there any more."""
    caplog.set_level(logging.INFO)
    server = in_process(brokers=2)
    tp = _placed(server, "bulky", [0])
    client = RawClient(server.address(0))
    for start in range(0, 64, 8):  # 64 records of 64 KiB
        values = [bytes([start + i]) * 65_536 for i in range(8)]
        assert _produce(client, tp, *values, acks=1).error_code == NONE
    reader = RawClient(server.address(0))
    reader.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    request = Fetch(
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=8 << 20,
        topics=[Fetch.FetchTopic(topic=tp[0], partitions=[
            Fetch.FetchPartition(partition=tp[1], fetch_offset=0, partition_max_bytes=8 << 20)
        ])],
    )  # fmt: skip
    for _ in range(8):  # about 32 MiB of answers, none read
        reader.send(request, 12)
    time.sleep(1)
    server.server.stop_broker(0)  # raises TimeoutError if the connection kept it waiting
    aborted = [r.getMessage() for r in caplog.records if "still open" in r.getMessage()]
    assert aborted, "the connection closed by itself: the peer did not back the writes up"
    listener = next(lsn for lsn in server.server.listeners if lsn.ctx.broker_id == 0)
    assert server.on_loop(lambda: len(listener._connections)) == 0
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", int(server.address(0).rsplit(":", 1)[1])), 5)
    reader.close()
    client.close()


def test_ctrl_c_with_connections_open_prints_no_traceback(serve: ServeFactory) -> None:
    server = serve(brokers=1)
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=30_000)
    try:
        admin.create_topics([NewTopic("quiet", 1, 1)])
    finally:
        admin.close()
    tp = ("quiet", 0)
    probe = RawClient(server.bootstrap)
    wait_for(lambda: _fetch(probe, tp).error_code == NONE, 30, "quiet's leader")
    probe.close()
    held = _hold_connections(server.bootstrap, tp)
    status, out, err = server.stop()
    for client in held:
        client.close()
    assert status == 0
    assert out.strip() == "stopped"
    assert "Traceback" not in err, err
    assert "CancelledError" not in err, err


# -- a consumer across a leader crash --------------------------------------------------------

#: A kafka-python consumer in its own process: prints "record <partition> <offset> <value>" for
#: every record and "validation <message>" for kafka-python's OffsetForLeaderEpoch logs; in a
#: group (argv mode "group") it commits after every batch. Closes on SIGTERM.
CONSUMER = r"""
import logging, signal, sys, threading
from kafka import KafkaConsumer, TopicPartition

mode, bootstrap, topic, partitions = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())


class Validations(logging.Handler):
    def emit(self, record):
        message = record.getMessage()
        if "OffsetForLeaderEpoch" in message or "runcation" in message:
            print("validation", " ".join(message.split()), flush=True)


fetcher = logging.getLogger("kafka.consumer.fetcher")
fetcher.setLevel(logging.DEBUG)
fetcher.propagate = False
fetcher.addHandler(Validations())
warnings = logging.StreamHandler()
warnings.setLevel(logging.WARNING)
fetcher.addHandler(warnings)
logging.basicConfig(level=logging.WARNING)

group = mode == "group"
consumer = KafkaConsumer(
    bootstrap_servers=bootstrap, group_id=f"{topic}-readers" if group else None,
    auto_offset_reset="earliest", enable_auto_commit=False, metadata_max_age_ms=1000,
    session_timeout_ms=10_000, heartbeat_interval_ms=1_000, retry_backoff_ms=100,
)
if group:
    consumer.subscribe([topic])
else:
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
while not stop.is_set():
    batch = consumer.poll(200)
    for records in batch.values():
        for r in records:
            print("record", r.partition, r.offset, r.value.decode(), flush=True)
    if batch and group:
        try:
            consumer.commit()
        except Exception as exc:  # a rebalance meanwhile: its records are read again
            print("commit-failed", type(exc).__name__, flush=True)
consumer.close()
print("closed", flush=True)
"""

PARTITIONS = 3


class Consumer:
    """:data:`CONSUMER` running, its output lines collected."""

    def __init__(self, mode: str, bootstrap: str, topic: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", CONSUMER, mode, bootstrap, topic, str(PARTITIONS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.output = ProcessOutput(self.process)

    def records(self) -> list[tuple[int, int, str]]:
        words = [line.split() for line in self.output.stdout() if line.startswith("record ")]
        return [(int(w[1]), int(w[2]), w[3]) for w in words]

    def validations(self) -> list[str]:
        return [line for line in self.output.stdout() if line.startswith("validation ")]

    def stop(self) -> str:
        """Stop it; its stderr."""
        self.process.terminate()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(30)
        self.output.join(30)
        return "".join(f"{line}\n" for line in self.output.stderr())


@pytest.fixture(name="consumers")
def consumers_fixture() -> Iterator[list[Consumer]]:
    """Consumers a test started; any still running at the end is killed (a failed test)."""
    started: list[Consumer] = []
    yield started
    for consumer in started:
        if consumer.process.poll() is None:
            consumer.process.kill()
            consumer.process.wait(30)


@pytest.mark.parametrize("mode", ["group", "assign"])
def test_a_consumer_reads_on_when_its_leader_crashes(
    in_process: InProcessFactory, consumers: list[Consumer], mode: str
) -> None:
    server = in_process(brokers=3)
    topic = f"moving-{mode}"
    # Broker 0 leads every partition; broker 1 takes them all over.
    server.server.cluster.create_topic(
        topic, PARTITIONS, 3, assignment={p: [0, 1, 2] for p in range(PARTITIONS)}
    )
    tps = [(topic, p) for p in range(PARTITIONS)]
    wait_for(lambda: all(_state(server, tp) for tp in tps), 30, "leaders")
    assert {_state(server, tp).leader for tp in tps} == {0}
    consumer = Consumer(mode, server.bootstrap, topic)
    consumers.append(consumer)
    producer = KafkaProducer(bootstrap_servers=server.bootstrap, linger_ms=2,
                             request_timeout_ms=10_000, retry_backoff_ms=50)  # fmt: skip
    acked: dict[str, tuple[int, int]] = {}
    failed: list[BaseException] = []
    lock = threading.Lock()
    stop = threading.Event()

    def on_ack(value: str) -> Any:
        def record(metadata: Any) -> None:
            with lock:
                acked[value] = (metadata.partition, metadata.offset)

        return record

    def send_until_stopped() -> None:
        i = 0
        while not stop.is_set():
            value = f"value-{i}"
            future = producer.send(topic, key=f"key-{i % 17}".encode(), value=value.encode())
            future.add_callback(on_ack(value)).add_errback(failed.append)
            i += 1
            time.sleep(0.005)

    sender = threading.Thread(target=send_until_stopped)
    sender.start()
    try:
        wait_for(lambda: len(consumer.records()) >= 200, 120, "the consumer to read 200 records")
        before = len(consumer.records())
        server.server.stop_broker(0)
        wait_for(lambda: all(_state(server, tp).leader not in (0, -1) for tp in tps), 60,
                 "new leaders")  # fmt: skip
        # The producer goes on; the consumer reads what is produced after the move.
        with lock:
            target = len(acked) + 300
        wait_for(lambda: len(acked) >= target, 120, "300 more records acknowledged")
    finally:
        stop.set()
        sender.join(60)
        producer.flush(timeout=60)
        producer.close(timeout=30)
    try:
        assert failed == []
        wanted = set(acked)
        wait_for(lambda: wanted <= {v for _, _, v in consumer.records()}, 120,
                 "every acknowledged record read")  # fmt: skip
    finally:
        err = consumer.stop()
    read = consumer.records()
    assert len(read) > before
    # No loss, and what was read is what was acknowledged there.
    where = {value: (partition, offset) for partition, offset, value in read}
    assert {v: where[v] for v in acked} == acked
    assert len(where) == len(set(where.values()))  # one value per offset
    counts = collections.Counter((p, o) for p, o, _ in read)
    if mode == "assign":  # no group, no commits: nothing is read twice
        assert max(counts.values()) == 1
    # kafka-python checked its positions against the new leader's epochs.
    assert any("OffsetForLeaderEpoch" in line for line in consumer.validations()), (
        consumer.output.stdout()[-20:],
        err[-2000:],
    )
    # It ran on to a clean close. (Its stderr may hold kafka-python's own log of the crashed
    # leader's connection reset, with a traceback: that is the client's logging, not a failure.)
    assert consumer.process.returncode == 0, err[-4000:]
    assert "closed" in consumer.output.stdout(), err[-4000:]

"""``coordkit serve --broker-id N``: one broker per process, several processes on one store forming
one cluster (its controller elected among them through the store), followers copying their
leaders' records across processes, and the refusals of the option."""

from __future__ import annotations

import functools
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from coordkit.protocol import messages
from coordkit.testing.backends import NOT_APPLICABLE, Capability, capabilities_of
from harness.backends import Backend
from serve.conftest import STOP_SECONDS, RawClient, ServeProcess

#: Sessions of the serving processes end this long after a process is killed (the store's
#: session timeout), so that a failover test does not wait the default ten seconds.
SESSION_TIMEOUT = 6
#: Seconds a test waits for what the cluster does on its own (a failover: the session timeout,
#: then the new controller's elections).
WAIT_SECONDS = 60
BROKERS = (0, 1, 2)

#: ``start(url, broker_id, *more_args)``.
StartBroker = Callable[..., ServeProcess]


@pytest.fixture
def start_broker() -> Iterator[StartBroker]:
    """Starts ``coordkit serve --store URL --broker-id N --port 0`` (the server binds a free port
    itself and prints it: no port found free can be taken before it binds)."""
    started: list[ServeProcess] = []

    def start(url: str, broker_id: int, *more: str) -> ServeProcess:
        server = ServeProcess(["--store", url, "--broker-id", str(broker_id), "--port", "0", *more])
        started.append(server)
        return server

    yield start
    for server in started:
        if server.process.poll() is None:
            server.process.kill()
            server.process.communicate(timeout=STOP_SECONDS)


def _with_session_timeout(url: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}session_timeout={SESSION_TIMEOUT}"


def _metadata(address: str, *topics: str) -> Any:
    client = RawClient(address)
    try:
        request = messages.MetadataRequest(
            topics=[messages.MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=False,
        )
        return client.call(request, 12)
    finally:
        client.close()


def _wait_for(what: str, check: Callable[[], Any]) -> Any:
    """``check()``'s first true result within WAIT_SECONDS."""
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        try:
            found = check()
        except (OSError, ConnectionError):
            found = None
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {WAIT_SECONDS} s: {what}")
        time.sleep(0.2)


def _leaders(address: str, topic: str) -> dict[int, int]:
    (found,) = _metadata(address, topic).topics
    return {p.partition_index: p.leader_id for p in found.partitions}


def test_three_processes_serve_one_cluster(backend: Backend, start_broker: StartBroker) -> None:
    if Capability.SHARED_ACROSS_PROCESSES not in capabilities_of(backend):
        pytest.skip(f"{NOT_APPLICABLE}: {backend.name} is not shared across processes")
    url = _with_session_timeout(backend.new_url())
    servers = {broker_id: start_broker(url, broker_id) for broker_id in BROKERS}
    address = {b: s.addresses[b] for b, s in servers.items()}
    assert all(list(s.addresses) == [b] for b, s in servers.items())  # one broker each

    # Metadata from any process lists every broker where it listens, and one controller.
    def every_broker_listed(broker_id: int) -> Any:
        response = _metadata(address[broker_id])
        return response if len(response.brokers) == len(BROKERS) else None

    controllers = set()
    for broker_id in BROKERS:
        response = _wait_for(
            f"broker {broker_id} lists brokers {BROKERS}",
            lambda b=broker_id: every_broker_listed(b),  # type: ignore[misc]
        )
        listed = {b.node_id: f"{b.host}:{b.port}" for b in response.brokers}
        assert listed == address
        controllers.add(response.controller_id)
    (controller,) = controllers
    assert controller in BROKERS

    # Every process leads one partition; produce to each and read it back.
    bootstrap = ",".join(address.values())
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
    try:
        admin.create_topics(
            [NewTopic("spread", replica_assignments={0: [0, 1, 2], 1: [1, 2, 0], 2: [2, 0, 1]})]
        )
    finally:
        admin.close()
    for broker_id in BROKERS:
        _wait_for(
            f"broker {broker_id} sees every leader of 'spread'",
            lambda b=broker_id: _leaders(address[b], "spread") == {0: 0, 1: 1, 2: 2},  # type: ignore[misc]
        )
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1)
    sent = [
        producer.send("spread", value=f"p{p}-{i}".encode(), partition=p)
        for p in range(3)
        for i in range(5)
    ]
    for future in sent:
        future.get(timeout=WAIT_SECONDS)
    producer.close(timeout=WAIT_SECONDS)
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=5_000,
    )
    consumer.assign([TopicPartition("spread", p) for p in range(3)])
    consumed = {(r.partition, r.value.decode()) for r in consumer}
    consumer.close()
    assert consumed == {(p, f"p{p}-{i}") for p in range(3) for i in range(5)}

    # kill -9 the controller's process: another process's broker takes over, and the partition
    # the dead broker led moves to a live replica.
    servers[controller].process.kill()
    servers[controller].process.communicate(timeout=STOP_SECONDS)
    survivors = [b for b in BROKERS if b != controller]

    def failed_over() -> bool:
        for broker_id in survivors:
            response = _metadata(address[broker_id], "spread")
            if response.controller_id not in survivors:
                return False
            if sorted(b.node_id for b in response.brokers) != survivors:
                return False
            leaders = {p.partition_index: p.leader_id for p in response.topics[0].partitions}
            if set(leaders.values()) - set(survivors) or len(leaders) != 3:
                return False
        return True

    _wait_for(f"a new controller among {survivors}, leaders moved", failed_over)
    leaders = _leaders(address[survivors[0]], "spread")
    assert leaders[controller] in survivors
    # The partitions the survivors led stay where they were.
    assert all(leaders[b] == b for b in survivors)
    # The moved partition takes records at its new leader.
    producer = KafkaProducer(bootstrap_servers=address[survivors[0]], acks=1)
    metadata = producer.send("spread", value=b"after", partition=controller).get(WAIT_SECONDS)
    producer.close(timeout=WAIT_SECONDS)
    assert metadata.partition == controller


def _isrs(address: str, topic: str) -> dict[int, list[int]]:
    (found,) = _metadata(address, topic).topics
    return {p.partition_index: sorted(p.isr_nodes) for p in found.partitions}


def _logs_alike(data_dir: Path, partition_dir: str, brokers: tuple[int, ...]) -> bool:
    """Whether ``brokers`` hold the same non-empty log of ``partition_dir``: the same segments,
    byte for byte, and the same offset and time indexes beside them."""
    logs = {
        tuple(
            (p.name, p.read_bytes())
            for p in sorted((data_dir / f"broker-{b}" / partition_dir).iterdir())
            if p.suffix in (".log", ".index", ".timeindex")
        )
        for b in brokers
    }
    return len(logs) == 1 and any(data for _, data in next(iter(logs)))


def test_followers_in_other_processes_copy_the_leaders_records(
    backend: Backend, start_broker: StartBroker, tmp_path: Path
) -> None:
    """Each broker in a process of its own, each leading one partition of a topic on all
    three: acks=all is answered once the other processes' followers have fetched the records,
    their logs end byte for byte as the leader's, a kill -9 of a leader's process loses no
    acknowledged record, and the broker started again on its log directory (segments and
    indexes, small ones) catches up with what was written meanwhile and rejoins the ISR."""
    if Capability.SHARED_ACROSS_PROCESSES not in capabilities_of(backend):
        pytest.skip(f"{NOT_APPLICABLE}: {backend.name} is not shared across processes")
    url = _with_session_timeout(backend.new_url())
    data = ("--data-dir", str(tmp_path), "--config", "log.segment.bytes=400",
            "--config", "log.index.interval.bytes=100")  # fmt: skip
    servers = {broker_id: start_broker(url, broker_id, *data) for broker_id in BROKERS}
    address = {b: s.addresses[b] for b, s in servers.items()}
    bootstrap = ",".join(address.values())
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
    try:
        admin.create_topics(
            [NewTopic("copied", replica_assignments={0: [0, 1, 2], 1: [1, 2, 0], 2: [2, 0, 1]})]
        )
    finally:
        admin.close()
    for broker_id in BROKERS:
        _wait_for(
            f"broker {broker_id} sees every leader of 'copied'",
            lambda b=broker_id: _leaders(address[b], "copied") == {0: 0, 1: 1, 2: 2},  # type: ignore[misc]
        )
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", batch_size=16)  # a batch each
    sent = [producer.send("copied", value=b"p%d-%d" % (p, i), partition=p)
            for p in range(3) for i in range(10)]  # fmt: skip
    for future in sent:
        future.get(timeout=WAIT_SECONDS)
    producer.close(timeout=WAIT_SECONDS)
    for p in range(3):
        alike = functools.partial(_logs_alike, tmp_path, f"copied-{p}", BROKERS)
        _wait_for(f"every replica of copied-{p} alike", alike)
    assert _isrs(address[1], "copied") == {p: [0, 1, 2] for p in range(3)}

    # kill -9 the leader of partition 0: a follower that copied everything takes over.
    servers[0].process.kill()
    servers[0].process.communicate(timeout=STOP_SECONDS)
    _wait_for("partition 0 led elsewhere", lambda: _leaders(address[1], "copied")[0] in (1, 2))
    consumer = KafkaConsumer(bootstrap_servers=address[1], group_id=None,
                             auto_offset_reset="earliest", consumer_timeout_ms=5_000)  # fmt: skip
    consumer.assign([TopicPartition("copied", 0)])
    assert [r.value for r in consumer] == [b"p0-%d" % i for i in range(10)]
    consumer.close()
    producer = KafkaProducer(bootstrap_servers=",".join([address[1], address[2]]), acks="all",
                             batch_size=16)  # fmt: skip
    sent = [producer.send("copied", value=b"p%d-%d" % (p, i), partition=p)
            for p in range(3) for i in range(10, 20)]  # fmt: skip
    for future in sent:
        future.get(timeout=WAIT_SECONDS)
    producer.close(timeout=WAIT_SECONDS)

    # Broker 0 again, on its log directory: it follows the new leader and rejoins the ISR.
    servers[0] = start_broker(url, 0, *data)
    full = {p: [0, 1, 2] for p in range(3)}
    _wait_for("broker 0 back in every ISR", lambda: _isrs(address[1], "copied") == full)
    for p in range(3):
        alike = functools.partial(_logs_alike, tmp_path, f"copied-{p}", BROKERS)
        _wait_for(f"broker 0's log of copied-{p} its leader's, indexes and all", alike)
    assert len(list((tmp_path / "broker-0" / "copied-0").glob("*.log"))) > 1


def test_a_private_store_makes_a_cluster_per_process(
    backend: Backend, start_broker: StartBroker
) -> None:
    if Capability.SHARED_ACROSS_PROCESSES in capabilities_of(backend):
        pytest.skip(f"{NOT_APPLICABLE}: {backend.name} is shared across processes")
    url = backend.new_url()
    servers = {broker_id: start_broker(url, broker_id) for broker_id in (0, 1)}
    for broker_id, server in servers.items():
        response = _metadata(server.addresses[broker_id])
        assert [b.node_id for b in response.brokers] == [broker_id]
        assert response.controller_id == broker_id
    status, _out, err = servers[1].stop()
    assert status == 0, err
    assert "note: " in err
    assert "private to this process: broker 1 is a cluster of its own" in err


def test_a_broker_id_in_use_is_refused(backend: Backend, start_broker: StartBroker) -> None:
    if Capability.SHARED_ACROSS_PROCESSES not in capabilities_of(backend):
        pytest.skip(f"{NOT_APPLICABLE}: {backend.name} is not shared across processes")
    url = backend.new_url()
    running = start_broker(url, 1)
    result = _serve("--store", url, "--broker-id", "1", "--port", "0")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert "broker id 1 is already registered" in lines[0]
    # The running broker is untouched: still registered, still answering.
    assert [b.node_id for b in _metadata(running.addresses[1]).brokers] == [1]


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from coordkit.cli import main; main()", "serve", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--broker-id", "1", "--brokers", "3"], "--broker-id 1 and --brokers 3"),
        (["--brokers", "1", "--broker-id", "0"], "--broker-id 0 and --brokers 1"),
        (["--broker-id", "-1"], "--broker-id '-1'"),
        (["--broker-id", "2147483648"], "--broker-id '2147483648'"),
        (["--broker-id", "x"], "--broker-id 'x'"),
    ],
)
def test_broker_id_refusals(args: list[str], named: str, backend: Backend) -> None:
    url = backend.new_url()
    result = _serve("--store", url, "--port", "0", *args)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert named in lines[0]
    # Nothing written: the store holds no broker, no topic root.
    store = backend.open(url)
    try:
        assert store.exists("/brokers") is None
    finally:
        store.close()

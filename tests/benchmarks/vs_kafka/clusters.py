"""The clusters the benchmark compares, three brokers a side, and what every case asks of them.

* :class:`OneProcessServe` — ``coordkit serve --brokers 3`` in one process on the memory store
  (the throughput and group cases: nothing of theirs is killed, and records never touch the store);
* :class:`ServeProcesses` — ``coordkit serve --broker-id N`` for N in 1..3, a process each, on one
  private ZooKeeper (the memory store lives inside one process, so brokers that are killed one at a
  time need a store shared across processes; ZooKeeper, because it is what Kafka itself ran on
  before KRaft and the kit's fixtures start one in a second);
* :class:`KafkaNodes` — Kafka 4's three combined broker+controller KRaft nodes (the kit's
  ``KafkaCluster``), whose processes are killed and started the same way.

Both process clusters answer the same questions (each broker's address and pid, who controls the
cluster, kill / stop / start one broker) so that a case is written once for both sides.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from coordkit.testing.servers import (
    KAFKA_KRAFT_VERSION,
    KafkaCluster,
    RedisServer,
    StandaloneZooKeeper,
    fetch_metadata,
    kafka_tool,
)
from coordkit.testing.servers.kafka_tools import PRODUCTION_JVM_OPTIONS

SIDES = ("coordkit", "kafka")
BROKER_IDS = (1, 2, 3)
#: Broker settings both sides run with (Kafka's names; coordkit serve takes them as --config):
#: no initial rebalance delay, and the offsets topic as small as the Kafka fixture makes it.
SHARED_CONFIG = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "5",
    # KIP-848 groups heartbeat twice a second (vs_kafka.consumer_protocol).
    "group.consumer.heartbeat.interval.ms": "500",
    # The transaction coordinator's topic as the Kafka fixture makes it (Kafka's defaults but
    # the partition count): replication factor 3, min ISR 2 (vs_kafka.transactions).
    "transaction.state.log.num.partitions": "5",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
}
#: Kafka's floor under the heartbeat interval (coordkit has no such setting).
KAFKA_ONLY_CONFIG = {"group.consumer.min.heartbeat.interval.ms": "500"}
#: Seconds a broker may take to print its address or to answer Metadata.
START_TIMEOUT = 120.0
#: Seconds a stopped coordkit broker may take to exit (Ctrl-C: it deregisters and closes).
STOP_TIMEOUT = 30.0
#: The stores :class:`ServeProcesses` can share (ZooKeeper unless a case asks for another).
SHARED_STORES = ("zookeeper", "redis")


def serve_command(*args: str) -> list[str]:
    configs = [word for k, v in SHARED_CONFIG.items() for word in ("--config", f"{k}={v}")]
    return [sys.executable, "-c", "from coordkit.cli import main; main()", "serve", *args, *configs]


def _read_addresses(process: subprocess.Popen[str]) -> dict[int, str]:
    """The ``broker N ... HOST:PORT`` lines coordkit serve prints, up to its ``store`` line."""
    addresses: dict[int, str] = {}
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith("broker "):
            words = line.split()
            addresses[int(words[1])] = words[-1]
        elif line.startswith("store "):
            return addresses
    raise SystemExit(f"coordkit serve exited with {process.wait()} before it served")


def _drain(process: subprocess.Popen[str]) -> None:
    """Read the rest of a server's output in the background (a full pipe would block it)."""
    import threading

    def read() -> None:
        assert process.stdout is not None
        for _line in process.stdout:
            pass

    threading.Thread(target=read, daemon=True).start()


class OneProcessServe:
    """``coordkit serve --brokers 3`` in its own process, on free ports."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            serve_command("--store", "memory://bench-vs-kafka", "--brokers", "3", "--port", "0"),
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )  # fmt: skip
        self.addresses = _read_addresses(self.process)
        _drain(self.process)
        if len(self.addresses) != 3:
            raise SystemExit("coordkit serve did not start 3 brokers")

    @property
    def bootstrap(self) -> str:
        return ",".join(self.addresses.values())

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()


@contextlib.contextmanager
def one_cluster(side: str, heap: str) -> Iterator[str]:
    """The bootstrap servers of a fresh cluster of ``side`` for the cases that kill nothing."""
    if side == "kafka":
        with KafkaCluster(
            broker_ids=BROKER_IDS,
            heap=heap,
            properties={**SHARED_CONFIG, **KAFKA_ONLY_CONFIG},
            jvm_options=PRODUCTION_JVM_OPTIONS,
        ) as kafka:
            yield kafka.bootstrap
    else:
        serve = OneProcessServe()
        try:
            yield serve.bootstrap
        finally:
            serve.close()


class BrokerProcesses(Protocol):
    """Three brokers, a process each, of either side."""

    def address(self, broker_id: int) -> str: ...
    def pid(self, broker_id: int) -> int: ...
    def live(self) -> list[int]: ...
    def controller(self) -> int: ...
    def kill(self, broker_id: int) -> None: ...
    def stop(self, broker_id: int) -> None: ...
    def start(self, broker_id: int) -> None: ...
    def close(self) -> None: ...


def bootstrap_of(cluster: BrokerProcesses) -> str:
    """The live brokers' addresses (a killed one would only slow a new client's first call)."""
    return ",".join(cluster.address(b) for b in cluster.live())


def answers_metadata(address: str, broker_id: int) -> bool:
    """The broker at ``address`` answers Metadata and lists itself."""
    host, port = address.rsplit(":", 1)
    found = fetch_metadata(host, int(port), timeout=2.0)
    return found is not None and broker_id in found.brokers


#: ZooKeeper expires a session on its next tick after the timeout (sessions are kept in buckets of
#: ``tickTime``), so a 200 ms tick adds up to 200 ms to noticing a death; Kafka's KRaft controller
#: fences a broker at its session's deadline. A 50 ms tick keeps that rounding small beside the
#: failure timeout (the minimum session, two ticks, stays below any timeout given here).
ZOOKEEPER_TICK = {"tickTime": "50", "minSessionTimeout": "100"}


class ServeProcesses:
    """``coordkit serve --broker-id N`` processes on one private ZooKeeper (or Redis: ``store``),
    whose sessions end ``failure_timeout`` seconds after a process dies."""

    def __init__(self, failure_timeout: float, log_dir: Path, store: str = "zookeeper") -> None:
        self.store_server: StandaloneZooKeeper | RedisServer
        if store == "zookeeper":
            zookeeper = StandaloneZooKeeper(extra_config=ZOOKEEPER_TICK).start()
            self.store_server = zookeeper
            self.url = f"zookeeper://{zookeeper.hosts}/vs-kafka?session_timeout={failure_timeout:g}"
        elif store == "redis":
            redis = RedisServer().start()
            self.store_server = redis
            self.url = redis.url(prefix="vs-kafka", session_timeout=f"{failure_timeout:g}")
        else:
            raise ValueError(f"no shared store {store!r}; stores: {', '.join(SHARED_STORES)}")
        self.log_dir = log_dir
        self.processes: dict[int, subprocess.Popen[str]] = {}
        self.addresses: dict[int, str] = {}
        try:
            for broker_id in BROKER_IDS:
                self.spawn(broker_id)
            for broker_id in BROKER_IDS:
                self.wait_serving(broker_id)
        except BaseException:
            self.close()
            raise

    def spawn(self, broker_id: int) -> None:
        """Start broker ``broker_id``'s process (not waiting for it)."""
        log = (self.log_dir / f"coordkit-{broker_id}.log").open("a")
        self.processes[broker_id] = subprocess.Popen(
            serve_command("--store", self.url, "--broker-id", str(broker_id), "--port", "0"),
            stdout=subprocess.PIPE, stderr=log, text=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )  # fmt: skip
        log.close()

    def wait_serving(self, broker_id: int) -> None:
        """Wait until broker ``broker_id`` printed its address and answers Metadata."""
        process = self.processes[broker_id]
        self.addresses[broker_id] = _read_addresses(process)[broker_id]
        _drain(process)
        deadline = time.monotonic() + START_TIMEOUT
        while not answers_metadata(self.addresses[broker_id], broker_id):
            if time.monotonic() > deadline:
                raise SystemExit(f"coordkit broker {broker_id} does not answer Metadata")
            time.sleep(0.01)

    def address(self, broker_id: int) -> str:
        return self.addresses[broker_id]

    def pid(self, broker_id: int) -> int:
        return self.processes[broker_id].pid

    def live(self) -> list[int]:
        return [b for b, p in self.processes.items() if p.poll() is None]

    def controller(self) -> int:
        """The controller the live brokers' Metadata names (coordkit's is the real one)."""
        host, port = self.address(self.live()[0]).rsplit(":", 1)
        found = fetch_metadata(host, int(port))
        if found is None:
            raise SystemExit("no coordkit broker answers Metadata")
        return found.controller_id

    def kill(self, broker_id: int) -> None:
        self.processes[broker_id].kill()
        self.processes[broker_id].wait()

    def stop(self, broker_id: int) -> None:
        process = self.processes[broker_id]
        process.send_signal(2)  # Ctrl-C: coordkit serve deregisters and exits
        try:
            process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()

    def start(self, broker_id: int) -> None:
        self.spawn(broker_id)
        self.wait_serving(broker_id)

    def close(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()
        self.store_server.close()


_QUORUM_LEADER = re.compile(r"^LeaderId:\s*(\d+)", re.MULTILINE)


class KafkaNodes:
    """Kafka 4's three combined KRaft nodes, a dead process noticed after ``failure_timeout``.

    Kafka notices a dead process with two timeouts, coordkit with one (the store session that
    holds both a broker's registration and the controller's election): a broker is fenced after
    ``broker.session.timeout.ms`` (9 s by default), a silent active controller is replaced after
    ``controller.quorum.fetch.timeout.ms`` (2 s by default). Both are set to the same
    ``failure_timeout`` as coordkit's store session, so a failover compares what each side does
    once it has noticed the death, not the timeouts. The brokers heartbeat three times per
    ``failure_timeout`` (Kafka's default, 2 s, would fence every broker under a shorter session).
    """

    def __init__(self, heap: str, failure_timeout: float) -> None:
        timeout_ms = int(failure_timeout * 1000)
        properties = {
            **SHARED_CONFIG,
            **KAFKA_ONLY_CONFIG,
            "broker.session.timeout.ms": str(timeout_ms),
            "broker.heartbeat.interval.ms": str(min(2000, max(100, timeout_ms // 3))),
            "controller.quorum.fetch.timeout.ms": str(timeout_ms),
        }
        self.cluster = KafkaCluster(
            broker_ids=BROKER_IDS,
            heap=heap,
            properties=properties,
            jvm_options=PRODUCTION_JVM_OPTIONS,
        )
        self.cluster.start()

    def address(self, broker_id: int) -> str:
        return self.cluster.node(broker_id).address

    def pid(self, broker_id: int) -> int:
        pid = self.cluster.node(broker_id).pid
        if pid is None:
            raise SystemExit(f"Kafka node {broker_id} is not running")
        return pid

    def live(self) -> list[int]:
        return [b for b, node in self.cluster.nodes.items() if node.running]

    def controller(self) -> int:
        """The active controller: the leader of the KRaft metadata quorum (a KRaft Metadata
        response names a random broker as controller, for clients cannot reach controllers)."""
        described = kafka_tool(
            KAFKA_KRAFT_VERSION, "kafka-metadata-quorum", "--bootstrap-server",
            bootstrap_of(self), "describe", "--status", timeout=120,
        )  # fmt: skip
        found = _QUORUM_LEADER.search(described.stdout)
        if found is None:
            raise SystemExit(f"kafka-metadata-quorum named no leader: {described.stderr[-300:]}")
        return int(found.group(1))

    def kill(self, broker_id: int) -> None:
        self.cluster.kill(broker_id)

    def stop(self, broker_id: int) -> None:
        self.cluster.stop(broker_id)

    def start(self, broker_id: int) -> None:
        node = self.cluster.node(broker_id)
        node.start()
        deadline = time.monotonic() + START_TIMEOUT
        while not answers_metadata(node.address, broker_id):
            if time.monotonic() > deadline or node.failed:
                raise SystemExit(f"Kafka node {broker_id} does not answer Metadata")
            time.sleep(0.01)

    def close(self) -> None:
        self.cluster.close()


@contextlib.contextmanager
def broker_processes(
    side: str, heap: str, failure_timeout: float, log_dir: Path
) -> Iterator[BrokerProcesses]:
    cluster: BrokerProcesses = (
        KafkaNodes(heap, failure_timeout)
        if side == "kafka"
        else ServeProcesses(failure_timeout, log_dir)
    )
    try:
        yield cluster
    finally:
        cluster.close()


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int,
    replicas: int = 3,
    config: dict[str, str] | None = None,
) -> None:
    """Create ``name`` (with the topic ``config`` given) and wait until every partition has a
    leader and a full ISR."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, replicas,
                                                config=config or {})]).values():  # fmt: skip
        future.result(60)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        topic = admin.list_topics(name, timeout=10).topics.get(name)
        if (
            topic
            and len(topic.partitions) == partitions
            and all(p.leader >= 0 and len(p.isrs) == replicas for p in topic.partitions.values())
        ):
            return
        time.sleep(0.1)
    raise SystemExit(f"{name}: no leaders with full ISRs after 120 s")


def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    """Partition → leader of ``topic`` as a live broker answers (-1: none)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    found = admin.list_topics(topic, timeout=10).topics[topic]
    return {p.id: p.leader for p in found.partitions.values()}


def rss_bytes(pid: int) -> int:
    """The resident set of process ``pid`` (VmRSS)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise SystemExit(f"no VmRSS for process {pid}")

"""A broker's start and memory, on three broker processes a side (see :mod:`vs_kafka.clusters`):

* ``broker start`` — one broker is stopped (Ctrl-C for coordkit, SIGTERM for Kafka: each side's
  clean shutdown) and started again: seconds from its process start until it answers a Metadata
  request listing itself (``start s``);
* ``memory`` — the resident set (VmRSS) of the three processes together before and after a topic
  of ``--memory-partitions`` partitions (replication factor 3, every replica in sync) is created:
  KiB per partition; and of one broker before and after ``--connections`` clients connect and
  ask ApiVersions once, then stay idle: KiB per idle connection. A JVM's resident set follows its
  heap's growth, not each object, so Kafka's figures are coarse (its heap is ``--kafka-heap``).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

from vs_kafka.clusters import BrokerProcesses, bootstrap_of, create_topic, rss_bytes

#: Seconds left for background work (followers' first fetches, a JVM's allocation) to settle
#: before a resident set is read.
SETTLE_SECONDS = 3.0
Figures = dict[str, float]


def broker_start(cluster: BrokerProcesses) -> Figures:
    broker = cluster.live()[-1]
    cluster.stop(broker)
    started = time.perf_counter()
    cluster.start(broker)  # returns once it answers Metadata listing itself
    return {"start s": time.perf_counter() - started}


def _total_rss(cluster: BrokerProcesses) -> int:
    return sum(rss_bytes(cluster.pid(b)) for b in cluster.live())


def _api_versions_frame() -> bytes:
    from coordkit.protocol import KafkaCodec, messages

    return KafkaCodec().encode_request(
        messages.ApiVersionsRequest(), version=0, correlation_id=1, client_id="idle"
    )


def memory(cluster: BrokerProcesses, partitions: int, connections: int) -> Figures:
    time.sleep(SETTLE_SECONDS)
    before = _total_rss(cluster)
    create_topic(bootstrap_of(cluster), "memory", partitions)
    time.sleep(SETTLE_SECONDS)
    per_partition = (_total_rss(cluster) - before) / partitions / 1024

    broker = cluster.live()[0]
    host, port = cluster.address(broker).rsplit(":", 1)
    frame = _api_versions_frame()
    before = rss_bytes(cluster.pid(broker))
    sockets: list[socket.socket] = []
    try:
        for _ in range(connections):
            sock = socket.create_connection((host, int(port)), timeout=30)
            sock.sendall(frame)
            sockets.append(sock)
        for sock in sockets:
            size = int.from_bytes(_read(sock, 4), "big")
            _read(sock, size)
        time.sleep(SETTLE_SECONDS)
        per_connection = (rss_bytes(cluster.pid(broker)) - before) / connections / 1024
    finally:
        for sock in sockets:
            sock.close()
    return {"KiB/partition": per_partition, "KiB/idle conn": per_connection}


def _read(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise SystemExit("a broker closed an idle connection")
        data += chunk
    return data


CASES = ("footprint",)


def run(cluster: BrokerProcesses, partitions: int, connections: int,
        case: Callable[[str, Callable[[], Figures]], None]) -> None:  # fmt: skip
    case("broker start", lambda: broker_start(cluster))
    case("memory", lambda: memory(cluster, partitions, connections))

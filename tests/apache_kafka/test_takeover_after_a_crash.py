"""Kafka 3.9 takes over a coordkit cluster whose processes were all killed (kill -9: no
controlled shutdown, no checkpoint written at the stop, the brokers' registrations and the
controller left in ZooKeeper until their sessions expire): Kafka brokers of the same ids on the
same chroot and log directories wait out the stale registrations, recover the logs, bring every
partition online with full ISRs, and serve every acknowledged record at its offset."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from apache_kafka.test_takeover import (
    BROKERS,
    COMPLAINT,
    WAIT_SECONDS,
    Record,
    _bootstrap,
    _error_and_warning_lines,
    _online_with_full_isrs,
    _produce,
    _read_all,
    _replicas_alike,
    _start_coordkit,
)
from coordkit.testing.servers import KafkaCluster, StandaloneZooKeeper
from coordkit.testing.waiting import wait_for
from serve.conftest import STOP_SECONDS

CHROOT = "/takeover-after-a-crash"
#: coordkit's sessions end this long after its processes are killed (the Kafka brokers of the
#: same ids cannot register before).
SESSION_TIMEOUT = 6
TOPIC = "orders"
PARTITIONS = 3
RECORDS = 60


@pytest.fixture(scope="module")
def crashed(
    zookeeper: StandaloneZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, list[Record]]:
    """A coordkit cluster with acknowledged records, every replica in step, then every
    process killed at once; its log directories and what it served."""
    data_dir = tmp_path_factory.mktemp("logs")
    url = f"zookeeper://{zookeeper.hosts}{CHROOT}?session_timeout={SESSION_TIMEOUT}"
    servers = _start_coordkit(url, data_dir)
    try:
        bootstrap = _bootstrap(servers)
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
        try:
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, len(BROKERS))])
        finally:
            admin.close()
        first = next(iter(servers.values())).bootstrap
        wait_for(lambda: _online_with_full_isrs(first, {TOPIC}), WAIT_SECONDS, "leaders")
        _produce(bootstrap, TOPIC, RECORDS, TOPIC)
        served = _read_all(bootstrap, {TOPIC: PARTITIONS}, RECORDS)
        topics = {TOPIC: (PARTITIONS, len(BROKERS))}
        wait_for(lambda: _replicas_alike(data_dir, topics), WAIT_SECONDS, "replicas alike")
    finally:
        for server in servers.values():
            server.process.kill()
        for server in servers.values():
            server.process.communicate(timeout=STOP_SECONDS)
    return data_dir, served


@pytest.fixture(scope="module")
def kafka_after_the_crash(
    zookeeper: StandaloneZooKeeper, crashed: tuple[Path, list[Record]]
) -> Iterator[KafkaCluster]:
    data_dir, _ = crashed
    with KafkaCluster(
        zookeeper=zookeeper.hosts,
        chroot=CHROOT,
        broker_ids=BROKERS,
        log_dirs={b: data_dir / f"broker-{b}" for b in BROKERS},
    ) as kafka:
        yield kafka


def test_kafka_takes_over_a_killed_coordkit_cluster(
    kafka_after_the_crash: KafkaCluster, crashed: tuple[Path, list[Record]]
) -> None:
    _, served_by_coordkit = crashed
    address = kafka_after_the_crash.node(1).address
    wait_for(lambda: _online_with_full_isrs(address, {TOPIC}), WAIT_SECONDS,
             "every partition online on Kafka, with full ISRs")  # fmt: skip
    served = _read_all(kafka_after_the_crash.bootstrap, {TOPIC: PARTITIONS}, RECORDS)
    assert served == served_by_coordkit
    lines = _error_and_warning_lines(kafka_after_the_crash)
    assert [line for line in lines if COMPLAINT.search(line)] == [], "\n".join(lines)

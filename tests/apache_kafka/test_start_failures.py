"""How a cluster start fails or recovers: a port another process took between its choice and the
bind is replaced by a fresh one; a broker that exits while starting fails the start with the tail
of its log. One-broker clusters on a chroot of the test ZooKeeper."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from coordkit.testing.servers import (
    KafkaCluster,
    KafkaStartError,
    StandaloneZooKeeper,
    free_port,
    kafka_server,
)


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port something else listens on."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield int(listener.getsockname()[1])


def test_a_port_taken_before_the_bind_is_replaced_by_a_fresh_one(
    zookeeper: StandaloneZooKeeper, taken_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    offered: list[int] = []

    def first_the_taken_port() -> int:
        offered.append(free_port() if offered else taken_port)
        return offered[-1]

    monkeypatch.setattr(kafka_server, "free_port", first_the_taken_port)
    with KafkaCluster(zookeeper=zookeeper.hosts, broker_ids=(1,)) as cluster:
        assert offered[0] == taken_port
        assert len(offered) == 2  # one port per attempt: the taken one, then a fresh one
        assert cluster.node(1).port == offered[1]
        assert set(cluster.metadata().brokers) == {1}


def test_a_broker_exiting_at_start_fails_with_its_log(zookeeper: StandaloneZooKeeper) -> None:
    cluster = KafkaCluster(
        zookeeper=zookeeper.hosts, broker_ids=(1,), properties={"num.io.threads": "none"}
    )
    try:
        with pytest.raises(KafkaStartError) as raised:
            cluster.start()
        message = str(raised.value)
        assert message.startswith("a Kafka node exited (nodes [1])")
        assert "Kafka 3.9.2 node 1" in message
        assert "num.io.threads" in message  # Kafka's own complaint, from the log's tail
    finally:
        cluster.close()

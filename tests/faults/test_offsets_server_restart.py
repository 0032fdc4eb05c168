"""Committed consumer offsets survive a crash and restart of the store server itself (a ZooKeeper
server; a Redis server with ``appendfsync always``), for both offset storages: a consumer of a new
cluster on the restarted server resumes exactly where the group committed."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from coordkit.engine import Cluster, EngineConfig
from coordkit.engine.groups import Consumer
from coordkit.kafka.model import TopicPartition
from coordkit.plugins import get_plugin_manager
from coordkit.store import MetadataStore
from harness.redis_server import RedisServer
from harness.zookeeper import StandaloneZooKeeper

PARTITIONS = [TopicPartition("orders", p) for p in range(4)]


class Server:
    """A store server this test may kill and restart, and the URL of a fresh namespace on it."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        namespace = f"offsets-{uuid.uuid4().hex[:8]}"
        if kind == "zookeeper":
            self.zookeeper = StandaloneZooKeeper().start()
            self.url = f"zookeeper://{self.zookeeper.hosts}/{namespace}"
        else:
            self.redis = RedisServer(durable=True).start()
            self.url = self.redis.url(prefix=namespace)

    def open(self) -> MetadataStore:
        return get_plugin_manager().store_for(self.url, session_timeout=30)

    def crash_and_restart(self) -> None:
        if self.kind == "zookeeper":
            self.zookeeper.server.kill()
            self.zookeeper.server.start()
        else:
            self.redis.kill()
            self.redis.start()

    def close(self) -> None:
        if self.kind == "zookeeper":
            self.zookeeper.close()
        else:
            self.redis.close()


@pytest.fixture(params=["zookeeper", "redis"])
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    instance = Server(request.param)
    yield instance
    instance.close()


def _cluster(server: Server, storage: str) -> Cluster:
    config = EngineConfig(
        offset_storage=storage,
        offsets_topic_num_partitions=3,
        group_initial_rebalance_delay=0.05,
        auto_leader_rebalance=False,
    )
    cluster = Cluster(server.open, 2, config=config, seed=3).start()
    cluster.wait_settled(timeout=60)
    return cluster


def _consumer(cluster: Cluster) -> Consumer:
    consumer = cluster.start_consumer(
        "billing", ["orders"], session_timeout=2.0, heartbeat_interval=0.2
    )
    cluster.wait_group_stable("billing", timeout=60)
    return consumer


def _with_cluster(server: Server, storage: str, work: Callable[[Cluster], Any]) -> Any:
    cluster = _cluster(server, storage)
    try:
        return work(cluster)
    finally:
        cluster.close()


@pytest.mark.parametrize("storage", ["offsets-topic", "zookeeper"])
def test_committed_offsets_survive_a_store_server_crash(server: Server, storage: str) -> None:
    def commit_some(cluster: Cluster) -> dict[TopicPartition, int]:
        cluster.create_topic("orders", len(PARTITIONS), 2)
        cluster.wait_settled(timeout=60)
        consumer = _consumer(cluster)
        cluster.produce(5)
        cluster.replicate()
        assert consumer.poll() == 5 * len(PARTITIONS)
        consumer.commit()  # returns once the store acknowledged the write
        return consumer.positions()

    committed = _with_cluster(server, storage, commit_some)
    assert committed == dict.fromkeys(PARTITIONS, 5)

    server.crash_and_restart()

    def resume(cluster: Cluster) -> dict[TopicPartition, int]:
        return _consumer(cluster).positions()

    assert _with_cluster(server, storage, resume) == committed

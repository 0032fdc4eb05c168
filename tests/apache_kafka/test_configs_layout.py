"""Configs in Kafka 3.9's ZooKeeper layout, both ways (#35 item 1): what a Kafka 3.9 broker writes
when a client alters a topic's, a broker's and the cluster's broker configs is read by coordkit
(:class:`~coordkit.engine.configs.ConfigAdmin`, and :class:`~coordkit.serve.topic_configs.
TopicConfigs` following the change notifications without a restart), and the bytes are the ones
coordkit writes for the same configs; what coordkit writes is what Kafka's broker then
describes (DescribeConfigs to the Kafka broker, not the tree)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from coordkit.engine.configs import BROKERS, TOPICS, ConfigAdmin
from coordkit.kafka import layout
from coordkit.kafka.model import TopicConfig
from coordkit.plugins import open_store
from coordkit.protocol import messages
from coordkit.serve.topic_configs import TopicConfigs
from coordkit.store import MetadataStore
from coordkit.testing.servers import KafkaCluster, StandaloneZooKeeper
from coordkit.testing.waiting import wait_for
from serve.conftest import RawClient

WAIT_SECONDS = 60
TOPIC_TYPE, BROKER_TYPE = 2, 4
DYNAMIC_TOPIC_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 3


@pytest.fixture(scope="module")
def kafka(zookeeper: StandaloneZooKeeper) -> Iterator[KafkaCluster]:
    with KafkaCluster(zookeeper=zookeeper.hosts, broker_ids=(1,)) as cluster:
        yield cluster


@pytest.fixture
def store(kafka: KafkaCluster, zookeeper: StandaloneZooKeeper) -> Iterator[MetadataStore]:
    with open_store(f"zookeeper://{zookeeper.hosts}{kafka.chroot}") as opened:
        yield opened


def _alter(admin: AdminClient, kind: str, name: str, **configs: str) -> None:
    entries = [ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
               for k, v in configs.items()]  # fmt: skip
    for future in admin.incremental_alter_configs(
        [ConfigResource(kind, name, incremental_configs=entries)]
    ).values():
        future.result(WAIT_SECONDS)


def _described(kafka: KafkaCluster, resource_type: int, name: str) -> dict[str, Any]:
    """Kafka's broker's DescribeConfigs: name → (value, source)."""
    node = kafka.nodes[1]
    client = RawClient(f"{node.host}:{node.port}")
    try:
        Request: Any = messages.DescribeConfigsRequest
        request = Request(resources=[Request.DescribeConfigsResource(
            resource_type=resource_type, resource_name=name, configuration_keys=None)],
            include_synonyms=False, include_documentation=False)  # fmt: skip
        result = client.call(request, 4).results[0]
    finally:
        client.close()
    return {c.name: (c.value, c.config_source) for c in result.configs}


def _notifications(store: MetadataStore) -> list[bytes]:
    names = sorted(store.children(layout.CONFIG_CHANGES))
    return [store.get(f"{layout.CONFIG_CHANGES}/{n}")[0] for n in names]


def test_configs_kafka_writes_are_coordkits_bytes_and_read_by_coordkit(
    kafka: KafkaCluster, store: MetadataStore
) -> None:
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    for future in admin.create_topics([NewTopic("k", 1, 1)]).values():
        future.result(WAIT_SECONDS)
    following = TopicConfigs(store)
    following.start()
    try:
        _alter(admin, "topic", "k", retention_ms="5000")
        # Several keys: the node's key order is a Properties' (by hash bucket; retention.ms,
        # segment.ms and segment.bytes share one, in the order they were set), not sorted.
        many = {"retention.ms": "6000", "segment.ms": "70000", "cleanup.policy": "compact",
                "min.insync.replicas": "1", "max.message.bytes": "100000",
                "segment.bytes": "1048576", "delete.retention.ms": "1000"}  # fmt: skip
        _alter(admin, "topic", "k", **{k.replace(".", "_"): v for k, v in many.items()})
        _alter(admin, "broker", "1", message_max_bytes="2000000")
        # The cluster-wide defaults: librdkafka cannot name the empty broker, so raw.
        node = kafka.nodes[1]
        client = RawClient(f"{node.host}:{node.port}")
        try:
            Request: Any = messages.IncrementalAlterConfigsRequest
            Resource = Request.AlterConfigsResource
            request = Request(resources=[Resource(
                resource_type=BROKER_TYPE, resource_name="", configs=[Resource.AlterableConfig(
                    name="log.retention.bytes", config_operation=0, value="123456")])],
                validate_only=False)  # fmt: skip
            assert client.call(request, 1).responses[0].error_code == 0
        finally:
            client.close()

        configs = ConfigAdmin(store)
        expected = {
            (TOPICS, "k"): many,
            (BROKERS, "1"): {"message.max.bytes": "2000000"},
            (BROKERS, layout.DEFAULT_BROKER): {"log.retention.bytes": "123456"},
        }
        for (kind, name), config in expected.items():
            assert configs.read(kind, name) == config
            # Byte for byte what coordkit writes for the same configs.
            path = ConfigAdmin.path(kind, name)
            assert store.get(path)[0] == layout.TOPIC_CONFIG.encode(TopicConfig(config=config))
        notified = _notifications(store)
        for entity in ("topics/k", "brokers/1", "brokers/<default>"):
            assert layout.encode_config_change(entity) in notified
        # coordkit's brokers follow Kafka's change notifications.
        wait_for(lambda: following.value("k", "retention.ms") == 6000, WAIT_SECONDS)
        _alter(admin, "topic", "k", retention_ms="9000")
        wait_for(lambda: following.value("k", "retention.ms") == 9000, WAIT_SECONDS)
    finally:
        following.stop()


def test_configs_coordkit_writes_are_applied_by_kafka(
    kafka: KafkaCluster, store: MetadataStore
) -> None:
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    for future in admin.create_topics([NewTopic("c", 1, 1)]).values():
        future.result(WAIT_SECONDS)
    configs = ConfigAdmin(store)
    before = len(_notifications(store))
    configs.write(TOPICS, "c", {"retention.ms": "7000", "cleanup.policy": "compact"})
    configs.write(BROKERS, layout.DEFAULT_BROKER, {"log.retention.bytes": "654321"})
    assert _notifications(store)[before:] == [
        b'{"version":2,"entity_path":"topics/c"}',
        b'{"version":2,"entity_path":"brokers/<default>"}',
    ]

    def topic_applied() -> bool:
        found = _described(kafka, TOPIC_TYPE, "c")
        return found.get("retention.ms") == ("7000", DYNAMIC_TOPIC_CONFIG) and found.get(
            "cleanup.policy"
        ) == ("compact", DYNAMIC_TOPIC_CONFIG)

    wait_for(topic_applied, WAIT_SECONDS, "Kafka's broker to take the topic configs coordkit wrote")
    wait_for(
        lambda: (
            _described(kafka, BROKER_TYPE, "").get("log.retention.bytes")
            == ("654321", DYNAMIC_DEFAULT_BROKER_CONFIG)
        ),
        WAIT_SECONDS,
        "Kafka's broker to take the cluster-wide broker config coordkit wrote",
    )

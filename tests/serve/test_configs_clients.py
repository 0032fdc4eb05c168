"""The clients' config calls against ``coordkit serve``: confluent-kafka's AdminClient
(``describe_configs``, ``incremental_alter_configs``, ``alter_configs``) and kafka-python's
``describe_configs`` and ``alter_configs``, with the values, sources and refusals they show
their users."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource as PyConfigResource
from kafka.admin import ConfigResourceType

from serve.inprocess import InProcessFactory, InProcessServer, in_process_fixture  # noqa: F401

TIMEOUT = 30
INVALID_CONFIG = 40


@pytest.fixture
def server(in_process: InProcessFactory) -> InProcessServer:
    return in_process(1)


@pytest.fixture
def confluent(server: InProcessServer) -> AdminClient:
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    for future in admin.create_topics([NewTopic("c", 1, 1)]).values():
        future.result(TIMEOUT)
    return admin


@pytest.fixture
def kafka_python(server: InProcessServer) -> Iterator[KafkaAdminClient]:
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=30_000)
    yield admin
    admin.close()


def _described(admin: AdminClient, resource: ConfigResource) -> dict[str, Any]:
    (future,) = admin.describe_configs([resource]).values()
    found: dict[str, Any] = future.result(TIMEOUT)
    return found


def test_confluent_kafka_describes_and_alters_topic_configs(confluent: AdminClient) -> None:
    topic = ConfigResource("topic", "c")
    configs = _described(confluent, topic)
    assert configs["cleanup.policy"].value == "delete"
    assert configs["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value
    change = ConfigResource("topic", "c", incremental_configs=[
        ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
    ])  # fmt: skip
    for future in confluent.incremental_alter_configs([change]).values():
        future.result(TIMEOUT)
    configs = _described(confluent, topic)
    assert (configs["retention.ms"].value, configs["retention.ms"].source) == (
        "60000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)  # fmt: skip
    assert configs["cleanup.policy"].value == "delete,compact"

    # The legacy AlterConfigs replaces every override.
    legacy = ConfigResource("topic", "c", set_config={"segment.ms": "3600000"})
    for future in confluent.alter_configs([legacy]).values():
        future.result(TIMEOUT)
    configs = _described(confluent, topic)
    assert configs["segment.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    refused = ConfigResource(
        "topic",
        "c",
        incremental_configs=[
            ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    (future,) = confluent.incremental_alter_configs([refused]).values()
    with pytest.raises(KafkaException) as caught:
        future.result(TIMEOUT)
    error = caught.value.args[0]
    assert error.code() == INVALID_CONFIG
    assert "retention.ms" in error.str()
    assert _described(confluent, topic)["retention.ms"].source == (
        ConfigSource.DEFAULT_CONFIG.value
    )


def test_confluent_kafka_describes_the_broker(confluent: AdminClient) -> None:
    configs = _described(confluent, ConfigResource("broker", "0"))
    assert configs["log.retention.hours"].value == "168"
    assert configs["log.retention.hours"].is_read_only
    assert not configs["log.retention.bytes"].is_read_only


def test_kafka_python_describes_and_alters_topic_configs(
    confluent: AdminClient, kafka_python: KafkaAdminClient
) -> None:
    kafka_python.alter_configs(
        [PyConfigResource(ConfigResourceType.TOPIC, "c", configs={"retention.bytes": "1000"})]
    )
    found = kafka_python.describe_configs([PyConfigResource(ConfigResourceType.TOPIC, "c")])
    text = repr(found)
    assert "retention.bytes" in text
    assert "1000" in text
    assert _described(confluent, ConfigResource("topic", "c"))["retention.bytes"].value == "1000"

"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs against ``coordkit serve`` (in this
process, on the backend's store): the configs in Kafka's ZooKeeper layout, Kafka's values,
sources and synonyms, its refusals (nothing written), and the clients' admin calls.

What Kafka 4.4 answers to the same requests is compared in tests/differential (scenarios
``configs.*``); the values asserted here are Kafka's as that comparison found them."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Consumer, TopicPartition

from coordkit.engine.configs import ConfigAdmin
from coordkit.kafka import layout
from coordkit.protocol import messages
from coordkit.protocol.records import decode_batch, encode_batch, new_batch
from coordkit.serve.broker_config import parse_broker_configs
from coordkit.testing.waiting import wait_for
from serve.conftest import RawClient
from serve.inprocess import InProcessFactory, InProcessServer, in_process_fixture  # noqa: F401

Connect = Callable[[str], RawClient]
TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
TOPIC_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 3, 4, 5
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_CONFIG, INVALID_REQUEST = 0, 3, 40, 42
MESSAGE_TOO_LARGE, INVALID_TOPIC_EXCEPTION = 10, 17

Describe = messages.DescribeConfigsRequest
Incremental = messages.IncrementalAlterConfigsRequest
Alter = messages.AlterConfigsRequest


@pytest.fixture
def server(in_process: InProcessFactory) -> InProcessServer:
    settings = parse_broker_configs(["log.retention.ms=-1", "min.insync.replicas=1"])
    running = in_process(1, settings=settings.serve_settings())
    admin = running.context(0).admin
    admin.create_topic("t", 1, 1)
    return running


def describe(client: RawClient, resource_type: int, name: str, keys: list[str] | None = None,
             version: int = 4) -> Any:  # fmt: skip
    Resource = Describe.DescribeConfigsResource  # type: ignore[attr-defined]
    request = Describe(resources=[Resource(resource_type=resource_type, resource_name=name,
                                           configuration_keys=keys)],
                       include_synonyms=True, include_documentation=False)  # fmt: skip
    return client.call(request, version).results[0]


def incremental(
    client: RawClient,
    resource_type: int,
    name: str,
    configs: list[tuple[str, int, str | None]],
    validate_only: bool = False,
) -> Any:
    Resource = Incremental.AlterConfigsResource  # type: ignore[attr-defined]
    request = Incremental(resources=[Resource(
        resource_type=resource_type, resource_name=name,
        configs=[Resource.AlterableConfig(name=n, config_operation=op, value=v)
                 for n, op, v in configs])], validate_only=validate_only)  # fmt: skip
    found = client.call(request, 1).responses[0]
    return found.error_code, found.error_message


def _by_name(result: Any) -> dict[str, Any]:
    return {c.name: c for c in result.configs}


def _node(server: InProcessServer, path: str) -> bytes | None:
    store = server.context(0).broker.store
    return store.get(path)[0] if store.exists(path) is not None else None


def test_a_topic_is_described_with_kafkas_configs_values_and_sources(
    server: InProcessServer, raw_client: Connect
) -> None:
    client = raw_client(server.address(0))
    result = describe(client, TOPIC, "t")
    assert result.error_code == NONE
    configs = _by_name(result)
    assert len(configs) == 37  # Kafka 4.4's topic configs
    retention = configs["retention.ms"]
    # The broker's --config log.retention.ms=-1, and log.retention.hours' default after it.
    assert (retention.value, retention.config_source) == ("-1", STATIC_BROKER_CONFIG)
    assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
        ("log.retention.ms", "-1", STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", DEFAULT_CONFIG),
    ]
    # Kafka lists no synonyms for a config whose first broker synonym is set nowhere.
    assert (configs["segment.ms"].value, configs["segment.ms"].synonyms) == ("604800000", [])
    policy = configs["cleanup.policy"]
    assert (policy.value, policy.config_source, policy.config_type) == ("delete", DEFAULT_CONFIG, 7)
    assert not policy.read_only
    assert not policy.is_sensitive
    assert describe(client, TOPIC, "nosuch").error_code == UNKNOWN_TOPIC_OR_PARTITION


def test_an_incremental_change_is_written_in_kafkas_layout_and_applied(
    server: InProcessServer, raw_client: Connect
) -> None:
    client = raw_client(server.address(0))
    changes = server.context(0).broker.store.children(layout.CONFIG_CHANGES)
    assert incremental(
        client, TOPIC, "t", [("retention.ms", SET, "5000"), ("cleanup.policy", APPEND, "compact")]
    ) == (NONE, None)
    assert _node(server, "/config/topics/t") == (
        b'{"version":1,"config":{"cleanup.policy":"delete,compact","retention.ms":"5000"}}'
    )
    fresh = set(server.context(0).broker.store.children(layout.CONFIG_CHANGES)) - set(changes)
    assert [_node(server, f"{layout.CONFIG_CHANGES}/{n}") for n in fresh] == [
        b'{"version":2,"entity_path":"topics/t"}'
    ]
    configs = _by_name(describe(client, TOPIC, "t", ["retention.ms", "cleanup.policy"]))
    assert sorted(configs) == ["cleanup.policy", "retention.ms"]
    assert (configs["retention.ms"].value, configs["retention.ms"].config_source) == (
        "5000", TOPIC_CONFIG)  # fmt: skip
    assert [s.source for s in configs["retention.ms"].synonyms] == [
        TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG]  # fmt: skip
    # The brokers follow the change notification: no restart.
    topic_configs = server.context(0).topic_configs
    wait_for(lambda: topic_configs.value("t", "retention.ms") == 5000, timeout=30)
    assert topic_configs.value("t", "cleanup.policy") == ("delete", "compact")
    # SUBTRACT, then DELETE: the default again.
    assert (
        incremental(
            client,
            TOPIC,
            "t",
            [("cleanup.policy", SUBTRACT, "delete"), ("retention.ms", DELETE, None)],
        )[0]
        == NONE
    )
    configs = _by_name(describe(client, TOPIC, "t"))
    assert configs["cleanup.policy"].value == "compact"
    assert configs["retention.ms"].config_source == STATIC_BROKER_CONFIG


@pytest.mark.parametrize(
    ("name", "resource_type", "configs", "expected"),
    [
        ("t", TOPIC, [("no.such", SET, "1")],
         (INVALID_CONFIG, "Unknown topic config name: no.such")),
        ("t", TOPIC, [("retention.ms", SET, "abc")],
         (INVALID_CONFIG,
          "Invalid value abc for configuration retention.ms: Not a number of type LONG")),
        ("t", TOPIC, [("segment.ms", SET, "5"), ("cleanup.policy", SET, "foo")],
         (INVALID_CONFIG, "Invalid value foo for configuration cleanup.policy: String must be "
                          "one of: compact, delete")),
        ("t", TOPIC, [("max.message.bytes", SET, "-5")],
         (INVALID_CONFIG, "Invalid value -5 for configuration max.message.bytes: Value must be "
                          "at least 0")),
        ("t", TOPIC, [("retention.ms", SUBTRACT, "1")],
         (INVALID_CONFIG, "Can't SUBTRACT to key retention.ms because its type is not LIST.")),
        ("t", TOPIC, [("retention.ms", SET, "1"), ("retention.ms", SET, "2")],
         (INVALID_REQUEST, "Error due to duplicate config keys")),
        ("nosuch", TOPIC, [("retention.ms", SET, "5")],
         (UNKNOWN_TOPIC_OR_PARTITION, "The topic 'nosuch' does not exist.")),
        ("0", BROKER, [("log.retention.hours", SET, "1")],
         (INVALID_REQUEST, "Cannot update these configs dynamically: [log.retention.hours]")),
    ],
)  # fmt: skip
def test_a_refused_change_writes_nothing(
    server: InProcessServer,
    raw_client: Connect,
    name: str,
    resource_type: int,
    configs: list[tuple[str, int, str | None]],
    expected: tuple[int, str],
) -> None:
    client = raw_client(server.address(0))
    before = _node(server, "/config/topics/t"), _node(server, "/config/brokers/0")
    assert incremental(client, resource_type, name, configs) == expected
    assert (_node(server, "/config/topics/t"), _node(server, "/config/brokers/0")) == before


def test_validate_only_and_alter_configs_replacing_every_override(
    server: InProcessServer, raw_client: Connect
) -> None:
    client = raw_client(server.address(0))
    assert incremental(client, TOPIC, "t", [("segment.ms", SET, "100000")], True) == (NONE, None)
    assert _node(server, "/config/topics/t") == b'{"version":1,"config":{}}'
    assert incremental(client, TOPIC, "t", [("segment.ms", SET, "100000")])[0] == NONE
    Resource = Alter.AlterConfigsResource  # type: ignore[attr-defined]
    request = Alter(
        resources=[
            Resource(
                resource_type=TOPIC,
                resource_name="t",
                configs=[Resource.AlterableConfig(name="retention.bytes", value="1000")],
            )
        ],
        validate_only=False,
    )
    assert client.call(request, 2).responses[0].error_code == NONE
    # AlterConfigs replaces the overrides: segment.ms is gone.
    assert _node(server, "/config/topics/t") == b'{"version":1,"config":{"retention.bytes":"1000"}}'


def test_broker_configs_dynamic_default_and_static(
    server: InProcessServer, raw_client: Connect
) -> None:
    client = raw_client(server.address(0))
    assert incremental(client, BROKER, "", [("log.retention.bytes", SET, "123")]) == (NONE, None)
    assert _node(server, "/config/brokers/<default>") == (
        b'{"version":1,"config":{"log.retention.bytes":"123"}}'
    )
    cluster = describe(client, BROKER, "")
    assert [(c.name, c.value, c.config_source) for c in cluster.configs] == [
        ("log.retention.bytes", "123", DYNAMIC_DEFAULT_BROKER_CONFIG)
    ]
    configs = _by_name(describe(client, BROKER, "0"))
    assert (configs["log.retention.bytes"].value, configs["log.retention.bytes"].config_source) == (
        "123",
        DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    assert (configs["log.retention.ms"].value, configs["log.retention.ms"].config_source) == (
        "-1",
        STATIC_BROKER_CONFIG,
    )
    assert configs["log.retention.hours"].read_only
    assert not configs["log.retention.ms"].read_only
    other = describe(client, BROKER, "7")
    assert (other.error_code, other.error_message) == (
        INVALID_REQUEST,
        "Unexpected broker id, expected 0 or empty string, but received 7",
    )


def test_max_message_bytes_is_applied_without_a_restart(
    server: InProcessServer, raw_client: Connect
) -> None:
    wait_for(lambda: server.context(0).leads(("t", 0)), timeout=30)
    client = raw_client(server.address(0))

    def produce(value_size: int) -> int:
        Request: Any = messages.ProduceRequest
        records = encode_batch(new_batch([(b"k", b"v".ljust(value_size, b"x"))], timestamp=1))
        request = Request(transactional_id=None, acks=1, timeout_ms=30_000, topic_data=[
            Request.TopicProduceData(name="t", partition_data=[
                Request.PartitionProduceData(index=0, records=records)])])  # fmt: skip
        return int(client.call(request, 9).responses[0].partition_responses[0].error_code)

    assert produce(2000) == NONE
    assert incremental(client, TOPIC, "t", [("max.message.bytes", SET, "1000")]) == (NONE, None)
    topic_configs = server.context(0).topic_configs
    wait_for(lambda: topic_configs.value("t", "max.message.bytes") == 1000, timeout=30)
    assert produce(2000) == MESSAGE_TOO_LARGE
    assert produce(100) == NONE


def test_cluster_wide_broker_configs_are_the_topics_defaults(
    server: InProcessServer, raw_client: Connect
) -> None:
    client = raw_client(server.address(0))
    changes = [("log.cleaner.min.cleanable.ratio", SET, "0.6"), ("log.retention.ms", SET, "7000")]
    assert incremental(client, BROKER, "", changes) == (NONE, None)
    configs = _by_name(describe(client, TOPIC, "t"))
    ratio = configs["min.cleanable.dirty.ratio"]
    assert (ratio.value, ratio.config_source) == ("0.6", DYNAMIC_DEFAULT_BROKER_CONFIG)
    # The cluster-wide log.retention.ms comes before the broker's --config one.
    assert [(s.name, s.value, s.source) for s in configs["retention.ms"].synonyms] == [
        ("log.retention.ms", "7000", DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.ms", "-1", STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", DEFAULT_CONFIG),
    ]
    # ... and the brokers apply them without a restart.
    topic_configs = server.context(0).topic_configs
    wait_for(lambda: topic_configs.value("t", "retention.ms") == 7000, timeout=30)
    assert topic_configs.value("t", "min.cleanable.dirty.ratio") == 0.6
    # A cluster-wide log.retention.hours (which only another writer can set: Kafka reads it at
    # the start) comes after the broker's log.retention.ms: Kafka's order of the names first,
    # whatever their sources.
    ConfigAdmin(server.context(0).broker.store).write(
        "brokers", "<default>",
        {"log.retention.hours": "1", "log.cleaner.min.cleanable.ratio": "0.7"})  # fmt: skip
    wait_for(lambda: topic_configs.value("t", "min.cleanable.dirty.ratio") == 0.7, timeout=30)
    assert topic_configs.value("t", "retention.ms") == -1
    retention = _by_name(describe(client, TOPIC, "t", ["retention.ms"]))["retention.ms"]
    assert (retention.value, retention.config_source) == ("-1", STATIC_BROKER_CONFIG)


def test_log_append_time_is_stamped_by_the_leader(
    server: InProcessServer, raw_client: Connect
) -> None:
    """``message.timestamp.type=LogAppendTime``: the leader stamps each batch it appends with
    the append time (the attributes' timestamp type, the max timestamp), answers it in the
    produce response, and consumers read it as every record's timestamp, as Kafka's."""
    wait_for(lambda: server.context(0).leads(("t", 0)), timeout=30)
    client = raw_client(server.address(0))
    assert (
        incremental(client, TOPIC, "t", [("message.timestamp.type", SET, "LogAppendTime")])[0]
        == NONE
    )
    topic_configs = server.context(0).topic_configs
    wait_for(lambda: topic_configs.value("t", "message.timestamp.type") == "LogAppendTime", 30)
    before = int(time.time() * 1000)
    Request: Any = messages.ProduceRequest
    records = encode_batch(new_batch([(b"k", b"v")], timestamp=1))
    request = Request(transactional_id=None, acks=1, timeout_ms=30_000, topic_data=[
        Request.TopicProduceData(name="t", partition_data=[
            Request.PartitionProduceData(index=0, records=records)])])  # fmt: skip
    answer = client.call(request, 9).responses[0].partition_responses[0]
    assert answer.error_code == NONE
    assert answer.log_append_time_ms >= before
    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "lat",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})  # fmt: skip
    try:
        consumer.assign([TopicPartition("t", 0, 0)])
        message = wait_for(lambda: consumer.poll(1.0), 30, "the record")
        assert message.error() is None
        assert message.timestamp() == (TIMESTAMP_LOG_APPEND_TIME, answer.log_append_time_ms)
    finally:
        consumer.close()


def test_a_name_that_cannot_be_a_topics_is_refused(
    server: InProcessServer, raw_client: Connect
) -> None:
    """Kafka's ``Topic.validate``: INVALID_TOPIC_EXCEPTION, and the connection stays open."""
    client = raw_client(server.address(0))
    assert describe(client, TOPIC, "a b").error_code == INVALID_TOPIC_EXCEPTION
    assert incremental(client, TOPIC, "", [("retention.ms", SET, "1")])[0] == (
        INVALID_TOPIC_EXCEPTION
    )
    assert describe(client, TOPIC, "t").error_code == NONE


def test_a_topics_compression_type_recompresses_what_the_producer_sent(
    server: InProcessServer, raw_client: Connect
) -> None:
    """``compression.type=gzip``: an uncompressed batch is kept gzip-compressed, its records and
    header fields as sent (Kafka's LogValidator); ``producer`` keeps the producer's codec."""
    wait_for(lambda: server.context(0).leads(("t", 0)), timeout=30)
    client = raw_client(server.address(0))
    assert incremental(client, TOPIC, "t", [("compression.type", SET, "gzip")])[0] == NONE
    topic_configs = server.context(0).topic_configs
    wait_for(lambda: topic_configs.value("t", "compression.type") == "gzip", 30)
    sent = new_batch([(b"k", b"v" * 100), (b"k2", None)], timestamp=5)
    Request: Any = messages.ProduceRequest
    request = Request(transactional_id=None, acks=1, timeout_ms=30_000, topic_data=[
        Request.TopicProduceData(name="t", partition_data=[
            Request.PartitionProduceData(index=0, records=encode_batch(sent))])])  # fmt: skip
    assert client.call(request, 9).responses[0].partition_responses[0].error_code == NONE
    ctx = server.context(0)
    kept = decode_batch(server.on_loop(lambda: ctx.logs.get(("t", 0)).read(0, 1 << 20)))
    assert kept.compression == "gzip"
    assert kept.records == sent.records
    assert (kept.base_timestamp, kept.max_timestamp) == (sent.base_timestamp, sent.max_timestamp)


def test_broker_loggers_are_described_and_their_levels_set(
    server: InProcessServer, raw_client: Connect
) -> None:
    """BROKER_LOGGER: the process's loggers with log4j's level names; SET and DELETE change a
    level at once; Kafka's refusals."""
    client = raw_client(server.address(0))
    name = "coordkit.serve"
    logging.getLogger(name).setLevel(logging.NOTSET)
    before = _by_name(describe(client, BROKER_LOGGER, "0", [name, "root", "no.such"]))
    assert sorted(before) == [name, "root"]
    assert before[name].config_source == 6
    assert incremental(client, BROKER_LOGGER, "0", [(name, SET, "TRACE")]) == (NONE, None)
    assert logging.getLogger(name).level == 5
    assert describe(client, BROKER_LOGGER, "0", [name]).configs[0].value == "TRACE"
    assert incremental(client, BROKER_LOGGER, "0", [(name, DELETE, None)]) == (NONE, None)
    assert logging.getLogger(name).level == logging.NOTSET
    for configs, expected in [
        ([(name, SET, "LOUD")], (INVALID_CONFIG, f"Cannot set the log level of {name} to LOUD as "
          "it is not a supported log level. Valid log levels are DEBUG, ERROR, FATAL, INFO, "
          "TRACE, WARN")),
        ([("no.such.Logger", SET, "DEBUG")], (INVALID_CONFIG,
                                              "Logger no.such.Logger does not exist!")),
        ([("root", DELETE, None)], (INVALID_REQUEST,
                                    "Removing the log level of the root logger is not allowed")),
        ([(name, APPEND, "DEBUG")], (INVALID_REQUEST,
                                     "APPEND operation is not allowed for the BROKER_LOGGER "
                                     "resource")),
    ]:  # fmt: skip
        assert incremental(client, BROKER_LOGGER, "0", configs) == expected
    assert incremental(client, BROKER_LOGGER, "7", [(name, SET, "DEBUG")]) == (
        INVALID_REQUEST, "Unexpected node id. Expected 0, but received 7")  # fmt: skip
    refused = describe(client, BROKER_LOGGER, "")
    assert (refused.error_code, refused.error_message) == (
        INVALID_REQUEST, "Broker id must not be empty")  # fmt: skip

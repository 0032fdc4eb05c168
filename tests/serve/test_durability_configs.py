"""Durability configs of ``coordkit serve`` (#34 item 3): ``min.insync.replicas`` per broker and
per topic, enforced on acks=all produces as Kafka's leader enforces it, topic configs followed
through ``/config/changes`` without a restart, and a topic's ``unclean.leader.election.enable``
reaching the controller — on every backend (``--backend``).

The differential (``tests/differential/scenarios/durability.py``) compares what a healthy
Kafka 4.4 cluster answers; the refusals below need a follower to fall out of the ISR, which
these tests cause by pausing a follower's fetching (``replica.lag.time.max.ms`` of one second).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic
from kafka.errors import NotEnoughReplicasError

from coordkit.engine import EngineConfig
from coordkit.kafka import layout
from coordkit.protocol import messages
from coordkit.serve.broker_config import CONFIGS, parse_broker_configs
from coordkit.serve.topic_configs import (
    MIN_INSYNC_REPLICAS,
    RETENTION_MS,
    SEGMENT_MS,
    TOPIC_CONFIGS,
    TopicConfigError,
    TopicConfigs,
    broker_defaults,
    changed_topic,
)
from coordkit.testing.waiting import wait_for
from harness.backends import Backend
from serve.inprocess import InProcessFactory, InProcessServer, in_process_fixture  # noqa: F401
from serve.test_replication import _latest, _produce, _replica_bytes, _state

NOT_ENOUGH_REPLICAS = 19
NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
INVALID_CONFIG = 40
#: A follower that stops fetching leaves the ISR after a second.
LAG = EngineConfig(replica_lag_time_max=1.0)


def _settings(*words: str) -> Any:
    return parse_broker_configs(words).serve_settings()


def _topic(server: InProcessServer, name: str, config: dict[str, str] | None = None) -> None:
    """``name``: one partition led by broker 0, followed by broker 1."""
    server.server.cluster.create_topic(name, 1, 2, config=config, assignment={0: [0, 1]})
    wait_for(lambda: _state(server, (name, 0)) is not None, 30, f"{name}'s leader")
    assert _state(server, (name, 0)).leader == 0


def _shrink(server: InProcessServer, *names: str) -> None:
    """Broker 1 stops fetching; once its lag time is over, broker 0 drops it from the ISRs."""
    server.replicas.pause(1)
    for name in names:
        wait_for(lambda n=name: _state(server, (n, 0)).isr == (0,), 30,  # type: ignore[misc]
                 f"{name}'s ISR to shrink to the leader")  # fmt: skip


# -- the catalogue ------------------------------------------------------------------------------


def test_topic_configs_have_kafkas_types_and_defaults() -> None:
    expected = {
        "retention.ms": ("long", 604_800_000),
        "retention.bytes": ("long", -1),
        "segment.bytes": ("int", 1_073_741_824),
        "segment.ms": ("long", 604_800_000),
        "flush.messages": ("long", 2**63 - 1),
        "flush.ms": ("long", 2**63 - 1),
        "min.insync.replicas": ("int", 1),
        "unclean.leader.election.enable": ("boolean", False),
        "cleanup.policy": ("list", ("delete",)),
        "message.timestamp.type": ("string", "CreateTime"),
        "delete.retention.ms": ("long", 86_400_000),
        "min.cleanable.dirty.ratio": ("double", 0.5),
        "min.compaction.lag.ms": ("long", 0),
        "max.compaction.lag.ms": ("long", 2**63 - 1),
        "max.message.bytes": ("int", 1_048_588),
        "compression.type": ("string", "producer"),
    }
    assert {name: (key.type, key.default) for name, key in TOPIC_CONFIGS.items()} == expected
    assert TOPIC_CONFIGS["cleanup.policy"].parse(" compact, delete ") == ("compact", "delete")
    assert TOPIC_CONFIGS["unclean.leader.election.enable"].parse("TRUE") is True
    for name, text, why in [
        ("min.insync.replicas", "0", "below the minimum of 1"),
        ("min.insync.replicas", "two", "not an integer"),
        ("segment.bytes", str(2**31), "out of range for a int"),
        ("cleanup.policy", "delete,forever", "'forever' is not one of compact, delete"),
        ("message.timestamp.type", "Now", "is not one of CreateTime, LogAppendTime"),
        ("unclean.leader.election.enable", "yes", "not a boolean"),
        ("min.cleanable.dirty.ratio", "1.5", "1.5 is not between 0 and 1"),
        ("min.cleanable.dirty.ratio", "half", "not a number"),
    ]:
        with pytest.raises(TopicConfigError, match=why):
            TOPIC_CONFIGS[name].parse(text)


def test_broker_configs_give_the_topic_defaults_in_kafkas_precedence() -> None:
    # As Kafka's ServerTopicConfigSynonyms: .ms before .minutes before .hours, converted.
    assert broker_defaults({"log.retention.hours": 2}) == {RETENTION_MS: 7_200_000}
    assert broker_defaults({"log.retention.hours": 2, "log.retention.minutes": 3}) == {
        RETENTION_MS: 180_000
    }
    assert broker_defaults({"log.retention.ms": 5, "log.retention.hours": 2}) == {RETENTION_MS: 5}
    assert broker_defaults({"log.roll.hours": 1}) == {SEGMENT_MS: 3_600_000}
    assert broker_defaults({"min.insync.replicas": 2, "num.partitions": 3}) == {
        MIN_INSYNC_REPLICAS: 2
    }
    settings = _settings("min.insync.replicas=2", "unclean.leader.election.enable=true")
    assert settings.topic_defaults == {
        MIN_INSYNC_REPLICAS: 2,
        "unclean.leader.election.enable": True,
    }


def test_the_broker_registry_and_the_topic_registry_agree_on_defaults() -> None:
    """A broker config that gives a topic config its default has the same default (converted),
    or none (Kafka's log.retention.ms: unset, so log.retention.hours applies)."""
    for key in TOPIC_CONFIGS.values():
        for synonym in key.synonyms:
            broker = CONFIGS.get(synonym.name)
            if broker is not None and broker.default is not None:
                assert broker.default * synonym.factor == key.default, (key.name, synonym.name)
                break


def test_min_insync_replicas_is_a_broker_config() -> None:
    key = CONFIGS["min.insync.replicas"]
    assert (key.type, key.default, key.at_least) == ("int", 1, 1)
    with pytest.raises(ValueError, match=r"min\.insync\.replicas=0: 0 is below the minimum of 1"):
        parse_broker_configs(["min.insync.replicas=0"])


def test_change_notifications_as_kafka_writes_them() -> None:
    assert changed_topic(layout.encode_config_change("topics/orders")) == "orders"
    assert changed_topic(b'{"version":1,"entity_type":"topics","entity_name":"t"}') == "t"
    assert changed_topic(b'{"version":2,"entity_path":"clients/app"}') is None
    with pytest.raises(ValueError, match="unsupported version 3"):
        changed_topic(b'{"version":3,"entity_path":"topics/t"}')


# -- topic configs from the store ---------------------------------------------------------------


def test_topic_configs_are_read_and_followed(
    in_process: InProcessFactory, backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    server = in_process(brokers=2, settings=_settings("min.insync.replicas=2"))
    cluster = server.server.cluster
    cluster.create_topic("kept", 1, 1, config={MIN_INSYNC_REPLICAS: "1", RETENTION_MS: "1000"})
    configs = TopicConfigs(backend.open(server.store_url), {MIN_INSYNC_REPLICAS: 2})
    configs.start()
    try:
        # Read at the start: the overrides, typed, over the broker's defaults.
        assert configs.known("kept")
        assert configs.value("kept", MIN_INSYNC_REPLICAS) == 1
        assert configs.value("kept", RETENTION_MS) == 1000
        assert configs.value("kept", SEGMENT_MS) == 604_800_000
        # Created later: read at its first lookup.
        cluster.create_topic("later", 1, 1)
        assert not configs.known("later")
        assert configs.value("later", MIN_INSYNC_REPLICAS) == 2
        # Changed (kafka-configs --alter): followed through /config/changes.
        cluster.admin.set_config("later", {MIN_INSYNC_REPLICAS: "3"})
        wait_for(lambda: configs.value("later", MIN_INSYNC_REPLICAS) == 3, 30, "the change")
        cluster.admin.set_config("kept", {})
        wait_for(lambda: configs.value("kept", RETENTION_MS) == 604_800_000, 30, "the removal")
        # Values that do not parse are not trusted: logged once, the default applies (by
        # this object and by the server's own, which follows the store too).
        caplog.set_level(logging.WARNING, logger="coordkit.serve")
        cluster.admin.set_config("kept", {MIN_INSYNC_REPLICAS: "none", "preallocate": "true"})
        wait_for(lambda: len(caplog.records) == 4, 30, "the bad values logged")
        assert configs.value("kept", MIN_INSYNC_REPLICAS) == 2
        configs.read("kept")
        assert configs.value("kept", MIN_INSYNC_REPLICAS) == 2
        assert sorted({r.getMessage() for r in caplog.records}) == [
            "topic 'kept': config min.insync.replicas='none': 'none' is not an integer (int); "
            "the default applies",
            "topic 'kept': config preallocate='true': not a topic config coordkit serve honours",
        ]
        assert len(caplog.records) == 4
        with pytest.raises(KeyError, match="not a topic config"):
            configs.value("kept", "retention.hours")
    finally:
        configs.stop()


def test_create_topics_writes_the_configs_it_is_given(in_process: InProcessFactory) -> None:
    """kafka-python's CreateTopics with configs: the topic config node holds them, as Kafka's
    ZooKeeper-mode brokers write it, and the brokers read them."""
    server = in_process(brokers=3)
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    try:
        admin.create_topics([NewTopic("strict", 1, 3, topic_configs={MIN_INSYNC_REPLICAS: "2"})])
    finally:
        admin.close()
    store = server.server.cluster.admin_store
    data, _ = store.get(layout.topic_config_path("strict"))
    assert layout.TOPIC_CONFIG.decode(data, layout.topic_config_path("strict")).config == {
        MIN_INSYNC_REPLICAS: "2"
    }
    configs = server.server.topic_configs
    assert configs is not None
    assert configs.value("strict", MIN_INSYNC_REPLICAS) == 2


def test_create_topics_refuses_a_bad_value_of_a_config_it_honours(
    in_process: InProcessFactory, raw_client: Any
) -> None:
    server = in_process(brokers=1)
    client = raw_client(server.address(0))
    Create = messages.CreateTopicsRequest
    topics = [
        Create.CreatableTopic(name=name, num_partitions=1, replication_factor=1,
                              configs=[Create.CreatableTopicConfig(name=key, value=value)])
        for name, key, value in [("zero", MIN_INSYNC_REPLICAS, "0"),
                                 ("kafkas", "preallocate", "true"),
                                 ("unknown", "no.such.config", "1")]
    ]  # fmt: skip
    results = client.call(Create(topics=topics, timeout_ms=10_000), 7).topics
    # preallocate is one of Kafka's configs coordkit does not act on: kept as given.
    assert [(r.name, r.error_code) for r in results] == [
        ("zero", INVALID_CONFIG), ("kafkas", 0), ("unknown", INVALID_CONFIG)]  # fmt: skip
    assert [r.error_message for r in results] == [
        "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1",
        "",
        "Unknown topic config name: no.such.config",
    ]
    # v5+ answers the new topic's configs, its own among them.
    configs = {c.name: (c.value, c.config_source) for c in results[1].configs}
    assert len(configs) == 37
    assert configs["preallocate"] == ("true", 1)
    assert configs["cleanup.policy"] == ("delete", 5)
    store = server.server.cluster.admin_store
    assert store.exists(layout.topic_path("zero")) is None
    assert store.exists(layout.topic_config_path("zero")) is None


# -- min.insync.replicas on produce ----------------------------------------------------------


def test_acks_all_is_refused_below_the_brokers_min_insync_replicas(
    in_process: InProcessFactory, raw_client: Any
) -> None:
    server = in_process(brokers=2, config=LAG, settings=_settings("min.insync.replicas=2"))
    _topic(server, "orders")
    tp = ("orders", 0)
    client = raw_client(server.address(0))
    assert _produce(client, tp, b"both in sync").error_code == 0
    _shrink(server, "orders")
    refused = _produce(client, tp, b"refused")
    assert (refused.error_code, refused.base_offset, refused.log_start_offset) == (
        NOT_ENOUGH_REPLICAS, -1, 0
    )  # fmt: skip
    assert _replica_bytes(server, tp, 0)[0] == 1  # nothing appended
    # acks=1 is not refused, but the high watermark stays under min.insync.replicas (Kafka
    # 3.7+): consumers do not see the record until the ISR is back.
    taken = _produce(client, tp, b"leader only", acks=1)
    assert (taken.error_code, taken.base_offset) == (0, 1)
    assert _latest(client, tp) == 1
    server.replicas.resume(1)
    wait_for(lambda: _state(server, tp).isr == (0, 1), 30, "the follower back in the ISR")
    wait_for(lambda: _latest(client, tp) == 2, 30, "the high watermark to move on")
    assert _produce(client, tp, b"in sync again").error_code == 0


def test_a_topic_override_beats_the_broker_default(
    in_process: InProcessFactory, raw_client: Any
) -> None:
    server = in_process(brokers=2, config=LAG, settings=_settings("min.insync.replicas=2"))
    _topic(server, "relaxed", {MIN_INSYNC_REPLICAS: "1"})
    _topic(server, "default")
    _topic(server, "over-replicas", {MIN_INSYNC_REPLICAS: "5"})
    client = raw_client(server.address(0))
    # min.insync.replicas above the replica count is capped at it (Kafka's effectiveMinIsr).
    assert _produce(client, ("over-replicas", 0), b"two of two").error_code == 0
    _shrink(server, "relaxed", "default", "over-replicas")
    assert _produce(client, ("relaxed", 0), b"one is enough").error_code == 0
    assert _produce(client, ("default", 0), b"needs two").error_code == NOT_ENOUGH_REPLICAS
    assert _produce(client, ("over-replicas", 0), b"one").error_code == NOT_ENOUGH_REPLICAS


def test_a_config_change_takes_effect_without_a_restart(
    in_process: InProcessFactory, raw_client: Any
) -> None:
    server = in_process(brokers=2, config=LAG)
    _topic(server, "changing")
    tp = ("changing", 0)
    client = raw_client(server.address(0))
    _shrink(server, "changing")
    assert _produce(client, tp, b"one is enough").error_code == 0
    configs = server.server.topic_configs
    assert configs is not None
    server.server.cluster.admin.set_config("changing", {MIN_INSYNC_REPLICAS: "2"})
    wait_for(lambda: configs.value("changing", MIN_INSYNC_REPLICAS) == 2, 30, "the change read")
    assert _produce(client, tp, b"needs two now").error_code == NOT_ENOUGH_REPLICAS
    assert _produce(client, tp, b"acks=1 is not refused", acks=1).error_code == 0
    server.server.cluster.admin.set_config("changing", {})
    wait_for(lambda: configs.value("changing", MIN_INSYNC_REPLICAS) == 1, 30, "the removal")
    assert _produce(client, tp, b"one is enough again").error_code == 0


def test_not_enough_replicas_after_append_when_the_isr_shrank_past_the_records(
    in_process: InProcessFactory, raw_client: Any
) -> None:
    """Kafka's ``checkEnoughReplicasReachOffset``: a produce whose records the high watermark
    passed, checked once the ISR is below the minimum (a shrink between the two), is answered
    NOT_ENOUGH_REPLICAS_AFTER_APPEND; the records stay."""
    server = in_process(brokers=2, config=LAG, settings=_settings("min.insync.replicas=2"))
    _topic(server, "after")
    tp = ("after", 0)
    assert _produce(raw_client(server.address(0)), tp, b"committed").error_code == 0
    _shrink(server, "after")
    loop = server.server._loop
    assert loop is not None
    waited = server.replicas.wait_committed(server.context(0), tp, 1, 10.0)
    assert asyncio.run_coroutine_threadsafe(waited, loop).result(30) == (
        NOT_ENOUGH_REPLICAS_AFTER_APPEND
    )
    assert _state(server, tp).hw == 1


def test_kafka_python_gets_not_enough_replicas(in_process: InProcessFactory) -> None:
    server = in_process(brokers=2, config=LAG, settings=_settings("min.insync.replicas=2"))
    _topic(server, "clients")
    _shrink(server, "clients")
    producer = KafkaProducer(bootstrap_servers=server.bootstrap, acks="all", retries=0,
                             enable_idempotence=False)  # fmt: skip
    try:
        with pytest.raises(NotEnoughReplicasError):
            producer.send("clients", b"refused").get(timeout=30)
        relaxed = KafkaProducer(bootstrap_servers=server.bootstrap, acks=1)
        try:
            assert relaxed.send("clients", b"acks=1").get(timeout=30).offset == 0
        finally:
            relaxed.close()
    finally:
        producer.close()


# -- unclean.leader.election.enable per topic ----------------------------------------------


def test_a_topics_unclean_election_override_reaches_the_controller(
    in_process: InProcessFactory,
) -> None:
    """Broker 0 leads both topics alone in their ISRs and crashes: the topic whose config
    enables unclean election gets broker 1, outside its ISR, as leader; the other stays
    offline (the broker default, false)."""
    server = in_process(brokers=3, config=LAG)
    _topic(server, "unclean", {"unclean.leader.election.enable": "true"})
    _topic(server, "clean")
    _shrink(server, "unclean", "clean")
    server.server.stop_broker(0)
    model = server.server.cluster.replication

    def leader(topic: str) -> int | None:
        state = model.log((topic, 0))
        return None if state is None else state.leader

    wait_for(lambda: leader("unclean") == 1, 30, "the unclean election")
    assert _state(server, ("unclean", 0)).isr == (1,)
    wait_for(lambda: leader("clean") == -1, 30, "the clean topic offline")
    assert model.log(("clean", 0)).isr == (0,)  # type: ignore[union-attr]

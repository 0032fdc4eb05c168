"""Kafka's znode JSON, checked against the examples in seeds 000, 001 and 003."""

from __future__ import annotations

import json

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordkit.engine import states
from coordkit.errors import LayoutError
from coordkit.kafka import layout
from coordkit.kafka.model import (
    BrokerInfo,
    ConsumerOffset,
    ConsumerOwner,
    ConsumerRegistration,
    ControllerEpoch,
    ControllerInfo,
    DeleteTopicMarker,
    PartitionState,
    TopicAssignment,
    TopicConfig,
)

# The seeds' example values, as Kafka wrote them (seed 000 and 003 show real znode contents).
SEED_PARTITION_STATE = (
    b'{"controller_epoch":61,"leader":0,"version":1,"leader_epoch":0,"isr":[0,2,1]}'
)
SEED_CONTROLLER = b'{"version": 1,"brokerid": 0,"timestamp": "1533452008692"}'
SEED_BROKER = b"""{
    "jmx_port": 6061,
    "timestamp":"1403061899859",
    "version": 1,
    "host": "192.168.1.148",
    "port": 9092
}"""
SEED_TOPIC = b'{"version": 1, "partitions": {"0": [1, 2], "1": [2, 1], "2": [1, 2]}}'
SEED_CONSUMER = b"""{"version": 1, "subscription": {"open_platform_opt_push_plus1": 5},
  "pattern": "static", "timestamp": "1411294187842"}"""
SEED_CONSUMER_WHITELIST = (
    b'{"version":1,"subscription":{"replicatedtopic":1},'
    b'"pattern":"white_list","timestamp":"1452134230082"}'
)


def test_partition_state_round_trips_byte_for_byte() -> None:
    state = layout.PARTITION_STATE.decode(
        SEED_PARTITION_STATE, "/brokers/topics/t/partitions/0/state"
    )
    assert state == PartitionState(leader=0, leader_epoch=0, isr=(0, 2, 1), controller_epoch=61)
    assert layout.PARTITION_STATE.encode(state) == SEED_PARTITION_STATE


def test_controller_decodes_seed_and_encodes_compact_in_kafka_order() -> None:
    info = layout.CONTROLLER_INFO.decode(SEED_CONTROLLER, "/controller")
    assert info == ControllerInfo(broker_id=0, timestamp="1533452008692", version=1)
    assert (
        layout.CONTROLLER_INFO.encode(info)
        == b'{"version":1,"brokerid":0,"timestamp":"1533452008692"}'
    )


def test_controller_is_written_as_kafka_3_9_writes_it() -> None:
    # Kafka 3.9's /controller (KIP-866: -1 is a ZooKeeper-mode controller's KRaft epoch).
    kafka = b'{"version":2,"brokerid":1,"timestamp":"1795930280345","kraftControllerEpoch":-1}'
    info = layout.CONTROLLER_INFO.decode(kafka, "/controller")
    assert info == ControllerInfo(broker_id=1, timestamp="1795930280345")
    assert layout.CONTROLLER_INFO.encode(info) == kafka


def test_broker_registration_round_trip_keeps_seed_fields() -> None:
    info = layout.BROKER.decode(SEED_BROKER, "/brokers/ids/0")
    assert info == BrokerInfo(
        host="192.168.1.148", port=9092, timestamp="1403061899859", jmx_port=6061
    )
    encoded = layout.BROKER.encode(info)
    assert json.loads(encoded) == json.loads(SEED_BROKER)
    assert list(json.loads(encoded)) == ["jmx_port", "timestamp", "host", "version", "port"]
    assert isinstance(json.loads(encoded)["timestamp"], str)


def test_broker_registration_version_5_as_kafka_3_9_writes_it() -> None:
    kafka = {
        "features": {},
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
        "endpoints": ["PLAINTEXT://127.0.0.1:52375"],
        "rack": "a",
        "jmx_port": -1,
        "port": 52375,
        "host": "127.0.0.1",
        "version": 5,
        "timestamp": "1795930218451",
    }
    info = layout.BROKER.decode(json.dumps(kafka).encode(), "/brokers/ids/1")
    assert info == BrokerInfo(
        host="127.0.0.1",
        port=52375,
        timestamp="1795930218451",
        rack="a",
        version=5,
        endpoints=("PLAINTEXT://127.0.0.1:52375",),
    )
    assert json.loads(layout.BROKER.encode(info)) == kafka


def test_broker_with_rack_and_endpoints() -> None:
    info = BrokerInfo(
        host="h", port=9092, timestamp="1", rack="r1", endpoints=("PLAINTEXT://h:9092",), version=4
    )
    decoded = layout.BROKER.decode(layout.BROKER.encode(info), "/brokers/ids/3")
    assert decoded == info


def test_topic_assignment_uses_string_partition_keys() -> None:
    topic = layout.TOPIC.decode(SEED_TOPIC, "/brokers/topics/t")
    assert topic.partitions == {0: (1, 2), 1: (2, 1), 2: (1, 2)}
    assert topic.partition_count == 3
    assert topic.replication_factor == 2
    encoded = json.loads(layout.TOPIC.encode(topic))
    assert encoded == {"version": 1, "partitions": {"0": [1, 2], "1": [2, 1], "2": [1, 2]}}


def test_config_node_keys_in_kafka_3_9_order() -> None:
    # Kafka 3.9's bytes for these topic configs, set in this order by an IncrementalAlterConfigs
    # (recorded from tests/apache_kafka/test_configs_layout.py's broker): by the hash bucket of a
    # Properties, retention.ms, segment.ms and segment.bytes sharing one in the order set.
    config = {"retention.ms": "6000", "segment.ms": "70000", "cleanup.policy": "compact",
              "min.insync.replicas": "1", "max.message.bytes": "100000",
              "segment.bytes": "1048576", "delete.retention.ms": "1000"}  # fmt: skip
    kafka = (
        b'{"version":1,"config":{"cleanup.policy":"compact","max.message.bytes":"100000",'
        b'"min.insync.replicas":"1","retention.ms":"6000","segment.ms":"70000",'
        b'"segment.bytes":"1048576","delete.retention.ms":"1000"}}'
    )
    assert layout.TOPIC_CONFIG.encode(TopicConfig(config=config)) == kafka
    decoded = layout.TOPIC_CONFIG.decode(kafka, "/config/topics/t")
    assert decoded == TopicConfig(config=config)
    assert layout.TOPIC_CONFIG.encode(decoded) == kafka


def test_consumer_registration_round_trip() -> None:
    for raw in (SEED_CONSUMER, SEED_CONSUMER_WHITELIST):
        registration = layout.CONSUMER_REGISTRATION.decode(raw, "/consumers/g/ids/c")
        assert json.loads(layout.CONSUMER_REGISTRATION.encode(registration)) == json.loads(raw)
    reg = layout.CONSUMER_REGISTRATION.decode(SEED_CONSUMER, "/consumers/g/ids/c")
    assert reg == ConsumerRegistration(
        subscription={"open_platform_opt_push_plus1": 5}, timestamp="1411294187842"
    )


def test_plain_value_nodes() -> None:
    assert layout.CONTROLLER_EPOCH_VALUE.encode(ControllerEpoch(7)) == b"7"
    assert layout.CONTROLLER_EPOCH_VALUE.decode(b"7", "/controller_epoch") == ControllerEpoch(7)
    assert layout.CONSUMER_OFFSET.encode(ConsumerOffset(1234)) == b"1234"
    assert layout.CONSUMER_OFFSET.decode(b"1234", "/consumers/g/offsets/t/0").offset == 1234
    owner = ConsumerOwner("g_host-1452134230082-1a2b3c4d-0")
    assert (
        layout.CONSUMER_OWNER.decode(layout.CONSUMER_OWNER.encode(owner), "/consumers/g/owners/t/0")
        == owner
    )
    assert layout.DELETE_TOPIC.encode(DeleteTopicMarker()) == b""
    config = TopicConfig({"cleanup.policy": "compact", "retention.ms": "1000"})
    assert json.loads(layout.TOPIC_CONFIG.encode(config)) == {
        "version": 1,
        "config": {"cleanup.policy": "compact", "retention.ms": "1000"},
    }
    assert (
        layout.TOPIC_CONFIG.decode(layout.TOPIC_CONFIG.encode(config), "/config/topics/t") == config
    )


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (b'{"leader":0,"version":1,"leader_epoch":0,"isr":[0]}', "controller_epoch"),
        (b'{"controller_epoch":1,"leader":"0","version":1,"leader_epoch":0,"isr":[0]}', "leader"),
        (b'{"controller_epoch":1,"leader":0,"version":1,"leader_epoch":0,"isr":[0,"x"]}', "isr"),
        (
            b'{"controller_epoch":1,"leader":0,"version":1,"leader_epoch":-3,"isr":[0]}',
            "leader_epoch",
        ),
        (b'{"controller_epoch":1,"leader":0,"version":1,"leader_epoch":0,"isr":[1,1]}', "isr"),
    ],
)
def test_malformed_partition_state_names_path_and_field(raw: bytes, field: str) -> None:
    path = "/brokers/topics/orders/partitions/3/state"
    with pytest.raises(LayoutError) as info:
        layout.PARTITION_STATE.decode(raw, path)
    assert info.value.path == path
    assert info.value.field == field
    assert path in str(info.value)
    assert field in str(info.value)


@pytest.mark.parametrize(
    ("codec", "raw", "path", "field"),
    [
        (layout.BROKER, b'{"host":"h","version":1,"timestamp":"1"}', "/brokers/ids/1", "port"),
        (
            layout.BROKER,
            b'{"host":"h","port":9092,"version":1,"timestamp":"yesterday"}',
            "/brokers/ids/1",
            "timestamp",
        ),
        (
            layout.TOPIC,
            b'{"version":1,"partitions":{"zero":[1]}}',
            "/brokers/topics/t",
            "partitions",
        ),
        (layout.TOPIC, b'{"version":1}', "/brokers/topics/t", "partitions"),
        (layout.CONTROLLER_INFO, b'{"version":1,"timestamp":"1"}', "/controller", "brokerid"),
        (
            layout.CONSUMER_REGISTRATION,
            b'{"version":1,"subscription":{"t":"5"},"pattern":"static","timestamp":"1"}',
            "/consumers/g/ids/c",
            "subscription",
        ),
        (
            layout.TOPIC_CONFIG,
            b'{"version":1,"config":{"retention.ms":1000}}',
            "/config/topics/t",
            "config",
        ),
    ],
)
def test_missing_or_wrong_fields_are_named(
    codec: layout.Codec[object], raw: bytes, path: str, field: str
) -> None:
    with pytest.raises(LayoutError) as info:
        codec.decode(raw, path)
    assert (info.value.path, info.value.field) == (path, field)


@pytest.mark.parametrize("raw", [b"{not json", b"[1,2]", b"\xff\xfe", b""])
def test_invalid_json_names_the_path(raw: bytes) -> None:
    with pytest.raises(LayoutError) as info:
        layout.PARTITION_STATE.decode(raw, "/brokers/topics/t/partitions/0/state")
    assert info.value.path == "/brokers/topics/t/partitions/0/state"


def test_topic_partitions_must_be_contiguous() -> None:
    with pytest.raises(LayoutError) as info:
        layout.TOPIC.decode(b'{"version":1,"partitions":{"0":[1],"2":[1]}}', "/brokers/topics/t")
    assert "partitions" in str(info.value)


def test_controller_epoch_must_be_an_integer() -> None:
    with pytest.raises(LayoutError):
        layout.CONTROLLER_EPOCH_VALUE.decode(b"seven", "/controller_epoch")


def test_paths_follow_kafkas_layout() -> None:
    assert layout.broker_path(3) == "/brokers/ids/3"
    assert layout.topic_path("orders") == "/brokers/topics/orders"
    assert layout.partition_state_path("orders", 2) == "/brokers/topics/orders/partitions/2/state"
    assert layout.delete_topic_path("orders") == "/admin/delete_topics/orders"
    assert layout.topic_config_path("orders") == "/config/topics/orders"
    assert layout.consumer_registration_path("g", "g_c1") == "/consumers/g/ids/g_c1"
    assert layout.consumer_owner_path("g", "orders", 4) == "/consumers/g/owners/orders/4"
    assert layout.consumer_offset_path("g", "orders", 4) == "/consumers/g/offsets/orders/4"


@pytest.mark.parametrize("topic", ["", "a/b", "..", "spaces here", "x" * 250])
def test_invalid_topic_names_are_rejected(topic: str) -> None:
    with pytest.raises(LayoutError) as info:
        layout.topic_path(topic)
    assert info.value.field == "topic"


def test_codec_for_knows_every_kafka_node() -> None:
    cases = {
        "/brokers/ids/0": layout.BROKER,
        "/brokers/topics/t": layout.TOPIC,
        "/brokers/topics/t/partitions/0/state": layout.PARTITION_STATE,
        "/controller": layout.CONTROLLER_INFO,
        "/controller_epoch": layout.CONTROLLER_EPOCH_VALUE,
        "/admin/delete_topics/t": layout.DELETE_TOPIC,
        "/config/topics/t": layout.TOPIC_CONFIG,
        "/consumers/g/ids/c": layout.CONSUMER_REGISTRATION,
        "/consumers/g/owners/t/0": layout.CONSUMER_OWNER,
        "/consumers/g/offsets/t/0": layout.CONSUMER_OFFSET,
    }
    for path, codec in cases.items():
        assert layout.codec_for(path) is codec, path
    assert layout.codec_for("/brokers/topics/t/partitions") is None
    with pytest.raises(LayoutError):
        layout.decode_znode("/elsewhere", b"")


def test_value_objects_are_frozen_and_evolve() -> None:
    state = PartitionState(leader=1, leader_epoch=0, isr=(1, 2), controller_epoch=3)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        state.leader = 2  # type: ignore[misc]
    moved = attrs.evolve(state, leader=2, leader_epoch=1)
    assert (moved.leader, moved.leader_epoch, moved.isr) == (2, 1, (1, 2))
    with pytest.raises(ValueError, match="isr"):
        attrs.evolve(state, isr=(1, 1))


def test_topic_assignment_rejects_bad_replicas() -> None:
    with pytest.raises(ValueError, match=r"partitions\[0\]"):
        TopicAssignment({0: (1, 1)})
    with pytest.raises(ValueError, match="no replicas"):
        TopicAssignment({0: ()})


@given(
    st.integers(0, 2**31 - 1),
    st.lists(
        st.tuples(
            st.integers(-1, 50),
            st.integers(0, 2**31 - 1),
            st.lists(st.integers(0, 50), min_size=1, max_size=5, unique=True).map(tuple),
        ),
        max_size=40,
    ),
)
def test_the_controllers_state_encoder_writes_exactly_the_layouts_bytes(
    controller_epoch: int, rows: list[tuple[int, int, tuple[int, ...]]]
) -> None:
    encoder = states.StateEncoder(controller_epoch, limit=3)  # starts over within an example
    for leader, leader_epoch, isr in rows:
        expected = layout.PARTITION_STATE.encode(
            PartitionState(
                leader=leader, leader_epoch=leader_epoch, isr=isr, controller_epoch=controller_epoch
            )
        )
        assert encoder(leader, leader_epoch, isr) == expected
        assert states.encode_state(leader, leader_epoch, isr, controller_epoch) == expected

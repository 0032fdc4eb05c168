"""The engine writes Kafka's layout: every node read back and held to the seeds' schemas."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from coordkit.engine import states
from coordkit.kafka import layout
from coordkit.kafka.model import PartitionState
from coordkit.store import MetadataStore

# Field sets of seeds 001/003 and, where Kafka 3.9 writes more, of Kafka 3.9 (exact: no more, no
# fewer): broker registrations of version 5, /controller of version 2.
BROKER_FIELDS = {
    "jmx_port",
    "timestamp",
    "host",
    "version",
    "port",
    "endpoints",
    "listener_security_protocol_map",
    "features",
}
STATE_FIELDS = {"controller_epoch", "leader", "version", "leader_epoch", "isr"}
CONTROLLER_FIELDS = {"version", "brokerid", "timestamp", "kraftControllerEpoch"}
TOPIC_FIELDS = {"version", "partitions", "adding_replicas", "removing_replicas", "topic_id"}
CONFIG_FIELDS = {"version", "config"}


def _json(store: MetadataStore, path: str) -> tuple[dict[str, Any], bytes]:
    data, _ = store.get(path)
    value = json.loads(data)
    assert isinstance(value, dict), path
    return value, data


def test_fast_state_codec_writes_the_layout_codecs_bytes() -> None:
    for leader, epoch, isr, controller_epoch in [(0, 0, (0, 2, 1), 61), (-1, 7, (3,), 1)]:
        expected = layout.PARTITION_STATE.encode(
            PartitionState(leader, epoch, isr, controller_epoch)
        )
        assert states.encode_state(leader, epoch, isr, controller_epoch) == expected
        decoded = states.decode_state("/x", expected, 4)
        assert (decoded.leader, decoded.leader_epoch, decoded.isr, decoded.zk_version) == (
            leader,
            epoch,
            isr,
            4,
        )


def test_layout_read_back_node_by_node(
    make_cluster: Callable[..., Any], until: Callable[..., Any]
) -> None:
    cluster = make_cluster(3)
    cluster.create_topic("orders", 4, 2, config={"retention.ms": "3600000"})
    view = until(cluster, lambda v: len(v.partitions) == 4, "orders to get leaders")
    store = cluster.admin_store

    for broker in (0, 1, 2):
        path = f"/brokers/ids/{broker}"
        value, data = _json(store, path)
        assert set(value) == BROKER_FIELDS, path
        info = layout.BROKER.decode(data, path)
        assert (info.host, info.port, info.version) == ("localhost", 9092 + broker, 5)
        assert info.endpoints == (f"PLAINTEXT://localhost:{9092 + broker}",)
        assert isinstance(value["timestamp"], str)
        assert value["timestamp"].isdigit()
        stat = store.exists(path)
        assert stat is not None
        assert stat.ephemeral

    value, data = _json(store, "/controller")
    assert set(value) == CONTROLLER_FIELDS
    assert value["brokerid"] == view.controller
    assert (value["version"], value["kraftControllerEpoch"]) == (2, -1)
    assert isinstance(value["timestamp"], str)
    assert value["timestamp"].isdigit()
    stat = store.exists("/controller")
    assert stat is not None
    assert stat.ephemeral

    epoch_data, epoch_stat = store.get("/controller_epoch")
    assert int(epoch_data) == view.epoch >= 1
    assert not epoch_stat.ephemeral

    # What Kafka's controller writes when elected: feature versioning on, nothing finalized.
    value, _ = _json(store, "/feature")
    assert value == {"features": {}, "version": 2, "status": 1}

    value, data = _json(store, "/brokers/topics/orders")
    assert set(value) == TOPIC_FIELDS
    assert value["version"] == 3  # Kafka 2.8+: with the topic's id
    assert len(value["topic_id"]) == 22
    assert value["adding_replicas"] == value["removing_replicas"] == {}
    assert sorted(value["partitions"]) == ["0", "1", "2", "3"]
    assignment = layout.TOPIC.decode(data, "/brokers/topics/orders")
    assert all(len(r) == 2 for r in assignment.partitions.values())

    assert store.children("/brokers/topics/orders") == ["partitions"]
    assert store.children("/brokers/topics/orders/partitions") == ["0", "1", "2", "3"]
    for partition in range(4):
        assert store.children(f"/brokers/topics/orders/partitions/{partition}") == ["state"]
        path = f"/brokers/topics/orders/partitions/{partition}/state"
        value, data = _json(store, path)
        assert set(value) == STATE_FIELDS, path
        assert list(value) == ["controller_epoch", "leader", "version", "leader_epoch", "isr"]
        state = layout.PARTITION_STATE.decode(data, path)
        replicas = assignment.partitions[partition]
        assert state.leader == replicas[0]  # first live replica of a new partition
        assert list(state.isr) == list(replicas)  # all live replicas, assignment order
        assert (state.leader_epoch, state.controller_epoch, state.version) == (0, view.epoch, 1)

    value, data = _json(store, "/config/topics/orders")
    assert set(value) == CONFIG_FIELDS
    assert value == {"version": 1, "config": {"retention.ms": "3600000"}}

    for root in ("/admin/delete_topics", "/brokers/ids", "/brokers/topics", "/config/topics"):
        assert store.exists(root) is not None, root

    # And every node of Kafka's layout decodes with its codec.
    for path in _walk(store, "/"):
        codec = layout.codec_for(path)
        if codec is not None:
            codec.decode(store.get(path)[0], path)


def _walk(store: MetadataStore, root: str) -> list[str]:
    out = []
    stack = [root]
    while stack:
        path = stack.pop()
        out.append(path)
        prefix = "" if path == "/" else path
        stack.extend(f"{prefix}/{c}" for c in store.children(path))
    return out

"""``coordkit group describe`` of a consumer-protocol group (KIP-848), on the backend under test:
the group's node and member nodes written as the coordinator writes them
(:mod:`coordkit.engine.groups.modern.records`), beside topic nodes with ids; the real coordinator
writing them through real clients is tests/serve/test_consumer_protocol_clients.py."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable
from typing import Any

from click.testing import CliRunner, Result

from coordkit.cli import cli
from coordkit.engine.groups import group_path
from coordkit.engine.groups.modern import records
from coordkit.engine.groups.modern.group import ConsumerGroup, SubscribedTopic
from coordkit.engine.groups.modern.member import ConsumerGroupMember, MemberState
from coordkit.kafka import layout
from coordkit.kafka.model import TopicAssignment
from coordkit.store import MetadataStore

GROUP = "billing"
ORDERS = uuid.UUID(int=0x1111_2222_3333_4444_5555_6666_7777_8888)
REFUNDS = uuid.UUID(int=0x9999_AAAA_BBBB_CCCC_DDDD_EEEE_FFFF_0001)
#: An id no topic node holds (a topic deleted since): shown as the id itself.
GONE = uuid.UUID(int=0x0123_4567_89AB_CDEF_0123_4567_89AB_CDEF)


def _invoke(store_url: str, *args: str) -> Result:
    return CliRunner().invoke(
        cli, ["group", "describe", "--store", store_url, "--group", GROUP, *args],
        env={"COLUMNS": "250"},
    )  # fmt: skip


def _text(topic_id: uuid.UUID) -> str:
    """Kafka's text form of a topic id, as the store holds it."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def _write_group(store: MetadataStore) -> dict[str, str]:
    """Topics ``orders`` (subscribed) and ``refunds`` (only in an assignment), and a group of
    two members; member id → its node's path."""
    for name, topic_id in (("orders", ORDERS), ("refunds", REFUNDS)):
        node = TopicAssignment({0: (0,), 1: (0,), 2: (0,), 3: (0,)}, version=3,
                               topic_id=_text(topic_id))  # fmt: skip
        store.create(layout.topic_path(name), layout.TOPIC.encode(node), make_parents=True)
    group = ConsumerGroup(GROUP, 0)
    group.group_epoch, group.assignment_epoch, group.assignor_name = 7, 6, "range"
    group.subscription_metadata = {"orders": SubscribedTopic("orders", ORDERS, 4)}
    path = group_path(GROUP)
    store.create(path, records.encode_group(group), make_parents=True)
    stable = ConsumerGroupMember(
        member_id="m-stable", member_epoch=6, previous_member_epoch=5, client_id="c1",
        client_host="/127.0.0.1", instance_id="i-1", subscribed_topic_names=("orders",),
        server_assignor="range", assigned_partitions={ORDERS: [0, 1], REFUNDS: [2]},
    )  # fmt: skip
    revoking = ConsumerGroupMember(
        member_id="m-revoking", member_epoch=5, previous_member_epoch=5, client_id="c2",
        state=MemberState.UNREVOKED_PARTITIONS, subscribed_topic_names=("orders",),
        subscribed_topic_regex="ord.*", assigned_partitions={ORDERS: [2]},
        partitions_pending_revocation={ORDERS: [3], GONE: [0]},
    )  # fmt: skip
    store.create(f"{path}/{records.MEMBERS}", b"")
    paths = {}
    targets = {"m-stable": {ORDERS: frozenset({0, 1})}, "m-revoking": {ORDERS: frozenset({2, 3})}}
    for member in (stable, revoking):
        node = f"{path}/{records.MEMBERS}/{records.member_key(member.member_id)}"
        store.create(node, records.encode_member(member, targets[member.member_id]))
        paths[member.member_id] = node
    return paths


def test_describe_shows_a_consumer_group(
    store_url: str, open_session: Callable[[], MetadataStore]
) -> None:
    _write_group(open_session())
    result = _invoke(store_url, "--format", "json")
    assert result.exit_code == 0, result.output
    shown: dict[str, Any] = json.loads(result.output)
    assert shown["metadata"] is None  # not a classic group
    consumer = shown["consumer"]
    assert (consumer["type"], consumer["group_epoch"], consumer["assignment_epoch"]) == (
        "consumer", 7, 6,
    )  # fmt: skip
    assert consumer["assignor"] == "range"
    assert consumer["subscription"] == {"orders": {"topic_id": _text(ORDERS), "partitions": 4}}
    first, second = consumer["members"]  # by client id
    assert first == {
        "member_id": "m-stable", "instance_id": "i-1", "client_id": "c1",
        "client_host": "/127.0.0.1", "rack_id": None, "member_epoch": 6,
        "previous_member_epoch": 5, "state": "stable", "subscribed_topic_names": ["orders"],
        "subscribed_topic_regex": None, "server_assignor": "range",
        # refunds is in no subscription: its name comes from its topic node
        "assigned": ["orders-0", "orders-1", "refunds-2"], "revoking": [],
        "target": ["orders-0", "orders-1"],
    }  # fmt: skip
    assert (second["member_id"], second["member_epoch"], second["state"]) == (
        "m-revoking", 5, "unrevoked_partitions",
    )  # fmt: skip
    assert second["subscribed_topic_regex"] == "ord.*"
    assert second["assigned"] == ["orders-2"]
    assert second["revoking"] == sorted(["orders-3", f"{_text(GONE)}-0"])
    assert second["target"] == ["orders-2", "orders-3"]

    text = _invoke(store_url)
    assert text.exit_code == 0, text.output
    out = text.output
    assert f"{group_path(GROUP)} on" in out
    for shown_value in ("consumer", "range", "orders:4", "m-stable", "m-revoking", "i-1",
                        "unrevoked_partitions", "orders[0-1] refunds[2]", "orders[2-3]",
                        "orders /ord.*/", f"{_text(GONE)}[0] orders[3]"):  # fmt: skip
        assert shown_value in out, f"{shown_value!r} not in:\n{out}"
    row = next(line for line in out.splitlines() if "m-stable" in line)
    assert "6" in row.split(), row  # the member's epoch


def test_a_malformed_member_node_is_named(
    store_url: str, open_session: Callable[[], MetadataStore]
) -> None:
    store = open_session()
    paths = _write_group(store)
    broken = json.loads(store.get(paths["m-revoking"])[0])
    broken["member_epoch"] = "five"
    store.set(paths["m-revoking"], json.dumps(broken).encode())
    for fmt in ("table", "json"):
        result = _invoke(store_url, "--format", fmt)
        assert result.exit_code == 2, result.output
        [line] = result.output.strip().splitlines()
        assert line.startswith(f"error: {paths['m-revoking']}:"), line
        assert "member_epoch" in line


def test_a_member_node_nested_too_deep_is_named(
    store_url: str, open_session: Callable[[], MetadataStore]
) -> None:
    """JSON nested thousands deep (which :func:`json.loads` would crash on) is refused by path."""
    store = open_session()
    paths = _write_group(store)
    store.set(paths["m-stable"], b"[" * 5000 + b"]" * 5000)
    result = _invoke(store_url)
    assert result.exit_code == 2, result.output
    [line] = result.output.strip().splitlines()
    assert line == f"error: {paths['m-stable']}: nested deeper than 64 levels"


def test_a_malformed_group_node_is_named(
    store_url: str, open_session: Callable[[], MetadataStore]
) -> None:
    store = open_session()
    _write_group(store)
    path = group_path(GROUP)
    header = json.loads(store.get(path)[0])
    del header["assignment_epoch"]
    store.set(path, json.dumps(header).encode())
    result = _invoke(store_url)
    assert result.exit_code == 2, result.output
    [line] = result.output.strip().splitlines()
    assert line.startswith(f"error: {path}:"), line
    assert "assignment_epoch" in line, line

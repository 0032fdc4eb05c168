"""What the engine keeps for groups of wire clients: the opaque per-protocol metadata and
assignment bytes persisted (base64, metadata version 2) so that a new coordinator answers as the
old one would; version-1 nodes still read; the consumer-protocol reader used to describe groups."""

from __future__ import annotations

import json

import pytest

from coordkit.engine.groups import metadata
from coordkit.engine.groups.membership import Group, Member
from coordkit.engine.groups.protocol import Subscription
from coordkit.errors import LayoutError
from coordkit.kafka.model import TopicPartition
from coordkit.serve.apis.groups.membership import read_assignment, read_subscription
from harness.consumer_bytes import assignment_bytes, subscription_bytes

OPAQUE = bytes(range(256))  # every byte value, not text


def _wire_member() -> Member:
    member = Member(
        "m1",
        "host-1",
        "client",
        3.0,
        6.0,
        ("cooperative-sticky", "range"),
        Subscription(["orders"]),
        1,
        metadata={"cooperative-sticky": OPAQUE, "range": b"\x00\x01"},
        client_host="/10.0.0.7",
    )
    member.raw_assignment = OPAQUE[::-1]
    member.assignment = frozenset({TopicPartition("orders", 1)})
    return member


def test_opaque_bytes_survive_persistence() -> None:
    group = Group("g", 0)
    group.generation = 4
    group.protocol = "cooperative-sticky"
    group.add(_wire_member())
    group.leader = "m1"
    path = metadata.group_path("g")
    encoded = metadata.encode(group.to_metadata())
    doc = json.loads(encoded)
    assert doc["version"] == 2
    assert isinstance(doc["members"][0]["metadata"]["cooperative-sticky"], str)  # base64 text
    resumed = Group.from_metadata(metadata.decode("g", encoded, path), 0, now=1.0)
    member = resumed.members["m1"]
    assert member.metadata == {"cooperative-sticky": OPAQUE, "range": b"\x00\x01"}
    assert member.raw_assignment == OPAQUE[::-1]
    assert member.client_host == "/10.0.0.7"
    assert resumed.static == {"host-1": "m1"}


def test_version_1_nodes_still_read() -> None:
    v1 = {
        "version": 1,
        "generation": 2,
        "protocol_type": "consumer",
        "protocol": "range",
        "leader": "m1",
        "members": [
            {
                "member_id": "m1",
                "group_instance_id": None,
                "client_id": "c",
                "session_timeout_ms": 1000,
                "rebalance_timeout_ms": 2000,
                "protocols": ["range"],
                "topics": ["orders"],
                "assignment": {"orders": [0]},
                "join_order": 1,
            }
        ],
    }
    decoded = metadata.decode("g", json.dumps(v1).encode(), "/coordkit/groups/g")
    [member] = decoded.members
    assert (member.metadata, member.raw_assignment, member.client_host) == ({}, None, "")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"metadata": {"range": "not base64!"}}, "members[0].metadata.range"),
        ({"metadata": ["range"]}, "members[0].metadata"),
        ({"raw_assignment": 7}, "members[0].raw_assignment"),
        ({"client_host": 1}, "members[0].client_host"),
    ],
)
def test_bad_opaque_fields_are_named(change: dict[str, object], field: str) -> None:
    member = {
        "member_id": "m1",
        "group_instance_id": None,
        "client_id": "c",
        "session_timeout_ms": 1000,
        "rebalance_timeout_ms": 2000,
        "protocols": ["range"],
        "topics": [],
        "assignment": {},
        **change,
    }
    doc = {"version": 2, "generation": 1, "protocol_type": "consumer", "members": [member]}
    with pytest.raises(LayoutError) as caught:
        metadata.decode("g", json.dumps(doc).encode(), "/coordkit/groups/g")
    assert field in str(caught.value)


def test_consumer_protocol_reader() -> None:
    for version in (0, 1, 2, 3):
        subscription = read_subscription(subscription_bytes(["orders", "audit"], version=version))
        assert subscription.topics == ("audit", "orders")  # as clients write them: sorted
    parts = {TopicPartition("orders", 0), TopicPartition("audit", 3)}
    assert read_assignment(assignment_bytes(parts)) == parts
    # Anything else describes nothing, and does not raise.
    # A v1 subscription cut short after v0's fields (no owned partitions) still names its topics.
    cut = subscription_bytes(["orders"], version=0)
    assert read_subscription(b"\x00\x01" + cut[2:]).topics == ("orders",)
    for junk in (b"", b"\x00", OPAQUE, b"\xff\xff\x00"):
        assert read_subscription(junk).topics == ()
        assert read_assignment(junk) == frozenset()

"""Persisted group metadata (``/coordkit/groups/G``) and the protocol vote, without a store."""

from __future__ import annotations

import pytest

from coordkit.engine.groups import metadata
from coordkit.engine.groups.membership import Group, Member
from coordkit.engine.groups.protocol import Subscription
from coordkit.errors import LayoutError
from coordkit.kafka.model import TopicPartition


def _member(member_id: str, protocols: tuple[str, ...], order: int) -> Member:
    return Member(member_id, None, "client", 1.0, 2.0, protocols, Subscription(["t"]), order)


def test_round_trip_keeps_members_assignments_and_generation() -> None:
    group = Group("g", 3)
    group.generation = 7
    group.protocol = "range"
    first = _member("m1", ("range",), 1)
    first.assignment = frozenset({TopicPartition("t", 0), TopicPartition("t", 2)})
    group.add(first)
    group.add(_member("m2", ("range", "sticky"), 2))
    group.leader = "m1"
    path = metadata.group_path("g")
    decoded = metadata.decode("g", metadata.encode(group.to_metadata()), path)
    assert decoded == group.to_metadata()
    resumed = Group.from_metadata(decoded, 3, now=10.0)
    assert resumed.generation == 7
    assert resumed.state.value == "Stable"
    assert resumed.members["m1"].assignment == first.assignment
    assert resumed.members["m2"].deadline == 11.0


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (b'{"version":1,"generation":"x","protocol_type":"consumer","members":[]}', "generation"),
        (b'{"version":1,"generation":1,"protocol_type":"consumer"}', "members"),
        (b'{"version":1,"generation":1,"protocol_type":"consumer","members":[{}]}', "members[0]"),
    ],
)
def test_malformed_metadata_names_the_field(data: bytes, field: str) -> None:
    with pytest.raises(LayoutError) as info:
        metadata.decode("g", data, "/coordkit/groups/g")
    assert info.value.field is not None
    assert info.value.field.startswith(field)
    assert "/coordkit/groups/g" in str(info.value)


def test_group_ids_that_cannot_be_nodes_are_refused() -> None:
    with pytest.raises(ValueError, match="without '/'"):
        metadata.group_path("a/b")


def test_vote_picks_the_most_first_choices_among_common_protocols() -> None:
    group = Group("g", 0)
    group.add(_member("a", ("sticky", "range", "roundrobin"), 1))
    group.add(_member("b", ("roundrobin", "range"), 2))
    group.add(_member("c", ("roundrobin", "sticky", "range"), 3))
    assert group.candidate_protocols() == {"range", "roundrobin"}
    assert group.select_protocol() == "roundrobin"
    assert not group.supports("consumer", ("cooperative-sticky",))
    assert group.supports("consumer", ("range",))

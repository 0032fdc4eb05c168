"""coordkit assignors inside aiokafka, driven through aiokafka's own protocol structs.

A rebalance is what aiokafka's GroupCoordinator does minus the network: each member's
``metadata()`` bytes, decoded by ``ConsumerProtocol.METADATA`` on the leader, ``assign`` with the
leader's ClusterMetadata, each assignment decoded by ``ConsumerProtocol.ASSIGNMENT`` and handed to
``on_assignment``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pytest
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from aiokafka.coordinator.protocol import (
    ConsumerProtocol,
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)
from aiokafka.structs import TopicPartition

from coordkit.clients.aiokafka import assignor
from coordkit.errors import UnknownNameError
from coordkit.protocol.consumer import (
    decode_sticky_user_data,
    encode_generation,
    encode_sticky_user_data,
)

TOPICS = {"orders": 8, "payments": 4}
EVERY_PARTITION = sorted(TopicPartition(t, p) for t, n in TOPICS.items() for p in range(n))


def rebalance(
    members: Mapping[str, Any], cluster: Any, leader: str
) -> dict[str, set[TopicPartition]]:
    topics = set(cluster.topics())
    metadata = {m: ConsumerProtocol.METADATA.decode(a.metadata(topics)) for m, a in members.items()}
    assignments = members[leader].assign(cluster, metadata)
    out = {}
    for member_id, member in members.items():
        decoded = ConsumerProtocol.ASSIGNMENT.decode(assignments[member_id])
        member.on_assignment(decoded)
        out[member_id] = set(decoded.partitions())
    return out


def _all(result: Mapping[str, set[TopicPartition]]) -> list[TopicPartition]:
    return sorted(tp for ps in result.values() for tp in ps)


def test_assignor_is_a_fresh_aiokafka_assignor_per_call() -> None:
    first, second = assignor("sticky"), assignor("sticky")
    assert isinstance(first, AbstractPartitionAssignor)
    assert first.name == second.name == "sticky"
    assert first is not second
    assert first.state is not second.state


def test_unknown_name_lists_the_registered_assignors() -> None:
    with pytest.raises(UnknownNameError, match=r"available: .*sticky.*uniform"):
        assignor("nope")


@pytest.mark.parametrize("name", ["sticky", "uniform", "cooperative-sticky"])
def test_owned_partitions_stay_across_generations(aiokafka_cluster: Any, name: str) -> None:
    cluster = aiokafka_cluster(TOPICS)
    members = {m: assignor(name) for m in "abc"}
    first = rebalance(members, cluster, "a")
    assert _all(first) == EVERY_PARTITION
    del members["b"]
    second = rebalance(members, cluster, "c")
    assert _all(second) == EVERY_PARTITION
    assert first["a"] <= second["a"]
    assert first["c"] <= second["c"]
    # aiokafka gives assignors no generation: the leader's stamp counts rebalances instead.
    assert [m.state.generation for m in members.values()] == [2, 2]


def test_stamp_continues_from_the_newest_claim(aiokafka_cluster: Any) -> None:
    """A member that missed rebalances comes back with an old generation; the leader's stamp
    continues from the newest claim in the group, so the returning member's claim stays older."""
    cluster = aiokafka_cluster({"t": 4})
    a, b = assignor("sticky"), assignor("sticky")
    rebalance({"a": a, "b": b}, cluster, "b")
    for _ in range(3):
        rebalance({"a": a}, cluster, "a")  # b is away
    assert (a.state.generation, b.state.generation) == (4, 1)
    claims = {
        m: decode_sticky_user_data(ConsumerProtocol.METADATA.decode(x.metadata({"t"})).user_data)
        for m, x in (("a", a), ("b", b))
    }
    assert claims["b"].generation < claims["a"].generation
    rebalance({"a": a, "b": b}, cluster, "b")  # b leads: it must not restart the count
    assert (a.state.generation, b.state.generation) == (5, 5)


def test_two_consumers_in_one_process_keep_their_own_state(aiokafka_cluster: Any) -> None:
    one, two = assignor("sticky"), assignor("sticky")  # one per consumer, as documented
    result = rebalance({"one": one, "two": two}, aiokafka_cluster(TOPICS), "one")
    assert result["one"]
    assert result["two"]
    assert not result["one"] & result["two"]
    for name, member in (("one", one), ("two", two)):
        claim = decode_sticky_user_data(
            ConsumerProtocol.METADATA.decode(member.metadata(set(TOPICS))).user_data
        )
        assert {TopicPartition(t, p) for t, ps in claim.owned.items() for p in ps} == result[name]


def test_aiokafkas_own_sticky_shares_state_between_consumers() -> None:
    """The bug the instances avoid (aiokafka#1175): its assignor keeps state on the class."""
    StickyPartitionAssignor.on_assignment(ConsumerProtocolMemberAssignment(0, [("t", [0])], b""))
    StickyPartitionAssignor.on_assignment(ConsumerProtocolMemberAssignment(0, [("t", [1])], b""))
    # The first consumer's memory is gone: both now claim partition 1.
    assert StickyPartitionAssignor.member_assignment == [TopicPartition("t", 1)]
    StickyPartitionAssignor.member_assignment = None


def test_bytes_match_aiokafkas_structs() -> None:
    member = assignor("sticky")
    member.on_assignment(ConsumerProtocolMemberAssignment(0, [("t", [2, 0])], encode_generation(6)))
    user_data = encode_sticky_user_data({"t": [0, 2]}, 6)
    assert member.metadata({"t"}) == ConsumerProtocolMemberMetadata(0, ["t"], user_data).encode()


@pytest.mark.parametrize("user_data", [b"\xff\xff\xff\xff", b"\x00\x00\x00\x09x", bytes(300)])
def test_unreadable_user_data_counts_as_owning_nothing(
    aiokafka_cluster: Any, caplog: pytest.LogCaptureFixture, user_data: bytes
) -> None:
    leader = assignor("sticky")
    leader.on_assignment(ConsumerProtocolMemberAssignment(0, [("t", [0, 1])], encode_generation(3)))
    members = {
        "leader": ConsumerProtocol.METADATA.decode(leader.metadata({"t"})),
        "hostile": ConsumerProtocolMemberMetadata(0, ["t"], user_data),
    }
    with caplog.at_level(logging.WARNING, logger="coordkit.clients"):
        result = leader.assign(aiokafka_cluster({"t": 4}), members)
    assert set(ConsumerProtocol.ASSIGNMENT.decode(result["leader"]).partitions()) == {
        TopicPartition("t", 0),
        TopicPartition("t", 1),
    }
    assert len([r for r in caplog.records if "cannot be read" in r.getMessage()]) == 1


def test_unreadable_generation_stamp_is_ignored() -> None:
    member = assignor("sticky")
    member.on_assignment(ConsumerProtocolMemberAssignment(0, [("t", [0])], b"not a stamp"))
    assert member.state.generation == -1
    assert member.state.owned == {"t": (0,)}

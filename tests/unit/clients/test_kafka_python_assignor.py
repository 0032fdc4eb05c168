"""coordkit assignors inside kafka-python: driven through kafka-python's own classes.

A rebalance here is what kafka-python's consumer coordinator does, minus the network: each
consumer's ``group_protocols()`` (the JoinGroup metadata), the leader's ``_perform_assignment``
over the encoded metadata, then ``_on_join_complete_async`` with the encoded assignment.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from kafka import KafkaConsumer
from kafka.coordinator.assignors.abstract import AbstractPartitionAssignor, RebalanceProtocol
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from kafka.protocol.consumer.group import JoinGroupResponse
from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)
from kafka.structs import TopicPartition

from coordkit.clients.kafka_python import assignor
from coordkit.errors import UnknownNameError
from coordkit.protocol.consumer import decode_sticky_user_data, encode_sticky_user_data

TOPICS = {"orders": 8, "payments": 4}
Member = JoinGroupResponse.JoinGroupResponseMember


class Group:
    """Real KafkaConsumer objects (never connected) rebalanced by hand."""

    def __init__(self, strategy: Any, metadata: Any, topics: list[str]):
        self.strategy = strategy
        self.metadata = metadata
        self.topics = topics
        self.consumers: dict[str, KafkaConsumer] = {}
        self.generation = 0

    def join(self, member_id: str) -> None:
        consumer = KafkaConsumer(
            bootstrap_servers="127.0.0.1:9",
            group_id="g",
            partition_assignment_strategy=[self.strategy],
            api_version=(2, 5, 0),
            enable_auto_commit=False,
        )
        consumer.subscribe(self.topics)
        consumer._client.cluster.update_metadata(self.metadata)  # what the leader assigns from
        self.consumers[member_id] = consumer

    def leave(self, member_id: str) -> None:
        self.consumers.pop(member_id).close()

    def assignor(self, member_id: str) -> Any:
        return next(iter(self.consumers[member_id]._coordinator._assignors.values()))

    def rebalance(self, *, leader: str | None = None) -> dict[str, set[TopicPartition]]:
        self.generation += 1
        members = []
        protocol = ""
        for member_id, consumer in self.consumers.items():
            [(protocol, metadata)] = consumer._coordinator.group_protocols()
            members.append(
                Member(member_id=member_id, group_instance_id=None, metadata=metadata.encode())
            )
        leader = leader or next(iter(self.consumers))
        assignments = self.consumers[leader]._coordinator._perform_assignment(
            leader, protocol, members
        )
        for member_id, consumer in self.consumers.items():
            asyncio.run(
                consumer._coordinator._on_join_complete_async(
                    self.generation, member_id, protocol, assignments[member_id].encode()
                )
            )
        return {m: set(c.assignment()) for m, c in self.consumers.items()}

    def close(self) -> None:
        for consumer in self.consumers.values():
            consumer.close()


@pytest.fixture
def group(
    kafka_python_metadata: Callable[[Mapping[str, int]], Any],
) -> Iterator[Callable[..., Group]]:
    made: list[Group] = []

    def make(name: str, members: str = "abc", **options: Any) -> Group:
        g = Group(assignor(name, **options), kafka_python_metadata(TOPICS), sorted(TOPICS))
        for m in members:
            g.join(m)
        made.append(g)
        return g

    yield make
    for g in made:
        g.close()


def _all(assignment: Mapping[str, set[TopicPartition]]) -> list[TopicPartition]:
    return sorted(tp for parts in assignment.values() for tp in parts)


EVERY_PARTITION = sorted(TopicPartition(t, p) for t, n in TOPICS.items() for p in range(n))


def test_assignor_is_a_kafka_python_assignor_class_named_as_registered() -> None:
    sticky = assignor("sticky")
    assert issubclass(sticky, AbstractPartitionAssignor)
    assert (sticky.name, sticky.__name__) == ("sticky", "CoordkitStickyAssignor")
    assert sticky().supported_protocols() == [RebalanceProtocol.EAGER]
    assert assignor("weighted-sticky").__name__ == "CoordkitWeightedStickyAssignor"
    assert assignor("cooperative-sticky")().supported_protocols() == [RebalanceProtocol.COOPERATIVE]
    eager = assignor("cooperative-sticky", protocol="eager")
    assert eager().supported_protocols() == [RebalanceProtocol.EAGER]


def test_unknown_name_lists_the_registered_assignors() -> None:
    with pytest.raises(UnknownNameError) as info:
        assignor("stickyy")
    message = str(info.value)
    assert "'stickyy'" in message
    for name in ("sticky", "uniform", "weighted-sticky", "range"):
        assert name in message


def test_protocol_the_assignor_cannot_run_is_refused() -> None:
    with pytest.raises(ValueError, match="'sticky' cannot run the cooperative"):
        assignor("sticky", protocol="cooperative")
    with pytest.raises(ValueError, match="'eager' or 'cooperative'"):
        assignor("sticky", protocol="incremental")


@pytest.mark.parametrize("name", ["sticky", "uniform", "cooperative-sticky"])
def test_owned_partitions_stay_when_a_member_leaves(group: Callable[..., Group], name: str) -> None:
    g = group(name, protocol="eager") if name == "cooperative-sticky" else group(name)
    first = g.rebalance()
    assert _all(first) == EVERY_PARTITION
    assert sorted(len(p) for p in first.values()) == [4, 4, 4]
    g.leave("b")
    second = g.rebalance(leader="c")
    assert _all(second) == EVERY_PARTITION
    assert first["a"] <= second["a"]
    assert first["c"] <= second["c"]
    assert sorted(len(p) for p in second.values()) == [6, 6]
    # Each member remembers its own partitions and the generation, in Java's user-data layout.
    claim = decode_sticky_user_data(g.assignor("a").metadata(set(TOPICS)).user_data)
    assert claim.generation == 2
    assert {TopicPartition(t, p) for t, ps in claim.owned.items() for p in ps} == second["a"]


def test_two_consumers_in_one_process_keep_their_own_state(group: Callable[..., Group]) -> None:
    g = group("sticky", members="ab")
    result = g.rebalance()
    a, b = g.assignor("a"), g.assignor("b")
    assert a is not b
    assert type(a) is type(b)
    assert result["a"]
    assert result["b"]
    assert not result["a"] & result["b"]
    owned_a = decode_sticky_user_data(a.metadata(set(TOPICS)).user_data).owned
    owned_b = decode_sticky_user_data(b.metadata(set(TOPICS)).user_data).owned
    as_set = lambda owned: {TopicPartition(t, p) for t, ps in owned.items() for p in ps}  # noqa: E731
    assert (as_set(owned_a), as_set(owned_b)) == (result["a"], result["b"])


def test_cooperative_moves_take_two_rounds_and_never_overlap(group: Callable[..., Group]) -> None:
    g = group("cooperative-sticky", members="ab")
    first = g.rebalance()
    assert _all(first) == EVERY_PARTITION
    g.join("c")
    second = g.rebalance()  # c arrives: a and b give up partitions, nobody gets them yet
    assert second["c"] == set()
    assert second["a"] < first["a"]
    assert second["b"] < first["b"]
    third = g.rebalance()  # the revoked partitions land on c
    assert _all(third) == EVERY_PARTITION
    assert sorted(len(p) for p in third.values()) == [4, 4, 4]
    assert second["a"] == third["a"]
    assert second["b"] == third["b"]
    # Cooperative members send owned partitions and generation in the subscription fields.
    metadata = g.assignor("c").metadata(set(TOPICS))
    assert metadata.version == 2
    assert metadata.generation_id == 3
    owned = {TopicPartition(tp.topic, p) for tp in metadata.owned_partitions for p in tp.partitions}
    assert owned == third["c"]


def _member(member_id: str, metadata: Any) -> Any:
    return Member(member_id=member_id, group_instance_id=None, metadata=metadata)


def _owners(assignments: Mapping[str, Any]) -> dict[TopicPartition, str]:
    return {tp: m for m, a in assignments.items() for tp in a.partitions()}


def test_leader_reads_kafka_pythons_own_sticky_and_cooperative_metadata(
    kafka_python_cluster: Any,
) -> None:
    cluster = kafka_python_cluster({"t": 6})
    # kafka-python's StickyPartitionAssignor prefixes its user data with a version; still read.
    native = StickyPartitionAssignor()
    native.on_assignment(ConsumerProtocolAssignment(0, [("t", [1, 3, 5])], b""), 4)
    ours = assignor("sticky")()
    ours.on_assignment(ConsumerProtocolAssignment(0, [("t", [0, 2, 4])], b""), 4)
    result = ours.assign(
        cluster,
        [_member("native", native.metadata({"t"})), _member("ours", ours.metadata({"t"}))],
    )
    assert {tp.partition for tp in result["native"].partitions()} == {1, 3, 5}
    # kafka-python's CooperativeStickyAssignor sends owned partitions in the v1 field.
    coop_native = CooperativeStickyAssignor()
    coop_native.on_assignment(ConsumerProtocolAssignment(0, [("t", [0, 1, 2])], b""), 2)
    coop = assignor("cooperative-sticky")()
    result = coop.assign(
        cluster, [_member("n", coop_native.metadata({"t"})), _member("o", coop.metadata({"t"}))]
    )
    assert {tp.partition for tp in result["n"].partitions()} <= {0, 1, 2}
    assert {tp.partition for tp in result["o"].partitions()} == {3, 4, 5}  # 0-2 wait a round


HOSTILE = [
    b"\xff" * 3,
    b"\x7f\xff\xff\xff",
    b"\x00\x00\x00\x01\x00\x05or",  # truncated topic name
    encode_sticky_user_data({"orders": [0]}, 1) + b"trailing",
    bytes(range(256)),
]


@pytest.mark.parametrize("user_data", HOSTILE)
def test_unreadable_user_data_counts_as_owning_nothing(
    kafka_python_cluster: Any, caplog: pytest.LogCaptureFixture, user_data: bytes
) -> None:
    leader = assignor("sticky")()
    leader.on_assignment(ConsumerProtocolAssignment(0, [("orders", [0, 1, 2, 3])], b""), 3)
    hostile = ConsumerProtocolSubscription(version=0, topics=["orders"], user_data=user_data)
    members = [
        _member(
            "leader", ConsumerProtocolSubscription.decode(leader.metadata({"orders"}).encode())
        ),
        _member("hostile\x1b[31m", ConsumerProtocolSubscription.decode(hostile.encode())),
    ]
    with caplog.at_level(logging.WARNING, logger="coordkit.clients"):
        result = leader.assign(kafka_python_cluster({"orders": 8}), members)
    assert {tp.partition for tp in result["leader"].partitions()} == {0, 1, 2, 3}
    assert {tp.partition for tp in result["hostile\x1b[31m"].partitions()} == {4, 5, 6, 7}
    [record] = [r for r in caplog.records if r.name.startswith("coordkit.clients")]
    assert "cannot be read" in record.getMessage()
    assert "\x1b" not in record.getMessage()


def test_claims_of_partitions_that_do_not_exist_or_are_not_subscribed_are_dropped(
    kafka_python_cluster: Any,
) -> None:
    liar = ConsumerProtocolSubscription(
        version=0,
        topics=["orders"],
        user_data=encode_sticky_user_data({"orders": [0, 1, -4, 99], "payments": [0]}, 50),
    )
    honest = assignor("sticky")()
    honest.on_assignment(ConsumerProtocolAssignment(0, [("orders", [1, 2])], b""), 3)
    result = honest.assign(
        kafka_python_cluster({"orders": 4, "payments": 2}),
        [_member("liar", liar), _member("honest", honest.metadata({"orders"}))],
    )
    owners = _owners(result)
    assert sorted(owners) == [TopicPartition("orders", p) for p in range(4)]
    assert owners[TopicPartition("orders", 1)] == "liar"  # the newer generation's claim wins
    assert owners[TopicPartition("orders", 0)] == "liar"


def test_topic_without_metadata_is_left_out(
    kafka_python_cluster: Any, caplog: pytest.LogCaptureFixture
) -> None:
    member = assignor("range")()
    with caplog.at_level(logging.WARNING, logger="coordkit.clients"):
        result = member.assign(
            kafka_python_cluster({"orders": 2}), [_member("m", member.metadata({"orders", "gone"}))]
        )
    assert result["m"].partitions() == [TopicPartition("orders", 0), TopicPartition("orders", 1)]
    assert any("'gone'" in r.getMessage() for r in caplog.records)


def test_stateless_assignors_send_no_user_data() -> None:
    member = assignor("range")()
    member.on_assignment(ConsumerProtocolAssignment(0, [("t", [0])], b""), 2)
    assert member.metadata({"t"}).user_data is None


def test_weighted_sticky_balances_the_loads_it_is_given(kafka_python_cluster: Any) -> None:
    def loads(topic: str, count: int) -> list[float]:
        return [10.0] + [1.0] * (count - 1)  # partition 0 weighs as much as ten others

    strategy = assignor("weighted-sticky", loads=loads)
    members = [strategy() for _ in range(2)]
    result = members[0].assign(
        kafka_python_cluster({"t": 11}),
        [_member(f"m{i}", m.metadata({"t"})) for i, m in enumerate(members)],
    )
    sizes = {m: len(a.partitions()) for m, a in result.items()}
    holder = next(m for m, a in result.items() if TopicPartition("t", 0) in a.partitions())
    assert sizes[holder] == 1
    assert sum(sizes.values()) == 11

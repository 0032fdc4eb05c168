"""``range`` and ``range-ceil``: Kafka's RangeAssignorTest scenarios, its rack-aware cases, the
legacy ceiling split of seed 003."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence

import pytest

from coordkit.strategies.assignment import (
    GroupAssignment,
    GroupSubscription,
    MemberSubscription,
    TopicMetadata,
)
from coordkit_assignors.range import (
    RangeAssignor,
    RangeCeilAssignor,
    ceil_split,
    range_split,
    use_rack_aware_assignment,
)
from coordkit_assignors.roundrobin import RoundRobinAssignor

ALL_RACKS = ("a", "b", "c", "d", "e", "f")


def racks(n: int) -> list[str | None]:
    return [ALL_RACKS[i % len(ALL_RACKS)] for i in range(n)]


def null_racks(n: int) -> list[str | None]:
    return [None] * n


def replica_racks(
    partitions: int, replication: int, broker_racks: Sequence[str | None], next_index: int = 0
) -> list[list[str]]:
    """Kafka's test layout: partition ``i`` has replicas on brokers ``(i + j + next) % brokers``."""
    brokers = len(broker_racks)
    out = []
    for i in range(partitions):
        nodes = [broker_racks[(i + j + next_index) % brokers] for j in range(replication)]
        out.append([r for r in nodes if r is not None])
    return out


def sets(assignment: GroupAssignment) -> dict[str, set[str]]:
    return {m: set(ps) for m, ps in assignment.as_strings().items()}


def expect(spec: Mapping[str, str | Sequence[str]]) -> dict[str, set[str]]:
    """``{"c": "t1-0, t1-1"}`` → ``{"c": {"t1-0", "t1-1"}}``."""
    out = {}
    for member, given in spec.items():
        parts = (
            [p.strip() for p in given.split(",") if p.strip()] if isinstance(given, str) else given
        )
        out[member] = set(parts)
    return out


# -- Kafka's parametrised scenarios: each runs without racks, and with racks on both sides -------


class RackConfig(enum.Enum):
    NO_BROKER_RACK = "no broker rack"
    NO_CONSUMER_RACK = "no consumer rack"
    BROKER_AND_CONSUMER_RACK = "broker and consumer rack"


class KafkaRangeCase:
    """Kafka's ``initializeRacks``: replication factor = max consumers, one rack per replica, and the
    test-only preference for the rack-aware code path (racks always cover every partition here)."""

    def __init__(self, config: RackConfig, max_consumers: int = 3):
        self.replication = max_consumers
        self.broker_racks = 0 if config is RackConfig.NO_BROKER_RACK else max_consumers
        self.consumer_rack = config is not RackConfig.NO_CONSUMER_RACK
        self.assignor = RangeAssignor(prefer_rack_aware=True)

    def topic(self, partitions: int) -> TopicMetadata:
        if self.broker_racks <= 0:
            brokers: list[str | None] = [None] * self.replication
        else:
            brokers = [
                ALL_RACKS[i % self.broker_racks]
                for i in range(self.broker_racks * self.replication)
            ]
        return TopicMetadata(
            partitions, replica_racks=replica_racks(partitions, self.replication, brokers)
        )

    def member(
        self, topics: Sequence[str], index: int, instance_id: str | None = None
    ) -> MemberSubscription:
        rack_count = self.broker_racks if self.broker_racks > 0 else len(ALL_RACKS)
        rack = ALL_RACKS[index % rack_count] if self.consumer_rack else None
        return MemberSubscription(topics, instance_id=instance_id, rack=rack)

    def assign(
        self, topics: Mapping[str, int], members: Mapping[str, MemberSubscription]
    ) -> dict[str, set[str]]:
        group = GroupSubscription({t: self.topic(n) for t, n in topics.items()}, members)
        return sets(self.assignor.assign(group))


@pytest.fixture(params=list(RackConfig), ids=lambda c: c.value)
def kafka(request: pytest.FixtureRequest) -> KafkaRangeCase:
    return KafkaRangeCase(request.param)


def test_one_consumer_no_topic(kafka: KafkaRangeCase) -> None:
    assert kafka.assign({}, {"consumer1": kafka.member([], 0)}) == {"consumer1": set()}


def test_one_consumer_nonexistent_topic(kafka: KafkaRangeCase) -> None:
    assert kafka.assign({}, {"consumer1": kafka.member(["topic1"], 0)}) == {"consumer1": set()}


def test_one_consumer_one_topic(kafka: KafkaRangeCase) -> None:
    result = kafka.assign({"topic1": 3}, {"consumer1": kafka.member(["topic1"], 0)})
    assert result == expect({"consumer1": "topic1-0, topic1-1, topic1-2"})


def test_only_assigns_partitions_from_subscribed_topics(kafka: KafkaRangeCase) -> None:
    result = kafka.assign({"topic1": 3, "other": 3}, {"consumer1": kafka.member(["topic1"], 0)})
    assert result == expect({"consumer1": "topic1-0, topic1-1, topic1-2"})


def test_one_consumer_multiple_topics(kafka: KafkaRangeCase) -> None:
    result = kafka.assign(
        {"topic1": 1, "topic2": 2}, {"consumer1": kafka.member(["topic1", "topic2"], 0)}
    )
    assert result == expect({"consumer1": "topic1-0, topic2-0, topic2-1"})


@pytest.mark.parametrize(
    ("partitions", "expected"), [(1, ("topic1-0", "")), (2, ("topic1-0", "topic1-1"))]
)
def test_two_consumers_one_topic(
    kafka: KafkaRangeCase, partitions: int, expected: tuple[str, str]
) -> None:
    members = {"consumer1": kafka.member(["topic1"], 0), "consumer2": kafka.member(["topic1"], 1)}
    result = kafka.assign({"topic1": partitions}, members)
    assert result == expect({"consumer1": expected[0], "consumer2": expected[1]})


def test_multiple_consumers_mixed_topics(kafka: KafkaRangeCase) -> None:
    members = {
        "consumer1": kafka.member(["topic1"], 0),
        "consumer2": kafka.member(["topic1", "topic2"], 1),
        "consumer3": kafka.member(["topic1"], 2),
    }
    assert kafka.assign({"topic1": 3, "topic2": 2}, members) == expect(
        {
            "consumer1": "topic1-0",
            "consumer2": "topic1-1, topic2-0, topic2-1",
            "consumer3": "topic1-2",
        }
    )


def test_two_consumers_two_topics_six_partitions(kafka: KafkaRangeCase) -> None:
    both = ["topic1", "topic2"]
    members = {"consumer1": kafka.member(both, 0), "consumer2": kafka.member(both, 1)}
    assert kafka.assign({"topic1": 3, "topic2": 3}, members) == expect(
        {"consumer1": "topic1-0, topic1-1, topic2-0, topic2-1", "consumer2": "topic1-2, topic2-2"}
    )


def test_two_static_consumers_sort_by_instance_id_not_member_id(kafka: KafkaRangeCase) -> None:
    both = ["topic1", "topic2"]
    members = {
        "consumer-b": kafka.member(both, 0, instance_id="instance1"),
        "consumer-a": kafka.member(both, 1, instance_id="instance2"),
    }
    assert kafka.assign({"topic1": 3, "topic2": 3}, members) == expect(
        {"consumer-b": "topic1-0, topic1-1, topic2-0, topic2-1", "consumer-a": "topic1-2, topic2-2"}
    )


def test_static_consumer_sorts_before_dynamic_one(kafka: KafkaRangeCase) -> None:
    both = ["topic1", "topic2"]
    members = {
        "consumer-b": kafka.member(both, 0, instance_id="instance1"),
        "consumer-a": kafka.member(both, 1),
    }
    assert kafka.assign({"topic1": 3, "topic2": 3}, members) == expect(
        {"consumer-b": "topic1-0, topic1-1, topic2-0, topic2-1", "consumer-a": "topic1-2, topic2-2"}
    )


@pytest.mark.parametrize("config", list(RackConfig), ids=lambda c: c.value)
def test_static_member_range_assignment_persistent(config: RackConfig) -> None:
    kafka = KafkaRangeCase(config, max_consumers=5)
    both = ["topic1", "topic2"]
    members = {
        f"consumer{i}": kafka.member(both, i - 1, instance_id=f"instance{i}") for i in (1, 2, 3)
    }
    members["consumer4"] = kafka.member(both, 3)
    expected = expect(
        {
            "consumer1": "topic1-0, topic1-1, topic2-0",
            "consumer2": "topic1-2, topic2-1",
            "consumer3": "topic1-3, topic2-2",
            "consumer4": "topic1-4, topic2-3",
        }
    )
    assert kafka.assign({"topic1": 5, "topic2": 4}, members) == expected

    # A new dynamic member replacing the old one takes over its slot; static members keep theirs.
    del members["consumer4"]
    members["consumer5"] = kafka.member(both, 4)
    expected["consumer5"] = expected.pop("consumer4")
    assert kafka.assign({"topic1": 5, "topic2": 4}, members) == expected


def by_instance(
    result: Mapping[str, set[str]], members: Mapping[str, MemberSubscription]
) -> dict[str, set[str]]:
    return {members[m].instance_id or m: parts for m, parts in result.items()}


def test_static_member_assignment_persistent_after_member_id_changes(kafka: KafkaRangeCase) -> None:
    both = ["topic1", "topic2"]
    members = {
        f"consumer{i}": kafka.member(both, i - 1, instance_id=f"instance{i}") for i in (1, 2, 3)
    }
    topics = {"topic1": 5, "topic2": 5}
    first = by_instance(kafka.assign(topics, members), members)
    assert first == expect(
        {
            "instance1": "topic1-0, topic1-1, topic2-0, topic2-1",
            "instance2": "topic1-2, topic1-3, topic2-2, topic2-3",
            "instance3": "topic1-4, topic2-4",
        }
    )
    # Members rejoin with new member ids (consumer3 → consumer4, consumer2 → consumer5).
    members["consumer4"] = members.pop("consumer3")
    members["consumer5"] = members.pop("consumer2")
    assert by_instance(kafka.assign(topics, members), members) == first


def test_rack_aware_static_members_persist_after_member_id_changes() -> None:
    assignor = RangeAssignor(prefer_rack_aware=True)
    brokers: list[str | None] = [ALL_RACKS[i % 3] for i in range(6)]  # 3 racks x replication 2
    topics = {
        t: TopicMetadata(5, replica_racks=replica_racks(5, 2, brokers))
        for t in ("topic1", "topic2")
    }
    both = ["topic1", "topic2"]
    members = {
        f"consumer{i}": MemberSubscription(both, instance_id=f"instance{i}", rack=ALL_RACKS[i - 1])
        for i in (1, 2, 3)
    }
    first = by_instance(sets(assignor.assign(GroupSubscription(topics, members))), members)
    assert first == expect(
        {
            "instance1": "topic1-0, topic1-2, topic2-0, topic2-2",
            "instance2": "topic1-1, topic1-3, topic2-1, topic2-3",
            "instance3": "topic1-4, topic2-4",
        }
    )
    members["consumer4"] = members.pop("consumer3")
    members["consumer5"] = members.pop("consumer2")
    assert by_instance(sets(assignor.assign(GroupSubscription(topics, members))), members) == first


# -- Kafka's rack-aware cases (verifyRackAssignment) ---------------------------------------------


def verify_rack_assignment(
    assignor: RangeAssignor,
    topics: Mapping[str, int],
    replication: int,
    broker_racks: Sequence[str | None],
    consumer_racks: Sequence[str | None],
    consumer_topics: Sequence[Sequence[str]],
    expected: Sequence[str],
    mismatches: int,
) -> None:
    """Kafka's ``verifyRackAssignment``: consumers ``consumer0..``; ``mismatches`` (unless -1) is the
    number of assigned partitions without a replica on their consumer's rack."""
    metadata = {}
    next_index = 0
    for topic, count in topics.items():
        metadata[topic] = TopicMetadata(
            count, replica_racks=replica_racks(count, replication, broker_racks, next_index)
        )
        next_index += count
    members = {
        f"consumer{i}": MemberSubscription(ts, rack=rack)
        for i, (ts, rack) in enumerate(zip(consumer_topics, consumer_racks, strict=True))
    }
    assignment = assignor.assign(GroupSubscription(metadata, members))
    assert sets(assignment) == expect({f"consumer{i}": e for i, e in enumerate(expected)})
    if mismatches >= 0:
        counted = 0
        for member, sub in members.items():
            if sub.rack is None:
                continue
            for tp in assignment.partitions(member):
                replicas = metadata[tp.topic].replica_racks
                assert replicas is not None
                counted += sub.rack not in replicas[tp.partition]
        assert counted == mismatches


def verify_non_rack_aware(
    topics: Mapping[str, int], consumer_topics: Sequence[Sequence[str]], expected: Sequence[str]
) -> None:
    """The combinations where rack matching is not used, or cannot change anything."""
    plain = RangeAssignor()
    verify_rack_assignment(plain, topics, 3, null_racks(3), racks(3), consumer_topics, expected, -1)
    verify_rack_assignment(plain, topics, 3, racks(3), null_racks(3), consumer_topics, expected, -1)
    verify_rack_assignment(plain, topics, 3, racks(3), racks(3), consumer_topics, expected, 0)
    verify_rack_assignment(plain, topics, 4, racks(4), racks(3), consumer_topics, expected, 0)
    verify_rack_assignment(
        plain, topics, 3, racks(3), ["d", "e", "f"], consumer_topics, expected, -1
    )
    verify_rack_assignment(
        plain, topics, 3, racks(3), [None, "e", "f"], consumer_topics, expected, -1
    )
    preferring = RangeAssignor(prefer_rack_aware=True)
    verify_rack_assignment(preferring, topics, 3, racks(3), racks(3), consumer_topics, expected, 0)


def test_rack_aware_assignment_with_uniform_subscription() -> None:
    topics = {"t1": 6, "t2": 7, "t3": 2}
    consumer_topics = [["t1", "t2", "t3"]] * 3
    verify_non_rack_aware(
        topics,
        consumer_topics,
        [
            "t1-0, t1-1, t2-0, t2-1, t2-2, t3-0",
            "t1-2, t1-3, t2-3, t2-4, t3-1",
            "t1-4, t1-5, t2-5, t2-6",
        ],
    )
    assignor = RangeAssignor()
    # Lower replication: racks hold a subset of the partitions, matched on a best-effort basis.
    verify_rack_assignment(
        assignor, topics, 1, racks(3), racks(3), consumer_topics,
        ["t1-0, t1-3, t2-0, t2-3, t2-6", "t1-1, t1-4, t2-1, t2-4, t3-0", "t1-2, t1-5, t2-2, t2-5, t3-1"], 0,
    )  # fmt: skip
    verify_rack_assignment(
        assignor, topics, 2, racks(3), racks(3), consumer_topics,
        ["t1-0, t1-2, t2-0, t2-2, t2-3, t3-1", "t1-1, t1-3, t2-1, t2-4, t3-0", "t1-4, t1-5, t2-5, t2-6"], 1,
    )  # fmt: skip
    # One consumer on a rack with no partitions.
    verify_rack_assignment(
        assignor, topics, 3, racks(2), racks(3), consumer_topics,
        ["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0", "t1-2, t1-3, t2-3, t2-4, t3-1", "t1-4, t1-5, t2-5, t2-6"], 4,
    )  # fmt: skip


def test_rack_aware_assignment_with_non_equal_subscription() -> None:
    topics = {"t1": 6, "t2": 7, "t3": 2}
    all_topics = ["t1", "t2", "t3"]
    consumer_topics = [all_topics, all_topics, ["t1", "t3"]]
    verify_non_rack_aware(
        topics,
        consumer_topics,
        [
            "t1-0, t1-1, t2-0, t2-1, t2-2, t2-3, t3-0",
            "t1-2, t1-3, t2-4, t2-5, t2-6, t3-1",
            "t1-4, t1-5",
        ],
    )
    assignor = RangeAssignor()
    verify_rack_assignment(
        assignor, topics, 1, racks(3), racks(3), consumer_topics,
        ["t1-0, t1-3, t2-0, t2-2, t2-3, t2-6", "t1-1, t1-4, t2-1, t2-4, t2-5, t3-0", "t1-2, t1-5, t3-1"], 2,
    )  # fmt: skip
    verify_rack_assignment(
        assignor, topics, 2, racks(3), racks(3), consumer_topics,
        ["t1-0, t1-2, t2-0, t2-2, t2-3, t2-5, t3-1", "t1-1, t1-3, t2-1, t2-4, t2-6, t3-0", "t1-4, t1-5"], 0,
    )  # fmt: skip
    verify_rack_assignment(
        assignor, topics, 3, racks(2), racks(3), consumer_topics,
        ["t1-0, t1-1, t2-0, t2-1, t2-2, t2-3, t3-0", "t1-2, t1-3, t2-4, t2-5, t2-6, t3-1", "t1-4, t1-5"], 2,
    )  # fmt: skip


def test_rack_aware_assignment_prioritises_co_partitioning() -> None:
    topics = {"t1": 5, "t2": 5, "t3": 5}
    consumer_topics = [["t1", "t2", "t3"]] * 3
    plain = [
        "t1-0, t1-1, t2-0, t2-1, t3-0, t3-1",
        "t1-2, t1-3, t2-2, t2-3, t3-2, t3-3",
        "t1-4, t2-4, t3-4",
    ]
    verify_non_rack_aware(topics, consumer_topics, plain)
    assignor = RangeAssignor()
    verify_rack_assignment(assignor, topics, 1, racks(3), racks(3), consumer_topics, plain, 10)
    verify_rack_assignment(assignor, topics, 2, racks(3), racks(3), consumer_topics, plain, 5)
    verify_rack_assignment(assignor, topics, 3, racks(2), racks(3), consumer_topics, plain, 3)


def test_rack_aware_assignment_with_uniform_partitions_non_equal_subscription() -> None:
    topics = {"t1": 5, "t2": 5, "t3": 5}
    all_topics = ["t1", "t2", "t3"]
    consumer_topics = [all_topics, all_topics, ["t1", "t3"]]
    verify_non_rack_aware(
        topics,
        consumer_topics,
        [
            "t1-0, t1-1, t2-0, t2-1, t2-2, t3-0, t3-1",
            "t1-2, t1-3, t2-3, t2-4, t3-2, t3-3",
            "t1-4, t3-4",
        ],
    )
    assignor = RangeAssignor()
    # Co-partitioning wins over rack alignment for the topics with equal subscriptions (t1, t3).
    verify_rack_assignment(
        assignor, topics, 1, racks(3), racks(3), consumer_topics,
        ["t1-0, t1-1, t2-0, t2-1, t2-4, t3-0, t3-1", "t1-2, t1-3, t2-2, t2-3, t3-2, t3-3", "t1-4, t3-4"], 9,
    )  # fmt: skip
    verify_rack_assignment(
        assignor, topics, 2, racks(3), racks(3), consumer_topics,
        ["t1-2, t2-0, t2-1, t2-3, t3-2", "t1-0, t1-3, t2-2, t2-4, t3-0, t3-3", "t1-1, t1-4, t3-1, t3-4"], 0,
    )  # fmt: skip
    verify_rack_assignment(
        assignor, topics, 3, racks(2), racks(3), consumer_topics,
        ["t1-0, t1-1, t2-0, t2-1, t2-2, t3-0, t3-1", "t1-2, t1-3, t2-3, t2-4, t3-2, t3-3", "t1-4, t3-4"], 2,
    )  # fmt: skip


def test_rack_aware_assignment_with_co_partitioning() -> None:
    assignor = RangeAssignor()
    topics = {"t1": 6, "t2": 6, "t3": 2, "t4": 2}
    consumer_racks: list[str | None] = ["a", "b", "b", "a"]
    consumer_topics = [["t1", "t2"], ["t1", "t2"], ["t3", "t4"], ["t3", "t4"]]
    plain = [
        "t1-0, t1-1, t1-2, t2-0, t2-1, t2-2",
        "t1-3, t1-4, t1-5, t2-3, t2-4, t2-5",
        "t3-0, t4-0",
        "t3-1, t4-1",
    ]
    verify_rack_assignment(
        assignor, topics, 3, racks(2), consumer_racks, consumer_topics, plain, -1
    )
    verify_rack_assignment(assignor, topics, 2, racks(2), consumer_racks, consumer_topics, plain, 0)
    verify_rack_assignment(
        assignor, topics, 1, racks(2), consumer_racks, consumer_topics,
        ["t1-0, t1-2, t1-4, t2-0, t2-2, t2-4", "t1-1, t1-3, t1-5, t2-1, t2-3, t2-5", "t3-1, t4-1", "t3-0, t4-0"], 0,
    )  # fmt: skip

    everything = [["t1", "t2", "t3", "t4"]] * 4
    plain = [
        "t1-0, t1-1, t2-0, t2-1, t3-0, t4-0",
        "t1-2, t1-3, t2-2, t2-3, t3-1, t4-1",
        "t1-4, t2-4",
        "t1-5, t2-5",
    ]
    verify_rack_assignment(assignor, topics, 3, racks(2), consumer_racks, everything, plain, -1)
    verify_rack_assignment(assignor, topics, 2, racks(2), consumer_racks, everything, plain, 0)
    verify_rack_assignment(
        assignor, topics, 1, racks(2), consumer_racks, everything,
        ["t1-0, t1-2, t2-0, t2-2, t3-0, t4-0", "t1-1, t1-3, t2-1, t2-3, t3-1, t4-1", "t1-5, t2-5", "t1-4, t2-4"], 0,
    )  # fmt: skip
    verify_rack_assignment(
        assignor, topics, 1, racks(3), consumer_racks, everything,
        ["t1-0, t1-3, t2-0, t2-3, t3-0, t4-0", "t1-1, t1-4, t2-1, t2-4, t3-1, t4-1", "t1-2, t2-2", "t1-5, t2-5"], 6,
    )  # fmt: skip


def test_co_partitioned_assignment_with_same_subscription() -> None:
    topics = {"t1": 6, "t2": 6, "t3": 2, "t4": 2, "t5": 4, "t6": 4}
    subscribed = ["t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9"]  # t7..t9 have no metadata
    consumer_topics = [subscribed] * 3
    consumer_racks: list[str | None] = ["a", "b", "c"]
    plain = [
        "t1-0, t1-1, t2-0, t2-1, t3-0, t4-0, t5-0, t5-1, t6-0, t6-1",
        "t1-2, t1-3, t2-2, t2-3, t3-1, t4-1, t5-2, t6-2",
        "t1-4, t1-5, t2-4, t2-5, t5-3, t6-3",
    ]
    verify_rack_assignment(
        RangeAssignor(), topics, 3, null_racks(3), consumer_racks, consumer_topics, plain, -1
    )
    preferring = RangeAssignor(prefer_rack_aware=True)
    verify_rack_assignment(
        preferring, topics, 3, racks(3), consumer_racks, consumer_topics, plain, 0
    )
    rack_aware = [
        "t1-0, t1-2, t2-0, t2-2, t3-0, t4-0, t5-1, t6-1",
        "t1-1, t1-3, t2-1, t2-3, t3-1, t4-1, t5-2, t6-2",
        "t1-4, t1-5, t2-4, t2-5, t5-0, t5-3, t6-0, t6-3",
    ]
    verify_rack_assignment(
        preferring, topics, 2, racks(3), consumer_racks, consumer_topics, rack_aware, 0
    )


@pytest.mark.parametrize(
    ("consumer_racks", "partition_racks", "on_subset", "expected", "preferred"),
    [
        (set(), set(), False, False, False),
        (set(), {"a", "b", "c"}, False, False, False),
        ({"a", "b", "c"}, set(), None, False, False),
        ({"d"}, {"a", "b", "c"}, False, False, False),
        ({"a", "b", "c"}, {"a", "b", "c"}, False, False, True),
        ({"a", "b"}, {"a", "b", "c"}, False, False, True),
        ({"a", "d"}, {"a", "b", "c"}, False, False, True),
        ({"a", "b", "c"}, {"a", "b", "c"}, True, True, True),
        ({"a", "b"}, {"a", "b", "c"}, True, True, True),
        ({"a", "d"}, {"a", "b", "c"}, True, True, True),
    ],
)
def test_use_rack_aware_assignment(
    consumer_racks: set[str],
    partition_racks: set[str],
    on_subset: bool | None,
    expected: bool,
    preferred: bool,
) -> None:
    """Kafka's testUseRackAwareAssignment: racks must meet, and some partition must miss a rack."""
    all_racks = ("a", "b", "c")
    if on_subset is None:
        per_partition: list[frozenset[str]] = []
    elif on_subset:
        per_partition = [frozenset({all_racks[i % 3]}) for i in range(10)]
    else:
        per_partition = [frozenset(all_racks)] * 10
    assert use_rack_aware_assignment(consumer_racks, partition_racks, per_partition) is expected
    assert (
        use_rack_aware_assignment(consumer_racks, partition_racks, per_partition, prefer=True)
        is preferred
    )


# -- behaviour beyond Kafka's test list ----------------------------------------------------------


def test_single_partition_topics_all_land_on_first_consumer_unlike_roundrobin() -> None:
    topics = {f"t{i}": 1 for i in range(10)}
    members = {c: MemberSubscription(list(topics)) for c in ("C0", "C1", "C2")}
    group = GroupSubscription(topics, members)
    assert RangeAssignor().assign(group).counts() == {"C0": 10, "C1": 0, "C2": 0}
    assert RoundRobinAssignor().assign(group).counts() == {"C0": 4, "C1": 3, "C2": 3}


def test_member_order_is_java_utf16_order() -> None:
    # By code point U+FF5E < U+10000, but Java compares UTF-16 units: U+10000 is 0xD800 0xDC00,
    # which sorts before 0xFF5E. Python's own sort would put the other member first.
    supplementary, bmp = "c\U00010000", "c\uff5e"
    assert sorted([supplementary, bmp]) == [bmp, supplementary]
    group = GroupSubscription(
        {"t": 2}, {bmp: MemberSubscription(["t"]), supplementary: MemberSubscription(["t"])}
    )
    assert sets(RangeAssignor().assign(group)) == {supplementary: {"t-0"}, bmp: {"t-1"}}


def test_range_ignores_owned_partitions() -> None:
    topics = {"t": 4}
    fresh = GroupSubscription(topics, {m: MemberSubscription(["t"]) for m in ("A", "B")})
    owned = GroupSubscription(
        topics,
        {
            "A": MemberSubscription(["t"], owned=["t-3"]),
            "B": MemberSubscription(["t"], owned=["t-0"]),
        },
    )
    assert RangeAssignor().assign(owned) == RangeAssignor().assign(fresh)


def test_rack_mode_keeps_per_topic_counts_of_plain_range() -> None:
    brokers: list[str | None] = ["a", "b", "c"]
    topics = {"t": TopicMetadata(7, replica_racks=replica_racks(7, 1, brokers))}
    members = {f"C{i}": MemberSubscription(["t"], rack=r) for i, r in enumerate("abc")}
    group = GroupSubscription(topics, members)
    result = RangeAssignor().assign(group)
    assert sorted(result.counts().values(), reverse=True) == [3, 2, 2]
    replicas = replica_racks(7, 1, brokers)
    for member, sub in members.items():  # every partition on its consumer's rack
        assert all(sub.rack in replicas[tp.partition] for tp in result.partitions(member))


@pytest.mark.parametrize(
    ("partitions", "consumers", "plain", "ceil"),
    [
        (4, 2, [2, 2], [2, 2]),
        (4, 3, [2, 1, 1], [2, 2, 0]),  # seed 003: with 3 threads the third one idles
        (10, 4, [3, 3, 2, 2], [3, 3, 3, 1]),
        (2, 5, [1, 1, 0, 0, 0], [1, 1, 0, 0, 0]),
        (0, 2, [0, 0], [0, 0]),
    ],
)
def test_split_sizes(partitions: int, consumers: int, plain: list[int], ceil: list[int]) -> None:
    assert range_split(partitions, consumers).tolist() == plain
    assert ceil_split(partitions, consumers).tolist() == ceil


def test_range_ceil_contiguous_blocks_of_ceiling_size() -> None:
    topics = {"report-log": 4, "other": 5}
    members = {m: MemberSubscription(["report-log", "other"]) for m in ("node1", "node2", "node3")}
    result = sets(RangeCeilAssignor().assign(GroupSubscription(topics, members)))
    assert result == expect(
        {
            "node1": "report-log-0, report-log-1, other-0, other-1",
            "node2": "report-log-2, report-log-3, other-2, other-3",
            "node3": "other-4",
        }
    )


def test_duplicate_instance_ids_fall_back_to_member_id_order() -> None:
    # Kafka's coordinator never lets two live members share a group.instance.id (the newer fences
    # the older; `coordkit assign` rejects such input). The assignor itself stays deterministic.
    both = ["t"]
    members = {
        "m2": MemberSubscription(both, instance_id="same"),
        "m1": MemberSubscription(both, instance_id="same"),
        "m0": MemberSubscription(both),
    }
    assert sets(RangeAssignor().assign(GroupSubscription({"t": 3}, members))) == {
        "m1": {"t-0"},
        "m2": {"t-1"},
        "m0": {"t-2"},
    }

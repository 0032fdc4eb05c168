"""Kafka's ``sticky`` assignor: Kafka's own test scenarios, and a differential test against a direct
transcription of Kafka's ``AbstractStickyAssignor`` (Kafka 3.5), kept in
``harness/kafka_sticky_reference.py``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordkit.plugins import get_plugin_manager
from coordkit.strategies.assignment import (
    DEFAULT_GENERATION,
    GroupAssignment,
    GroupSubscription,
    MemberSubscription,
    TopicMetadata,
)
from coordkit_assignors.sticky import CooperativeStickyAssignor, StickyAssignor
from coordkit_assignors.sticky_general import water_fill
from coordkit_assignors.sticky_java import (
    JavaHashOrder,
    hashmap_iteration_order,
    java_string_hash,
    topic_partition_hash,
)
from harness.kafka_sticky_reference import KafkaStickyReference, kafka_cooperative
from harness.vectors import kafka_vectors

TP = tuple[str, int]
DIFF_SETTINGS = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------


def group_of(
    topics: Mapping[str, int | TopicMetadata], members: Mapping[str, MemberSubscription]
) -> GroupSubscription:
    return GroupSubscription(topics, members)


def sub(
    topics: Sequence[str], owned: Iterable[str] = (), generation: int = 1, rack: str | None = None
) -> MemberSubscription:
    return MemberSubscription(topics, owned=list(owned), generation=generation, rack=rack)


def strings(result: GroupAssignment) -> dict[str, list[str]]:
    return result.as_strings()


def as_sets(result: GroupAssignment) -> dict[str, set[TP]]:
    return {m: {(tp.topic, tp.partition) for tp in result.partitions(m)} for m in result}


def withheld_sets(result: GroupAssignment) -> dict[str, set[TP]]:
    return {m: {(tp.topic, tp.partition) for tp in result.withheld(m)} for m in result}


def assert_valid_and_balanced(group: GroupSubscription, result: GroupAssignment) -> None:
    """Kafka's ``verifyValidityAndBalance``: only subscribed topics, no partition twice, and any
    two members differing by two or more share no topic among the larger one's partitions."""
    assert set(result) == set(group.members)
    seen: set[TP] = set()
    for member in result:
        for tp in result.partitions(member):
            assert tp.topic in group.members[member].topics
            assert (tp.topic, tp.partition) not in seen
            seen.add((tp.topic, tp.partition))
    members = sorted(result)
    for i, a in enumerate(members):
        for b in members[i + 1 :]:
            big, small = (a, b) if result.count(a) > result.count(b) else (b, a)
            if result.count(big) - result.count(small) <= 1:
                continue
            assert not {tp.topic for tp in result.partitions(big)} & set(
                group.members[small].topics
            ), f"{big} ({result.count(big)}) could give {small} ({result.count(small)}) a partition"


def fully_balanced(result: GroupAssignment) -> bool:
    counts = result.counts().values()
    return max(counts) - min(counts) <= 1


def resubscribe(
    group: GroupSubscription,
    result: GroupAssignment,
    generation: int = 1,
    topics: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, MemberSubscription]:
    """Every member now owns what ``result`` gave it."""
    return {
        m: sub(
            topics[m] if topics else s.topics,
            [str(tp) for tp in result.partitions(m)],
            generation,
            s.rack,
        )
        for m, s in group.members.items()
    }


def name(prefix: str, i: int, width: int) -> str:
    """Kafka's test names: ``getConsumerName(i, max)`` pads with zeros."""
    return prefix + str(i).zfill(len(str(width)))


STICKY = StickyAssignor()


# ---------------------------------------------------------------------------------------------
# Registry and vectors
# ---------------------------------------------------------------------------------------------


def test_registered_with_kafka_names_and_protocols() -> None:
    assignors = get_plugin_manager().assignors
    sticky = assignors.get("sticky")
    assert sticky.name == "sticky"
    assert [p.value for p in sticky.protocols] == ["eager"]
    cooperative = assignors.get("cooperative-sticky")
    assert [p.value for p in cooperative.protocols] == ["cooperative", "eager"]


def test_kafka_vector_s1() -> None:
    vectors = kafka_vectors()["sticky_fresh"]
    assert vectors
    for vector in vectors:
        group = group_of(vector["partitions"], {m: sub(ts) for m, ts in vector["subs"].items()})
        assert strings(STICKY.assign(group)) == vector["expected"], vector["id"]


# ---------------------------------------------------------------------------------------------
# Kafka's AbstractStickyAssignorTest, ported
# ---------------------------------------------------------------------------------------------


def test_one_consumer_no_topic() -> None:
    result = STICKY.assign(group_of({}, {"consumer": sub([])}))
    assert strings(result) == {"consumer": []}


def test_one_consumer_nonexistent_topic() -> None:
    result = STICKY.assign(group_of({"topic": 0}, {"consumer": sub(["topic"])}))
    assert strings(result) == {"consumer": []}
    result = STICKY.assign(group_of({}, {"consumer": sub(["topic"])}))
    assert strings(result) == {"consumer": []}


def test_one_consumer_one_topic() -> None:
    result = STICKY.assign(group_of({"topic": 3}, {"consumer": sub(["topic"])}))
    assert strings(result) == {"consumer": ["topic-0", "topic-1", "topic-2"]}


def test_only_assigns_partitions_from_subscribed_topics() -> None:
    group = group_of(
        {"topic": 2}, {"consumer": sub(["topic"], ["topic-0", "topic-1", "other-0", "other-1"])}
    )
    assert strings(STICKY.assign(group)) == {"consumer": ["topic-0", "topic-1"]}


def test_one_consumer_multiple_topics() -> None:
    group = group_of({"topic1": 1, "topic2": 2}, {"consumer": sub(["topic1", "topic2"])})
    assert strings(STICKY.assign(group)) == {"consumer": ["topic1-0", "topic2-0", "topic2-1"]}


def test_two_consumers_one_topic_one_partition() -> None:
    result = STICKY.assign(
        group_of({"topic": 1}, {"consumer1": sub(["topic"]), "consumer2": sub(["topic"])})
    )
    assert sorted(result.counts().values()) == [0, 1]


def test_two_consumers_one_topic_two_partitions() -> None:
    result = STICKY.assign(
        group_of({"topic": 2}, {"consumer1": sub(["topic"]), "consumer2": sub(["topic"])})
    )
    assert strings(result) == {"consumer1": ["topic-0"], "consumer2": ["topic-1"]}


def test_multiple_consumers_mixed_topic_subscriptions() -> None:
    group = group_of(
        {"topic1": 3, "topic2": 2},
        {
            "consumer1": sub(["topic1"]),
            "consumer2": sub(["topic1", "topic2"]),
            "consumer3": sub(["topic1"]),
        },
    )
    assert strings(STICKY.assign(group)) == {
        "consumer1": ["topic1-0", "topic1-2"],
        "consumer2": ["topic2-0", "topic2-1"],
        "consumer3": ["topic1-1"],
    }


def test_two_consumers_two_topics_six_partitions() -> None:
    both = ["topic1", "topic2"]
    group = group_of({"topic1": 3, "topic2": 3}, {"consumer1": sub(both), "consumer2": sub(both)})
    assert strings(STICKY.assign(group)) == {
        "consumer1": ["topic1-0", "topic1-2", "topic2-1"],
        "consumer2": ["topic1-1", "topic2-0", "topic2-2"],
    }


def test_consumer_owning_min_quota_expected_max_quota() -> None:
    both = ["topic1", "topic2"]
    group = group_of(
        {"topic1": 2, "topic2": 3},
        {
            "consumer1": sub(both, ["topic1-0", "topic2-1"]),
            "consumer2": sub(both, ["topic1-1", "topic2-2"]),
        },
    )
    assert strings(STICKY.assign(group)) == {
        "consumer1": ["topic1-0", "topic2-0", "topic2-1"],
        "consumer2": ["topic1-1", "topic2-2"],
    }


def test_max_quota_consumers_more_than_expected_max_capacity_members() -> None:
    # Which of consumer1/consumer2 keeps two partitions follows Java's HashMap order (consumer2 first).
    both = ["topic1", "topic2"]
    group = group_of(
        {"topic1": 2, "topic2": 2},
        {
            "consumer1": sub(both, ["topic1-0", "topic2-0"]),
            "consumer2": sub(both, ["topic1-1", "topic2-1"]),
            "consumer3": sub(both),
        },
    )
    assert strings(STICKY.assign(group)) == {
        "consumer1": ["topic1-0"],
        "consumer2": ["topic1-1", "topic2-1"],
        "consumer3": ["topic2-0"],
    }


def test_all_consumers_are_under_min_quota() -> None:
    both = ["topic1", "topic2"]
    group = group_of(
        {"topic1": 2, "topic2": 3},
        {
            "consumer1": sub(both, ["topic1-0"]),
            "consumer2": sub(both, ["topic1-1"]),
            "consumer3": sub(both),
        },
    )
    assert strings(STICKY.assign(group)) == {
        "consumer1": ["topic1-0", "topic2-1"],
        "consumer2": ["topic1-1", "topic2-2"],
        "consumer3": ["topic2-0"],
    }


def test_add_remove_consumer_one_topic() -> None:
    first = STICKY.assign(group_of({"topic": 3}, {"consumer1": sub(["topic"])}))
    assert strings(first) == {"consumer1": ["topic-0", "topic-1", "topic-2"]}
    second = STICKY.assign(
        group_of(
            {"topic": 3},
            {
                "consumer1": sub(["topic"], first.as_strings()["consumer1"]),
                "consumer2": sub(["topic"]),
            },
        )
    )
    assert strings(second) == {"consumer1": ["topic-0", "topic-1"], "consumer2": ["topic-2"]}
    third = STICKY.assign(
        group_of({"topic": 3}, {"consumer2": sub(["topic"], second.as_strings()["consumer2"])})
    )
    assert strings(third) == {"consumer2": ["topic-0", "topic-1", "topic-2"]}


def test_topic_balance_after_reassignment() -> None:
    both = ["topic1", "topic2"]
    topics = {"topic1": 12, "topic2": 12}

    def per_topic_counts(result: GroupAssignment) -> set[int]:
        return {len(ps) for m in result for ps in result.by_topic(m).values()}

    group = group_of(topics, {"consumer1": sub(both)})
    result = STICKY.assign(group)
    assert per_topic_counts(result) == {12}
    group = group_of(topics, {**resubscribe(group, result), "consumer2": sub(both)})
    result = STICKY.assign(group)
    assert per_topic_counts(result) == {6}
    group = group_of(
        topics, {**resubscribe(group, result), "consumer3": sub(both), "consumer4": sub(both)}
    )
    result = STICKY.assign(group)
    assert per_topic_counts(result) == {3}
    kept = resubscribe(group, result)
    group = group_of(topics, {m: kept[m] for m in ("consumer3", "consumer4")})
    result = STICKY.assign(group)
    assert per_topic_counts(result) == {6}
    assert_valid_and_balanced(group, result)


def test_add_remove_two_consumers_two_topics() -> None:
    both = ["topic1", "topic2"]
    topics = {"topic1": 3, "topic2": 4}
    group = group_of(topics, {"consumer1": sub(both), "consumer2": sub(both)})
    result = STICKY.assign(group)
    assert strings(result) == {
        "consumer1": ["topic1-0", "topic1-2", "topic2-1", "topic2-3"],
        "consumer2": ["topic1-1", "topic2-0", "topic2-2"],
    }
    group = group_of(
        topics, {**resubscribe(group, result), "consumer3": sub(both), "consumer4": sub(both)}
    )
    result = STICKY.assign(group)
    assert strings(result) == {
        "consumer1": ["topic1-0", "topic2-1"],
        "consumer2": ["topic1-1", "topic2-0"],
        "consumer3": ["topic1-2", "topic2-3"],
        "consumer4": ["topic2-2"],
    }
    kept = resubscribe(group, result)
    result = STICKY.assign(group_of(topics, {m: kept[m] for m in ("consumer3", "consumer4")}))
    assert strings(result) == {
        "consumer3": ["topic1-0", "topic1-2", "topic2-1", "topic2-3"],
        "consumer4": ["topic1-1", "topic2-0", "topic2-2"],
    }


def test_poor_round_robin_assignment_scenario() -> None:
    topics = {f"topic{i}": (i % 2) + 1 for i in range(1, 6)}
    all5 = list(topics)
    odd = ["topic1", "topic3", "topic5"]
    group = group_of(
        topics,
        {
            "consumer1": sub(all5),
            "consumer2": sub(odd),
            "consumer3": sub(odd),
            "consumer4": sub(all5),
        },
    )
    result = STICKY.assign(group)
    assert_valid_and_balanced(group, result)
    assert fully_balanced(result)


def test_add_remove_topic_two_consumers() -> None:
    group = group_of({"topic": 3}, {"consumer1": sub(["topic"]), "consumer2": sub(["topic"])})
    first = STICKY.assign(group)
    assert sorted(first.counts().values()) == [1, 2]
    topics = {"topic": 3, "topic2": 3}
    group = group_of(
        topics,
        resubscribe(
            group,
            first,
            topics={"consumer1": ["topic", "topic2"], "consumer2": ["topic", "topic2"]},
        ),
    )
    second = STICKY.assign(group)
    assert sorted(second.counts().values()) == [3, 3]
    for member in ("consumer1", "consumer2"):
        assert set(first.partitions(member)) <= set(second.partitions(member))
    group = group_of(
        {"topic2": 3},
        resubscribe(group, second, topics={"consumer1": ["topic2"], "consumer2": ["topic2"]}),
    )
    third = STICKY.assign(group)
    assert sorted(third.counts().values()) == [1, 2]
    for member in ("consumer1", "consumer2"):
        assert set(third.partitions(member)) <= set(second.partitions(member))


def test_reassignment_after_one_consumer_leaves_moves_only_its_partitions() -> None:
    topics = {name("t", i, 20): i for i in range(1, 20)}
    members = {
        name("c", i, 20): sub([name("t", j, 20) for j in range(1, i + 1)]) for i in range(1, 20)
    }
    group = group_of(topics, members)
    first = STICKY.assign(group)
    assert_valid_and_balanced(group, first)
    members = resubscribe(group, first)
    del members["c10"]
    group = group_of(topics, members)
    second = STICKY.assign(group)
    assert_valid_and_balanced(group, second)
    assert second == STICKY.assign(group)  # deterministic
    for member in members:  # only c10's partitions move
        assert set(first.partitions(member)) <= set(second.partitions(member))
    moved = {tp for m in members for tp in set(second.partitions(m)) - set(first.partitions(m))}
    assert moved == set(first.partitions("c10"))


def test_reassignment_after_one_consumer_added() -> None:
    members = {name("c", i, 10): sub(["topic"]) for i in range(1, 10)}
    group = group_of({"topic": 20}, members)
    result = STICKY.assign(group)
    assert_valid_and_balanced(group, result)
    group = group_of({"topic": 20}, {**members, name("c", 10, 10): sub(["topic"])})
    result = STICKY.assign(group)
    assert_valid_and_balanced(group, result)
    assert fully_balanced(result)


def test_same_subscriptions_after_member_leaves_members_keep_their_partitions() -> None:
    topics = {name("t", i, 15): i for i in range(1, 15)}
    members = {name("c", i, 9): sub(list(topics)) for i in range(1, 9)}
    group = group_of(topics, members)
    first = STICKY.assign(group)
    members = resubscribe(group, first)
    del members[name("c", 5, 9)]
    group = group_of(topics, members)
    second = STICKY.assign(group)
    assert_valid_and_balanced(group, second)
    for member in members:
        assert set(first.partitions(member)) <= set(second.partitions(member))


def test_large_assignment_with_multiple_consumers_leaving_and_random_subscription() -> None:
    import random

    rand = random.Random(7)
    topics = {name("t", i, 40): rand.randint(1, 10) for i in range(40)}
    members = {
        name("c", i, 200): sub(
            [name("t", rand.randrange(40), 40) for _ in range(rand.randrange(20))] or ["t00"]
        )
        for i in range(200)
    }
    group = group_of(topics, members)
    result = STICKY.assign(group)
    assert_valid_and_balanced(group, result)
    members = resubscribe(group, result)
    for _ in range(50):
        members.pop(name("c", rand.randrange(200), 200), None)
    group = group_of(topics, members)
    result = STICKY.assign(group)
    assert_valid_and_balanced(group, result)


def test_new_subscription_keeps_assignment_valid() -> None:
    topics = {name("t", i, 5): 1 for i in range(1, 5)}
    members = {
        name("c", i, 3): sub([name("t", j, 5) for j in range(i, 3 * i - 1)] or []) for i in range(3)
    }
    group = group_of(topics, members)
    result = STICKY.assign(group)
    assert_valid_and_balanced(group, result)
    members = resubscribe(group, result)
    members["c0"] = sub(["t1"], [], 1)
    group = group_of(topics, members)
    assert_valid_and_balanced(group, STICKY.assign(group))


def test_move_existing_assignments() -> None:
    topics = {f"topic{i}": 1 for i in range(1, 7)}
    group = group_of(
        topics,
        {
            "consumer1": sub(["topic1", "topic2"], ["topic1-0"]),
            "consumer2": sub(["topic1", "topic2", "topic3", "topic4"], ["topic2-0", "topic3-0"]),
            "consumer3": sub(
                ["topic2", "topic3", "topic4", "topic5", "topic6"],
                ["topic4-0", "topic5-0", "topic6-0"],
            ),
        },
    )
    result = STICKY.assign(group)
    assert_valid_and_balanced(group, result)


def test_stickiness_when_potential_leader_leaves() -> None:
    members = {f"consumer{i}": sub(["topic1"]) for i in range(1, 5)}
    group = group_of({"topic1": 3}, members)
    first = STICKY.assign(group)
    assert max(first.counts().values()) == 1
    members = resubscribe(group, first)
    del members["consumer1"]
    group = group_of({"topic1": 3}, members)
    second = STICKY.assign(group)
    for member in members:
        assert second.count(member) == 1
        assert set(first.partitions(member)) <= set(second.partitions(member))


def test_static_member_rejoining_with_a_new_member_id_keeps_its_partitions() -> None:
    # Kafka's sticky assignor orders members by member id only (group.instance.id plays no part),
    # and a static member that restarts comes back with a new member id and its owned partitions.
    topics = {"t1": 4, "t2": 4}
    both = list(topics)
    members = {
        "m-1": MemberSubscription(both, instance_id="zeta"),
        "m-2": MemberSubscription(both, instance_id="alpha"),
        "m-3": MemberSubscription(both),
    }
    first = STICKY.assign(group_of(topics, members))
    assert strings(first) == strings(
        STICKY.assign(group_of(topics, {m: sub(both) for m in members}))
    )
    owned = {m: [str(tp) for tp in first.partitions(m)] for m in members}
    rejoined = {
        "m-1": MemberSubscription(both, instance_id="zeta", owned=owned["m-1"], generation=4),
        "m-9": MemberSubscription(both, instance_id="alpha", owned=owned["m-2"], generation=4),
        "m-3": MemberSubscription(both, owned=owned["m-3"], generation=4),
    }
    second = STICKY.assign(group_of(topics, rejoined))
    assert second.as_strings() == {"m-1": owned["m-1"], "m-9": owned["m-2"], "m-3": owned["m-3"]}


def test_assignment_updated_for_deleted_topic() -> None:
    group = group_of(
        {"topic1": 1, "topic3": 100}, {"consumer": sub(["topic1", "topic2", "topic3"])}
    )
    assert STICKY.assign(group).count("consumer") == 101


def test_no_exception_when_only_subscribed_topic_deleted() -> None:
    first = STICKY.assign(group_of({"topic": 3}, {"consumer": sub(["topic"])}))
    result = STICKY.assign(
        group_of({}, {"consumer": sub(["topic"], first.as_strings()["consumer"])})
    )
    assert strings(result) == {"consumer": []}


def test_owned_partitions_of_deleted_topic_are_dropped() -> None:
    group = group_of(
        {"t1": 2},
        {
            "a": sub(["t1", "gone"], ["t1-0", "gone-0", "gone-1", "t1-7"]),
            "b": sub(["t1", "gone"], ["t1-1"]),
        },
    )
    assert strings(STICKY.assign(group)) == {"a": ["t1-0"], "b": ["t1-1"]}


def test_all_consumers_reach_expected_quota_and_are_considered_filled() -> None:
    group = group_of(
        {"topic": 4},
        {
            "consumer1": sub(["topic"], ["topic-0", "topic-1"]),
            "consumer2": sub(["topic"], ["topic-2"]),
            "consumer3": sub(["topic"]),
        },
    )
    assert strings(STICKY.assign(group)) == {
        "consumer1": ["topic-0", "topic-1"],
        "consumer2": ["topic-2"],
        "consumer3": ["topic-3"],
    }


@pytest.mark.parametrize("stale_generation", [9, DEFAULT_GENERATION])
def test_owned_partitions_invalidated_for_consumer_with_stale_or_no_generation(
    stale_generation: int,
) -> None:
    both = ["topic", "topic2"]
    owned = ["topic-0", "topic-2", "topic2-1"]
    group = group_of(
        {"topic": 3, "topic2": 3},
        {"consumer1": sub(both, owned, 10), "consumer2": sub(both, owned, stale_generation)},
    )
    assert as_sets(STICKY.assign(group)) == {
        "consumer1": {("topic", 0), ("topic", 2), ("topic2", 1)},
        "consumer2": {("topic", 1), ("topic2", 0), ("topic2", 2)},
    }


def test_partition_claimed_by_two_members_in_same_generation_goes_to_neither() -> None:
    group = group_of(
        {"topic": 3},
        {
            "consumer1": sub(["topic"], ["topic-0", "topic-1"]),
            "consumer2": sub(["topic"], ["topic-0", "topic-2"]),
            "consumer3": sub(["topic"]),
        },
    )
    assert strings(STICKY.assign(group)) == {
        "consumer1": ["topic-1"],
        "consumer2": ["topic-2"],
        "consumer3": ["topic-0"],
    }


def test_partitions_assigned_to_highest_generation() -> None:
    three = ["topic", "topic2", "topic3"]
    group = group_of(
        {"topic": 3, "topic2": 3, "topic3": 3},
        {
            "consumer1": sub(three, ["topic-0", "topic2-0", "topic3-0"], 10),
            "consumer2": sub(three, ["topic-1", "topic2-1", "topic3-1"], 9),
            "consumer3": sub(three, ["topic2-1", "topic3-0", "topic3-2"], 8),
        },
    )
    assert as_sets(STICKY.assign(group)) == {
        "consumer1": {("topic", 0), ("topic2", 0), ("topic3", 0)},
        "consumer2": {("topic", 1), ("topic2", 1), ("topic3", 1)},
        "consumer3": {("topic", 2), ("topic2", 2), ("topic3", 2)},
    }


def test_no_reassignment_on_current_members() -> None:
    four = ["topic", "topic2", "topic3", "topic1"]
    group = group_of(
        {"topic": 3, "topic1": 3, "topic2": 3, "topic3": 3},
        {
            "consumer1": sub(four, [], DEFAULT_GENERATION),
            "consumer2": sub(four, ["topic-0", "topic2-0", "topic1-0"], 9),
            "consumer3": sub(four, ["topic3-2", "topic2-2", "topic1-1"], 8),
            "consumer4": sub(four, ["topic3-1", "topic-1", "topic-2"], 7),
        },
    )
    result = STICKY.assign(group)
    assert as_sets(result)["consumer1"] == {("topic1", 2), ("topic2", 1), ("topic3", 0)}
    assert fully_balanced(result)


def test_owned_partitions_invalidated_for_consumer_with_multiple_generations() -> None:
    both = ["topic", "topic2"]
    group = group_of(
        {"topic": 3, "topic2": 3},
        {
            "consumer1": sub(both, ["topic-0", "topic2-1", "topic-1"], 10),
            "consumer2": sub(both, ["topic-0", "topic2-1", "topic2-2"], 8),
        },
    )
    assert as_sets(STICKY.assign(group)) == {
        "consumer1": {("topic", 0), ("topic2", 1), ("topic", 1)},
        "consumer2": {("topic", 2), ("topic2", 2), ("topic2", 0)},
    }


@pytest.mark.parametrize(
    "order", [(1, 2, 3), (1, 3, 2), (2, 1, 3), (2, 3, 1), (3, 1, 2), (3, 2, 1)]
)
def test_subscription_not_equal_and_same_partition_with_three_generations(
    order: tuple[int, int, int],
) -> None:
    group = group_of(
        {"topic": 6, "topic1": 1},
        {
            "consumer1": sub(["topic"], ["topic-0", "topic-2"], order[0]),
            "consumer2": sub(["topic"], ["topic-1", "topic-2", "topic-3"], order[1]),
            "consumer3": sub(["topic"], ["topic-2", "topic-4", "topic-5"], order[2]),
            "consumer4": sub(["topic1"], ["topic1-0"], 2),
        },
    )
    result = STICKY.assign(group)
    total = sum(result.counts().values())
    assert total == 7 == len({tp for m in result for tp in result.partitions(m)})
    assert all(1 <= n <= 2 for n in result.counts().values())


def test_large_uniform_group_is_balanced() -> None:
    topics = {name("t", i, 50): 200 for i in range(50)}
    members = {name("c", i, 300): sub(list(topics)) for i in range(300)}
    group = group_of(topics, members)
    result = STICKY.assign(group)
    assert set(result.counts().values()) <= {33, 34}
    members = resubscribe(group, result)
    members.pop(name("c", 0, 300))
    second = STICKY.assign(group_of(topics, members))
    for member in members:  # nobody loses a partition when a member leaves
        assert set(result.partitions(member)) <= set(second.partitions(member))


def test_non_equal_subscription_large_group_is_valid_and_sticky() -> None:
    topics = {name("t", i, 100): 20 for i in range(100)}
    first_half, second_half = list(topics)[:50], list(topics)[50:]
    members = {
        name("c", i, 500): sub(first_half if i % 4 == 0 else second_half) for i in range(500)
    }
    group = group_of(topics, members)
    result = STICKY.assign(group)
    assert_valid_and_balanced(group, result)
    members = resubscribe(group, result)
    members.pop(name("c", 0, 500))
    group = group_of(topics, members)
    second = STICKY.assign(group)
    assert_valid_and_balanced(group, second)
    moved = sum(len(set(result.partitions(m)) - set(second.partitions(m))) for m in members)
    assert moved == 0


# ---------------------------------------------------------------------------------------------
# Rack-aware (KIP-881): Kafka's testRackAwareAssignmentWith{Uniform,NonEqual}Subscription
# ---------------------------------------------------------------------------------------------

ALL_RACKS = ["a", "b", "c", "d", "e", "f"]
RACK_TOPICS = [("t1", 6), ("t2", 7), ("t3", 2)]


def racks(n: int) -> list[str | None]:
    return [ALL_RACKS[i % len(ALL_RACKS)] for i in range(n)]


def null_racks(n: int) -> list[str | None]:
    return [None] * n


def rack_group(
    replication: int,
    broker_racks: Sequence[str | None],
    consumer_racks: Sequence[str | None],
    consumer_topics: Sequence[Sequence[str]],
    owned: Sequence[str] | None,
) -> tuple[GroupSubscription, dict[str, TopicMetadata]]:
    """Kafka's ``verifyRackAssignment`` set-up: replicas of partition i of a topic starting at
    broker offset o sit on brokers (i + j + o) % brokers; members are consumer0, consumer1, ..."""
    metas: dict[str, TopicMetadata] = {}
    offset = 0
    for topic, count in RACK_TOPICS:
        replica_racks = []
        for i in range(count):
            on = [broker_racks[(i + j + offset) % len(broker_racks)] for j in range(replication)]
            replica_racks.append(tuple(r for r in on if r is not None))
        metas[topic] = TopicMetadata(count, replica_racks=replica_racks)
        offset += count
    members = {
        f"consumer{i}": sub(
            topics,
            owned[i].split(", ") if owned and i < len(owned) else [],
            DEFAULT_GENERATION,
            consumer_racks[i],
        )
        for i, topics in enumerate(consumer_topics)
    }
    return group_of(metas, members), metas


def verify_rack_assignment(
    assignor: StickyAssignor | CooperativeStickyAssignor,
    replication: int,
    broker_racks: Sequence[str | None],
    consumer_racks: Sequence[str | None],
    consumer_topics: Sequence[Sequence[str]],
    owned: Sequence[str] | None,
    expected: Sequence[str],
    mismatched: int,
) -> None:
    group, metas = rack_group(replication, broker_racks, consumer_racks, consumer_topics, owned)
    result = assignor.assign(group)
    got = [
        ", ".join(sorted(result.as_strings()[f"consumer{i}"])) for i in range(len(consumer_topics))
    ]
    assert got == list(expected)
    if mismatched >= 0:
        count = 0
        for i, rack in enumerate(consumer_racks):
            if rack is None:
                continue
            for tp in result.partitions(f"consumer{i}"):
                replica_racks = metas[tp.topic].replica_racks
                assert replica_racks is not None
                count += rack not in replica_racks[tp.partition]
        assert count == mismatched


ALL3 = ["t1", "t2", "t3"]
UNIFORM = [
    "t1-0, t1-3, t2-0, t2-3, t2-6",
    "t1-1, t1-4, t2-1, t2-4, t3-0",
    "t1-2, t1-5, t2-2, t2-5, t3-1",
]
NON_EQUAL = [
    "t1-5, t2-0, t2-2, t2-4, t2-6",
    "t1-3, t2-1, t2-3, t2-5, t3-0",
    "t1-0, t1-1, t1-2, t1-4, t3-1",
]
MISALIGNED_OWNED = [
    "t1-0, t1-1, t1-2, t1-3, t1-4",
    "t1-5, t2-0, t2-1, t2-2, t2-3",
    "t2-4, t2-5, t2-6, t3-0, t3-1",
]
PREFER = StickyAssignor(prefer_rack_aware=True)
RACK_CASES = [
    # (assignor, replication, broker racks, consumer racks, expected, mismatched)
    (STICKY, 3, null_racks(3), racks(3), None, -1),
    (STICKY, 3, racks(3), null_racks(3), None, -1),
    (PREFER, 3, racks(3), racks(3), None, 0),
    (PREFER, 4, racks(4), racks(3), None, 0),
    (STICKY, 3, racks(3), racks(3), None, 0),
    (STICKY, 3, racks(3), ["d", "e", "f"], None, -1),
    (STICKY, 3, racks(3), [None, "e", "f"], None, -1),
]


@pytest.mark.parametrize("with_owned", [False, True])
@pytest.mark.parametrize(
    ("assignor", "replication", "brokers", "consumers", "expected", "mismatched"), RACK_CASES
)
def test_rack_aware_uniform_subscription_matches_non_rack_result_when_racks_cannot_help(
    assignor: StickyAssignor,
    replication: int,
    brokers: list[str | None],
    consumers: list[str | None],
    expected: None,
    mismatched: int,
    with_owned: bool,
) -> None:
    owned = UNIFORM if with_owned else None
    verify_rack_assignment(
        assignor, replication, brokers, consumers, [ALL3] * 3, owned, UNIFORM, mismatched
    )


@pytest.mark.parametrize("with_owned", [False, True])
@pytest.mark.parametrize(
    ("replication", "brokers", "mismatched"), [(1, racks(3), 0), (2, racks(3), 0), (3, racks(2), 5)]
)
def test_rack_aware_uniform_subscription(
    replication: int, brokers: list[str | None], mismatched: int, with_owned: bool
) -> None:
    owned = UNIFORM if with_owned else None
    verify_rack_assignment(
        STICKY, replication, brokers, racks(3), [ALL3] * 3, owned, UNIFORM, mismatched
    )


def test_rack_aware_uniform_subscription_improves_misaligned_ownership() -> None:
    verify_rack_assignment(STICKY, 1, racks(3), racks(3), [ALL3] * 3, MISALIGNED_OWNED, UNIFORM, 0)
    verify_rack_assignment(PREFER, 3, racks(3), racks(3), [ALL3] * 3, UNIFORM, UNIFORM, 0)


@pytest.mark.parametrize("with_owned", [False, True])
@pytest.mark.parametrize(
    ("assignor", "replication", "brokers", "consumers", "expected", "mismatched"), RACK_CASES
)
def test_rack_aware_non_equal_subscription_matches_non_rack_result_when_racks_cannot_help(
    assignor: StickyAssignor,
    replication: int,
    brokers: list[str | None],
    consumers: list[str | None],
    expected: None,
    mismatched: int,
    with_owned: bool,
) -> None:
    owned = NON_EQUAL if with_owned else None
    topics = [ALL3, ALL3, ["t1", "t3"]]
    verify_rack_assignment(
        assignor, replication, brokers, consumers, topics, owned, NON_EQUAL, mismatched
    )


@pytest.mark.parametrize(
    ("replication", "brokers", "expected", "mismatched"),
    [
        (
            1,
            racks(3),
            [
                "t1-3, t2-0, t2-2, t2-3, t2-6",
                "t1-4, t2-1, t2-4, t2-5, t3-0",
                "t1-0, t1-1, t1-2, t1-5, t3-1",
            ],
            4,
        ),
        (
            2,
            racks(3),
            [
                "t1-3, t2-0, t2-2, t2-5, t2-6",
                "t1-0, t2-1, t2-3, t2-4, t3-0",
                "t1-1, t1-2, t1-4, t1-5, t3-1",
            ],
            0,
        ),
        (3, racks(2), NON_EQUAL, 5),
    ],
)
def test_rack_aware_non_equal_subscription(
    replication: int, brokers: list[str | None], expected: list[str], mismatched: int
) -> None:
    topics = [ALL3, ALL3, ["t1", "t3"]]
    verify_rack_assignment(
        STICKY, replication, brokers, racks(3), topics, None, expected, mismatched
    )
    verify_rack_assignment(
        STICKY, replication, brokers, racks(3), topics, expected, expected, mismatched
    )


def test_rack_aware_constrained_never_leaves_a_member_below_min_quota() -> None:
    # consumer2's rack holds no replica; Kafka 3.5 would give both extras to rack-matching members
    # at minQuota and then fail ("doesn't reach minQuota"); coordkit keeps N % M extras.
    metas = {"t": TopicMetadata(4, replica_racks=[("a",), ("b",), ("a",), ("b",)])}
    group = group_of(
        metas,
        {
            "consumer0": sub(["t"], ["t-0"], 1, "a"),
            "consumer1": sub(["t"], ["t-1"], 1, "b"),
            "consumer2": sub(["t"], [], 1, "c"),
        },
    )
    result = STICKY.assign(group)
    assert sorted(result.counts().values()) == [1, 1, 2]
    assert ("t", 0) in as_sets(result)["consumer0"]
    assert ("t", 1) in as_sets(result)["consumer1"]


# ---------------------------------------------------------------------------------------------
# Java collection orders
# ---------------------------------------------------------------------------------------------


def test_java_string_hash_matches_java() -> None:
    # Values of String.hashCode() in Java (as unsigned 32-bit).
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("consumer1") == 3873962747
    assert java_string_hash("\U00010000") == (0xD800 * 31 + 0xDC00)  # two UTF-16 code units


def test_hashmap_order_of_kafka_test_consumers() -> None:
    keys = ["consumer1", "consumer2", "consumer3", "consumer4"]
    assert [keys[i] for i in hashmap_iteration_order(keys)] == [
        "consumer4",
        "consumer3",
        "consumer2",
        "consumer1",
    ]


def test_java_hash_set_resizes_and_keeps_insertion_order_within_buckets() -> None:
    table = JavaHashOrder()
    table.add("x", 16)  # bucket 0 of 16
    table.add("y", 0)  # bucket 0, inserted later
    table.add("z", 1)
    assert table.order() == ["x", "y", "z"]
    for i in range(20):
        table.add(i, 100 + i)
    assert table.capacity == 32  # 23 entries exceed 0.75 * 16
    assert table.order()[:2] == ["y", "z"]  # with 32 buckets "x" (hash 16) moves to bucket 16
    table.remove("y")
    assert table.first() == "z"
    assert topic_partition_hash(java_string_hash("t"), 0) == (31 * 31 + 116)


# ---------------------------------------------------------------------------------------------
# Water-filling equals Kafka's one-partition-at-a-time least-loaded choice
# ---------------------------------------------------------------------------------------------


@given(st.lists(st.integers(0, 40), min_size=1, max_size=12), st.integers(0, 120))
@settings(max_examples=300, deadline=None)
def test_water_fill_matches_one_by_one_least_loaded(counts: list[int], n: int) -> None:
    import numpy as np

    current = list(counts)
    expected = []
    for _ in range(n):
        pick = min(range(len(current)), key=lambda i: (current[i], i))
        expected.append(pick)
        current[pick] += 1
    assert water_fill(np.array(counts, dtype=np.int64), n).tolist() == expected


# ---------------------------------------------------------------------------------------------
# Differential: the columnar assignor equals the transcription of Kafka's Java
# ---------------------------------------------------------------------------------------------

TOPIC_POOL = ("t1", "t2", "t3", "topic")
MEMBER_POOL = ("c1", "c2", "c3", "c10", "consumer", "b", "B", "\uff5e", "\U00010000x", "c4")
RACK_POOL = ("a", "b", "c")


@st.composite
def groups(draw: st.DrawFn, racks_too: bool = False) -> tuple[GroupSubscription, bool]:
    topic_names = draw(st.lists(st.sampled_from(TOPIC_POOL), min_size=1, max_size=4, unique=True))
    counts = {t: draw(st.integers(0, 7)) for t in topic_names}
    metas: dict[str, TopicMetadata] = {}
    for t, count in counts.items():
        replica_racks = None
        if racks_too and draw(st.booleans()):
            replica_racks = [
                tuple(draw(st.lists(st.sampled_from(RACK_POOL), max_size=2, unique=True)))
                for _ in range(count)
            ]
        metas[t] = TopicMetadata(count, replica_racks=replica_racks)
    member_ids = draw(st.lists(st.sampled_from(MEMBER_POOL), min_size=1, max_size=7, unique=True))
    subscribable = [*topic_names, "ghost"]  # "ghost" has no metadata
    identical = draw(st.booleans())
    common = draw(st.lists(st.sampled_from(subscribable), min_size=1, max_size=4, unique=True))
    subscriptions = {
        m: common
        if identical
        else draw(st.lists(st.sampled_from(subscribable), min_size=1, max_size=4, unique=True))
        for m in member_ids
    }
    generations = {m: draw(st.sampled_from([DEFAULT_GENERATION, 1, 2, 3])) for m in member_ids}
    owned: dict[str, list[str]] = {m: [] for m in member_ids}
    for t, count in counts.items():
        for p in range(count):
            # at most two claimants per partition (Kafka's result for three depends on HashMap order)
            claimants = draw(st.lists(st.sampled_from(member_ids), max_size=2, unique=True))
            for m in claimants:
                owned[m].append(f"{t}-{p}")
    member_racks = {
        m: (draw(st.sampled_from([None, *RACK_POOL])) if racks_too else None) for m in member_ids
    }
    members = {
        m: sub(subscriptions[m], owned[m], generations[m], member_racks[m]) for m in member_ids
    }
    return group_of(metas, members), draw(st.booleans())


def reference_sets(assignment: Mapping[str, list[TP]]) -> dict[str, set[TP]]:
    return {m: set(ps) for m, ps in assignment.items()}


@given(groups())
@DIFF_SETTINGS
def test_matches_kafka_transcription(case: tuple[GroupSubscription, bool]) -> None:
    group, _ = case
    assert as_sets(StickyAssignor().assign(group)) == reference_sets(
        KafkaStickyReference().assign(group)
    )


@given(groups(racks_too=True))
@DIFF_SETTINGS
def test_matches_kafka_transcription_with_racks(case: tuple[GroupSubscription, bool]) -> None:
    group, prefer = case
    ours = StickyAssignor(prefer_rack_aware=prefer).assign(group)
    assert as_sets(ours) == reference_sets(KafkaStickyReference(prefer).assign(group))


@given(groups())
@DIFF_SETTINGS
def test_cooperative_matches_kafka_transcription(case: tuple[GroupSubscription, bool]) -> None:
    group, _ = case
    ours = CooperativeStickyAssignor().assign(group)
    assigned, withheld = kafka_cooperative(KafkaStickyReference(), group)
    assert as_sets(ours) == assigned
    assert withheld_sets(ours) == withheld


def _perturbed_case(rng: Any, with_racks: bool) -> tuple[GroupSubscription, bool]:
    """A group that rebalanced once, then changed: members left, joined, resubscribed, lost
    generations; owned partitions come from the first assignment (what Kafka sees in practice)."""
    topic_count = rng.randint(1, 8)
    sizes = {f"t{i}": rng.randint(1, 25) for i in range(topic_count)}
    metas = {}
    for topic, count in sizes.items():
        replica_racks = None
        if with_racks and rng.random() < 0.7:
            replica_racks = [tuple(rng.sample("abc", rng.randint(0, 2))) for _ in range(count)]
        metas[topic] = TopicMetadata(count, replica_racks=replica_racks)
    ids = [f"m{i}" for i in range(rng.randint(2, 14))]
    topics = list(sizes)
    subscriptions = {m: rng.sample(topics, rng.randint(1, topic_count)) for m in ids}
    member_racks = {m: rng.choice([None, "a", "b", "c"]) if with_racks else None for m in ids}
    first = STICKY.assign(
        group_of(metas, {m: sub(subscriptions[m], rack=member_racks[m]) for m in ids})
    )
    members = {}
    for m in ids:
        if rng.random() < 0.15:
            continue
        owned = [str(tp) for tp in first.partitions(m)]
        if rng.random() < 0.2:
            owned = owned[: len(owned) // 2]
        topics_now = (
            subscriptions[m]
            if rng.random() < 0.7
            else rng.sample(topics, rng.randint(1, topic_count))
        )
        members[m] = sub(
            topics_now, owned, rng.choice([1, 1, 1, 0, DEFAULT_GENERATION]), member_racks[m]
        )
    for i in range(rng.randint(0, 3)):
        members[f"n{i}"] = sub(
            rng.sample(topics, rng.randint(1, topic_count)),
            rack=rng.choice([None, "a", "b"]) if with_racks else None,
        )
    members = members or {"solo": sub(topics)}
    return group_of(metas, members), rng.random() < 0.3


@pytest.mark.parametrize("tracker", ["auto", "class-heaps", "signature-counts"])
@pytest.mark.parametrize("seed", range(3))
def test_matches_kafka_transcription_after_membership_changes(
    seed: int, tracker: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import random

    import coordkit_assignors.sticky_minima as minima

    limits = {"class-heaps": 10**9, "signature-counts": -1}
    if tracker in limits:
        monkeypatch.setattr(minima, "HEAP_WORK_LIMIT", limits[tracker])
    rng = random.Random(seed)
    for i in range(60):
        group, prefer = _perturbed_case(rng, with_racks=i % 2 == 1)
        ours = StickyAssignor(prefer_rack_aware=prefer).assign(group)
        assert as_sets(ours) == reference_sets(KafkaStickyReference(prefer).assign(group)), (
            seed,
            i,
        )
        if i % 2 == 0:
            assigned, withheld = kafka_cooperative(KafkaStickyReference(), group)
            cooperative = CooperativeStickyAssignor().assign(group)
            assert (as_sets(cooperative), withheld_sets(cooperative)) == (assigned, withheld), (
                seed,
                i,
            )


# ---------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------

PROPERTY_SETTINGS = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@given(groups(racks_too=True))
@PROPERTY_SETTINGS
def test_every_subscribed_partition_assigned_once_to_a_subscriber(
    case: tuple[GroupSubscription, bool],
) -> None:
    group, prefer = case
    result = StickyAssignor(prefer_rack_aware=prefer).assign(group)
    wanted = {t for s in group.members.values() for t in s.topics}
    expected = sorted(
        (t, p) for t, meta in group.topics.items() if t in wanted for p in range(meta.partitions)
    )
    seen = sorted((tp.topic, tp.partition) for m in result for tp in result.partitions(m))
    assert seen == expected
    assert set(result) == set(group.members)
    assert not result.has_withheld
    for member in result:
        assert {tp.topic for tp in result.partitions(member)} <= set(group.members[member].topics)
    assert_valid_and_balanced(group, result)


@given(groups(), st.randoms(use_true_random=False))
@PROPERTY_SETTINGS
def test_deterministic_whatever_the_member_listing_order(
    case: tuple[GroupSubscription, bool], rand: Any
) -> None:
    group, _ = case
    items = list(group.members.items())
    rand.shuffle(items)
    shuffled = GroupSubscription(group.topics, dict(items))
    assert STICKY.assign(group) == STICKY.assign(shuffled)


@given(groups())
@PROPERTY_SETTINGS
def test_identical_subscriptions_are_fully_balanced(case: tuple[GroupSubscription, bool]) -> None:
    group, _ = case
    first = next(iter(group.members.values())).topics
    same = GroupSubscription(
        group.topics,
        {
            m: sub(first, [f"{t}-{p}" for t, ps in s.owned.items() for p in ps], s.generation)
            for m, s in group.members.items()
        },
    )
    assert fully_balanced(STICKY.assign(same))


@given(groups(), st.data())
@PROPERTY_SETTINGS
def test_members_that_stay_keep_everything_when_one_leaves(
    case: tuple[GroupSubscription, bool], data: st.DataObject
) -> None:
    group, _ = case
    first_topics = next(iter(group.members.values())).topics
    fresh = GroupSubscription(group.topics, {m: sub(first_topics) for m in group.members})
    before = STICKY.assign(fresh)
    leaving = data.draw(st.sampled_from(sorted(group.members)))
    members = {m: s for m, s in resubscribe(fresh, before).items() if m != leaving}
    if not members:
        return
    after = STICKY.assign(GroupSubscription(group.topics, members))
    for member in members:
        assert set(before.partitions(member)) <= set(after.partitions(member))
    assert fully_balanced(after)

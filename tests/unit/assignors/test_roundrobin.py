"""``roundrobin``: Kafka's RoundRobinAssignorTest scenarios and the cursor rule."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from coordkit.strategies.assignment import GroupSubscription, MemberSubscription
from coordkit_assignors.roundrobin import RoundRobinAssignor


def assign(
    topics: Mapping[str, int],
    subs: Mapping[str, Sequence[str]],
    static: Mapping[str, str] | None = None,
) -> dict[str, set[str]]:
    static = static or {}
    group = GroupSubscription(
        topics, {m: MemberSubscription(ts, instance_id=static.get(m)) for m, ts in subs.items()}
    )
    return {m: set(ps) for m, ps in RoundRobinAssignor().assign(group).as_strings().items()}


def parts(text: str) -> set[str]:
    return {p.strip() for p in text.split(",") if p.strip()}


def test_one_consumer_no_topic() -> None:
    assert assign({}, {"consumer": []}) == {"consumer": set()}


def test_one_consumer_nonexistent_topic() -> None:
    assert assign({}, {"consumer": ["topic"]}) == {"consumer": set()}


def test_one_consumer_one_topic() -> None:
    assert assign({"topic": 3}, {"consumer": ["topic"]}) == {
        "consumer": parts("topic-0, topic-1, topic-2")
    }


def test_only_assigns_partitions_from_subscribed_topics() -> None:
    result = assign({"topic": 3, "other": 3}, {"consumer": ["topic"]})
    assert result == {"consumer": parts("topic-0, topic-1, topic-2")}


def test_one_consumer_multiple_topics() -> None:
    result = assign({"topic1": 1, "topic2": 2}, {"consumer": ["topic1", "topic2"]})
    assert result == {"consumer": parts("topic1-0, topic2-0, topic2-1")}


def test_two_consumers_one_topic_one_partition() -> None:
    result = assign({"topic": 1}, {"consumer1": ["topic"], "consumer2": ["topic"]})
    assert result == {"consumer1": {"topic-0"}, "consumer2": set()}


def test_two_consumers_one_topic_two_partitions() -> None:
    result = assign({"topic": 2}, {"consumer1": ["topic"], "consumer2": ["topic"]})
    assert result == {"consumer1": {"topic-0"}, "consumer2": {"topic-1"}}


def test_multiple_consumers_mixed_topics() -> None:
    result = assign(
        {"topic1": 3, "topic2": 2},
        {"consumer1": ["topic1"], "consumer2": ["topic1", "topic2"], "consumer3": ["topic1"]},
    )
    assert result == {
        "consumer1": {"topic1-0"},
        "consumer2": parts("topic1-1, topic2-0, topic2-1"),
        "consumer3": {"topic1-2"},
    }


def test_two_dynamic_consumers_two_topics_six_partitions() -> None:
    both = ["topic1", "topic2"]
    result = assign({"topic1": 3, "topic2": 3}, {"consumer1": both, "consumer2": both})
    assert result == {
        "consumer1": parts("topic1-0, topic1-2, topic2-1"),
        "consumer2": parts("topic1-1, topic2-0, topic2-2"),
    }


@pytest.mark.parametrize(
    "static", [{"consumer-b": "instance1", "consumer-a": "instance2"}, {"consumer-b": "instance1"}]
)
def test_static_consumers_sort_first_by_instance_id(static: dict[str, str]) -> None:
    both = ["topic1", "topic2"]
    result = assign({"topic1": 3, "topic2": 3}, {"consumer-b": both, "consumer-a": both}, static)
    assert result == {
        "consumer-b": parts("topic1-0, topic1-2, topic2-1"),
        "consumer-a": parts("topic1-1, topic2-0, topic2-2"),
    }


def test_static_member_assignment_persistent() -> None:
    both = ["topic1", "topic2"]
    static = {"consumer1": "instance1", "consumer2": "instance2", "consumer3": "instance3"}
    subs = {m: both for m in [*static, "consumer4"]}
    expected = {
        "consumer1": parts("topic1-0, topic2-1"),
        "consumer2": parts("topic1-1, topic2-2"),
        "consumer3": {"topic1-2"},
        "consumer4": {"topic2-0"},
    }
    assert assign({"topic1": 3, "topic2": 3}, subs, static) == expected
    # Replace the dynamic member with a new one: it takes over the same slot.
    del subs["consumer4"]
    subs["consumer5"] = both
    expected["consumer5"] = expected.pop("consumer4")
    assert assign({"topic1": 3, "topic2": 3}, subs, static) == expected


def test_static_member_assignment_persistent_after_member_id_changes() -> None:
    def by_instance(member_to_instance: dict[str, str]) -> dict[str, set[str]]:
        subs = {m: ["topic1", "topic2"] for m in member_to_instance}
        result = assign({"topic1": 3, "topic2": 3}, subs, member_to_instance)
        return {member_to_instance[m]: ps for m, ps in result.items()}

    first = by_instance(
        {"consumer1": "instance1", "consumer2": "instance2", "consumer3": "instance3"}
    )
    assert first == {f"instance{i + 1}": {f"topic1-{i}", f"topic2-{i}"} for i in range(3)}
    # The same instances rejoin under other member ids, in another member-id order.
    assert (
        by_instance({"consumer4": "instance1", "consumer5": "instance2", "consumer1": "instance3"})
        == first
    )


def test_cursor_is_not_reset_between_topics() -> None:
    # t0's single partition goes to A; t1 continues from B, so C gets t1-1, then A gets t2-0.
    result = assign({"t0": 1, "t1": 2, "t2": 1}, {m: ["t0", "t1", "t2"] for m in "ABC"})
    assert result == {"A": {"t0-0", "t2-0"}, "B": {"t1-0"}, "C": {"t1-1"}}


def test_cursor_skips_members_not_subscribed_and_wraps() -> None:
    # Members in order A, B, C; only A and C read t1. After t0-0 (A) and t0-1 (B) the cursor sits on
    # C: t1-0 → C, then it wraps past B to A: t1-1 → A, t1-2 → C.
    result = assign({"t0": 2, "t1": 3}, {"A": ["t0", "t1"], "B": ["t0"], "C": ["t1"]})
    assert result == {"A": {"t0-0", "t1-1"}, "B": {"t0-1"}, "C": {"t1-0", "t1-2"}}


def test_identical_subscriptions_balance_within_one() -> None:
    topics = {f"t{i}": i + 1 for i in range(7)}
    result = assign(topics, {f"m{i}": list(topics) for i in range(5)})
    counts = [len(ps) for ps in result.values()]
    assert max(counts) - min(counts) <= 1
    assert sum(counts) == sum(topics.values())

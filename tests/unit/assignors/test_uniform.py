"""``uniform`` (KIP-848 server-side): Kafka's heterogeneous builder cases, homogeneous quotas and
stickiness."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from coordkit.strategies.assignment import GroupAssignment, GroupSubscription, MemberSubscription
from coordkit.strategies.assignment_io import count_moves
from coordkit_assignors.uniform import (
    UniformAssignor,
    heterogeneous_assignment,
    homogeneous_assignment,
)

Spec = Mapping[str, tuple[Sequence[str], Mapping[str, Sequence[int]]]]


def group(topics: Mapping[str, int], members: Spec) -> GroupSubscription:
    """``members``: member → (subscribed topics, owned {topic: [partitions]})."""
    return GroupSubscription(
        topics, {m: MemberSubscription(ts, owned=owned) for m, (ts, owned) in members.items()}
    )


def by_topic(assignment: GroupAssignment) -> dict[str, dict[str, list[int]]]:
    return {m: assignment.by_topic(m) for m in assignment.members}


def counts_spread(assignment: GroupAssignment) -> int:
    counts = assignment.counts().values()
    return max(counts) - min(counts)


# -- Kafka's UniformHeterogeneousAssignmentBuilderTest (members in sorted order) ------------------


def test_two_members_no_topic_subscription() -> None:
    g = group({"topic1": 3}, {"A": ([], {}), "B": ([], {})})
    assert by_topic(UniformAssignor().assign(g)) == {"A": {}, "B": {}}


def test_subscriptions_to_topics_without_metadata_are_skipped() -> None:
    # Kafka's coordinator rejects this group; the contract here is to skip topics without metadata.
    g = group({"topic1": 3}, {"A": (["topic3"], {}), "B": (["topic2"], {})})
    assert by_topic(UniformAssignor().assign(g)) == {"A": {}, "B": {}}


def test_first_assignment_two_members_two_topics() -> None:
    g = group({"topic1": 3, "topic3": 6}, {"A": (["topic1", "topic3"], {}), "B": (["topic3"], {})})
    assert by_topic(UniformAssignor().assign(g)) == {
        "A": {"topic1": [0, 1, 2], "topic3": [4]},
        "B": {"topic3": [0, 1, 2, 3, 5]},
    }


def test_first_assignment_more_members_than_partitions() -> None:
    g = group(
        {"topic3": 1, "topic1": 2},
        {"A": (["topic3"], {}), "B": (["topic3"], {}), "C": (["topic1"], {})},
    )
    assert by_topic(UniformAssignor().assign(g)) == {
        "A": {"topic3": [0]},
        "B": {},
        "C": {"topic1": [0, 1]},
    }


def test_reassignment_given_unbalanced_previous_assignment() -> None:
    g = group(
        {"topic1": 6, "topic2": 4, "topic3": 4},
        {
            "A": (["topic1"], {"topic1": [0, 1, 2]}),
            "B": (["topic1", "topic2"], {"topic1": [3], "topic2": [0]}),
            "C": (
                ["topic1", "topic2", "topic3"],
                {"topic1": [4, 5], "topic2": [1, 2, 3], "topic3": [0, 1, 2, 3]},
            ),
        },
    )
    assert by_topic(UniformAssignor().assign(g)) == {
        "A": {"topic1": [0, 1, 2, 5]},
        "B": {"topic1": [3], "topic2": [0, 1, 2, 3]},
        "C": {"topic1": [4], "topic3": [0, 1, 2, 3]},
    }


def test_reassignment_when_partitions_are_added() -> None:
    g = group(
        {"topic1": 6, "topic2": 5, "topic3": 3, "topic4": 3},
        {
            "A": (["topic1", "topic3"], {"topic1": [0, 1, 2, 3], "topic3": [0, 1]}),
            "B": (
                ["topic1", "topic2", "topic3", "topic4"],
                {"topic2": [0, 1, 2], "topic4": [0, 1, 2]},
            ),
        },
    )
    assert by_topic(UniformAssignor().assign(g)) == {
        "A": {"topic1": [0, 1, 2, 3, 4, 5], "topic3": [0, 1, 2]},
        "B": {"topic2": [0, 1, 2, 3, 4], "topic4": [0, 1, 2]},
    }


def test_reassignment_when_member_and_partitions_are_added() -> None:
    g = group(
        {"topic1": 6, "topic2": 7},
        {
            "A": (["topic1"], {"topic1": [0, 2], "topic2": [0]}),
            "B": (["topic1", "topic2"], {"topic1": [1], "topic2": [1, 2]}),
            "C": (["topic1", "topic2"], {}),
        },
    )
    assert by_topic(UniformAssignor().assign(g)) == {
        "A": {"topic1": [0, 2, 3, 4, 5]},
        "B": {"topic1": [1], "topic2": [1, 2, 6]},
        "C": {"topic2": [0, 3, 4, 5]},
    }


def test_reassignment_when_member_removed() -> None:
    g = group(
        {"topic1": 3, "topic2": 8, "topic3": 3},
        {
            "A": (["topic1", "topic3"], {"topic1": [0, 1, 2], "topic3": [0, 1]}),
            "B": (["topic2"], {"topic2": [3, 4, 5, 6]}),
        },
    )
    assert by_topic(UniformAssignor().assign(g)) == {
        "A": {"topic1": [0, 1, 2], "topic3": [0, 1, 2]},
        "B": {"topic2": list(range(8))},
    }


def test_reassignment_when_subscription_removed() -> None:
    g = group(
        {"topic1": 3, "topic2": 5},
        {
            "A": (["topic1"], {"topic1": [0, 2], "topic2": [1, 3]}),
            "B": (["topic1", "topic2"], {"topic1": [1], "topic2": [0, 2, 4]}),
        },
    )
    assert by_topic(UniformAssignor().assign(g)) == {
        "A": {"topic1": [0, 1, 2]},
        "B": {"topic2": [0, 1, 2, 3, 4]},
    }


def test_balancing_stops_when_topic_partitions_run_out() -> None:
    # Kafka forces the heterogeneous builder on identical subscriptions for this edge case.
    everything = ["topic1", "topic2", "topic3"]
    g = group(
        {"topic1": 2, "topic2": 2, "topic3": 2},
        {
            "A": (everything, {"topic1": [0, 1], "topic2": [0, 1], "topic3": [0, 1]}),
            "B": (everything, {}),
        },
    )
    assert by_topic(heterogeneous_assignment(g)) == {
        "A": {"topic2": [0], "topic3": [0, 1]},
        "B": {"topic1": [0, 1], "topic2": [1]},
    }


def test_first_assignment_with_one_member_without_subscriptions() -> None:
    g = group({"topic1": 3}, {"A": (["topic1"], {}), "B": ([], {})})
    assert by_topic(UniformAssignor().assign(g)) == {"A": {"topic1": [0, 1, 2]}, "B": {}}


def test_balancing_moves_newly_received_partitions_before_owned_ones() -> None:
    # B receives the unowned t0-3 (B: t0-1, 2, 3, 5) and A t2-1. Balancing t2 moves t2-0 from C to
    # A; then t0 needs one partition from B to C. Kafka moves the highest number, t0-5, which B
    # owned (2 moves in all); here t0-3, which B only just received, goes (1 move).
    g = group(
        {"t0": 6, "t1": 1, "t2": 2},
        {
            "A": (["t2"], {}),
            "B": (["t0"], {"t0": [1, 2, 5]}),
            "C": (["t0", "t2"], {"t0": [0, 4], "t2": [0]}),
        },
    )
    result = UniformAssignor().assign(g)
    assert by_topic(result) == {"A": {"t2": [0, 1]}, "B": {"t0": [1, 2, 5]}, "C": {"t0": [0, 3, 4]}}
    assert count_moves(g, result) == 1


# -- homogeneous subscriptions -------------------------------------------------------------------


def test_homogeneous_first_assignment_fills_in_partition_order() -> None:
    both = ["t1", "t3"]
    g = group({"t1": 3, "t3": 3}, {m: (both, {}) for m in "ABC"})
    assert by_topic(UniformAssignor().assign(g)) == {
        "A": {"t1": [0, 1]},
        "B": {"t1": [2], "t3": [0]},
        "C": {"t3": [1, 2]},
    }


def test_homogeneous_member_added_moves_only_its_quota() -> None:
    both = ["t1", "t3"]
    g = group(
        {"t1": 3, "t3": 3},
        {"A": (both, {"t1": [0, 1, 2]}), "B": (both, {"t3": [0, 1, 2]}), "C": (both, {})},
    )
    result = UniformAssignor().assign(g)
    assert by_topic(result) == {
        "A": {"t1": [0, 1]},
        "B": {"t3": [0, 1]},
        "C": {"t1": [2], "t3": [2]},
    }
    assert count_moves(g, result) == 2


def test_homogeneous_extra_quota_goes_to_members_owning_more() -> None:
    # 7 partitions over 3 members: quotas 3, 2, 2. C owns three, so C gets the larger quota and
    # nothing moves (Kafka would hand it to the first member, A, and move one of C's partitions).
    g = group(
        {"t": 7},
        {"A": (["t"], {"t": [0, 1]}), "B": (["t"], {"t": [2, 3]}), "C": (["t"], {"t": [4, 5, 6]})},
    )
    result = homogeneous_assignment(g)
    assert by_topic(result) == {"A": {"t": [0, 1]}, "B": {"t": [2, 3]}, "C": {"t": [4, 5, 6]}}
    assert count_moves(g, result) == 0


def test_homogeneous_member_removed_only_its_partitions_move() -> None:
    g = group(
        {"t": 9},
        {"A": (["t"], {"t": [0, 1, 2]}), "B": (["t"], {"t": [3, 4, 5]})},  # C (6, 7, 8) left
    )
    result = UniformAssignor().assign(g)
    assert counts_spread(result) <= 1
    assert set(result.by_topic("A")["t"]) >= {0, 1, 2}
    assert set(result.by_topic("B")["t"]) >= {3, 4, 5}
    assert count_moves(g, result) == 0


def test_homogeneous_over_quota_keeps_lowest_partitions() -> None:
    g = group({"t": 4}, {"A": (["t"], {"t": [0, 1, 2, 3]}), "B": (["t"], {})})
    assert by_topic(UniformAssignor().assign(g)) == {"A": {"t": [0, 1]}, "B": {"t": [2, 3]}}


def test_conflicting_claims_highest_generation_wins() -> None:
    g = GroupSubscription(
        {"t": 2},
        {
            "A": MemberSubscription(["t"], owned=["t-1"], generation=3),
            "B": MemberSubscription(["t"], owned=["t-1"], generation=5),
        },
    )
    assert by_topic(UniformAssignor().assign(g)) == {"A": {"t": [0]}, "B": {"t": [1]}}


def test_conflicting_claims_of_equal_generation_are_both_dropped() -> None:
    # B (generation 4) and C (generation 4) both claim t-2: neither keeps it; A, first in member
    # order and below quota, receives it.
    g = GroupSubscription(
        {"t": 3},
        {
            "A": MemberSubscription(["t"]),
            "B": MemberSubscription(["t"], owned=["t-0", "t-2"], generation=4),
            "C": MemberSubscription(["t"], owned=["t-1", "t-2"], generation=4),
        },
    )
    assert by_topic(UniformAssignor().assign(g)) == {
        "A": {"t": [2]},
        "B": {"t": [0]},
        "C": {"t": [1]},
    }


def test_claims_on_missing_partitions_are_ignored() -> None:
    g = GroupSubscription(
        {"t": 2},
        {
            "A": MemberSubscription(["t"], owned={"t": [5], "gone": [0]}),
            "B": MemberSubscription(["t"], owned=["t-0"]),
        },
    )
    assert by_topic(UniformAssignor().assign(g)) == {"A": {"t": [1]}, "B": {"t": [0]}}


@pytest.mark.parametrize("members", [3, 7, 20])
def test_stable_when_owned_equals_previous_result(members: int) -> None:
    topics = {"a": 11, "b": 5, "c": 17}
    subs = {f"m{i:02}": list(topics) if i % 3 else ["a", "c"] for i in range(members)}
    first = UniformAssignor().assign(
        GroupSubscription(topics, {m: MemberSubscription(ts) for m, ts in subs.items()})
    )
    again_group = GroupSubscription(
        topics,
        {
            m: MemberSubscription(ts, owned=first.partitions(m), generation=1)
            for m, ts in subs.items()
        },
    )
    again = UniformAssignor().assign(again_group)
    assert again == first
    assert count_moves(again_group, again) == 0

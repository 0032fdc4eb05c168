"""``weighted-sticky``: load balance under skew, the keep rule, subscriptions, determinism."""

from __future__ import annotations

import numpy as np
import pytest

from coordkit.plugins import get_plugin_manager
from coordkit.strategies.assignment import (
    GroupAssignment,
    GroupSubscription,
    MemberSubscription,
    TopicMetadata,
)
from coordkit.strategies.assignment_io import count_moves, member_loads
from coordkit_assignors.weighted import WeightedStickyAssignor


def zipf_topics(
    topics: int, partitions: int, exponent: float, seed: int
) -> dict[str, TopicMetadata]:
    """Per-partition loads ``1000 / rank ** exponent`` over all partitions, ranks shuffled."""
    rng = np.random.default_rng(seed)
    loads = 1000.0 / np.arange(1, topics * partitions + 1) ** exponent
    rng.shuffle(loads)
    return {
        f"topic{t:02}": TopicMetadata(
            partitions, loads=loads[t * partitions : (t + 1) * partitions].tolist()
        )
        for t in range(topics)
    }


def load_ratio(group: GroupSubscription, assignment: GroupAssignment) -> float:
    loads = list(member_loads(group, assignment).values())
    return max(loads) / (sum(loads) / len(loads))


@pytest.mark.parametrize(
    ("members", "exponent", "seed"), [(8, 0.9, 1), (12, 1.0, 2), (5, 0.7, 3), (20, 0.8, 4)]
)
def test_beats_count_based_assignors_under_zipf_loads(
    members: int, exponent: float, seed: int
) -> None:
    topics = zipf_topics(10, 60, exponent, seed)
    group = GroupSubscription(
        topics, {f"c{i:02}": MemberSubscription(list(topics)) for i in range(members)}
    )
    weighted = load_ratio(group, WeightedStickyAssignor().assign(group))
    manager = get_plugin_manager()
    for name in ("range", "range-ceil", "roundrobin", "uniform"):
        count_based = load_ratio(group, manager.assignor(name).assign(group))
        assert weighted < count_based, name
    # LPT's guarantee with identical subscriptions: within 4/3 of the best possible maximum.
    heaviest = max(max(t.loads or ()) for t in topics.values())
    mean = sum(sum(t.loads or ()) for t in topics.values()) / members
    assert weighted * mean <= 4 / 3 * max(mean, heaviest) + 1e-9


def test_without_loads_it_balances_counts() -> None:
    topics = {"a": 7, "b": 5, "c": 9}
    group = GroupSubscription(topics, {m: MemberSubscription(list(topics)) for m in "ABCD"})
    counts = WeightedStickyAssignor().assign(group).counts().values()
    assert max(counts) - min(counts) <= 1


def test_heaviest_partitions_first_to_least_loaded() -> None:
    topics = {"t": TopicMetadata(5, loads=[1, 9, 4, 4, 2])}
    group = GroupSubscription(topics, {m: MemberSubscription(["t"]) for m in ("A", "B")})
    # LPT: 9 → A; 4, 4 and 2 → B (B stays below A's 9 until it reaches 10); then 1 → A.
    result = WeightedStickyAssignor().assign(group)
    assert result.by_topic("A") == {"t": [0, 1]}
    assert result.by_topic("B") == {"t": [2, 3, 4]}
    assert member_loads(group, result) == {"A": 10.0, "B": 10.0}


def test_previous_result_is_a_fixed_point() -> None:
    topics = zipf_topics(4, 25, 0.9, seed=9)
    subs = {f"m{i}": list(topics) for i in range(6)}
    first = WeightedStickyAssignor().assign(
        GroupSubscription(topics, {m: MemberSubscription(ts) for m, ts in subs.items()})
    )
    again_group = GroupSubscription(
        topics,
        {
            m: MemberSubscription(ts, owned=first.partitions(m), generation=1)
            for m, ts in subs.items()
        },
    )
    again = WeightedStickyAssignor().assign(again_group)
    assert again == first
    assert count_moves(again_group, again) == 0


def test_member_leaving_moves_only_its_partitions() -> None:
    topics = zipf_topics(4, 30, 0.8, seed=5)
    members = [f"m{i}" for i in range(6)]
    first = WeightedStickyAssignor().assign(
        GroupSubscription(topics, {m: MemberSubscription(list(topics)) for m in members})
    )
    gone = members.pop()
    group = GroupSubscription(
        topics,
        {
            m: MemberSubscription(list(topics), owned=first.partitions(m), generation=1)
            for m in members
        },
    )
    result = WeightedStickyAssignor().assign(group)
    for m in members:  # everyone keeps what they had (their loads are below the new, larger share)
        assert set(result.partitions(m)) >= set(first.partitions(m))
    assert sum(result.counts().values()) == sum(first.counts().values())
    moved = {tp for m in members for tp in result.partitions(m)} - {
        tp for m in members for tp in first.partitions(m)
    }
    assert moved == set(first.partitions(gone))


def test_member_joining_takes_load_within_tolerance() -> None:
    topics = zipf_topics(5, 40, 0.8, seed=6)
    members = [f"m{i}" for i in range(4)]
    first = WeightedStickyAssignor().assign(
        GroupSubscription(topics, {m: MemberSubscription(list(topics)) for m in members})
    )
    subs = {
        m: MemberSubscription(list(topics), owned=first.partitions(m), generation=1)
        for m in members
    }
    subs["m9"] = MemberSubscription(list(topics))
    group = GroupSubscription(topics, subs)
    assignor = WeightedStickyAssignor(tolerance=0.1)
    result = assignor.assign(group)
    loads = member_loads(group, result)
    share = sum(loads.values()) / len(loads)
    heaviest = max(max(t.loads or ()) for t in topics.values())
    assert max(loads.values()) <= max(share * 1.1, share + heaviest) + 1e-9
    assert loads["m9"] > 0
    # Stickiness: most partitions stay put (the newcomer only takes what exceeds the others' caps).
    assert count_moves(group, result) < sum(result.counts().values()) / 2


def test_keeps_an_oversized_partition_with_its_owner() -> None:
    # t-0 alone weighs more than anyone's capped share; A owns it and keeps it (moving it helps no one).
    topics = {"t": TopicMetadata(4, loads=[100, 1, 1, 1])}
    group = GroupSubscription(
        topics,
        {
            "A": MemberSubscription(["t"], owned=["t-0"]),
            "B": MemberSubscription(["t"], owned=["t-1"]),
        },
    )
    result = WeightedStickyAssignor().assign(group)
    assert result.by_topic("A") == {"t": [0]}
    assert result.by_topic("B") == {"t": [1, 2, 3]}


def test_owned_beyond_the_cap_is_released_heaviest_kept_first() -> None:
    # Total 24 over 2 members: share 12, cap 13.2. A owns everything and, heaviest first, keeps 8
    # and 4 (12); any 3 more would exceed the cap, so the four 3s go to B.
    topics = {"t": TopicMetadata(6, loads=[8, 4, 3, 3, 3, 3])}
    group = GroupSubscription(
        topics,
        {
            "A": MemberSubscription(["t"], owned=[f"t-{p}" for p in range(6)]),
            "B": MemberSubscription(["t"]),
        },
    )
    result = WeightedStickyAssignor().assign(group)
    assert result.by_topic("A") == {"t": [0, 1]}
    assert result.by_topic("B") == {"t": [2, 3, 4, 5]}


def test_respects_subscriptions() -> None:
    topics = {
        "hot": TopicMetadata(4, loads=[50, 50, 50, 50]),
        "cold": TopicMetadata(8, loads=[1] * 8),
    }
    group = GroupSubscription(
        topics,
        {
            "A": MemberSubscription(["cold"]),
            "B": MemberSubscription(["hot", "cold"]),
            "C": MemberSubscription(["hot"]),
        },
    )
    result = WeightedStickyAssignor().assign(group)
    assert set(result.by_topic("A")) <= {"cold"}
    assert set(result.by_topic("C")) <= {"hot"}
    assert sum(result.counts().values()) == 12
    loads = member_loads(group, result)
    assert loads["B"] == loads["C"] == 100.0  # the hot topic split evenly
    assert loads["A"] == 8.0  # all the cold partitions go to the only idle eligible member


def test_deterministic_and_independent_of_member_insertion_order() -> None:
    topics = zipf_topics(3, 20, 1.0, seed=8)
    members = {f"m{i}": MemberSubscription(list(topics)) for i in range(7)}
    forward = WeightedStickyAssignor().assign(GroupSubscription(topics, members))
    backward = WeightedStickyAssignor().assign(
        GroupSubscription(topics, dict(reversed(members.items())))
    )
    assert (
        forward == backward == WeightedStickyAssignor().assign(GroupSubscription(topics, members))
    )


def test_rejects_negative_tolerance() -> None:
    with pytest.raises(ValueError, match="tolerance"):
        WeightedStickyAssignor(tolerance=-0.5)

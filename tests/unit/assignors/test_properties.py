"""``weighted-sticky``'s own load bounds on random groups (the properties every assignor has, the
built-ins included, are the conformance kit's: tests/unit/assignors/test_kit.py).

* with identical subscriptions the heaviest member stays within the documented bounds, kept
  partitions within the cap and from scratch within greedy LPT's;
* without loads it balances counts from scratch.
"""

from __future__ import annotations

from hypothesis import HealthCheck, assume, given, settings

from coordkit.plugins import get_plugin_manager
from coordkit.strategies.assignment import (
    GroupAssignment,
    GroupSubscription,
    MemberSubscription,
    TopicMetadata,
)
from coordkit.strategies.assignment_io import member_loads
from coordkit.testing.assignors import groups
from coordkit_assignors.weighted import DEFAULT_TOLERANCE

PROPERTY_SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def assign(name: str, group: GroupSubscription) -> GroupAssignment:
    return get_plugin_manager().assignor(name).assign(group)


@PROPERTY_SETTINGS
@given(group=groups(identical=True))
def test_weighted_load_balance_bounds(group: GroupSubscription) -> None:
    subscribed = [t for t in next(iter(group.members.values())).topics if t in group.topics]
    weights = [
        w for t in subscribed for w in (group.topics[t].loads or [1.0] * group.topics[t].partitions)
    ]
    assume(weights)
    mean = sum(weights) / len(group.members)
    heaviest = max(weights)
    ranked = sorted(weights, reverse=True)
    members = len(group.members)
    assignment = assign("weighted-sticky", group)
    top = max(member_loads(group, assignment).values())
    # Kept partitions stay within the cap; every other one lands on a member at or below the mean.
    assert top <= max(mean * (1 + DEFAULT_TOLERANCE), mean + heaviest) * (1 + 1e-9) + 1e-9
    fresh = GroupSubscription(
        group.topics, {m: MemberSubscription(s.topics) for m, s in group.members.items()}
    )
    fresh_top = max(member_loads(fresh, assign("weighted-sticky", fresh)).values())
    # From scratch it is greedy LPT: the first `members` partitions open one member each; any later
    # one (at most the (m+1)-th heaviest) lands on a member whose load is at most the mean.
    next_heaviest = ranked[members] if len(ranked) > members else 0.0
    assert fresh_top <= max(heaviest, mean + next_heaviest) * (1 + 1e-9) + 1e-9


@PROPERTY_SETTINGS
@given(group=groups(identical=True, owned=False))
def test_weighted_without_loads_balances_counts_from_scratch(group: GroupSubscription) -> None:
    plain = GroupSubscription(
        {t: TopicMetadata(m.partitions) for t, m in group.topics.items()}, group.members
    )
    counts = assign("weighted-sticky", plain).counts().values()
    assert max(counts) - min(counts) <= 1

"""Properties every registered assignor must have, checked with hypothesis on random groups.

* every subscribed partition of a topic with metadata goes to exactly one member (assigned this
  round or withheld for it), nothing else is handed out, and only to a subscriber of its topic;
* every member appears in the result, possibly empty;
* the same input gives the same output, whatever the order the members are listed in;
* handing an assignor its own result back as what members own changes nothing (for
  ``weighted-sticky``: when that result is within its load cap);
* with identical subscriptions the count-balancing assignors differ by at most one partition per
  member, and ``weighted-sticky`` keeps the heaviest member within its documented bounds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from coordkit.assignment import (
    GroupAssignment,
    GroupSubscription,
    MemberSubscription,
    TopicMetadata,
)
from coordkit.assignment_io import member_loads
from coordkit.model import TopicPartition
from coordkit.plugins import get_plugin_manager
from coordkit_assignors.weighted import DEFAULT_TOLERANCE

ASSIGNOR_NAMES = get_plugin_manager().assignors.names()
#: Assignors whose counts differ by at most one when every member subscribes to the same topics.
COUNT_BALANCED = {"roundrobin", "uniform", "sticky", "cooperative-sticky"}
TOPIC_NAMES = ("t0", "t1", "t2", "t3")
#: Member ids whose Java (UTF-16) order differs from Python's code point order.
MEMBER_ALPHABET = "abAB-_\uff5e\U00010000"

PROPERTY_SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@st.composite
def topic_metadata(draw: st.DrawFn) -> TopicMetadata:
    count = draw(st.integers(0, 12))
    racks = draw(
        st.none()
        | st.lists(
            st.lists(st.sampled_from("abc"), max_size=3, unique=True),
            min_size=count,
            max_size=count,
        )
    )
    loads = draw(
        st.none()
        | st.lists(
            st.floats(0, 100, allow_nan=False, allow_infinity=False), min_size=count, max_size=count
        )
    )
    return TopicMetadata(count, replica_racks=racks, loads=loads)


@st.composite
def groups(draw: st.DrawFn, *, identical: bool = False, owned: bool = True) -> GroupSubscription:
    topics = {
        name: draw(topic_metadata())
        for name in TOPIC_NAMES[: draw(st.integers(0, len(TOPIC_NAMES)))]
    }
    subscribable = [*topics, "no-metadata"]
    member_ids = draw(
        st.lists(
            st.text(MEMBER_ALPHABET, min_size=1, max_size=3), min_size=1, max_size=6, unique=True
        )
    )
    instance_ids = iter(
        draw(
            st.lists(
                st.text("ix", min_size=1, max_size=3),
                unique=True,
                min_size=len(member_ids),
                max_size=len(member_ids),
            )
        )
    )
    shared = draw(st.lists(st.sampled_from(subscribable), unique=True)) if identical else None
    existing = [(t, p) for t, meta in topics.items() for p in range(meta.partitions)]
    members = {}
    for member in member_ids:
        claims = (
            draw(st.lists(st.sampled_from(existing), unique=True)) if owned and existing else []
        )
        members[member] = MemberSubscription(
            shared
            if shared is not None
            else draw(st.lists(st.sampled_from(subscribable), unique=True)),
            instance_id=next(instance_ids) if draw(st.booleans()) else None,
            owned=[TopicPartition(t, p) for t, p in claims],
            generation=draw(st.integers(-1, 3)),
            rack=draw(st.none() | st.sampled_from("abcd")),
        )
    return GroupSubscription(topics, members)


def targets(assignment: GroupAssignment) -> Iterator[tuple[str, TopicPartition]]:
    """(member, partition) for everything assigned or withheld for a member."""
    for member in assignment.members:
        for tp in assignment.partitions(member):
            yield member, tp
        for tp in assignment.withheld(member):
            yield member, tp


def with_owned(group: GroupSubscription, assignment: GroupAssignment) -> GroupSubscription:
    """The next generation: every member owns its target in ``assignment``."""
    owners: dict[str, list[TopicPartition]] = {m: [] for m in group.members}
    for member, tp in targets(assignment):
        owners[member].append(tp)
    return GroupSubscription(
        group.topics,
        {
            m: MemberSubscription(
                s.topics, instance_id=s.instance_id, owned=owners[m], generation=5, rack=s.rack
            )
            for m, s in group.members.items()
        },
    )


every_assignor = pytest.mark.parametrize("assignor_name", ASSIGNOR_NAMES)


def assign(name: str, group: GroupSubscription) -> GroupAssignment:
    return get_plugin_manager().assignor(name).assign(group)


def test_every_built_in_assignor_is_covered() -> None:
    assert {
        "range",
        "range-ceil",
        "roundrobin",
        "sticky",
        "cooperative-sticky",
        "uniform",
        "weighted-sticky",
    } <= set(ASSIGNOR_NAMES)


@every_assignor
@PROPERTY_SETTINGS
@given(group=groups())
def test_each_subscribed_partition_exactly_once_to_a_subscriber(
    assignor_name: str, group: GroupSubscription
) -> None:
    assignment = assign(assignor_name, group)
    assert sorted(assignment.members) == sorted(group.members)
    handed_out = Counter(tp for _, tp in targets(assignment))
    subscribed = {
        TopicPartition(t, p)
        for sub in group.members.values()
        for t in sub.topics
        if t in group.topics
        for p in range(group.topics[t].partitions)
    }
    assert set(handed_out) == subscribed
    assert all(n == 1 for n in handed_out.values())
    for member, tp in targets(assignment):
        assert tp.topic in group.members[member].topics


@every_assignor
@PROPERTY_SETTINGS
@given(group=groups())
def test_deterministic_whatever_the_member_order(
    assignor_name: str, group: GroupSubscription
) -> None:
    first = assign(assignor_name, group)
    assert assign(assignor_name, group) == first
    reversed_group = GroupSubscription(group.topics, dict(reversed(list(group.members.items()))))
    assert assign(assignor_name, reversed_group) == first


@every_assignor
@PROPERTY_SETTINGS
@given(group=groups())
def test_own_result_as_owned_is_a_fixed_point(assignor_name: str, group: GroupSubscription) -> None:
    if assignor_name in ("sticky", "cooperative-sticky"):
        # Kafka's rack-aware sticky (KIP-881) gives up owned partitions whose replicas are not on
        # the owner's rack, so its own result is a fixed point only without rack information.
        assume(all(meta.replica_racks is None for meta in group.topics.values()))
    first = assign(assignor_name, group)
    next_group = with_owned(group, first)
    if assignor_name == "weighted-sticky":
        loads = member_loads(group, first)
        active = [
            m
            for m, s in group.members.items()
            if any(group.topics.get(t, TopicMetadata(0)).partitions for t in s.topics)
        ]
        assume(active)
        cap = sum(loads.values()) / len(active) * (1 + DEFAULT_TOLERANCE)
        assume(max(loads.values()) <= cap)
    again = assign(assignor_name, next_group)
    expected = {m: sorted(tp for mm, tp in targets(first) if mm == m) for m in group.members}
    assert {m: again.partitions(m) for m in again.members} == expected
    assert not again.has_withheld


@every_assignor
@PROPERTY_SETTINGS
@given(group=groups(identical=True))
def test_identical_subscriptions_balance_counts(
    assignor_name: str, group: GroupSubscription
) -> None:
    assignment = assign(assignor_name, group)
    counts = Counter({m: 0 for m in group.members})
    counts.update(m for m, _ in targets(assignment))
    if assignor_name in COUNT_BALANCED:
        assert max(counts.values()) - min(counts.values()) <= 1
    elif assignor_name == "range":
        # Per topic balanced, so at most one extra partition per topic.
        assert max(counts.values()) - min(counts.values()) <= len(group.topics)


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

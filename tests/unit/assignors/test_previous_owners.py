"""``GroupLayout.previous_owners`` (the claims range, uniform and weighted-sticky keep) reads every
member's owned partitions in one pass; it equals the rule applied member by member, topic by topic."""

from __future__ import annotations

import attrs
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from coordkit.strategies.assignment import (
    DEFAULT_GENERATION,
    GroupSubscription,
    MemberSubscription,
    OwnedPartitions,
)
from coordkit_assignors.ordering import GroupLayout

TOPICS = {"t1": 3, "t2": 4, "empty": 0}  # "ghost" (owned, subscribed) has no metadata
SUBSCRIBABLE = ("t1", "t2", "empty", "ghost")


def owners_member_by_member(layout: GroupLayout, subscribed_only: bool) -> list[int]:
    """The rule: per member and topic, its distinct existing partitions (of subscribed topics) are
    claims; a partition goes to the claim of highest generation, to nobody on a tie."""
    space = layout.space
    claims: dict[int, dict[int, int]] = {}  # partition -> member -> generation
    for position, member in enumerate(layout.members):
        sub = layout.group.members[member]
        for topic, parts in sub.owned.items():
            if space.count(topic) == 0 or (subscribed_only and topic not in sub.topics):
                continue
            for p in parts:
                if 0 <= p < space.count(topic):
                    claims.setdefault(space.index(topic, p), {})[position] = sub.generation
    owners = [-1] * space.total
    for partition, by_member in claims.items():
        best = max(by_member.values())
        holders = [m for m, g in by_member.items() if g == best]
        if len(holders) == 1:
            owners[partition] = holders[0]
    return owners


@st.composite
def groups(draw: st.DrawFn) -> GroupSubscription:
    members = draw(st.lists(st.sampled_from("abcdef"), min_size=1, max_size=6, unique=True))
    return GroupSubscription(
        TOPICS,
        {
            m: MemberSubscription(
                draw(st.lists(st.sampled_from(SUBSCRIBABLE), min_size=1, max_size=4, unique=True)),
                owned=draw(
                    st.dictionaries(
                        st.sampled_from(SUBSCRIBABLE),
                        st.lists(st.integers(-1, 5), max_size=4),  # repeats and missing numbers
                        max_size=4,
                    )
                ),
                generation=draw(st.sampled_from([DEFAULT_GENERATION, 1, 2])),
            )
            for m in members
        },
    )


@given(groups(), st.booleans())
@settings(max_examples=400, deadline=None)
def test_previous_owners_equal_the_rule_member_by_member(
    group: GroupSubscription, subscribed_only: bool
) -> None:
    layout = GroupLayout(group)
    owners = layout.previous_owners(subscribed_only=subscribed_only)
    assert owners.dtype == np.int64
    assert owners.tolist() == owners_member_by_member(layout, subscribed_only)


@given(groups(), st.booleans())
@settings(max_examples=200, deadline=None)
def test_owned_partitions_held_as_columns_read_the_same(
    group: GroupSubscription, subscribed_only: bool
) -> None:
    columnar = GroupSubscription(
        group.topics,
        {
            m: attrs.evolve(sub, owned=OwnedPartitions.from_mapping(sub.owned))
            for m, sub in group.members.items()
        },
    )
    for member, sub in columnar.members.items():
        assert isinstance(sub.owned, OwnedPartitions)
        # (A topic listed with no partition owns nothing: columns do not keep it.)
        assert dict(sub.owned) == {t: ps for t, ps in group.members[member].owned.items() if ps}
        assert sub.owned_count == group.members[member].owned_count
    expected = GroupLayout(group).previous_owners(subscribed_only=subscribed_only)
    got = GroupLayout(columnar).previous_owners(subscribed_only=subscribed_only)
    assert got.tolist() == expected.tolist()

"""The sticky assignors' shortcuts give the same answers as the paths they short-cut.

* a new group (nobody owns anything, identical subscriptions, no racks) is dealt round-robin
  directly: the same lists as the constrained assignment's per-partition path, and Kafka's answer;
* the constrained assignment's quotas (step 1), computed with arrays and consulting ``HashMap``
  order only when it matters, equal Kafka's loop over members in ``HashMap`` order;
* owned partitions read in one pass equal the claims listed member by member;
* Java's ``String.hashCode``, ``HashMap`` iteration order and ``String`` order computed for all keys
  at once equal the one-key-at-a-time definitions.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordkit.kafka.java import java_string_hashcode
from coordkit.strategies.assignment import (
    GroupSubscription,
    MemberSubscription,
    TopicMetadata,
    java_string_key,
)
from coordkit_assignors.sticky import CooperativeStickyAssignor, StickyAssignor
from coordkit_assignors.sticky_constrained import _quotas_kept, constrained_assign, deal_new_group
from coordkit_assignors.sticky_group import StickyGroup
from coordkit_assignors.sticky_java import (
    JavaHashOrder,
    hashmap_iteration_order,
    java_sorted,
    java_string_hash,
    java_string_hashes,
    spread,
)
from coordkit_assignors.sticky_racks import StickyRacks
from harness.kafka_sticky_reference import KafkaStickyReference

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# Topic names whose Java (UTF-16) order differs from Python's code point order, so that Kafka's
# sorted partition list is not in global index order.
TOPIC_POOL = ("t1", "t2", "topic", "\uff5e", "\U00010000a", "a\U00010000")
MEMBER_POOL = (*(f"c{i}" for i in range(40)), "B", "\uff5e", "\U00010000x", "consumer")


@st.composite
def new_groups(draw: st.DrawFn, beyond_count: bool = True) -> GroupSubscription:
    """Identical subscriptions, nothing validly owned: claims on topics without metadata, and
    (``beyond_count``) on partition numbers a topic does not have, are ignored.

    Kafka counts the latter towards its owner's quota; coordkit drops them, so they are left out
    where the answer is compared with Kafka's.
    """
    topics = draw(st.lists(st.sampled_from(TOPIC_POOL), min_size=1, max_size=4, unique=True))
    counts = {t: draw(st.integers(0, 30)) for t in topics}
    members = draw(st.lists(st.sampled_from(MEMBER_POOL), min_size=1, max_size=25, unique=True))
    subscribed = draw(
        st.lists(st.sampled_from([*topics, "ghost"]), min_size=1, max_size=5, unique=True)
    )
    stale = draw(st.booleans())
    claims = {"ghost": [0], **({topics[0]: [counts[topics[0]] + 1]} if beyond_count else {})}
    return GroupSubscription(
        counts,
        {
            m: MemberSubscription(
                subscribed,
                owned=claims if stale else {},
                generation=1 if stale else -1,
            )
            for m in members
        },
    )


def owner_lists(group: StickyGroup) -> list[list[int]]:
    """Per member number, its partitions by the constrained assignment's per-partition path."""
    owner = constrained_assign(group, StickyRacks(group)).owner
    lists: list[list[int]] = [[] for _ in range(group.size)]
    for partition in np.flatnonzero(owner >= 0).tolist():
        lists[int(owner[partition])].append(partition)
    return lists


@given(new_groups())
@SETTINGS
def test_new_group_deal_equals_the_constrained_assignment(group: GroupSubscription) -> None:
    sticky = StickyGroup(group)
    dealt = deal_new_group(sticky, StickyRacks(sticky))
    assert dealt is not None
    assert dealt == owner_lists(sticky)  # the same partitions, each list ascending


@given(new_groups(beyond_count=False))
@SETTINGS
def test_new_group_deal_is_kafkas_answer(group: GroupSubscription) -> None:
    expected = {m: set(ps) for m, ps in KafkaStickyReference().assign(group).items()}
    for assignor in (StickyAssignor(), CooperativeStickyAssignor()):
        result = assignor.assign(group)
        assert {m: {(tp.topic, tp.partition) for tp in result.partitions(m)} for m in result} == (
            expected
        )
        assert not result.has_withheld


def test_new_group_deal_of_kafkas_large_test_shape() -> None:
    # 2,000 partitions over 7 members: 285 rounds and 5 partitions left for the first members.
    topics = [f"t{i}" for i in range(20)]
    group = GroupSubscription(
        dict.fromkeys(topics, 100), {f"m{i}": MemberSubscription(topics) for i in range(7)}
    )
    sticky = StickyGroup(group)
    dealt = deal_new_group(sticky, StickyRacks(sticky))
    assert dealt == owner_lists(sticky)
    assert [len(d) for d in dealt] == [286] * 5 + [285] * 2


def test_new_group_deal_declines_owned_partitions_and_racks() -> None:
    owned = GroupSubscription(
        {"t": 4},
        {
            "a": MemberSubscription(["t"], owned={"t": [1]}, generation=1),
            "b": MemberSubscription(["t"]),
        },
    )
    sticky = StickyGroup(owned)
    assert deal_new_group(sticky, StickyRacks(sticky)) is None
    racked = GroupSubscription(
        {"t": TopicMetadata(4, replica_racks=[("r1",), ("r2",), ("r1",), ("r2",)])},
        {"a": MemberSubscription(["t"], rack="r1"), "b": MemberSubscription(["t"], rack="r2")},
    )
    sticky = StickyGroup(racked)
    racks = StickyRacks(sticky)
    assert racks.enabled
    assert deal_new_group(sticky, racks) is None
    assert deal_new_group(StickyGroup(GroupSubscription({"t": 4}, {})), racks) is None


def kafka_quota_loop(
    hash_order: list[int], counts: list[int], min_quota: int, max_quota: int, extra: int
) -> tuple[list[int], list[int], list[int], int]:
    """Step 1 of Kafka's ConstrainedAssignmentBuilder, member by member in HashMap order."""
    keep = [0] * len(counts)
    under_min: list[int] = []
    exactly_min: list[int] = []
    over_min = 0
    for member in hash_order:
        count = counts[member]
        if count < min_quota:
            keep[member] = count
            under_min.append(member)
        elif count >= max_quota and over_min < extra:
            keep[member] = max_quota
            over_min += 1
            if over_min == extra:
                exactly_min.clear()
        else:
            keep[member] = min_quota
            if over_min < extra:
                exactly_min.append(member)
    return keep, sorted(under_min), sorted(exactly_min), over_min


@given(st.data())
@settings(max_examples=400, deadline=None)
def test_quotas_equal_kafkas_loop_in_hashmap_order(data: st.DataObject) -> None:
    members = data.draw(
        st.lists(st.sampled_from(MEMBER_POOL), min_size=1, max_size=30, unique=True)
    )
    group = StickyGroup(
        GroupSubscription({"t": 1}, {m: MemberSubscription(["t"]) for m in members})
    )
    counts = data.draw(st.lists(st.integers(0, 8), min_size=group.size, max_size=group.size))
    total = data.draw(st.integers(0, 8 * group.size))
    min_quota, extra = divmod(total, group.size)
    max_quota = min_quota + (1 if extra else 0)
    keep, under_min, exactly_min, over_min = _quotas_kept(
        group, np.array(counts, dtype=np.int64), min_quota, max_quota, extra
    )
    expected = kafka_quota_loop(group.hash_order.tolist(), counts, min_quota, max_quota, extra)
    assert (keep.tolist(), under_min, exactly_min, over_min) == expected


@given(
    st.dictionaries(
        st.sampled_from(MEMBER_POOL[:8]),
        st.dictionaries(
            st.sampled_from(["t1", "t2", "ghost"]),
            st.lists(st.integers(-1, 5), max_size=3),
            max_size=3,
        ),
        min_size=1,
        max_size=6,
    )
)
@settings(max_examples=300, deadline=None)
def test_claims_are_every_existing_owned_partition(owned: dict[str, dict[str, list[int]]]) -> None:
    group = GroupSubscription(
        {"t1": 3, "t2": 4},
        {m: MemberSubscription(["t1", "t2"], owned=o, generation=1) for m, o in owned.items()},
    )
    sticky = StickyGroup(group)
    space = sticky.space
    expected = sorted(
        (number, space.index(t, p))
        for number, m in enumerate(sticky.member_ids)
        for t, parts in owned[m].items()
        for p in parts
        if 0 <= p < space.count(t)
    )
    claims = zip(sticky.claim_member.tolist(), sticky.claim_partition.tolist(), strict=True)
    assert sorted(set(claims)) == sorted(set(expected))


@given(st.lists(st.text(max_size=12), max_size=30))
@settings(max_examples=300, deadline=None)
def test_java_string_hashes_equal_string_hashcode(texts: list[str]) -> None:
    assert java_string_hashes(texts).tolist() == [
        java_string_hashcode(t) & 0xFFFFFFFF for t in texts
    ]


def replayed_order(keys: list[str]) -> list[int]:
    """HashMap iteration order by inserting the keys one by one into JavaHashOrder."""
    table = JavaHashOrder()
    hashes = [java_string_hash(k) for k in keys]
    for position, h in enumerate(hashes):
        table.add(position, h)
    mask = max(table.capacity, 1) - 1
    return sorted(range(len(keys)), key=lambda p: (spread(hashes[p]) & mask, p))


@given(st.lists(st.text(max_size=6), max_size=120, unique=True))
@settings(max_examples=300, deadline=None)
def test_hashmap_iteration_order_equals_inserting_one_by_one(keys: list[str]) -> None:
    assert hashmap_iteration_order(keys) == replayed_order(keys)


@pytest.mark.parametrize("count", [1, 8, 9, 12, 13, 17, 24, 25, 33, 48, 49, 60, 97, 128])
def test_hashmap_iteration_order_with_crowded_buckets(count: int) -> None:
    # chr(16 * i) hashes to 16 * i: nine keys share bucket 0 of 16 and the table doubles early,
    # which splits them over two buckets. "Aa" and "BB" share a hashCode: one bucket at any size.
    for keys in (
        [chr(16 * i) for i in range(count)],
        ["".join(p) for p in itertools.product(["Aa", "BB"], repeat=7)][:count],
    ):
        assert hashmap_iteration_order(keys) == replayed_order(keys)


@given(st.lists(st.text(max_size=6), max_size=40))
@settings(max_examples=300, deadline=None)
def test_java_sorted_is_utf16_order(texts: list[str]) -> None:
    assert java_sorted(texts) == sorted(texts, key=java_string_key)


@given(new_groups())
@SETTINGS
def test_all_partitions_is_kafkas_sorted_partition_list(group: GroupSubscription) -> None:
    sticky = StickyGroup(group)
    space = sticky.space
    expected = [space.index(t, p) for t in sticky.topics for p in range(space.count(t))]
    assert sticky.all_partitions().tolist() == expected
    assert sticky.java_order_is_index_order == (expected == sorted(expected))

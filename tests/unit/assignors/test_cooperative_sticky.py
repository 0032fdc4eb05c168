"""Kafka's ``cooperative-sticky`` assignor: the sticky assignment, minus the partitions that change
owner, which wait one rebalance (withheld) so that their previous owner revokes them first.

Scenarios from Kafka's ``AbstractStickyAssignorTest`` (its ``partitionsTransferringOwnership``
expectations are our withheld partitions) and ``CooperativeStickyAssignorTest``; properties over
random groups and over repeated rebalances, checking Kafka's cooperative validity rule: no
partition is revoked from one member and added to another in the same round.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordkit.strategies.assignment import (
    DEFAULT_GENERATION,
    GroupAssignment,
    GroupSubscription,
    MemberSubscription,
    TopicMetadata,
)
from coordkit.testing.assignors.groups import with_owned
from coordkit_assignors.sticky import CooperativeStickyAssignor, StickyAssignor
from harness.kafka_sticky_reference import KafkaStickyReference, kafka_cooperative

TP = tuple[str, int]
COOPERATIVE = CooperativeStickyAssignor()
EAGER = StickyAssignor()
PROPERTY_SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def sub(
    topics: Sequence[str], owned: Sequence[str] = (), generation: int = 1, rack: str | None = None
) -> MemberSubscription:
    return MemberSubscription(topics, owned=list(owned), generation=generation, rack=rack)


def assigned(result: GroupAssignment) -> dict[str, list[str]]:
    return result.as_strings()


def withheld(result: GroupAssignment) -> dict[str, list[str]]:
    return result.withheld_as_strings()


def owned_sets(group: GroupSubscription) -> dict[str, set[TP]]:
    return {m: {(t, p) for t, ps in s.owned.items() for p in ps} for m, s in group.members.items()}


def result_sets(result: GroupAssignment) -> dict[str, set[TP]]:
    return {m: {(tp.topic, tp.partition) for tp in result.partitions(m)} for m in result}


def withheld_sets(result: GroupAssignment) -> dict[str, set[TP]]:
    return {m: {(tp.topic, tp.partition) for tp in result.withheld(m)} for m in result}


def assert_cooperative_valid(group: GroupSubscription, result: GroupAssignment) -> bool:
    """Kafka's ``verifyCooperativeValidity``; True if some member must revoke partitions."""
    owned = owned_sets(group)
    got = result_sets(result)
    added: set[TP] = set()
    revoked: set[TP] = set()
    for member in result:
        added |= got[member] - owned[member]
        revoked |= owned[member] - got[member]
    assert not added & revoked, f"revoked and assigned in the same round: {sorted(added & revoked)}"
    return bool(revoked)


def next_round(
    group: GroupSubscription, result: GroupAssignment, generation: int
) -> GroupSubscription:
    """Every member reports what this round gave it (withheld partitions are owned by nobody)."""
    return GroupSubscription(
        group.topics,
        {
            m: sub(s.topics, [str(tp) for tp in result.partitions(m)], generation, s.rack)
            for m, s in group.members.items()
        },
    )


def rebalance_until_stable(
    group: GroupSubscription, generation: int = 1, limit: int = 4
) -> tuple[GroupAssignment, int]:
    """Repeat rebalances as Kafka's cooperative test does until nothing is withheld."""
    rounds = 0
    while True:
        result = COOPERATIVE.assign(group)
        rounds += 1
        assert_cooperative_valid(group, result)
        if not result.has_withheld:
            return result, rounds
        assert rounds < limit, "cooperative rebalancing did not settle"
        generation += 1
        group = next_round(group, result, generation)


# ---------------------------------------------------------------------------------------------
# Kafka scenarios
# ---------------------------------------------------------------------------------------------


def test_protocols() -> None:
    assert COOPERATIVE.name == "cooperative-sticky"
    assert [p.value for p in COOPERATIVE.protocols] == ["cooperative", "eager"]


def test_fresh_group_withholds_nothing() -> None:
    group = GroupSubscription(
        {"topic1": 3, "topic2": 3},
        {"consumer1": sub(["topic1", "topic2"]), "consumer2": sub(["topic1", "topic2"])},
    )
    result = COOPERATIVE.assign(group)
    assert not result.has_withheld
    assert assigned(result) == assigned(EAGER.assign(group))


def test_max_quota_consumers_more_than_expected_max_capacity_members() -> None:
    both = ["topic1", "topic2"]
    group = GroupSubscription(
        {"topic1": 2, "topic2": 2},
        {
            "consumer1": sub(both, ["topic1-0", "topic2-0"]),
            "consumer2": sub(both, ["topic1-1", "topic2-1"]),
            "consumer3": sub(both),
        },
    )
    result = COOPERATIVE.assign(group)
    assert assigned(result) == {
        "consumer1": ["topic1-0"],
        "consumer2": ["topic1-1", "topic2-1"],
        "consumer3": [],
    }
    assert withheld(result) == {"consumer3": ["topic2-0"]}
    final, rounds = rebalance_until_stable(group)
    assert rounds == 2
    assert assigned(final) == {
        "consumer1": ["topic1-0"],
        "consumer2": ["topic1-1", "topic2-1"],
        "consumer3": ["topic2-0"],
    }


def test_add_consumer_one_topic_withholds_the_moving_partition() -> None:
    group = GroupSubscription(
        {"topic": 3},
        {
            "consumer1": sub(["topic"], ["topic-0", "topic-1", "topic-2"]),
            "consumer2": sub(["topic"]),
        },
    )
    result = COOPERATIVE.assign(group)
    assert assigned(result) == {"consumer1": ["topic-0", "topic-1"], "consumer2": []}
    assert withheld(result) == {"consumer2": ["topic-2"]}
    # next round: consumer1 revoked topic-2, so consumer2 gets it
    second = COOPERATIVE.assign(next_round(group, result, 2))
    assert assigned(second) == {"consumer1": ["topic-0", "topic-1"], "consumer2": ["topic-2"]}
    assert not second.has_withheld


def test_add_two_consumers_two_topics() -> None:
    both = ["topic1", "topic2"]
    group = GroupSubscription(
        {"topic1": 3, "topic2": 4},
        {
            "consumer1": sub(both, ["topic1-0", "topic1-2", "topic2-1", "topic2-3"]),
            "consumer2": sub(both, ["topic1-1", "topic2-0", "topic2-2"]),
            "consumer3": sub(both),
            "consumer4": sub(both),
        },
    )
    result = COOPERATIVE.assign(group)
    assert withheld(result) == {"consumer3": ["topic1-2", "topic2-3"], "consumer4": ["topic2-2"]}
    assert assigned(result) == {
        "consumer1": ["topic1-0", "topic2-1"],
        "consumer2": ["topic1-1", "topic2-0"],
        "consumer3": [],
        "consumer4": [],
    }


def test_partition_claimed_by_two_members_in_same_generation_is_withheld() -> None:
    # Kafka: partitionsTransferringOwnership includes partitions claimed by several members.
    group = GroupSubscription(
        {"topic": 3},
        {
            "consumer1": sub(["topic"], ["topic-0", "topic-1"]),
            "consumer2": sub(["topic"], ["topic-0", "topic-2"]),
            "consumer3": sub(["topic"]),
        },
    )
    result = COOPERATIVE.assign(group)
    assert assigned(result) == {"consumer1": ["topic-1"], "consumer2": ["topic-2"], "consumer3": []}
    assert withheld(result) == {"consumer3": ["topic-0"]}


def test_doubly_claimed_partition_with_unequal_partitions_per_consumer() -> None:
    group = GroupSubscription(
        {"topic": 4},
        {
            "consumer1": sub(["topic"], ["topic-0", "topic-1"]),
            "consumer2": sub(["topic"], ["topic-0", "topic-2"]),
            "consumer3": sub(["topic"]),
        },
    )
    result = COOPERATIVE.assign(group)
    assert assigned(result) == {
        "consumer1": ["topic-1", "topic-3"],
        "consumer2": ["topic-2"],
        "consumer3": [],
    }
    assert withheld(result) == {"consumer3": ["topic-0"]}


def test_stale_generation_claim_loses_without_withholding() -> None:
    # consumer2's claims are from an older generation: consumer1 keeps them, nothing moves.
    both = ["topic", "topic2"]
    claimed = ["topic-0", "topic-2", "topic2-1"]
    group = GroupSubscription(
        {"topic": 3, "topic2": 3},
        {"consumer1": sub(both, claimed, 10), "consumer2": sub(both, claimed, 9)},
    )
    result = COOPERATIVE.assign(group)
    assert not result.has_withheld
    assert sorted(assigned(result)["consumer1"]) == sorted(claimed)


def test_general_assignment_withholds_moved_partitions() -> None:
    # Different subscriptions (general assignment): consumer3 joins and takes topic1 partitions.
    group = GroupSubscription(
        {"topic1": 4, "topic2": 2},
        {
            "consumer1": sub(
                ["topic1", "topic2"],
                ["topic1-0", "topic1-1", "topic1-2", "topic1-3", "topic2-0", "topic2-1"],
            ),
            "consumer3": sub(["topic1"]),
        },
    )
    eager = EAGER.assign(group)
    result = COOPERATIVE.assign(group)
    moving = result_sets(eager)["consumer3"]
    assert moving
    assert moving <= {("topic1", p) for p in range(4)}
    assert withheld_sets(result) == {"consumer1": set(), "consumer3": moving}
    assert result_sets(result)["consumer3"] == set()
    final, rounds = rebalance_until_stable(group)
    assert rounds == 2
    assert result_sets(final) == result_sets(eager)


def test_rack_mismatched_partition_is_withheld_from_its_new_owner() -> None:
    # consumer0 owns t-1 but its rack holds no replica of it: the rack-aware assignment moves it to
    # consumer1 (on rack b), and consumer0 must revoke it first.
    metas = {"t": TopicMetadata(2, replica_racks=[("a",), ("b",)])}
    group = GroupSubscription(
        metas,
        {"consumer0": sub(["t"], ["t-0", "t-1"], 1, "a"), "consumer1": sub(["t"], [], 1, "b")},
    )
    result = COOPERATIVE.assign(group)
    assert assigned(result) == {"consumer0": ["t-0"], "consumer1": []}
    assert withheld(result) == {"consumer1": ["t-1"]}
    assert_cooperative_valid(group, result)


def test_member_leaving_needs_no_revocation() -> None:
    topics = {"t1": 5, "t2": 5}
    both = list(topics)
    first, _ = rebalance_until_stable(
        GroupSubscription(topics, {m: sub(both) for m in ("a", "b", "c")})
    )
    remaining = {m: sub(both, [str(tp) for tp in first.partitions(m)], 2) for m in ("a", "b")}
    result = COOPERATIVE.assign(GroupSubscription(topics, remaining))
    assert not result.has_withheld
    for member in remaining:
        assert set(first.partitions(member)) <= set(result.partitions(member))


# ---------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------

TOPICS = ("t1", "t2", "t3")
MEMBERS = ("c1", "c2", "c3", "c10", "B", "\uff5e")


@st.composite
def cooperative_groups(draw: st.DrawFn, identical: bool | None = None) -> GroupSubscription:
    names = draw(st.lists(st.sampled_from(TOPICS), min_size=1, max_size=3, unique=True))
    counts = {t: draw(st.integers(0, 9)) for t in names}
    members = draw(st.lists(st.sampled_from(MEMBERS), min_size=1, max_size=6, unique=True))
    same = draw(st.booleans()) if identical is None else identical
    common = draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True))
    topics = {
        m: common
        if same
        else draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True))
        for m in members
    }
    owned: dict[str, list[str]] = {m: [] for m in members}
    for t, count in counts.items():
        for p in range(count):
            for m in draw(st.lists(st.sampled_from(members), max_size=2, unique=True)):
                owned[m].append(f"{t}-{p}")
    generations = {m: draw(st.sampled_from([DEFAULT_GENERATION, 1, 2])) for m in members}
    return GroupSubscription(counts, {m: sub(topics[m], owned[m], generations[m]) for m in members})


@given(cooperative_groups())
@PROPERTY_SETTINGS
def test_same_assignment_as_sticky_and_withholds_only_partitions_another_member_owns(
    group: GroupSubscription,
) -> None:
    result = COOPERATIVE.assign(group)
    eager = result_sets(EAGER.assign(group))
    owned = owned_sets(group)
    mine, held = result_sets(result), withheld_sets(result)
    for member in result:
        assert mine[member] | held[member] == eager[member]
        for tp in held[member]:
            assert any(tp in owned[other] for other in result if other != member)
    assert_cooperative_valid(group, result)
    assert result == COOPERATIVE.assign(group)  # deterministic


@given(cooperative_groups(identical=True))
@PROPERTY_SETTINGS
def test_identical_subscriptions_settle_in_two_rounds_balanced(group: GroupSubscription) -> None:
    final, rounds = rebalance_until_stable(group, generation=3, limit=2)
    counts = final.counts().values()
    assert max(counts) - min(counts) <= 1
    assert rounds <= 2


@given(cooperative_groups(), st.data())
@PROPERTY_SETTINGS
def test_repeated_rebalances_with_membership_changes_stay_cooperative(
    group: GroupSubscription, data: st.DataObject
) -> None:
    generation = 3
    for _ in range(3):
        final, _ = rebalance_until_stable(group, generation)
        generation += 4
        members: dict[str, MemberSubscription] = {
            m: sub(s.topics, [str(tp) for tp in final.partitions(m)], generation)
            for m, s in group.members.items()
        }
        leaving = data.draw(st.sampled_from([None, *members]))
        if leaving is not None and len(members) > 1:
            del members[leaving]
        joining = data.draw(st.sampled_from([None, *(m for m in MEMBERS if m not in members)]))
        if joining is not None:
            members[joining] = sub(
                data.draw(
                    st.lists(
                        st.sampled_from(list(group.topics) or ["t1"]),
                        min_size=1,
                        max_size=3,
                        unique=True,
                    )
                )
            )
        group = GroupSubscription(group.topics, members)
    final, _ = rebalance_until_stable(group, generation)
    assert_valid_and_balanced(group, final)


def assert_valid_and_balanced(group: GroupSubscription, result: GroupAssignment) -> None:
    """Kafka's balance rule: two members differing by two or more share no topic of the larger."""
    sets = result_sets(result)
    for a in result:
        for b in result:
            if len(sets[a]) - len(sets[b]) >= 2:
                assert not {t for t, _ in sets[a]} & set(group.members[b].topics)


def test_members_listed_in_any_order_get_the_same_result() -> None:
    topics: Mapping[str, int] = {"t1": 7, "t2": 3}
    members = {
        "c1": sub(["t1", "t2"], ["t1-0", "t1-1", "t1-2", "t1-3", "t1-4", "t2-0"]),
        "c2": sub(["t1"], ["t1-5"]),
        "c3": sub(["t1", "t2"]),
    }
    forward = COOPERATIVE.assign(GroupSubscription(topics, members))
    backward = COOPERATIVE.assign(GroupSubscription(topics, dict(reversed(list(members.items())))))
    assert forward == backward
    assert withheld(forward) == {"c2": ["t1-0"], "c3": ["t2-0"]}


def test_a_rack_conflict_alternates_as_kafka_does() -> None:
    """Racks and subscriptions that pull partitions two ways: Kafka's rack-aware cooperative
    sticky assignor never settles on this group (found by the conformance kit's settling
    property), it withholds the same partitions every other round; coordkit's does the same,
    round for round, and the kit's property accepts a cycle there (a drift would still fail)."""
    none: tuple[str, ...] = ()
    t0_racks = tuple(("a",) if p in (2, 6, 10, 11) else none for p in range(12))
    group = GroupSubscription(
        topics={
            "t0": TopicMetadata(partitions=12, replica_racks=t0_racks),
            "t1": TopicMetadata(partitions=7),
            "t2": TopicMetadata(partitions=5, replica_racks=(none, none, none, ("a",), ("a",))),
        },
        members={
            "A": MemberSubscription(topics=("t1",), rack="a"),
            "AA": MemberSubscription(topics=()),
            "AAA": MemberSubscription(topics=("t0", "t1", "t2"), rack="b"),
            "a": MemberSubscription(topics=("t0", "t1", "t2")),
            "B": MemberSubscription(topics=("t1",), rack="a"),
            "_": MemberSubscription(topics=("t0", "t1", "t2"), owned={"t0": (7,)}, rack="a"),
        },
    )
    ours_withheld: list[dict[str, set[TP]]] = []
    kafka_withheld: list[dict[str, set[TP]]] = []
    for round_number in range(1, 7):
        ours = COOPERATIVE.assign(group)
        assigned, kafka = kafka_cooperative(KafkaStickyReference(), group)
        assert result_sets(ours) == assigned, f"round {round_number}"
        ours_withheld.append({m: ps for m, ps in withheld_sets(ours).items() if ps})
        kafka_withheld.append({m: ps for m, ps in kafka.items() if ps})
        group = with_owned(
            group, {m: ours.partitions(m) for m in ours.members}, generation=5 + round_number
        )
    assert ours_withheld == kafka_withheld
    assert ours_withheld[0] == {"a": {("t0", 7)}}
    assert ours_withheld[1] == {"AAA": {("t0", 6)}, "a": {("t0", 2)}}
    assert ours_withheld[2:] == ours_withheld[:4], "a cycle of two rounds"

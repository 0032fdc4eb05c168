"""The share-partition assignor suite (:class:`ShareAssignorTests`) and the random share groups it
uses (KIP-932: a partition may go to several members).

Always: only partitions that exist, of topics the member subscribes to, are handed out; every
subscribed partition goes to at least one member; every member is in the result; the same group
gives the same target; a subscription to a topic the describer does not hold is a
:class:`PartitionAssignorError`.

Declared by the assignor (:class:`ShareAssignorTraits`), with identical subscriptions:
``balanced`` — member counts differ by at most one, no partition goes to two members while
there are at least as many partitions as members, and with more members than partitions every
member gets one; ``sticky`` — when a member joins a group of at least as many partitions as
members, each member that stays keeps what it held, as far as its new count allows.

::

    from coordkit.testing.share_assignors import ShareAssignorTests

    class TestMyShareAssignor(ShareAssignorTests):
        @pytest.fixture
        def share_assignor(self):
            return MyShareAssignor()
"""

from __future__ import annotations

import uuid
from collections import Counter

import hypothesis
import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordkit.strategies.share_assignment import (
    GroupSpec,
    MemberSpec,
    ShareAssignor,
    ShareAssignorTraits,
    TopicDescriber,
    TopicDescription,
)
from coordkit.testing.backends import NOT_APPLICABLE
from coordkit.testing.target_assignment import (
    RACKS,
    TargetAssignorChecks,
    draw_member_names,
    draw_topics,
    subscribed_partitions,
)

__all__ = ["ShareAssignorTests", "share_groups"]


@st.composite
def share_groups(
    draw: st.DrawFn,
    *,
    identical: bool = False,
    current: bool = True,
    racks: bool = True,
    min_members: int = 0,
    max_members: int = 9,
) -> tuple[GroupSpec, TopicDescriber]:
    """A random share group and its topics: up to 4 topics of up to 10 partitions (racks and
    loads sometimes), members in a random order with random subscriptions (``identical``: the
    same) and racks, and (``current``) a random current target in which a partition may be held
    by several members."""
    described = draw_topics(draw, max_topics=4, max_partitions=10, racks=racks, loads=True)
    ids = [d.topic_id for d in described]
    names = draw_member_names(draw, pool=14, min_members=min_members, max_members=max_members)
    shared = draw(st.lists(st.sampled_from(ids), unique=True, min_size=1), label="topics")
    members: dict[str, MemberSpec] = {}
    for name in names:
        subscribed = shared if identical else draw(st.lists(st.sampled_from(ids), unique=True))
        members[name] = MemberSpec(subscribed, rack=draw(st.none() | st.sampled_from(RACKS)))
    if current and names:
        held: dict[str, dict[uuid.UUID, list[int]]] = {m: {} for m in names}
        for d in described:
            for p in range(d.partitions):
                for owner in draw(st.lists(st.sampled_from(names), unique=True, max_size=3)):
                    held[owner].setdefault(d.topic_id, []).append(p)
        members = {
            m: MemberSpec(s.subscribed_topic_ids, s.rack, None, held[m]) for m, s in members.items()
        }
    return GroupSpec(members), TopicDescriber(described)


@pytest.mark.coordkit_kit("share-assignor")
class ShareAssignorTests(TargetAssignorChecks):
    """Subclass and override the ``share_assignor`` fixture."""

    @pytest.fixture
    def share_assignor(self) -> ShareAssignor:
        pytest.fail("override the share_assignor fixture (see coordkit.testing.share_assignors)")

    @pytest.fixture
    def target_assignor(self, share_assignor: ShareAssignor) -> ShareAssignor:
        return share_assignor

    def random_groups(self) -> st.SearchStrategy[tuple[GroupSpec, TopicDescriber]]:
        return share_groups()

    @pytest.fixture
    def traits(self, share_assignor: ShareAssignor) -> ShareAssignorTraits:
        return ShareAssignorTraits.of(share_assignor)

    def keeps_topics_nobody_subscribes(self, assignor: ShareAssignor) -> bool:
        """Whether the assignor may leave a member the partitions it holds of a topic no member
        subscribes to any more (Kafka's ``simple`` does, with differing subscriptions; the
        coordinator hands no such partitions over); override to exempt it."""
        return False

    def test_hands_out_only_subscribed_partitions_and_every_one_of_them(
        self, share_assignor: ShareAssignor, coordkit_hypothesis_settings: hypothesis.settings
    ) -> None:
        @coordkit_hypothesis_settings
        @given(case=share_groups())
        def check(case: tuple[GroupSpec, TopicDescriber]) -> None:
            group, topics = case
            owners = share_assignor.assign(group, topics).owners()
            wanted = subscribed_partitions(group, topics)
            if self.keeps_topics_nobody_subscribes(share_assignor):
                subscribed = group.subscribed_topic_ids()
                owners = {tp: ms for tp, ms in owners.items() if tp[0] in subscribed}
            extra = owners.keys() - wanted
            assert not extra, f"only subscribed partitions: {sorted(extra)[:5]} handed out"
            missing = wanted - owners.keys()
            assert not missing, f"every partition: {sorted(missing)[:5]} went to no member"
            for (topic_id, p), members in owners.items():
                for member in members:
                    assert topic_id in group.members[member].subscribed_topic_ids, (
                        f"only to subscribers: {member!r} got {topics.name(topic_id)}-{p}"
                    )

        check()

    def test_balanced_for_identical_subscriptions(
        self,
        share_assignor: ShareAssignor,
        traits: ShareAssignorTraits,
        coordkit_hypothesis_settings: hypothesis.settings,
    ) -> None:
        if not traits.balanced:
            pytest.skip(f"{NOT_APPLICABLE}: {share_assignor.name} declares no balance")

        @coordkit_hypothesis_settings
        @given(case=share_groups(identical=True, current=False, min_members=1))
        def check(case: tuple[GroupSpec, TopicDescriber]) -> None:
            group, topics = case
            if any(d.loads is not None for d in topics.topics.values()):
                # Counts are balanced when partitions weigh the same.
                topics = TopicDescriber(
                    TopicDescription(d.topic_id, d.name, d.partitions, d.partition_racks)
                    for d in topics.topics.values()
                )
            target = share_assignor.assign(group, topics)
            counts = Counter(target.counts())
            assert max(counts.values()) - min(counts.values()) <= 1, f"balanced: {dict(counts)}"
            partitions = len(subscribed_partitions(group, topics))
            if partitions >= len(group.members):
                shared = {tp: ms for tp, ms in target.owners().items() if len(ms) > 1}
                assert not shared, f"balanced: shared while partitions suffice: {shared}"
            elif partitions:
                idle = [m for m, n in counts.items() if n == 0]
                assert not idle, f"balanced: {idle} got nothing of {partitions} partitions"

        check()

    def test_sticky_when_a_member_joins(
        self,
        share_assignor: ShareAssignor,
        traits: ShareAssignorTraits,
        coordkit_hypothesis_settings: hypothesis.settings,
    ) -> None:
        if not traits.sticky:
            pytest.skip(f"{NOT_APPLICABLE}: {share_assignor.name} declares no stickiness")

        @coordkit_hypothesis_settings
        @given(case=share_groups(identical=True, current=False, racks=False, min_members=1))
        def check(case: tuple[GroupSpec, TopicDescriber]) -> None:
            group, topics = case
            hypothesis.assume(len(subscribed_partitions(group, topics)) > len(group.members))
            before = share_assignor.assign(group, topics)
            joined = dict(group.with_assignment(before).members)
            some = next(iter(group.members.values()))
            joined["newcomer"] = MemberSpec(some.subscribed_topic_ids)
            after = share_assignor.assign(GroupSpec(joined), topics).as_sets()
            for member, had in before.as_sets().items():
                old = {(t, p) for t, ps in had.items() for p in ps}
                new = {(t, p) for t, ps in after[member].items() for p in ps}
                kept = len(old & new)
                assert kept == min(len(old), len(new)), (
                    f"sticky: {member!r} held {sorted(old)} and now {sorted(new)}"
                )

        check()

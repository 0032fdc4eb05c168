"""The server-side assignor suite (:class:`ServerAssignorTests`) and the random groups it uses.

Always: every subscribed partition goes to exactly one member, a subscriber of its topic, and
nothing else is handed out; every member is in the result; the same group gives the same target;
the assignor's own target, fed back as the current target, comes back unchanged; a subscription
to a topic the describer does not hold is a :class:`PartitionAssignorError`.

Declared by the assignor (:class:`ServerAssignorTraits`): with identical subscriptions member
counts differ by at most one (``balanced``); a member that stays keeps its current target when
others leave (``sticky``; checked without partition racks: a rack-aware sticky assignor may
move a partition to a member on its rack).

::

    from coordkit.testing.server_assignors import ServerAssignorTests

    class TestMyAssignor(ServerAssignorTests):
        @pytest.fixture
        def server_assignor(self):
            return MyAssignor()
"""

from __future__ import annotations

import uuid
from collections import Counter

import hypothesis
import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordkit.strategies.target_assignment import (
    GroupSpec,
    MemberSpec,
    ServerAssignor,
    ServerAssignorTraits,
    TargetAssignment,
    TopicDescriber,
)
from coordkit.testing.backends import NOT_APPLICABLE
from coordkit.testing.target_assignment import (
    RACKS,
    TargetAssignorChecks,
    draw_member_names,
    draw_topics,
    show,
    subscribed_partitions,
)

__all__ = ["ServerAssignorTests", "server_groups"]


@st.composite
def server_groups(
    draw: st.DrawFn,
    *,
    identical: bool = False,
    current: bool = True,
    racks: bool = True,
    min_members: int = 0,
    max_members: int = 7,
) -> tuple[GroupSpec, TopicDescriber]:
    """A random group and its topics: up to 5 topics of up to 12 partitions (racks sometimes),
    members in a random order with random subscriptions (``identical``: the same), racks and
    instance ids, and (``current``) a random valid current target, stale topics included;
    ``racks=False``: no partition racks."""
    described = draw_topics(draw, max_topics=5, max_partitions=12, racks=racks, loads=False)
    ids = [d.topic_id for d in described]
    names = draw_member_names(draw, pool=12, min_members=min_members, max_members=max_members)
    shared = draw(st.lists(st.sampled_from(ids), unique=True, min_size=1), label="topics")
    members: dict[str, MemberSpec] = {}
    for name in names:
        topics = shared if identical else draw(st.lists(st.sampled_from(ids), unique=True))
        members[name] = MemberSpec(
            topics,
            rack=draw(st.none() | st.sampled_from(RACKS)),
            instance_id=draw(st.none() | st.sampled_from(["i1", "i2", "i3"])),
        )
    if current and names:
        held: dict[str, dict[uuid.UUID, list[int]]] = {m: {} for m in names}
        for d in described:
            for p in range(d.partitions):
                owner = draw(st.none() | st.sampled_from(names))
                if owner is not None:
                    held[owner].setdefault(d.topic_id, []).append(p)
        members = {
            m: MemberSpec(s.subscribed_topic_ids, s.rack, s.instance_id, held[m])
            for m, s in members.items()
        }
    return GroupSpec(members), TopicDescriber(described)


@pytest.mark.coordkit_kit("server-assignor")
class ServerAssignorTests(TargetAssignorChecks):
    """Subclass and override the ``server_assignor`` fixture."""

    @pytest.fixture
    def server_assignor(self) -> ServerAssignor:
        pytest.fail("override the server_assignor fixture (see coordkit.testing.server_assignors)")

    @pytest.fixture
    def target_assignor(self, server_assignor: ServerAssignor) -> ServerAssignor:
        return server_assignor

    def random_groups(self) -> st.SearchStrategy[tuple[GroupSpec, TopicDescriber]]:
        return server_groups()

    @pytest.fixture
    def traits(self, server_assignor: ServerAssignor) -> ServerAssignorTraits:
        return ServerAssignorTraits.of(server_assignor)

    def expect_fixed_point(
        self,
        assignor: ServerAssignor,
        group: GroupSpec,
        topics: TopicDescriber,
        target: TargetAssignment,
    ) -> bool:
        """Whether ``target`` (the assignor's own) must come back when it is the current one;
        override to exempt documented cases."""
        return True

    def test_every_subscribed_partition_is_assigned_exactly_once_to_a_subscriber(
        self, server_assignor: ServerAssignor, coordkit_hypothesis_settings: hypothesis.settings
    ) -> None:
        @coordkit_hypothesis_settings
        @given(case=server_groups())
        def check(case: tuple[GroupSpec, TopicDescriber]) -> None:
            group, topics = case
            owners = server_assignor.assign(group, topics).owners()
            wanted = subscribed_partitions(group, topics)
            missing = wanted - owners.keys()
            assert not missing, f"exactly once: {show(missing)} assigned to no member"
            twice = {tp: ms for tp, ms in owners.items() if len(ms) > 1}
            assert not twice, f"exactly once: assigned to several members: {show(twice.items())}"
            extra = owners.keys() - wanted
            assert not extra, f"only subscribed partitions: {show(extra)} handed out"
            for (topic_id, p), (member,) in owners.items():
                assert topic_id in group.members[member].subscribed_topic_ids, (
                    f"only to subscribers: {member!r} got {topics.name(topic_id)}-{p}"
                )

        check()

    def test_own_target_is_a_fixed_point(
        self, server_assignor: ServerAssignor, coordkit_hypothesis_settings: hypothesis.settings
    ) -> None:
        @coordkit_hypothesis_settings
        @given(case=server_groups(current=False))
        def check(case: tuple[GroupSpec, TopicDescriber]) -> None:
            group, topics = case
            first = server_assignor.assign(group, topics)
            hypothesis.assume(self.expect_fixed_point(server_assignor, group, topics, first))
            again = server_assignor.assign(group.with_assignment(first), topics)
            assert again == first, f"fixed point: {first.as_sets()} became {again.as_sets()}"

        check()

    def test_balanced_within_one_for_identical_subscriptions(
        self,
        server_assignor: ServerAssignor,
        traits: ServerAssignorTraits,
        coordkit_hypothesis_settings: hypothesis.settings,
    ) -> None:
        if not traits.balanced:
            pytest.skip(f"{NOT_APPLICABLE}: {server_assignor.name} declares no balance")

        @coordkit_hypothesis_settings
        @given(case=server_groups(identical=True, current=False, min_members=1))
        def check(case: tuple[GroupSpec, TopicDescriber]) -> None:
            group, topics = case
            counts = Counter(server_assignor.assign(group, topics).counts())
            assert max(counts.values()) - min(counts.values()) <= 1, f"balanced: {dict(counts)}"

        check()

    def test_sticky_a_member_that_stays_keeps_its_target(
        self,
        server_assignor: ServerAssignor,
        traits: ServerAssignorTraits,
        coordkit_hypothesis_settings: hypothesis.settings,
    ) -> None:
        if not traits.sticky:
            pytest.skip(f"{NOT_APPLICABLE}: {server_assignor.name} declares no stickiness")

        @coordkit_hypothesis_settings
        @given(
            case=server_groups(identical=True, current=False, racks=False, min_members=2),
            data=st.data(),
        )
        def check(case: tuple[GroupSpec, TopicDescriber], data: st.DataObject) -> None:
            group, topics = case
            before = server_assignor.assign(group, topics)
            leaving = data.draw(st.sampled_from(sorted(group.members)), label="leaving")
            staying = GroupSpec({m: s for m, s in group.with_assignment(before).members.items()
                                 if m != leaving})  # fmt: skip
            after = server_assignor.assign(staying, topics).as_sets()
            for member, had in before.as_sets().items():
                if member == leaving:
                    continue
                lost = {(t, p) for t, ps in had.items() for p in ps - after[member].get(t, set())}
                assert not lost, f"sticky: {leaving!r} left and {member!r} lost {show(lost)}"

        check()

"""The assignor suite: what every consumer-group assignor promises, checked on random groups.

Always: every subscribed partition of a topic with metadata goes to exactly one member (assigned
this round or withheld for it) and only to a subscriber of its topic; nothing else is handed out
(claims of partitions that no longer exist, topics without metadata); every member is in the
result; the result depends only on the group, not on the order its members are listed in; the
assignor's own result, fed back as what the members own, is a fixed point; the input is not
modified.

Declared by the assignor (class attributes read by :class:`AssignorTraits`): with identical
subscriptions member counts differ by at most one (``count_balanced``, default ``True``); when a
member leaves, only its partitions move (``sticky``, default ``False``); with
``RebalanceProtocol.COOPERATIVE`` among its ``protocols``, no partition is revoked from one member
and assigned to another in the same round, nothing is withheld that no other member owns, and
rebalancing settles in two rounds.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Iterable
from typing import Any

import attrs
import hypothesis
import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordkit.kafka.model import TopicPartition
from coordkit.strategies.assignment import (
    Assignor,
    GroupAssignment,
    GroupSubscription,
    MemberSubscription,
    RebalanceProtocol,
)
from coordkit.testing.assignors.groups import (
    DELETED_TOPIC,
    TOPIC_WITHOUT_METADATA,
    claims,
    groups,
    owned_sets,
    subscribed_partitions,
    targets,
    with_owned,
)
from coordkit.testing.backends import NOT_APPLICABLE

__all__ = ["AssignorTests", "AssignorTraits"]


@attrs.frozen
class AssignorTraits:
    """What an assignor declares beyond the properties every assignor has."""

    count_balanced: bool = True
    sticky: bool = False
    cooperative: bool = False

    @classmethod
    def of(cls, assignor: Any) -> AssignorTraits:
        return cls(
            count_balanced=bool(getattr(assignor, "count_balanced", True)),
            sticky=bool(getattr(assignor, "sticky", False)),
            cooperative=RebalanceProtocol.COOPERATIVE in tuple(getattr(assignor, "protocols", ())),
        )


def _show(partitions: Iterable[TopicPartition], limit: int = 8) -> str:
    items = sorted(partitions)
    text = ", ".join(str(tp) for tp in items[:limit])
    return text + (f" and {len(items) - limit} more" if len(items) > limit else "")


def _strings(by_member: dict[str, list[TopicPartition]]) -> dict[str, list[str]]:
    return {m: [str(tp) for tp in tps] for m, tps in by_member.items()}


def _targets_of(assignment: GroupAssignment) -> dict[str, list[TopicPartition]]:
    out: dict[str, list[TopicPartition]] = {m: [] for m in assignment.members}
    for member, tp in targets(assignment):
        out[member].append(tp)
    return {m: sorted(tps) for m, tps in out.items()}


@pytest.mark.coordkit_kit("assignor")
class AssignorTests:
    """Subclass and override the ``coordkit_assignor`` fixture (or the ``assignor`` fixture here),
    or run ``pytest -p coordkit.testing --coordkit-assignor NAME``."""

    @pytest.fixture
    def assignor(self, coordkit_assignor: Assignor) -> Assignor:
        return coordkit_assignor

    @pytest.fixture
    def traits(self, assignor: Assignor) -> AssignorTraits:
        return AssignorTraits.of(assignor)

    def expect_fixed_point(self, group: GroupSubscription, assignment: GroupAssignment) -> bool:
        """Whether ``assignment`` (the assignor's own result for ``group``) must come back
        unchanged when the members own it; override to exempt documented cases."""
        return True

    @staticmethod
    def _not_applicable(assignor: Assignor, trait: str) -> None:
        pytest.skip(f"{NOT_APPLICABLE}: {assignor.name} declares no {trait}")

    # -- declared identity
    def test_declares_a_name_and_its_protocols(self, assignor: Assignor) -> None:
        assert isinstance(assignor.name, str)
        assert assignor.name
        protocols = tuple(assignor.protocols)
        assert protocols, "an assignor declares the rebalance protocols it supports"
        assert all(isinstance(p, RebalanceProtocol) for p in protocols)

    # -- every assignor
    def test_every_subscribed_partition_is_assigned_exactly_once(
        self, assignor: Assignor, coordkit_hypothesis_settings: hypothesis.settings
    ) -> None:
        @coordkit_hypothesis_settings
        @given(group=groups())
        def check(group: GroupSubscription) -> None:
            handed_out = Counter(tp for _, tp in targets(assignor.assign(group)))
            wanted = subscribed_partitions(group)
            missing = wanted - handed_out.keys()
            assert not missing, f"exactly once: {_show(missing)} assigned to no member"
            twice = {tp for tp, n in handed_out.items() if n > 1}
            assert not twice, f"exactly once: {_show(twice)} assigned to several members"
            extra = handed_out.keys() - wanted
            assert not extra, (
                f"only subscribed partitions: {_show(extra)} handed out, but no member subscribes "
                "to them or they do not exist"
            )

        check()

    def test_partitions_go_only_to_subscribers_of_their_topic(
        self, assignor: Assignor, coordkit_hypothesis_settings: hypothesis.settings
    ) -> None:
        @coordkit_hypothesis_settings
        @given(group=groups())
        def check(group: GroupSubscription) -> None:
            for member, tp in targets(assignor.assign(group)):
                assert tp.topic in group.members[member].topics, (
                    f"only to subscribers: {member!r} got {tp} without subscribing to {tp.topic!r}"
                )

        check()

    def test_every_member_is_in_the_result(
        self, assignor: Assignor, coordkit_hypothesis_settings: hypothesis.settings
    ) -> None:
        @coordkit_hypothesis_settings
        @given(group=groups())
        def check(group: GroupSubscription) -> None:
            members = set(assignor.assign(group).members)
            assert members == set(group.members), (
                f"every member present: missing {sorted(set(group.members) - members)}, "
                f"unknown {sorted(members - set(group.members))}"
            )

        check()

    def test_deterministic(
        self, assignor: Assignor, coordkit_hypothesis_settings: hypothesis.settings
    ) -> None:
        @coordkit_hypothesis_settings
        @given(group=groups())
        def check(group: GroupSubscription) -> None:
            first = assignor.assign(group)
            again = assignor.assign(group)
            assert again == first, (
                f"deterministic: the same group gave {again.as_strings()} after {first.as_strings()}"
            )

        check()

    def test_independent_of_member_order(
        self, assignor: Assignor, coordkit_hypothesis_settings: hypothesis.settings
    ) -> None:
        @coordkit_hypothesis_settings
        @given(group=groups(), data=st.data())
        def check(group: GroupSubscription, data: st.DataObject) -> None:
            order = data.draw(st.permutations(list(group.members)), label="member order")
            listed = GroupSubscription(group.topics, {m: group.members[m] for m in order})
            first, other = assignor.assign(group), assignor.assign(listed)
            assert other == first, (
                "independent of member order: listing the members as "
                f"{order} gave {other.as_strings()} instead of {first.as_strings()}"
            )

        check()

    def test_own_result_is_a_fixed_point(
        self, assignor: Assignor, coordkit_hypothesis_settings: hypothesis.settings
    ) -> None:
        @coordkit_hypothesis_settings
        @given(group=groups())
        def check(group: GroupSubscription) -> None:
            first = assignor.assign(group)
            hypothesis.assume(self.expect_fixed_point(group, first))
            owners = _targets_of(first)
            again = assignor.assign(with_owned(group, owners, generation=5))
            got = {m: again.partitions(m) for m in again.members}
            assert got == owners, (
                f"fixed point: members owning the assignor's result {_strings(owners)} were "
                f"given {_strings(got)}"
            )
            assert not again.has_withheld, (
                "fixed point: members owning the assignor's result had partitions withheld: "
                f"{again.withheld_as_strings()}"
            )

        check()

    def test_does_not_modify_its_input(
        self, assignor: Assignor, coordkit_hypothesis_settings: hypothesis.settings
    ) -> None:
        @coordkit_hypothesis_settings
        @given(group=groups())
        def check(group: GroupSubscription) -> None:
            before = copy.deepcopy(group)
            assignor.assign(group)
            assert group == before, "the assignor modified the group it was given"

        check()

    def test_claims_it_cannot_honour_are_ignored(self, assignor: Assignor) -> None:
        # Ownership of a deleted topic, of a partition past the count and of a topic the member no
        # longer subscribes to; a subscription to a topic without metadata.
        group = GroupSubscription(
            {"t": 3, "u": 2},
            {
                "a": MemberSubscription(
                    ["t", TOPIC_WITHOUT_METADATA],
                    owned=[
                        TopicPartition(DELETED_TOPIC, 0),
                        TopicPartition("t", 7),
                        TopicPartition("u", 0),
                    ],
                    generation=1,
                ),
                "b": MemberSubscription(["u"], generation=1),
            },
        )
        result = assignor.assign(group)
        assert _targets_of(result) == {
            "a": [TopicPartition("t", p) for p in range(3)],
            "b": [TopicPartition("u", p) for p in range(2)],
        }, "claims of partitions that do not exist or are not subscribed must be ignored"

    def test_members_without_subscriptions_get_nothing(self, assignor: Assignor) -> None:
        result = assignor.assign(GroupSubscription({"t": 4}, {"idle": MemberSubscription([])}))
        assert result.members == ["idle"]
        assert result.partitions("idle") == []
        assert not result.has_withheld
        assert assignor.assign(GroupSubscription({"t": 4}, {})).members == []

    # -- declared by the assignor
    def test_identical_subscriptions_balance_counts_within_one(
        self,
        assignor: Assignor,
        traits: AssignorTraits,
        coordkit_hypothesis_settings: hypothesis.settings,
    ) -> None:
        if not traits.count_balanced:
            self._not_applicable(assignor, "count_balanced")

        @coordkit_hypothesis_settings
        @given(group=groups(identical=True))
        def check(group: GroupSubscription) -> None:
            counts = Counter(dict.fromkeys(group.members, 0))
            counts.update(m for m, _ in targets(assignor.assign(group)))
            assert max(counts.values()) - min(counts.values()) <= 1, (
                f"balanced within one for identical subscriptions: counts {dict(counts)}"
            )

        check()

    def test_sticky_when_a_member_leaves_only_its_partitions_move(
        self,
        assignor: Assignor,
        traits: AssignorTraits,
        coordkit_hypothesis_settings: hypothesis.settings,
    ) -> None:
        if not traits.sticky:
            self._not_applicable(assignor, "sticky")

        @coordkit_hypothesis_settings
        @given(
            group=groups(identical=True, owned=False, racks=False, loads=False, min_members=2),
            data=st.data(),
        )
        def check(group: GroupSubscription, data: st.DataObject) -> None:
            owners = _targets_of(assignor.assign(group))
            leaving = data.draw(st.sampled_from(sorted(group.members)), label="leaving")
            remaining = GroupSubscription(
                group.topics, {m: s for m, s in group.members.items() if m != leaving}
            )
            after = _targets_of(assignor.assign(with_owned(remaining, owners, generation=2)))
            for member in remaining.members:
                lost = set(owners[member]) - set(after[member])
                assert not lost, (
                    f"sticky: when {leaving!r} leaves only its partitions move, but {member!r} "
                    f"lost {_show(lost)}"
                )

        check()

    def test_cooperative_never_revokes_and_assigns_a_partition_in_one_round(
        self,
        assignor: Assignor,
        traits: AssignorTraits,
        coordkit_hypothesis_settings: hypothesis.settings,
    ) -> None:
        if not traits.cooperative:
            self._not_applicable(assignor, "cooperative protocol")

        @coordkit_hypothesis_settings
        @given(group=groups())
        def check(group: GroupSubscription) -> None:
            # Kafka's verifyCooperativeValidity over every claim, stale ones included.
            result = assignor.assign(group)
            claimed, got = claims(group), owned_sets(result)
            added = set().union(*(got[m] - claimed[m] for m in result.members))
            revoked = set().union(*(claimed[m] - got[m] for m in result.members))
            both = added & revoked
            assert not both, (
                f"cooperative safety: {_show(both)} revoked from one member and assigned to "
                "another in the same round (it must be withheld until revoked)"
            )

        check()

    def test_cooperative_withholds_only_what_another_member_owns(
        self,
        assignor: Assignor,
        traits: AssignorTraits,
        coordkit_hypothesis_settings: hypothesis.settings,
    ) -> None:
        if not traits.cooperative:
            self._not_applicable(assignor, "cooperative protocol")

        @coordkit_hypothesis_settings
        @given(group=groups())
        def check(group: GroupSubscription) -> None:
            result = assignor.assign(group)
            claimed = claims(group)
            for member in result.members:
                needless = {
                    tp
                    for tp in result.withheld(member)
                    if not any(tp in claimed[m] for m in claimed if m != member)
                }
                assert not needless, (
                    f"cooperative: {_show(needless)} withheld from {member!r} although no other "
                    "member owns them"
                )

        check()

    #: Rounds after which rebalancing must have settled when subscriptions differ or racks are
    #: involved (identical subscriptions without racks settle in two, as Kafka's cooperative
    #: protocol promises; otherwise Kafka's sticky builders may reshuffle as partitions are
    #: released, and take a few more).
    rounds_to_settle = 10

    def test_cooperative_rebalancing_settles(
        self,
        assignor: Assignor,
        traits: AssignorTraits,
        coordkit_hypothesis_settings: hypothesis.settings,
    ) -> None:
        if not traits.cooperative:
            self._not_applicable(assignor, "cooperative protocol")

        @coordkit_hypothesis_settings
        @given(group=groups(identical=True) | groups())
        def check(group: GroupSubscription) -> None:
            identical = len({tuple(sorted(s.topics)) for s in group.members.values()}) == 1
            racks = any(s.rack for s in group.members.values()) and any(
                meta.replica_racks for meta in group.topics.values()
            )
            limit = 2 if identical and not racks else self.rounds_to_settle
            seen: list[dict[str, list[TopicPartition]]] = []
            for round_number in range(1, limit + 1):
                result = assignor.assign(group)
                if not result.has_withheld:
                    return
                # Members revoke what was withheld from them; the withheld is owned by no one.
                owners = {m: sorted(result.partitions(m)) for m in result.members}
                if racks and owners in seen:
                    # Kafka's rack-aware sticky assignor can alternate between two assignments
                    # for ever when racks and subscriptions pull a partition two ways (Kafka's
                    # transcription, tests/harness/kafka_sticky_reference.py, repeats the same
                    # two rounds on the group this property found): a reproduction of Kafka
                    # promises no more than Kafka, a cycle and not a drift.
                    return
                seen.append(owners)
                group = with_owned(group, owners, generation=5 + round_number)
            raise AssertionError(
                f"cooperative: rebalancing did not settle in {limit} rounds"
                + (" (identical subscriptions without racks settle in two)" if limit == 2 else "")
                + f"; round {limit} still withholds {result.withheld_as_strings()}"
            )

        check()

"""What the suites of the assignors that compute a group's target on the coordinator check alike:
the server-side assignors (KIP-848, :mod:`coordkit.testing.server_assignors`) and the
share-partition assignors (KIP-932, :mod:`coordkit.testing.share_assignors`), both of the
contract :mod:`coordkit.strategies.target_assignment`.

:class:`TargetAssignorChecks` holds the checks every such assignor passes — it declares a name,
every member is in its result, the same group gives the same target, a subscription to a topic
the describer does not hold is a :class:`PartitionAssignorError` — and the random topics and
members both suites draw their groups from.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import hypothesis
import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordkit.strategies.target_assignment import (
    GroupSpec,
    MemberSpec,
    PartitionAssignorError,
    TargetAssignment,
    TopicDescriber,
    TopicDescription,
)

__all__ = [
    "RACKS",
    "TargetAssignorChecks",
    "draw_member_names",
    "draw_topics",
    "show",
    "subscribed_partitions",
]

RACKS = ("rack-a", "rack-b", "rack-c")


class TargetAssignor(Protocol):
    """What both kinds of assignor are, as far as the common checks go."""

    @property
    def name(self) -> str: ...

    def assign(self, group: GroupSpec, topics: TopicDescriber) -> TargetAssignment: ...


def draw_topics(
    draw: st.DrawFn, *, max_topics: int, max_partitions: int, racks: bool, loads: bool
) -> list[TopicDescription]:
    """1 to ``max_topics`` topics of up to ``max_partitions`` partitions each, with unique random
    ids; replicas on one or two racks (sometimes, if ``racks``) and per-partition loads
    (sometimes, if ``loads``)."""
    topic_count = draw(st.integers(1, max_topics), label="topics")
    with_racks = racks and draw(st.booleans(), label="racks")
    with_loads = loads and draw(st.booleans(), label="loads")
    id_numbers = draw(
        st.lists(st.integers(0, 2**128 - 1), min_size=topic_count, max_size=topic_count,
                 unique=True),
        label="topic ids",
    )  # fmt: skip
    described = []
    for t in range(topic_count):
        partitions = draw(st.integers(0, max_partitions), label="partitions")
        partition_racks = (
            [draw(st.sets(st.sampled_from(RACKS), min_size=1, max_size=2))
             for _ in range(partitions)]
            if with_racks
            else None
        )  # fmt: skip
        weights = (
            draw(st.lists(st.integers(0, 50), min_size=partitions, max_size=partitions))
            if with_loads
            else None
        )
        described.append(
            TopicDescription(uuid.UUID(int=id_numbers[t]), f"topic-{t}", partitions,
                             partition_racks, weights)
        )  # fmt: skip
    return described


def draw_member_names(
    draw: st.DrawFn, *, pool: int, min_members: int, max_members: int
) -> list[str]:
    """Member ids ``m0``.. (of ``pool``), in a random order: the coordinator's iteration order."""
    return draw(
        st.lists(st.sampled_from([f"m{i}" for i in range(pool)]), min_size=min_members,
                 max_size=max_members, unique=True),
        label="members",
    )  # fmt: skip


def subscribed_partitions(group: GroupSpec, topics: TopicDescriber) -> set[tuple[uuid.UUID, int]]:
    """Every partition of a topic some member subscribes to."""
    return {
        (t, p)
        for t in group.subscribed_topic_ids()
        for p in range(topics.num_partitions(t))
    }  # fmt: skip


def show(items: Iterable[Any], limit: int = 6) -> str:
    """Up to ``limit`` of ``items`` for an assertion's message, and how many more there are."""
    listed = sorted(items, key=str)
    text = ", ".join(str(x) for x in listed[:limit])
    return text + (f" and {len(listed) - limit} more" if len(listed) > limit else "")


class TargetAssignorChecks:
    """The checks both suites run; a suite provides :meth:`target_assignor` (its own fixture's
    assignor) and :meth:`random_groups` (its random groups)."""

    @pytest.fixture
    def target_assignor(self) -> TargetAssignor:
        pytest.fail("the suite gives its assignor fixture here (see coordkit.testing)")

    def random_groups(self) -> st.SearchStrategy[tuple[GroupSpec, TopicDescriber]]:
        raise NotImplementedError("the suite gives its random groups")

    def _for_every_group(
        self,
        settings: hypothesis.settings,
        check: Callable[[GroupSpec, TopicDescriber], None],
    ) -> None:
        @settings
        @given(case=self.random_groups())
        def run(case: tuple[GroupSpec, TopicDescriber]) -> None:
            check(*case)

        run()

    def test_declares_a_name(self, target_assignor: TargetAssignor) -> None:
        assert isinstance(target_assignor.name, str)
        assert target_assignor.name

    def test_every_member_is_in_the_result(
        self, target_assignor: TargetAssignor, coordkit_hypothesis_settings: hypothesis.settings
    ) -> None:
        def check(group: GroupSpec, topics: TopicDescriber) -> None:
            got = set(target_assignor.assign(group, topics).members)
            assert got == set(group.members), f"members {sorted(got)} for {sorted(group.members)}"

        self._for_every_group(coordkit_hypothesis_settings, check)

    def test_deterministic(
        self, target_assignor: TargetAssignor, coordkit_hypothesis_settings: hypothesis.settings
    ) -> None:
        def check(group: GroupSpec, topics: TopicDescriber) -> None:
            first = target_assignor.assign(group, topics)
            again = target_assignor.assign(group, topics)
            assert again == first, f"deterministic: {again.as_sets()} after {first.as_sets()}"

        self._for_every_group(coordkit_hypothesis_settings, check)

    def test_a_subscription_to_an_unknown_topic_is_refused(
        self, target_assignor: TargetAssignor
    ) -> None:
        topics = TopicDescriber.from_counts({"t": 3})
        unknown = uuid.UUID(int=7)
        group = GroupSpec({"a": MemberSpec([unknown]), "b": MemberSpec([unknown])})
        with pytest.raises(PartitionAssignorError):
            target_assignor.assign(group, topics)

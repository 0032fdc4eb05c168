"""Every registered share-partition assignor through the conformance kit's share assignor suite
(coordkit.testing.share_assignors, in py311-share: a minute of random groups), the suite
third-party ones run too; and what coordkit's own
two promise beyond it (rack-local partitions, even loads)."""

from __future__ import annotations

import uuid

import pytest

from coordkit.plugins import get_plugin_manager
from coordkit.strategies.share_assignment import (
    GroupSpec,
    MemberSpec,
    ShareAssignor,
    TopicDescriber,
    TopicDescription,
)
from coordkit.testing.share_assignors import ShareAssignorTests

NAMES = sorted(get_plugin_manager().share_assignors.names())


def test_the_built_in_share_assignors_are_registered() -> None:
    assert {"simple", "load-balanced", "rack-aware"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
class TestRegisteredShareAssignor(ShareAssignorTests):
    @pytest.fixture
    def share_assignor(self, name: str) -> ShareAssignor:
        return get_plugin_manager().share_assignor(name)

    def keeps_topics_nobody_subscribes(self, assignor: ShareAssignor) -> bool:
        return assignor.name == "simple"  # Kafka's SimpleHeterogeneousAssignmentBuilder does


def test_rack_aware_gives_members_the_partitions_on_their_racks() -> None:
    tid = uuid.UUID(int=1)
    racks = [{"west"}, {"east"}, {"west"}, {"east"}]
    topics = TopicDescriber([TopicDescription(tid, "t", 4, racks)])
    group = GroupSpec({"w": MemberSpec([tid], rack="west"), "e": MemberSpec([tid], rack="east")})
    target = get_plugin_manager().share_assignor("rack-aware").assign(group, topics).as_sets()
    assert target == {"e": {tid: frozenset({1, 3})}, "w": {tid: frozenset({0, 2})}}
    # simple ignores racks: its split is by position.
    simple = get_plugin_manager().share_assignor("simple").assign(group, topics).as_sets()
    assert simple != target


def test_load_balanced_evens_out_loads_not_counts() -> None:
    tid = uuid.UUID(int=2)
    topics = TopicDescriber([TopicDescription(tid, "t", 4, loads=[90, 10, 10, 10])])
    group = GroupSpec({"a": MemberSpec([tid]), "b": MemberSpec([tid])})
    target = get_plugin_manager().share_assignor("load-balanced").assign(group, topics)
    loads = sorted(sum([90, 10, 10, 10][p] for p in a.as_sets().get(tid, ())) for a in
                   target.members.values())  # fmt: skip
    assert loads == [30, 90]
    assert sorted(target.counts().values()) == [1, 3]

"""Group-leader strategies: ``kafka`` (first to join; when it leaves, the earliest remaining) and
``lowest-id``, directly and through a running group."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from coordkit.engine import Cluster
from coordkit.engine.groups import GroupLeaderSelection, LeaderCandidate
from coordkit.plugins import get_plugin_manager
from coordkit.strategies.elections import ElectionKind

from .conftest import partitions_of, start, wait_stable

ALL = partitions_of("orders", 6)


def strategy(name: str) -> GroupLeaderSelection:
    found = get_plugin_manager().election(ElectionKind.GROUP_LEADER.value, name)
    assert isinstance(found, GroupLeaderSelection)
    return found


MEMBERS = [
    LeaderCandidate("m-c", None, 1),
    LeaderCandidate("m-a", "zeta", 2),
    LeaderCandidate("m-b", "alpha", 3),
]


def test_kafka_keeps_the_current_leader_else_the_earliest_joined() -> None:
    kafka = strategy("kafka")
    assert kafka.choose_leader(None, MEMBERS) == "m-c"
    assert kafka.choose_leader("m-b", MEMBERS) == "m-b"
    assert kafka.choose_leader("gone", MEMBERS[1:]) == "m-a"


def test_lowest_id_prefers_the_lowest_static_instance_id() -> None:
    lowest = strategy("lowest-id")
    assert lowest.choose_leader("m-c", MEMBERS) == "m-b"  # instance "alpha"
    dynamic = [LeaderCandidate("z", None, 1), LeaderCandidate("b", None, 2)]
    assert lowest.choose_leader("z", dynamic) == "b"


def test_strategies_refuse_an_empty_group() -> None:
    with pytest.raises(ValueError, match="no members"):
        strategy("kafka").choose_leader(None, [])


def test_kafka_leader_in_a_running_group(group_cluster: Callable[..., Cluster]) -> None:
    cluster = group_cluster()
    first = start(cluster, "g", ["orders"])
    wait_stable(cluster, "g", [first], ALL)
    second = start(cluster, "g", ["orders"])
    wait_stable(cluster, "g", [first, second], ALL)  # so that it joined before the third
    third = start(cluster, "g", ["orders"])
    assert wait_stable(cluster, "g", [first, second, third], ALL).leader == first.member_id
    first.close()
    described = wait_stable(cluster, "g", [second, third], ALL)
    assert described.leader == second.member_id  # joined before the third


def test_lowest_id_leader_in_a_running_group(group_cluster: Callable[..., Cluster]) -> None:
    cluster = group_cluster(group_leader="lowest-id")
    late = start(cluster, "g", ["orders"], group_instance_id="b")
    wait_stable(cluster, "g", [late], ALL)
    early = start(cluster, "g", ["orders"], group_instance_id="a")
    described = wait_stable(cluster, "g", [late, early], ALL)
    assert described.leader == early.member_id

"""Membership churn through the coordinator, eager and cooperative, with the invariants checked
at every step: joins, leaves, crashes and a coordinator move."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from coordkit.engine import Cluster, EngineError
from coordkit.engine.groups import GroupState
from harness.waiting import wait_for

from .conftest import partitions_of, start, wait_stable

ALL = partitions_of("orders", 6)


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_churn_keeps_ownership_exclusive_and_complete(
    group_cluster: Callable[..., Cluster], assignor: str
) -> None:
    cluster = group_cluster()
    first = start(cluster, "g", ["orders"], assignors=(assignor,))
    described = wait_stable(cluster, "g", [first], ALL)
    assert described.protocol == assignor
    assert described.leader == first.member_id

    second = start(cluster, "g", ["orders"], assignors=(assignor,))
    third = start(cluster, "g", ["orders"], assignors=(assignor,))
    described = wait_stable(cluster, "g", [first, second, third], ALL)
    assert all(len(c.assignment()) == 2 for c in (first, second, third))

    second.close()  # leaves: the coordinator rebalances at once
    wait_stable(cluster, "g", [first, third], ALL)

    generation = cluster.describe_group("g").generation
    third.crash()  # only the session timeout tells the coordinator
    described = wait_stable(cluster, "g", [first], ALL)
    assert described.generation > generation

    coordinator = cluster.group_coordinator("g")
    assert coordinator is not None
    cluster.kill(coordinator)
    wait_for(
        lambda: cluster.group_coordinator("g") not in (None, coordinator),
        what="the coordinator to move",
    )
    fourth = start(cluster, "g", ["orders"], assignors=(assignor,))
    described = wait_stable(cluster, "g", [first, fourth], ALL)
    assert described.coordinator != coordinator
    history = cluster.group_history
    assert history is not None
    generations = history.generations("g")
    assert generations == sorted(set(generations))


def test_cooperative_moves_partitions_in_two_rounds_without_revoking_everything(
    group_cluster: Callable[..., Cluster],
) -> None:
    cluster = group_cluster()
    first = start(cluster, "g", ["orders"], assignors=("cooperative-sticky",))
    wait_stable(cluster, "g", [first], ALL)
    second = start(cluster, "g", ["orders"], assignors=("cooperative-sticky",))
    wait_stable(cluster, "g", [first, second], ALL)

    history = cluster.group_history
    assert history is not None
    last = history.rebalances("g")[-1]
    assert last.rounds == 2  # revoke in the first round, hand over in the second
    revoked = [
        c
        for c in history.changes("g")
        if c.kind.value == "revoked" and c.member_id == first.member_id
    ]
    # The first member only ever gave up what moved to the second one (3 of its 6 partitions).
    assert sum(len(c.partitions) for c in revoked) == 3
    rounds = {r.generation: r for r in history.rounds("g")}
    for round_ in rounds.values():
        for member, parts in round_.assigned.items():
            for other, owned in round_.owned.items():
                if other != member:
                    assert not parts & owned


def test_eager_members_revoke_everything_before_rejoining(
    group_cluster: Callable[..., Cluster],
) -> None:
    cluster = group_cluster()
    first = start(cluster, "g", ["orders"], assignors=("range",))
    wait_stable(cluster, "g", [first], ALL)
    second = start(cluster, "g", ["orders"], assignors=("range",))
    wait_stable(cluster, "g", [first, second], ALL)

    history = cluster.group_history
    assert history is not None
    revoked = [
        c
        for c in history.changes("g")
        if c.kind.value == "revoked" and c.member_id == first.member_id
    ]
    assert sum(len(c.partitions) for c in revoked) == len(ALL)
    assert history.rebalances("g")[-1].rounds == 1
    unavailable = history.unavailability("g")
    assert unavailable.partitions >= 3  # at least the first member's were unowned for a while
    assert unavailable.partition_seconds > 0


def test_empty_group_after_everyone_left(group_cluster: Callable[..., Cluster]) -> None:
    cluster = group_cluster()
    consumers = [start(cluster, "g", ["orders"]) for _ in range(2)]
    wait_stable(cluster, "g", consumers, ALL)
    for consumer in consumers:
        consumer.close()
    described = wait_for(
        lambda: (d := cluster.describe_group("g")).state is GroupState.EMPTY and d,
        what="the group to be empty",
    )
    assert described.members == ()


def test_cluster_waits_for_a_stable_group_or_says_why(
    group_cluster: Callable[..., Cluster],
) -> None:
    cluster = group_cluster()
    consumers = [start(cluster, "g", ["orders"]) for _ in range(3)]
    described = cluster.wait_group_stable("g", timeout=30)
    assert described.state is GroupState.STABLE
    assert {m.member_id for m in described.members} == {c.member_id for c in consumers}
    assert set().union(*(m.assignment for m in described.members)) == set(ALL)
    assert cluster.group_stable("g")
    consumers[0].crash()
    assert not cluster.group_stable("g")  # one member fewer than the coordinator holds
    with pytest.raises(EngineError, match=r"group 'nobody' did not become stable within 0\.2s"):
        cluster.wait_group_stable("nobody", timeout=0.2)

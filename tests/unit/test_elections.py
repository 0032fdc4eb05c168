"""Kafka's leader election algorithms and replica placement, case for case.

Sources: kafka-vectors.json (``leader_election``), Kafka's PartitionLeaderElectionAlgorithmsTest,
AdminTest.testReplicaAssignment, AdminRackAwareTest and RackAwareTest's distribution checks.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from coordkit.engine.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
)
from coordkit.errors import UnknownNameError
from coordkit.plugins import get_plugin_manager
from coordkit.strategies.elections import (
    ElectionKind,
    ElectionReason,
    LeaderAndIsr,
    PartitionElectionInput,
    PartitionLeaderElection,
    controlled_shutdown_election,
    controlled_shutdown_partition_leader,
    new_partition_election,
    offline_election,
    offline_partition_leader,
    preferred_replica_election,
    preferred_replica_partition_leader,
    reassign_election,
    reassign_partition_leader,
)
from coordkit_placements.kafka import (
    BrokerMetadata,
    assign_replicas,
    brokers_from,
    rack_alternated_brokers,
)

VECTORS = Path("/work/shared/reference/kafka-vectors.json")


def _vectors() -> list[dict[str, Any]]:
    return list(json.loads(VECTORS.read_text())["leader_election"])


def _strategy(name: str) -> PartitionLeaderElection:
    return get_plugin_manager().election(ElectionKind.PARTITION_LEADER.value, name)  # type: ignore[no-any-return]


# -- kafka-vectors.json ----------------------------------------------------------------------------


@pytest.mark.parametrize("case", _vectors(), ids=lambda c: f"{c['algo']}-{c.get('leader')}")
def test_vector(case: dict[str, Any]) -> None:
    algo = case["algo"]
    if algo == "offline":
        leader = offline_partition_leader(
            case["assignment"], case["isr"], case["live"], case["unclean"]
        )
        name = "offline-unclean" if case["unclean"] else "offline"
        inp = PartitionElectionInput(case["assignment"], case["isr"], case["live"])
    elif algo == "reassign":
        leader = reassign_partition_leader(case["target"], case["isr"], case["live"])
        name = "reassign"
        inp = PartitionElectionInput(
            case["target"], case["isr"], case["live"], target=case["target"]
        )
    elif algo == "preferred":
        leader = preferred_replica_partition_leader(case["assignment"], case["isr"], case["live"])
        name = "preferred"
        inp = PartitionElectionInput(case["assignment"], case["isr"], case["live"])
    elif algo == "controlled_shutdown":
        leader = controlled_shutdown_partition_leader(
            case["assignment"], case["isr"], case["live"], case["shutting_down"]
        )
        name = "controlled-shutdown"
        inp = PartitionElectionInput(
            case["assignment"], case["isr"], case["live"], shutting_down=case["shutting_down"]
        )
    else:  # pragma: no cover - a new algorithm in the vectors must be added here
        pytest.fail(f"unknown algorithm in kafka-vectors.json: {algo}")
    assert leader == case["leader"]
    result = _strategy(name).elect(inp)
    assert (result.leader if result else None) == case["leader"]


def test_every_vector_algorithm_is_covered() -> None:
    assert {c["algo"] for c in _vectors()} == {
        "offline",
        "reassign",
        "preferred",
        "controlled_shutdown",
    }


# -- PartitionLeaderElectionAlgorithmsTest -------------------------------------------------------


def test_offline_partition_leader_election() -> None:
    assert offline_partition_leader([2, 4], [2, 4], {4}, False) == 4


def test_offline_last_isr_offline_unclean_disabled() -> None:
    assert offline_partition_leader([2, 4], [2], {4}, False) is None


def test_offline_last_isr_offline_unclean_enabled() -> None:
    assert offline_partition_leader([2, 4], [2], {4}, True) == 4


def test_reassign_partition_leader_election() -> None:
    assert reassign_partition_leader([2, 4], [2, 4], {4}) == 4


def test_reassign_with_no_live_isr() -> None:
    assert reassign_partition_leader([2, 4], [2], set()) is None


def test_reassign_with_empty_isr() -> None:
    assert reassign_partition_leader([2, 4], [], {2}) is None


def test_preferred_replica_partition_leader_election() -> None:
    assert preferred_replica_partition_leader([2, 4], [2, 4], {2, 4}) == 2


def test_preferred_replica_in_isr_not_live() -> None:
    assert preferred_replica_partition_leader([2, 4], [2], set()) is None


def test_preferred_replica_not_in_isr_live() -> None:
    assert preferred_replica_partition_leader([2, 4], [4], {2, 4}) is None


def test_preferred_replica_not_in_isr_not_live() -> None:
    assert preferred_replica_partition_leader([2, 4], [], set()) is None


def test_controlled_shutdown_partition_leader_election() -> None:
    assert controlled_shutdown_partition_leader([2, 4], [2, 4], {2, 4}, {2}) == 4


def test_controlled_shutdown_last_isr_shutting_down() -> None:
    assert controlled_shutdown_partition_leader([2, 4], [2], {2, 4}, {2}) is None


def test_controlled_shutdown_all_isr_simultaneously_shut_down() -> None:
    assert controlled_shutdown_partition_leader([2, 4], [2, 4], {2, 4}, {2, 4}) is None


# -- "first" is assignment order, and the new ISR rules --------------------------------------------


def test_first_means_assignment_order_not_isr_order() -> None:
    # ISR lists 3 first, but 1 comes first in the assignment.
    assert offline_partition_leader([1, 2, 3], [3, 1], {1, 3}, False) == 1
    assert controlled_shutdown_partition_leader([5, 1, 3], [3, 1, 5], {1, 3, 5}, {5}) == 1
    assert reassign_partition_leader([4, 3], [3, 4], {3, 4}) == 4


def test_offline_clean_isr_keeps_live_members_in_isr_order() -> None:
    result = offline_election(PartitionElectionInput([1, 2, 3], [3, 1, 2], {2, 3}), False)
    assert result == LeaderAndIsr(2, (3, 2), ElectionReason.OFFLINE)


def test_offline_unclean_isr_is_the_leader_alone() -> None:
    result = offline_election(PartitionElectionInput([1, 2, 3], [1], {3, 2}), True)
    assert result == LeaderAndIsr(2, (2,), ElectionReason.UNCLEAN, unclean=True)
    assert offline_election(PartitionElectionInput([1, 2, 3], [1], {3, 2}), False) is None


def test_offline_prefers_a_live_isr_member_even_when_unclean_is_allowed() -> None:
    result = offline_election(PartitionElectionInput([1, 2, 3], [3], {2, 3}), True)
    assert result is not None
    assert (result.leader, result.unclean) == (3, False)


def test_controlled_shutdown_isr_drops_shutting_down_brokers() -> None:
    inp = PartitionElectionInput([2, 4, 5], [2, 5, 4], {2, 4, 5}, shutting_down={2, 5})
    assert controlled_shutdown_election(inp) == LeaderAndIsr(
        4, (4,), ElectionReason.CONTROLLED_SHUTDOWN
    )


def test_preferred_and_reassign_keep_the_isr() -> None:
    inp = PartitionElectionInput([2, 4], [4, 2], {2, 4})
    assert preferred_replica_election(inp) == LeaderAndIsr(2, (4, 2), ElectionReason.PREFERRED)
    moved = PartitionElectionInput([2, 4], [4, 2], {2, 4}, target=[4, 2])
    assert reassign_election(moved) == LeaderAndIsr(4, (4, 2), ElectionReason.REASSIGN)


def test_new_partition_leader_is_first_live_and_isr_all_live() -> None:
    assert new_partition_election([3, 1, 2], {1, 2}) == LeaderAndIsr(1, (1, 2), ElectionReason.NEW)
    assert new_partition_election([3, 1], set()) is None


def test_partition_strategies_are_registered_by_kind_and_name() -> None:
    manager = get_plugin_manager()
    names = {r.name for r in manager.elections if r.name.startswith("partition-leader/")}
    assert names >= {
        "partition-leader/offline",
        "partition-leader/offline-unclean",
        "partition-leader/reassign",
        "partition-leader/preferred",
        "partition-leader/controlled-shutdown",
    }
    for name in ("kafka", "latch"):
        assert manager.election("controller", name).kind is ElectionKind.CONTROLLER
    with pytest.raises(UnknownNameError, match=r"'nope'.*kafka, latch"):
        manager.election("controller", "nope")


# -- replica placement: AdminTest / AdminRackAwareTest ---------------------------------------------


def test_replica_assignment_rack_unaware() -> None:
    brokers = brokers_from(range(5))
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas(brokers, 10, 0)
    with pytest.raises(InvalidReplicationFactorError, match="6 larger than available brokers: 5"):
        assign_replicas(brokers, 10, 6)
    expected = {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }
    assert assign_replicas(brokers, 10, 3, fixed_start_index=0) == expected


def test_partitions_must_be_positive() -> None:
    with pytest.raises(InvalidPartitionsError):
        assign_replicas(brokers_from(range(3)), 0, 1)


def test_rack_alternated_broker_list_and_assignment() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_brokers(racks) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_brokers({b: r for b, r in racks.items() if b != 5}) == [0, 3, 1, 4, 2]
    assert assign_replicas(
        brokers_from(racks), 7, 3, fixed_start_index=0, start_partition_id=0
    ) == {
        0: [0, 3, 1],
        1: [3, 1, 5],
        2: [1, 5, 4],
        3: [5, 4, 2],
        4: [4, 2, 0],
        5: [2, 0, 3],
        6: [0, 4, 2],
    }


def test_partial_rack_information_is_an_error() -> None:
    brokers = [BrokerMetadata(0, "a"), BrokerMetadata(1, None), BrokerMetadata(2, "b")]
    with pytest.raises(InvalidReplicaAssignmentError, match=r"no rack: brokers \[1\]"):
        assign_replicas(brokers, 3, 2)
    # Rack-unaware mode ignores racks altogether.
    assert len(assign_replicas(brokers, 3, 2, rack_aware=False)) == 3


def _check_distribution(
    assignment: dict[int, list[int]],
    racks: dict[int, str],
    partitions: int,
    factor: int,
    *,
    rack_aware: bool = True,
    leaders: bool = True,
    replicas: bool = True,
) -> None:
    """RackAwareTest.checkReplicaDistribution."""
    for replica_list in assignment.values():
        assert len(set(replica_list)) == len(replica_list)
    if rack_aware:
        assert [len({racks[b] for b in r}) for r in assignment.values()] == [factor] * partitions
    if leaders:
        counts = Counter(r[0] for r in assignment.values())
        assert sorted(counts.values()) == [partitions // len(racks)] * len(racks)
    if replicas:
        counts = Counter(b for r in assignment.values() for b in r)
        assert sorted(counts.values()) == [partitions * factor // len(racks)] * len(racks)


SIX_BROKERS = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}


@pytest.mark.parametrize(
    ("racks", "partitions", "factor", "start", "start_partition", "checks"),
    [
        (SIX_BROKERS, 6, 3, 2, 0, {}),  # testAssignmentWithRackAware
        (SIX_BROKERS, 6, 3, -1, -1, {}),  # ...WithRandomStartIndex
        (SIX_BROKERS, 13, 3, 0, 0, {"leaders": False, "replicas": False}),  # UnevenReplicas
        (
            {0: "rack1", 1: "rack1", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"},
            12,
            3,
            -1,
            -1,
            {"replicas": False},
        ),  # UnevenRacks
        (SIX_BROKERS, 12, 2, -1, -1, {}),  # testAssignmentWith2ReplicasRackAware
        (
            {6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack3", 11: "rack1"},
            12,
            2,
            -1,
            12,
            {},
        ),  # testRackAwareExpansion
        (SIX_BROKERS, 6, 2, -1, -1, {}),  # ...With6Partitions
        ({0: "rack1", 1: "rack2", 4: "rack3"}, 3, 2, -1, -1, {}),  # ...And3Brokers
        (
            {
                0: "rack1",
                1: "rack2",
                2: "rack2",
                3: "rack3",
                4: "rack3",
                5: "rack1",
                6: "rack1",
                7: "rack2",
                8: "rack2",
                9: "rack3",
                10: "rack1",
                11: "rack3",
            },
            96,
            3,
            -1,
            -1,
            {},
        ),  # testLargeNumberPartitionsAssignment
    ],
)
def test_rack_aware_distribution(
    racks: dict[int, str],
    partitions: int,
    factor: int,
    start: int,
    start_partition: int,
    checks: dict[str, bool],
) -> None:
    for seed in range(5):  # random start indexes must satisfy the same checks
        assignment = assign_replicas(
            brokers_from(racks),
            partitions,
            factor,
            fixed_start_index=start,
            start_partition_id=start_partition,
            rng=random.Random(seed),
        )
        assert len(assignment) == partitions
        _check_distribution(assignment, racks, partitions, factor, **checks)


def test_more_replicas_than_racks() -> None:
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}
    assignment = assign_replicas(brokers_from(racks), 6, 5)
    assert all(len(r) == 5 for r in assignment.values())
    assert all(len({racks[b] for b in r}) == 3 for r in assignment.values())


def test_less_replicas_than_racks() -> None:
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}
    assignment = assign_replicas(brokers_from(racks), 6, 2)
    assert all(len({racks[b] for b in r}) == 2 for r in assignment.values())


def test_single_rack() -> None:
    racks = dict.fromkeys(range(6), "rack1")
    assignment = assign_replicas(brokers_from(racks), 6, 3)
    assert all(len(r) == 3 for r in assignment.values())
    assert Counter(r[0] for r in assignment.values()) == dict.fromkeys(range(6), 1)


def test_skip_broker_with_replica_already_assigned() -> None:
    racks = {0: "a", 1: "b", 2: "c", 3: "a", 4: "a"}
    assignment = assign_replicas(brokers_from(racks), 6, 4, fixed_start_index=2)
    _check_distribution(assignment, racks, 6, 4, rack_aware=False, leaders=False, replicas=False)
    assert all(len(r) == 4 for r in assignment.values())

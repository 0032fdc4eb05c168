"""Every built-in partition leader election and group-coordinator strategy through the conformance
kit's election suites (coordkit.testing.elections), the suites third-party strategies run."""

from __future__ import annotations

from typing import Any

import pytest

from coordkit.plugins import get_plugin_manager
from coordkit.strategies.elections import ElectionKind
from coordkit.testing.elections import GroupCoordinatorSelectionTests, PartitionElectionTests

BUILT_IN = ("offline", "offline-unclean", "reassign", "preferred", "controlled-shutdown")


class TestBuiltInPartitionElections(PartitionElectionTests):
    @pytest.fixture(params=BUILT_IN)
    def election(self, request: pytest.FixtureRequest) -> Any:
        return get_plugin_manager().election(ElectionKind.PARTITION_LEADER.value, request.param)


def test_every_built_in_partition_election_runs_the_kit() -> None:
    prefix = f"{ElectionKind.PARTITION_LEADER.value}/"
    registered = {
        r.name.removeprefix(prefix)
        for r in get_plugin_manager().elections
        if r.name.startswith(prefix) and type(r.value).__module__.startswith("coordkit_elections")
    }
    assert registered == set(BUILT_IN)


COORDINATORS = ("kafka", "murmur2", "rendezvous")


class TestBuiltInGroupCoordinators(GroupCoordinatorSelectionTests):
    @pytest.fixture(params=COORDINATORS)
    def selection(self, request: pytest.FixtureRequest) -> Any:
        return get_plugin_manager().group_coordinator_selection(request.param)


def test_every_built_in_group_coordinator_runs_the_kit() -> None:
    prefix = f"{ElectionKind.GROUP_COORDINATOR.value}/"
    registered = {
        r.name.removeprefix(prefix)
        for r in get_plugin_manager().elections
        if r.name.startswith(prefix) and type(r.value).__module__.startswith("coordkit_elections")
    }
    assert registered == set(COORDINATORS)


class _EverythingOnPartitionZero:
    name = "partition-zero"
    description = "every id on partition 0"
    kind = ElectionKind.GROUP_COORDINATOR

    def partition_for(self, group_id: str, num_partitions: int) -> int:
        if num_partitions < 1:
            raise ValueError(f"partitions: {num_partitions}")
        return 0


def test_the_kit_refuses_a_strategy_that_leaves_partitions_unused() -> None:
    with pytest.raises(AssertionError, match="without a group"):
        GroupCoordinatorSelectionTests().test_many_ids_use_every_partition(
            _EverythingOnPartitionZero(), 7
        )

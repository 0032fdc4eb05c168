"""Every built-in partition leader election through the conformance kit's election suite
(coordkit.testing.elections), the suite third-party strategies run."""

from __future__ import annotations

from typing import Any

import pytest

from coordkit.plugins import get_plugin_manager
from coordkit.strategies.elections import ElectionKind
from coordkit.testing.elections import PartitionElectionTests

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

"""Every registered server-side assignor through the conformance kit's server assignor suite
(coordkit.testing.server_assignors), the suite third-party ones run too.

The exemptions below are the classic assignors' documented behaviour (see test_kit.py)."""

from __future__ import annotations

import pytest

from coordkit.plugins import get_plugin_manager
from coordkit.strategies.target_assignment import (
    GroupSpec,
    ServerAssignor,
    TargetAssignment,
    TopicDescriber,
)
from coordkit.testing.server_assignors import ServerAssignorTests
from coordkit_assignors.weighted import DEFAULT_TOLERANCE

NAMES = get_plugin_manager().server_assignor_names()


@pytest.mark.parametrize("name", NAMES)
class TestRegisteredServerAssignor(ServerAssignorTests):
    @pytest.fixture
    def server_assignor(self, name: str) -> ServerAssignor:
        return get_plugin_manager().server_assignor(name)

    def expect_fixed_point(
        self,
        assignor: ServerAssignor,
        group: GroupSpec,
        topics: TopicDescriber,
        target: TargetAssignment,
    ) -> bool:
        if assignor.name == "sticky":
            # Kafka's rack-aware sticky (KIP-881) gives up partitions not on the owner's rack.
            return all(d.partition_racks is None for d in topics.topics.values())
        if assignor.name == "weighted-sticky":
            # A member keeps what it owns only within the load cap (every partition weighs 1 here).
            counts = [
                n for m, n in target.counts().items() if group.members[m].subscribed_topic_ids
            ]
            active = [n for n in counts if n] or [0]
            return max(active) <= sum(counts) / max(len(counts), 1) * (1 + DEFAULT_TOLERANCE)
        return True


def test_kafkas_and_coordkits_server_assignors_are_registered() -> None:
    assert {"uniform", "range", "rack-aware", "sticky", "weighted-sticky", "range-ceil"} <= set(
        NAMES
    )

"""Every built-in assignor through the conformance kit's assignor suite (coordkit.testing), the
suite third-party assignors run: one suite, not two.

The exemptions below are documented behaviour of Kafka's algorithms, not gaps in the suite.
"""

from __future__ import annotations

from typing import ClassVar

import pytest

from coordkit.plugins import get_plugin_manager
from coordkit.strategies.assignment import (
    Assignor,
    GroupAssignment,
    GroupSubscription,
    TopicMetadata,
)
from coordkit.strategies.assignment_io import member_loads
from coordkit.testing.assignors import AssignorTests
from coordkit_assignors.weighted import DEFAULT_TOLERANCE


class BuiltInAssignorTests(AssignorTests):
    """The kit's suite on the built-in assignor registered as :attr:`registered_name`."""

    registered_name: ClassVar[str]

    @pytest.fixture
    def assignor(self) -> Assignor:
        return get_plugin_manager().assignor(self.registered_name)


class TestRange(BuiltInAssignorTests):
    registered_name = "range"


class TestRangeCeil(BuiltInAssignorTests):
    registered_name = "range-ceil"


class TestRoundRobin(BuiltInAssignorTests):
    registered_name = "roundrobin"


class TestUniform(BuiltInAssignorTests):
    registered_name = "uniform"


class TestSticky(BuiltInAssignorTests):
    registered_name = "sticky"

    def expect_fixed_point(self, group: GroupSubscription, assignment: GroupAssignment) -> bool:
        # Kafka's rack-aware sticky (KIP-881) gives up owned partitions whose replicas are not on
        # the owner's rack, so its own result is a fixed point only without rack information.
        return all(meta.replica_racks is None for meta in group.topics.values())


class TestCooperativeSticky(TestSticky):
    registered_name = "cooperative-sticky"


class TestWeightedSticky(BuiltInAssignorTests):
    registered_name = "weighted-sticky"

    def expect_fixed_point(self, group: GroupSubscription, assignment: GroupAssignment) -> bool:
        # A member keeps what it owns only within the load cap; a from-scratch result can exceed
        # it (one partition heavier than the share), and then the next round moves partitions.
        loads = member_loads(group, assignment)
        active = [
            m
            for m, s in group.members.items()
            if any(group.topics.get(t, TopicMetadata(0)).partitions for t in s.topics)
        ]
        if not active:
            return True
        cap = sum(loads.values()) / len(active) * (1 + DEFAULT_TOLERANCE)
        return max(loads.values()) <= cap


def test_every_built_in_assignor_runs_the_kit() -> None:
    covered = {cls.registered_name for cls in _kit_classes(BuiltInAssignorTests)}
    built_in = {
        r.name
        for r in get_plugin_manager().assignors
        if type(r.value).__module__.startswith("coordkit_assignors")
    }
    assert built_in == covered
    assert {"range", "roundrobin", "sticky", "cooperative-sticky", "uniform"} <= covered


def _kit_classes(base: type) -> list[type[BuiltInAssignorTests]]:
    found = []
    for cls in base.__subclasses__():
        found.append(cls)
        found.extend(_kit_classes(cls))
    return found

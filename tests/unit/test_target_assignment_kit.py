"""The checks the server-side and share assignor suites share (coordkit.testing.target_assignment)
catch a broken assignor in either suite: one that leaves a member out of its result, and one that
answers differently to the same group."""

from __future__ import annotations

import itertools
from typing import Any

import hypothesis
import pytest

from coordkit.plugins import get_plugin_manager
from coordkit.strategies.target_assignment import GroupSpec, TargetAssignment, TopicDescriber
from coordkit.testing.server_assignors import ServerAssignorTests
from coordkit.testing.share_assignors import ShareAssignorTests

#: Few examples, no shrinking: a failure is expected within the first few groups.
SETTINGS = hypothesis.settings(
    max_examples=15,
    deadline=None,
    database=None,
    phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
)


class LeavesOneOut:
    """A registered assignor whose result drops the first member."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = f"{inner.name}-leaving-one-out"

    def assign(self, group: GroupSpec, topics: TopicDescriber) -> TargetAssignment:
        members = dict(self.inner.assign(group, topics).members)
        if members:
            members.pop(next(iter(members)))
        return TargetAssignment(members)


class Wavering:
    """A registered assignor that answers every other call with no partitions at all."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = f"{inner.name}-wavering"
        self.calls = itertools.count()

    def assign(self, group: GroupSpec, topics: TopicDescriber) -> TargetAssignment:
        target = self.inner.assign(group, topics)
        if next(self.calls) % 2:
            return TargetAssignment({m: {} for m in target.members})
        return target


def _suites() -> list[tuple[Any, Any]]:
    manager = get_plugin_manager()
    return [
        (ServerAssignorTests(), manager.server_assignor("range")),
        (ShareAssignorTests(), manager.share_assignor("simple")),
    ]


@pytest.mark.parametrize(("suite", "assignor"), _suites(), ids=["server", "share"])
def test_a_member_left_out_fails_the_suite(suite: Any, assignor: Any) -> None:
    suite.test_every_member_is_in_the_result(assignor, SETTINGS)  # the real one passes
    with pytest.raises(AssertionError, match="members"):
        suite.test_every_member_is_in_the_result(LeavesOneOut(assignor), SETTINGS)


@pytest.mark.parametrize(("suite", "assignor"), _suites(), ids=["server", "share"])
def test_a_wavering_assignor_fails_the_suite(suite: Any, assignor: Any) -> None:
    suite.test_deterministic(assignor, SETTINGS)
    with pytest.raises(AssertionError, match="deterministic"):
        suite.test_deterministic(Wavering(assignor), SETTINGS)

"""The built-in metrics on hand-made assignments whose values can be worked out on paper."""

from __future__ import annotations

from typing import Any

import pytest

from coordkit.plugins import get_plugin_manager
from coordkit.strategies.assignment import RebalanceProtocol, TopicMetadata
from coordkit_assignors.lab.events import (
    MemberCrashed,
    MemberJoined,
    MemberLeft,
    SubscriptionChanged,
)
from coordkit_assignors.lab.metrics import BUILTIN_METRICS
from coordkit_assignors.lab.simulation import (
    AssignmentCase,
    AssignmentStep,
    Member,
    simulate_assignment,
)

METRICS = {m.name: m for m in BUILTIN_METRICS}


def compute(step: AssignmentStep, name: str) -> float | None:
    return METRICS[name].compute(step)


def run(
    scripted: Any, case: AssignmentCase, *script: Any, cooperative: bool = False
) -> list[AssignmentStep]:
    protocol = RebalanceProtocol.COOPERATIVE if cooperative else RebalanceProtocol.EAGER
    return list(simulate_assignment(case, scripted(list(script), protocol)))


def test_every_builtin_metric_is_registered() -> None:
    assert set(METRICS) <= set(get_plugin_manager().metrics.names())


def test_count_and_topic_balance(scripted: Any) -> None:
    case = AssignmentCase(
        {"a": 4, "b": 2},
        [Member("m1", ("a", "b")), Member("m2", ("a", "b")), Member("m3", ("a",))],
    )
    # counts 4 / 2 / 0; topic a: 3, 1, 0 over three subscribers; topic b: 1, 1 over two.
    (step,) = run(scripted, case, {"m1": ["a-0", "a-1", "a-2", "b-0"], "m2": ["a-3", "b-1"]})
    assert compute(step, "count_balance") == 4
    assert compute(step, "topic_balance") == 3
    assert compute(step, "unassigned") == 0


def test_load_balance_uses_partition_loads(scripted: Any) -> None:
    case = AssignmentCase(
        {"a": TopicMetadata(3, loads=[6.0, 1.0, 1.0])}, [Member("m1", ("a",)), Member("m2", ("a",))]
    )
    (step,) = run(scripted, case, {"m1": ["a-0"], "m2": ["a-1", "a-2"]})
    assert compute(step, "load_balance") == pytest.approx(6.0 / 4.0)
    (uniform,) = run(
        scripted, AssignmentCase({"a": 3}, case.members), {"m1": ["a-0"], "m2": ["a-1", "a-2"]}
    )
    assert compute(uniform, "load_balance") == pytest.approx(2 / 1.5)


def test_rebalance_metrics_do_not_apply_to_the_first_assignment(scripted: Any) -> None:
    case = AssignmentCase({"a": 2}, [Member("m1", ("a",))])
    (step,) = run(scripted, case, {"m1": ["a-0", "a-1"]})
    for name in ("moved", "moved_min", "moved_excess", "revoked", "rounds", "orphaned"):
        assert compute(step, name) is None, name
    assert compute(step, "assign_ms") is not None


def test_moves_count_only_partitions_leaving_a_member_that_stays(scripted: Any) -> None:
    members = [Member(f"m{i}", ("a",)) for i in (1, 2, 3)]
    case = AssignmentCase({"a": 6}, members, [MemberCrashed("m3"), MemberJoined("m4", ("a",))])
    first = {"m1": ["a-0", "a-1"], "m2": ["a-2", "a-3"], "m3": ["a-4", "a-5"]}
    # m3's two partitions are reassigned (orphaned, not moves); a-1 moves from m1 to m2: one move.
    after_crash = {"m1": ["a-0", "a-4"], "m2": ["a-1", "a-2", "a-3", "a-5"]}
    # The joiner takes a-2 and a-3 from m2: two moves; balanced 2/2/2 needed exactly that.
    after_join = {"m1": ["a-0", "a-4"], "m2": ["a-1", "a-5"], "m4": ["a-2", "a-3"]}
    steps = run(scripted, case, first, after_crash, after_join)
    crash, join = steps[1], steps[2]
    assert compute(crash, "moved") == 1
    assert compute(crash, "orphaned") == 2
    # Two members after the crash: quotas 3 and 3, and each held 2: nothing had to move.
    assert compute(crash, "moved_min") == 0
    assert compute(crash, "moved_excess") == 1
    assert compute(join, "moved") == 2
    # m1 holds 2, m2 holds 4 over 3 members with quota 2: m2 must give up 2.
    assert compute(join, "moved_min") == 2
    assert compute(join, "moved_excess") == 0


def test_moved_min_gives_the_larger_quotas_to_the_largest_holders(scripted: Any) -> None:
    members = [Member("m1", ("a",)), Member("m2", ("a",))]
    case = AssignmentCase({"a": 7}, members, [MemberJoined("m3", ("a",))])
    first = {"m1": ["a-0", "a-1", "a-2", "a-3", "a-4"], "m2": ["a-5", "a-6"]}
    # 7 over 3: quotas 3, 2, 2. m1 (5) keeps 3, m2 (2) keeps 2: two moves at least.
    join = {"m1": ["a-0", "a-1", "a-2"], "m2": ["a-5", "a-6"], "m3": ["a-3", "a-4"]}
    step = run(scripted, case, first, join)[1]
    assert compute(step, "moved_min") == 2
    assert compute(step, "moved") == 2


def test_moved_min_counts_partitions_whose_owner_unsubscribed(scripted: Any) -> None:
    members = [Member("m1", ("a", "b")), Member("m2", ("a", "b"))]
    case = AssignmentCase({"a": 2, "b": 2}, members, [SubscriptionChanged("m1", ("a",))])
    first = {"m1": ["a-0", "b-0"], "m2": ["a-1", "b-1"]}
    later = {"m1": ["a-0"], "m2": ["a-1", "b-0", "b-1"]}
    step = run(scripted, case, first, later)[1]
    assert not step.homogeneous
    assert compute(step, "moved_min") == 1  # b-0 has to leave m1
    assert compute(step, "moved") == 1


def test_revoked_and_rounds_follow_the_protocol(scripted: Any) -> None:
    members = [Member("m1", ("a",)), Member("m2", ("a",))]
    case = AssignmentCase({"a": 4}, members, [MemberLeft("m2")])
    first = {"m1": ["a-0", "a-1"], "m2": ["a-2", "a-3"]}
    alone = {"m1": ["a-0", "a-1", "a-2", "a-3"]}
    eager = run(scripted, case, first, alone)[1]
    cooperative = run(scripted, case, first, alone, cooperative=True)[1]
    assert (compute(eager, "revoked"), compute(eager, "rounds")) == (2, 1)
    assert (compute(cooperative, "revoked"), compute(cooperative, "rounds")) == (0, 1)


def test_rack_locality(scripted: Any) -> None:
    racks = [("r0",), ("r1",), ("r0", "r1"), ("r2",)]
    case = AssignmentCase(
        {"a": TopicMetadata(4, racks)},
        [Member("m1", ("a",), rack="r0"), Member("m2", ("a",), rack="r1"), Member("m3", ("a",))],
    )
    # a-0 on r0 local, a-1 on r0 remote, a-2 on r1 local, a-3 with the rackless m3 is left out.
    (step,) = run(scripted, case, {"m1": ["a-0", "a-1"], "m2": ["a-2"], "m3": ["a-3"]})
    assert compute(step, "rack_locality") == pytest.approx(2 / 3)
    (no_racks,) = run(
        scripted, AssignmentCase({"a": 2}, [Member("m1", ("a",))]), {"m1": ["a-0", "a-1"]}
    )
    assert compute(no_racks, "rack_locality") is None


def test_unassigned_counts_subscribed_partitions_nobody_got(scripted: Any) -> None:
    case = AssignmentCase({"a": 3, "orphan-topic": 5}, [Member("m1", ("a",))])
    (step,) = run(scripted, case, {"m1": ["a-0"]})
    assert compute(step, "unassigned") == 2  # orphan-topic has no subscriber: not counted

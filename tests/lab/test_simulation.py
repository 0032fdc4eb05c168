"""The assignment simulation: what carries over between rebalances, rounds, revocations, events."""

from __future__ import annotations

import time
from typing import Any

import pytest

from coordkit.lab import LabError
from coordkit.plugins import get_plugin_manager
from coordkit.strategies.assignment import (
    DEFAULT_GENERATION,
    RebalanceProtocol,
    TopicMetadata,
)
from coordkit_assignors.lab.events import (
    MemberCrashed,
    MemberJoined,
    MemberLeft,
    PartitionsAdded,
    SubscriptionChanged,
    TopicCreated,
    TopicDeleted,
)
from coordkit_assignors.lab.simulation import (
    MAX_ROUNDS,
    AssignmentCase,
    Member,
    simulate_assignment,
)
from coordkit_assignors.lab.workloads import ChurnWorkload
from coordkit_assignors.roundrobin import RoundRobinAssignor

TOPICS = ("a", "b")


def two_members(*events: Any) -> AssignmentCase:
    return AssignmentCase(
        {"a": 2, "b": 2}, [Member("m1", TOPICS), Member("m2", TOPICS)], list(events)
    )


def test_owned_partitions_and_generations_carry_over(scripted: Any) -> None:
    first = {"m1": ["a-0", "a-1"], "m2": ["b-0", "b-1"]}
    second = {"m1": ["a-0"], "m2": ["b-0", "b-1"], "m3": ["a-1"]}
    assignor = scripted([first, second])
    steps = list(simulate_assignment(two_members(MemberJoined("m3", TOPICS)), assignor))

    assert [s.index for s in steps] == [0, 1]
    assert steps[0].previous is None
    fresh, rebalance = assignor.seen
    assert all(m.owned == {} and m.generation == DEFAULT_GENERATION for m in fresh.members.values())
    assert rebalance.members["m1"].owned == {"a": (0, 1)}
    assert rebalance.members["m2"].owned == {"b": (0, 1)}
    assert rebalance.members["m1"].generation == rebalance.members["m2"].generation == 1
    assert rebalance.members["m3"].owned == {}
    assert rebalance.members["m3"].generation == DEFAULT_GENERATION
    assert steps[1].previous is steps[0].assignment
    assert steps[1].assignment.as_strings()["m3"] == ["a-1"]


def test_eager_rebalance_revokes_everything_the_stayers_owned(scripted: Any) -> None:
    first = {"m1": ["a-0", "a-1"], "m2": ["b-0", "b-1"]}
    assignor = scripted([first, {"m1": ["a-0", "a-1", "b-0", "b-1"]}])
    step = list(simulate_assignment(two_members(MemberLeft("m2")), assignor))[1]
    # m1 keeps everything it had but, being eager, revoked it all first; m2's release is no revocation.
    assert (step.rounds, step.revoked, step.orphaned) == (1, 2, 0)
    assert step.departed == frozenset({"m2"})
    assert step.event_kind == "leave"


def test_cooperative_rebalance_repeats_until_nothing_is_withheld(scripted: Any) -> None:
    first = {"m1": ["a-0", "a-1"], "m2": ["b-0", "b-1"]}
    round_one = ({"m1": ["a-0"], "m2": ["b-0", "b-1"]}, {"m3": ["a-1"]})
    round_two = {"m1": ["a-0"], "m2": ["b-0", "b-1"], "m3": ["a-1"]}
    assignor = scripted([first, round_one, round_two], RebalanceProtocol.COOPERATIVE)
    step = list(simulate_assignment(two_members(MemberJoined("m3", TOPICS)), assignor))[1]

    assert step.rounds == 2
    assert step.converged
    assert step.revoked == 1  # only a-1, taken from m1 in round one
    second_round = assignor.seen[2]
    assert second_round.members["m1"].owned == {"a": (0,)}  # revoked what moved
    assert second_round.members["m3"].owned == {}  # a-1 was withheld, not given
    assert second_round.members["m1"].generation == 2
    assert step.assignment.as_strings()["m3"] == ["a-1"]


def test_rounds_are_capped_when_a_group_never_settles(scripted: Any) -> None:
    first = {"m1": ["a-0", "a-1"], "m2": ["b-0", "b-1"]}
    forever = ({"m1": ["a-0", "a-1"], "m2": ["b-0"]}, {"m1": ["b-1"]})
    assignor = scripted([first, forever], RebalanceProtocol.COOPERATIVE)
    step = list(simulate_assignment(two_members(MemberLeft("m2")), assignor))[1]
    assert step.rounds == MAX_ROUNDS
    assert not step.converged


def test_a_crash_orphans_partitions_a_leave_releases_them() -> None:
    crash = list(simulate_assignment(two_members(MemberCrashed("m2")), RoundRobinAssignor()))
    leave = list(simulate_assignment(two_members(MemberLeft("m2")), RoundRobinAssignor()))
    held = crash[0].assignment.count("m2")
    assert held == 2
    assert crash[1].orphaned == held
    assert leave[1].orphaned == 0
    assert crash[1].event_kind == "crash"
    assert crash[1].assignment.members == leave[1].assignment.members == ["m1"]


def test_topic_and_partition_events_change_the_partition_space() -> None:
    case = AssignmentCase(
        {"a": TopicMetadata(2, loads=[1.0, 3.0])},
        [Member("m1", ("a",)), Member("m2", ("a",))],
        [
            PartitionsAdded("a", 2),
            TopicCreated("c", 3, subscribers=("m1",)),
            SubscriptionChanged("m2", ("a", "c")),
            TopicDeleted("a"),
        ],
    )
    steps = list(simulate_assignment(case, RoundRobinAssignor()))
    grown = steps[1].group.topics["a"]
    assert grown.partitions == 4
    assert grown.loads == (1.0, 3.0, 2.0, 2.0)  # new partitions weigh the old mean
    assert steps[2].group.members["m1"].topics == ("a", "c")
    assert steps[2].group.members["m2"].topics == ("a",)
    assert steps[3].group.members["m2"].topics == ("a", "c")
    assert steps[4].space.topics == ["c"]
    assert steps[4].group.members["m1"].topics == ("a", "c")  # subscriptions outlive the topic
    assert sum(steps[4].assignment.counts().values()) == 3


def test_added_partitions_repeat_the_replica_rack_pattern() -> None:
    racks = [("r0", "r1"), ("r1", "r2")]
    case = AssignmentCase(
        {"a": TopicMetadata(2, racks)}, [Member("m1", ("a",))], [PartitionsAdded("a", 3)]
    )
    steps = list(simulate_assignment(case, RoundRobinAssignor()))
    assert steps[1].group.topics["a"].replica_racks == (*racks, *racks, racks[0])


@pytest.mark.parametrize(
    ("event", "message"),
    [
        (MemberJoined("m1", TOPICS), "already in the group"),
        (MemberLeft("nobody"), "no member 'nobody'"),
        (PartitionsAdded("zzz", 1), "no topic 'zzz'"),
        (TopicCreated("a", 1), "topic 'a' exists"),
    ],
)
def test_inconsistent_events_are_errors(event: Any, message: str) -> None:
    with pytest.raises(LabError, match=message):
        list(simulate_assignment(two_members(event), RoundRobinAssignor()))


def test_steps_report_their_scale() -> None:
    steps = list(simulate_assignment(two_members(MemberJoined("m3", TOPICS)), RoundRobinAssignor()))
    assert [(s.members, s.partitions) for s in steps] == [(2, 4), (3, 4)]
    assert steps[0].event == "initial assignment"
    assert steps[1].event == "m3 joins (2 topics)"


class _SpinningAssignor:
    """Burns the given thread CPU seconds per call, in order (the last repeats), and counts calls;
    returns a fresh (equal) assignment each time."""

    protocols = (RebalanceProtocol.EAGER,)

    def __init__(self, *spins: float) -> None:
        self.spins = spins
        self.calls = 0
        self.results: list[Any] = []

    def assign(self, group: Any) -> Any:
        spin = self.spins[min(self.calls, len(self.spins) - 1)]
        self.calls += 1
        until = time.thread_time() + spin
        while time.thread_time() < until:
            pass
        result = RoundRobinAssignor().assign(group)
        self.results.append(result)
        return result


def test_a_step_keeps_the_first_result_and_times_the_fastest_repeat() -> None:
    assignor = _SpinningAssignor(0.02, 0.001)
    step = next(simulate_assignment(two_members(), assignor))  # type: ignore[arg-type]
    # The simulation calls the assignor once, untimed, and keeps that result.
    assert assignor.calls == 1
    assert step.assignment is assignor.results[0]
    # Measured alone on first use: repeats of the same call, the fastest counting.
    seconds = step.assign_seconds
    assert assignor.calls > 1
    assert 0.001 <= seconds < 0.01
    assert step.with_seconds(0.5).assign_seconds == 0.5
    assert len(step.timed_calls()) == step.rounds == 1


@pytest.mark.parametrize("name", sorted(get_plugin_manager().assignors.names()))
def test_every_builtin_assignor_is_a_function_of_its_input(name: str) -> None:
    """Timing repeats each call; that is only sound when a repeat gives the same assignment."""
    assignor = get_plugin_manager().assignor(name)
    case = ChurnWorkload().case(
        {"members": 8, "topics": 3, "partitions_per_topic": 6, "steps": 8, "mix": "all"}, seed=7
    )
    for step in simulate_assignment(case, assignor):
        if step.rounds == 1:
            assert assignor.assign(step.group) == step.assignment, step.event

"""Completed rebalances reach plugins (``coordkit_rebalance_completed``) and in-process
:class:`GroupObserver` objects; the history's checks catch broken invariants."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import pytest

from coordkit import hookimpl
from coordkit.engine import Cluster
from coordkit.engine.groups import (
    AssignmentRound,
    GroupHistory,
    GroupInvariantError,
    GroupObserver,
    RebalanceCompleted,
)
from coordkit.kafka.model import TopicPartition
from coordkit.plugins import get_plugin_manager

from .conftest import partitions_of, start, wait_stable

ALL = partitions_of("orders", 6)


class _HookRecorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int, dict[str, list[str]], int, float]] = []

    @hookimpl
    def coordkit_rebalance_completed(
        self,
        group: str,
        generation: int,
        assignment: Mapping[str, list[str]],
        rounds: int,
        duration_s: float,
    ) -> None:
        self.calls.append((group, generation, dict(assignment), rounds, duration_s))


class _Observer(GroupObserver):
    def __init__(self) -> None:
        self.completed: list[RebalanceCompleted] = []

    def rebalance_completed(self, record: RebalanceCompleted) -> None:
        self.completed.append(record)


@pytest.fixture
def hook_recorder() -> Iterator[_HookRecorder]:
    recorder = _HookRecorder()
    manager = get_plugin_manager()
    manager.register(recorder, name="test-rebalance-recorder")
    yield recorder
    manager.unregister("test-rebalance-recorder")


def test_rebalance_completed_reaches_hooks_and_observers(
    group_cluster: Callable[..., Cluster], hook_recorder: _HookRecorder
) -> None:
    cluster = group_cluster()
    observer = _Observer()
    cluster.group_observers.add(observer)
    consumers = [start(cluster, "g", ["orders"]) for _ in range(2)]
    described = wait_stable(cluster, "g", consumers, ALL)

    mine = [c for c in hook_recorder.calls if c[0] == "g" and c[1] == described.generation]
    assert len(mine) == 1
    _, _, assignment, rounds, duration = mine[0]
    assert sorted(p for parts in assignment.values() for p in parts) == sorted(map(str, ALL))
    assert set(assignment) == {c.member_id for c in consumers}
    assert rounds >= 1
    assert duration >= 0
    assert [r.generation for r in observer.completed][-1] == described.generation


def _round(
    generation: int,
    owned: dict[str, set[TopicPartition]],
    assigned: dict[str, set[TopicPartition]],
    cooperative: bool = True,
) -> AssignmentRound:
    return AssignmentRound(
        group_id="g",
        generation=generation,
        protocol="cooperative-sticky",
        cooperative=cooperative,
        owned={m: frozenset(p) for m, p in owned.items()},
        assigned={m: frozenset(p) for m, p in assigned.items()},
        topic_partitions={"orders": 2},
        time=1.0,
    )


def test_history_reports_each_kind_of_violation() -> None:
    p0, p1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
    history = GroupHistory()
    history.partitions_assigned("g", "a", 1, frozenset({p0}), 1.0)
    history.check()
    history.partitions_assigned("g", "b", 1, frozenset({p0}), 2.0)
    with pytest.raises(
        GroupInvariantError, match=r"orders-0 owned by a and b in the same generation 1"
    ):
        history.check()

    history = GroupHistory()
    history.assignment_synced(_round(2, {"a": {p0}}, {"a": set(), "b": {p0, p1}}))
    with pytest.raises(GroupInvariantError, match="revoked and assigned in the same round"):
        history.check()

    history = GroupHistory()
    history.assignment_synced(_round(2, {}, {"a": {p0}, "b": {p0}}, cooperative=False))
    with pytest.raises(GroupInvariantError, match="assigns orders-0 to both a and b"):
        history.check()

    history = GroupHistory()
    history.partitions_revoked("g", "a", 1, frozenset({p1}), False, 1.0)
    with pytest.raises(GroupInvariantError, match="gave up orders-1, which it did not own"):
        history.check()

    history = GroupHistory()
    history.join_completed("g", 3, "range", "a", ("a",), 1.0)
    history.join_completed("g", 2, "range", "a", ("a",), 2.0)
    with pytest.raises(GroupInvariantError, match="generation went from 3 to 2"):
        history.check()


def test_unavailability_integrates_unowned_partitions_while_consumers_run() -> None:
    p0, p1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
    history = GroupHistory()
    history.consumer_started("g", "c1", 0.0)
    history.assignment_synced(
        AssignmentRound(
            group_id="g", generation=1, protocol="range", cooperative=False, owned={},
            assigned={"a": frozenset({p0, p1})}, topic_partitions={"orders": 2}, time=1.0,
        )
    )  # fmt: skip
    history.partitions_assigned("g", "a", 1, frozenset({p0, p1}), 3.0)  # 2 unowned for 2 s
    history.partitions_revoked("g", "a", 1, frozenset({p1}), False, 4.0)
    history.partitions_assigned("g", "a", 1, frozenset({p1}), 4.5)  # 1 unowned for 0.5 s
    total = history.unavailability("g")
    assert total.partitions == 2
    assert total.partition_seconds == pytest.approx(4.5)
    window = history.unavailability("g", start=3.5, end=5.0)
    assert window.partitions == 1
    assert window.partition_seconds == pytest.approx(0.5)
    assert history.fully_owned_at("g", after=3.5) == 4.5

"""The lab's broker-scaling workload and placement metrics (issue 14): reproducible from the seed,
each metric's meaning on hand-checkable cases, clear parameter errors, the engine carrying the
plans out, and the ``placement`` preset running through the lab runner (no Spark)."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from coordkit.lab import LabError, Step, Workload
from coordkit.plugins import get_plugin_manager
from coordkit.strategies.placement import TP, BrokerMetadata, ClusterLayout
from coordkit_lab.runner import ERROR_METRIC, run_scenario
from coordkit_lab.scenarios import PRESETS, ScenarioSpec, expand
from coordkit_placements.lab import PLACEMENT_KIND, PlacementStep, ScalingCase, ScalingEvent
from coordkit_placements.lab.engine import EngineRun
from coordkit_placements.lab.workload import run_case

METRICS = {
    "broker-replica-skew",
    "broker-replica-stddev",
    "broker-leader-skew",
    "broker-leader-stddev",
    "single-rack-partitions",
    "stranded-partitions",
    "replicas-moved",
    "data-moved",
    "reassignment-seconds",
    "reassignment-unavailable-seconds",
}
PLACEMENTS = ["balanced", "kafka", "kafka-rack-aware", "rendezvous"]
#: Small enough for a test, with every kind of change.
SMALL = {"brokers": 4, "racks": 2, "topics": 2, "partitions": 6, "changes": 4}


def _workload() -> Any:
    return get_plugin_manager().workload("broker-scaling")


def _metric(name: str, step: PlacementStep) -> float | None:
    value: float | None = get_plugin_manager().metric(name).compute(step)
    return value


def _placement(step: PlacementStep) -> tuple[Any, ...]:
    """A step without its timings."""
    return (
        step.index,
        step.event,
        step.replicas_per_broker,
        step.leaders_per_broker,
        step.single_rack,
        step.stranded,
        step.replicas_moved,
        step.gb_moved,
    )


class ScriptedPlacement:
    """Places fixed replica lists and proposes one fixed plan per rebalance, in order."""

    name = "scripted"
    description = "fixed lists, for the tests"

    def __init__(
        self, lists: Mapping[int, Sequence[int]], plans: Sequence[Mapping[TP, Sequence[int]]]
    ):
        self.lists = lists
        self.plans = list(plans)
        self.layouts: list[ClusterLayout] = []

    def place(
        self,
        brokers: Sequence[BrokerMetadata],
        partitions: int,
        replication_factor: int,
        *,
        existing: Mapping[int, Sequence[int]] | None = None,
        rng: random.Random | None = None,
        topic: str = "",
    ) -> dict[int, list[int]]:
        return {p: list(r) for p, r in self.lists.items()}

    def rebalance(self, layout: ClusterLayout) -> dict[TP, tuple[int, ...]]:
        self.layouts.append(layout)
        plan = self.plans[len(self.layouts) - 1] if len(self.layouts) <= len(self.plans) else {}
        return {tp: tuple(r) for tp, r in plan.items()}


def _case(
    events: Sequence[ScalingEvent],
    *,
    racks: Mapping[int, str | None],
    initial: Sequence[int],
    partitions: int,
    factor: int,
    sizes: Mapping[TP, float] | None = None,
) -> ScalingCase:
    return ScalingCase(
        racks=racks,
        initial=tuple(initial),
        topics=1,
        partitions=partitions,
        replication_factor=factor,
        sizes=sizes or {("scale-000", p): 1.0 for p in range(partitions)},
        events=tuple(events),
        placement_seed=7,
        records=5,
        max_moving=50,
    )


# -- registration and reproducibility ----------------------------------------------------------


def test_workload_and_metrics_are_registered() -> None:
    manager = get_plugin_manager()
    workload = _workload()
    assert isinstance(workload, Workload)
    assert (workload.kind, workload.strategy_kind) == (PLACEMENT_KIND, "placement")
    assert workload.strategies(manager) == PLACEMENTS
    assert {r.name for r in manager.metrics if PLACEMENT_KIND in r.value.kinds} == METRICS
    for name in METRICS:
        assert manager.metric(name).compute(object()) is None  # not a placement step
    headlines = {n for n in METRICS if manager.metric(n).headline}
    assert {"broker-replica-skew", "data-moved", "single-rack-partitions"} <= headlines


def test_the_seed_fixes_events_sizes_and_placements() -> None:
    workload = _workload()
    assert workload.generate(SMALL, 3) == workload.generate(SMALL, 3)
    assert workload.generate(SMALL, 3) != workload.generate(SMALL, 4)
    case = workload.generate({**SMALL, "changes": 8}, 3)
    assert {e.kind for e in case.events} == {"add-broker", "remove-broker", "lose-rack"}
    assert sum(e.kind == "lose-rack" for e in case.events) == 1
    params = {**SMALL, "engine": False}
    for strategy in PLACEMENTS:
        steps = list(workload.simulate(params, 3, strategy))
        assert steps == list(workload.simulate(params, 3, strategy))
        assert all(isinstance(s, Step) for s in steps)
        # Every strategy meets the same changes.
        assert [s.event for s in steps] == ["initial", *(e.label() for e in case.events[:4])]


def test_partition_sizes_follow_the_distribution() -> None:
    workload = _workload()
    base = {**SMALL, "topics": 10, "partitions": 40, "size_gb": 5.0}
    for sizes in ("lognormal", "zipf", "equal"):
        drawn = list(workload.generate({**base, "sizes": sizes}, 1).sizes.values())
        assert len(drawn) == 400
        assert sum(drawn) / len(drawn) == pytest.approx(
            5.0, rel=0.15 if sizes == "lognormal" else 1e-4
        )
    zipf = sorted(workload.generate({**base, "sizes": "zipf", "size_zipf": 1.0}, 1).sizes.values())
    assert zipf[-1] / zipf[0] == pytest.approx(400, rel=1e-3)  # rank 1 against rank 400
    assert set(workload.generate({**base, "sizes": "equal"}, 1).sizes.values()) == {5.0}


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"replication_factor": 5}, r"'replication_factor' \(5\) must not exceed 'brokers' \(4\)"),
        ({"racks": 5}, r"'racks' \(5\) must not exceed 'brokers'"),
        ({"sizes": "pareto"}, r"'sizes' must be one of lognormal, zipf, equal, got 'pareto'"),
        ({"size_gb": 0.0}, r"'size_gb' must be a finite number > 0"),
        ({"size_sigma": -1.0}, r"'size_sigma' must be a finite number >= 0"),
        ({"partitions": 0}, r"'partitions' must be an integer >= 1, got 0"),
        ({"max_moving": 0}, r"'max_moving' must be an integer >= 1"),
        ({"brokers": "many"}, r"parameter 'brokers' must be an integer, got 'many'"),
        ({"brokres": 3}, r"has no parameter 'brokres'"),
    ],
)
def test_bad_parameters_name_the_parameter(params: dict[str, Any], message: str) -> None:
    workload = _workload()
    with pytest.raises(LabError, match=message):
        workload.generate({**SMALL, **params}, 1)
    with pytest.raises(LabError, match=message):
        next(iter(workload.simulate({**SMALL, "engine": False, **params}, 1, "kafka")))


def test_infeasible_combinations_are_skipped_by_presets() -> None:
    workload = _workload()
    assert workload.feasible({**workload.defaults, "brokers": 2, "replication_factor": 3}) is False
    assert workload.feasible({**workload.defaults, "brokers": 2, "racks": 3}) is False
    assert workload.feasible(workload.defaults) is True


# -- what each metric means --------------------------------------------------------------------


def test_a_lost_rack_strands_exactly_its_single_rack_partitions() -> None:
    # Rack a: brokers 0, 1; rack b: 2, 3. Partitions 0 and 2 keep both replicas on one rack.
    lists = {0: [0, 1], 1: [0, 2], 2: [2, 3], 3: [1, 3]}
    case = _case(
        [ScalingEvent("lose-rack", (0, 1), "a")],
        racks={0: "a", 1: "a", 2: "b", 3: "b"},
        initial=range(4),
        partitions=4,
        factor=2,
    )
    strategy = ScriptedPlacement(lists, [{}])
    initial, lost = run_case(case, strategy)
    assert _metric("single-rack-partitions", initial) == 2
    assert _metric("stranded-partitions", initial) == 0
    assert initial.replicas_per_broker == (2, 2, 2, 2)
    assert _metric("broker-replica-skew", initial) == 1.0
    assert _metric("broker-replica-stddev", initial) == 0.0
    assert _metric("replicas-moved", initial) is None  # the initial placement moves nothing
    # Rack a gone: partition 0 has no replica left; 2 and 3 remain, 1 and 3 lost their leader.
    assert lost.event == "lose rack a (brokers 0, 1)"
    assert lost.members == 2
    assert _metric("stranded-partitions", lost) == 1
    assert _metric("single-rack-partitions", lost) == 2
    assert lost.replicas_per_broker == (2, 2)
    assert lost.leaders_per_broker == (1, 0)  # only partition 2 is led by a live broker
    assert _metric("broker-leader-skew", lost) == 2.0
    assert _metric("broker-leader-stddev", lost) == 0.5
    assert _metric("replicas-moved", lost) == 0
    # The strategy planned over the survivors only.
    assert [b.id for b in strategy.layouts[0].brokers] == [2, 3]


def test_without_racks_or_with_one_replica_rack_diversity_does_not_apply() -> None:
    no_racks = _case([], racks={0: None, 1: None}, initial=[0, 1], partitions=2, factor=2)
    (step,) = run_case(no_racks, ScriptedPlacement({0: [0, 1], 1: [1, 0]}, []))
    assert _metric("single-rack-partitions", step) is None
    single = _case([], racks={0: "a", 1: "b"}, initial=[0, 1], partitions=2, factor=1)
    (step,) = run_case(single, ScriptedPlacement({0: [0], 1: [1]}, []))
    assert _metric("single-rack-partitions", step) is None


def test_data_moved_counts_each_new_replica_with_its_partition_size() -> None:
    sizes = {("scale-000", 0): 3.0, ("scale-000", 1): 5.0, ("scale-000", 2): 11.0}
    case = _case(
        [ScalingEvent("add-broker", (3,))],
        racks=dict.fromkeys(range(4)),
        initial=range(3),
        partitions=3,
        factor=2,
        sizes=sizes,
    )
    plan = {
        ("scale-000", 0): [3, 1],  # one new replica of 3 GB
        ("scale-000", 1): [3, 2],  # both replicas new: 2 x 5 GB
        ("scale-000", 2): [0, 2],  # the leader changes, no data moves
    }
    strategy = ScriptedPlacement({0: [0, 1], 1: [1, 0], 2: [2, 0]}, [plan])
    _initial, added = run_case(case, strategy)
    assert _metric("replicas-moved", added) == 3
    assert _metric("data-moved", added) == 3.0 + 2 * 5.0
    assert added.replicas_per_broker == (1, 1, 2, 2)
    assert added.leaders_per_broker == (1, 0, 0, 2)


def test_a_plan_naming_a_broker_outside_the_cluster_stops_the_run() -> None:
    case = _case(
        [ScalingEvent("remove-broker", (2,))],
        racks=dict.fromkeys(range(3)),
        initial=range(3),
        partitions=1,
        factor=2,
    )
    strategy = ScriptedPlacement({0: [2, 0]}, [{("scale-000", 0): [2, 1]}])
    with pytest.raises(LabError, match=r"'scripted' proposed scale-000-0 -> \[2, 1\].*outside"):
        list(run_case(case, strategy))


def test_balanced_fills_a_new_broker_moving_less_than_kafka() -> None:
    """A broker joins a four-broker cluster without racks: ``balanced`` moves just enough
    replicas onto it to even the counts; ``kafka`` re-places everything."""
    case = _case(
        [ScalingEvent("add-broker", (4,))],
        racks=dict.fromkeys(range(5)),
        initial=range(4),
        partitions=20,
        factor=2,
    )
    runs = {
        name: list(run_case(case, get_plugin_manager().placement(name)))
        for name in ("kafka", "balanced")
    }
    for name, (initial, added) in runs.items():
        assert initial.replicas_per_broker == (10, 10, 10, 10), name
        assert added.replicas_per_broker[-1] > 0, name  # the new broker holds replicas
        assert _metric("broker-replica-skew", added) < 10 * 5 / 40, name  # (10,10,10,10,0)
    balanced, kafka = runs["balanced"][1], runs["kafka"][1]
    assert balanced.replicas_per_broker == (8, 8, 8, 8, 8)
    assert _metric("broker-replica-skew", balanced) == 1.0
    assert _metric("replicas-moved", balanced) == 8  # exactly the new broker's share
    assert _metric("data-moved", balanced) == 8.0  # every partition is 1 GB here
    assert kafka.replicas_moved > balanced.replicas_moved


def test_balanced_fills_a_new_broker_within_its_racks_constraint() -> None:
    """Three racks, three replicas: every partition keeps one replica per rack, so the rack
    with a new broker spreads its 48 replicas over three brokers while the others keep 24."""
    case = _case(
        [ScalingEvent("add-broker", (6,), "rack2")],
        racks={**{b: f"rack{b % 3}" for b in range(6)}, 6: "rack2"},
        initial=range(6),
        partitions=48,
        factor=3,
    )
    initial, added = run_case(case, get_plugin_manager().placement("balanced"))
    assert initial.replicas_per_broker == (24,) * 6
    assert added.replicas_per_broker == (24, 24, 16, 24, 24, 16, 16)
    assert _metric("single-rack-partitions", added) == 0
    assert _metric("replicas-moved", added) == 16
    assert _metric("broker-leader-skew", added) == pytest.approx(7 / (48 / 7))


def test_a_removed_broker_is_emptied_before_it_stops() -> None:
    case = _case(
        [ScalingEvent("remove-broker", (1,))],
        racks=dict.fromkeys(range(4)),
        initial=range(4),
        partitions=12,
        factor=3,
    )
    for name in PLACEMENTS:
        initial, removed = run_case(case, get_plugin_manager().placement(name))
        assert removed.members == 3
        assert sum(removed.replicas_per_broker) == 36, name  # nothing left on broker 1
        assert removed.stranded == 0
        # At least the replicas broker 1 held.
        assert _metric("replicas-moved", removed) >= initial.replicas_per_broker[1], name


# -- on the engine -------------------------------------------------------------------------------


def test_the_engine_carries_every_plan_out_and_times_it() -> None:
    workload = _workload()
    params = {**SMALL, "changes": 5}
    case = workload.generate(params, 11)
    assert "lose-rack" in {e.kind for e in case.events}
    on_engine = list(workload.simulate(params, 11, "balanced"))
    without = list(workload.simulate({**params, "engine": False}, 11, "balanced"))
    # The engine only adds timings: the placement figures are those of the plans.
    assert [_placement(s) for s in on_engine] == [_placement(s) for s in without]
    assert on_engine[0].reassignment_seconds is None
    assert _metric("reassignment-seconds", on_engine[0]) is None
    for step in on_engine[1:]:
        seconds = _metric("reassignment-seconds", step)
        assert seconds is not None
        assert (seconds > 0) == (step.replicas_moved > 0 or step.event_kind != "add-broker")
        unavailable = _metric("reassignment-unavailable-seconds", step)
        assert unavailable is not None
        assert unavailable >= 0
    assert all(s.unavailable_seconds is None for s in without)


def test_a_stranded_partition_is_unavailable_on_the_engine() -> None:
    lists = {0: [0, 1], 1: [0, 2], 2: [2, 3], 3: [1, 3]}
    case = _case(
        [ScalingEvent("lose-rack", (0, 1), "a")],
        racks={0: "a", 1: "a", 2: "b", 3: "b"},
        initial=range(4),
        partitions=4,
        factor=2,
    )
    plan = {("scale-000", 1): [2, 3], ("scale-000", 3): [3, 2]}
    engine = EngineRun(5)
    try:
        _initial, lost = run_case(case, ScriptedPlacement(lists, [plan]), engine)
        assert lost.stranded == 1
        assert lost.replicas_moved == 2  # partition 1 gains broker 3, partition 3 broker 2
        assert lost.reassignment_seconds is not None
        assert lost.reassignment_seconds > 0
        # Partition 0 stays offline through the step; 1 and 3 lost their leaders.
        assert lost.unavailable_seconds is not None
        assert lost.unavailable_seconds > 0
        view = engine.cluster.view()
        assert view.partition("scale-000", 1).replicas == (2, 3)
        assert view.partition("scale-000", 3).leader == 3
        assert view.offline() == [("scale-000", 0)]
    finally:
        engine.close()


# -- the preset ----------------------------------------------------------------------------------


def test_the_placement_preset_covers_every_placement() -> None:
    manager = get_plugin_manager()
    specs = expand(PRESETS["placement"], manager, seed=1)
    assert {s.workload for s in specs} == {"broker-scaling"}
    assert sorted({s.strategy for s in specs}) == PLACEMENTS
    # Paired: every strategy meets the same parameter sets and seeds.
    by_strategy = {
        name: sorted((s.params, s.seed) for s in specs if s.strategy == name) for name in PLACEMENTS
    }
    assert len({tuple(v) for v in by_strategy.values()}) == 1
    assert "placement" not in {c.workload for c in PRESETS["full"].cases}


@pytest.mark.parametrize("strategy", PLACEMENTS)
def test_a_tiny_run_through_the_runner_has_every_metric_and_no_error(strategy: str) -> None:
    params = json.dumps({**SMALL, "changes": 3}, sort_keys=True)
    spec = ScenarioSpec("t1", "broker-scaling", PLACEMENT_KIND, strategy, params, 9, 0)
    rows = run_scenario(spec)
    names = {row[12] for row in rows}
    assert ERROR_METRIC not in names, rows
    assert names == METRICS
    assert {row[7] for row in rows} == {0, 1, 2, 3}

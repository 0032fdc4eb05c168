"""The lab's coordinator-placement workload (issue 38): group and transactional ids placed by every
group-coordinator strategy on Kafka's placement of the internal topics; reproducible from the seed,
the naming schemes and weights as documented, the moves each step makes consistent with the
layouts, clear parameter errors, the ``elections`` preset and the runner (no Spark)."""

from __future__ import annotations

import itertools
import json
import uuid
from collections import Counter
from typing import Any

import pytest

from coordkit.lab import LabError, Workload
from coordkit.plugins import get_plugin_manager
from coordkit_elections.coordinator_lab import OFFSETS, STATE, CoordinatorStep
from coordkit_lab.runner import ERROR_METRIC, run_scenario
from coordkit_lab.scenarios import PRESETS, ScenarioSpec, expand

KIND = "coordinators"
STRATEGIES = ["kafka", "murmur2", "rendezvous"]
METRICS = {
    "coordinator-id-balance",
    "coordinator-traffic-balance",
    "coordinator-partition-balance",
    "coordinators-moved",
    "coordinator-traffic-moved",
}
SMALL = {"brokers": 4, "groups": 400, "transactional_ids": 200, "partitions": 10,
         "resized_partitions": 12}  # fmt: skip


def _workload() -> Any:
    return get_plugin_manager().workload("coordinator-placement")


def test_workload_and_metrics_are_registered() -> None:
    manager = get_plugin_manager()
    workload = _workload()
    assert isinstance(workload, Workload)
    assert workload.kind == KIND
    assert workload.strategies(manager) == STRATEGIES
    assert {r.name for r in manager.metrics if KIND in r.value.kinds} == METRICS
    for name in METRICS:
        assert manager.metric(name).compute(object()) is None  # not a coordinator step


def test_the_seed_fixes_ids_weights_and_layouts() -> None:
    workload = _workload()
    assert workload.generate(SMALL, 3) == workload.generate(SMALL, 3)
    assert workload.generate(SMALL, 3) != workload.generate(SMALL, 4)


def test_naming_schemes() -> None:
    workload = _workload()
    sequential = workload.generate({**SMALL, "naming": "sequential"}, 1)
    assert sequential.group_ids[:3] == ("app-0", "app-1", "app-2")
    assert sequential.transactional_ids[:2] == ("producer-0", "producer-1")
    uuids = workload.generate({**SMALL, "naming": "uuid"}, 1)
    assert all(uuid.UUID(i).version == 4 for i in uuids.group_ids + uuids.transactional_ids)
    assert len(set(uuids.group_ids)) == len(uuids.group_ids)
    prefixed = workload.generate({**SMALL, "naming": "prefixed", "prefixes": 3}, 1)
    services = Counter(i.rsplit("-", 1)[0] for i in prefixed.group_ids)
    assert len(services) == 3
    assert all(i.rsplit("-", 2)[1] == "txn" for i in prefixed.transactional_ids)
    mixed = workload.generate(SMALL, 1)  # the default
    assert any(i.startswith("app-") for i in mixed.group_ids)
    assert any(i.startswith("svc") for i in mixed.group_ids)


def test_traffic_is_zipf_over_a_shuffled_ranking() -> None:
    case = _workload().generate({**SMALL, "zipf": 1.0}, 5)
    ids = SMALL["groups"] + SMALL["transactional_ids"]
    assert sorted(case.weights, reverse=True) == [1 / rank for rank in range(1, ids + 1)]
    assert case.weights[0] != 1.0 or case.weights[1] != 0.5  # not in id order
    flat = _workload().generate({**SMALL, "zipf": 0.0}, 5)
    assert set(flat.weights) == {1.0}


def test_internal_topics_are_placed_as_kafka_places_them() -> None:
    case = _workload().generate(SMALL, 2)
    for topic in (OFFSETS, STATE):
        replicas = case.replicas[topic]
        assert sorted(replicas) == list(range(12))
        leaders = [replicas[p][0] for p in range(10)]
        # Kafka's round-robin preferred leaders from a random start: each broker in turn.
        assert all((b - a) % 4 == 1 for a, b in itertools.pairwise(leaders))
        assert all(len(set(r)) == 3 for r in replicas.values())


def test_another_placement_places_the_internal_topics() -> None:
    kafka = _workload().generate(SMALL, 2)
    rendezvous = _workload().generate({**SMALL, "placement": "rendezvous"}, 2)
    assert rendezvous.replicas != kafka.replicas
    assert sorted(rendezvous.replicas[OFFSETS]) == list(range(12))
    assert [s.event_kind for s in _steps("kafka", {"placement": "rendezvous"})] == [
        "initial",
        "resize",
        "broker-failure",
    ]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"brokers": 1}, r"brokers=1 \(needs >= 2\)"),
        ({"replication_factor": 5}, r"replication_factor=5 \(needs 1..brokers\)"),
        ({"naming": "emoji"}, r"naming=emoji \(needs sequential or uuid or prefixed or mixed\)"),
        ({"partitions": 0}, r"partitions=0"),
        ({"zipf": -1.0}, r"zipf=-1.0"),
        ({"groups": 0, "transactional_ids": 0}, r"ids=0"),
        ({"brokres": 3}, r"has no parameter 'brokres'"),
        ({"placement": "nowhere"}, r"parameter 'placement': unknown .*'nowhere'"),
    ],
)
def test_bad_parameters_name_the_parameter(params: dict[str, Any], message: str) -> None:
    with pytest.raises(LabError, match=message):
        _workload().generate({**SMALL, **params}, 1)


def _steps(strategy: str, params: dict[str, Any] | None = None) -> list[CoordinatorStep]:
    return list(_workload().simulate({**SMALL, **(params or {})}, 11, strategy))


def test_three_steps_with_their_scale() -> None:
    steps = _steps("kafka")
    assert [s.event_kind for s in steps] == ["initial", "resize", "broker-failure"]
    assert [s.partitions for s in steps] == [10, 12, 12]
    assert [s.members for s in steps] == [4, 4, 3]
    assert steps[0].moved is None
    assert all(s.ids == 600 for s in steps)
    assert all(s.id_balance >= 1 and s.traffic_balance >= 1 for s in steps)


def test_rendezvous_moves_few_ids_on_a_resize_and_the_modulo_rules_most() -> None:
    moved = {name: _steps(name)[1].moved for name in STRATEGIES}
    assert moved["rendezvous"] is not None
    assert moved["rendezvous"] < 0.3  # 2/12 expected
    assert moved["kafka"] > 0.6
    assert moved["murmur2"] > 0.6


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_broker_failure_moves_exactly_the_ids_it_coordinated(strategy: str) -> None:
    workload = _workload()
    case = workload.generate(SMALL, 11)
    selection = get_plugin_manager().group_coordinator_selection(strategy)
    ids = [(OFFSETS, i) for i in case.group_ids] + [(STATE, i) for i in case.transactional_ids]
    on_failed = [
        case.replicas[topic][selection.partition_for(name, 12)][0] == case.failed_broker
        for topic, name in ids
    ]
    step = _steps(strategy)[2]
    assert step.moved == pytest.approx(sum(on_failed) / len(ids))
    weighted = sum(w for w, hit in zip(case.weights, on_failed, strict=True) if hit)
    assert step.traffic_moved == pytest.approx(weighted / sum(case.weights))


def test_an_even_spread_has_balance_one() -> None:
    # One id per partition and one partition per broker: every broker coordinates the same.
    # app-0 and app-1 hash to consecutive values: partitions 0 and 1 of 2 under Kafka's rule.
    steps = _steps("kafka", {"brokers": 2, "replication_factor": 1, "groups": 2,
                             "transactional_ids": 0, "partitions": 2, "resized_partitions": 2,
                             "naming": "sequential", "zipf": 0.0})  # fmt: skip
    assert steps[0].id_balance == pytest.approx(1.0)
    assert steps[0].partition_balance == pytest.approx(1.0)
    assert steps[1].moved == 0.0  # the same size: nothing moves
    # One broker left with one replica per partition: its partition's id has no coordinator.
    assert steps[2].moved == pytest.approx(0.5)
    assert steps[2].id_balance == pytest.approx(1.0)


def test_the_elections_preset_runs_every_naming_for_every_strategy() -> None:
    specs = [
        s
        for s in expand(PRESETS["elections"], get_plugin_manager())
        if s.workload == "coordinator-placement"
    ]
    assert sorted({s.strategy for s in specs}) == STRATEGIES
    namings = {json.loads(s.params)["naming"] for s in specs}
    assert namings == {"sequential", "uuid", "prefixed", "mixed"}


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_tiny_run_through_the_runner_has_every_metric_and_no_error(strategy: str) -> None:
    spec = ScenarioSpec("t1", "coordinator-placement", KIND, strategy, json.dumps(SMALL), 9, 0)
    rows = run_scenario(spec)
    names = {row[12] for row in rows}
    assert ERROR_METRIC not in names, rows
    assert names == METRICS
    assert {row[7] for row in rows} == {0, 1, 2}

"""The lab's producer-skew workload and producer metrics (in-process; no Spark, no store)."""

from __future__ import annotations

from statistics import mean
from typing import Any

import pytest

from coordkit.plugins import get_plugin_manager
from coordkit_lab.runner import run_scenario
from coordkit_lab.scenarios import ScenarioSpec
from coordkit_partitioners.lab import PRODUCER_KIND, ProducerStep, ProducerWorkloadError

METRICS = {
    "partition-skew",
    "broker-skew",
    "records-per-batch",
    "batches",
    "unavailable-sends",
    "failed-records",
}
SMALL = {"phases": 4, "records": 1200, "fail_at": 2}


def _workload() -> Any:
    return get_plugin_manager().workload("producer-skew")


def _run(strategy: str, seed: int = 3, **params: Any) -> list[ProducerStep]:
    return list(_workload().simulate({**SMALL, **params}, seed, strategy, get_plugin_manager()))


def _mean(metric: str, steps: list[ProducerStep]) -> float:
    found = get_plugin_manager().metric(metric)
    values: list[float] = [v for v in (found.compute(s) for s in steps) if v is not None]
    return mean(values)


def test_workload_and_metrics_are_registered() -> None:
    manager = get_plugin_manager()
    workload = _workload()
    assert (workload.kind, workload.strategy_kind) == (PRODUCER_KIND, "partitioner")
    assert workload.strategies(manager) == ["murmur2", "round-robin", "sticky", "uniform-sticky"]
    assert {r.name for r in manager.metrics if PRODUCER_KIND in r.value.kinds} == METRICS
    for name in METRICS:
        assert manager.metric(name).compute(object()) is None


def test_generation_repeats_with_the_seed_and_checks_parameters() -> None:
    workload = _workload()
    params = dict(workload.defaults)
    assert workload.generate(params, 7) == workload.generate(params, 7)
    assert workload.generate(params, 7) != workload.generate(params, 8)
    with pytest.raises(ProducerWorkloadError, match="replication_factor 5 exceeds brokers 4"):
        workload.generate({**params, "replication_factor": 5}, 1)
    with pytest.raises(ProducerWorkloadError, match="'null_keys'"):
        workload.generate({**params, "null_keys": 1.5}, 1)
    assert not workload.feasible({**params, "replication_factor": 5})


def test_steps_count_every_record() -> None:
    steps = _run("sticky")
    assert [s.index for s in steps] == [0, 1, 2, 3]
    assert steps[2].event_kind == "broker-failure"
    assert [s.members for s in steps] == [4, 4, 3, 3]
    for step in steps:
        assert sum(step.per_partition) == step.records == SMALL["records"]
        assert step.partitions == len(step.per_partition) == 24
    assert steps == _run("sticky")  # same seed, same strategy: the same run


def test_round_robin_spreads_evenly_and_never_picks_an_unavailable_partition() -> None:
    rr = _run("round-robin", null_keys=0.2)
    keyed = _run("murmur2", null_keys=0.2)
    assert _mean("partition-skew", rr) < _mean("partition-skew", keyed)
    assert sum(s.unavailable_sends for s in rr) == 0
    assert (
        keyed[2].unavailable_sends > 0
    )  # Zipf keys still hash onto the failed leader's partitions


def test_sticky_batches_fill_better_than_round_robin() -> None:
    # KIP-480's point: null-key records sent together, fewer and fuller batches.
    rr = _run("round-robin", null_keys=1.0, slow_capacity=0)
    sticky = _run("sticky", null_keys=1.0, slow_capacity=0)
    assert _mean("records-per-batch", sticky) > 1.5 * _mean("records-per-batch", rr)
    assert _mean("batches", sticky) < _mean("batches", rr)


def test_adaptive_uniform_sticky_sends_less_to_a_slow_broker_than_sticky() -> None:
    def slow_share(strategy: str) -> float:
        steps = [s for seed in (1, 2, 3) for s in _run(strategy, seed, null_keys=1.0, fail_at=0)]
        # Broker 0 leads partition p of topic t when (t + p) % 4 == 0 (12 partitions a topic).
        led = [i for i in range(24) if (i // 12 + i % 12) % 4 == 0]
        placed = sum(s.per_partition[i] for s in steps for i in led)
        return placed / sum(s.records for s in steps)

    assert slow_share("uniform-sticky") < slow_share("sticky")


def test_runs_through_the_lab_runner() -> None:
    spec = ScenarioSpec(
        "p1",
        "producer-skew",
        PRODUCER_KIND,
        "uniform-sticky",
        '{"phases": 2, "records": 300}',
        5,
        0,
    )
    rows = run_scenario(spec)
    assert "error" not in {row[12] for row in rows}, rows
    assert {row[12] for row in rows} == METRICS
    assert {row[7] for row in rows} == {0, 1}

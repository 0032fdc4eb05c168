"""The lab's broker-failures workload and election metrics (run in-process, no Spark)."""

from __future__ import annotations

from typing import Any

import pytest

from coordkit.plugins import get_plugin_manager
from coordkit_elections.lab import ELECTIONS_KIND, ElectionStep, LabParameterError
from coordkit_lab.runner import run_scenario
from coordkit_lab.scenarios import ScenarioSpec

SEEDS = range(1, 6)


def _workload() -> Any:
    return get_plugin_manager().workload("broker-failures")


def _metric(name: str) -> Any:
    return get_plugin_manager().metric(name)


def test_workload_and_metrics_are_registered() -> None:
    manager = get_plugin_manager()
    workload = _workload()
    assert (workload.kind, workload.strategy_kind) == (ELECTIONS_KIND, "controller election")
    assert workload.strategies(manager) == ["kafka", "latch", "warm-standby"]
    names = {r.name for r in manager.metrics if ELECTIONS_KIND in r.value.kinds}
    assert names == {
        "failover-store-ops",
        "failover-seconds",
        "failover-load-seconds",
        "candidates-woken",
        "leader-skew",
        "unavailable-partitions",
        "unavailable-partition-seconds",
        "acked-records-lost",
    }
    for name in names:
        metric = manager.metric(name)
        assert metric.better == "lower"
        assert metric.compute(object()) is None  # not an elections step


def test_events_are_reproducible_from_the_seed() -> None:
    workload = _workload()
    params = dict(workload.defaults)
    assert workload.generate(params, 7) == workload.generate(params, 7)
    assert workload.generate(params, 7) != workload.generate(params, 8)
    with pytest.raises(LabParameterError, match="replication_factor"):
        workload.generate({**params, "brokers": 2, "replication_factor": 3}, 1)
    assert not workload.feasible({**params, "brokers": 2, "replication_factor": 3})


def _run(strategy: str, seed: int, **params: Any) -> list[ElectionStep]:
    base = {"brokers": 4, "topics": 2, "partitions": 10, "events": 10, **params}
    return list(_workload().simulate(base, seed, strategy, get_plugin_manager()))


@pytest.mark.parametrize("strategy", ["kafka", "warm-standby"])
def test_steps_and_metrics(strategy: str) -> None:
    steps = _run(strategy, 3)
    assert [s.index for s in steps] == list(range(11))
    assert steps[0].event == "initial"
    assert steps[0].members == 4
    assert steps[0].partitions == 20
    assert _metric("failover-store-ops").compute(steps[0]) is None
    assert _metric("leader-skew").compute(steps[0]) is not None
    for step in steps[1:]:
        assert _metric("unavailable-partitions").compute(step) >= 0
        assert _metric("unavailable-partition-seconds").compute(step) >= 0
        ops = _metric("failover-store-ops").compute(step)
        assert (ops is not None) == step.failover
        seconds = _metric("failover-seconds").compute(step)
        assert (seconds is not None) == step.failover
        if step.failover:
            assert ops > 0
            assert step.epoch_after > step.epoch_before
            assert seconds is not None
            assert 0 < seconds <= step.settle_seconds


def test_latch_wakes_fewer_candidates_than_kafka() -> None:
    woken: dict[str, list[float]] = {"kafka": [], "latch": []}
    for strategy, values in woken.items():
        for seed in SEEDS:
            for step in _run(strategy, seed, brokers=5):
                value = _metric("candidates-woken").compute(step)
                if value is not None:
                    values.append(value)
    assert woken["kafka"]
    assert woken["latch"]
    latch = sum(woken["latch"]) / len(woken["latch"])
    kafka = sum(woken["kafka"]) / len(woken["kafka"])
    # Latch: the successor (sometimes also a rejoining candidate); kafka: every broker, often
    # twice (the node's deletion, then its creation).
    assert latch <= 2 < kafka


def test_only_unclean_elections_lose_acknowledged_records() -> None:
    lost = {False: 0.0, True: 0.0}
    for unclean in lost:
        for seed in SEEDS:
            for step in _run("latch", seed, unclean=unclean, replication_factor=2):
                lost[unclean] += _metric("acked-records-lost").compute(step) or 0.0
    assert lost[False] == 0
    assert lost[True] > 0


def test_runs_through_the_lab_runner() -> None:
    spec = ScenarioSpec("s1", "broker-failures", ELECTIONS_KIND, "latch", '{"events": 4}', 11, 0)
    rows = run_scenario(spec)
    metrics = {row[12] for row in rows}
    assert "error" not in metrics, rows
    assert {"leader-skew", "unavailable-partitions", "acked-records-lost"} <= metrics

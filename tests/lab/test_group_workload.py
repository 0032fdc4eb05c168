"""The lab's consumer-groups workload: real groups on an in-process cluster (no Spark needed),
and the ``groups`` preset that brings it together with the producer workload."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from coordkit.lab import LabError
from coordkit.plugins import get_plugin_manager
from coordkit_assignors.lab.groups import GROUPS_KIND, GroupStep
from coordkit_lab.runner import run_scenario
from coordkit_lab.scenarios import ScenarioSpec, expand, get_preset

METRICS = {
    "rebalance-seconds",
    "rebalance-rounds",
    "partitions-unowned",
    "unowned-partition-seconds",
    "partitions-reassigned",
    "coordinator-skew",
}
SMALL = {"groups": 2, "consumers": 3, "partitions": 6, "events": 4, "session_timeout": 0.4}


def _workload() -> Any:
    return get_plugin_manager().workload("consumer-groups")


def _run(strategy: str, seed: int = 5, **params: Any) -> list[GroupStep]:
    return list(_workload().simulate({**SMALL, **params}, seed, strategy, get_plugin_manager()))


def test_registered_with_every_assignor_as_strategy() -> None:
    manager = get_plugin_manager()
    workload = _workload()
    assert workload.kind == GROUPS_KIND
    assert set(workload.strategies(manager)) >= {"range", "sticky", "cooperative-sticky"}
    assert {r.name for r in manager.metrics if GROUPS_KIND in r.value.kinds} == METRICS


def test_events_repeat_with_the_seed_and_parameters_are_checked() -> None:
    workload = _workload()
    params = {**workload.defaults, **SMALL, "events": 12, "static": True}
    first, again = workload.generate(params, 11), workload.generate(params, 11)
    assert first == again
    assert first != workload.generate(params, 12)
    assert {e.action for e in first.events} <= {
        "join",
        "leave",
        "crash",
        "restart-static",
        "kill-coordinator",
    }
    no_static = workload.generate({**params, "static": False}, 11)
    assert "restart-static" not in {e.action for e in no_static.events}
    with pytest.raises(LabError, match=r"consumers=1 \(needs >= 2\)"):
        workload.generate({**params, "consumers": 1}, 1)


def _join_step(strategy: str, steps: list[GroupStep]) -> GroupStep:
    joins = [s for s in steps if s.event_kind == "join"]
    assert joins, f"{strategy}: the seed gives no join event"
    return joins[0]


def test_eager_revokes_everything_cooperative_only_what_moves() -> None:
    """A member joining: every partition of an eager group goes unowned; a cooperative group
    gives up only the partitions that move, over two rounds."""
    params = {"events": 3, "groups": 1}
    resolved = {**_workload().defaults, **SMALL, **params}
    seed = next(
        s for s in range(50) if _workload().generate(resolved, s).events[0].action == "join"
    )
    eager = _run("range", seed, **params)
    cooperative = _run("cooperative-sticky", seed, **params)
    total = eager[0].partitions
    eager_join, coop_join = (
        _join_step("range", eager),
        _join_step("cooperative-sticky", cooperative),
    )
    assert eager_join.protocol == "range"
    assert eager_join.unowned == total
    assert eager_join.rounds == 1
    assert 0 < coop_join.unowned < total
    assert coop_join.unowned == coop_join.reassigned  # only moved partitions were unowned
    assert coop_join.rounds >= 2


def test_every_step_is_a_complete_assignment_and_metrics_apply() -> None:
    steps = _run("sticky", seed=9, events=6, static=True)
    assert steps[0].event_kind == "initial"
    assert [s.index for s in steps] == list(range(len(steps)))
    manager = get_plugin_manager()
    for step in steps:
        assert step.members >= 1
        assert step.generation >= 1
        assert sum(step.coordinators_per_broker) == SMALL["groups"]
        for name in METRICS:
            value = manager.metric(name).compute(step)
            if step.index == 0 and name != "coordinator-skew":
                assert value is None
            else:
                assert value is not None
                assert value >= 0
    crashes = [s for s in steps if s.event_kind == "crash"]
    for crash in crashes:  # noticed only at the session timeout
        assert crash.seconds >= SMALL["session_timeout"] * 0.9


def test_a_scenario_runs_through_the_lab_runner() -> None:
    spec = ScenarioSpec(
        "s1", "consumer-groups", GROUPS_KIND, "roundrobin", json.dumps(SMALL), 3, 0, 1.0
    )
    rows = run_scenario(spec)
    by_metric: dict[str, list[float]] = {}
    for row in rows:
        by_metric.setdefault(row[12], []).append(row[13])
    assert "error" not in by_metric, rows
    assert set(by_metric) == METRICS
    assert len(by_metric["coordinator-skew"]) == SMALL["events"] + 1  # every step, initial too
    assert len(by_metric["rebalance-seconds"]) == SMALL["events"]


def test_groups_preset_has_both_group_and_producer_workloads() -> None:
    specs = expand(get_preset("groups"), get_plugin_manager())
    assert {s.workload for s in specs} == {"consumer-groups", "producer-skew"}
    strategies = {s.strategy for s in specs if s.workload == "consumer-groups"}
    assert {"range", "cooperative-sticky"} <= strategies


@pytest.mark.lab_process
def test_lab_run_groups_on_spark(tmp_path: Path) -> None:
    """``coordkit lab run`` with the consumer-groups workload, end to end in its own process."""
    out = tmp_path / "report"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "coordkit_lab",
            "run",
            "--preset",
            "groups",
            "--workloads",
            "consumer-groups",
            "-s",
            "range",
            "-s",
            "cooperative-sticky",
            "--replicates",
            "1",
            "--master",
            "local[2]",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    text = done.stdout.replace("\n", " ")
    assert "Which leaves fewest partitions unconsumed during a rebalance? cooperative-sticky" in (
        " ".join(text.split())
    )
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["strategies"] == ["cooperative-sticky", "range"]

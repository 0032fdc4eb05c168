"""Workloads, parameters, presets and seeds (no Spark)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from coordkit.errors import UnknownNameError
from coordkit.lab import LabError, Workload, resolve_params
from coordkit.plugins import PluginManager, get_plugin_manager
from coordkit_assignors.lab.events import EVENT_KINDS, MemberJoined
from coordkit_assignors.lab.simulation import simulate_assignment
from coordkit_assignors.lab.workloads import (
    BUILTIN_WORKLOADS,
    KafkaGridWorkload,
    SinglePartitionTopicsWorkload,
)
from coordkit_assignors.roundrobin import RoundRobinAssignor
from coordkit_lab.runner import ERROR_METRIC, run_scenario
from coordkit_lab.scenarios import PRESETS, Preset, PresetCase, derive_seed, expand, get_preset

WORKLOADS = {w.name: w for w in BUILTIN_WORKLOADS}
RANDOM = ("random-cluster", "zipf-load", "churn")


def test_builtins_are_registered_and_follow_the_contract() -> None:
    registry = get_plugin_manager().workloads
    for name, workload in WORKLOADS.items():
        assert registry.get(name) is workload
        assert isinstance(workload, Workload)
        assert workload.kind == "assignment"
        assert "range" in workload.strategies(get_plugin_manager())


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_same_seed_same_case(name: str) -> None:
    workload = WORKLOADS[name]
    assert workload.case({}, 11) == workload.case({}, 11)


@pytest.mark.parametrize("name", RANDOM)
def test_different_seeds_differ(name: str) -> None:
    workload = WORKLOADS[name]
    assert workload.case({}, 11) != workload.case({}, 12)


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_generated_events_are_consistent(name: str) -> None:
    """Every event applies to the group as it then is (the simulation raises otherwise)."""
    for seed in range(5):
        steps = list(simulate_assignment(WORKLOADS[name].case({}, seed), RoundRobinAssignor()))
        assert all(step.members >= 1 for step in steps)


def test_churn_with_every_event_kind() -> None:
    case = WORKLOADS["churn"].case({"mix": "all", "steps": 300}, 3)
    assert {e.kind for e in case.events} == set(EVENT_KINDS)
    steps = list(simulate_assignment(case, RoundRobinAssignor()))
    assert len(steps) == 301


def test_kafka_grid_matches_the_jmh_benchmark() -> None:
    grid = KafkaGridWorkload()
    case = grid.case({"members": 30, "partitions_per_member": 10, "topics": 20, "racks": True}, 0)
    assert len(case.topics) == 20
    assert {m.partitions for m in case.topics.values()} == {15}  # 300 partitions over 20 topics
    assert all(len(m.topics) == 20 for m in case.members)
    first = next(iter(case.topics.values()))
    assert first.replica_racks is not None
    assert first.replica_racks[:4] == (
        ("rack0", "rack1"),
        ("rack1", "rack2"),
        ("rack2", "rack0"),
        ("rack0", "rack1"),
    )
    assert [m.rack for m in case.members[:4]] == ["rack0", "rack1", "rack2", "rack0"]
    (joined,) = case.events
    assert isinstance(joined, MemberJoined)
    assert len(joined.topics) == 20


def test_kafka_grid_heterogeneous_subscriptions_cover_every_topic() -> None:
    grid = KafkaGridWorkload()
    many = grid.case({"members": 50, "topics": 10, "subscription": "heterogeneous"}, 0)
    assert {len(m.topics) for m in many.members} == {2}
    few = grid.case({"members": 4, "topics": 10, "subscription": "heterogeneous"}, 0)
    covered = set().union(*(m.topics for m in few.members))
    assert covered == set(few.topics)
    assert few.members[0].topics[:2] == ("topic-0000", "topic-0001")


def test_kafka_grid_rejects_impossible_combinations() -> None:
    grid = KafkaGridWorkload()
    params = {"members": 10, "partitions_per_member": 1, "topics": 100}
    assert not grid.feasible(params)
    with pytest.raises(LabError, match="cannot fill 100 topics"):
        grid.case(params, 0)


def test_zipf_loads_are_skewed_with_mean_one() -> None:
    case = WORKLOADS["zipf-load"].case({"exponent": 1.0}, 5)
    loads = [x for meta in case.topics.values() for x in (meta.loads or ())]
    assert sum(loads) / len(loads) == pytest.approx(1.0)
    assert max(loads) / min(loads) == pytest.approx(len(loads))  # rank 1 against rank N


def test_parameters_are_checked_against_the_defaults() -> None:
    grid = KafkaGridWorkload()
    with pytest.raises(LabError, match=r"has no parameter 'membres'; its parameters: .*members"):
        resolve_params(grid, {"membres": 3})
    with pytest.raises(LabError, match="parameter 'members' must be an integer"):
        resolve_params(grid, {"members": "many"})
    assert resolve_params(grid, {"members": "7", "racks": "true"})["members"] == 7
    assert resolve_params(grid, {"racks": "true"})["racks"] is True
    with pytest.raises(LabError, match="must be homogeneous or heterogeneous"):
        grid.case({"subscription": "mixed"}, 0)


def test_derived_seeds_do_not_depend_on_the_process() -> None:
    code = "from coordkit_lab.scenarios import derive_seed; print(derive_seed(1, 'churn', '{}', 0))"
    outputs = set()
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        result = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
        )
        outputs.add(result.stdout.strip())
    assert outputs == {str(derive_seed(1, "churn", "{}", 0))}


def test_every_strategy_meets_the_same_workload_instance() -> None:
    specs = expand(get_preset("quick"), get_plugin_manager(), workloads=["churn"], replicates=2)
    by_replicate: dict[int, set[int]] = {}
    for spec in specs:
        by_replicate.setdefault(spec.replicate, set()).add(spec.seed)
    assert all(len(seeds) == 1 for seeds in by_replicate.values())
    assert len({seeds.pop() for seeds in by_replicate.values()}) == 2
    assert len({s.scenario_id for s in specs}) == len(specs)


def test_expand_filters_and_names_unknown_choices() -> None:
    manager = get_plugin_manager()
    quick = get_preset("quick")
    specs = expand(quick, manager, strategies=["range", "roundrobin"], workloads=["zipf-load"])
    assert {s.strategy for s in specs} == {"range", "roundrobin"}
    assert {s.workload for s in specs} == {"zipf-load"}
    assert {json.loads(s.params)["members"] for s in specs} == {10}
    with pytest.raises(
        UnknownNameError, match=r"unknown strategy 'nosuch'; available: .*roundrobin"
    ):
        expand(quick, manager, strategies=["nosuch"])
    with pytest.raises(UnknownNameError, match=r"unknown workload 'nosuch'; available: .*churn"):
        expand(quick, manager, workloads=["nosuch"])
    with pytest.raises(UnknownNameError, match=r"unknown preset 'huge'; available: .*quick"):
        get_preset("huge")


def test_a_workload_missing_from_the_preset_runs_with_its_defaults() -> None:
    specs = expand(get_preset("kafka-grid"), get_plugin_manager(), workloads=["churn"])
    assert {s.workload for s in specs} == {"churn"}
    assert {s.params for s in specs} == {
        json.dumps(dict(WORKLOADS["churn"].defaults), sort_keys=True, separators=(",", ":"))
    }


def test_presets_skip_infeasible_grid_points() -> None:
    preset = Preset("t", "t", [PresetCase("kafka-grid", {"members": 10, "topics": (10, 1000)})], 1)
    specs = expand(preset, get_plugin_manager(), strategies=["range"])
    assert [json.loads(s.params)["topics"] for s in specs] == [10]


def test_every_preset_expands() -> None:
    manager = get_plugin_manager()
    sizes = {name: len(expand(p, manager)) for name, p in PRESETS.items()}
    assert sizes["full"] >= sizes["quick"] + sizes["kafka-grid"]


class BrokenAssignor:
    name = "broken"
    protocols = RoundRobinAssignor.protocols

    def assign(self, group: Any) -> Any:
        raise RuntimeError("boom")


class BrokenPlugin:
    from coordkit import hookimpl

    @hookimpl
    def coordkit_register_assignors(self, register: Any) -> None:
        register(BrokenAssignor())


def test_a_failing_strategy_leaves_one_error_row() -> None:
    manager = PluginManager()
    manager.register(BrokenPlugin(), name="broken-plugin")
    (spec,) = expand(
        Preset("t", "t", [PresetCase("single-partition-topics")], 1),
        manager,
        strategies=["broken"],
    )
    (row,) = run_scenario(spec, manager)
    assert row[12] == ERROR_METRIC
    assert "RuntimeError: boom" in row[8]
    assert row[7] == -1


class JoiningWorkload(SinglePartitionTopicsWorkload):
    """A plugin workload that puts itself into the ``t`` preset."""

    name = "joining"
    presets = {"t": {"members": (2, 5)}}


class JoiningPlugin:
    from coordkit import hookimpl

    @hookimpl
    def coordkit_register_workloads(self, register: Any) -> None:
        register(JoiningWorkload())


def test_a_plugin_workload_can_join_a_preset() -> None:
    manager = PluginManager()
    manager.register(JoiningPlugin(), name="joining-plugin")
    preset = Preset("t", "t", [PresetCase("zipf-load")], 1)
    specs = expand(preset, manager, strategies=["range"])
    assert sorted((s.workload, json.loads(s.params)["members"]) for s in specs) == [
        ("joining", 2),
        ("joining", 5),
        ("zipf-load", 10),
    ]
    other = Preset("other", "other", [PresetCase("zipf-load")], 1)
    assert {s.workload for s in expand(other, manager, strategies=["range"])} == {"zipf-load"}

"""Dealing scenarios into Spark tasks: even costs, and every strategy of a scenario in one task."""

from __future__ import annotations

from collections import Counter

from coordkit.plugins import get_plugin_manager
from coordkit_lab.runner import deal, paired_groups
from coordkit_lab.scenarios import ScenarioSpec, expand, get_preset


def _specs() -> list[ScenarioSpec]:
    return expand(get_preset("quick"), get_plugin_manager())


def test_every_strategy_of_a_scenario_runs_in_the_same_task() -> None:
    specs = _specs()
    buckets = deal(specs, 8)
    assert sorted(s.scenario_id for b in buckets for s in b) == sorted(s.scenario_id for s in specs)
    task_of = {s.scenario_id: i for i, bucket in enumerate(buckets) for s in bucket}
    for group in paired_groups(specs):
        assert len({task_of[s.scenario_id] for s in group}) == 1
        # ... and back to back, so their timings are taken under the same conditions.
        bucket = buckets[task_of[group[0].scenario_id]]
        positions = sorted(bucket.index(s) for s in group)
        assert positions == list(range(positions[0], positions[0] + len(group)))


def test_a_group_holds_one_scenario_per_strategy_and_no_strategy_always_goes_first() -> None:
    groups = paired_groups(_specs())
    for group in groups:
        assert len({(s.workload, s.params, s.seed) for s in group}) == 1
        assert len({s.strategy for s in group}) == len(group)
    firsts = Counter(group[0].strategy for group in groups)
    assert len(firsts) > 1


def test_costs_are_spread_evenly_over_tasks() -> None:
    specs = _specs()
    buckets = deal(specs, 4)
    assert len(buckets) == 4
    loads = sorted(sum(s.cost for s in bucket) for bucket in buckets)
    heaviest_group = max(sum(s.cost for s in g) for g in paired_groups(specs))
    # Greedy largest-first: no task exceeds the lightest by more than the heaviest group.
    assert loads[-1] - loads[0] <= heaviest_group

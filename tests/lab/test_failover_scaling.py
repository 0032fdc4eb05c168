"""Failover time against partition count (issue 16): the elections preset spans partition counts,
metrics declare what they are plotted against, and the report charts and tabulates each strategy's
growth for any such metric (no Spark here; the Spark run is in test_failover_scaling_run.py)."""

from __future__ import annotations

import base64
import re
from collections import defaultdict
from typing import Any

import numpy as np
import pytest
from rich.console import Console

from coordkit.lab import FunctionMetric, LabError
from coordkit.plugins import get_plugin_manager
from coordkit_elections.lab import FAILURE_MIXES, LabParameterError
from coordkit_lab.metricinfo import metric_info, scales_with
from coordkit_lab.report import build_report_data, check_report_data, print_report, render_html
from coordkit_lab.scaling import EXPONENT_MARGIN, MIN_SCALING_SPAN
from coordkit_lab.scenarios import PRESETS, expand

STRATEGIES = {"kafka", "latch", "warm-standby"}


def _workload() -> Any:
    return get_plugin_manager().workload("broker-failures")


def test_the_elections_preset_spans_partition_counts_for_every_strategy() -> None:
    specs = [
        s
        for s in expand(PRESETS["elections"], get_plugin_manager())
        if s.workload == "broker-failures"
    ]
    sizes: dict[int, set[str]] = defaultdict(set)
    scenarios: dict[tuple[str, int], set[tuple[str, int]]] = defaultdict(set)
    for spec in specs:
        params = get_plugin_manager().workload(spec.workload).defaults | _params(spec.params)
        sizes[int(params["topics"]) * int(params["partitions"])].add(spec.strategy)
        scenarios[(spec.params, spec.replicate)].add((spec.strategy, spec.seed))
    counts = sorted(sizes)
    assert len(counts) >= 3, counts
    assert counts[-1] >= 100 * counts[0] >= 100 * MIN_SCALING_SPAN
    assert counts[-1] >= 10_000
    assert all(found == STRATEGIES for found in sizes.values()), sizes
    # Every strategy meets the same events: one seed per parameter set and replicate.
    for found in scenarios.values():
        assert {strategy for strategy, _ in found} == STRATEGIES
        assert len({seed for _, seed in found}) == 1


def _params(text: str) -> dict[str, Any]:
    from coordkit.support import jsontext

    loaded: dict[str, Any] = jsontext.loads(text)
    return loaded


def test_failover_timings_are_declared_against_partitions() -> None:
    manager = get_plugin_manager()
    infos = metric_info(r.value for r in manager.metrics)
    assert infos["failover-seconds"]["scales_with"] == "partitions"
    assert infos["failover-load-seconds"]["scales_with"] == "partitions"
    assert infos["leader-skew"]["scales_with"] is None
    assert scales_with("leader-skew", infos["leader-skew"]) is None
    # The assignors' timing, which predates the declaration, still scales.
    assert scales_with("assign_ms", {"unit": "ms"}) == "partitions"
    with pytest.raises(ValueError, match="scales_with"):
        FunctionMetric("m", "d", "s", "lower", lambda step: 1.0, scales_with="members")  # type: ignore[arg-type]


def test_the_controller_mix_fails_the_controller_over_first() -> None:
    workload = _workload()
    params = {**workload.defaults, "failures": "controller", "events": 30, "brokers": 3}
    for seed in range(5):
        case = workload.generate(params, seed)
        actions = [e.action for e in case.events]
        assert set(actions) <= set(FAILURE_MIXES["controller"])
        assert actions[0] in {"crash-controller", "expire-controller"}  # nothing to restart yet
    assert workload.generate(params, 3) == workload.generate(params, 3)
    with pytest.raises(LabParameterError, match="'failures' must be one of any, controller"):
        workload.generate({**params, "failures": "brokers"}, 1)


def test_steps_time_the_load_within_the_failover() -> None:
    workload = _workload()
    params = {
        "brokers": 3,
        "topics": 1,
        "partitions": 6,
        "replication_factor": 2,
        "failures": "controller",
        "events": 3,
        "records": 1,
    }
    metric = get_plugin_manager().metric("failover-load-seconds")
    for strategy in ("kafka", "warm-standby"):
        steps = list(workload.simulate(params, 5, strategy, get_plugin_manager()))
        assert metric.compute(steps[0]) is None
        assert steps[1].failover  # a controller failure first
        for step in steps[1:]:
            load = metric.compute(step)
            assert (load is not None) == step.failover, step
            if load is not None:
                assert step.failover_seconds is not None
                assert 0 <= load <= step.failover_seconds


# -- the analysis and the report, on synthetic scenarios whose growth is known -----------------

INFOS: dict[str, dict[str, Any]] = {
    "switch-seconds": {
        "description": "seconds to switch over",
        "unit": "seconds",
        "better": "lower",
        "headline": "Which switches fastest?",
        "scales_with": "partitions",
    },
    "switch-ops": {
        "description": "store operations to switch over",
        "unit": "round trips",
        "better": "lower",
        "headline": None,
    },
}


def _scenarios(exponents: dict[str, float], metric: str) -> list[dict[str, Any]]:
    rng = np.random.default_rng(11)
    rows = []
    for i, size in enumerate([1_000, 10_000, 50_000] * 4):
        noise = rng.lognormal(0, 0.05)
        for strategy, exponent in exponents.items():
            rows.append(
                {
                    "workload": "failover",
                    "params": f'{{"partitions":{size}}}',
                    "strategy": strategy,
                    "seed": 100 + i,
                    "replicate": i,
                    "metric": metric,
                    "n": 2,
                    "mean": 1e-4 * size**exponent * noise,
                    "case_partitions": size,
                }
            )
    return rows


def _report() -> dict[str, Any]:
    rows = _scenarios({"cold": 1.0, "warm": 0.1}, "switch-seconds")
    rows += _scenarios({"cold": 1.0, "warm": 0.1}, "switch-ops")
    return build_report_data({"seed": 3, "preset": "test"}, INFOS, {"scenarios": rows})


def test_a_metric_declared_against_partitions_gets_growth_exponents() -> None:
    data = _report()
    (entry,) = data["analysis"]["scaling"]  # switch-ops declares nothing: no entry
    assert (entry["workload"], entry["metric"]) == ("failover", "switch-seconds")
    growth = {g["strategy"]: g for g in entry["growth"]}
    assert set(growth) == {"cold", "warm"}
    for strategy, truth in (("cold", 1.0), ("warm", 0.1)):
        assert growth[strategy]["low"] <= truth <= growth[strategy]["high"]
        assert [p["partitions"] for p in growth[strategy]["points"]] == [1_000, 10_000, 50_000]
        assert all(p["n"] == 4 for p in growth[strategy]["points"])
    assert entry["winners"] == ["warm"]
    assert entry["effect"]["strategy"] == "cold"
    assert entry["effect"]["difference"] > EXPONENT_MARGIN
    assert entry["fastest"] == ["warm"]
    assert check_report_data(data) is data


def test_the_page_charts_and_tabulates_the_growth() -> None:
    page = render_html(_report())
    match = re.search(
        r"<img alt='failover: switch-seconds against partitions' "
        r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'>",
        page,
    )
    assert match is not None
    assert base64.b64decode(match.group(1)).startswith(b"\x89PNG")
    assert "failover: switch-seconds (seconds) against partitions" in page
    for size in ("1,000 partitions", "10,000 partitions", "50,000 partitions"):
        assert size in page
    assert "<b>Which scales best?</b> switch-seconds on failover" in page
    assert "switch-ops against partitions" not in page


def test_the_terminal_report_tabulates_the_growth() -> None:
    console = Console(record=True, width=160)
    print_report(_report(), console)
    text = console.export_text()
    assert "failover: switch-seconds (seconds) against partitions" in text
    assert re.search(r"cold\s.*\s1\.0\d \[", text), text  # the exponent with its interval
    assert re.search(r"warm\s.*\s0\.\d\d \[", text), text
    assert "Which scales best? warm on failover: switch-seconds ∝ partitions^exponent" in text


def test_a_summary_with_an_unknown_axis_is_refused() -> None:
    data = _report()
    data["metrics"]["switch-seconds"]["scales_with"] = "members"
    with pytest.raises(LabError, match=r"metrics\.switch-seconds\.scales_with: expected one of"):
        check_report_data(data)

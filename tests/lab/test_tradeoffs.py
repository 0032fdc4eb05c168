"""Trade-offs: the Pareto front over balance, movement and interruption, and "which moves fewest"
asked only among the strategies that balance (issue 13: zipf-load named weighted-sticky, which
moved nothing and left a 29-partition spread)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from coordkit.plugins import get_plugin_manager
from coordkit_lab.analysis import analyse, describe_gate
from coordkit_lab.metricinfo import metric_info
from coordkit_lab.tradeoffs import balance_gate, dimensions, dominates

#: The registered assignment metrics, as the report describes them (tradeoff attributes included).
INFOS = metric_info(r.value for r in get_plugin_manager().metrics)


def rows(workload: str, table: Mapping[str, Mapping[str, Sequence[float]]]) -> list[dict[str, Any]]:
    """``scenarios`` rows from ``{strategy: {metric: per-scenario values}}``."""
    out = []
    for strategy, metrics in table.items():
        for metric, values in metrics.items():
            for i, value in enumerate(values):
                out.append(
                    {
                        "workload": workload,
                        "params": "{}",
                        "strategy": strategy,
                        "seed": 50 + i,
                        "replicate": i,
                        "metric": metric,
                        "n": 6,
                        "mean": float(value),
                        "case_partitions": 256,
                    }
                )
    return out


def front_of(result: Mapping[str, Any], workload: str) -> dict[str, dict[str, Any]]:
    (found,) = [p for p in result["pareto"] if p["workload"] == workload]
    return {p["strategy"]: p for p in found["points"]}


def test_the_assignment_metrics_declare_their_tradeoffs() -> None:
    assert INFOS["count_balance"]["tradeoff"] == "balance"
    assert INFOS["load_balance"]["tradeoff"] == "balance"
    assert INFOS["moved_excess"]["tradeoff"] == "movement"
    assert INFOS["revoked"]["tradeoff"] == "interruption"
    assert INFOS["rounds"]["tradeoff"] == "interruption"
    assert INFOS["assign_ms"]["tradeoff"] is None
    present = ["assign_ms", "rounds", "moved_excess", "count_balance", "moved_min"]
    assert dimensions(INFOS, present) == ["count_balance", "moved_excess", "rounds"]


def test_better_on_balance_and_worse_on_movement_is_not_dominated() -> None:
    result = analyse(
        {
            "scenarios": rows(
                "w",
                {
                    "balancer": {"count_balance": [1, 1, 1], "moved_excess": [30, 32, 31]},
                    "keeper": {"count_balance": [9, 8, 9], "moved_excess": [0, 0, 1]},
                },
            )
        },
        INFOS,
        1,
    )
    points = front_of(result, "w")
    assert points["balancer"]["dominated_by"] == []
    assert points["keeper"]["dominated_by"] == []


def test_worse_on_both_is_dominated_by_the_right_one() -> None:
    result = analyse(
        {
            "scenarios": rows(
                "w",
                {
                    "good": {"count_balance": [1, 1, 2], "moved_excess": [3, 4, 3]},
                    "bad": {"count_balance": [5, 6, 5], "moved_excess": [20, 25, 22]},
                    "cheap": {"count_balance": [9, 9, 9], "moved_excess": [0, 0, 0]},
                    "equal": {"count_balance": [1, 1, 2], "moved_excess": [3, 4, 3]},
                },
            )
        },
        INFOS,
        1,
    )
    points = front_of(result, "w")
    assert points["bad"]["dominated_by"] == ["equal", "good"]
    assert points["bad"]["clearly_dominated_by"] == ["equal", "good"]
    assert points["cheap"]["dominated_by"] == []  # moves least: on the front
    assert points["good"]["dominated_by"] == []  # equal to "equal": neither dominates
    assert points["equal"]["dominated_by"] == []


def test_a_domination_within_the_noise_is_not_clear() -> None:
    result = analyse(
        {
            "scenarios": rows(
                "w",
                {
                    "a": {"count_balance": [1, 1, 1, 1], "moved_excess": [0, 10, 0, 10]},
                    "b": {"count_balance": [1, 1, 1, 1], "moved_excess": [10, 0, 10, 1]},
                },
            )
        },
        INFOS,
        1,
    )
    points = front_of(result, "w")
    assert points["b"]["dominated_by"] == ["a"]  # 5.25 against 5.0 on the means ...
    assert points["b"]["clearly_dominated_by"] == []  # ... but not beyond the noise


def test_dominance_needs_every_dimension() -> None:
    dims = ["count_balance", "rack_locality"]  # lower is better, higher is better
    assert dominates(
        {"count_balance": 1, "rack_locality": 0.9},
        {"count_balance": 2, "rack_locality": 0.9},
        dims,
        INFOS,
    )
    assert not dominates(
        {"count_balance": 1, "rack_locality": 0.5},
        {"count_balance": 2, "rack_locality": 0.9},
        dims,
        INFOS,
    )
    same = {"count_balance": 1.0, "rack_locality": 0.5}
    assert not dominates(same, dict(same), dims, INFOS)


ZIPF_LIKE = {
    # weighted-sticky keeps every partition where it was (moves 0, keeps load balanced) and
    # leaves a 29-partition spread in counts: the case.
    "weighted-sticky": {
        "count_balance": [29, 30, 29],
        "load_balance": [1.29, 1.30, 1.29],
        "moved": [0, 0, 0],
        "moved_excess": [-35, -36, -34],
        "revoked": [242, 243, 243],
    },
    "sticky": {
        "count_balance": [1, 1, 1],
        "load_balance": [2.03, 2.10, 1.96],
        "moved": [11, 12, 11.5],
        "moved_excess": [0, 0, 0],
        "revoked": [244, 244, 245],
    },
    "cooperative-sticky": {
        "count_balance": [1, 1, 1],
        "load_balance": [2.03, 2.10, 1.96],
        "moved": [11, 12, 11.5],
        "moved_excess": [0, 0, 0],
        "revoked": [11, 12, 11.5],
    },
    "range": {
        "count_balance": [8, 8, 8],
        "load_balance": [2.24, 2.30, 2.19],
        "moved": [110, 120, 114],
        "moved_excess": [100, 106, 103],
        "revoked": [244, 244, 244],
    },
    "roundrobin": {
        "count_balance": [1, 1, 1],
        "load_balance": [2.15, 2.16, 2.14],
        "moved": [217, 218, 218],
        "moved_excess": [206, 206, 207],
        "revoked": [244, 244, 245],
    },
}


def test_moves_fewest_is_asked_only_among_strategies_that_balance() -> None:
    result = analyse({"scenarios": rows("zipf-load", ZIPF_LIKE)}, INFOS, 20240601)
    (moved,) = [v for v in result["verdicts"] if v["metric"] == "moved"]
    assert "weighted-sticky" not in moved["strategies"]
    assert moved["strategies"] == ["cooperative-sticky", "sticky"]
    assert moved["tied"] is True
    assert moved["gate"]["metric"] == "count_balance"
    assert moved["gate"]["excluded"] == ["range", "weighted-sticky"]
    assert "not balancing: range, weighted-sticky" in describe_gate(moved["gate"])
    assert moved["effect"]["strategy"] == "roundrobin"
    # ... while it stays the answer to the load question, and a defensible trade-off.
    (load,) = [v for v in result["verdicts"] if v["metric"] == "load_balance"]
    assert load["strategies"] == ["weighted-sticky"]
    points = front_of(result, "zipf-load")
    assert points["weighted-sticky"]["dominated_by"] == []
    assert points["sticky"]["dominated_by"] == ["cooperative-sticky"]  # revokes far more
    assert points["roundrobin"]["dominated_by"] == ["cooperative-sticky", "sticky"]
    # The key table highlights no non-balancing strategy for movement either.
    best_moved_excess = {
        e["strategy"] for e in result["estimates"] if e["metric"] == "moved_excess" and e["best"]
    }
    assert best_moved_excess == {"cooperative-sticky", "sticky"}


def test_the_balance_gate_is_one_partition_or_five_percent() -> None:
    counts = {"a": {"count_balance": 1.0}, "b": {"count_balance": 2.0}, "c": {"count_balance": 2.5}}
    gate = balance_gate(counts, INFOS)
    assert gate is not None
    assert gate.balanced == ("a", "b")
    assert gate.excluded == ("c",)
    infos = {"skew": {"unit": "max/mean", "better": "lower", "tradeoff": "balance"}}
    ratios = {"a": {"skew": 1.10}, "b": {"skew": 1.15}, "c": {"skew": 1.16}}
    gate = balance_gate(ratios, infos)
    assert gate is not None
    assert gate.balanced == ("a", "b")  # 1.10 * 1.05 = 1.155
    assert balance_gate({"a": {"assign_ms": 1.0}}, INFOS) is None

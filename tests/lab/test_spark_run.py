"""The lab on local Spark: outputs, reproducibility, aggregation, and the facts it must reproduce.

All of it reads one small run (the session fixture ``lab_run``, about 40 scenarios).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from coordkit_lab.local import run_local
from coordkit_lab.runner import RESULT_COLUMNS
from coordkit_lab.scenarios import ScenarioSpec
from coordkit_lab.spark import DEFAULT_ENGINE, ENGINES, execute

COUNT_BASED = ("range", "range-ceil", "roundrobin", "sticky", "cooperative-sticky", "uniform")

Select = Callable[..., list[float]]


def comparable(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Rows without timings, in a stable order."""
    return sorted(tuple(r[c] for c in RESULT_COLUMNS) for r in rows if r["metric"] != "assign_ms")


def test_the_run_writes_parquet_json_and_html(lab_run: Any, test_specs: list[ScenarioSpec]) -> None:
    out: Path = lab_run.out
    assert (out / "index.html").is_file()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["scenarios"] == len(test_specs)
    assert summary["tables"]["totals"][0]["failed"] == 0, summary["tables"]["errors"][:3]
    assert list((out / "raw").glob("*.parquet"))
    for table in ("summary", "cases", "scaling", "steps", "scenarios"):
        assert list((out / "aggregates" / f"aggregate={table}").glob("*.parquet")), table
    assert {r["workload"] for r in summary["tables"]["steps"]} == {"churn"}  # the only long one


def test_progress_reaches_every_task(lab_run: Any) -> None:
    done, total = lab_run.progress[-1]
    assert done == total > 1


def test_every_scenario_and_metric_is_present(
    raw_rows: list[dict[str, Any]], test_specs: list[ScenarioSpec]
) -> None:
    assert {r["scenario_id"] for r in raw_rows} == {s.scenario_id for s in test_specs}
    metrics = {r["metric"] for r in raw_rows}
    assert {
        "count_balance",
        "load_balance",
        "moved",
        "moved_min",
        "revoked",
        "rounds",
        "assign_ms",
    } <= metrics
    assert not any(r["metric"] == "unassigned" and r["value"] for r in raw_rows)


def test_spark_sql_means_match_the_raw_rows(lab_run: Any, raw_rows: list[dict[str, Any]]) -> None:
    grouped: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for r in raw_rows:
        grouped[(r["workload"], r["strategy"], r["metric"])].append(r["value"])
    summary = lab_run.result.data["tables"]["summary"]
    assert len(summary) == len(grouped)
    for row in summary:
        values = grouped[(row["workload"], row["strategy"], row["metric"])]
        assert row["n"] == len(values)
        assert row["mean"] == pytest.approx(sum(values) / len(values))
        assert row["max"] == max(values)


def test_the_analysis_resamples_spark_sql_per_scenario_means(
    spark: Any, lab_run: Any, raw_rows: list[dict[str, Any]]
) -> None:
    """The ``scenarios`` table (Spark SQL: one mean per scenario and metric) matches the raw rows,
    and the report's estimates are the means of those per-scenario means."""
    per_scenario: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for r in raw_rows:
        per_scenario[(r["scenario_id"], r["strategy"], r["metric"])].append(r["value"])
    table = [
        row.asDict()
        for row in spark.read.parquet(f"{lab_run.result.parquet}/aggregates")
        .where("aggregate = 'scenarios'")
        .collect()
    ]
    assert len(table) == len(per_scenario)
    ids = {
        (r["workload"], r["params"], r["strategy"], r["seed"]): r["scenario_id"] for r in raw_rows
    }
    pooled: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for row in table:
        scenario = ids[(row["workload"], row["params"], row["strategy"], row["seed"])]
        values = per_scenario[(scenario, row["strategy"], row["metric"])]
        assert row["mean"] == pytest.approx(sum(values) / len(values))
        pooled[(row["workload"], row["strategy"], row["metric"])].append(row["mean"])
    estimates = lab_run.result.data["analysis"]["estimates"]
    assert len(estimates) == len(pooled)
    for e in estimates:
        means = pooled[(e["workload"], e["strategy"], e["metric"])]
        assert e["n"] == len(means)
        assert e["mean"] == pytest.approx(sum(means) / len(means))
        if e["n"] > 1 and max(means) > min(means):
            assert e["low"] < e["high"]
        assert e["low"] <= e["mean"] + 1e-9
        assert e["mean"] <= e["high"] + 1e-9
    assert "scenarios" not in lab_run.result.data["tables"]  # it stays in Parquet


def test_same_seed_same_metrics_and_same_as_plain_python(
    spark: Any, test_specs: list[ScenarioSpec], raw_rows: list[dict[str, Any]], tmp_path: Path
) -> None:
    subset = [s for s in test_specs if s.workload in {"churn", "zipf-load"}]
    ids = {s.scenario_id for s in subset}
    again = execute(spark, subset, tmp_path.as_uri())
    rerun = [r.asDict() for r in spark.read.parquet(f"{again.parquet}/raw").collect()]
    first = comparable([r for r in raw_rows if r["scenario_id"] in ids])
    assert comparable(rerun) == first
    local = [dict(zip(RESULT_COLUMNS, row, strict=True)) for row in run_local(subset).rows]
    assert comparable(local) == first


@pytest.mark.parametrize("engine", [e for e in ENGINES if e != DEFAULT_ENGINE])
def test_engines_agree(
    spark: Any,
    engine: str,
    test_specs: list[ScenarioSpec],
    raw_rows: list[dict[str, Any]],
    tmp_path: Path,
) -> None:
    subset = [s for s in test_specs if s.workload == "single-partition-topics"]
    ids = {s.scenario_id for s in subset}
    run = execute(spark, subset, tmp_path.as_uri(), engine=engine, tasks=3)
    rows = [r.asDict() for r in spark.read.parquet(f"{run.parquet}/raw").collect()]
    assert comparable(rows) == comparable([r for r in raw_rows if r["scenario_id"] in ids])


# -- the facts the issue asks the lab to reproduce ------------------------------------------------


def test_range_piles_single_partition_topics_on_one_member(
    raw_rows: list[dict[str, Any]], select: Select
) -> None:
    where = {"workload": "single-partition-topics", "step": 0, "metric": "count_balance"}
    assert select(raw_rows, strategy="range", **where) == [10.0]  # 10 / 0 / 0
    assert select(raw_rows, strategy="roundrobin", **where) == [1.0]  # 4 / 3 / 3


def test_sticky_moves_no_more_than_it_must_when_a_member_leaves(
    raw_rows: list[dict[str, Any]], select: Select
) -> None:
    leave_steps = {
        (r["scenario_id"], r["step"])
        for r in raw_rows
        if r["event_kind"] == "leave" and r["strategy"] == "sticky"
    }
    assert leave_steps, "the test workloads must contain a member leaving"
    for scenario, step in leave_steps:
        moved = select(raw_rows, scenario_id=scenario, step=step, metric="moved")
        least = select(raw_rows, scenario_id=scenario, step=step, metric="moved_min")
        assert moved == least, (scenario, step)
    # The contrast: roundrobin reshuffles when someone leaves.
    excess = [
        r["value"]
        for r in raw_rows
        if r["event_kind"] == "leave"
        and r["strategy"] == "roundrobin"
        and r["metric"] == "moved_excess"
    ]
    assert max(excess) > 0


def test_cooperative_sticky_needs_a_second_round(
    raw_rows: list[dict[str, Any]], select: Select
) -> None:
    where = {"workload": "kafka-grid", "event_kind": "join"}
    cooperative = select(raw_rows, strategy="cooperative-sticky", metric="rounds", **where)
    assert cooperative
    assert set(cooperative) == {2.0}
    assert set(select(raw_rows, strategy="sticky", metric="rounds", **where)) == {1.0}
    # ... and revokes only what moves, where eager sticky revokes everything.
    cooperative_revoked = select(raw_rows, strategy="cooperative-sticky", metric="revoked", **where)
    eager_revoked = select(raw_rows, strategy="sticky", metric="revoked", **where)
    assert max(cooperative_revoked) < min(eager_revoked)


def test_weighted_beats_count_based_assignors_on_load_balance_under_skew(lab_run: Any) -> None:
    means = {
        r["strategy"]: r["mean"]
        for r in lab_run.result.data["tables"]["summary"]
        if r["workload"] == "zipf-load" and r["metric"] == "load_balance"
    }
    weighted = means["weighted-sticky"]
    assert not math.isnan(weighted)
    for strategy in COUNT_BASED:
        assert weighted < means[strategy], (strategy, means)

"""Aggregating a run's raw rows with Spark SQL: every table from one ``GROUPING SETS`` query.

``summary``, ``cases``, ``scaling`` and ``steps`` describe the results; ``scenarios`` (a mean per
scenario and metric) is what the report's statistics resample (:mod:`coordkit_lab.statistics`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from coordkit_lab.runner import ERROR_METRIC

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


#: The aggregated tables: name → the columns they group by. One Spark SQL query computes all of
#: them at once (``GROUPING SETS``), so the aggregation costs two Spark jobs, not two per table.
AGGREGATES: dict[str, tuple[str, ...]] = {
    "summary": ("workload", "kind", "strategy", "metric"),
    "cases": ("workload", "params", "strategy", "metric"),
    "scaling": ("workload", "kind", "strategy", "metric", "partitions"),
    "steps": ("workload", "strategy", "step", "metric"),
    # One row per scenario and metric (its mean over the steps): the units the report's
    # bootstrap intervals and paired comparisons resample. Small: scenarios × metrics rows.
    "scenarios": ("workload", "params", "strategy", "seed", "replicate", "metric"),
}
#: Every grouped column, in order of first appearance (the order ``grouping_id`` must follow).
_GROUP_COLUMNS = tuple(dict.fromkeys(c for columns in AGGREGATES.values() for c in columns))
#: Workloads with fewer steps than this are left out of ``steps`` (nothing to chart).
MIN_CHARTED_STEPS = 5


def _grouping_id(columns: tuple[str, ...]) -> int:
    """Spark's ``grouping_id()`` for a grouping set: bit set for every column *not* grouped."""
    width = len(_GROUP_COLUMNS)
    return sum(1 << (width - 1 - i) for i, c in enumerate(_GROUP_COLUMNS) if c not in columns)


def aggregate_sql() -> str:
    cases = " ".join(
        f"WHEN {_grouping_id(columns)} THEN '{name}'" for name, columns in AGGREGATES.items()
    )
    sets = ", ".join(f"({', '.join(columns)})" for columns in AGGREGATES.values())
    group = ", ".join(_GROUP_COLUMNS)
    return f"""
        SELECT CASE grouping_id({group}) {cases} END AS aggregate, {group},
               count(value) AS n, avg(value) AS mean,
               percentile(value, 0.5) AS p50, percentile(value, 0.95) AS p95,
               min(value) AS min, max(value) AS max,
               max(members) AS case_members, max(partitions) AS case_partitions
        FROM results WHERE metric <> '{ERROR_METRIC}'
        GROUP BY GROUPING SETS ({sets})"""


ERRORS_SQL = f"""
    SELECT scenario_id, workload, params, strategy, replicate, seed, event AS error
    FROM results WHERE metric = '{ERROR_METRIC}'
    ORDER BY workload, strategy, params, replicate"""

_TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    "summary": (*AGGREGATES["summary"], "n", "mean", "p50", "p95", "min", "max"),
    "cases": (*AGGREGATES["cases"], "n", "mean", "max", "case_members", "case_partitions"),
    "scaling": (*AGGREGATES["scaling"], "n", "mean", "p50"),
    "steps": (*AGGREGATES["steps"], "n", "mean"),
    "scenarios": (*AGGREGATES["scenarios"], "n", "mean", "case_partitions"),
}


def split_aggregates(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The combined query's rows as one list per table, with that table's columns, sorted."""
    tables: dict[str, list[dict[str, Any]]] = {name: [] for name in AGGREGATES}
    for row in rows:
        name = row["aggregate"]
        tables[name].append({c: _plain(row[c]) for c in _TABLE_COLUMNS[name]})
    longest: dict[str, int] = {}
    for row in tables["steps"]:
        longest[row["workload"]] = max(longest.get(row["workload"], 0), int(row["step"]))
    tables["steps"] = [r for r in tables["steps"] if longest[r["workload"]] >= MIN_CHARTED_STEPS]
    for name, columns in AGGREGATES.items():
        tables[name].sort(key=lambda r, cols=columns: tuple(str(r[c]) for c in cols))  # type: ignore[misc]
    return tables


def _plain(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):  # NaN → None, so JSON stays valid
        return None
    return value


def aggregate(spark: SparkSession, raw: str, target: str) -> dict[str, list[dict[str, Any]]]:
    """The tables of the raw rows at ``raw`` (Parquet), also written to ``target`` partitioned by
    ``aggregate``; ``errors`` lists the failed scenarios."""
    spark.read.parquet(raw).createOrReplaceTempView("results")
    try:
        combined = spark.sql(aggregate_sql()).cache()  # written, then collected: computed once
        combined.coalesce(1).write.mode("overwrite").partitionBy("aggregate").parquet(target)
        tables = split_aggregates(row.asDict() for row in combined.collect())
        combined.unpersist()
        tables["errors"] = [
            {k: _plain(v) for k, v in row.asDict().items()}
            for row in spark.sql(ERRORS_SQL).collect()
        ]
    finally:
        spark.catalog.dropTempView("results")
    return tables

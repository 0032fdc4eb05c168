"""Running scenarios on Spark: three interchangeable engines, one task per bucket of scenarios of
even estimated cost, raw rows written once as Parquet, then aggregated."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from attrs import Factory, frozen

from coordkit.lab import LabError
from coordkit_lab.runner import (
    RESULT_FIELDS,
    RESULT_SCHEMA,
    ResultRow,
    deal,
    paired_groups,
    rows_to_columns,
    run_group,
    scenario_spec,
)
from coordkit_lab.scenarios import SCENARIO_SCHEMA, ScenarioSpec
from coordkit_lab.spark.aggregation import aggregate
from coordkit_lab.spark.executors import wait_for_executors
from coordkit_lab.spark.progress import Incidents, TaskProgress
from coordkit_lab.spark.session import is_local_master
from coordkit_lab.spark.workers import WorkerSetupError, probe_workers, worker_failure

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ENGINES = ("rdd", "pandas", "arrow")
#: The engine ``coordkit lab run`` uses. The three are within the noise of each other (the
#: simulation, not moving rows, is the work); ``rdd`` had the best time in most rounds of
#: ``python tests/benchmarks/run.py lab --only=engines``, ``pandas`` in none.
DEFAULT_ENGINE = "rdd"

#: Tasks per executor core: enough for an even spread and a smooth progress bar, few enough that
#: per-task overhead stays small.
TASKS_PER_CORE = 4
#: The fewest tasks a run on a cluster is split into (fewer only with fewer scenarios): executors
#: that register after the task count was chosen (YARN, Kubernetes, dynamic allocation) still
#: find work, and pending tasks are what makes dynamic allocation ask for executors.
CLUSTER_MIN_TASKS = 64


# -- the engines (module-level so executors import them by reference) ---------------------------


def _run_bucket(bucket: Sequence[Sequence[Any]]) -> Iterator[ResultRow]:
    # A bucket holds whole paired groups (see ``deal``): each runs together.
    for group in paired_groups([scenario_spec(spec) for spec in bucket]):
        yield from run_group(group)


def _arrow_schema() -> Any:
    import pyarrow as pa

    types = {"string": pa.string(), "bigint": pa.int64(), "int": pa.int32(), "double": pa.float64()}
    return pa.schema([(name, types[kind]) for name, kind in RESULT_FIELDS])


_SCENARIO_COLUMNS = tuple(part.split()[0] for part in SCENARIO_SCHEMA.split(", "))


def _spec_rows(columns: Mapping[str, list[Any]]) -> Iterator[tuple[Any, ...]]:
    yield from zip(*(columns[name] for name in _SCENARIO_COLUMNS), strict=True)


def _run_pandas(batches: Iterator[Any]) -> Iterator[Any]:
    import pandas as pd

    for batch in batches:
        rows = list(_run_bucket(list(_spec_rows({c: batch[c].tolist() for c in batch.columns}))))
        yield pd.DataFrame(rows_to_columns(rows))


def _run_arrow(batches: Iterator[Any]) -> Iterator[Any]:
    import pyarrow as pa

    schema = _arrow_schema()
    for batch in batches:
        rows = list(_run_bucket(list(_spec_rows(batch.to_pydict()))))
        yield pa.RecordBatch.from_pydict(rows_to_columns(rows), schema=schema)


def task_count(spark: SparkSession, scenarios: int) -> int:
    """How many tasks to split ``scenarios`` into: :data:`TASKS_PER_CORE` per core Spark reports,
    and on a cluster at least :data:`CLUSTER_MIN_TASKS` (or one per scenario when fewer)."""
    sc = spark.sparkContext
    count = sc.defaultParallelism * TASKS_PER_CORE
    if not is_local_master(sc.master):
        count = max(count, min(scenarios, CLUSTER_MIN_TASKS))
    return max(1, count)


def task_buckets(
    spark: SparkSession, specs: Sequence[ScenarioSpec], tasks: int | None
) -> list[list[tuple[Any, ...]]]:
    """The scenarios dealt into tasks of even estimated cost, as plain tuples."""
    count = tasks or task_count(spark, len(specs))
    return [[s.as_tuple() for s in bucket] for bucket in deal(specs, count)]


def scenario_frame(spark: SparkSession, buckets: Sequence[Sequence[tuple[Any, ...]]]) -> DataFrame:
    """The scenarios as a DataFrame, partition ``i`` holding exactly task ``i``'s scenarios.

    ``spark.range`` makes one row per partition; a broadcast join attaches each task's scenarios
    without a shuffle. Everything stays in the JVM until the engine's Python function runs.
    """
    from pyspark.sql.functions import broadcast

    rows = [(i, *spec) for i, bucket in enumerate(buckets) for spec in bucket]
    scenarios = spark.createDataFrame(rows, f"bucket int, {SCENARIO_SCHEMA}")
    tasks = spark.range(len(buckets), numPartitions=len(buckets)).selectExpr(
        "CAST(id AS INT) AS bucket"
    )
    return tasks.join(broadcast(scenarios), "bucket")


def results_frame(
    spark: SparkSession,
    specs: Sequence[ScenarioSpec],
    *,
    engine: str = DEFAULT_ENGINE,
    tasks: int | None = None,
) -> DataFrame:
    """The (lazy) DataFrame of result rows for ``specs``, computed by ``engine``.

    ``rdd`` parallelizes the task lists and maps each partition; ``pandas`` and ``arrow`` map the
    scenario DataFrame (:func:`scenario_frame`) with ``mapInPandas`` / ``mapInArrow``.
    """
    if engine not in ENGINES:
        raise LabError(f"unknown engine {engine!r}; available: {', '.join(ENGINES)}")
    buckets = task_buckets(spark, specs, tasks)
    if engine == "rdd":
        rdd = spark.sparkContext.parallelize(buckets, len(buckets)).mapPartitions(
            lambda part: (row for bucket in part for row in _run_bucket(bucket))
        )
        return spark.createDataFrame(rdd, RESULT_SCHEMA, verifySchema=False)
    frame = scenario_frame(spark, buckets)
    if engine == "pandas":
        return frame.mapInPandas(_run_pandas, RESULT_SCHEMA)
    return frame.mapInArrow(_run_arrow, RESULT_SCHEMA)


@frozen
class SparkRun:
    """What a Spark run produced: the aggregated tables (as plain rows), where Parquet went, how
    many tasks ran the scenarios and what Spark recovered from on the way."""

    tables: dict[str, list[dict[str, Any]]]
    parquet: str
    run_seconds: float
    aggregate_seconds: float
    tasks: int = 0
    incidents: Incidents = Factory(Incidents)


#: Applications (and engines) whose executors' Python the probe has already checked.
_PROBED: set[tuple[str, str]] = set()


def prepare_executors(
    spark: SparkSession, *, engine: str = DEFAULT_ENGINE, on_phase: Callable[[str], None] | None
) -> None:
    """Before the task count is chosen: wait (bounded) for a cluster's executors to register,
    then check once per application that their Python can run the lab
    (:func:`~coordkit_lab.spark.workers.probe_workers`), unless they run this very interpreter
    (a local master's default)."""
    registered = wait_for_executors(spark, on_phase=on_phase)
    sc = spark.sparkContext
    if is_local_master(sc.master) and os.path.abspath(sc.pythonExec) == sys.executable:
        return  # the workers are this very interpreter: nothing to check
    key = (sc.applicationId, engine)
    if key not in _PROBED:
        if on_phase is not None:
            waiting = not registered and not is_local_master(sc.master)
            # With no executor yet the probe waits for one, as any job would: say so.
            on_phase(
                "waiting for executors: none registered yet (spark.log says what the cluster "
                "manager answers)"
                if waiting
                else "checking the executors' Python"
            )
        probe_workers(spark, engine=engine)
        _PROBED.add(key)


def execute(
    spark: SparkSession,
    specs: Sequence[ScenarioSpec],
    parquet: str,
    *,
    engine: str = DEFAULT_ENGINE,
    tasks: int | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    on_phase: Callable[[str], None] | None = None,
    on_incidents: Callable[[Incidents], None] | None = None,
) -> SparkRun:
    """Run ``specs``, write the raw rows to ``PARQUET/raw`` and the aggregated tables to
    ``PARQUET/aggregates`` (partitioned by ``aggregate``: summary, cases, scaling, steps).

    :raises WorkerSetupError: the executors' Python cannot run the lab (the message says what to
        install where).
    """
    if not specs:
        raise LabError("no scenarios to run")
    prepare_executors(spark, engine=engine, on_phase=on_phase)
    if on_phase is not None:
        on_phase(f"scenarios on {spark.sparkContext.master}")
    # Chosen after the wait; a task holds whole paired groups, so there are never more tasks.
    count = min(len(paired_groups(specs)), tasks or task_count(spark, len(specs)))
    results = results_frame(spark, specs, engine=engine, tasks=count)
    raw = f"{parquet.rstrip('/')}/raw"
    started = time.perf_counter()
    group = f"coordkit-lab-{os.getpid()}-{time.monotonic_ns()}"
    progress = TaskProgress(spark, group, on_progress, on_incidents=on_incidents)
    try:
        with progress:
            results.write.mode("overwrite").parquet(raw)
    except Exception as exc:
        message = worker_failure(exc, spark, engine=engine)
        if message is None:
            raise
        raise WorkerSetupError(message) from exc
    run_seconds = time.perf_counter() - started

    if on_phase is not None:
        on_phase("aggregating (Spark SQL)")
    started = time.perf_counter()
    tables = aggregate(spark, raw, f"{parquet.rstrip('/')}/aggregates")
    failed = len({e["scenario_id"] for e in tables["errors"]})
    tables["totals"] = [
        {
            "scenarios": len(specs),
            "rows": sum(int(r["n"]) for r in tables["summary"]) + len(tables["errors"]),
            "failed": failed,
        }
    ]
    return SparkRun(
        tables,
        parquet,
        run_seconds,
        time.perf_counter() - started,
        tasks=count,
        incidents=progress.incidents,
    )

"""Running scenarios on Apache Spark: session, execution, aggregation, Parquet.

The only module that imports pyspark, and only inside functions, so the rest of the lab (and
``coordkit lab list``) works without it. Without pyspark a run fails with
:class:`~coordkit.errors.MissingDependencyError` naming ``pip install coordkit[spark]``.

Execution: the scenarios are dealt into tasks of even estimated cost
(:func:`~coordkit_lab.runner.deal`), one Spark partition each, and every task runs
:func:`~coordkit_lab.runner.run_scenario` on its scenarios. Three interchangeable engines do it:
``rdd`` (``RDD.mapPartitions`` over the task lists, rows pickled back into a DataFrame),
``pandas`` and ``arrow`` (``mapInPandas`` / ``mapInArrow`` over the DataFrame of scenarios); the
benchmark ``python tests/benchmarks/run.py lab`` compares them and :data:`DEFAULT_ENGINE` is the
one that measured fastest most often. Raw rows are written once as Parquet, read back and
aggregated with Spark SQL (one ``GROUPING SETS`` query), so no scenario ever runs twice.

Clusters: locally (``local[*]``, the default) executors import coordkit from this Python
environment. For another master (``--master spark://host:7077``, ``yarn``, ``k8s://...``) the
coordkit packages are zipped on the fly and shipped with ``SparkContext.addPyFile``; the
executors still need coordkit's dependencies (``pip install 'coordkit[spark]'`` on every node, or
a packed environment through ``spark.archives``). Built-in plugins load on executors from the zip;
third-party plugins must be installed there. ``--out`` must then be a directory every node sees
(or give ``--parquet`` an ``hdfs://`` / ``s3a://`` URI): executors write the raw Parquet files.
Under ``spark-submit`` the session it prepared (master included) is used::

    coordkit lab package /tmp/coordkit.zip
    spark-submit --master spark://host:7077 --py-files /tmp/coordkit.zip \\
        "$(python -c 'import coordkit_lab.__main__ as m; print(m.__file__)')" run --preset full
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attrs import frozen

from coordkit.errors import CoordkitError, MissingDependencyError
from coordkit.lab import LabError
from coordkit_lab.runner import (
    ERROR_METRIC,
    RESULT_FIELDS,
    RESULT_SCHEMA,
    ResultRow,
    deal,
    rows_to_columns,
    run_scenario,
)
from coordkit_lab.scenarios import SCENARIO_SCHEMA, ScenarioSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ENGINES = ("rdd", "pandas", "arrow")
#: The engine ``coordkit lab run`` uses. The three are within the noise of each other (the
#: simulation, not moving rows, is the work); ``rdd`` had the best time in most rounds of
#: ``python tests/benchmarks/run.py lab --only=engines``, ``pandas`` in none.
DEFAULT_ENGINE = "rdd"
DEFAULT_MASTER = "local[*]"
INSTALL_HINT = "pip install coordkit[spark]"

#: Tasks per executor core: enough for an even spread and a smooth progress bar, few enough that
#: per-task overhead stays small.
TASKS_PER_CORE = 4

_QUIET_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
# Spark prints "Setting default log level" unless the shell logger is configured too.
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
"""


class SparkStartError(CoordkitError):
    """The Spark session could not be created (no Java, a bad master URL, ...)."""


def require_pyspark() -> Any:
    """Import pyspark or fail with the install command."""
    try:
        import pyspark
        import pyspark.sql
    except ImportError as exc:
        raise MissingDependencyError(
            f"the lab runs on Apache Spark, and pyspark is not installed: {INSTALL_HINT}"
        ) from exc
    return pyspark


def prepare_environment() -> None:
    """Defaults Spark needs on a single machine, unless the caller set them."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


def under_spark_submit() -> bool:
    """Whether this process was started by ``spark-submit`` (its JVM gateway is already up)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def is_local_master(master: str | None) -> bool:
    return master is None or master == "local" or master.startswith("local[")


@contextlib.contextmanager
def _jvm_output_to(log: Path | None) -> Iterator[None]:
    """Start the JVM with its stdout/stderr in ``log`` so its chatter never breaks the terminal."""
    if log is None:
        yield
        return
    log.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    try:
        with open(log, "ab") as target:
            os.dup2(target.fileno(), 1)
            os.dup2(target.fileno(), 2)
            yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


def code_packages() -> list[str]:
    """The import packages that make up coordkit: the core, the built-in plugins, the lab."""
    from coordkit.plugins import BUILTIN_PLUGINS

    return list(dict.fromkeys(["coordkit", *BUILTIN_PLUGINS.values(), "coordkit_lab"]))


def build_code_zip(target: Path) -> Path:
    """Zip coordkit's packages (as ``addPyFile`` / ``--py-files`` expect: packages at the root)."""
    import importlib

    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in code_packages():
            module = importlib.import_module(name)
            root = Path(module.__file__ or "").parent
            for path in sorted(root.rglob("*.py")):
                archive.write(path, Path(name) / path.relative_to(root))
    return target


def create_session(
    master: str | None = DEFAULT_MASTER,
    *,
    app_name: str = "coordkit-lab",
    log: Path | None = None,
    config: dict[str, str] | None = None,
) -> SparkSession:
    """A Spark session set up for the lab: quiet logs, no UI, few shuffle partitions.

    ``master=None`` keeps whatever master ``spark-submit`` configured. For a non-local master the
    coordkit packages are zipped and shipped to the executors.
    """
    require_pyspark()
    prepare_environment()
    from pyspark.sql import SparkSession

    log4j = Path(tempfile.gettempdir()) / "coordkit-lab-log4j2.properties"
    log4j.write_text(_QUIET_LOG4J)
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.python.worker.reuse": "true",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{log4j}",
        "spark.executor.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{log4j}",
        **(config or {}),
    }
    for key, value in settings.items():
        builder = builder.config(key, value)
    log_start = log.stat().st_size if log is not None and log.is_file() else 0
    try:
        with _jvm_output_to(log):
            spark = builder.getOrCreate()
    except Exception as exc:
        output = _jvm_output(log, log_start)
        raise SparkStartError(
            f"Spark did not start on master {master or '(spark-submit)'}: "
            + start_failure(exc, output)
            + (f" (the JVM's output: {log})" if log is not None else "")
        ) from exc
    spark.sparkContext.setLogLevel("ERROR")
    actual = spark.sparkContext.master
    if not is_local_master(actual):
        archive = build_code_zip(Path(tempfile.mkdtemp(prefix="coordkit-lab-")) / "coordkit.zip")
        spark.sparkContext.addPyFile(str(archive))
    return spark


#: What Spark's launcher prints when it refuses a setting: its exception, or an ``Error:`` line.
_REFUSAL = re.compile(r'(?:Exception in thread "main" |^Error: )(.+)')
#: What the shell prints when there is no ``java`` to run, and what an old Java throws.
_NO_JAVA = re.compile(r"java: (?:No such file or directory|not found|Permission denied)")
_OLD_JAVA = "UnsupportedClassVersionError"
JAVA_HINT = "Spark needs Java 17 or later (apt-get install openjdk-17-jre-headless)"


def _jvm_output(log: Path | None, start: int) -> list[str]:
    """The lines the JVM wrote to ``log`` from byte ``start`` on (this attempt's, not earlier
    runs'), tabs as spaces."""
    if log is None or not log.is_file():
        return []
    with open(log, "rb") as source:
        source.seek(start)
        text = source.read().decode(errors="replace")
    return [line.replace("\t", "    ").strip() for line in text.splitlines() if line.strip()]


def start_failure(exc: BaseException, output: Sequence[str]) -> str:
    """Why a Spark session did not start, in one line: what Spark refused (a master URL, a
    setting), or that there is no usable Java (then the line that says so), else the error."""
    java_lines = [line for line in output if _NO_JAVA.search(line)]
    if java_lines:
        return f"{JAVA_HINT}; {java_lines[0]}"
    lines = [*output, *str(exc).splitlines()]
    for line in lines:
        refused = _REFUSAL.search(line)
        if refused is not None:
            if _OLD_JAVA in line:
                return f"{JAVA_HINT}; {refused.group(1)}"
            return f"Spark refused it: {refused.group(1)}"
    # A Java exception in the py4j error text: ": org.apache.spark.SparkException: ..."
    for line in str(exc).splitlines():
        if line.startswith(": ") and "Exception" in line:
            return f"Spark refused it: {line[2:]}"
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), repr(exc))
    if "Java gateway" in first or "JAVA_GATEWAY" in first:
        return f"{first.rstrip('.')}. {JAVA_HINT}"
    return first


# -- the engines (module-level so executors import them by reference) ---------------------------


def _run_bucket(bucket: Sequence[Sequence[Any]]) -> Iterator[ResultRow]:
    for spec in bucket:
        yield from run_scenario(spec)


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


def task_buckets(
    spark: SparkSession, specs: Sequence[ScenarioSpec], tasks: int | None
) -> list[list[tuple[Any, ...]]]:
    """The scenarios dealt into tasks of even estimated cost, as plain tuples."""
    count = tasks or max(1, spark.sparkContext.defaultParallelism * TASKS_PER_CORE)
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


# -- progress --------------------------------------------------------------------------------------


class TaskProgress:
    """Polls Spark's status tracker on a thread and reports ``(done, total)`` tasks of a job group.

    Use as a context manager around the action that runs the job group.
    """

    def __init__(
        self,
        spark: SparkSession,
        group: str,
        on_update: Callable[[int, int], None],
        interval: float = 0.25,
    ):
        self._sc = spark.sparkContext
        self._group = group
        self._on_update = on_update
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="coordkit-lab-progress", daemon=True)
        self._seen: dict[int, tuple[int, int]] = {}

    def _poll(self) -> None:
        tracker = self._sc.statusTracker()
        for job in tracker.getJobIdsForGroup(self._group):
            info = tracker.getJobInfo(job)
            if info is None:
                continue
            for stage in info.stageIds:
                stage_info = tracker.getStageInfo(stage)
                if stage_info is not None:
                    self._seen[stage] = (stage_info.numCompletedTasks, stage_info.numTasks)
        if self._seen:
            done = sum(d for d, _ in self._seen.values())
            total = sum(t for _, t in self._seen.values())
            self._on_update(done, total)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            with contextlib.suppress(Exception):  # the context may be shutting down
                self._poll()

    def __enter__(self) -> TaskProgress:
        self._sc.setJobGroup(self._group, "coordkit lab scenarios")
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        with contextlib.suppress(Exception):
            self._poll()
        self._sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]


# -- aggregation -------------------------------------------------------------------------------------


#: The aggregated tables: name → the columns they group by. One Spark SQL query computes all of
#: them at once (``GROUPING SETS``), so the aggregation costs two Spark jobs, not two per table.
AGGREGATES: dict[str, tuple[str, ...]] = {
    "summary": ("workload", "kind", "strategy", "metric"),
    "cases": ("workload", "params", "strategy", "metric"),
    "scaling": ("workload", "kind", "strategy", "metric", "partitions"),
    "steps": ("workload", "strategy", "step", "metric"),
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


@frozen
class SparkRun:
    """What a Spark run produced: the aggregated tables (as plain rows) and where Parquet went."""

    tables: dict[str, list[dict[str, Any]]]
    parquet: str
    run_seconds: float
    aggregate_seconds: float


def _plain(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):  # NaN → None, so JSON stays valid
        return None
    return value


def execute(
    spark: SparkSession,
    specs: Sequence[ScenarioSpec],
    parquet: str,
    *,
    engine: str = DEFAULT_ENGINE,
    tasks: int | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> SparkRun:
    """Run ``specs``, write the raw rows to ``PARQUET/raw`` and the aggregated tables to
    ``PARQUET/aggregates`` (partitioned by ``aggregate``: summary, cases, scaling, steps)."""
    if not specs:
        raise LabError("no scenarios to run")
    results = results_frame(spark, specs, engine=engine, tasks=tasks)
    raw = f"{parquet.rstrip('/')}/raw"
    started = time.perf_counter()
    group = f"coordkit-lab-{os.getpid()}-{time.monotonic_ns()}"
    if on_progress is None:
        results.write.mode("overwrite").parquet(raw)
    else:
        with TaskProgress(spark, group, on_progress):
            results.write.mode("overwrite").parquet(raw)
    run_seconds = time.perf_counter() - started

    if on_phase is not None:
        on_phase("aggregating (Spark SQL)")
    started = time.perf_counter()
    spark.read.parquet(raw).createOrReplaceTempView("results")
    try:
        combined = spark.sql(aggregate_sql()).cache()  # written, then collected: computed once
        combined.coalesce(1).write.mode("overwrite").partitionBy("aggregate").parquet(
            f"{parquet.rstrip('/')}/aggregates"
        )
        tables = split_aggregates(row.asDict() for row in combined.collect())
        combined.unpersist()
        tables["errors"] = [
            {k: _plain(v) for k, v in row.asDict().items()}
            for row in spark.sql(ERRORS_SQL).collect()
        ]
    finally:
        spark.catalog.dropTempView("results")
    failed = len({e["scenario_id"] for e in tables["errors"]})
    tables["totals"] = [
        {
            "scenarios": len(specs),
            "rows": sum(int(r["n"]) for r in tables["summary"]) + len(tables["errors"]),
            "failed": failed,
        }
    ]
    return SparkRun(tables, parquet, run_seconds, time.perf_counter() - started)


def spark_version(spark: SparkSession) -> str:
    return str(spark.version)

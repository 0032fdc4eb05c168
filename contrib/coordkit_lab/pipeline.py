"""A whole lab run: scenarios → Spark → Parquet → report. The command line and the tests call this."""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attrs import frozen

from coordkit_lab.analysis import ReportData
from coordkit_lab.report import build_report_data, metric_info, write_report
from coordkit_lab.scenarios import ScenarioSpec
from coordkit_lab.study import Study, write_study

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from coordkit.plugins import PluginManager
    from coordkit_lab.spark import Incidents


@frozen
class LabResult:
    data: ReportData
    page: Path
    parquet: str

    @property
    def failed(self) -> int:
        totals = self.data["tables"].get("totals") or [{}]
        return int(totals[0].get("failed") or 0)


def only_metrics(tables: Mapping[str, Any], metrics: Collection[str]) -> dict[str, Any]:
    """``tables`` without the rows of other metrics (rows without a metric are kept)."""
    return {
        name: [row for row in rows if "metric" not in row or row["metric"] in metrics]
        for name, rows in tables.items()
    }


def run_lab(
    specs: Sequence[ScenarioSpec],
    out: Path,
    *,
    spark: SparkSession | None = None,
    master: str | None = None,
    parquet: str | None = None,
    engine: str | None = None,
    tasks: int | None = None,
    run_info: dict[str, Any] | None = None,
    manager: PluginManager | None = None,
    study: Study | None = None,
    on_started: Callable[[SparkSession], None] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    on_phase: Callable[[str], None] | None = None,
    on_incidents: Callable[[Incidents], None] | None = None,
) -> LabResult:
    """Run ``specs`` on ``spark`` (or a new session on ``master``, stopped at the end) and write
    the report into ``out``.

    With ``study`` (the study ``specs`` came from) the report shows only the study's metrics, and
    the effective study is written beside it (``OUT/study.json``); without, a ``study.json`` an
    earlier run left in ``out`` is removed.
    """
    from coordkit.plugins import get_plugin_manager
    from coordkit_lab import spark as lab_spark

    manager = manager or get_plugin_manager()
    started_at = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    started = time.perf_counter()
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    own_session = spark is None
    if spark is None:
        spark = lab_spark.create_session(
            None
            if master is None and lab_spark.under_spark_submit()
            else master or lab_spark.DEFAULT_MASTER,
            log=out / "spark.log",
        )
    try:
        if on_started is not None:
            on_started(spark)
        target = parquet or out.as_uri()
        result = lab_spark.execute(
            spark,
            specs,
            target,
            engine=engine or lab_spark.DEFAULT_ENGINE,
            tasks=tasks,
            on_progress=on_progress,
            on_phase=on_phase,
            on_incidents=on_incidents,
        )
        info = {
            **(run_info or {}),
            "scenarios": len(specs),
            "strategies": sorted({s.strategy for s in specs}),
            "workloads": sorted({s.workload for s in specs}),
            "master": spark.sparkContext.master,
            "parallelism": spark.sparkContext.defaultParallelism,
            "tasks": result.tasks,
            "executors_lost": result.incidents.executors_lost,
            "tasks_retried": result.incidents.tasks_retried,
            "engine": engine or lab_spark.DEFAULT_ENGINE,
            "spark_version": lab_spark.spark_version(spark),
            "started": started_at.isoformat(),
            "run_seconds": round(result.run_seconds, 3),
            "aggregate_seconds": round(result.aggregate_seconds, 3),
            "parquet": target,
        }
    finally:
        if own_session:
            spark.stop()
    if on_phase is not None:
        on_phase("writing the report")
    info["wall_seconds"] = round(time.perf_counter() - started, 3)
    shown = None if study is None else set(study.metrics)
    metrics = [r.value for r in manager.metrics if shown is None or r.name in shown]
    tables = result.tables if shown is None else only_metrics(result.tables, shown)
    data = build_report_data(info, metric_info(metrics), tables)
    page = write_report(data, out)
    write_study(study, out)
    return LabResult(data, page, target)

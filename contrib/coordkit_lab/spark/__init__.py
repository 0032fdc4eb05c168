"""Running scenarios on Apache Spark: session, execution, progress, aggregation, Parquet.

The only package that imports pyspark, and only inside functions, so the rest of the lab (and
``coordkit lab list``) works without it. Without pyspark a run fails with
:class:`~coordkit.errors.MissingDependencyError` naming ``pip install coordkit[spark]``.

Execution: the scenarios are dealt into tasks of even estimated cost
(:func:`~coordkit_lab.runner.deal`), one Spark partition each, and every task runs
:func:`~coordkit_lab.runner.run_group` on each group of its scenarios (the strategies of one scenario,
timed together). Three interchangeable engines do it:
``rdd`` (``RDD.mapPartitions`` over the task lists, rows pickled back into a DataFrame),
``pandas`` and ``arrow`` (``mapInPandas`` / ``mapInArrow`` over the DataFrame of scenarios); the
benchmark ``python tests/benchmarks/run.py lab`` compares them and :data:`DEFAULT_ENGINE` is the
one that measured fastest most often. Raw rows are written once as Parquet, read back and
aggregated with Spark SQL (one ``GROUPING SETS`` query), so no scenario ever runs twice.

Clusters: locally (``local[*]``, the default) executors import coordkit from this Python
environment. For another master (``--master spark://host:7077``, ``yarn``, ``k8s://...``) the
coordkit packages are zipped on the fly and shipped with ``SparkContext.addPyFile``; the
workers need the same Spark and Python (minor) versions as the driver and coordkit's
dependencies, not coordkit itself (:mod:`~coordkit_lab.spark.workers` checks it with a probe job
right after start-up and says what to install where). ``--out`` must then be a directory every
node sees (or give ``--parquet`` an ``hdfs://`` / ``s3a://`` URI): executors write the raw
Parquet files. Under ``spark-submit`` the session it prepared (master included) is used::

    coordkit lab package /tmp/coordkit.zip
    spark-submit --master spark://host:7077 --py-files /tmp/coordkit.zip \\
        "$(python -c 'import coordkit_lab.__main__ as m; print(m.__file__)')" run --preset full
"""

from coordkit_lab.spark.aggregation import AGGREGATES, aggregate, aggregate_sql, split_aggregates
from coordkit_lab.spark.execution import (
    CLUSTER_MIN_TASKS,
    DEFAULT_ENGINE,
    ENGINES,
    TASKS_PER_CORE,
    SparkRun,
    execute,
    prepare_executors,
    results_frame,
    task_buckets,
    task_count,
)
from coordkit_lab.spark.executors import ExecutorState, executors, wait_for_executors
from coordkit_lab.spark.progress import Incidents, TaskProgress
from coordkit_lab.spark.session import (
    DEFAULT_MASTER,
    INSTALL_HINT,
    SparkStartError,
    build_code_zip,
    code_packages,
    create_session,
    is_local_master,
    prepare_environment,
    require_pyspark,
    spark_version,
    start_failure,
    under_spark_submit,
    worker_python,
)
from coordkit_lab.spark.workers import (
    WorkerPython,
    WorkerSetupError,
    probe_workers,
    worker_failure,
    worker_requirements,
)

__all__ = [
    "AGGREGATES",
    "CLUSTER_MIN_TASKS",
    "DEFAULT_ENGINE",
    "DEFAULT_MASTER",
    "ENGINES",
    "INSTALL_HINT",
    "TASKS_PER_CORE",
    "ExecutorState",
    "Incidents",
    "SparkRun",
    "SparkStartError",
    "TaskProgress",
    "WorkerPython",
    "WorkerSetupError",
    "aggregate",
    "aggregate_sql",
    "build_code_zip",
    "code_packages",
    "create_session",
    "execute",
    "executors",
    "is_local_master",
    "prepare_environment",
    "prepare_executors",
    "probe_workers",
    "require_pyspark",
    "results_frame",
    "spark_version",
    "split_aggregates",
    "start_failure",
    "task_buckets",
    "task_count",
    "under_spark_submit",
    "wait_for_executors",
    "worker_failure",
    "worker_python",
    "worker_requirements",
]

"""The lab: generates workloads and compares strategies side by side on Apache Spark.

Workload generators and metrics are plugins (``coordkit_register_workloads``,
``coordkit_register_metrics``); scenarios (workload × strategy × event sequence) run on Spark
executors and end in Parquet, an HTML report and a terminal table. pyspark is imported only when
a run starts (extra ``coordkit[spark]``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from coordkit import hookimpl


@hookimpl
def coordkit_register_commands(register: Callable[[Any], None]) -> None:
    from coordkit_lab.cli import lab

    register(lab)

"""The lab: generates workloads and compares strategies side by side on Apache Spark.

Workload generators and metrics are plugins (``coordkit_register_workloads``,
``coordkit_register_metrics``); scenarios (workload × strategy × event sequence) run on Spark
executors and end in Parquet, an HTML report and a terminal table. pyspark is imported only when
a run starts (extra ``coordkit[spark]``); listing what the lab offers needs only the core.

Modules (the workload / step / metric contract itself is :mod:`coordkit.lab`, in core):
:mod:`~coordkit_lab.events`, :mod:`~coordkit_lab.simulation` (assignment simulation and the
assignment workload base class), :mod:`~coordkit_lab.workloads` and :mod:`~coordkit_lab.metrics`
(the built-ins), :mod:`~coordkit_lab.groups` (consumer groups on the engine),
:mod:`~coordkit_lab.scenarios` (presets and expansion into scenarios),
:mod:`~coordkit_lab.runner` (one scenario → result rows), :mod:`~coordkit_lab.spark` and
:mod:`~coordkit_lab.local` (executing many), :mod:`~coordkit_lab.pipeline` (a whole run),
:mod:`~coordkit_lab.analysis` (verdicts, ranks, scaling), :mod:`~coordkit_lab.charts` and
:mod:`~coordkit_lab.report` (HTML, ``summary.json``, terminal), :mod:`~coordkit_lab.cli`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from coordkit import hookimpl


@hookimpl
def coordkit_register_commands(register: Callable[[Any], None]) -> None:
    from coordkit_lab.cli import lab

    register(lab)


@hookimpl
def coordkit_register_workloads(register: Callable[[Any], None]) -> None:
    from coordkit_lab.groups import CONSUMER_GROUPS
    from coordkit_lab.workloads import BUILTIN_WORKLOADS

    for workload in BUILTIN_WORKLOADS:
        register(workload)
    register(CONSUMER_GROUPS)


@hookimpl
def coordkit_register_metrics(register: Callable[[Any], None]) -> None:
    from coordkit_lab.groups import GROUP_METRICS
    from coordkit_lab.metrics import BUILTIN_METRICS

    for metric in (*BUILTIN_METRICS, *GROUP_METRICS):
        register(metric)

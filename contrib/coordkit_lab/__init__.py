"""The lab: generates workloads and compares strategies side by side on Apache Spark.

Workload generators and metrics are plugins (``coordkit_register_workloads``,
``coordkit_register_metrics``); scenarios (workload × strategy × event sequence) run on Spark
executors and end in Parquet, an HTML report and a terminal table. pyspark is imported only when
a run starts (extra ``coordkit[spark]``); listing what the lab offers needs only the core.

The workload / step / metric contract is :mod:`coordkit.lab`, in core; the workloads and metrics
live with the strategy family they exercise (``coordkit_assignors.lab``, ``coordkit_elections.lab``,
``coordkit_partitioners.lab``, ``coordkit_placements.lab``). This package is the machinery:
:mod:`~coordkit_lab.scenarios` (presets and expansion into scenarios),
:mod:`~coordkit_lab.runner` (one scenario → result rows), :mod:`~coordkit_lab.spark` and
:mod:`~coordkit_lab.local` (executing many), :mod:`~coordkit_lab.pipeline` (a whole run),
:mod:`~coordkit_lab.analysis` (verdicts with ties, from :mod:`~coordkit_lab.statistics`:
bootstrap intervals and paired comparisons, :mod:`~coordkit_lab.scaling`: growth exponents,
:mod:`~coordkit_lab.tradeoffs`: Pareto fronts; :mod:`~coordkit_lab.metricinfo` describes the
metrics), :mod:`~coordkit_lab.report` (``summary.json`` and the terminal; its shape checked in
:mod:`~coordkit_lab.schema`), :mod:`~coordkit_lab.page` and :mod:`~coordkit_lab.charts` (the
HTML page), :mod:`~coordkit_lab.study`
(the user's own cluster and study files), :mod:`~coordkit_lab.cli`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from coordkit import hookimpl


@hookimpl
def coordkit_register_commands(register: Callable[[Any], None]) -> None:
    from coordkit_lab.cli import lab

    register(lab)

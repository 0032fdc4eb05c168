"""The scenarios run in this one Python process, without Spark.

The same :func:`~coordkit_lab.runner.run_group` the executors run; the benchmarks use it to
measure what Spark costs and saves, and tests use it to check the Spark path against.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from attrs import frozen

from coordkit_lab.runner import ResultRow, paired_groups, run_group
from coordkit_lab.scenarios import ScenarioSpec


@frozen
class LocalRun:
    rows: list[ResultRow]
    seconds: float


def run_local(
    specs: Sequence[ScenarioSpec], *, on_done: Callable[[int], None] | None = None
) -> LocalRun:
    """Run every scenario, the strategies of each scenario together (as a Spark task does);
    ``on_done(n)`` after each group with the number of scenarios finished."""
    from coordkit.plugins import get_plugin_manager

    manager = get_plugin_manager()
    started = time.perf_counter()
    rows: list[ResultRow] = []
    done = 0
    for group in paired_groups(specs):
        rows.extend(run_group(group, manager))
        done += len(group)
        if on_done is not None:
            on_done(done)
    return LocalRun(rows, time.perf_counter() - started)

"""The scenarios run in this one Python process, without Spark.

The same :func:`~coordkit_lab.runner.run_scenario` the executors run; the benchmarks use it to
measure what Spark costs and saves, and tests use it to check the Spark path against.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from attrs import frozen

from coordkit_lab.runner import ResultRow, run_scenario
from coordkit_lab.scenarios import ScenarioSpec


@frozen
class LocalRun:
    rows: list[ResultRow]
    seconds: float


def run_local(
    specs: Sequence[ScenarioSpec], *, on_done: Callable[[int], None] | None = None
) -> LocalRun:
    """Run every scenario in order; ``on_done(n)`` after each with the number finished."""
    from coordkit.plugins import get_plugin_manager

    manager = get_plugin_manager()
    started = time.perf_counter()
    rows: list[ResultRow] = []
    for done, spec in enumerate(specs, start=1):
        rows.extend(run_scenario(spec, manager))
        if on_done is not None:
            on_done(done)
    return LocalRun(rows, time.perf_counter() - started)

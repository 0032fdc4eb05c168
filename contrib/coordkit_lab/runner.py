"""Scenarios → result rows, the same on a Spark executor and in a plain Python process.

The strategies meeting the same scenario (workload, parameters, seed) run together, in lockstep,
their timings measured interleaved (:func:`run_group`), so they compare under the same conditions.

Results are in long format, one row per (scenario, step, metric). A scenario that fails (a
strategy raising, a metric raising, inconsistent parameters) yields a single ``error`` row whose
``event`` holds the error, instead of partial results that would bias the means; the run goes on
and the report lists the failures.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from coordkit.lab import Metric, TimedStep
from coordkit.support.cputime import measure_interleaved
from coordkit_lab.scenarios import ScenarioSpec

if TYPE_CHECKING:
    from coordkit.plugins import PluginManager

#: The result columns and their Spark SQL types.
RESULT_FIELDS: tuple[tuple[str, str], ...] = (
    ("scenario_id", "string"),
    ("workload", "string"),
    ("kind", "string"),
    ("strategy", "string"),
    ("params", "string"),
    ("seed", "bigint"),
    ("replicate", "int"),
    ("step", "int"),
    ("event", "string"),
    ("event_kind", "string"),
    ("members", "int"),
    ("partitions", "bigint"),
    ("metric", "string"),
    ("value", "double"),
)
RESULT_COLUMNS: tuple[str, ...] = tuple(name for name, _ in RESULT_FIELDS)
RESULT_SCHEMA = ", ".join(f"{name} {kind}" for name, kind in RESULT_FIELDS)

#: The ``metric`` of the row a failed scenario leaves.
ERROR_METRIC = "error"

ResultRow = tuple[str, str, str, str, str, int, int, int, str, str, int, int, str, float]


def metrics_for(manager: PluginManager, kind: str) -> list[Metric]:
    """The registered metrics that apply to steps of ``kind``, in name order."""
    return [r.value for r in manager.metrics if kind in r.value.kinds]


#: A parameter value longer than this (a study's whole group as JSON) is shown in result rows by
#: its digest: every row repeats ``params``, and the report only needs to tell cases apart.
MAX_ROW_PARAM_CHARS = 200


def row_params(params: str) -> str:
    """``params`` as result rows carry it: long string values replaced by
    ``"sha256:<12 hex> (<N> chars)"``, which still tells different values apart."""
    if len(params) <= MAX_ROW_PARAM_CHARS:
        return params
    values = json.loads(params)
    for key, value in values.items():
        if isinstance(value, str) and len(value) > MAX_ROW_PARAM_CHARS:
            digest = hashlib.sha256(value.encode()).hexdigest()[:12]
            values[key] = f"sha256:{digest} ({len(value):,} chars)"
    return json.dumps(values, sort_keys=True, separators=(",", ":"))


def scenario_spec(value: ScenarioSpec | Sequence[Any]) -> ScenarioSpec:
    """A scenario given as a spec or as its row (what a Spark task receives)."""
    if isinstance(value, ScenarioSpec):
        return value
    return ScenarioSpec(*value)


class _ScenarioRun:
    """One scenario of a group being run: its steps one at a time, its rows, or its failure."""

    def __init__(self, spec: ScenarioSpec, manager: PluginManager):
        self.spec = spec
        self.head = (spec.scenario_id, spec.workload, spec.kind, spec.strategy)
        self.rows: list[ResultRow] = []
        self.failed = False
        self.where = "setting up"
        self.metrics: list[Metric] = []
        self.steps: Iterator[Any] = iter(())
        try:
            workload = manager.workload(spec.workload)
            self.metrics = metrics_for(manager, spec.kind)
            params = json.loads(spec.params)
            self.where = "simulating step 0"
            self.steps = iter(workload.simulate(params, spec.seed, spec.strategy, manager))
        except Exception as exc:
            self.fail(exc)

    def next_step(self) -> Any | None:
        """The next step, or ``None`` when the scenario ended (or failed)."""
        if self.failed:
            return None
        try:
            return next(self.steps, None)
        except Exception as exc:
            self.fail(exc)
            return None

    def record(self, step: Any) -> None:
        """Every metric's value on ``step``."""
        spec = self.spec
        try:
            self.where = f"step {step.index} ({step.event})"
            for metric in self.metrics:
                self.where = f"metric {metric.name!r} on step {step.index} ({step.event})"
                value = metric.compute(step)
                if value is None:
                    continue
                self.rows.append(
                    (
                        *self.head,
                        row_params(spec.params),
                        spec.seed,
                        spec.replicate,
                        step.index,
                        step.event,
                        step.event_kind,
                        step.members,
                        step.partitions,
                        metric.name,
                        float(value),
                    )
                )
            self.where = f"simulating step {step.index + 1}"
        except Exception as exc:
            self.fail(exc)

    def fail(self, exc: BaseException) -> None:
        """Replace the rows by the one ``error`` row (partial results would bias the means)."""
        spec = self.spec
        message = f"{self.where}: {type(exc).__name__}: {exc}"
        self.failed = True
        self.rows = [
            (
                *self.head,
                row_params(spec.params),
                spec.seed,
                spec.replicate,
                -1,
                message,
                ERROR_METRIC,
                0,
                0,
                ERROR_METRIC,
                math.nan,
            )
        ]


def run_group(
    scenarios: Sequence[ScenarioSpec | Sequence[Any]], manager: PluginManager | None = None
) -> list[ResultRow]:
    """Simulate the scenarios of one :func:`paired_groups` group (the strategies meeting the
    same workload, parameters and seed) in lockstep, and compute every applicable metric on
    every step.

    Step ``k`` of every strategy is simulated, then the costs of those steps that carry one
    (:class:`~coordkit.lab.TimedStep`) are measured together, their calls interleaved
    (:func:`coordkit.support.cputime.measure_interleaved`), so timings of different strategies are
    taken under the same conditions; then the metrics. A scenario that fails leaves its one
    ``error`` row and the others go on.
    """
    if manager is None:
        from coordkit.plugins import get_plugin_manager

        manager = get_plugin_manager()
    runs = [_ScenarioRun(scenario_spec(s), manager) for s in scenarios]
    active = [run for run in runs if not run.failed]
    while active:
        stepped = [(run, step) for run in active if (step := run.next_step()) is not None]
        timed = [i for i, (_, step) in enumerate(stepped) if isinstance(step, TimedStep)]
        if timed:
            try:
                seconds = measure_interleaved([stepped[i][1].timed_calls() for i in timed])
            except Exception as exc:
                for i in timed:
                    stepped[i][0].where = f"measuring step {stepped[i][1].index}"
                    stepped[i][0].fail(exc)
            else:
                for i, spent in zip(timed, seconds, strict=True):
                    stepped[i] = (stepped[i][0], stepped[i][1].with_seconds(spent))
        for run, step in stepped:
            if not run.failed:
                run.record(step)
        active = [run for run, _ in stepped if not run.failed]
    return [row for run in runs for row in run.rows]


def run_scenario(
    scenario: ScenarioSpec | Sequence[Any], manager: PluginManager | None = None
) -> list[ResultRow]:
    """Simulate one scenario and compute every applicable metric on every step (a group of one:
    its timings measured alone)."""
    return run_group([scenario], manager)


def run_scenarios(
    scenarios: Iterable[ScenarioSpec | Sequence[Any]], manager: PluginManager | None = None
) -> Iterator[ResultRow]:
    """Every scenario's rows, each :func:`paired_groups` group run together."""
    for group in paired_groups(list(map(scenario_spec, scenarios))):
        yield from run_group(group, manager)


def rows_to_columns(rows: Sequence[ResultRow]) -> dict[str, list[Any]]:
    """Column lists (for a pandas DataFrame or an Arrow record batch)."""
    columns: dict[str, list[Any]] = {name: [] for name in RESULT_COLUMNS}
    lists = list(columns.values())
    for row in rows:
        for target, value in zip(lists, row, strict=True):
            target.append(value)
    return columns


def paired_groups(specs: Sequence[ScenarioSpec]) -> list[list[ScenarioSpec]]:
    """The scenarios grouped by what every strategy meets alike (workload, parameters, seed).

    A group runs in one task, its strategies back to back, so their timings are taken under the
    same conditions (the other cores' load, the clock speed) and compare as a pair; the order
    rotates from group to group (by seed) so no strategy always goes first.
    """
    groups: dict[tuple[str, str, int], list[ScenarioSpec]] = {}
    for spec in specs:
        groups.setdefault((spec.workload, spec.params, spec.seed), []).append(spec)
    out = []
    for group in groups.values():
        group.sort(key=lambda s: s.strategy)
        turn = group[0].seed % len(group)
        out.append(group[turn:] + group[:turn])
    return out


def deal(specs: Sequence[ScenarioSpec], buckets: int) -> list[list[ScenarioSpec]]:
    """Spread scenarios over ``buckets`` tasks so their estimated costs are even (largest first,
    each to the least loaded bucket), keeping each :func:`paired_groups` group in one task."""
    import heapq

    groups = paired_groups(specs)
    count = max(1, min(buckets, len(groups)))
    heap: list[tuple[float, int]] = [(0.0, i) for i in range(count)]
    out: list[list[ScenarioSpec]] = [[] for _ in range(count)]
    costs = [sum(max(s.cost, 1e-9) for s in group) for group in groups]
    order = sorted(range(len(groups)), key=lambda g: (-costs[g], groups[g][0].scenario_id))
    for g in order:
        load, index = heapq.heappop(heap)
        out[index].extend(groups[g])
        heapq.heappush(heap, (load + costs[g], index))
    return [b for b in out if b]

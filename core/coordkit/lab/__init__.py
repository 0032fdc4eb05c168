"""The lab's plugin contract: what a workload, a step and a metric are.

It lives in core, free of Spark and pandas, so a strategy family's plugin registers its own lab
workloads and metrics without importing the lab (``contrib/coordkit_lab`` keeps the Spark runner,
the statistics and the report).

A **workload** (registered through ``coordkit_register_workloads``) turns parameters and a seed
into a sequence of **steps**, one per rebalance, election, ... it simulates with one strategy. A
**metric** (registered through ``coordkit_register_metrics``) turns one step into one number.
The runner, the report and the command line only use what is declared here, so a new kind of
workload (elections, consumer groups on the engine) brings its own step type and metrics and needs
no change anywhere else:

* ``workload.kind`` names the kind of step it yields (``"assignment"`` here);
* ``metric.kinds`` lists the kinds a metric understands; the runner asks only those metrics;
* ``workload.strategies(manager)`` lists the strategies the workload can be run with (for
  assignment workloads, the registered assignors) and ``simulate`` looks one up by name.

Parameters are JSON scalars (int, float, bool, str) so a scenario is a row of a DataFrame and its
parameters a JSON string; ``defaults`` lists every parameter a workload accepts.

A step that implements :class:`TimedStep` has its cost measured by the runner, interleaved with
the same step of the scenario's other strategies, so timings compare under the same conditions.

Optional workload attributes the lab uses when present: ``feasible(params) -> bool`` (presets skip
combinations that make no sense) and ``presets``: ``{preset name: {parameter: value or values}}``,
through which a plugin workload joins a built-in preset (``coordkit lab run --preset quick``)
without any change to the lab.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Generic, Literal, Protocol, TypeVar, runtime_checkable

import attrs

from coordkit.errors import CoordkitError

Param = int | float | bool | str
Params = Mapping[str, Param]


class LabError(CoordkitError, ValueError):
    """A lab run was asked for something inconsistent (unknown parameter, empty selection, ...)."""


@runtime_checkable
class Step(Protocol):
    """One simulated step: what every kind of step tells the runner.

    ``members`` and ``partitions`` give the step's scale (for elections: brokers and partitions).
    """

    @property
    def kind(self) -> str: ...

    @property
    def index(self) -> int: ...

    @property
    def event(self) -> str: ...

    @property
    def event_kind(self) -> str: ...

    @property
    def members(self) -> int: ...

    @property
    def partitions(self) -> int: ...


@runtime_checkable
class TimedStep(Protocol):
    """A step that carries a cost to measure (an assignor's calls): the runner measures it
    together with the same step of every other strategy of the scenario, interleaved (see
    :mod:`coordkit.support.cputime`), and puts the seconds back with :meth:`with_seconds`.

    A step used outside the runner measures itself alone when asked.
    """

    def timed_calls(self) -> tuple[Callable[[], object], ...]:
        """The calls whose CPU time is the step's cost (repeating one changes nothing else)."""
        ...

    def with_seconds(self, seconds: float) -> TimedStep:
        """This step with its measured cost."""
        ...


@runtime_checkable
class Workload(Protocol):
    """A reproducible workload generator.

    ``simulate(params, seed, strategy)`` must yield the same steps (apart from timings) for the
    same arguments, in any process: draw every random number from ``seed``.
    """

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def strategy_kind(self) -> str: ...

    @property
    def defaults(self) -> Params: ...

    def strategies(self, manager: Any) -> list[str]:
        """Names of the strategies this workload can run with, from ``manager`` (the
        :class:`coordkit.plugins.PluginManager`; typed ``Any`` here because the registry
        registers workloads: the contract cannot name it without an import cycle)."""
        ...

    def generate(self, params: Params, seed: int) -> Any:
        """The kind-specific instance (for assignment: initial group and events)."""
        ...

    def simulate(
        self, params: Params, seed: int, strategy: str, manager: Any = None
    ) -> Iterator[Step]:
        """Run ``strategy`` (looked up in ``manager``, default the process-wide one) through the
        generated instance, one step per event."""
        ...

    def cost(self, params: Params) -> float:
        """A rough relative cost, used to spread scenarios evenly over Spark tasks."""
        ...


@runtime_checkable
class Metric(Protocol):
    """A number computed from one step.

    :ivar better: ``"lower"`` or ``"higher"``: which way is better (the report highlights it).
    :ivar kinds: the step kinds it applies to.
    :ivar headline: the question it answers in the report's verdict ("Which balances best?"), or
        ``None`` for a metric shown only in the tables.

    Optional attributes the report reads when present: ``measured``, how a timing metric is
    measured (``"minimum thread CPU time of repeated calls"``): the report prints it and treats
    the metric as a noisy measurement rather than a deterministic count; ``tradeoff``, one of
    ``"balance"``, ``"movement"`` or ``"interruption"``: the report's Pareto view weighs the
    strategies over the metrics that declare one (and asks "which moves least?" only among the
    strategies that balance); ``scales_with``, ``"partitions"``: the report plots the metric
    against the steps' partition count and fits how it grows (a workload whose scenarios span a
    decade or more of partition counts).
    """

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def unit(self) -> str: ...

    @property
    def better(self) -> Literal["lower", "higher"]: ...

    @property
    def kinds(self) -> tuple[str, ...]: ...

    @property
    def headline(self) -> str | None: ...

    def compute(self, step: Any) -> float | None:
        """The value for ``step``, or ``None`` when the metric does not apply to it."""
        ...


S = TypeVar("S")

Tradeoff = Literal["balance", "movement", "interruption"]
#: What a metric may trade off against others (its optional ``tradeoff`` attribute).
TRADEOFFS: tuple[Tradeoff, ...] = ("balance", "movement", "interruption")

ScaleAxis = Literal["partitions"]
#: What a metric may be plotted against (its optional ``scales_with`` attribute): the step's
#: scale the lab's aggregation keeps per scenario.
SCALE_AXES: tuple[ScaleAxis, ...] = ("partitions",)


@attrs.frozen
class FunctionMetric(Generic[S]):
    """A :class:`Metric` given as a function of one step: what the built-in metrics and plugin
    metrics are made of.

    :param kinds: the step kinds it applies to.
    :param step_type: when given, steps of another type get ``None`` without calling
        ``function``.
    :param measured: for a timing metric, how it is measured (see :class:`Metric`).
    :param resolution: the smallest difference the measurement tells apart (see :class:`Metric`).
    :param tradeoff: the trade-off the metric measures, for the Pareto view (see :class:`Metric`).
    :param scales_with: what the report plots the metric against (see :class:`Metric`).
    """

    name: str
    description: str
    unit: str
    better: Literal["lower", "higher"]
    function: Callable[[S], float | None]
    headline: str | None = None
    kinds: tuple[str, ...] = attrs.field(default=(), kw_only=True)
    step_type: type[S] | None = attrs.field(default=None, kw_only=True)
    measured: str | None = attrs.field(default=None, kw_only=True)
    resolution: float | None = attrs.field(default=None, kw_only=True)
    tradeoff: Tradeoff | None = attrs.field(
        default=None,
        kw_only=True,
        validator=attrs.validators.optional(attrs.validators.in_(TRADEOFFS)),
    )
    scales_with: ScaleAxis | None = attrs.field(
        default=None,
        kw_only=True,
        validator=attrs.validators.optional(attrs.validators.in_(SCALE_AXES)),
    )

    def compute(self, step: Any) -> float | None:
        if self.step_type is not None and not isinstance(step, self.step_type):
            return None
        return self.function(step)


def resolve_params(workload: Workload, params: Mapping[str, Any]) -> dict[str, Param]:
    """``workload.defaults`` overridden by ``params``; unknown names and wrong types are errors."""
    defaults = workload.defaults
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise LabError(
            f"workload {workload.name!r} has no parameter {', '.join(map(repr, unknown))}; "
            f"its parameters: {', '.join(sorted(defaults))}"
        )
    resolved: dict[str, Param] = dict(defaults)
    for key, value in params.items():
        resolved[key] = coerce_param(workload.name, key, defaults[key], value)
    return resolved


def coerce_param(workload: str, key: str, default: Param, value: Any) -> Param:
    """``value`` converted to the type of ``default`` (strings from the command line included)."""
    where = f"workload {workload!r} parameter {key!r}"
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in {"true", "false", "1", "0", "yes", "no"}:
            return value.lower() in {"true", "1", "yes"}
        raise LabError(f"{where} must be true or false, got {value!r}")
    if isinstance(default, int):
        if isinstance(value, bool):
            raise LabError(f"{where} must be an integer, got {value!r}")
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise LabError(f"{where} must be an integer, got {value!r}") from None
        if number != float(value):
            raise LabError(f"{where} must be an integer, got {value!r}")
        return number
    if isinstance(default, float):
        try:
            return float(value)
        except (TypeError, ValueError):
            raise LabError(f"{where} must be a number, got {value!r}") from None
    return str(value)


def refuse_out_of_range(workload: str, checks: Iterable[tuple[str, Any, bool, str]]) -> None:
    """One :class:`LabError` naming every parameter out of its range: ``checks`` are (name,
    value, whether it is in range, the range as the user reads it)."""
    problems = [f"{name}={value} (needs {need})" for name, value, ok, need in checks if not ok]
    if problems:
        raise LabError(f"workload {workload!r}: " + ", ".join(problems))


def params_json(params: Params) -> str:
    """The canonical JSON text of a parameter set (sorted keys): part of every scenario's id."""
    return json.dumps(dict(params), sort_keys=True, separators=(",", ":"))

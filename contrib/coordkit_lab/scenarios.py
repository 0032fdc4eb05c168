"""Scenarios: workload × parameters × strategy × replicate, and the presets that list them.

A scenario's seed is derived from the run's seed, the workload, its parameters and the replicate
with SHA-256 (never Python's ``hash``, which changes between processes), and deliberately *not*
from the strategy: every strategy meets exactly the same generated group and events, so the
comparison is paired.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from attrs import field, frozen

from coordkit.errors import UnknownNameError
from coordkit.lab import LabError, Param, Workload, params_json, resolve_params

if TYPE_CHECKING:
    from coordkit.plugins import PluginManager

#: The seed of a run when none is given, so two runs without ``--seed`` compare like for like.
DEFAULT_SEED = 20240601


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from ``parts``: stable across processes, platforms and Python versions."""
    text = "\x1f".join(str(p) for p in parts)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> 1


@frozen
class ScenarioSpec:
    """One scenario: a row of the scenario DataFrame."""

    scenario_id: str
    workload: str
    kind: str
    strategy: str
    params: str  # canonical JSON
    seed: int
    replicate: int
    cost: float = 1.0

    def as_tuple(self) -> tuple[str, str, str, str, str, int, int, float]:
        return (
            self.scenario_id,
            self.workload,
            self.kind,
            self.strategy,
            self.params,
            self.seed,
            self.replicate,
            self.cost,
        )


#: Spark DDL of :meth:`ScenarioSpec.as_tuple`.
SCENARIO_SCHEMA = (
    "scenario_id string, workload string, kind string, strategy string, params string, "
    "seed long, replicate int, cost double"
)


def _grid(value: Mapping[str, Iterable[Param] | Param]) -> dict[str, tuple[Param, ...]]:
    out: dict[str, tuple[Param, ...]] = {}
    for key, values in value.items():
        if isinstance(values, str | int | float | bool):
            out[key] = (values,)
        else:
            out[key] = tuple(values)
    return out


@frozen
class PresetCase:
    """A workload with a grid of parameter values (every combination is run).

    :param replicates: seeds per combination; ``None`` takes the preset's. Deterministic workloads
        (``kafka-grid``) need only one.
    """

    workload: str
    grid: Mapping[str, tuple[Param, ...]] = field(factory=dict, converter=_grid)
    replicates: int | None = None

    def combinations(self) -> list[dict[str, Param]]:
        keys = sorted(self.grid)
        return [
            dict(zip(keys, values, strict=True))
            for values in itertools.product(*(self.grid[k] for k in keys))
        ]


def _cases(value: Iterable[PresetCase]) -> tuple[PresetCase, ...]:
    return tuple(value)


@frozen
class Preset:
    """A named set of workload grids; ``replicates`` is the default number of seeds per grid point."""

    name: str
    description: str
    cases: tuple[PresetCase, ...] = field(converter=_cases)
    replicates: int = 2


_QUICK_CASES = (
    PresetCase(
        "kafka-grid",
        {
            "members": (10, 100, 1000),
            "topics": (10, 100),
            "subscription": ("homogeneous", "heterogeneous"),
            "racks": (False, True),
        },
        replicates=1,
    ),
    PresetCase("single-partition-topics", replicates=1),
    PresetCase("zipf-load"),
    PresetCase("churn", {"members": 20, "steps": 20}),
    PresetCase("random-cluster"),
)

_GRID_CASES = (
    PresetCase(
        "kafka-grid",
        {
            "members": (100, 1000, 10000),
            "partitions_per_member": 10,
            "topics": (10, 100, 1000),
            "subscription": ("homogeneous", "heterogeneous"),
            "racks": (False, True),
        },
        replicates=1,
    ),
)

_CHURN_CASES = (
    PresetCase("churn", {"members": (10, 50, 200), "mix": ("members", "all"), "steps": 50}),
    PresetCase("random-cluster", {"members": (20, 100), "events": 20}),
    PresetCase("zipf-load", {"members": (10, 50), "exponent": (0.9, 1.2)}),
)

#: Partitions per topic of the elections preset's scaling case (ten topics: 1,000, 10,000 and
#: 50,000 partitions; the other case adds 100): wide enough for a growth exponent.
ELECTION_SCALING_PARTITIONS = (100, 1000, 5000)

_ELECTION_CASES = (
    PresetCase("broker-failures", {"brokers": (3, 6), "unclean": (False, True), "events": 12}),
    # Failover time against partition count: only controller failures (and restarts), so that
    # most events fail the controller over; few events, as a 50,000-partition scenario costs
    # about a minute on two cores.
    PresetCase(
        "broker-failures",
        {
            "brokers": 3,
            "topics": 10,
            "partitions": ELECTION_SCALING_PARTITIONS,
            "failures": "controller",
            "events": 4,
            "records": 10,
        },
    ),
)

_GROUP_CASES = (PresetCase("consumer-groups", {"consumers": 4, "static": (False, True)}),)

#: Real client processes on coordkit serve (and on Kafka for the @kafka rows): a scenario starts
#: half a dozen processes for about a minute (a crash waits out a session timeout), so few events.
_CLIENT_CASES = (PresetCase("real-clients", {"consumers": 3, "events": 4}),)

_PLACEMENT_CASES = (
    PresetCase(
        "broker-scaling",
        {"replication_factor": (2, 3), "sizes": ("lognormal", "zipf"), "changes": 8},
    ),
)

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "quick",
            "small JMH grid corners, ten one-partition topics, Zipf load, churn, a random "
            "cluster (the default; a couple of minutes on two cores)",
            _QUICK_CASES,
            replicates=3,
        ),
        Preset(
            "kafka-grid",
            "Kafka's JMH assignor grid: 100..10,000 members x 10 partitions each, 10..1,000 "
            "topics, homogeneous and heterogeneous, with and without racks",
            _GRID_CASES,
            replicates=1,
        ),
        Preset(
            "churn",
            "long event sequences: members joining, leaving, crashing; topics and partitions "
            "changing; random clusters; skewed load",
            _CHURN_CASES,
            replicates=3,
        ),
        Preset(
            "elections",
            "controller failover and partition leadership under broker crashes, session "
            "expiries, controlled shutdowns and restarts: kafka vs latch vs warm-standby, clean "
            "vs unclean, failover time against 100..50,000 partitions",
            _ELECTION_CASES,
            replicates=3,
        ),
        Preset(
            "groups",
            "consumer groups on an in-process cluster (joins, leaves, crashes, static restarts, "
            "coordinator crashes; eager versus cooperative) and producer partitioners' skew",
            _GROUP_CASES,
            replicates=2,
        ),
        Preset(
            "clients",
            "a consumer group of real client processes (kafka-python, aiokafka, "
            "confluent-kafka; their assignors and coordkit's; classic eager, cooperative and "
            "Kafka 4's consumer protocol with each server-side assignor) on coordkit serve, "
            "with Kafka 4.4 reference rows (@kafka), through joins, SIGKILLs and restarts: "
            "rebalance time, revocations, records delivered twice or lost, latency (not part "
            "of full)",
            _CLIENT_CASES,
            replicates=2,
        ),
        Preset(
            "placement",
            "replica placements while a racked cluster grows and shrinks (brokers added, "
            "removed, a rack lost), plans run on an in-process engine: broker skew, rack "
            "diversity, data moved, reassignment time (not part of full)",
            _PLACEMENT_CASES,
            replicates=3,
        ),
        Preset(
            "full",
            "everything: quick + kafka-grid + churn",
            (*_QUICK_CASES, *_GRID_CASES, *_CHURN_CASES),
            replicates=3,
        ),
    )
}


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise UnknownNameError("preset", name, list(PRESETS)) from None


def split_names(values: Iterable[str] | None) -> list[str] | None:
    """``["a,b", "c"]`` → ``["a", "b", "c"]`` (options may be repeated or comma separated)."""
    if values is None:
        return None
    names = [n.strip() for v in values for n in v.split(",") if n.strip()]
    return list(dict.fromkeys(names)) or None


def expand(
    preset: Preset,
    manager: PluginManager,
    *,
    seed: int = DEFAULT_SEED,
    strategies: Sequence[str] | None = None,
    workloads: Sequence[str] | None = None,
    replicates: int | None = None,
) -> list[ScenarioSpec]:
    """The preset's scenarios, narrowed to ``workloads`` and ``strategies``.

    Besides the preset's own cases, every registered workload whose optional ``presets`` mapping
    names this preset joins with the grid given there. A workload named in ``workloads`` that the
    preset does not list runs with its defaults. Parameter combinations a workload declares
    infeasible (``feasible(params)`` false) are skipped.
    """
    registry = manager.workloads
    cases = list(preset.cases)
    listed = {c.workload for c in cases}
    for registration in registry:
        # A plugin workload can join a preset itself: ``presets = {"quick": {param: values}}``.
        grid = getattr(registration.value, "presets", {}).get(preset.name)
        if grid is not None and registration.name not in listed:
            cases.append(PresetCase(registration.name, grid))
    if workloads:
        for name in workloads:
            if name not in registry:
                raise UnknownNameError("workload", name, registry.names())
        cases = [c for c in cases if c.workload in workloads]
        listed = {c.workload for c in cases}
        cases += [PresetCase(name) for name in workloads if name not in listed]
    known_strategies: set[str] = set()
    specs: list[ScenarioSpec] = []
    for case in cases:
        workload: Workload = registry.get(case.workload)
        available = workload.strategies(manager)
        known_strategies.update(available)
        chosen = [s for s in available if strategies is None or s in strategies]
        copies = replicates or case.replicates or preset.replicates
        feasible = getattr(workload, "feasible", None)
        for combination in case.combinations():
            params = resolve_params(workload, combination)
            if feasible is not None and not feasible(params):
                continue
            text = params_json(params)
            cost = float(workload.cost(params))
            for replicate in range(copies):
                scenario_seed = derive_seed(seed, workload.name, text, replicate)
                for strategy in chosen:
                    scenario_id = hashlib.sha256(
                        f"{workload.name}|{text}|{strategy}|{scenario_seed}".encode()
                    ).hexdigest()[:16]
                    specs.append(
                        ScenarioSpec(
                            scenario_id,
                            workload.name,
                            workload.kind,
                            strategy,
                            text,
                            scenario_seed,
                            replicate,
                            cost,
                        )
                    )
    if strategies:
        unknown = [s for s in strategies if s not in known_strategies]
        if unknown:
            raise UnknownNameError("strategy", unknown[0], sorted(known_strategies))
    if not specs:
        raise LabError(
            f"preset {preset.name!r} with workloads {list(workloads or [])} and strategies "
            f"{list(strategies or [])} selects no scenario"
        )
    return specs


def describe_selection(specs: Sequence[ScenarioSpec]) -> dict[str, Any]:
    """Counts for the run header: scenarios, workloads, strategies."""
    return {
        "scenarios": len(specs),
        "workloads": sorted({s.workload for s in specs}),
        "strategies": sorted({s.strategy for s in specs}),
    }

"""The ``broker-scaling`` workload: a cluster that grows and shrinks, rebalanced by each placement.

Generated from the seed (and the same for every strategy): the initial brokers and their racks
(broker ``b`` on rack ``rack{b % racks}``), partition sizes from a distribution, and a sequence of
changes: a broker added (on a random rack), a broker removed (decommissioned: its replicas move
away first, then it stops) and, once, a rack lost (every broker on it crashes). After each change
the operator runs the strategy's ``rebalance`` over the brokers that remain (what ``coordkit
reassign --generate`` then ``--execute`` do) and the plan is carried out.

A partition with no live replica left (every replica on a lost rack) cannot be moved: the
controller could never bring a new replica into its ISR. Such *stranded* partitions are left out
of every plan, as an operator must leave them, and counted.

With ``engine`` on (the default) each plan runs on an in-process cluster on a private memory store
(:mod:`coordkit_placements.lab.engine`), which gives the time the reassignment takes and the
partition-seconds without a live leader during the change; the placement figures (skew, racks,
replicas and data moved) come from the plans themselves, so they repeat exactly for a seed.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from coordkit.lab import LabError, Param, resolve_params
from coordkit.strategies.placement import (
    TP,
    ClusterLayout,
    ReplicaPlacement,
    brokers_from,
    moved_replicas,
)
from coordkit_placements.lab.cases import (
    ADD,
    LOSE_RACK,
    REMOVE,
    Assignment,
    ScalingCase,
    ScalingEvent,
    topic_name,
)

if TYPE_CHECKING:
    from coordkit.plugins import PluginManager
    from coordkit_placements.lab.engine import EngineRun

PLACEMENT_KIND = "placement"
WORKLOAD = "broker-scaling"
SIZE_DISTRIBUTIONS = ("lognormal", "zipf", "equal")


@attrs.frozen
class PlacementStep:
    """The cluster after one change (index 0: the initial placement).

    :param replicas_per_broker: replicas per live broker (sorted by id).
    :param leaders_per_broker: preferred leaders (first replicas) per live broker.
    :param single_rack: partitions with every replica on one rack (``None``: no racks, or a
        replication factor of 1).
    :param stranded: partitions with no live replica (left out of plans).
    :param reassignment_seconds: time the engine took to carry the plan out (``None`` without
        the engine).
    :param unavailable_seconds: partition-seconds without a live leader in the engine from the
        change until the reassignment completed (``None`` without the engine).
    """

    index: int
    event: str
    event_kind: str
    members: int
    partitions: int
    replicas_per_broker: tuple[int, ...]
    leaders_per_broker: tuple[int, ...]
    single_rack: int | None
    stranded: int
    replicas_moved: int
    gb_moved: float
    reassignment_seconds: float | None = None
    unavailable_seconds: float | None = None
    kind: str = PLACEMENT_KIND


# -- parameters ----------------------------------------------------------------------------------


def _int(params: Mapping[str, Any], key: str, minimum: int) -> int:
    value = params[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise LabError(
            f"workload {WORKLOAD!r} parameter {key!r} must be an integer >= {minimum}, "
            f"got {value!r}"
        )
    return value


def _positive(params: Mapping[str, Any], key: str, *, allow_zero: bool = False) -> float:
    value = params[key]
    ok = (
        not isinstance(value, bool)
        and isinstance(value, int | float)
        and math.isfinite(value)
        and (value >= 0 if allow_zero else value > 0)
    )
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise LabError(
            f"workload {WORKLOAD!r} parameter {key!r} must be a finite number {bound}, "
            f"got {value!r}"
        )
    return float(value)


def _sizes(params: Mapping[str, Any], names: Sequence[str], rng: random.Random) -> dict[TP, float]:
    """GB per partition: lognormal (mean ``size_gb``, σ of ln size ``size_sigma``), Zipf (rank
    ``k`` ∝ 1/k^``size_zipf``, ranks shuffled, scaled to mean ``size_gb``) or equal."""
    distribution = params["sizes"]
    if distribution not in SIZE_DISTRIBUTIONS:
        raise LabError(
            f"workload {WORKLOAD!r} parameter 'sizes' must be one of "
            f"{', '.join(SIZE_DISTRIBUTIONS)}, got {distribution!r}"
        )
    mean = _positive(params, "size_gb")
    sigma = _positive(params, "size_sigma", allow_zero=True)
    exponent = _positive(params, "size_zipf", allow_zero=True)
    tps = [(t, p) for t in names for p in range(int(params["partitions"]))]
    if distribution == "lognormal":
        mu = math.log(mean) - sigma * sigma / 2  # so the mean is ``mean``
        drawn = [rng.lognormvariate(mu, sigma) for _ in tps]
    elif distribution == "zipf":
        drawn = [1.0 / (k + 1) ** exponent for k in range(len(tps))]
        rng.shuffle(drawn)
        scale = mean * len(drawn) / sum(drawn)
        drawn = [d * scale for d in drawn]
    else:
        drawn = [mean] * len(tps)
    return {tp: round(size, 6) for tp, size in zip(tps, drawn, strict=True)}


def generate_case(params: Mapping[str, Any], seed: int) -> ScalingCase:
    """The brokers, sizes and changes of one run (see the module docstring)."""
    brokers = _int(params, "brokers", 1)
    racks = _int(params, "racks", 0)
    factor = _int(params, "replication_factor", 1)
    if factor > brokers:
        raise LabError(
            f"workload {WORKLOAD!r} parameter 'replication_factor' ({factor}) must not exceed "
            f"'brokers' ({brokers})"
        )
    if racks > brokers:
        raise LabError(
            f"workload {WORKLOAD!r} parameter 'racks' ({racks}) must not exceed 'brokers' "
            f"({brokers}): every rack starts with a broker"
        )
    topics = _int(params, "topics", 1)
    _int(params, "partitions", 1)
    changes = _int(params, "changes", 0)
    rack_loss = params["rack_loss"]
    if not isinstance(rack_loss, bool):
        raise LabError(
            f"workload {WORKLOAD!r} parameter 'rack_loss' must be true or false, got {rack_loss!r}"
        )
    rng = random.Random(seed)
    sizes = _sizes(params, [topic_name(t) for t in range(topics)], rng)
    rack_of: dict[int, str | None] = {
        b: (f"rack{b % racks}" if racks else None) for b in range(brokers)
    }
    live = set(range(brokers))
    rack_names = sorted({r for r in rack_of.values() if r is not None})
    lost_racks: set[str | None] = set()
    # Lose a rack at a drawn change (or at the first later one where enough brokers survive).
    loss_at = rng.randrange(changes) if rack_loss and racks >= 2 and changes else None
    events: list[ScalingEvent] = []
    for index in range(changes):
        live_racks = sorted({r for b in live if (r := rack_of[b]) is not None})
        losable = [
            r
            for r in live_racks
            if len(live_racks) >= 2 and sum(rack_of[b] != r for b in live) >= factor
        ]
        if loss_at is not None and index >= loss_at and losable:
            rack = rng.choice(losable)
            lost = tuple(sorted(b for b in live if rack_of[b] == rack))
            live -= set(lost)
            lost_racks.add(rack)
            events.append(ScalingEvent(LOSE_RACK, lost, rack))
            loss_at = None
            continue
        # A random walk between half and twice the initial size (never below the factor),
        # growing while a pending rack loss would leave too few brokers.
        grow = rng.random() < 0.5
        if len(live) <= max(factor, (brokers + 1) // 2) or (
            loss_at is not None and index >= loss_at
        ):
            grow = True
        elif len(live) >= 2 * brokers:
            grow = False
        if grow:
            new = max(rack_of) + 1
            # On any rack not lost, an emptied one included (its room is still there).
            rack_of[new] = rng.choice(sorted(set(rack_names) - lost_racks)) if racks else None
            live.add(new)
            events.append(ScalingEvent(ADD, (new,), rack_of[new]))
        else:
            victim = rng.choice(sorted(live))
            live.discard(victim)
            events.append(ScalingEvent(REMOVE, (victim,), rack_of[victim]))
    return ScalingCase(
        racks=rack_of,
        initial=tuple(range(brokers)),
        topics=topics,
        partitions=int(params["partitions"]),
        replication_factor=factor,
        sizes=sizes,
        events=tuple(events),
        placement_seed=rng.getrandbits(63),
        records=_int(params, "records", 0),
        max_moving=_int(params, "max_moving", 1),
    )


# -- the run -------------------------------------------------------------------------------------


def initial_assignment(case: ScalingCase, strategy: ReplicaPlacement) -> Assignment:
    rng = random.Random(case.placement_seed)
    brokers = brokers_from({b: case.racks[b] for b in case.initial})
    return {
        topic: {
            p: tuple(r)
            for p, r in strategy.place(
                brokers, case.partitions, case.replication_factor, rng=rng, topic=topic
            ).items()
        }
        for topic in case.topic_names()
    }


def checked_plan(
    strategy: ReplicaPlacement,
    layout: ClusterLayout,
    stranded: set[TP],
) -> dict[TP, tuple[int, ...]]:
    """The strategy's plan without the stranded partitions; a plan naming another broker, an
    unknown partition or a repeated broker is the strategy's fault and stops the run."""
    allowed = {b.id for b in layout.brokers}
    plan: dict[TP, tuple[int, ...]] = {}
    for tp, proposed in strategy.rebalance(layout).items():
        if tp in stranded:
            continue
        current = layout.assignment.get(tp[0], {}).get(tp[1])
        replicas = tuple(proposed)
        problem = (
            "is not a partition of the cluster"
            if current is None
            else "repeats a broker"
            if len(set(replicas)) != len(replicas)
            else f"changes the replication factor from {len(current)}"
            if len(replicas) != len(current)
            else f"names brokers outside {sorted(allowed)}"
            if not set(replicas) <= allowed
            else ""
        )
        if problem:
            raise LabError(
                f"placement {strategy.name!r} proposed {tp[0]}-{tp[1]} -> {list(replicas)}, "
                f"which {problem}"
            )
        if replicas != current:
            plan[tp] = replicas
    return plan


def observe(
    case: ScalingCase,
    assignment: Assignment,
    live: Sequence[int],
    index: int,
    event: str,
    event_kind: str,
    *,
    moved: int = 0,
    gb_moved: float = 0.0,
    timings: tuple[float | None, float | None] = (None, None),
) -> PlacementStep:
    replicas: Counter[int] = Counter()
    leaders: Counter[int] = Counter()
    alive = set(live)
    single_rack = 0
    stranded = 0
    for parts in assignment.values():
        for replica_list in parts.values():
            replicas.update(r for r in replica_list if r in alive)
            if replica_list[0] in alive:
                leaders[replica_list[0]] += 1
            if not alive.intersection(replica_list):
                stranded += 1
            if len({case.racks[r] for r in replica_list}) == 1:
                single_rack += 1
    has_racks = any(r is not None for r in case.racks.values())
    ordered = sorted(live)
    return PlacementStep(
        index=index,
        event=event,
        event_kind=event_kind,
        members=len(ordered),
        partitions=sum(len(parts) for parts in assignment.values()),
        replicas_per_broker=tuple(replicas[b] for b in ordered),
        leaders_per_broker=tuple(leaders[b] for b in ordered),
        single_rack=single_rack if has_racks and case.replication_factor > 1 else None,
        stranded=stranded,
        replicas_moved=moved,
        gb_moved=round(gb_moved, 6),
        reassignment_seconds=timings[0],
        unavailable_seconds=timings[1],
    )


def run_case(
    case: ScalingCase, strategy: ReplicaPlacement, engine: EngineRun | None = None
) -> Iterator[PlacementStep]:
    """One step per change; with ``engine``, each plan is also carried out on the engine."""
    assignment = initial_assignment(case, strategy)
    live = set(case.initial)
    if engine is not None:
        engine.start(case, assignment)
    yield observe(case, assignment, sorted(live), 0, "initial", "initial")
    for index, event in enumerate(case.events, start=1):
        started = engine.begin() if engine is not None else 0.0
        if event.kind == ADD:
            live.add(event.brokers[0])
            if engine is not None:
                engine.add_broker(event.brokers[0])
        elif event.kind == LOSE_RACK:
            live -= set(event.brokers)
            if engine is not None:
                engine.lose(event.brokers)
        targets = live - set(event.brokers) if event.kind == REMOVE else live
        layout = ClusterLayout(
            brokers=tuple(brokers_from({b: case.racks[b] for b in targets})),
            assignment=assignment,
            sizes=case.sizes,
        )
        stranded = {
            (t, p)
            for t, parts in assignment.items()
            for p, replicas in parts.items()
            if not live.intersection(replicas)
        }
        plan = checked_plan(strategy, layout, stranded)
        moved = moved_replicas(layout, plan)
        gb = sum(
            case.sizes[tp] * sum(1 for r in replicas if r not in assignment[tp[0]][tp[1]])
            for tp, replicas in plan.items()
        )
        seconds = engine.execute(plan) if engine is not None else None
        for (topic, partition), replicas in plan.items():
            assignment[topic][partition] = replicas
        if event.kind == REMOVE:
            live.discard(event.brokers[0])
            if engine is not None:
                engine.remove_broker(event.brokers[0])
        unavailable = engine.unavailable_since(started) if engine is not None else None
        yield observe(
            case,
            assignment,
            sorted(live),
            index,
            event.label(),
            event.kind,
            moved=moved,
            gb_moved=gb,
            timings=(seconds, unavailable),
        )


class BrokerScalingWorkload:
    """Registered as workload ``broker-scaling`` (kind ``placement``)."""

    name = WORKLOAD
    kind = PLACEMENT_KIND
    strategy_kind = "placement"
    description = (
        "a racked cluster grows and shrinks (brokers added, removed, a rack lost); after each "
        "change the placement's rebalance plan runs on an in-process engine; partition sizes "
        "from a distribution"
    )
    defaults: Mapping[str, Param] = {
        "brokers": 6,
        "racks": 3,
        "topics": 4,
        "partitions": 12,
        "replication_factor": 3,
        "changes": 6,
        "rack_loss": True,
        "sizes": "lognormal",
        "size_gb": 10.0,
        "size_sigma": 1.0,
        "size_zipf": 1.0,
        "records": 20,
        "max_moving": 50,
        "engine": True,
    }

    def strategies(self, manager: PluginManager) -> list[str]:
        return sorted(manager.placements.names())

    def feasible(self, params: Mapping[str, Any]) -> bool:
        return int(params["replication_factor"]) <= int(params["brokers"]) and int(
            params["racks"]
        ) <= int(params["brokers"])

    def cost(self, params: Mapping[str, Any]) -> float:
        changes = float(params["changes"]) + 1
        partitions = int(params["topics"]) * int(params["partitions"])
        per_change = 1 + partitions / 50 + (4.0 if params["engine"] else 0.0)
        return changes * per_change

    def generate(self, params: Mapping[str, Any], seed: int) -> ScalingCase:
        return generate_case(resolve_params(self, params), seed)

    def simulate(
        self,
        params: Mapping[str, Any],
        seed: int,
        strategy: str,
        manager: PluginManager | None = None,
    ) -> Iterator[PlacementStep]:
        if manager is None:
            from coordkit.plugins import get_plugin_manager

            manager = get_plugin_manager()
        resolved = resolve_params(self, params)
        case = generate_case(resolved, seed)
        placement = manager.placement(strategy)
        if not resolved["engine"]:
            return run_case(case, placement)
        return _with_engine(case, placement, seed)


def _with_engine(
    case: ScalingCase, placement: ReplicaPlacement, seed: int
) -> Iterator[PlacementStep]:
    from coordkit_placements.lab.engine import EngineRun

    engine = EngineRun(seed)
    try:
        yield from run_case(case, placement, engine)
    finally:
        engine.close()

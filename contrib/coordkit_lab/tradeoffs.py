"""Trade-offs: balance against movement against interruption, and who balances at all.

Metrics declare what they trade off (their ``tradeoff`` attribute: ``"balance"``,
``"movement"``, ``"interruption"``). Per workload, a strategy is **dominated** when another is at
least as good on every such metric and better on one (on the means); the strategies nobody
dominates form the **Pareto front**: each is a defensible choice, depending on what matters
more. A domination is **clear** when the dominating strategy is also better beyond the noise
(the paired interval, :mod:`coordkit_lab.statistics`) on at least one metric.

"Which moves fewest partitions?" is asked only among the strategies that **balance**: a strategy
that never moves anything because it never rebalances would win it otherwise (``zipf-load``:
``weighted-sticky`` moves nothing and leaves a 29-partition spread). A strategy balances when its
mean on the workload's first balance metric is within :data:`BALANCED_WITHIN` of the best's
(max - min counts: one partition, as in Kafka's definition of a balanced assignment) or within
:data:`BALANCED_WITHIN_RATIO` of it (ratios such as max / mean).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from attrs import frozen

from coordkit_lab.metricinfo import direction_of, ordered
from coordkit_lab.statistics import Sample, compare

#: The trade-offs, in the order the tables show them.
TRADEOFFS = ("balance", "movement", "interruption")
#: A count-balance metric (max - min) within this of the best mean balances.
BALANCED_WITHIN = 1.0
#: A ratio-balance metric (max / mean) within this fraction of the best mean balances.
BALANCED_WITHIN_RATIO = 0.05
#: Units of ratio metrics (compared relatively).
RATIO_UNITS = frozenset({"ratio", "max/mean", "fraction"})
#: The scatter chart's movement axis: this metric when present (raw moves reward not balancing),
#: else the first movement metric.
CHART_MOVEMENT = "moved_excess"

Means = Mapping[str, Mapping[str, float]]  # strategy → metric → mean


def dimensions(infos: Mapping[str, Mapping[str, Any]], present: Sequence[str]) -> list[str]:
    """The trade-off metrics among ``present``: balance first, then movement, interruption."""
    tagged = [m for m in present if infos.get(m, {}).get("tradeoff") in TRADEOFFS]
    return sorted(ordered(tagged), key=lambda m: TRADEOFFS.index(infos[m]["tradeoff"]))


def dominates(
    a: Mapping[str, float],
    b: Mapping[str, float],
    dims: Sequence[str],
    infos: Mapping[str, Mapping[str, Any]],
) -> bool:
    """``a`` at least as good as ``b`` on every dimension and better on one."""
    better = False
    for dim in dims:
        sign = direction_of(infos.get(dim, {}))
        gap = sign * (b[dim] - a[dim])  # > 0: a is better
        scale = max(abs(a[dim]), abs(b[dim]), 1.0)
        if gap < -1e-9 * scale:
            return False
        if gap > 1e-9 * scale:
            better = True
    return better


@frozen
class ParetoPoint:
    strategy: str
    values: dict[str, float]
    dominated_by: tuple[str, ...]
    clearly_dominated_by: tuple[str, ...]

    @property
    def front(self) -> bool:
        return not self.dominated_by


@frozen
class Pareto:
    workload: str
    dimensions: tuple[str, ...]
    points: tuple[ParetoPoint, ...]

    @property
    def front(self) -> list[str]:
        return [p.strategy for p in self.points if p.front]


def pareto(sample: Sample, means: Means, infos: Mapping[str, Mapping[str, Any]]) -> Pareto | None:
    """The Pareto front of ``sample``'s workload over its trade-off metrics (two or more, with a
    mean for every strategy), or ``None``."""
    strategies = sorted(means)
    present = [
        m
        for m in {m for s in strategies for m in means[s]}
        if all(m in means[s] for s in strategies)
    ]
    dims = dimensions(infos, present)
    if len(dims) < 2 or len(strategies) < 2:
        return None
    dominated: dict[str, list[str]] = {s: [] for s in strategies}
    for a in strategies:
        for b in strategies:
            if a != b and dominates(means[a], means[b], dims, infos):
                dominated[b].append(a)
    pairs = [(dim, b, a) for b, by in dominated.items() for a in by for dim in dims]
    clear = {(c.strategy, c.reference) for c in compare(sample, pairs, infos) if c.worse}
    points = tuple(
        ParetoPoint(
            s,
            {d: float(means[s][d]) for d in dims},
            tuple(dominated[s]),
            tuple(a for a in dominated[s] if (s, a) in clear),
        )
        for s in strategies
    )
    return Pareto(sample.workload, tuple(dims), points)


@frozen
class Gate:
    """The strategies that balance on a workload: ``metric``'s mean within ``within`` of the
    best (``relative``: a fraction of it), and those that do not."""

    metric: str
    within: float
    relative: bool
    balanced: tuple[str, ...]
    excluded: tuple[str, ...]

    def describe(self) -> str:
        bound = f"{self.within:.0%} of" if self.relative else f"{self.within:g} of"
        return f"{self.metric} within {bound} the best"


def balance_gate(means: Means, infos: Mapping[str, Mapping[str, Any]]) -> Gate | None:
    """Which strategies balance on the workload (see the module's doc), or ``None`` when it has
    no balance metric."""
    present = sorted({m for values in means.values() for m in values})
    balance = [m for m in dimensions(infos, present) if infos[m]["tradeoff"] == "balance"]
    if not balance:
        return None
    metric = balance[0]
    info = infos[metric]
    values = {s: v[metric] for s, v in means.items() if metric in v}
    sign = direction_of(info)
    best = min(sign * v for v in values.values()) * sign
    relative = str(info.get("unit")) in RATIO_UNITS
    within = BALANCED_WITHIN_RATIO if relative else BALANCED_WITHIN
    slack = abs(best) * within if relative else within
    ok = {s for s, v in values.items() if sign * (v - best) <= slack + 1e-9 * max(1.0, abs(best))}
    return Gate(
        metric,
        within,
        relative,
        tuple(sorted(ok)),
        tuple(sorted(set(means) - ok)),
    )

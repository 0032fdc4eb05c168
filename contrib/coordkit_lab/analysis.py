"""What a lab run says: best strategies per question, ranks, how time scales.

Works on the report data (``summary.json``: the aggregated tables as plain rows), so the HTML page,
the terminal and ``coordkit lab show`` all draw the same conclusions.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from attrs import frozen

ReportData = dict[str, Any]

#: Shown in the key table after the headline metrics, when present.
EXTRA_KEY_METRICS = ("moved_min", "rounds")
#: Reference values (bounds), shown but never highlighted as "best".
REFERENCE_METRICS = frozenset({"moved_min"})
#: The metric the scaling chart and exponent use.
SCALING_METRIC = "assign_ms"


@frozen
class Verdict:
    """The best strategies for one headline metric on one workload (several on a tie)."""

    workload: str
    metric: str
    question: str
    strategies: tuple[str, ...]
    value: float | None


def means(data: ReportData) -> dict[str, dict[str, dict[str, float]]]:
    """``workload → metric → strategy → mean``."""
    out: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for row in data["tables"].get("summary", []):
        if row["mean"] is not None:
            out[row["workload"]][row["metric"]][row["strategy"]] = float(row["mean"])
    return out


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def best_of(values: Mapping[str, float], better: str) -> tuple[tuple[str, ...], float | None]:
    if not values:
        return (), None
    pick = min if better == "lower" else max
    target = pick(values.values())
    return tuple(sorted(s for s, v in values.items() if close(v, target))), target


#: Column order of the built-in metrics (balance, movement, protocol cost, speed); metrics from
#: plugins follow in name order.
PREFERRED_ORDER = (
    "count_balance",
    "topic_balance",
    "load_balance",
    "moved",
    "moved_min",
    "moved_excess",
    "revoked",
    "orphaned",
    "rounds",
    "rack_locality",
    "unassigned",
    "assign_ms",
)


def ordered(names: Iterable[str]) -> list[str]:
    rank = {name: i for i, name in enumerate(PREFERRED_ORDER)}
    return sorted(names, key=lambda n: (rank.get(n, len(rank)), n))


def headline_metrics(data: ReportData) -> list[str]:
    return ordered(name for name, info in data["metrics"].items() if info.get("headline"))


def key_metrics(data: ReportData) -> list[str]:
    present = {row["metric"] for row in data["tables"].get("summary", [])}
    names = {m for m in headline_metrics(data) if m in present}
    return ordered(names | {m for m in EXTRA_KEY_METRICS if m in present})


def winners(values: Mapping[str, float], metric: str, data: ReportData) -> set[str]:
    """The strategies to highlight: the best, unless every one ties or the metric is a bound."""
    if metric in REFERENCE_METRICS or metric not in data["metrics"]:
        return set()
    best = set(best_of(values, data["metrics"][metric]["better"])[0])
    return best if len(best) < len(values) else set()


def verdicts(data: ReportData) -> list[Verdict]:
    """Per workload, then ``overall`` (best mean rank across workloads), per headline metric."""
    by_workload = means(data)
    out: list[Verdict] = []
    collected: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for workload in sorted(by_workload):
        for metric in headline_metrics(data):
            values = by_workload[workload].get(metric)
            if not values:
                continue
            info = data["metrics"][metric]
            best, value = best_of(values, info["better"])
            out.append(Verdict(workload, metric, info["headline"], best, value))
            for strategy, rank in ranks(values, info["better"]).items():
                collected[metric][strategy].append(rank)
    for metric in headline_metrics(data):
        if metric not in collected:
            continue
        mean_rank = {s: sum(r) / len(r) for s, r in collected[metric].items()}
        best, value = best_of(mean_rank, "lower")
        out.append(Verdict("overall", metric, data["metrics"][metric]["headline"], best, value))
    return out


def ranks(values: Mapping[str, float], better: str) -> dict[str, float]:
    """Rank 1 = best; ties share the mean of their ranks."""
    ordered = sorted(values.items(), key=lambda kv: kv[1] if better == "lower" else -kv[1])
    out: dict[str, float] = {}
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and close(ordered[j + 1][1], ordered[i][1]):
            j += 1
        for k in range(i, j + 1):
            out[ordered[k][0]] = (i + j) / 2 + 1
        i = j + 1
    return out


#: A workload shows scaling when its partition counts span at least this factor.
MIN_SCALING_SPAN = 10


@frozen
class Scaling:
    """How one strategy's assignment time grows with the partition count on one workload."""

    workload: str
    strategy: str
    smallest: int
    smallest_ms: float
    largest: int
    largest_ms: float
    exponent: float | None  # slope of log(time) against log(partitions)


def scaling_series(
    data: ReportData, metric: str = SCALING_METRIC
) -> dict[str, dict[str, list[tuple[int, float]]]]:
    """``workload → strategy → [(partitions, mean)]`` for workloads spanning a decade or more."""
    series: dict[str, dict[str, list[tuple[int, float]]]] = defaultdict(lambda: defaultdict(list))
    for row in data["tables"].get("scaling", []):
        if row["metric"] == metric and row["mean"] is not None and row["partitions"]:
            series[row["workload"]][row["strategy"]].append(
                (int(row["partitions"]), float(row["mean"]))
            )
    out = {}
    for workload, per_strategy in series.items():
        sizes = {p for points in per_strategy.values() for p, _ in points}
        if len(sizes) >= 3 and max(sizes) >= MIN_SCALING_SPAN * min(sizes):
            out[workload] = {s: sorted(points) for s, points in per_strategy.items()}
    # The widest span first: it says most about growth.
    return dict(
        sorted(
            out.items(),
            key=lambda item: (
                -max(p for pts in item[1].values() for p, _ in pts)
                / min(p for pts in item[1].values() for p, _ in pts)
            ),
        )
    )


def scaling(data: ReportData, metric: str = SCALING_METRIC) -> list[Scaling]:
    """Per scaling workload (widest span first) and strategy: smallest, largest, growth exponent.

    The exponent is fitted over the largest two decades, where fixed per-call costs no longer hide
    the growth.
    """
    out = []
    for workload, per_strategy in scaling_series(data, metric).items():
        for strategy in sorted(per_strategy):
            series = per_strategy[strategy]
            fitted = [(p, v) for p, v in series if p * 100 >= series[-1][0]]
            exponent = slope(fitted) if fitted[-1][0] >= 4 * fitted[0][0] else None
            out.append(
                Scaling(
                    workload,
                    strategy,
                    series[0][0],
                    series[0][1],
                    series[-1][0],
                    series[-1][1],
                    exponent,
                )
            )
    return out


def best_scaling(data: ReportData) -> tuple[Scaling, list[Scaling]] | None:
    """The slowest-growing strategy on the widest-spanning workload, and all of that workload's."""
    found = scaling(data)
    if not found:
        return None
    widest = [s for s in found if s.workload == found[0].workload and s.exponent is not None]
    if not widest:
        return None
    return min(widest, key=lambda s: s.exponent or 0.0), widest


def slope(series: Sequence[tuple[int, float]]) -> float | None:
    xs = [math.log(p) for p, v in series if p > 0 and v > 0]
    ys = [math.log(v) for p, v in series if p > 0 and v > 0]
    if len(xs) < 2 or max(xs) == min(xs):
        return None
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )


# -- formatting ----------------------------------------------------------------------------------


def fmt(value: float | None, unit: str = "") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if unit == "ms":
        return f"{value:.3g}" if value < 100 else f"{value:,.0f}"
    if unit in {"ratio", "fraction"}:
        return f"{value:.3f}"
    if float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:,.2f}"


def strategies(data: ReportData) -> list[str]:
    return sorted({row["strategy"] for row in data["tables"].get("summary", [])})

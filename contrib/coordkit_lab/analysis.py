"""What a lab run says: estimates with intervals, verdicts (ties included), scaling, trade-offs.

:func:`analyse` turns the aggregated tables into the ``analysis`` section of the report data
(``summary.json``), computed once when the run ends; the HTML page, the terminal and ``coordkit
lab show`` all read that section, so they draw the same conclusions from the same numbers. The
statistics live in :mod:`~coordkit_lab.statistics` (bootstrap, paired comparisons),
:mod:`~coordkit_lab.scaling` (growth exponents) and :mod:`~coordkit_lab.tradeoffs` (Pareto fronts,
who balances).

Verdicts: per workload and headline metric, the best strategy and every one not worse than it
(paired, with a margin for timings: a tie is a tie); movement questions only among the strategies
that balance. Overall: the strategies best or tied on the most workloads (win counts: stable when
the per-workload verdicts are).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
from attrs import frozen

from coordkit_lab.metricinfo import (
    REFERENCE_METRICS,
    TIMING_MARGIN,
    direction_of,
    ordered,
    scales_with,
)
from coordkit_lab.scaling import EXPONENT_MARGIN, ScalingResult, scaling
from coordkit_lab.statistics import (
    CONFIDENCE,
    MIN_MEASURED_UNITS,
    RESAMPLES,
    Comparison,
    Sample,
    UnitRow,
    estimates,
    rank,
    samples,
)
from coordkit_lab.tradeoffs import (
    BALANCED_WITHIN,
    BALANCED_WITHIN_RATIO,
    Gate,
    balance_gate,
    pareto,
)

ReportData = dict[str, Any]

#: Units whose values are printed to three significant digits (a time of 0.0004 s is not 0.00).
SHORT_TIME_UNITS = frozenset({"ms", "s", "seconds"})
#: Shown in the key table after the headline metrics, when present.
EXTRA_KEY_METRICS = ("moved_excess", "rounds")

__all__ = [
    "EXTRA_KEY_METRICS",
    "REFERENCE_METRICS",
    "ReportData",
    "Verdict",
    "analyse",
    "estimates_by",
    "fmt",
    "fmt_interval",
    "headline_metrics",
    "key_metrics",
    "means",
    "ordered",
    "strategies",
    "verdicts",
    "winners",
]


# -- computing the analysis ----------------------------------------------------------------------


def unit_rows(tables: Mapping[str, Any]) -> tuple[list[UnitRow], list[UnitRow], str]:
    """The per-scenario values (for estimates, and for scaling) and what a unit is.

    From the ``scenarios`` table (one row per scenario and metric) when the run has it; else (a
    report built by hand) each workload's mean is its only unit, and each partition count's mean
    is a unit for scaling: the same verdicts, with no interval.
    """
    if "scenarios" in tables:
        rows: list[UnitRow] = [
            (
                r["workload"],
                r["strategy"],
                r["metric"],
                f"{r['params']}\x1f{r['seed']}\x1f{r['replicate']}",
                int(r.get("case_partitions") or 0),
                r["mean"],
            )
            for r in tables["scenarios"]
            if r["mean"] is not None
        ]
        return rows, rows, "scenario"
    summary: list[UnitRow] = [
        (r["workload"], r["strategy"], r["metric"], "all", 0, r["mean"])
        for r in tables.get("summary", [])
        if r["mean"] is not None
    ]
    sizes: list[UnitRow] = [
        (
            r["workload"],
            r["strategy"],
            r["metric"],
            str(r["partitions"]),
            r["partitions"],
            r["mean"],
        )
        for r in tables.get("scaling", [])
        if r["mean"] is not None and r.get("partitions")
    ]
    return summary, sizes, "workload mean (no per-scenario data: no intervals)"


def analyse(
    tables: Mapping[str, Any], infos: Mapping[str, Mapping[str, Any]], run_seed: Any
) -> dict[str, Any]:
    """The ``analysis`` section of the report data (plain JSON values)."""
    rows, size_rows, unit = unit_rows(tables)
    rows = [r for r in rows if r[2] in infos]
    found = samples(rows, run_seed)
    out: dict[str, Any] = {
        "method": {
            "unit": unit,
            "confidence": CONFIDENCE,
            "resamples": RESAMPLES,
            "seed": run_seed if isinstance(run_seed, int) else 0,
            "timing_margin": TIMING_MARGIN,
            "min_timed_scenarios": MIN_MEASURED_UNITS,
            "exponent_margin": EXPONENT_MARGIN,
            "balanced_within": BALANCED_WITHIN,
            "balanced_within_ratio": BALANCED_WITHIN_RATIO,
        },
        "estimates": [],
        "comparisons": [],
        "verdicts": [],
        "overall": [],
        "scaling": [],
        "pareto": [],
    }
    headlines = [m for m in ordered(infos) if infos[m].get("headline")]
    for sample in found.values():
        _analyse_workload(sample, infos, headlines, out)
    out["overall"] = _overall(out["verdicts"], infos, headlines)
    for metric in ordered(m for m in infos if scales_with(m, infos[m]) == "partitions"):
        sized = [r for r in size_rows if r[2] == metric]
        for sample in samples(sized, run_seed).values():
            result = scaling(sample, infos, metric)
            if result is not None:
                out["scaling"].append(_scaling_json(result))
    # Widest span first (the verdict's scaling line); a workload's metrics in table order.
    out["scaling"].sort(key=lambda s: (-s["largest"] / max(1, s["smallest"]), s["workload"]))
    return out


def _analyse_workload(
    sample: Sample,
    infos: Mapping[str, Mapping[str, Any]],
    headlines: Sequence[str],
    out: dict[str, Any],
) -> None:
    found = estimates(sample)
    by_strategy: dict[str, dict[str, float]] = defaultdict(dict)
    for e in found:
        by_strategy[e.strategy][e.metric] = e.mean
    gate = balance_gate(by_strategy, infos)
    best: dict[str, set[str]] = {}
    for metric in sample.metrics:
        if metric in REFERENCE_METRICS:
            continue
        gated = gate if gate is not None and infos[metric].get("tradeoff") == "movement" else None
        candidates = [s for s in sorted(by_strategy) if metric in by_strategy[s]]
        if gated is not None:
            candidates = [s for s in candidates if s in gated.balanced]
        means_of = {s: by_strategy[s][metric] for s in candidates}
        ranking = rank(sample, metric, candidates, means_of, infos)
        if ranking is None:
            continue
        out["comparisons"] += [_comparison_json(c) for c in ranking.comparisons]
        everyone = {s for s in by_strategy if metric in by_strategy[s]}
        best[metric] = set(ranking.winners) if set(ranking.winners) != everyone else set()
        if metric in headlines:
            out["verdicts"].append(
                {
                    "workload": sample.workload,
                    "metric": metric,
                    "question": infos[metric]["headline"],
                    "best": ranking.best,
                    "strategies": list(ranking.winners),
                    "tied": ranking.tied,
                    "effect": None if ranking.effect is None else _comparison_json(ranking.effect),
                    "gate": None if gated is None else _gate_json(gated),
                }
            )
    out["estimates"] += [
        {
            "workload": e.workload,
            "strategy": e.strategy,
            "metric": e.metric,
            "n": e.n,
            "mean": e.mean,
            "low": e.low,
            "high": e.high,
            "best": e.strategy in best.get(e.metric, ()),
        }
        for e in found
    ]
    front = pareto(sample, by_strategy, infos)
    if front is not None:
        out["pareto"].append(
            {
                "workload": front.workload,
                "dimensions": list(front.dimensions),
                "points": [
                    {
                        "strategy": p.strategy,
                        "values": p.values,
                        "dominated_by": list(p.dominated_by),
                        "clearly_dominated_by": list(p.clearly_dominated_by),
                    }
                    for p in front.points
                ],
            }
        )


def _overall(
    found: Sequence[Mapping[str, Any]],
    infos: Mapping[str, Mapping[str, Any]],
    headlines: Sequence[str],
) -> list[dict[str, Any]]:
    """Per headline metric: the strategies best or tied on the most workloads."""
    out = []
    for metric in headlines:
        mine = [v for v in found if v["metric"] == metric]
        if not mine:
            continue
        wins: dict[str, int] = defaultdict(int)
        for verdict in mine:
            for strategy in verdict["strategies"]:
                wins[strategy] += 1
        most = max(wins.values())
        top = sorted(s for s, w in wins.items() if w == most)
        out.append(
            {
                "metric": metric,
                "question": infos[metric]["headline"],
                "strategies": top,
                "tied": len(top) > 1,
                "wins": dict(sorted(wins.items())),
                "workloads": len(mine),
            }
        )
    return out


def _comparison_json(c: Comparison) -> dict[str, Any]:
    return attrs.asdict(c)


def _gate_json(gate: Gate) -> dict[str, Any]:
    return {
        "metric": gate.metric,
        "within": gate.within,
        "relative": gate.relative,
        "balanced": list(gate.balanced),
        "excluded": list(gate.excluded),
    }


def _scaling_json(result: ScalingResult) -> dict[str, Any]:
    effect = None
    if result.effect is not None:
        strategy, difference, low, high = result.effect
        effect = {"strategy": strategy, "difference": difference, "low": low, "high": high}
    return {
        "workload": result.workload,
        "metric": result.metric,
        "smallest": min((p.partitions for g in result.growth for p in g.points), default=0),
        "fitted_from": result.fitted_from,
        "largest": result.largest,
        "best": result.best,
        "winners": list(result.winners),
        "effect": effect,
        "fastest": list(result.fastest),
        "growth": [
            {
                "strategy": g.strategy,
                "exponent": g.exponent,
                "low": g.low,
                "high": g.high,
                "points": [attrs.asdict(p) for p in g.points],
            }
            for g in result.growth
        ],
    }


# -- reading it back -----------------------------------------------------------------------------


@frozen
class Verdict:
    """The answer to one headline question on one workload (or ``overall``)."""

    workload: str
    metric: str
    question: str
    strategies: tuple[str, ...]
    tied: bool
    best: str | None = None
    effect: Mapping[str, Any] | None = None
    gate: Mapping[str, Any] | None = None
    wins: Mapping[str, int] | None = None
    workloads: int | None = None


def verdicts(data: ReportData) -> list[Verdict]:
    """Per workload (by name), then ``overall``, each in headline order."""
    analysis = data.get("analysis", {})
    rank = {m: i for i, m in enumerate(headline_metrics(data))}
    out = [
        Verdict(
            v["workload"],
            v["metric"],
            v["question"],
            tuple(v["strategies"]),
            v["tied"],
            v["best"],
            v["effect"],
            v["gate"],
        )
        for v in analysis.get("verdicts", [])
    ]
    out.sort(key=lambda v: (v.workload, rank.get(v.metric, len(rank))))
    out += [
        Verdict(
            "overall",
            v["metric"],
            v["question"],
            tuple(v["strategies"]),
            v["tied"],
            wins=v["wins"],
            workloads=v["workloads"],
        )
        for v in analysis.get("overall", [])
    ]
    return out


def estimates_by(data: ReportData) -> dict[str, dict[str, dict[str, dict[str, Any]]]]:
    """``workload → metric → strategy → estimate row`` (mean, low, high, n, best)."""
    out: dict[str, dict[str, dict[str, dict[str, Any]]]] = defaultdict(lambda: defaultdict(dict))
    for row in data.get("analysis", {}).get("estimates", []):
        out[row["workload"]][row["metric"]][row["strategy"]] = row
    return out


def means(data: ReportData) -> dict[str, dict[str, dict[str, float]]]:
    """``workload → metric → strategy → mean`` over scenarios (what the tables show)."""
    return {
        w: {m: {s: row["mean"] for s, row in per.items()} for m, per in metrics.items()}
        for w, metrics in estimates_by(data).items()
    }


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def winners(values: Mapping[str, float], metric: str, data: ReportData) -> set[str]:
    """Exact best of plain ``values`` (a detail table's cells): highlighted unless all tie."""
    if metric in REFERENCE_METRICS or metric not in data["metrics"] or not values:
        return set()
    sign = direction_of(data["metrics"][metric])
    target = min(sign * v for v in values.values())
    best = {s for s, v in values.items() if close(sign * v, target)}
    return best if len(best) < len(values) else set()


def headline_metrics(data: ReportData) -> list[str]:
    return ordered(name for name, info in data["metrics"].items() if info.get("headline"))


def present_metrics(data: ReportData) -> list[str]:
    """The metrics this run produced a value for, in table order."""
    return ordered({row["metric"] for row in data.get("analysis", {}).get("estimates", [])})


def key_metrics(data: ReportData) -> list[str]:
    present = set(present_metrics(data))
    names = {m for m in headline_metrics(data) if m in present}
    return ordered(names | {m for m in EXTRA_KEY_METRICS if m in present})


def strategies(data: ReportData) -> list[str]:
    return sorted({row["strategy"] for row in data.get("analysis", {}).get("estimates", [])})


# -- formatting ----------------------------------------------------------------------------------


def fmt(value: float | None, unit: str = "") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if unit in SHORT_TIME_UNITS:  # failovers in tenths of a millisecond; assignments in µs
        return f"{value:.3g}" if abs(value) < 100 else f"{value:,.0f}"
    if unit in {"ratio", "fraction"}:
        return f"{value:.3f}"
    if float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:,.2f}"


def fmt_halfwidth(low: float | None, high: float | None) -> str:
    """``±h``: half the interval's width (two significant digits), ``""`` for a point."""
    if low is None or high is None or not high > low:
        return ""
    half = (high - low) / 2
    return f"±{half:.2g}" if half < 100 else f"±{half:,.0f}"


def fmt_interval(low: float | None, high: float | None, unit: str = "") -> str:
    """``[low, high]``, ``""`` for a point."""
    if low is None or high is None or not high > low:
        return ""
    return f"[{fmt(low, unit)}, {fmt(high, unit)}]"


def fmt_relative(value: float | None, *, as_ratio: bool = False) -> str:
    """A relative difference: ``+35%``, or as a ratio (``×12``) for differences of 100% or more."""
    if value is None:
        return "-"
    if as_ratio:
        return f"×{1 + value:.3g}"
    return f"{value:+.0%}" if abs(value) >= 0.1 else f"{value:+.1%}"


def describe_effect(effect: Mapping[str, Any] | None, unit: str) -> str:
    """The winners' lead over the closest strategy found worse: ``"next: sticky +35% [+30%,
    +41%]"`` (relative to the best's mean, as a ratio ``×12 [×9.5, ×15]`` from 100% up; in the
    metric's unit where the best's mean is 0)."""
    if not effect:
        return ""
    if effect.get("relative") is not None:
        ratio = abs(effect["relative"]) >= 1
        shown = fmt_relative(effect["relative"], as_ratio=ratio)
        low, high = effect.get("relative_low"), effect.get("relative_high")
        interval = (
            ""
            if low is None or high is None or not high > low
            else f" [{fmt_relative(low, as_ratio=ratio)}, {fmt_relative(high, as_ratio=ratio)}]"
        )
    else:
        shown = ("+" if effect["difference"] >= 0 else "") + fmt(effect["difference"], unit)
        interval = fmt_interval(effect.get("difference_low"), effect.get("difference_high"), unit)
        interval = f" {interval}" if interval else ""
    return f"next: {effect['strategy']} {shown}{interval}"


def describe_gate(gate: Mapping[str, Any] | None) -> str:
    if not gate:
        return ""
    bound = f"{gate['within']:.0%} of" if gate["relative"] else f"+{gate['within']:g} of"
    text = f"among strategies that balance ({gate['metric']} within {bound} the best)"
    if gate["excluded"]:
        text += "; not balancing: " + ", ".join(gate["excluded"])
    return text

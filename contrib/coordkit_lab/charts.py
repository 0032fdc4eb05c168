"""The report's charts: matplotlib (Agg) figures returned as base64 PNG for ``data:`` URIs.

Legends sit outside the plotting area (never over a bar), step axes count whole steps, a
strategy keeps its colour in every chart, and means carry their 95% intervals as whiskers.
"""

from __future__ import annotations

import base64
import io
import math
import textwrap
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from coordkit.errors import MissingDependencyError
from coordkit_lab.analysis import ReportData, estimates_by, strategies
from coordkit_lab.metricinfo import scales_with
from coordkit_lab.tradeoffs import CHART_MOVEMENT

#: The per-step metrics charted for long event sequences.
STEP_METRICS = ("moved", "revoked")


def png(figure: Any) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    import matplotlib.pyplot as plt

    plt.close(figure)
    return base64.b64encode(buffer.getvalue()).decode()


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as exc:
        raise MissingDependencyError(
            "the lab report draws its charts with matplotlib: pip install coordkit[spark]"
        ) from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def colours(data: ReportData) -> dict[str, Any]:
    """One colour per strategy, the same in every chart."""
    plt = _pyplot()
    cycle = plt.get_cmap("tab10").colors
    return {s: cycle[i % len(cycle)] for i, s in enumerate(strategies(data))}


#: Room around a plotting area, in inches: tick and axis labels (left, bottom), one title line
#: (top), between two plots (gap).
_LEFT, _BOTTOM, _TOP, _GAP = 0.9, 0.62, 0.38, 0.95
#: Width of a character of a title (10 pt) and of a legend entry (8 pt), in inches.
_TITLE_CHAR, _LEGEND_CHAR = 0.072, 0.062


def _figure(
    plot_width: float,
    height: float,
    labels: Sequence[str],
    titles: Sequence[str],
) -> tuple[Any, list[Any]]:
    """A figure of ``len(titles)`` plots side by side, each ``plot_width`` inches wide with its
    (wrapped) title, and room on the right for a legend of ``labels``.

    Laid out by hand: matplotlib's layout engines (constrained, or ``bbox_inches="tight"``)
    render each figure twice, which doubled the report's chart time.
    """
    plt = _pyplot()
    wrapped = [textwrap.fill(t, max(20, int(plot_width / _TITLE_CHAR))) for t in titles]
    lines = max(t.count("\n") + 1 for t in wrapped)
    legend = 0.5 + _LEGEND_CHAR * max((len(label) for label in labels), default=0)
    columns = len(titles)
    width = _LEFT + columns * plot_width + (columns - 1) * _GAP + legend
    top = _TOP + 0.17 * (lines - 1)
    figure, axes = plt.subplots(1, columns, figsize=(width, height + top - _TOP), squeeze=False)
    full = height + top - _TOP
    figure.subplots_adjust(
        left=_LEFT / width,
        right=1 - legend / width,
        bottom=_BOTTOM / full,
        top=1 - top / full,
        wspace=_GAP / plot_width,
    )
    for axis, title in zip(axes[0], wrapped, strict=True):
        axis.set_title(title, fontsize=10)
    return figure, list(axes[0])


def _legend_outside(axis: Any, **options: Any) -> None:
    """The legend to the right of the plotting area, where it covers nothing."""
    axis.legend(
        fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, **options
    )


def _whiskers(rows: Sequence[Mapping[str, Any] | None]) -> list[list[float]]:
    """Asymmetric error bars (below, above) from estimate rows; 0 where there is no interval."""
    below, above = [], []
    for row in rows:
        if row is None or row["low"] is None or row["high"] is None:
            below.append(0.0)
            above.append(0.0)
        else:
            below.append(max(0.0, row["mean"] - row["low"]))
            above.append(max(0.0, row["high"] - row["mean"]))
    return [below, above]


def bar_chart(data: ReportData, metric: str) -> str | None:
    found = estimates_by(data)
    workloads = [w for w in sorted(found) if metric in found[w]]
    names = strategies(data)
    if not workloads:
        return None
    palette = colours(data)
    info = data["metrics"][metric]
    better = "lower" if info["better"] == "lower" else "higher"
    figure, (axis,) = _figure(
        max(5.0, 1.75 * len(workloads)),
        3.6,
        names,
        [f"{metric}: {info['description']} — {better} is better"],
    )
    width = 0.8 / max(1, len(names))
    for i, strategy in enumerate(names):
        xs = [w + (i - (len(names) - 1) / 2) * width for w in range(len(workloads))]
        rows = [found[w][metric].get(strategy) for w in workloads]
        ys = [math.nan if r is None else r["mean"] for r in rows]
        axis.bar(
            xs,
            ys,
            width,
            label=strategy,
            color=palette[strategy],
            yerr=_whiskers(rows),
            error_kw={"elinewidth": 0.9, "capsize": 2, "ecolor": "#333333"},
        )
    axis.set_xticks(range(len(workloads)), workloads)
    axis.set_ylabel(f"{metric} ({info['unit']})")
    if scales_with(metric, info):  # spans decades of cluster sizes
        axis.set_yscale("log")
    _legend_outside(axis)
    axis.grid(axis="y", alpha=0.3)
    return png(figure)


def scaling_charts(data: ReportData) -> list[tuple[str, str, str]]:
    """Per scaling entry (workload and metric): each strategy's mean per partition count with
    its interval, log-log, the fitted exponent in the legend. ``(workload, metric, png)``."""
    from matplotlib.ticker import NullFormatter

    charts = []
    palette = colours(data)
    for entry in data["analysis"]["scaling"]:
        metric = entry["metric"]
        info = data["metrics"][metric]
        labels = [
            g["strategy"] + ("" if g["exponent"] is None else " (^0.00)") for g in entry["growth"]
        ]
        figure, (axis,) = _figure(
            6.0,
            4.2,
            labels,
            [f"{entry['workload']}: {metric} against partitions, per strategy (log-log)"],
        )
        for growth in entry["growth"]:
            points = growth["points"]
            if not points:
                continue
            label = growth["strategy"]
            if growth["exponent"] is not None:
                label += f" (^{growth['exponent']:.2f})"
            axis.errorbar(
                [p["partitions"] for p in points],
                [p["mean"] for p in points],
                yerr=_whiskers(points),
                marker="o",
                capsize=2,
                label=label,
                color=palette.get(growth["strategy"]),
            )
        axis.set_xscale("log")
        axis.set_yscale("log")
        # Ticks at the partition counts measured, written out (not 4×10^0).
        sizes = sorted({p["partitions"] for g in entry["growth"] for p in g["points"]})
        axis.set_xticks(sizes, [f"{size:,}" for size in sizes])
        axis.xaxis.set_minor_formatter(NullFormatter())
        axis.set_xlabel("partitions")
        axis.set_ylabel(f"{metric} ({info['unit']}), mean")
        axis.grid(alpha=0.3, which="both")
        _legend_outside(axis)
        charts.append((entry["workload"], metric, png(figure)))
    return charts


def step_charts(data: ReportData) -> list[tuple[str, str]]:
    from matplotlib.ticker import MaxNLocator

    per: dict[str, dict[str, dict[str, list[tuple[int, float]]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list))
    )
    for row in data["tables"].get("steps", []):
        if row["metric"] in STEP_METRICS and row["mean"] is not None:
            per[row["workload"]][row["metric"]][row["strategy"]].append(
                (int(row["step"]), float(row["mean"]))
            )
    palette = colours(data) if per else {}
    charts = []
    for workload in sorted(per):
        metrics = [m for m in STEP_METRICS if m in per[workload]]
        names = sorted({s for m in metrics for s in per[workload][m]})
        titles = [f"{workload}: partitions {m} per step" for m in metrics]
        figure, axes = _figure(5.2, 3.6, names, titles)
        for axis, metric in zip(axes, metrics, strict=True):
            for strategy in sorted(per[workload][metric]):
                points = sorted(per[workload][metric][strategy])
                axis.plot(
                    [s for s, _ in points],
                    [v for _, v in points],
                    label=strategy,
                    linewidth=1.2,
                    color=palette.get(strategy),
                )
            axis.xaxis.set_major_locator(MaxNLocator(integer=True))
            axis.set_xlabel("step (event)")
            axis.set_ylabel(f"{metric} (mean over runs)")
            axis.grid(alpha=0.3)
        _legend_outside(axes[-1])
        charts.append((workload, png(figure)))
    return charts


def pareto_axes(front: Mapping[str, Any], data: ReportData) -> tuple[str, str] | None:
    """The scatter's axes: balance (else interruption) against movement
    (:data:`~coordkit_lab.tradeoffs.CHART_MOVEMENT` when present); ``None`` with one dimension."""
    dims = list(front["dimensions"])
    tradeoff = {d: data["metrics"][d].get("tradeoff") for d in dims}
    movement = [d for d in dims if tradeoff[d] == "movement"]
    if CHART_MOVEMENT in movement:
        movement.insert(0, CHART_MOVEMENT)
    x_choices = [d for d in dims if tradeoff[d] == "balance"] or [
        d for d in dims if tradeoff[d] != "movement"
    ]
    x = x_choices[0] if x_choices else dims[0]
    y_choices = [d for d in [*movement, *dims] if d != x]
    return (x, y_choices[0]) if y_choices else None


def pareto_charts(data: ReportData) -> list[tuple[str, str]]:
    """Per workload: balance against movement (:func:`pareto_axes`), one point per strategy with
    its intervals; filled points are on the Pareto front (over every trade-off metric), hollow
    ones dominated; a dashed line joins the front in order of the horizontal axis."""
    found = estimates_by(data)
    palette = colours(data)
    charts = []
    for front in data["analysis"]["pareto"]:
        chosen = pareto_axes(front, data)
        if chosen is None:
            continue
        x, y = chosen
        labels = [f"{p['strategy']} (dominated)" for p in front["points"]] + ["Pareto front"]
        figure, (axis,) = _figure(
            5.6, 4.4, labels, [f"{front['workload']}: {x} against {y} (filled: Pareto front)"]
        )
        rows = found.get(front["workload"], {})
        on_front = []
        for point in front["points"]:
            name = point["strategy"]
            px, py = point["values"][x], point["values"][y]
            colour = palette.get(name)
            dominated = bool(point["dominated_by"])
            axis.errorbar(
                [px],
                [py],
                xerr=_whiskers([rows.get(x, {}).get(name)]),
                yerr=_whiskers([rows.get(y, {}).get(name)]),
                fmt="none",
                ecolor=colour,
                elinewidth=0.9,
                capsize=2,
            )
            axis.scatter(
                [px],
                [py],
                s=70,
                facecolors="none" if dominated else [colour],
                edgecolors=[colour],
                linewidths=1.6,
                label=f"{name}{' (dominated)' if dominated else ''}",
                zorder=3,
            )
            if not dominated:
                on_front.append((px, py))
        # Strategies at the same spot share one label (sticky and uniform often coincide).
        spots: dict[tuple[float, float], list[str]] = defaultdict(list)
        for point in front["points"]:
            spots[(point["values"][x], point["values"][y])].append(point["strategy"])
        for (px, py), names in spots.items():
            axis.annotate(
                ", ".join(names),
                (px, py),
                textcoords="offset points",
                xytext=(6, 6),
                fontsize=7,
                color="#333333",
            )
        if len(on_front) > 1:
            on_front.sort()
            axis.plot(
                [p for p, _ in on_front],
                [q for _, q in on_front],
                color="#555555",
                linewidth=1,
                linestyle="--",
                zorder=2,
                label="Pareto front",
            )
        for name, info in ((x, data["metrics"][x]), (y, data["metrics"][y])):
            arrow = "lower" if info["better"] == "lower" else "higher"
            label = f"{name} ({info['unit']}, {arrow} is better)"
            (axis.set_xlabel if name == x else axis.set_ylabel)(label)
        axis.grid(alpha=0.3)
        _legend_outside(axis)
        charts.append((front["workload"], png(figure)))
    return charts

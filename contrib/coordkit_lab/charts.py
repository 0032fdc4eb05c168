"""The report's charts: matplotlib (Agg) figures returned as base64 PNG for ``data:`` URIs."""

from __future__ import annotations

import base64
import io
import math
from collections import defaultdict
from typing import Any

from coordkit.errors import MissingDependencyError
from coordkit_lab.analysis import SCALING_METRIC, ReportData, means, scaling_series, strategies

#: The per-step metrics charted for long event sequences.
STEP_METRICS = ("moved", "revoked")


def png(figure: Any) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
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


def bar_chart(data: ReportData, metric: str) -> str | None:
    by_workload = means(data)
    workloads = [w for w in sorted(by_workload) if metric in by_workload[w]]
    names = strategies(data)
    if not workloads:
        return None
    plt = _pyplot()
    info = data["metrics"][metric]
    figure, axis = plt.subplots(figsize=(max(6.0, 1.6 * len(workloads) + 2), 3.6))
    width = 0.8 / max(1, len(names))
    for i, strategy in enumerate(names):
        xs = [w + (i - (len(names) - 1) / 2) * width for w in range(len(workloads))]
        ys = [by_workload[w][metric].get(strategy, math.nan) for w in workloads]
        axis.bar(xs, ys, width, label=strategy)
    axis.set_xticks(range(len(workloads)), workloads)
    axis.set_ylabel(f"{metric} ({info['unit']})")
    better = "lower" if info["better"] == "lower" else "higher"
    axis.set_title(f"{metric}: {info['description']} — {better} is better", fontsize=10)
    if metric == SCALING_METRIC:
        axis.set_yscale("log")
    axis.legend(fontsize=8, ncol=min(4, len(names)))
    axis.grid(axis="y", alpha=0.3)
    return png(figure)


def scaling_charts(data: ReportData) -> list[tuple[str, str]]:
    charts = []
    for workload, per_strategy in scaling_series(data).items():
        plt = _pyplot()
        figure, axis = plt.subplots(figsize=(7.5, 4.2))
        for strategy in sorted(per_strategy):
            points = per_strategy[strategy]
            axis.plot([p for p, _ in points], [v for _, v in points], marker="o", label=strategy)
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("partitions")
        axis.set_ylabel("assignment time per rebalance (ms)")
        axis.set_title(f"{workload}: how each strategy scales (log-log)", fontsize=10)
        axis.grid(alpha=0.3, which="both")
        axis.legend(fontsize=8)
        charts.append((workload, png(figure)))
    return charts


def step_charts(data: ReportData) -> list[tuple[str, str]]:
    per: dict[str, dict[str, dict[str, list[tuple[int, float]]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list))
    )
    for row in data["tables"].get("steps", []):
        if row["metric"] in STEP_METRICS and row["mean"] is not None:
            per[row["workload"]][row["metric"]][row["strategy"]].append(
                (int(row["step"]), float(row["mean"]))
            )
    charts = []
    for workload in sorted(per):
        metrics = [m for m in STEP_METRICS if m in per[workload]]
        plt = _pyplot()
        figure, axes = plt.subplots(
            1, len(metrics), figsize=(6.2 * len(metrics), 3.6), squeeze=False
        )
        for axis, metric in zip(axes[0], metrics, strict=True):
            for strategy in sorted(per[workload][metric]):
                points = sorted(per[workload][metric][strategy])
                axis.plot(
                    [s for s, _ in points], [v for _, v in points], label=strategy, linewidth=1.2
                )
            axis.set_xlabel("step (event)")
            axis.set_ylabel(f"{metric} (mean over runs)")
            axis.set_title(f"{workload}: partitions {metric} per step", fontsize=10)
            axis.grid(alpha=0.3)
        axes[0][0].legend(fontsize=8)
        charts.append((workload, png(figure)))
    return charts

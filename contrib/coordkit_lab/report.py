"""The lab's report: ``summary.json``, a self-contained ``index.html`` and the terminal table.

Everything here works from the aggregated tables (plain rows, as Spark SQL produced them), so
``coordkit lab show DIR`` re-prints a past run from its ``summary.json`` without Spark. Charts are
matplotlib PNGs embedded as ``data:`` URIs: the page needs no network and no other file.

At a glance the page answers, per workload and overall: which strategy balances best, which moves
least, which revokes least, which is fastest (the metrics that declare a ``headline``), and how
each scales (assignment time against partition count, with a fitted growth exponent).
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from attrs import frozen
from rich.console import Console
from rich.table import Table

from coordkit.errors import MissingDependencyError
from coordkit_lab.protocols import LabError, Metric

SUMMARY_FILE = "summary.json"
INDEX_FILE = "index.html"
FORMAT_VERSION = 1

#: Shown in the key table after the headline metrics, when present.
EXTRA_KEY_METRICS = ("moved_min", "rounds")
#: Reference values (bounds), shown but never highlighted as "best".
REFERENCE_METRICS = frozenset({"moved_min"})
#: The metric the scaling chart and exponent use.
SCALING_METRIC = "assign_ms"
#: The per-step metrics charted for long event sequences.
STEP_METRICS = ("moved", "revoked")

Row = dict[str, Any]
ReportData = dict[str, Any]


def metric_info(metrics: Iterable[Metric]) -> dict[str, dict[str, Any]]:
    """What the report needs to know about each metric, in registration (name) order."""
    return {
        m.name: {
            "description": m.description,
            "unit": m.unit,
            "better": m.better,
            "headline": getattr(m, "headline", None),
            "kinds": list(m.kinds),
        }
        for m in metrics
    }


def build_report_data(
    run: Mapping[str, Any], metrics: Mapping[str, Mapping[str, Any]], tables: Mapping[str, Any]
) -> ReportData:
    return {
        "format": FORMAT_VERSION,
        "run": dict(run),
        "metrics": {k: dict(v) for k, v in metrics.items()},
        "tables": {k: list(v) for k, v in tables.items()},
    }


def load_report(directory: Path) -> ReportData:
    path = directory / SUMMARY_FILE
    if not path.is_file():
        raise LabError(
            f"{directory}: no {SUMMARY_FILE} here; `coordkit lab run --out {directory}` writes one"
        )
    try:
        data: ReportData = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise LabError(f"{path}: not a lab summary ({exc})") from None
    if not isinstance(data, dict) or "tables" not in data or "metrics" not in data:
        raise LabError(f"{path}: not a lab summary (no tables)")
    return data


# -- analysis ------------------------------------------------------------------------------------


@frozen
class Verdict:
    """The best strategies for one headline metric on one workload (several on a tie)."""

    workload: str
    metric: str
    question: str
    strategies: tuple[str, ...]
    value: float | None


def _means(data: ReportData) -> dict[str, dict[str, dict[str, float]]]:
    """``workload → metric → strategy → mean``."""
    out: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for row in data["tables"].get("summary", []):
        if row["mean"] is not None:
            out[row["workload"]][row["metric"]][row["strategy"]] = float(row["mean"])
    return out


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def best_of(values: Mapping[str, float], better: str) -> tuple[tuple[str, ...], float | None]:
    if not values:
        return (), None
    pick = min if better == "lower" else max
    target = pick(values.values())
    return tuple(sorted(s for s, v in values.items() if _close(v, target))), target


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


def _ordered(names: Iterable[str]) -> list[str]:
    rank = {name: i for i, name in enumerate(PREFERRED_ORDER)}
    return sorted(names, key=lambda n: (rank.get(n, len(rank)), n))


def headline_metrics(data: ReportData) -> list[str]:
    return _ordered(name for name, info in data["metrics"].items() if info.get("headline"))


def key_metrics(data: ReportData) -> list[str]:
    present = {row["metric"] for row in data["tables"].get("summary", [])}
    names = {m for m in headline_metrics(data) if m in present}
    return _ordered(names | {m for m in EXTRA_KEY_METRICS if m in present})


def winners(values: Mapping[str, float], metric: str, data: ReportData) -> set[str]:
    """The strategies to highlight: the best, unless every one ties or the metric is a bound."""
    if metric in REFERENCE_METRICS or metric not in data["metrics"]:
        return set()
    best = set(best_of(values, data["metrics"][metric]["better"])[0])
    return best if len(best) < len(values) else set()


def verdicts(data: ReportData) -> list[Verdict]:
    """Per workload, then ``overall`` (best mean rank across workloads), per headline metric."""
    means = _means(data)
    out: list[Verdict] = []
    ranks: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for workload in sorted(means):
        for metric in headline_metrics(data):
            values = means[workload].get(metric)
            if not values:
                continue
            info = data["metrics"][metric]
            winners, value = best_of(values, info["better"])
            out.append(Verdict(workload, metric, info["headline"], winners, value))
            for strategy, rank in _ranks(values, info["better"]).items():
                ranks[metric][strategy].append(rank)
    for metric in headline_metrics(data):
        if metric not in ranks:
            continue
        mean_rank = {s: sum(r) / len(r) for s, r in ranks[metric].items()}
        winners, value = best_of(mean_rank, "lower")
        out.append(Verdict("overall", metric, data["metrics"][metric]["headline"], winners, value))
    return out


def _ranks(values: Mapping[str, float], better: str) -> dict[str, float]:
    """Rank 1 = best; ties share the mean of their ranks."""
    ordered = sorted(values.items(), key=lambda kv: kv[1] if better == "lower" else -kv[1])
    ranks: dict[str, float] = {}
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and _close(ordered[j + 1][1], ordered[i][1]):
            j += 1
        for k in range(i, j + 1):
            ranks[ordered[k][0]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


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


def _scaling_series(
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
    for workload, per_strategy in _scaling_series(data, metric).items():
        for strategy in sorted(per_strategy):
            series = per_strategy[strategy]
            fitted = [(p, v) for p, v in series if p * 100 >= series[-1][0]]
            exponent = _slope(fitted) if fitted[-1][0] >= 4 * fitted[0][0] else None
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


def _slope(series: Sequence[tuple[int, float]]) -> float | None:
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


def _strategies(data: ReportData) -> list[str]:
    return sorted({row["strategy"] for row in data["tables"].get("summary", [])})


# -- terminal --------------------------------------------------------------------------------------


def key_table(data: ReportData) -> Table:
    """The key table: mean of each key metric per workload and strategy, best in bold green."""
    means = _means(data)
    columns = key_metrics(data)
    table = Table(title="coordkit lab: mean per rebalance (best per workload in bold green)")
    table.add_column("workload")
    table.add_column("strategy")
    for metric in columns:
        info = data["metrics"][metric]
        arrow = "↓" if info["better"] == "lower" else "↑"
        table.add_column(f"{metric}\n{info['unit']} {arrow}", justify="right")
    for workload in sorted(means):
        strategies = sorted({s for m in means[workload].values() for s in m})
        best = {m: winners(means[workload].get(m, {}), m, data) for m in columns}
        for i, strategy in enumerate(strategies):
            cells = []
            for metric in columns:
                value = means[workload].get(metric, {}).get(strategy)
                text = fmt(value, data["metrics"][metric]["unit"])
                if strategy in best[metric]:
                    text = f"[bold green]{text}[/]"
                cells.append(text)
            table.add_row(
                workload if i == 0 else "", strategy, *cells, end_section=i == len(strategies) - 1
            )
    return table


def print_report(data: ReportData, console: Console | None = None) -> None:
    """The key table, the verdicts and any failures, in the terminal."""
    console = console or Console()
    console.print(key_table(data))
    overall = [v for v in verdicts(data) if v.workload == "overall"]
    for verdict in overall:
        console.print(
            f"[bold]{verdict.question}[/] {', '.join(verdict.strategies)} "
            f"(mean rank {fmt(verdict.value, 'ratio')} over workloads)"
        )
    scales = best_scaling(data)
    if scales is not None:
        best, others = scales
        console.print(
            f"[bold]Which scales best?[/] {best.strategy} on {best.workload} "
            f"(time ∝ partitions^{best.exponent:.2f}; "
            + ", ".join(f"{s.strategy} ^{s.exponent:.2f}" for s in others if s is not best)
            + ")"
        )
    errors = data["tables"].get("errors", [])
    if errors:
        console.print(f"[bold red]{len(errors)} scenario(s) failed[/]; first failures:")
        for row in errors[:5]:
            console.print(f"  {row['workload']} / {row['strategy']}: {row['error']}")


# -- HTML ------------------------------------------------------------------------------------------

_STYLE = """
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 2rem auto;
       max-width: 1300px; color: #1d2430; padding: 0 1rem; }
h1 { margin-bottom: 0.2rem; } h2 { margin-top: 2.2rem; border-bottom: 2px solid #e3e7ee; }
.meta { color: #5b6576; }
table { border-collapse: collapse; margin: 0.8rem 0; font-size: 0.92rem; }
th, td { border: 1px solid #d5dbe5; padding: 0.3rem 0.6rem; text-align: right; }
th { background: #f2f5f9; } td.name, th.name { text-align: left; }
td.best { background: #d3f5d6; font-weight: 600; }
.verdict { background: #f5f9ff; border: 2px solid #7aa7e8; border-radius: 8px; padding: 0.4rem 1.2rem; }
.verdict td, .verdict th { text-align: left; }
.errors { background: #fff1f0; border: 2px solid #e58e86; border-radius: 8px; padding: 0.4rem 1.2rem; }
img { max-width: 100%; border: 1px solid #e3e7ee; margin: 0.5rem 0; }
details { margin: 0.6rem 0; } summary { cursor: pointer; font-weight: 600; }
code { background: #f2f5f9; padding: 0 0.25rem; }
"""


def _e(value: Any) -> str:
    return html.escape(str(value))


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, css: str = "") -> str:
    """``rows`` cells are already HTML (``<td>`` included)."""
    head = "".join(headers)
    body = "".join(f"<tr>{''.join(r)}</tr>" for r in rows)
    return f"<table class='{css}'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _png(figure: Any) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(figure)
    return base64.b64encode(buffer.getvalue()).decode()


def _img(png: str, alt: str) -> str:
    return f"<img alt='{_e(alt)}' src='data:image/png;base64,{png}'>"


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


def _bar_chart(data: ReportData, metric: str) -> str | None:
    means = _means(data)
    workloads = [w for w in sorted(means) if metric in means[w]]
    strategies = _strategies(data)
    if not workloads:
        return None
    plt = _pyplot()
    info = data["metrics"][metric]
    figure, axis = plt.subplots(figsize=(max(6.0, 1.6 * len(workloads) + 2), 3.6))
    width = 0.8 / max(1, len(strategies))
    for i, strategy in enumerate(strategies):
        xs = [w + (i - (len(strategies) - 1) / 2) * width for w in range(len(workloads))]
        ys = [means[w][metric].get(strategy, math.nan) for w in workloads]
        axis.bar(xs, ys, width, label=strategy)
    axis.set_xticks(range(len(workloads)), workloads)
    axis.set_ylabel(f"{metric} ({info['unit']})")
    better = "lower" if info["better"] == "lower" else "higher"
    axis.set_title(f"{metric}: {info['description']} — {better} is better", fontsize=10)
    if metric == SCALING_METRIC:
        axis.set_yscale("log")
    axis.legend(fontsize=8, ncol=min(4, len(strategies)))
    axis.grid(axis="y", alpha=0.3)
    return _png(figure)


def _scaling_charts(data: ReportData) -> list[tuple[str, str]]:
    charts = []
    for workload, per_strategy in _scaling_series(data).items():
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
        charts.append((workload, _png(figure)))
    return charts


def _step_charts(data: ReportData) -> list[tuple[str, str]]:
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
        charts.append((workload, _png(figure)))
    return charts


def _verdict_html(data: ReportData) -> str:
    found = verdicts(data)
    questions = [data["metrics"][m]["headline"] for m in headline_metrics(data)]
    questions = [q for q in questions if any(v.question == q for v in found)]
    by_cell = {(v.workload, v.question): v for v in found}
    workloads = [*sorted({v.workload for v in found if v.workload != "overall"}), "overall"]
    rows = []
    for workload in workloads:
        cells = [f"<td class='name'><b>{_e(workload)}</b></td>"]
        for question in questions:
            verdict = by_cell.get((workload, question))
            if verdict is None:
                cells.append("<td>-</td>")
                continue
            unit = "ratio" if workload == "overall" else data["metrics"][verdict.metric]["unit"]
            label = "mean rank" if workload == "overall" else verdict.metric
            cells.append(
                f"<td><b>{_e(', '.join(verdict.strategies))}</b> "
                f"<span class='meta'>({label} {_e(fmt(verdict.value, unit))})</span></td>"
            )
        rows.append(cells)
    scales = best_scaling(data)
    scale_line = ""
    if scales is not None:
        best = scales[0]
        scale_line = (
            f"<p><b>Which scales best?</b> <b>{_e(best.strategy)}</b>: on {_e(best.workload)} its "
            f"assignment time grows as partitions<sup>{best.exponent:.2f}</sup> "
            "(see <a href='#scaling'>Scaling</a>).</p>"
        )
    headers = ["<th class='name'>workload</th>", *(f"<th>{_e(q)}</th>" for q in questions)]
    return (
        "<div class='verdict' id='verdict'><h2>Verdict</h2>"
        + _table(headers, rows, css="verdict-table")
        + scale_line
        + "<p class='meta'>Per workload: best mean over every rebalance of every scenario. "
        "Overall: best mean rank across workloads. Ties list every winner.</p></div>"
    )


def _key_tables_html(data: ReportData) -> str:
    means = _means(data)
    columns = key_metrics(data)
    parts = []
    for workload in sorted(means):
        strategies = sorted({s for m in means[workload].values() for s in m})
        headers = ["<th class='name'>strategy</th>"]
        for metric in columns:
            info = data["metrics"][metric]
            arrow = "↓" if info["better"] == "lower" else "↑"
            headers.append(
                f"<th title='{_e(info['description'])}'>{_e(metric)}<br><small>{_e(info['unit'])} {arrow}</small></th>"
            )
        best = {m: winners(means[workload].get(m, {}), m, data) for m in columns}
        rows = []
        for strategy in strategies:
            cells = [f"<td class='name'>{_e(strategy)}</td>"]
            for metric in columns:
                value = means[workload].get(metric, {}).get(strategy)
                css = " class='best'" if strategy in best[metric] else ""
                cells.append(f"<td{css}>{_e(fmt(value, data['metrics'][metric]['unit']))}</td>")
            rows.append(cells)
        parts.append(f"<h3>{_e(workload)}</h3>" + _table(headers, rows, css="key"))
    return "".join(parts)


def _detail_html(data: ReportData) -> str:
    """Per workload and parameter set: every metric's mean, strategies as columns."""
    rows_by: dict[str, dict[tuple[str, str], dict[str, float | None]]] = defaultdict(
        lambda: defaultdict(dict)
    )
    for row in data["tables"].get("cases", []):
        rows_by[row["workload"]][(row["params"], row["metric"])][row["strategy"]] = row["mean"]
    parts = []
    for workload in sorted(rows_by):
        strategies = sorted({s for v in rows_by[workload].values() for s in v})
        headers = ["<th class='name'>parameters</th>", "<th class='name'>metric</th>"]
        headers += [f"<th>{_e(s)}</th>" for s in strategies]
        rows = []
        for (params, metric), values in sorted(rows_by[workload].items()):
            info = data["metrics"].get(metric, {"unit": "", "better": "lower"})
            present = {s: v for s, v in values.items() if v is not None}
            best = winners(present, metric, data)
            cells = [
                f"<td class='name'><code>{_e(params)}</code></td>",
                f"<td class='name'>{_e(metric)}</td>",
            ]
            for s in strategies:
                css = " class='best'" if s in best else ""
                cells.append(f"<td{css}>{_e(fmt(values.get(s), info['unit']))}</td>")
            rows.append(cells)
        parts.append(
            f"<details><summary>{_e(workload)}: every parameter set and metric</summary>"
            + _table(headers, rows, css="detail")
            + "</details>"
        )
    return "".join(parts)


def _scaling_html(data: ReportData) -> str:
    rows = []
    for s in scaling(data):
        rows.append(
            [
                f"<td class='name'>{_e(s.workload)}</td>",
                f"<td class='name'>{_e(s.strategy)}</td>",
                f"<td>{s.smallest:,}</td>",
                f"<td>{_e(fmt(s.smallest_ms, 'ms'))}</td>",
                f"<td>{s.largest:,}</td>",
                f"<td>{_e(fmt(s.largest_ms, 'ms'))}</td>",
                f"<td>{'-' if s.exponent is None else f'{s.exponent:.2f}'}</td>",
            ]
        )
    if not rows:
        return ""
    headers = [
        "<th class='name'>workload</th>",
        "<th class='name'>strategy</th>",
        "<th>smallest (partitions)</th>",
        "<th>ms</th>",
        "<th>largest (partitions)</th>",
        "<th>ms</th>",
        "<th>growth exponent</th>",
    ]
    return _table(headers, rows, css="scaling")


def _metrics_html(data: ReportData) -> str:
    rows = [
        [
            f"<td class='name'>{_e(name)}</td>",
            f"<td class='name'>{_e(info['unit'])}</td>",
            f"<td class='name'>{_e(info['better'])}</td>",
            f"<td class='name'>{_e(info['description'])}</td>",
        ]
        for name, info in data["metrics"].items()
    ]
    headers = [
        "<th class='name'>metric</th>",
        "<th class='name'>unit</th>",
        "<th class='name'>better</th>",
        "<th class='name'>what</th>",
    ]
    return _table(headers, rows, css="metrics")


def _errors_html(data: ReportData) -> str:
    errors = data["tables"].get("errors", [])
    if not errors:
        return ""
    rows = [
        [
            f"<td class='name'>{_e(r['workload'])}</td>",
            f"<td class='name'>{_e(r['strategy'])}</td>",
            f"<td class='name'><code>{_e(r['params'])}</code></td>",
            f"<td class='name'>{_e(r['error'])}</td>",
        ]
        for r in errors[:200]
    ]
    headers = [
        "<th class='name'>workload</th>",
        "<th class='name'>strategy</th>",
        "<th class='name'>parameters</th>",
        "<th class='name'>error</th>",
    ]
    return (
        f"<div class='errors' id='errors'><h2>{len(errors)} failed scenario(s)</h2>"
        "<p>Failed scenarios are left out of every table and chart.</p>"
        + _table(headers, rows)
        + "</div>"
    )


def render_html(data: ReportData) -> str:
    run = data["run"]
    totals = (data["tables"].get("totals") or [{}])[0]
    facts = [
        ("preset", run.get("preset")),
        ("seed", run.get("seed")),
        ("scenarios", totals.get("scenarios", run.get("scenarios"))),
        ("result rows", totals.get("rows")),
        ("strategies", ", ".join(run.get("strategies", []))),
        ("workloads", ", ".join(run.get("workloads", []))),
        (
            "Spark",
            f"{run.get('spark_version', '?')} on {run.get('master', '?')} ({run.get('engine', '?')} engine)",
        ),
        (
            "wall time",
            f"{run.get('wall_seconds', 0):.1f} s (scenarios {run.get('run_seconds', 0):.1f} s)",
        ),
        ("started", run.get("started")),
    ]
    meta = " · ".join(f"{_e(k)}: <b>{_e(v)}</b>" for k, v in facts if v not in (None, ""))
    charts = []
    for metric in key_metrics(data):
        if metric in REFERENCE_METRICS:
            continue
        png = _bar_chart(data, metric)
        if png:
            charts.append(_img(png, f"{metric} by workload and strategy"))
    scaling_pngs = _scaling_charts(data)
    steps = _step_charts(data)
    sections = [
        f"<h1>coordkit lab report</h1><p class='meta'>{meta}</p>",
        _errors_html(data),
        _verdict_html(data),
        "<h2 id='key'>Key metrics (mean per rebalance; best highlighted)</h2>",
        _key_tables_html(data),
        "<h2 id='charts'>Comparison charts</h2>",
        "".join(charts),
        "<h2 id='scaling'>Scaling</h2>",
        "".join(_img(png, f"{w}: assignment time against partitions") for w, png in scaling_pngs),
        _scaling_html(data),
    ]
    if steps:
        sections.append("<h2 id='steps'>Event sequences: moves and revocations per step</h2>")
        sections += [_img(png, f"{workload} per step") for workload, png in steps]
    sections += [
        "<h2 id='details'>Details per parameter set</h2>",
        _detail_html(data),
        "<h2 id='metrics'>Metrics</h2>",
        _metrics_html(data),
    ]
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>coordkit lab report: {_e(run.get('preset', ''))}</title><style>{_STYLE}</style></head>"
        f"<body>{''.join(sections)}</body></html>"
    )


def write_report(data: ReportData, directory: Path) -> Path:
    """Write ``summary.json`` and ``index.html`` into ``directory``; return the page's path."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / SUMMARY_FILE).write_text(json.dumps(data, indent=1, sort_keys=False, default=str))
    page = directory / INDEX_FILE
    page.write_text(render_html(data), encoding="utf-8")
    return page

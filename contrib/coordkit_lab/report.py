"""The lab's report: ``summary.json``, a self-contained ``index.html`` and the terminal table.

:func:`build_report_data` computes the analysis once (intervals, paired comparisons, verdicts,
scaling, Pareto fronts: :mod:`coordkit_lab.analysis`) and stores it in the report data; the page
(:mod:`coordkit_lab.page`), the terminal and ``coordkit lab show DIR`` print those numbers, so
they agree, and a past run is re-printed from its ``summary.json`` without Spark.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from coordkit.cli.tables import Column, FittedTable, Kind, abbreviations
from coordkit.lab import LabError
from coordkit.support import jsontext
from coordkit.support.terminal import markup
from coordkit_lab.analysis import (
    ReportData,
    analyse,
    estimates_by,
    fmt,
    fmt_halfwidth,
    fmt_interval,
    key_metrics,
    verdicts,
)
from coordkit_lab.metricinfo import metric_info
from coordkit_lab.page import render_html
from coordkit_lab.schema import FORMAT_VERSION, check_report_data

SUMMARY_FILE = "summary.json"
INDEX_FILE = "index.html"

__all__ = [
    "FORMAT_VERSION",
    "INDEX_FILE",
    "SUMMARY_FILE",
    "build_report_data",
    "check_report_data",
    "key_table",
    "load_report",
    "metric_info",
    "print_report",
    "render_html",
    "scaling_table",
    "write_report",
]


def build_report_data(
    run: Mapping[str, Any], metrics: Mapping[str, Mapping[str, Any]], tables: Mapping[str, Any]
) -> ReportData:
    """The report data of a run: its facts, the metrics' descriptions, the aggregated tables and
    the analysis. The per-scenario table (``tables["scenarios"]``) feeds the analysis and is left
    out of the data (it stays in the run's Parquet output): a report's size does not grow with
    the number of seeds."""
    shown = {k: list(v) for k, v in tables.items() if k != "scenarios"}
    infos = {k: dict(v) for k, v in metrics.items()}
    return {
        "format": FORMAT_VERSION,
        "run": dict(run),
        "metrics": infos,
        "tables": shown,
        "analysis": analyse(tables, infos, run.get("seed", 0)),
    }


def load_report(directory: Path) -> ReportData:
    """``DIRECTORY/summary.json`` read back and checked (:func:`check_report_data`).

    :raises LabError: no summary there, or one that is not a lab summary this lab reads: the
        message names the file and the field.
    """
    path = directory / SUMMARY_FILE
    try:
        if not path.is_file():
            raise LabError(
                f"{directory}: no {SUMMARY_FILE} here; `coordkit lab run --out {directory}` "
                "writes one"
            )
        if path.stat().st_size > jsontext.MAX_BYTES:
            raise LabError(f"{path}: not a lab summary (larger than {jsontext.MAX_BYTES:,} bytes)")
        data = jsontext.loads(path.read_bytes())
    except jsontext.JSONTextError as exc:
        raise LabError(f"{path}: not a lab summary ({exc})") from None
    except OSError as exc:
        raise LabError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    return check_report_data(data, str(path))


def write_report(data: ReportData, directory: Path) -> Path:
    """Write ``summary.json`` and ``index.html`` into ``directory``; return the page's path."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / SUMMARY_FILE).write_text(json.dumps(data, indent=1, sort_keys=False, default=str))
    page = directory / INDEX_FILE
    page.write_text(render_html(data), encoding="utf-8")
    return page


# -- terminal --------------------------------------------------------------------------------------


def key_table(data: ReportData) -> FittedTable:
    """The key table: each key metric's mean per workload and strategy with half its 95%
    interval; the best and those tied with it in bold green.

    Metric columns carry abbreviated headers (with a legend) for narrow terminals; a value is
    never cut."""
    found = estimates_by(data)
    columns = key_metrics(data)
    short = abbreviations(columns)
    table_columns = [Column("workload"), Column("strategy")]
    for metric in columns:
        info = data["metrics"][metric]
        arrow = "↓" if info["better"] == "lower" else "↑"
        table_columns.append(
            Column(f"{metric}\n{info['unit']} {arrow}", Kind.NUMBER, f"{short[metric]} {arrow}")
        )
    rows: list[list[str | Text]] = []
    for workload in sorted(found):
        per_metric = found[workload]
        for strategy in sorted({s for m in per_metric.values() for s in m}):
            cells: list[str | Text] = [workload, strategy]
            for metric in columns:
                row = per_metric.get(metric, {}).get(strategy)
                if row is None:
                    cells.append("-")
                    continue
                text = fmt(row["mean"], data["metrics"][metric]["unit"])
                half = fmt_halfwidth(row["low"], row["high"])
                text = f"{text} {half}" if half else text
                cells.append(Text(text, style="bold green") if row["best"] else text)
            rows.append(cells)
    return FittedTable(
        table_columns,
        rows,
        title="coordkit lab: mean per rebalance ± half its 95% interval "
        "(best, and tied with it, in bold green)",
        keys=2,
        sections=True,
    )


def _overall_line(verdict: Any, gated: bool) -> str:
    strategies = markup(", ".join(verdict.strategies))
    wins = (verdict.wins or {}).get(verdict.strategies[0], 0) if verdict.strategies else 0
    note = f"best or tied on {wins} of {verdict.workloads} workloads"
    if verdict.tied:
        note = f"tied; {note}"
    if gated:
        note += "; only among strategies that balance"
    return f"[bold]{markup(verdict.question)}[/] {strategies} ({note})"


def print_report(data: ReportData, console: Console | None = None) -> None:
    """The key table, the verdicts, scaling, the trade-offs and any failures, in the terminal
    (every name from the summary shown as it is, control characters made visible)."""
    console = console or Console()
    console.print(key_table(data))
    found = verdicts(data)
    gated = {v.metric for v in found if v.gate}
    for verdict in (v for v in found if v.workload == "overall"):
        console.print(_overall_line(verdict, verdict.metric in gated))
    analysis = data["analysis"]
    for entry in analysis["scaling"]:
        console.print(scaling_table(entry, data))
        console.print(_scaling_line(entry, data))
    for front in analysis["pareto"]:
        console.print(_pareto_line(front))
    method = analysis["method"]
    console.print(
        f"[dim]± half the {method['confidence']:.0%} bootstrap interval over "
        f"{markup(method['unit'])}s. Worse: the paired interval excludes 0 (and, for timings, "
        f"the difference exceeds {method['timing_margin']:.0%}, on at least "
        f"{method.get('min_timed_scenarios', 2)} scenarios); the rest tie with the best.[/]"
    )
    errors = data["tables"].get("errors", [])
    if errors:
        console.print(f"[bold red]{len(errors)} scenario(s) failed[/]; first failures:")
        for row in errors[:5]:
            console.print(
                f"  {markup(row['workload'])} / {markup(row['strategy'])}: {markup(row['error'])}"
            )


def scaling_table(entry: Mapping[str, Any], data: ReportData) -> FittedTable:
    """One scaling entry: each strategy's mean at every partition count ± half its 95% interval,
    and its growth exponent with its interval (the flattest, and tied with it, in bold green)."""
    metric = entry["metric"]
    unit = data["metrics"][metric]["unit"]
    sizes = sorted({p["partitions"] for g in entry["growth"] for p in g["points"]})
    columns = [Column("strategy")]
    columns += [Column(f"{size:,}\npartitions", Kind.NUMBER) for size in sizes]
    columns.append(Column("growth\nexponent", Kind.NUMBER))
    rows: list[list[str | Text]] = []
    for g in entry["growth"]:
        at = {p["partitions"]: p for p in g["points"]}
        cells: list[str | Text] = [g["strategy"]]
        for size in sizes:
            p = at.get(size)
            if p is None:
                cells.append("-")
                continue
            half = fmt_halfwidth(p["low"], p["high"])
            cells.append(f"{fmt(p['mean'], unit)}{' ' + half if half else ''}")
        if g["exponent"] is None:
            cells.append("-")
        else:
            interval = fmt_interval(g["low"], g["high"], "ratio")
            text = f"{g['exponent']:.2f}{' ' + interval if interval else ''}"
            cells.append(
                Text(text, style="bold green") if g["strategy"] in entry["winners"] else text
            )
        rows.append(cells)
    return FittedTable(
        columns,
        rows,
        title=f"{entry['workload']}: {metric} ({unit}) against partitions, mean ± half its 95% "
        f"interval; growth exponent from {entry['fitted_from']:,} partitions",
    )


def _scaling_line(entry: Mapping[str, Any], data: ReportData) -> str:
    unit = data["metrics"][entry["metric"]]["unit"]
    growth = {g["strategy"]: g for g in entry["growth"]}
    parts = []
    for name in entry["winners"]:
        g = growth.get(name)
        if g is None or g["exponent"] is None:
            continue
        interval = fmt_interval(g["low"], g["high"], "ratio")
        parts.append(f"{markup(name)} ^{g['exponent']:.2f}{' ' + interval if interval else ''}")
    winners = markup(", ".join(entry["winners"]))
    tied = " (tied)" if len(entry["winners"]) > 1 else ""
    effect = entry["effect"]
    lead = ""
    if effect is not None:
        interval = fmt_interval(effect["low"], effect["high"], "ratio")
        lead = f"; next: {markup(effect['strategy'])} +{effect['difference']:.2f}"
        lead += f" {interval}" if interval else ""
    fastest = markup(", ".join(entry["fastest"]))
    metric = markup(entry["metric"])
    largest = {
        name: p["mean"]
        for name, g in growth.items()
        for p in g["points"]
        if p["partitions"] == entry["largest"]
    }
    quick = entry["fastest"][0] if entry["fastest"] else None
    at = f" ({fmt(largest.get(quick), unit)} {markup(unit)})" if quick in largest else ""
    return (
        f"[bold]Which scales best?[/] {winners}{tied} on {markup(entry['workload'])}: {metric} ∝ "
        f"partitions^exponent, {'; '.join(parts)}{lead}; best at {entry['largest']:,} "
        f"partitions: {fastest}{' (tied)' if len(entry['fastest']) > 1 else at}"
    )


def _pareto_line(front: Mapping[str, Any]) -> str:
    points = front["points"]
    best = [p["strategy"] for p in points if not p["dominated_by"]]
    dominated = [
        f"{markup(p['strategy'])} (by {markup(', '.join(p['dominated_by']))})"
        for p in points
        if p["dominated_by"]
    ]
    text = (
        f"[bold]Trade-offs on {markup(front['workload'])}[/] "
        f"({markup(', '.join(front['dimensions']))}): front {markup(', '.join(best))}"
    )
    return text + (f"; dominated: {'; '.join(dominated)}" if dominated else "; none dominated")

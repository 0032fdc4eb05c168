"""The lab's report: ``summary.json``, a self-contained ``index.html`` and the terminal table.

Everything here works from the aggregated tables (plain rows, as Spark SQL produced them), so
``coordkit lab show DIR`` re-prints a past run from its ``summary.json`` without Spark. Charts are
matplotlib PNGs embedded as ``data:`` URIs: the page needs no network and no other file.

At a glance the page answers, per workload and overall: which strategy balances best, which moves
least, which revokes least, which is fastest (the metrics that declare a ``headline``), and how
each scales (assignment time against partition count, with a fitted growth exponent).
"""

from __future__ import annotations

import html
import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from coordkit import jsontext
from coordkit.cli.tables import Column, FittedTable, Kind, abbreviations
from coordkit.lab import LabError, Metric
from coordkit.terminal import markup
from coordkit_lab import charts
from coordkit_lab.analysis import (
    REFERENCE_METRICS,
    ReportData,
    best_scaling,
    fmt,
    headline_metrics,
    key_metrics,
    means,
    scaling,
    verdicts,
    winners,
)

SUMMARY_FILE = "summary.json"
INDEX_FILE = "index.html"
FORMAT_VERSION = 1


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
    """``DIRECTORY/summary.json`` read back and checked (:func:`check_report_data`).

    :raises LabError: no summary there, or one that is not a lab summary: the message names the
        file and the field.
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


def _expect(where: str, field: str, value: object, ok: bool, what: str) -> None:
    if not ok:
        raise LabError(f"{where}: {field}: expected {what}, got {jsontext.kind_of(value)}")


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


#: The fields ``coordkit lab show`` reads from each table's rows: name → (field, kind).
_ROW_FIELDS: dict[str, tuple[tuple[str, str], ...]] = {
    "summary": (("workload", "str"), ("strategy", "str"), ("metric", "str"), ("mean", "num?")),
    "scaling": (
        ("workload", "str"),
        ("strategy", "str"),
        ("metric", "str"),
        ("partitions", "int?"),
        ("mean", "num?"),
    ),
    "cases": (
        ("workload", "str"),
        ("strategy", "str"),
        ("params", "str"),
        ("metric", "str"),
        ("mean", "num?"),
    ),
    "errors": (("workload", "str"), ("strategy", "str"), ("params", "str"), ("error", "str")),
}
_KINDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "str": (lambda v: isinstance(v, str), "a string"),
    "num?": (lambda v: v is None or _is_number(v), "a number or null"),
    "int?": (
        lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 0),
        "a whole number >= 0 or null",
    ),
}


def check_report_data(data: Any, where: str = SUMMARY_FILE) -> ReportData:
    """``data`` if it has the shape of a lab summary (what the report and ``coordkit lab show``
    read), else :class:`LabError` naming ``where`` and the field."""
    _expect(where, "the document", data, isinstance(data, dict), "an object")
    version = data.get("format", FORMAT_VERSION)
    if version != FORMAT_VERSION or isinstance(version, bool):
        raise LabError(f"{where}: format: {version!r} is not a summary format this lab reads")
    for key in ("run", "metrics", "tables"):
        if key not in data and key != "run":
            raise LabError(f"{where}: {key}: missing (not a lab summary)")
        _expect(where, key, data.get(key, {}), isinstance(data.get(key, {}), dict), "an object")
    for name, info in data["metrics"].items():
        field = f"metrics.{name}"
        _expect(where, field, info, isinstance(info, dict), "an object")
        _expect(
            where, f"{field}.unit", info.get("unit"), isinstance(info.get("unit"), str), "a string"
        )
        better = info.get("better")
        if better not in ("lower", "higher"):
            raise LabError(
                f"{where}: {field}.better: expected 'lower' or 'higher', got {jsontext.kind_of(better)}"
            )
        for optional in ("headline", "description"):
            value = info.get(optional)
            _expect(
                where,
                f"{field}.{optional}",
                value,
                value is None or isinstance(value, str),
                "a string or null",
            )
    for table, rows in data["tables"].items():
        _expect(where, f"tables.{table}", rows, isinstance(rows, list), "a list of rows")
        fields = _ROW_FIELDS.get(table, ())
        for index, row in enumerate(rows):
            field = f"tables.{table}[{index}]"
            _expect(where, field, row, isinstance(row, dict), "an object")
            for name, kind in fields:
                check, what = _KINDS[kind]
                if name not in row:
                    raise LabError(f"{where}: {field}.{name}: missing")
                _expect(where, f"{field}.{name}", row[name], check(row[name]), what)
            if table in ("summary", "scaling") and row["metric"] not in data["metrics"]:
                raise LabError(
                    f"{where}: {field}.metric: {row['metric']!r} is not described under metrics"
                )
    checked: ReportData = data
    return checked


# -- terminal --------------------------------------------------------------------------------------


def key_table(data: ReportData) -> FittedTable:
    """The key table: mean of each key metric per workload and strategy, best in bold green.

    Metric columns carry abbreviated headers (with a legend) for narrow terminals; a value is
    never cut."""
    by_workload = means(data)
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
    for workload in sorted(by_workload):
        strategies = sorted({s for m in by_workload[workload].values() for s in m})
        best = {m: winners(by_workload[workload].get(m, {}), m, data) for m in columns}
        for strategy in strategies:
            cells: list[str | Text] = [workload, strategy]
            for metric in columns:
                value = by_workload[workload].get(metric, {}).get(strategy)
                text = fmt(value, data["metrics"][metric]["unit"])
                cells.append(Text(text, style="bold green") if strategy in best[metric] else text)
            rows.append(cells)
    return FittedTable(
        table_columns,
        rows,
        title="coordkit lab: mean per rebalance (best per workload in bold green)",
        keys=2,
        sections=True,
    )


def print_report(data: ReportData, console: Console | None = None) -> None:
    """The key table, the verdicts and any failures, in the terminal (every name from the
    summary shown as it is, control characters made visible)."""
    console = console or Console()
    console.print(key_table(data))
    overall = [v for v in verdicts(data) if v.workload == "overall"]
    for verdict in overall:
        console.print(
            f"[bold]{markup(verdict.question)}[/] {markup(', '.join(verdict.strategies))} "
            f"(mean rank {fmt(verdict.value, 'ratio')} over workloads)"
        )
    scales = best_scaling(data)
    if scales is not None:
        best, others = scales
        quickest = min(others, key=lambda s: s.largest_ms)
        console.print(
            f"[bold]Which scales best?[/] {markup(best.strategy)} on {markup(best.workload)} "
            f"(time ∝ partitions^{best.exponent:.2f}; "
            + ", ".join(f"{markup(s.strategy)} ^{s.exponent:.2f}" for s in others if s is not best)
            + f"); fastest at {quickest.largest:,} partitions: {markup(quickest.strategy)} "
            f"({fmt(quickest.largest_ms, 'ms')} ms)"
        )
    errors = data["tables"].get("errors", [])
    if errors:
        console.print(f"[bold red]{len(errors)} scenario(s) failed[/]; first failures:")
        for row in errors[:5]:
            console.print(
                f"  {markup(row['workload'])} / {markup(row['strategy'])}: {markup(row['error'])}"
            )


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


def _img(png: str, alt: str) -> str:
    return f"<img alt='{_e(alt)}' src='data:image/png;base64,{png}'>"


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
        best, others = scales
        quickest = min(others, key=lambda s: s.largest_ms)
        scale_line = (
            f"<p><b>Which scales best?</b> <b>{_e(best.strategy)}</b>: on {_e(best.workload)} its "
            f"assignment time grows as partitions<sup>{best.exponent:.2f}</sup>; at "
            f"{quickest.largest:,} partitions <b>{_e(quickest.strategy)}</b> is fastest "
            f"({_e(fmt(quickest.largest_ms, 'ms'))} ms). See <a href='#scaling'>Scaling</a>.</p>"
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
    by_workload = means(data)
    columns = key_metrics(data)
    parts = []
    for workload in sorted(by_workload):
        strategies = sorted({s for m in by_workload[workload].values() for s in m})
        headers = ["<th class='name'>strategy</th>"]
        for metric in columns:
            info = data["metrics"][metric]
            arrow = "↓" if info["better"] == "lower" else "↑"
            headers.append(
                f"<th title='{_e(info['description'])}'>{_e(metric)}<br><small>{_e(info['unit'])} {arrow}</small></th>"
            )
        best = {m: winners(by_workload[workload].get(m, {}), m, data) for m in columns}
        rows = []
        for strategy in strategies:
            cells = [f"<td class='name'>{_e(strategy)}</td>"]
            for metric in columns:
                value = by_workload[workload].get(metric, {}).get(strategy)
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
    bars = []
    for metric in key_metrics(data):
        if metric in REFERENCE_METRICS:
            continue
        png = charts.bar_chart(data, metric)
        if png:
            bars.append(_img(png, f"{metric} by workload and strategy"))
    scaling_pngs = charts.scaling_charts(data)
    steps = charts.step_charts(data)
    sections = [
        f"<h1>coordkit lab report</h1><p class='meta'>{meta}</p>",
        _errors_html(data),
        _verdict_html(data),
        "<h2 id='key'>Key metrics (mean per rebalance; best highlighted)</h2>",
        _key_tables_html(data),
        "<h2 id='charts'>Comparison charts</h2>",
        "".join(bars),
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

"""The report page: one self-contained ``index.html`` (charts are ``data:`` PNGs, no network).

At a glance it answers, per workload and overall, each headline question (ties said as ties, the
winners' lead with its interval), how each strategy scales (a fitted exponent with its interval),
and what trades against what (the Pareto front over balance, movement and interruption). Every
number comes from the report data's ``analysis`` section, as in the terminal.
"""

from __future__ import annotations

import html
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from coordkit_lab import charts
from coordkit_lab.analysis import (
    REFERENCE_METRICS,
    ReportData,
    describe_effect,
    describe_gate,
    estimates_by,
    fmt,
    fmt_interval,
    headline_metrics,
    key_metrics,
    present_metrics,
    verdicts,
    winners,
)
from coordkit_lab.metricinfo import is_measured, margin_of

_STYLE = """
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 2rem auto;
       max-width: 1300px; color: #1d2430; padding: 0 1rem; }
h1 { margin-bottom: 0.2rem; } h2 { margin-top: 2.2rem; border-bottom: 2px solid #e3e7ee; }
.meta, .ci { color: #5b6576; } .ci { font-size: 0.8rem; white-space: nowrap; }
table { border-collapse: collapse; margin: 0.8rem 0; font-size: 0.92rem; }
th, td { border: 1px solid #d5dbe5; padding: 0.3rem 0.6rem; text-align: right; }
th { background: #f2f5f9; } td.name, th.name { text-align: left; }
td.best { background: #d3f5d6; font-weight: 600; }
td.dominated { color: #8a93a3; }
.verdict { background: #f5f9ff; border: 2px solid #7aa7e8; border-radius: 8px; padding: 0.4rem 1.2rem; }
.verdict td, .verdict th { text-align: left; vertical-align: top; }
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


def _names(*headers: str) -> list[str]:
    return [f"<th class='name'>{_e(h)}</th>" for h in headers]


def _img(png: str, alt: str) -> str:
    return f"<img alt='{_e(alt)}' src='data:image/png;base64,{png}'>"


def _ci(low: float | None, high: float | None, unit: str) -> str:
    interval = fmt_interval(low, high, unit)
    return f"<br><span class='ci'>{_e(interval)}</span>" if interval else ""


# -- verdict -------------------------------------------------------------------------------------


def _verdict_cell(verdict: Any, data: ReportData) -> str:
    names = f"<b>{_e(', '.join(verdict.strategies))}</b>"
    if verdict.tied:
        names += " (tied)"
    if verdict.workload == "overall":
        wins = (verdict.wins or {}).get(verdict.strategies[0], 0) if verdict.strategies else 0
        return (
            f"<td>{names} <span class='meta'>best or tied on {wins} of {verdict.workloads} "
            "workloads</span></td>"
        )
    unit = data["metrics"][verdict.metric]["unit"]
    notes = [n for n in (describe_effect(verdict.effect, unit), describe_gate(verdict.gate)) if n]
    if not verdict.effect and len(verdict.strategies) > 1:
        notes.insert(0, "no difference beyond the noise")
    extra = "".join(f"<br><span class='meta'>{_e(n)}</span>" for n in notes)
    return f"<td>{names}{extra}</td>"


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
            cells.append("<td>-</td>" if verdict is None else _verdict_cell(verdict, data))
        rows.append(cells)
    scale_line = "".join(_scales_best_html(entry) for entry in data["analysis"]["scaling"])
    headers = ["<th class='name'>workload</th>", *(f"<th>{_e(q)}</th>" for q in questions)]
    return (
        "<div class='verdict' id='verdict'><h2>Verdict</h2>"
        + _table(headers, rows, css="verdict-table")
        + scale_line
        + "<p class='meta'>Per workload: the best mean over scenarios and every strategy not "
        "shown worse than it (tied). Overall: the strategies best or tied on the most workloads. "
        "<a href='#method'>How</a>.</p></div>"
    )


def _scales_best_html(entry: Mapping[str, Any]) -> str:
    """The verdict's line for one scaling entry: the flattest growth (ties included), the lead
    over the next, and the best at the largest size."""
    growth = {g["strategy"]: g for g in entry["growth"]}
    shown = []
    for name in entry["winners"]:
        g = growth[name]
        if g["exponent"] is not None:
            interval = fmt_interval(g["low"], g["high"], "ratio")
            shown.append(
                f"<b>{_e(name)}</b> partitions<sup>{g['exponent']:.2f}</sup> {_e(interval)}"
            )
    lead = ""
    if entry["effect"]:
        effect = entry["effect"]
        lead = (
            f"; next: {_e(effect['strategy'])}, exponent +{effect['difference']:.2f} "
            f"{_e(fmt_interval(effect['low'], effect['high'], 'ratio'))}"
        )
    tied = " (tied)" if len(entry["winners"]) > 1 else ""
    return (
        f"<p><b>Which scales best?</b> {_e(entry['metric'])} on {_e(entry['workload'])}{tied}: "
        f"{'; '.join(shown)}{lead}. Best at {entry['largest']:,} partitions: "
        f"<b>{_e(', '.join(entry['fastest']))}</b>"
        f"{' (tied)' if len(entry['fastest']) > 1 else ''}. "
        f"See <a href='#{_anchor(entry)}'>Scaling</a>.</p>"
    )


def _anchor(entry: Mapping[str, Any]) -> str:
    return "scaling-" + "".join(
        c if c.isalnum() else "-" for c in f"{entry['workload']}-{entry['metric']}"
    )


def _method_html(data: ReportData) -> str:
    method = data["analysis"]["method"]
    return (
        "<h2 id='method'>How the numbers are compared</h2><p>"
        f"Every figure is a mean over {_e(method['unit'])}s (a scenario's value: the mean over "
        f"its steps) with a {method['confidence']:.0%} percentile bootstrap interval "
        f"({method['resamples']:,} resamples of the workload's scenarios, seeded from the run's "
        "seed: the same run gives the same intervals). Strategies are compared paired, on the "
        "scenarios both ran (the same generated groups and events). A strategy is "
        "<b>worse</b> than the best when the interval of its paired difference excludes 0 and "
        "the difference exceeds a practical-equivalence margin: none for deterministic counts, "
        f"{method['timing_margin']:.0%} of the best's mean for timings (how much a timing "
        "varies between runs on a shared machine); otherwise it is <b>tied</b> with the best. "
        f"A timing seen on fewer than {method.get('min_timed_scenarios', 2)} scenarios shows no "
        "strategy worse: one measurement cannot tell noise from a difference. "
        "With few scenarios the intervals are narrower than their nominal level (a bootstrap "
        "never reaches beyond the values seen; with 3 seeds it covers the mean about 3 times in "
        "4): <code>--replicates</code> buys tighter, truer ones. "
        "Movement questions are asked only among strategies that balance: the workload's first "
        "balance metric within "
        f"{method.get('balanced_within', 1):g} of the best (max - min counts) or within "
        f"{method.get('balanced_within_ratio', 0.05):.0%} of it (ratios). Growth exponents tie "
        "unless their paired difference's interval excludes 0 and the difference exceeds "
        f"{method['exponent_margin']:g}.</p>"
    )


# -- tables --------------------------------------------------------------------------------------


def _key_tables_html(data: ReportData) -> str:
    found = estimates_by(data)
    columns = key_metrics(data)
    parts = []
    for workload in sorted(found):
        per_metric = found[workload]
        names = sorted({s for m in per_metric.values() for s in m})
        headers = ["<th class='name'>strategy</th>"]
        for metric in columns:
            info = data["metrics"][metric]
            arrow = "↓" if info["better"] == "lower" else "↑"
            headers.append(
                f"<th title='{_e(info['description'])}'>{_e(metric)}<br>"
                f"<small>{_e(info['unit'])} {arrow}</small></th>"
            )
        rows = []
        for strategy in names:
            cells = [f"<td class='name'>{_e(strategy)}</td>"]
            for metric in columns:
                row = per_metric.get(metric, {}).get(strategy)
                if row is None:
                    cells.append("<td>-</td>")
                    continue
                unit = data["metrics"][metric]["unit"]
                css = " class='best'" if row["best"] else ""
                cells.append(
                    f"<td{css}>{_e(fmt(row['mean'], unit))}{_ci(row['low'], row['high'], unit)}</td>"
                )
            rows.append(cells)
        units = max(row["n"] for per in per_metric.values() for row in per.values())
        parts.append(
            f"<h3>{_e(workload)} <span class='meta'>({units:,} scenario{'s' if units != 1 else ''}"
            " per strategy)</span></h3>" + _table(headers, rows, css="key")
        )
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
        names = sorted({s for v in rows_by[workload].values() for s in v})
        headers = [*_names("parameters", "metric"), *(f"<th>{_e(s)}</th>" for s in names)]
        rows = []
        for (params, metric), values in sorted(rows_by[workload].items()):
            info = data["metrics"].get(metric, {"unit": "", "better": "lower"})
            present = {s: v for s, v in values.items() if v is not None}
            best = winners(present, metric, data)
            cells = [
                f"<td class='name'><code>{_e(params)}</code></td>",
                f"<td class='name'>{_e(metric)}</td>",
            ]
            for s in names:
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
    """Per workload and metric plotted against partitions: the chart, then each strategy's mean
    at every partition count (95% interval below) and its growth exponent."""
    pngs = {(w, m): png for w, m, png in charts.scaling_charts(data)}
    parts = []
    for entry in data["analysis"]["scaling"]:
        metric = entry["metric"]
        unit = data["metrics"][metric]["unit"]
        sizes = sorted({p["partitions"] for g in entry["growth"] for p in g["points"]})
        rows = []
        for g in entry["growth"]:
            if not g["points"]:
                continue
            at = {p["partitions"]: p for p in g["points"]}
            exponent = "-" if g["exponent"] is None else f"{g['exponent']:.2f}"
            css = " class='best'" if g["strategy"] in entry["winners"] else ""
            cells = [f"<td class='name'>{_e(g['strategy'])}</td>"]
            for size in sizes:
                p = at.get(size)
                cells.append(
                    "<td>-</td>"
                    if p is None
                    else f"<td>{_e(fmt(p['mean'], unit))}{_ci(p['low'], p['high'], unit)}</td>"
                )
            cells.append(f"<td{css}>{exponent}{_ci(g['low'], g['high'], 'ratio')}</td>")
            rows.append(cells)
        headers = [
            *_names("strategy"),
            *(f"<th>{size:,} partitions</th>" for size in sizes),
            f"<th>growth exponent (from {entry['fitted_from']:,} partitions)</th>",
        ]
        title = f"{entry['workload']}: {metric} ({unit}) against partitions"
        png = pngs.get((entry["workload"], metric))
        parts.append(
            f"<h3 id='{_anchor(entry)}'>{_e(title)}</h3>"
            + (_img(png, f"{entry['workload']}: {metric} against partitions") if png else "")
            + _table(headers, rows, css="scaling")
        )
    if not parts:
        return ""
    return (
        "<h2 id='scaling'>Scaling</h2><p class='meta'>Means over scenarios at each partition "
        "count (95% interval below); growth exponent: the slope on log-log axes over the largest "
        "two decades (metric ∝ partitions<sup>exponent</sup>), with its interval.</p>"
        + "".join(parts)
    )


def _pareto_html(data: ReportData) -> str:
    fronts = data["analysis"]["pareto"]
    if not fronts:
        return ""
    pngs = dict(charts.pareto_charts(data))
    parts = [
        "<h2 id='pareto'>Trade-offs: balance, movement, interruption</h2>"
        "<p class='meta'>A strategy is <b>dominated</b> when another is at least as good on every "
        "trade-off metric and better on one (on the means); the others form the Pareto front: "
        "each a defensible choice, depending on what matters more. <i>Clearly</i>: better "
        "beyond the noise (paired interval) on at least one metric.</p>"
    ]
    for front in fronts:
        dims = front["dimensions"]
        headers = [*_names("strategy"), *(f"<th>{_e(d)}</th>" for d in dims)]
        headers += _names("Pareto front", "dominated by")
        rows = []
        for p in front["points"]:
            css = " class='dominated'" if p["dominated_by"] else ""
            cells = [f"<td class='name'{css}>{_e(p['strategy'])}</td>"]
            for dim in dims:
                unit = data["metrics"][dim]["unit"]
                cells.append(f"<td{css}>{_e(fmt(p['values'].get(dim), unit))}</td>")
            clear = set(p["clearly_dominated_by"])
            by = ", ".join(
                f"{s}{'' if s in clear else ' (within noise)'}" for s in p["dominated_by"]
            )
            cells.append(f"<td class='name'>{'yes' if not p['dominated_by'] else 'no'}</td>")
            cells.append(f"<td class='name'>{_e(by) or '-'}</td>")
            rows.append(cells)
        chart = pngs.get(front["workload"])
        parts.append(
            f"<h3>{_e(front['workload'])}</h3>"
            + (_img(chart, f"{front['workload']}: trade-offs (Pareto)") if chart else "")
            + _table(headers, rows, css="pareto")
        )
    return "".join(parts)


def _glossary_html(data: ReportData) -> str:
    """Only the metrics this run measured."""
    rows = []
    for name in present_metrics(data):
        info = data["metrics"][name]
        if is_measured(info):
            how = (info.get("measured") or "wall-clock time") + (
                f"; ties within {margin_of(info):.0%}"
            )
            if info.get("resolution"):
                how += f" or {info['resolution']:g} {info['unit']}"
        else:
            how = "deterministic: any real difference counts"
        if name in REFERENCE_METRICS:
            how = "a reference bound, never a winner"
        rows.append(
            [
                f"<td class='name'>{_e(name)}</td>",
                f"<td class='name'>{_e(info['unit'])}</td>",
                f"<td class='name'>{_e(info['better'])}</td>",
                f"<td class='name'>{_e(info.get('tradeoff') or '-')}</td>",
                f"<td class='name'>{_e(info.get('description') or '')}</td>",
                f"<td class='name'>{_e(how)}</td>",
            ]
        )
    return _table(
        _names("metric", "unit", "better", "trade-off", "what", "how measured and compared"),
        rows,
        css="metrics",
    )


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
    return (
        f"<div class='errors' id='errors'><h2>{len(errors)} failed scenario(s)</h2>"
        "<p>Failed scenarios are left out of every table and chart.</p>"
        + _table(_names("workload", "strategy", "parameters", "error"), rows)
        + "</div>"
    )


def _facts(run: Mapping[str, Any], data: ReportData) -> str:
    totals = (data["tables"].get("totals") or [{}])[0]
    facts = [
        ("preset", run.get("preset")),
        ("study", run.get("study")),
        ("seed", run.get("seed")),
        ("scenarios", totals.get("scenarios", run.get("scenarios"))),
        ("result rows", totals.get("rows")),
        ("strategies", ", ".join(map(str, run.get("strategies", [])))),
        ("workloads", ", ".join(map(str, run.get("workloads", [])))),
        (
            "Spark",
            f"{run.get('spark_version', '?')} on {run.get('master', '?')} "
            f"({run.get('engine', '?')} engine)",
        ),
        (
            "wall time",
            f"{run.get('wall_seconds', 0):.1f} s (scenarios {run.get('run_seconds', 0):.1f} s)",
        ),
        ("started", run.get("started")),
    ]
    return " · ".join(f"{_e(k)}: <b>{_e(v)}</b>" for k, v in facts if v not in (None, ""))


def render_html(data: ReportData) -> str:
    run = data["run"]
    bars = []
    for metric in key_metrics(data):
        if metric in REFERENCE_METRICS:
            continue
        png = charts.bar_chart(data, metric)
        if png:
            bars.append(_img(png, f"{metric} by workload and strategy"))
    steps = charts.step_charts(data)
    sections = [
        f"<h1>coordkit lab report</h1><p class='meta'>{_facts(run, data)}</p>",
        _errors_html(data),
        _verdict_html(data),
        "<h2 id='key'>Key metrics (mean per rebalance over scenarios, 95% interval below; best "
        "and tied highlighted)</h2>",
        _key_tables_html(data),
        "<h2 id='charts'>Comparison charts</h2>",
        "<p class='meta'>Bars: means over scenarios; whiskers: 95% intervals.</p>",
        "".join(bars),
        _pareto_html(data),
        _scaling_html(data),
    ]
    if steps:
        sections.append("<h2 id='steps'>Event sequences: moves and revocations per step</h2>")
        sections += [_img(png, f"{workload} per step") for workload, png in steps]
    sections += [
        "<h2 id='details'>Details per parameter set</h2>",
        _detail_html(data),
        _method_html(data),
        "<h2 id='metrics'>Metrics in this run</h2>",
        _glossary_html(data),
    ]
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>coordkit lab report: {_e(run.get('preset') or run.get('study') or '')}</title><style>{_STYLE}</style>"
        f"</head><body>{''.join(sections)}</body></html>"
    )

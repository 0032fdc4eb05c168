"""The HTML report rendered by a real browser (headless Debian chromium): tables and charts show."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

from coordkit_lab.analysis import verdicts
from coordkit_lab.report import load_report, render_html

BROWSER_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)

# Counts, after the page has loaded, the tables and the images the browser actually decoded.
PROBE = r"""<script>
window.addEventListener('load', () => {
  const images = Array.from(document.images);
  document.body.dataset.images = images.length;
  document.body.dataset.decoded = images.filter(i => i.complete && i.naturalWidth > 0).length;
  document.body.dataset.tables = document.querySelectorAll('table').length;
  document.body.dataset.rows = document.querySelectorAll('table tr').length;
  // Intervals: shown under the means of the key tables (and wherever a mean has one).
  document.body.dataset.intervals = Array.from(document.querySelectorAll('table.key .ci'))
    .filter(e => /^\[-?[0-9.,]+, -?[0-9.,]+\]$/.test(e.textContent) && e.offsetHeight > 0).length;
  // The Pareto view: its scatter charts decoded, and its tables.
  const pareto = images.filter(i => i.alt.endsWith('(Pareto)'));
  document.body.dataset.paretocharts = pareto.length;
  document.body.dataset.paretodecoded = pareto.filter(i => i.complete && i.naturalWidth > 0).length;
  document.body.dataset.paretorows = document.querySelectorAll('table.pareto tbody tr').length;
});
</script>"""


def browse(
    chromium: str, page: Path, profile: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [chromium, *BROWSER_FLAGS, f"--user-data-dir={profile}", *args, page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_page_shows_its_tables_and_images(chromium: str, lab_run: Any, tmp_path: Path) -> None:
    page = tmp_path / "probe.html"
    page.write_text((lab_run.out / "index.html").read_text().replace("</body>", PROBE + "</body>"))
    result = browse(
        chromium, page, tmp_path / "profile", "--virtual-time-budget=10000", "--dump-dom"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    dom = result.stdout
    body = re.search(r"<body([^>]*)>", dom)
    assert body is not None, dom[:500]
    attributes = dict(re.findall(r'data-(\w+)="(\d+)"', body.group(1)))
    assert int(attributes["images"]) >= 4
    assert attributes["decoded"] == attributes["images"]  # every chart decoded
    assert int(attributes["tables"]) >= 5
    assert int(attributes["rows"]) > 40
    assert int(attributes["intervals"]) > 20  # means shown with their 95% intervals
    assert int(attributes["paretocharts"]) >= 2  # one per workload with trade-offs
    assert attributes["paretodecoded"] == attributes["paretocharts"]
    assert int(attributes["paretorows"]) >= 2 * int(attributes["paretocharts"])
    for text in (
        "Verdict",
        "Which is fastest?",
        "Scaling",
        "Trade-offs: balance, movement, interruption",
        "(tied)",
        "How the numbers are compared",
        "weighted-sticky",
        "cooperative-sticky",
    ):
        assert text in dom, text
    assert 'alt="kafka-grid: assign_ms against partitions"' in dom  # the scaling chart
    assert "http://" not in dom
    assert "https://" not in dom


def test_the_screenshot_is_not_blank(chromium: str, lab_run: Any, tmp_path: Path) -> None:
    import matplotlib.image

    shot = tmp_path / "report.png"
    result = browse(
        chromium,
        lab_run.out / "index.html",
        tmp_path / "profile",
        f"--screenshot={shot}",
        "--window-size=1400,3000",
    )
    assert shot.is_file(), result.stderr[-2000:]
    pixels = matplotlib.image.imread(str(shot))
    assert pixels.shape[0] == 3000
    assert pixels.shape[1] == 1400
    # Text, table shading and coloured bars: far from a uniform page.
    assert len({tuple(p) for p in pixels[::7, ::7].reshape(-1, pixels.shape[2]).tolist()}) > 50


def test_the_verdict_answers_every_headline_question(lab_run: Any) -> None:
    data = load_report(lab_run.out)
    found = verdicts(data)
    questions = {v.question for v in found if v.workload == "overall"}
    assert {
        "Which balances partition counts best?",
        "Which balances load best?",
        "Which moves fewest partitions?",
        "Which is fastest?",
    } <= questions
    zipf = {v.metric: v for v in found if v.workload == "zipf-load"}
    assert zipf["load_balance"].strategies == ("weighted-sticky",)
    # Moves fewest: only among the strategies that balance partition counts.
    assert zipf["moved"].gate is not None
    assert "weighted-sticky" in zipf["moved"].gate["excluded"]
    assert "weighted-sticky" not in zipf["moved"].strategies
    html = render_html(data)
    assert html.count("data:image/png;base64,") >= 4


def test_the_glossary_lists_only_the_metrics_of_the_run(lab_run: Any) -> None:
    data = load_report(lab_run.out)
    glossary = render_html(data).split("<h2 id='metrics'>", 1)[1]
    present = {row["metric"] for row in data["analysis"]["estimates"]}
    for name in present:
        assert f">{name}<" in glossary, name
    for name in set(data["metrics"]) - present:  # election, placement, producer metrics
        assert f">{name}<" not in glossary, name
    assert data["metrics"]["assign_ms"]["measured"] in glossary  # how timings were measured

"""A small elections run on Spark (issue 16): broker-failures at three partition counts gives
each strategy's failover time per partition count, a growth exponent, the chart on the page and
the table in ``coordkit lab show``."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import pytest

from coordkit.cli import main
from coordkit.plugins import get_plugin_manager
from coordkit_lab.report import load_report
from coordkit_lab.scenarios import Preset, PresetCase, expand

#: Spark's start-up and 18 scenarios: minutes on two cores shared with other jobs.
pytestmark = pytest.mark.timeout(900)

STRATEGIES = ["kafka", "latch", "warm-standby"]
#: Partitions per topic, one topic: a span of 12 (the analysis needs 3 sizes over 10x); tiny, so
#: the run takes seconds.
SIZES = (4, 16, 48)
REPLICATES = 2

TINY_ELECTIONS = Preset(
    "tiny-elections",
    "broker-failures at three tiny partition counts",
    (
        PresetCase(
            "broker-failures",
            {
                "brokers": 3,
                "topics": 1,
                "partitions": SIZES,
                "replication_factor": 2,
                "failures": "controller",
                "events": 1,
                "records": 1,
            },
        ),
    ),
    replicates=REPLICATES,
)


@pytest.fixture(scope="module")
def elections_run(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from coordkit_lab.pipeline import run_lab

    out = tmp_path_factory.mktemp("elections-report")
    specs = expand(TINY_ELECTIONS, get_plugin_manager(), seed=77)
    result = run_lab(specs, out, spark=spark, run_info={"preset": TINY_ELECTIONS.name, "seed": 77})
    assert result.failed == 0, result.data["tables"]["errors"]
    return out


@pytest.mark.parametrize("metric", ["failover-seconds", "failover-load-seconds"])
def test_each_strategy_has_a_point_per_partition_count(elections_run: Path, metric: str) -> None:
    data = load_report(elections_run)
    (entry,) = [
        e
        for e in data["analysis"]["scaling"]
        if (e["workload"], e["metric"]) == ("broker-failures", metric)
    ]
    assert sorted(g["strategy"] for g in entry["growth"]) == STRATEGIES
    for growth in entry["growth"]:
        # A scenario's only event fails the controller over: one value per scenario.
        assert [(p["partitions"], p["n"]) for p in growth["points"]] == [
            (size, REPLICATES) for size in SIZES
        ]
        assert all(p["mean"] >= 0 for p in growth["points"])
        assert growth["exponent"] is None or growth["low"] <= growth["exponent"] <= growth["high"]
    assert entry["largest"] == SIZES[-1]
    assert set(entry["winners"]) <= set(STRATEGIES)
    assert entry["winners"]
    # The report's other tables agree: the per-size means come from the same scenarios.
    sizes = {r["partitions"] for r in data["tables"]["scaling"] if r["metric"] == metric}
    assert sizes == set(SIZES)


def test_the_page_shows_the_chart(elections_run: Path) -> None:
    page = (elections_run / "index.html").read_text(encoding="utf-8")
    for metric in ("failover-seconds", "failover-load-seconds"):
        match = re.search(
            rf"<img alt='broker-failures: {metric} against partitions' "
            r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'>",
            page,
        )
        assert match is not None, metric
        assert base64.b64decode(match.group(1)).startswith(b"\x89PNG")
    assert "broker-failures: failover-seconds (seconds) against partitions" in page
    assert "<b>Which scales best?</b> failover-seconds on broker-failures" in page


def test_lab_show_prints_the_growth_table(
    elections_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = 0
    try:
        main(["lab", "show", str(elections_run)])
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr().out
    assert code == 0, out
    text = re.sub(r"\s+", " ", out)
    assert "broker-failures: failover-seconds (seconds) against partitions" in text
    assert "Which scales best?" in text
    assert "failover-seconds ∝ partitions^exponent" in text
    sizes = r"\D+".join(str(size) for size in SIZES)
    assert any(re.search(rf"(?<!\d){sizes}(?!\d)", line) for line in out.splitlines()), out
    for strategy in STRATEGIES:  # a row per strategy, ending with its exponent
        assert re.search(rf"{strategy}\b.*-?\d\.\d\d( \[.*\])?\s*│", out), strategy

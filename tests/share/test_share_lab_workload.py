"""The lab's ``share-groups`` workload with its processes (py311-share, out of the default run): a
share group of confluent-kafka ``ShareConsumer`` processes on coordkit's brokers in a process of
their own (and on Apache Kafka 4.4 for the ``simple@kafka`` row), a producer throughout, a member
stalling past its record lock and one killed with SIGKILL; the metrics come from what the
processes recorded. The same workload without processes (the analysis of recorded logs) is
tests/unit/test_share_lab_analysis.py."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from coordkit.plugins import get_plugin_manager
from coordkit_share_assignors.lab.analysis import SHARE_KIND, ShareStep
from harness.docs import code_block, page

#: Two members, four partitions, two events; records released and rejected often enough to see.
SMALL: dict[str, Any] = {
    "partitions": 4, "consumers": 2, "events": 2, "rate": 50.0, "gap": 1.0,
    "lock_ms": 2000, "session_ms": 4000, "release": 0.05, "reject": 0.02,
}  # fmt: skip


def _seed_with(actions: tuple[str, ...]) -> int:
    workload = get_plugin_manager().workload("share-groups")
    params = {**workload.defaults, **SMALL}
    return next(
        s for s in range(200)
        if tuple(e.action for e in workload.generate(params, s).events) == actions
    )  # fmt: skip


def _run(strategy: str) -> list[ShareStep]:
    workload = get_plugin_manager().workload("share-groups")
    found = [s for s in workload.simulate(SMALL, _seed_with(("stall", "crash")), strategy)]
    assert all(s.kind == SHARE_KIND for s in found)
    return [s for s in found if isinstance(s, ShareStep)]


def _check_real_deliveries(found: list[ShareStep]) -> None:
    initial, stall, crash = found
    assert [s.event_kind for s in found] == ["initial", "stall", "crash"]
    assert all(s.deliveries > 0 and s.sent > 0 for s in found)
    # Nothing acknowledged to the producer goes unsettled; nothing is accepted twice (the
    # stalled member's late acceptance is refused: its lock had lapsed).
    assert [s.lost for s in found] == [0, 0, 0]
    assert [s.duplicates_accepted for s in found] == [0, 0, 0]
    # The scripted releases come back; the stall's records are delivered again unreleased.
    assert sum(s.released for s in found) > 0
    assert sum(s.rejected for s in found) > 0
    assert sum(s.redeliveries for s in found) >= sum(s.released for s in found[:2])
    assert stall.held_past_lock > 0
    assert initial.balance_cv is not None
    assert len(initial.rates) == 2
    assert crash.members == 1
    assert crash.balance_cv is None
    for step in found:
        p50, p99 = step.accept_latency_ms(0.5), step.accept_latency_ms(0.99)
        assert p50 is not None
        assert p99 is not None
        assert 0 < p50 <= p99
        assert step.delivery_latency_ms(0.5) <= p50  # type: ignore[operator]
    # A stalled member's records wait out at least their lock (2 s) before they are accepted.
    assert stall.accept_latency_ms(1.0) > 2000  # type: ignore[operator]


@pytest.mark.timeout(600)
def test_a_coordkit_share_assignor_is_measured_from_real_deliveries() -> None:
    _check_real_deliveries(_run("load-balanced"))


@pytest.mark.timeout(900)
def test_the_kafka_row_runs_the_same_schedule_on_kafka() -> None:
    _check_real_deliveries(_run("simple@kafka"))


@pytest.mark.timeout(1800)
def test_the_documented_command_compares_the_share_assignors_with_kafka(tmp_path: Path) -> None:
    """The command of docs/lab.md's share-groups section, as written, in a process of its own."""
    block = code_block(page("lab.md"), "Share groups: share assignors beside Kafka", "sh")
    [line] = [x for x in block.text.splitlines() if x.startswith("coordkit lab run")]
    words = shlex.split(line)
    done = subprocess.run(
        [sys.executable, "-m", "coordkit_lab", *words[2:]],
        capture_output=True, text=True, timeout=1700, check=False, cwd=tmp_path,
        env=dict(os.environ),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((tmp_path / words[words.index("--out") + 1] / "summary.json").read_text())
    assert set(summary["run"]["strategies"]) == {"simple", "load-balanced", "simple@kafka"}


def test_a_bad_strategy_on_the_command_line_is_one_line_and_status_2(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "coordkit_lab", "run", "-w", "share-groups", "-s", "nope",
         "--master", "local[1]", "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    # click's usage lines, then the one line saying what was wrong.
    error = done.stderr.strip().splitlines()[-1]
    assert error.startswith("Error:"), done.stderr
    assert "unknown strategy 'nope'" in error
    assert "simple@kafka" in error

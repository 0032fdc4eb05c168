"""``coordkit group run`` and ``coordkit group describe`` end to end, on the backend under test."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from click.testing import CliRunner, Result

from coordkit.cli import cli
from coordkit.cli.group.legacy import unowned_between
from coordkit.cli.group.view import compact_partitions
from coordkit.engine.legacy import OwnershipChange, OwnershipEvent
from coordkit.kafka.model import TopicPartition

#: Short timeouts keep each run to a few seconds; what the tests check does not depend on them.
FAST = (
    "--session-timeout",
    "1.0",
    "--heartbeat-interval",
    "0.1",
    "--rebalance-timeout",
    "3",
    "--offsets-partitions",
    "5",
    "--timeout",
    "20",
    "--seed",
    "3",
)


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["group", *args], env={"COLUMNS": "200"})


def _run_json(store_url: str, *args: str) -> dict[str, dict[str, Any]]:
    result = _invoke("run", "--store", store_url, *FAST, "--format", "json", *args)
    assert result.exit_code == 0, result.output
    steps = json.loads(result.output)["steps"]
    by_label = {s["step"]: s for s in steps}
    assert len(by_label) == len(steps)
    return by_label


def _describe(store_url: str, group: str) -> dict[str, Any]:
    result = _invoke("describe", "--store", store_url, "--group", group, "--format", "json")
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.output)
    return document


def _consumers(step: dict[str, Any]) -> list[int]:
    return sorted(m["consumer"] for m in step["members"])


def _member(step: dict[str, Any], consumer: int) -> dict[str, Any]:
    return next(m for m in step["members"] if m["consumer"] == consumer)


def _assert_owned_once(step: dict[str, Any], partitions: list[str]) -> None:
    owned = Counter(tp for m in step["members"] for tp in m["partitions"])
    assert sorted(owned) == sorted(partitions), step
    assert set(owned.values()) == {1}, step


# -- pieces ------------------------------------------------------------------------------------


def test_compact_partitions_collapses_runs_per_topic() -> None:
    parts = [TopicPartition("t0", p) for p in (7, 0, 1, 2, 3, 4)] + [TopicPartition("t1", 2)]
    assert compact_partitions(parts) == "t0[0-4,7] t1[2]"
    assert compact_partitions([TopicPartition("a", 3), TopicPartition("a", 5)]) == "a[3,5]"
    assert compact_partitions([]) == "-"


def test_unowned_between_integrates_over_the_window_only() -> None:
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    claimed, released = OwnershipChange.CLAIMED, OwnershipChange.RELEASED
    moves = [(0.0, a, claimed), (0.0, b, claimed), (1.0, a, released), (3.0, a, claimed)]
    events = [
        OwnershipEvent(n, at, "g", tp, "g_c-0", "g_c", change, "rebalance")
        for n, (at, tp, change) in enumerate(moves)
    ]
    # a is unowned from 1.0 to 3.0; b never is.
    assert unowned_between(events, frozenset({a, b}), 0.5, 4.0) == (1, 2.0)
    assert unowned_between(events, frozenset({a, b}), 2.0, 2.5) == (1, 0.5)
    assert unowned_between(events, frozenset({a, b}), 3.5, 4.0) == (0, 0.0)


# -- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--step", "explode:1"], "unknown step 'explode:1'"),
        (["--step", "leave"], "step 'leave': expected leave:I"),
        (["--step", "crash:x"], "step 'crash:x': 'x' is not a whole number"),
        (["--step", "sleep:soon"], "step 'sleep:soon': 'soon' is not a number of seconds"),
        (["--step", "commit:1"], "step 'commit:1': expected commit"),
        (["--step", "join:0"], "step 'join:0': the count must be at least 1"),
        (["--consumers", "2", "--step", "leave:2"], "step 'leave:2': there is no consumer 2"),
        (["--step", "restart:0"], "step 'restart:0': consumer 0 is running (step 1)"),
        (
            ["--step", "crash:1", "--step", "leave:1"],
            "step 'leave:1': consumer 1 already stopped (step 2)",
        ),
        (["--brokers", "1", "--step", "kill-coordinator"], "step 'kill-coordinator'"),
        (["--legacy", "--step", "kill-coordinator"], "legacy consumers have no group coordinator"),
        (["--assignor", "nope"], "nope"),
        (["--legacy", "--assignor", "range", "--assignor", "roundrobin"], "one assignor"),
        (["--session-timeout", "1", "--heartbeat-interval", "2"], "heartbeat_interval"),
        (["--topic", "t0:x:2"], "NAME:PARTITIONS:REPLICATION_FACTOR"),
        (["--offset-storage", "floppy"], "floppy"),
    ],
)
def test_run_refuses_bad_input_before_starting(args: list[str], expected: str) -> None:
    result = _invoke("run", *args)
    assert result.exit_code == 2, result.output
    assert expected in result.output
    assert "Stable" not in result.output  # nothing was started


def test_join_leave_crash_and_coordinator_kill(store_url: str) -> None:
    steps = _run_json(
        store_url,
        "--group",
        "orders-app",
        "--topic",
        "t0:6:2",
        "--consumers",
        "2",
        "--produce",
        "3",
        "--step",
        "join",
        "--step",
        "leave:0",
        "--step",
        "crash:1",
        "--step",
        "kill-coordinator",
        "--step",
        "produce:4",
        "--step",
        "commit",
    )
    labels = list(steps)
    assert labels[1:] == [
        "after join",
        "after leave:0",
        "after crash:1",
        "after kill-coordinator",
        "after produce:4",
        "after commit",
    ]
    partitions = [f"t0-{p}" for p in range(6)]
    started = steps[labels[0]]
    joined, left, crashed = steps["after join"], steps["after leave:0"], steps["after crash:1"]
    moved, committed = steps["after kill-coordinator"], steps["after commit"]
    for step in steps.values():
        assert step["state"] == "Stable"
        assert step["protocol"] == "range"
        assert step["leader"] in {m["member_id"] for m in step["members"]}
        _assert_owned_once(step, partitions)
    assert _consumers(started) == [0, 1]
    assert _consumers(joined) == [0, 1, 2]
    assert _consumers(left) == [1, 2]
    assert _consumers(crashed) == [2]
    assert _consumers(moved) == [2]
    # Each membership change is one new generation, reported with the rebalance that made it.
    generations = [s["generation"] for s in (started, joined, left, crashed)]
    assert generations == sorted(set(generations))
    for step, why in ((joined, "joined"), (left, "left"), (crashed, "session timed out")):
        last = step["rebalances"][-1]
        assert last["generation"] == step["generation"]
        assert why in last["reason"]
        assert last["rounds"] >= 1
    crashed_member = _member(left, 1)["member_id"]
    assert crashed_member in crashed["rebalances"][-1]["reason"]
    # A crash leaves its partitions unowned until the session timeout.
    assert crashed["rebalances"][-1]["unowned_partitions"] >= len(_member(left, 1)["partitions"])
    assert crashed["rebalances"][-1]["partition_seconds"] > 0
    # The coordinator moves; the group keeps its members and generation.
    assert moved["coordinator"] != crashed["coordinator"]
    assert moved["generation"] == crashed["generation"]
    assert _member(moved, 2)["member_id"] == _member(crashed, 2)["member_id"]
    # --produce 3 is lag until the produce step's poll consumes it and what it added.
    assert sum(m["lag"] for m in started["members"]) == 3 * 6
    assert all(m["lag"] == 0 for m in steps["after produce:4"]["members"])

    stored = _describe(store_url, "orders-app")
    assert stored["offsets"] == dict.fromkeys(partitions, 7)
    metadata = stored["metadata"]
    assert metadata["generation"] == committed["generation"]
    assert [m["member_id"] for m in metadata["members"]] == [_member(committed, 2)["member_id"]]
    assert sorted(metadata["members"][0]["assignment"]) == partitions
    assert stored["legacy"] is None


def test_static_member_restarts_under_its_instance_id(store_url: str) -> None:
    result = _invoke(
        "run",
        "--store",
        store_url,
        *FAST,
        "--static",
        "--assignor",
        "cooperative-sticky",
        "--consumers",
        "2",
        "--step",
        "crash:0",
        "--step",
        "restart:0",
        "--watch",
        "0.3",
    )
    assert result.exit_code == 0, result.output
    restarted = result.output.split("after restart:0", 1)[1]
    assert "demo-i0" in restarted
    assert "demo-i1" in restarted
    assert "cooperative-sticky" in restarted
    crashed = result.output.split("after crash:0", 1)[1].split("after restart:0", 1)[0]
    assert "demo-i0" in crashed  # the reason names the timed-out member
    assert "session timed out" in crashed
    assert "│ c0" not in crashed


def test_legacy_consumers(store_url: str) -> None:
    steps = _run_json(
        store_url,
        "--legacy",
        "--static",
        "--group",
        "billing",
        "--topic",
        "t0:4:2",
        "--topic",
        "t1:2:1",
        "--consumers",
        "2",
        "--step",
        "join",
        "--step",
        "crash:0",
        "--step",
        "produce:5",
        "--step",
        "commit",
    )
    partitions = [f"t0-{p}" for p in range(4)] + [f"t1-{p}" for p in range(2)]
    for step in steps.values():
        assert step["state"] == "Stable"
        assert step["generation"] is None
        assert step["coordinator"] is None
        _assert_owned_once(step, partitions)
    joined, crashed = steps["after join"], steps["after crash:0"]
    assert _consumers(joined) == [0, 1, 2]
    assert _consumers(crashed) == [1, 2]
    assert [_member(joined, n)["member_id"] for n in range(3)] == [
        "billing_i0",
        "billing_i1",
        "billing_i2",
    ]
    # Every consumer wakes up for every membership change (the herd effect).
    for step in (joined, crashed):
        (rebalance,) = step["rebalances"]
        assert rebalance["rounds"] >= len(step["members"])
        assert rebalance["attempts"] >= rebalance["rounds"]
        assert rebalance["store_ops"]["writes"] > 0
    assert all(m["lag"] == 0 for m in steps["after commit"]["members"])

    stored = _describe(store_url, "billing")
    legacy = stored["legacy"]
    assert legacy is not None
    assert legacy["offsets"] == dict.fromkeys(partitions, 5)
    assert stored["metadata"] is None


def test_describe_names_a_group_with_nothing_stored(store_url: str, open_session: Any) -> None:
    open_session()  # the namespace exists (a describe never creates it), the group does not
    result = _invoke("describe", "--store", store_url, "--group", "absent")
    assert result.exit_code == 1
    assert "group 'absent': nothing stored" in result.output
    result = _invoke("describe", "--store", store_url, "--group", "a/b")
    assert result.exit_code == 2
    assert "--group" in result.output

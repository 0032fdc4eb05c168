"""``coordkit cluster demo`` end to end, on the backend under test."""

from __future__ import annotations

import json
from typing import Any

from click.testing import CliRunner

from coordkit.cli import cli


def _run(*args: str) -> Any:
    result = CliRunner().invoke(cli, ["cluster", "demo", *args], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result


def test_demo_kills_and_restarts_a_broker(store_url: str) -> None:
    result = _run(
        "--store",
        store_url,
        "--brokers",
        "3",
        "--topic",
        "orders:6:2",
        "--step",
        "produce:10",
        "--step",
        "replicate",
        "--kill",
        "1",
        "--restart",
        "1",
        "--format",
        "json",
        "--show-tree",
        "--seed",
        "3",
    )
    document = json.loads(result.output)
    steps = {s["step"]: s for s in document["steps"]}
    assert list(steps) == [
        next(iter(steps)),
        "created orders:6:2",
        "after produce:10",
        "after replicate",
        "after kill:1",
        "after restart:1",
    ]
    created = steps["created orders:6:2"]
    assert created["epoch"] >= 1
    assert created["brokers"] == [0, 1, 2]
    assert len(created["partitions"]) == 6
    killed = steps["after kill:1"]
    assert killed["brokers"] == [0, 2]
    assert killed["offline"] == []
    assert all(p["leader"] != 1 and 1 not in p["isr"] for p in killed["partitions"].values())
    assert killed["store_ops"]["writes"] > 0
    assert steps["after restart:1"]["brokers"] == [0, 1, 2]
    tree = document["tree"]
    assert tree["/brokers/ids/1"]["ephemeral"] is True
    assert json.loads(tree["/brokers/topics/orders"]["value"])["partitions"].keys() == {
        "0",
        "1",
        "2",
        "3",
        "4",
        "5",
    }
    state = json.loads(tree["/brokers/topics/orders/partitions/0/state"]["value"])
    assert list(state) == ["controller_epoch", "leader", "version", "leader_epoch", "isr"]
    assert tree["/controller"]["ephemeral"] is True


def test_demo_table_with_latch_and_controlled_stop(store_url: str) -> None:
    result = _run(
        "--store",
        store_url,
        "--brokers",
        "3",
        "--controller-election",
        "latch",
        "--topic",
        "t:3:3",
        "--step",
        "stop:0",
    )
    assert "leaders per broker" in result.output
    final = result.output.split("after stop:0", 1)[1].splitlines()
    summary = [c.strip() for c in final[4].split("│")[1:-1]]
    assert summary[2] == "1,2"  # brokers
    assert summary[4] == "0"  # offline partitions
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in final if "│ t-" in line]
    assert len(rows) == 3
    for _partition, replicas, leader, _epoch, isr, _ctrl in rows:
        assert replicas.count(",") == 2
        assert leader in {"1", "2"}
        assert "0" not in isr.split(",")


def test_demo_rejects_bad_steps() -> None:
    result = CliRunner().invoke(cli, ["cluster", "demo", "--step", "explode:1"])
    assert result.exit_code == 2
    assert "unknown step 'explode:1'" in result.output
    result = CliRunner().invoke(cli, ["cluster", "demo", "--topic", "orders:x:2"])
    assert result.exit_code == 2
    assert "NAME:PARTITIONS:REPLICATION_FACTOR" in result.output


def test_check_reads_the_invariants_from_the_store(store_url: str, open_session: Any) -> None:
    """``coordkit cluster check`` on the tree a finished demo left (its brokers are gone): each
    violation named with its path, exit status 1, nothing written."""
    demo = _run("--store", store_url, "--topic", "t:4:2", "--format", "json", "--seed", "1")
    last = json.loads(demo.output)["steps"][-1]
    assert last["violations"] == []
    runner = CliRunner()
    check = runner.invoke(cli, ["cluster", "check", "--store", store_url, "--format", "json"])
    report = json.loads(check.output)
    assert check.exit_code == 1
    assert report["partitions"] == 4
    # The demo's brokers stopped and nothing runs now: no controller, and every state still
    # names a leader that is no longer registered.
    states = {f"/brokers/topics/t/partitions/{p}/state" for p in range(4)}
    by_path: dict[str, list[str]] = {}
    for v in report["violations"]:
        by_path.setdefault(v["path"], []).append(v["message"])
    # (a state the last controller left leaderless with its last ISR member is fine).
    assert "/controller" in by_path
    assert set(by_path) <= {"/controller", *states}
    assert all(
        any("not a registered broker" in m or "dead broker" in m for m in by_path[p])
        for p in set(by_path) & states
    )
    store = open_session()
    before = {
        p: store.get(p) for p in ("/brokers/topics/t", "/brokers/topics/t/partitions/0/state")
    }
    path = "/brokers/topics/t/partitions/2/state"
    store.set(path, b'{"controller_epoch":1,"leader":7,"version":1,"leader_epoch":0,"isr":[7]}')
    text = runner.invoke(cli, ["cluster", "check", "--store", store_url])
    assert text.exit_code == 1
    assert f"{path}: ISR [7] holds [7], not replicas" in text.output
    assert "violation(s): 4 partition(s) checked" in text.output
    # Read-only: nothing else changed.
    assert {p: store.get(p) for p in before} == before

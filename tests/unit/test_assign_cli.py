"""``coordkit assign`` and the JSON input/output it is built on (coordkit.strategies.assignment_io)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from coordkit.cli import main
from coordkit.errors import AssignmentInputError
from coordkit.plugins import get_plugin_manager
from coordkit.strategies.assignment import (
    GroupAssignment,
    GroupSubscription,
    MemberSubscription,
    TopicMetadata,
)
from coordkit.strategies.assignment_io import (
    assignment_from_json,
    assignment_to_json,
    dump_group,
    loads_group,
    parse_group,
    summarize,
)

EXAMPLE: dict[str, Any] = {
    "topics": {
        "t0": 3,
        "t1": {"partitions": 2, "replica_racks": [["a", "b"], ["b", "c"]], "loads": [5, 1]},
    },
    "members": {
        "C0": {
            "topics": ["t0", "t1"],
            "instance_id": "i1",
            "owned": ["t0-0"],
            "generation": 1,
            "rack": "a",
        },
        "C1": {"topics": ["t0"]},
    },
}


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        main(argv)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def example_file(tmp_path: Path) -> Path:
    path = tmp_path / "group.json"
    path.write_text(json.dumps(EXAMPLE))
    return path


def test_json_output(example_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        ["assign", "--assignor", "range", "--format", "json", str(example_file)], capsys
    )
    assert (code, err) == (0, "")
    result = json.loads(out)
    assert result["assignor"] == "range"
    # range over t0 (C0, C1): C0 0-1, C1 2; t1 only C0.
    assert result["assignment"] == {"C0": ["t0-0", "t0-1", "t1-0", "t1-1"], "C1": ["t0-2"]}
    assert result["withheld"] == {}
    summary = result["summary"]
    assert summary["members"] == 2
    assert summary["partitions"] == 5
    assert summary["counts"] == {"C0": 4, "C1": 1}
    assert summary["balance"] == 3
    assert summary["moves"] == 0  # C0 keeps the t0-0 it owned
    # Loads: t0 partitions weigh 1, t1 5 and 1 → C0 8, C1 1, mean 4.5.
    assert summary["load_balance"] == pytest.approx(8 / 4.5)
    assert summary["time_s"] >= 0


def test_json_output_counts_moves(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    group = {
        "topics": {"t": 4},
        "members": {
            "A": {"topics": ["t"], "owned": ["t-2", "t-3"]},
            "B": {"topics": ["t"], "owned": ["t-0", "t-1"]},
        },
    }
    path = tmp_path / "g.json"
    path.write_text(json.dumps(group))
    code, out, _ = run(["assign", "-a", "range", "--format", "json", str(path)], capsys)
    summary = json.loads(out)["summary"]
    assert code == 0
    assert summary["moves"] == 4  # range ignores ownership: A gets 0-1, B 2-3
    assert summary["load_balance"] is None
    code, out, _ = run(["assign", "-a", "uniform", "--format", "json", str(path)], capsys)
    assert json.loads(out)["summary"]["moves"] == 0


def test_reads_stdin_without_file(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(EXAMPLE)))
    code, out, _ = run(["assign", "-a", "roundrobin", "--format", "json"], capsys)
    assert code == 0
    assert json.loads(out)["assignment"] == {"C0": ["t0-0", "t0-2", "t1-0", "t1-1"], "C1": ["t0-1"]}


def test_reads_stdin_from_dash(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(EXAMPLE)))
    code, out, _ = run(["assign", "-a", "uniform", "--format", "json", "-"], capsys)
    assert code == 0
    assert json.loads(out)["assignor"] == "uniform"


def test_table_output_lists_members_and_summary(
    example_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["assign", "-a", "weighted-sticky", str(example_file)], capsys)
    assert code == 0
    assert "weighted-sticky" in out
    for text in ("C0", "C1", "i1", "2 members", "5 partitions", "load balance"):
        assert text in out
    assert "t0[" in out  # partitions folded into runs


@pytest.mark.parametrize("name", get_plugin_manager().assignors.names())
def test_every_registered_assignor_runs_from_the_command_line(
    name: str, example_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["assign", "-a", name, "--format", "json", str(example_file)], capsys)
    assert (code, err) == (0, "")
    result = json.loads(out)
    handed_out = [
        p for ps in [*result["assignment"].values(), *result["withheld"].values()] for p in ps
    ]
    assert sorted(handed_out) == ["t0-0", "t0-1", "t0-2", "t1-0", "t1-1"]


def test_unknown_assignor_lists_the_available_ones(
    example_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["assign", "-a", "fastest", str(example_file)], capsys)
    assert code == 2
    assert "unknown assignor 'fastest'" in err
    for name in ("range", "roundrobin", "uniform", "weighted-sticky"):
        assert name in err


def _with(path: str, value: Any) -> dict[str, Any]:
    """EXAMPLE with the value at a dotted path replaced (``None`` path segment values delete)."""
    data: dict[str, Any] = json.loads(json.dumps(EXAMPLE))
    keys = path.split(".")
    target = data
    for key in keys[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[keys[-1]]
    else:
        target[keys[-1]] = value
    return data


_DELETE = object()

INVALID = [
    (_with("topics.t0", -3), "topics.t0: partition count must be a non-negative integer, got -3"),
    (_with("topics.t0", "3"), "topics.t0: expected a partition count or an object"),
    (_with("topics.t0", {"count": 3}), "topics.t0.count: unknown field"),
    (
        _with("topics.t1.partitions", True),
        "topics.t1.partitions: partition count must be a non-negative integer",
    ),
    (_with("topics.t1.loads", [5]), "topics.t1.loads: lists 1 partitions, the topic has 2"),
    (_with("topics.t1.loads", [5, -1]), "topics.t1.loads[1]: load must be a non-negative number"),
    (
        _with("topics.t1.replica_racks", [["a"], [7]]),
        "topics.t1.replica_racks[1][0]: rack must be a non-empty string",
    ),
    (_with("members.C0.topics", "t0"), "members.C0.topics: expected a list, got a string"),
    (_with("members.C0.topics", ["t0", "t0"]), "members.C0.topics[1]: topic t0 is listed twice"),
    (_with("members.C0.topics", _DELETE), "members.C0.topics: missing"),
    (
        _with("members.C0.owned", ["t0-0", "t0-7"]),
        "members.C0.owned[1]: partition t0-7 does not exist (t0 has 3 partitions)",
    ),
    (_with("members.C0.owned", ["t9-0"]), "members.C0.owned[0]: unknown topic t9 (topics: t0, t1)"),
    (
        _with("members.C0.owned", ["t0"]),
        "members.C0.owned[0]: 't0' is not a partition written topic-partition",
    ),
    (
        _with("members.C0.owned", ["t0-1", "t0-1"]),
        "members.C0.owned[1]: partition t0-1 is listed twice",
    ),
    (
        _with("members.C0.generation", "1"),
        "members.C0.generation: expected an integer, got a string",
    ),
    (_with("members.C0.rack", 3), "members.C0.rack: expected a non-empty string or null"),
    (
        _with("members.C0.colour", "red"),
        "members.C0.colour: unknown field (allowed: topics, instance_id, owned",
    ),
    (
        _with("members.C1.instance_id", "i1"),
        "members.C1.instance_id: instance id 'i1' is also used by member C0",
    ),
    (_with("members", {}), "members: a group needs at least one member"),
    (_with("extra", 1), "extra: unknown field (allowed: topics, members)"),
    (_with("topics", _DELETE), "topics: missing"),
    ([1, 2], "input: expected an object, got a list"),
]


@pytest.mark.parametrize(("data", "message"), INVALID, ids=[m.split(":")[0] for _, m in INVALID])
def test_invalid_input_names_the_field(
    data: Any, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    code, out, err = run(["assign", str(path)], capsys)
    assert code == 2
    assert out == ""
    assert message in err
    with pytest.raises(
        AssignmentInputError,
        match="^" + re.escape(message.split(":", maxsplit=1)[0]),
    ):
        parse_group(data)


def test_duplicate_json_keys_are_rejected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "dup.json"
    path.write_text('{"topics": {"t0": 1, "t0": 2}, "members": {"C0": {"topics": ["t0"]}}}')
    code, _, err = run(["assign", str(path)], capsys)
    assert code == 2
    assert "topics.t0: given more than once" in err
    with pytest.raises(AssignmentInputError, match=r"members\.C0: given more than once"):
        loads_group('{"topics": {}, "members": {"C0": {"topics": []}, "C0": {"topics": []}}}')


def test_malformed_json_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"topics": {"t0": 3,}')
    code, _, err = run(["assign", str(path)], capsys)
    assert code == 2
    assert "input: not valid JSON" in err
    assert "line 1" in err


def test_missing_file_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["assign", str(tmp_path / "nope.json")], capsys)
    assert code == 2
    assert "nope.json" in err


# -- assignment_io directly ----------------------------------------------------------------------


def test_parse_and_dump_round_trip() -> None:
    group = parse_group(EXAMPLE)
    assert group.topics["t1"] == TopicMetadata(
        2, replica_racks=[["a", "b"], ["b", "c"]], loads=[5.0, 1.0]
    )
    assert group.members["C0"] == MemberSubscription(
        ["t0", "t1"], instance_id="i1", owned={"t0": [0]}, generation=1, rack="a"
    )
    assert group.members["C1"] == MemberSubscription(["t0"])
    assert parse_group(dump_group(group)) == group
    assert dump_group(group)["members"]["C1"] == {"topics": ["t0"]}


def test_subscribing_to_a_topic_without_metadata_is_allowed() -> None:
    group = parse_group({"topics": {}, "members": {"C0": {"topics": ["later"]}}})
    assert group.members["C0"].topics == ("later",)


def test_assignment_json_round_trip_with_withheld() -> None:
    group = GroupSubscription(
        {"t": 3},
        {
            "A": MemberSubscription(["t"], owned=["t-0", "t-1", "t-2"]),
            "B": MemberSubscription(["t"]),
        },
    )
    # A cooperative round: B's share (t-2) is revoked from A and withheld from B until next round.
    assignment = GroupAssignment.from_partitions(
        {"t": 3}, {"A": ["t-0", "t-1"], "B": []}, {"B": ["t-2"]}
    )
    summary = summarize(group, assignment, 0.5)
    assert summary.counts == {"A": 2, "B": 1}
    assert (summary.partitions, summary.withheld, summary.moves, summary.balance) == (3, 1, 1, 1)
    data = assignment_to_json("cooperative-sticky", assignment, summary)
    assert data["withheld"] == {"B": ["t-2"]}
    assert data["summary"]["time_s"] == 0.5
    assert assignment_from_json(json.loads(json.dumps(data)), {"t": 3}) == assignment


def test_moves_ignore_partitions_nobody_gets_any_more() -> None:
    # A owned u-0 but nobody subscribes to u now: a revocation, not a move.
    group = GroupSubscription(
        {"t": 1, "u": 1}, {"A": MemberSubscription(["t"], owned=["u-0", "t-0"])}
    )
    assignment = GroupAssignment.from_partitions({"t": 1, "u": 1}, {"A": ["t-0"]})
    assert summarize(group, assignment).moves == 0

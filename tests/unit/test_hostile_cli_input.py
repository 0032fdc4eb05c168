"""Issue 12, example by example: what a hostile store, file or option value did to the command
line, and what it does now.

Every test's docstring quotes the issue's example. A refused input is one ``error:`` line (or
click's usage error) naming the field, path or option, exit status 2, and the store is left as it
was; text from the store or the input reaches the terminal with control characters escaped and is
never read as rich markup.
"""

from __future__ import annotations

import json
import re
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from coordkit.cli import cli
from coordkit.cli.assign import MAX_PARTITIONS_ENV
from coordkit.errors import NoNodeError, StoreError
from coordkit.plugins import open_store
from coordkit.store import MetadataStore
from coordkit.strategies.assignment import load_balance
from coordkit.strategies.assignment_io import (
    DEFAULT_MAX_PARTITIONS,
    AssignmentTooLargeError,
    loads_group,
)
from coordkit_memory import MemoryServer
from harness.cli import snapshot


def invoke(*args: str, input: bytes | str | None = None, columns: int = 120) -> Result:
    return CliRunner().invoke(cli, list(args), input=input, env={"COLUMNS": str(columns)})


def refused(result: Result, *names: str) -> str:
    """The refusal's message, after checking it is one: exit status 2, no traceback, and it names
    every one of ``names``."""
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    for name in names:
        assert name in result.output, (name, result.output)
    return result.output


def one_error_line(result: Result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), lines[0]
    return lines[0]


@pytest.fixture
def store() -> Iterator[MetadataStore]:
    opened = open_store("memory://hostile-cli")
    yield opened
    opened.close()
    MemoryServer.discard("hostile-cli")


URL = "memory://hostile-cli"
DEEP = b"[" * 100_000 + b"]" * 100_000


# -- crashes: coordkit tree ----------------------------------------------------------------------


def test_tree_shows_a_node_of_100000_deep_json_as_unreadable(store: MetadataStore) -> None:
    """Issue 12: `coordkit tree` on a store where a node holds 100,000-deep JSON
    (RecursionError). The tree shows every node; that one is marked malformed with its path and
    the reason (tree lists malformed nodes, it does not stop at them), in text and JSON; then one
    error line names the first, exit status 2, and nothing is written."""
    store.create("/deep", DEEP)
    store.create("/brokers/topics/t", DEEP, make_parents=True)
    before = snapshot(store)
    text = invoke("tree", "--store", URL)
    assert text.exit_code == 2, text.output
    shown = " ".join(text.output.split())
    assert "malformed: /deep: unreadable JSON: nested deeper than 64 levels" in shown
    assert "malformed: /brokers/topics/t: nested deeper than 64 levels" in shown
    document = invoke("tree", "--store", URL, "--format", "json")
    assert document.exit_code == 2
    nodes = json.loads(document.output[: document.output.rindex("}") + 1])
    assert nodes["/deep"]["value"] == DEEP.decode()
    assert "nested deeper than 64 levels" in nodes["/brokers/topics/t"]["problem"]
    assert snapshot(store) == before


def test_tree_names_a_partition_key_written_in_superscript(store: MetadataStore) -> None:
    """Issue 12: `coordkit tree` on a topic node whose partition key is "²" (ValueError: invalid
    literal for int()): the node is shown, its problem naming the path and the field."""
    store.create(
        "/brokers/topics/t", '{"version":1,"partitions":{"²":[0]}}'.encode(), make_parents=True
    )
    store.create("/brokers/topics/t/partitions/²/state", b"{}", make_parents=True)
    result = invoke("tree", "--store", URL, columns=200)
    assert result.exit_code == 2, result.output
    assert (
        "/brokers/topics/t: field 'partitions': partition key '²' is not a partition number"
        in result.output
    )
    assert "error: malformed /brokers/topics/t" in result.output


def test_tree_of_a_missing_node_says_no_node_without_an_op_index() -> None:
    """Issue 12: `coordkit tree /nope` prints `error: /nope: no node (op 0)`: `(op 0)` means
    nothing to a user."""
    result = invoke("tree", "--store", "memory://", "/nope")
    refused(result)
    assert one_error_line(result) == "error: /nope: no node"


def test_store_errors_keep_their_op_index_but_do_not_show_it() -> None:
    """Issue 12: keep op_index for transactions but don't show it for single operations."""
    error = NoNodeError("no node", path="/a", op_index=3)
    assert str(error) == "/a: no node"
    assert error.op_index == 3
    assert str(StoreError("connection lost", op_index=0)) == "connection lost"


# -- crashes and markup: coordkit group describe -----------------------------------------------


def test_group_describe_shows_an_owner_holding_markup_as_it_is(store: MetadataStore) -> None:
    """Issue 12: `coordkit group describe` when `/consumers/g/owners/t/0` holds `[/oops]`
    (rich.errors.MarkupError)."""
    store.create("/consumers/g/owners/t/0", b"[/oops]", make_parents=True)
    store.create("/consumers/g/owners/t/1", b"[bold red]hi\x1b]0;pwn\x07", make_parents=True)
    before = snapshot(store)
    result = invoke("group", "describe", "--store", URL, "--group", "g")
    assert result.exit_code == 0, result.output
    assert "[/oops]" in result.output
    assert "[bold red]hi\\x1b]0;pwn\\x07" in result.output
    assert "\x1b" not in result.output
    assert snapshot(store) == before


def test_group_describe_refuses_deep_group_metadata(store: MetadataStore) -> None:
    """Issue 12: `coordkit group describe` when `/coordkit/groups/g` holds deep JSON
    (`core/coordkit/engine/groups/metadata.py` uses `json.loads`)."""
    store.create("/coordkit/groups/g", DEEP, make_parents=True)
    before = snapshot(store)
    result = invoke("group", "describe", "--store", URL, "--group", "g")
    line = one_error_line(result)
    refused(result)
    assert line == "error: /coordkit/groups/g: nested deeper than 64 levels"
    assert snapshot(store) == before


def test_group_metadata_errors_name_the_member_field(store: MetadataStore) -> None:
    """Issue 12 (group metadata decoding): a member field of the wrong type names the field."""
    member = {
        "member_id": "c1",
        "client_id": "c1",
        "session_timeout_ms": 1000,
        "rebalance_timeout_ms": 1000,
        "protocols": ["range"],
        "topics": ["t"],
        "assignment": {"t": [0, "1"]},
    }
    doc = {
        "version": 1,
        "generation": 1,
        "protocol_type": "consumer",
        "protocol": "range",
        "leader": "c1",
        "members": [member],
    }
    store.create("/coordkit/groups/g", json.dumps(doc).encode(), make_parents=True)
    line = one_error_line(invoke("group", "describe", "--store", URL, "--group", "g"))
    assert "/coordkit/groups/g: field 'members[0].assignment.t[1]'" in line


def test_offsets_of_a_bad_topic_are_reported_against_their_own_path(
    store: MetadataStore,
) -> None:
    """Issue 12: offsets under `/consumers/g/offsets/bad topic/0` are reported against
    `/brokers/topics/bad topic`."""
    store.create("/consumers/g/offsets/bad topic/0", b"5", make_parents=True)
    for storage in ("zookeeper", "offsets-topic"):
        result = invoke(
            "group", "describe", "--store", URL, "--group", "g", "--offset-storage", storage
        )
        line = one_error_line(result)
        assert line.startswith("error: /consumers/g/offsets/bad topic: field 'topic'"), line
        assert "/brokers/topics" not in line


def test_offsets_under_a_superscript_partition_are_skipped_not_crashed_on(
    store: MetadataStore,
) -> None:
    """Issue 12 (numeric_name): a partition node called "²" is no partition; reading offsets
    lists the others."""
    store.create("/consumers/g/offsets/t/²", b"5", make_parents=True)
    store.create("/consumers/g/offsets/t/1", b"7", make_parents=True)
    result = invoke(
        "group",
        "describe",
        "--store",
        URL,
        "--group",
        "g",
        "--offset-storage",
        "zookeeper",
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["offsets"] == {"t-1": 7}


# -- crashes: coordkit assign --------------------------------------------------------------------

GROUP = {"members": {"c": {"topics": ["t0"]}}}


def _group(**topics: object) -> str:
    return json.dumps({"topics": topics, **GROUP})


def test_assign_refuses_a_billion_partitions_before_allocating() -> None:
    """Issue 12: `coordkit assign` with `{"topics": {"t0": 1000000000}, ...}`: the process grows
    until the machine kills it. Wanted: a limit checked before allocating, with the size asked
    for, the limit, and how to raise it (an option/env var)."""
    text = _group(t0=1_000_000_000)
    tracemalloc.start()
    try:
        with pytest.raises(AssignmentTooLargeError) as raised:
            loads_group(text)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000, f"{peak:,} bytes allocated before refusing"
    assert (raised.value.requested, raised.value.limit) == (1_000_000_000, DEFAULT_MAX_PARTITIONS)
    result = invoke("assign", input=text)
    refused(result)
    line = one_error_line(result)
    assert "1,000,000,000" in line
    assert f"{DEFAULT_MAX_PARTITIONS:,}" in line
    assert "--max-partitions" in line
    assert MAX_PARTITIONS_ENV in line


def test_assign_partition_limit_is_raised_by_option_or_environment() -> None:
    """Issue 12: ... and how to raise it (an option/env var)."""
    text = _group(t0=4, t1=3)
    line = one_error_line(invoke("assign", "--max-partitions", "6", input=text))
    assert "topics.t1: 3 partitions make 7 in all, more than the limit of 6" in line
    assert invoke("assign", "--max-partitions", "7", input=text).exit_code == 0
    raised = CliRunner().invoke(cli, ["assign"], input=text, env={MAX_PARTITIONS_ENV: "7"})
    assert raised.exit_code == 0, raised.output
    low = CliRunner().invoke(cli, ["assign"], input=text, env={MAX_PARTITIONS_ENV: "6"})
    assert low.exit_code == 2


def test_assign_refuses_200000_deep_json() -> None:
    """Issue 12: `coordkit assign` ... Also 200,000-deep JSON."""
    line = one_error_line(invoke("assign", input=b"[" * 200_000 + b"]" * 200_000))
    assert line == "error: input: nested deeper than 64 levels"


def test_assign_refuses_bytes_that_are_not_utf8_on_stdin_and_in_a_file(tmp_path: Path) -> None:
    """Issue 12: `coordkit assign` ... non-UTF-8 bytes on stdin or in the file."""
    data = b'{"topics": {"t\xff": 1}, "members": {}}'
    line = one_error_line(invoke("assign", input=data))
    assert line == "error: input: not UTF-8 (byte 14 is 0xff)"
    path = tmp_path / "group.json"
    path.write_bytes(data)
    assert one_error_line(invoke("assign", str(path))) == line


def test_sticky_refuses_a_generation_of_ten_to_the_thirty() -> None:
    """Issue 12: `"generation": 10**30` with `-a sticky` (`OverflowError`)."""
    text = json.dumps(
        {"topics": {"t0": 2}, "members": {"c": {"topics": ["t0"], "generation": 10**30}}}
    )
    line = one_error_line(invoke("assign", "-a", "sticky", input=text))
    assert line.startswith(f"error: members.c.generation: {10**30} is out of range")


def test_owned_partitions_are_written_without_leading_zeros() -> None:
    """Issue 12: `owned: ["t0-1", "t0-01"]` is accepted as two partitions (use
    `numeric_name`)."""
    text = json.dumps(
        {"topics": {"t0": 3}, "members": {"a": {"topics": ["t0"], "owned": ["t0-1", "t0-01"]}}}
    )
    line = one_error_line(invoke("assign", input=text))
    assert line.startswith("error: members.a.owned[1]: 't0-01' is not a partition")


def test_two_equal_loads_of_1e308_are_perfectly_balanced() -> None:
    """Issue 12: two equal loads of `1e308` report `load_balance=0.0` (overflow in the balance
    computation)."""
    text = json.dumps(
        {
            "topics": {"t": {"partitions": 2, "loads": [1e308, 1e308]}},
            "members": {"a": {"topics": ["t"]}, "b": {"topics": ["t"]}},
        }
    )
    result = invoke("assign", "-a", "roundrobin", "--format", "json", input=text)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["summary"]["load_balance"] == 1.0
    assert load_balance([1e308, 1e308]) == 1.0
    assert load_balance([1e308, 0.0]) == 2.0
    assert load_balance([0.0, 0.0]) is None


# -- untrusted text ------------------------------------------------------------------------------


def test_assign_shows_escape_sequences_and_markup_in_names_as_text() -> None:
    """Issue 12: names in `assign` output pass raw escape sequences to the terminal
    (`\\x1b]0;pwn`, `\\x1b[31m`); a consumer id `[bold red]hi` is rendered as markup."""
    text = json.dumps(
        {
            "topics": {"\x1b]0;pwn\x07": 2, "t\x1b[31m": 1},
            "members": {
                "[bold red]hi": {"topics": ["\x1b]0;pwn\x07", "t\x1b[31m"], "rack": "\u202er"},
                "c\x9b2": {"topics": ["t\x1b[31m"], "instance_id": "[i]"},
            },
        }
    )
    table = invoke("assign", input=text)
    assert table.exit_code == 0, table.output
    for shown in ("[bold red]hi", "\\x1b]0;pwn\\x07", "t\\x1b[31m", "\\u202er", "c\\x9b2", "[i]"):
        assert shown in table.output, shown
    document = invoke("assign", "--format", "json", input=text)
    assert document.exit_code == 0
    for output in (table.output, document.output):
        assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]", output), output
    assert "[bold red]hi" in json.loads(document.output)["assignment"]


def test_click_usage_errors_show_control_characters_escaped() -> None:
    """Issue 12: untrusted text reaches the terminal — also through click's own messages."""
    result = invoke("tree", "--depth", "\x1b[2J")
    assert result.exit_code == 2
    assert "\\x1b[2J" in result.output
    assert "\x1b" not in result.output


# -- option values -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "step", "problem"),
    [
        ("cluster", "sleep:nan", "'nan' is not a number of seconds"),
        ("cluster", "sleep:-1", "-1 seconds is not in the range 0 <= x <= 86,400"),
        ("group", "sleep:inf", "'inf' is not a number of seconds"),
    ],
)
def test_sleep_steps_refuse_what_is_not_a_duration(
    store: MetadataStore, command: str, step: str, problem: str
) -> None:
    """Issue 12: `coordkit cluster demo --step sleep:nan`, `sleep:-1`, `coordkit group run --step
    sleep:inf`: refused before anything starts."""
    before = snapshot(store)
    run = "demo" if command == "cluster" else "run"
    result = invoke(command, run, "--store", URL, "--step", step)
    refused(result, "--step", f"step '{step}'", problem)
    assert snapshot(store) == before


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("bad/name:3:1", "topic name 'bad/name' may contain only"),
        ("t0:0:1", "partitions: 0 is not in the range 1 <= x <= 10,000"),
        ("t0:3:0", "replication factor: 0 is not in the range"),
        ("t0:3", "expected NAME:PARTITIONS:REPLICATION_FACTOR"),
    ],
)
def test_a_bad_topic_is_reported_against_topic(
    store: MetadataStore, value: str, problem: str
) -> None:
    """Issue 12: `group run --topic bad/name:3:1` is reported as `Invalid value for
    --heartbeat-interval`, and `--topic t0:0:1` as `Invalid value for --group`: the error must
    name the option and the value at fault."""
    before = snapshot(store)
    output = refused(invoke("group", "run", "--store", URL, "--topic", value), problem)
    assert f"Invalid value for --topic: '{value}'" in output
    assert "--group" not in output
    assert "--heartbeat-interval" not in output
    assert snapshot(store) == before


def test_timing_errors_name_both_timing_options() -> None:
    """Issue 12 (error names the option): a heartbeat not below the session timeout."""
    output = refused(invoke("group", "run", "--session-timeout", "1", "--heartbeat-interval", "2"))
    assert "'--heartbeat-interval' / '--session-timeout'" in output


def test_a_persistent_garbage_broker_node_is_named_for_what_it_is(store: MetadataStore) -> None:
    """Issue 12: a persistent garbage `/brokers/ids/1` is reported as `registered ... by live
    session 0x0` (a non-ephemeral node is not a live session; say what it is)."""
    store.create("/brokers/ids/1", b"garbage", make_parents=True)
    result = invoke("cluster", "demo", "--store", URL, "--brokers", "2", "--timeout", "5")
    refused(result)
    line = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert line == [
        "error: broker id 1: /brokers/ids/1 is a persistent node (version 0), not a broker's "
        "registration: no session owns it and none will remove it; delete it, or give this "
        "broker another broker.id"
    ]
    assert "session 0x0" not in result.output
    assert store.get("/brokers/ids/1")[0] == b"garbage"


@pytest.mark.parametrize(
    "args",
    [
        ["assign", "\udd00"],
        ["serve", "--port", "0", "--data-dir", "logs-\udd00"],
        ["lab", "run", "--workload-file", "\udd00"],
        ["lab", "run", "--out", "report-\udd00"],
        ["lab", "show", "\udd00"],
        ["lab", "package", "\udd00.zip"],
    ],
    ids=[
        "assign FILE",
        "serve --data-dir",
        "lab run --workload-file",
        "lab run --out",
        "lab show DIRECTORY",
        "lab package TARGET",
    ],
)
def test_a_file_name_the_system_cannot_encode_is_a_usage_error(args: list[str]) -> None:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)
    assert "not a file name this system can use" in result.output

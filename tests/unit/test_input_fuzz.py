"""Issue 12, fuzzed: every JSON decoder fed random and hostile input.

The decoders: :func:`coordkit.support.jsontext.loads`; every znode codec of :mod:`coordkit.kafka.layout`
through :func:`~coordkit.kafka.layout.decode_znode`; the controller's fast state and assignment decoders
(:mod:`coordkit.engine.states`); persisted group metadata; offsets-topic records; assignor input
(:func:`~coordkit.strategies.assignment_io.loads_group`, then an assignor and the summary on what parses);
and the lab's ``summary.json`` (then the terminal report on what is accepted).

Inputs are random bytes, valid documents with random byte edits, valid documents with one value
replaced by a hostile one (huge and negative integers, ``1e308``, ``"²"``, ``"01"``, escape
sequences, markup, nesting), and documents nested far past the limit. Whatever comes in, each
decoder returns a value or raises its one declared error, whose one-line message names where
(the node path, the JSON field, the file).
"""

from __future__ import annotations

import copy
import io
import json
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from rich.console import Console

from coordkit.engine import states
from coordkit.engine.groups import metadata
from coordkit.errors import InvalidPathError, LayoutError
from coordkit.kafka import layout
from coordkit.kafka.model import (
    BrokerInfo,
    ConsumerOffset,
    ConsumerOwner,
    ConsumerRegistration,
    ControllerEpoch,
    ControllerInfo,
    DeleteTopicMarker,
    PartitionState,
    TopicAssignment,
    TopicConfig,
    TopicPartition,
)
from coordkit.lab import LabError
from coordkit.plugins import get_plugin_manager
from coordkit.store import paths
from coordkit.strategies.assignment_io import AssignmentInputError, loads_group, summarize
from coordkit.strategies.offsets import OffsetAndMetadata
from coordkit.support import jsontext
from coordkit_lab.report import build_report_data, check_report_data, load_report, print_report
from coordkit_offsets.offsets_topic import decode_record, encode_record

T = TypeVar("T")
# Deep documents make long example reprs; hypothesis warns about them, harmlessly.
pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")

FUZZ = settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

# -- hostile values ------------------------------------------------------------------------------

HOSTILE_TEXT = [
    "",
    "²",
    "01",
    "-1",
    "١٢",
    "\x1b[31m",
    "\x1b]0;pwn\x07",
    "[/oops]",
    "[bold]x",
    "\u202e",
    "\ud800",
    "NaN",
    "1e999",
    "a/b",
    " ",
    "0" * 200,
]
HOSTILE_INTS = [-1, 0, 1, -(2**31), 2**31, 2**63, 10**30, 10**99, -(10**99)]
HOSTILE_FLOATS = [0.5, -0.0, 1e308, -1e308, 5e-324, 1.7976931348623157e308]
FIELD_NAMES = [
    "version",
    "partitions",
    "leader",
    "isr",
    "members",
    "topics",
    "owned",
    "generation",
    "loads",
    "mean",
    "metric",
    "unit",
    "better",
    "tables",
    "metrics",
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from(HOSTILE_INTS),
    st.integers(),
    st.sampled_from(HOSTILE_FLOATS),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(HOSTILE_TEXT),
    st.text(max_size=12),
)
keys = st.one_of(st.sampled_from(FIELD_NAMES + HOSTILE_TEXT), st.text(max_size=8))
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=16,
)
#: Nested past the limit: balanced, or opened and never closed.
deep = st.builds(
    lambda n, opener, closed: opener * n + (b"]" * n if closed and opener == b"[" else b""),
    st.integers(min_value=65, max_value=200_000),
    st.sampled_from([b"[", b'{"a":']),
    st.booleans(),
)


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, allow_nan=True).encode("utf-8", "surrogatepass")


@st.composite
def mutated(draw: st.DrawFn, document: Any) -> Any:
    """``document`` with one value replaced by a hostile one, or one key removed or added."""
    doc = copy.deepcopy(document)
    spots: list[tuple[Any, Any]] = []
    stack = [doc] if isinstance(doc, dict | list) else []
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in items:
            spots.append((node, key))
            if isinstance(value, dict | list):
                stack.append(value)
    if not spots:
        return draw(json_values)
    container, key = draw(st.sampled_from(spots))
    action = draw(st.sampled_from(["replace", "replace", "delete", "add"]))
    if action == "delete":
        del container[key]
    elif action == "add" and isinstance(container, dict):
        container[draw(keys)] = draw(json_values)
    else:
        container[key] = draw(json_values)
    return doc


@st.composite
def byte_edits(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` with a few bytes inserted, deleted or replaced (JSON broken in random places)."""
    out = bytearray(data)
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        at = draw(st.integers(min_value=0, max_value=len(out)))
        action = draw(st.sampled_from(["insert", "delete", "replace"]))
        byte = draw(st.sampled_from([*list(b'{}[]",:0-9e\\'), 255, 195, 0, 27]))
        if action == "insert" or not out:
            out.insert(at, byte)
        elif action == "delete":
            del out[min(at, len(out) - 1)]
        else:
            out[min(at, len(out) - 1)] = byte
    return bytes(out)


def documents(valid: Any) -> st.SearchStrategy[bytes]:
    """Random bytes, deep nesting, and ``valid`` broken in bytes or in one value."""
    encoded = _dumps(valid)
    return st.one_of(
        st.binary(max_size=64),
        deep,
        byte_edits(encoded),
        mutated(valid).map(_dumps),
        json_values.map(_dumps),
    )


def outcome(call: Callable[[], T], error: type[Exception]) -> tuple[T | None, str | None]:
    """``(value, None)``, or ``(None, message)`` when ``call`` raised ``error`` (anything else
    propagates and fails the test); the message must be one non-empty line."""
    try:
        return call(), None
    except error as exc:
        message = str(exc)
    assert message.strip(), error
    assert "\n" not in message, message
    return None, message


# -- the bounded decoder itself ------------------------------------------------------------------


@FUZZ
@given(st.one_of(st.binary(max_size=200), deep, json_values.map(_dumps), st.text(max_size=50)))
@example(b"[" * 100_000 + b"]" * 100_000)
@example(b"1" * 5000)
@example(b"1e400")
@example(b"NaN")
@example("\ud800")
def test_jsontext_returns_a_value_or_one_error(data: bytes | str) -> None:
    outcome(lambda: jsontext.loads(data), jsontext.JSONTextError)


# -- every znode codec ---------------------------------------------------------------------------

TS = "1700000000000"
#: A path of each kind of node Kafka's layout decodes, and a valid value of it.
ZNODES: list[tuple[str, layout.Codec[Any], Any]] = [
    ("/brokers/ids/{n}", layout.BROKER, BrokerInfo("h", 9092, TS, rack="r")),
    ("/brokers/topics/{t}", layout.TOPIC, TopicAssignment({0: (1, 2), 1: (2, 1)})),
    (
        "/brokers/topics/{t}/partitions/{n}/state",
        layout.PARTITION_STATE,
        PartitionState(leader=1, leader_epoch=3, isr=(1, 2), controller_epoch=2),
    ),
    ("/controller", layout.CONTROLLER_INFO, ControllerInfo(1, TS)),
    ("/controller_epoch", layout.CONTROLLER_EPOCH_VALUE, ControllerEpoch(7)),
    ("/admin/delete_topics/{t}", layout.DELETE_TOPIC, DeleteTopicMarker()),
    ("/config/topics/{t}", layout.TOPIC_CONFIG, TopicConfig({"retention.ms": "1"})),
    (
        "/consumers/{g}/ids/{c}",
        layout.CONSUMER_REGISTRATION,
        ConsumerRegistration({"t": 1}, TS, pattern="static"),
    ),
    ("/consumers/{g}/owners/{t}/{n}", layout.CONSUMER_OWNER, ConsumerOwner("c-0")),
    ("/consumers/{g}/offsets/{t}/{n}", layout.CONSUMER_OFFSET, ConsumerOffset(42)),
]

segments = st.one_of(
    st.sampled_from(["orders", "t0", "g", "bad topic", "²", "a.b", "x" * 300]),
    st.text(
        alphabet=st.characters(blacklist_characters="/", blacklist_categories=["Cs"]),
        min_size=1,
        max_size=8,
    ),
)


def test_every_layout_codec_is_fuzzed() -> None:
    fuzzed = {codec.name for _, codec, _ in ZNODES}
    assert fuzzed == {codec.name for _, codec in layout.ZNODE_CODECS}


def _valid_json(codec: layout.Codec[Any], value: Any) -> Any:
    data = codec.encode(value)
    try:
        return json.loads(data)
    except ValueError:
        return data.decode()


@FUZZ
@given(
    st.sampled_from(range(len(ZNODES))).flatmap(
        lambda i: st.tuples(
            st.just(i),
            documents(_valid_json(ZNODES[i][1], ZNODES[i][2])),
            st.builds(
                lambda t, g, c, n: ZNODES[i][0].format(t=t, g=g, c=c, n=n),
                segments,
                segments,
                segments,
                st.sampled_from(["0", "7", "12345"]),
            ),
        )
    )
)
def test_every_znode_codec_decodes_or_names_the_path(case: tuple[int, bytes, str]) -> None:
    index, data, path = case
    codec = ZNODES[index][1]
    try:
        paths.validate(path)
    except InvalidPathError:
        return  # no store holds a node there
    if layout.codec_for(path) is not codec:
        return  # a segment made the path another kind of node (or none)
    _, message = outcome(lambda: layout.decode_znode(path, data), LayoutError)
    assert message is None or message.startswith(f"{path}:"), message


# -- the controller's fast decoders --------------------------------------------------------------

STATE = json.loads(layout.PARTITION_STATE.encode(ZNODES[2][2]))
ASSIGNMENT = json.loads(layout.TOPIC.encode(ZNODES[1][2]))


@FUZZ
@given(documents(STATE))
@example(
    b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":1,"isr":[' + b"9" * 200 + b"]}"
)
def test_state_decoder_returns_a_state_or_a_layout_error(data: bytes) -> None:
    path = "/brokers/topics/t/partitions/0/state"
    state, message = outcome(lambda: states.decode_state(path, data, 3), LayoutError)
    if state is None:
        assert message is not None
        assert message.startswith(f"{path}:"), message
        return
    assert all(type(x) is int for x in (state.leader, state.leader_epoch, *state.isr))


@FUZZ
@given(documents(ASSIGNMENT))
@example('{"version":1,"partitions":{"²":[0]}}'.encode())
@example(b'{"version":1,"partitions":{"0":[1],"00":[2]}}')
def test_assignment_decoder_returns_replicas_or_a_layout_error(data: bytes) -> None:
    path = "/brokers/topics/t"
    replicas, message = outcome(lambda: states.decode_assignment(path, data), LayoutError)
    if replicas is None:
        assert message is not None
        assert message.startswith(f"{path}:"), message
        return
    assert all(type(p) is int for p in replicas)
    assert all(p >= 0 for p in replicas)


# -- group metadata and offsets records ----------------------------------------------------------

GROUP = json.loads(
    metadata.encode(
        metadata.GroupMetadata(
            "g",
            4,
            "consumer",
            "range",
            "c1",
            [
                metadata.PersistedMember(
                    "c1",
                    "i1",
                    "c1",
                    10.0,
                    60.0,
                    ("range",),
                    ("orders",),
                    [TopicPartition("orders", 0), TopicPartition("orders", 1)],
                    1,
                )
            ],
        )
    )
)


@FUZZ
@given(documents(GROUP))
@example(b"[" * 100_000 + b"]" * 100_000)
def test_group_metadata_decodes_or_names_the_field(data: bytes) -> None:
    path = "/coordkit/groups/g"
    decoded, message = outcome(lambda: metadata.decode("g", data, path), LayoutError)
    if decoded is None:
        assert message is not None
        assert message.startswith(f"{path}:"), message
        return
    assert decoded.generation >= 0
    for member in decoded.members:
        assert isinstance(member.member_id, str)
        assert member.member_id
        assert all(isinstance(t, str) for t in (*member.topics, *member.protocols))
        assert all(tp.partition >= 0 for tp in member.assignment)


RECORD = json.loads(encode_record(OffsetAndMetadata(42, metadata="m"), 1_700_000_000_000))


@FUZZ
@given(documents(RECORD))
def test_offsets_records_decode_or_name_the_field(data: bytes) -> None:
    path = "/coordkit/consumer_offsets/3/g/orders/0"
    record, message = outcome(lambda: decode_record(path, data), LayoutError)
    if record is None:
        assert message is not None
        assert message.startswith(f"{path}:"), message
        return
    assert type(record.offset) is int


# -- assignor input ------------------------------------------------------------------------------

ASSIGNOR_INPUT = {
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
        "C1": {"topics": ["t0"], "owned": ["t1-1"], "generation": 1},
    },
}
#: An error starts with the JSON path of the field at fault (a top-level key is written bare).
FIELD_PATH = re.compile(
    r"(input|topics|members)([.\[:]|$)|[A-Za-z0-9_\-]+: unknown field \(allowed: topics, members\)"
)


@FUZZ
@given(documents(ASSIGNOR_INPUT), st.sampled_from(["range", "sticky", "cooperative-sticky"]))
@example(b'{"topics": {"t0": 1000000000}, "members": {"c": {"topics": ["t0"]}}}', "range")
@example(
    _dumps({"topics": {"t0": 2}, "members": {"c": {"topics": ["t0"], "generation": 10**30}}}),
    "sticky",
)
@example(
    _dumps(
        {
            "topics": {"t": {"partitions": 2, "loads": [1e308, 1e308]}},
            "members": {"a": {"topics": ["t"]}, "b": {"topics": ["t"]}},
        }
    ),
    "range",
)
def test_assignor_input_parses_and_assigns_or_names_the_field(data: bytes, name: str) -> None:
    group, message = outcome(lambda: loads_group(data, max_partitions=2_000), AssignmentInputError)
    if group is None:
        assert message is not None
        assert FIELD_PATH.match(message), message
        return
    assignment = get_plugin_manager().assignor(name).assign(group)
    summary = summarize(group, assignment)
    assert summary.load_balance is None or summary.load_balance >= 1.0 - 1e-9


# -- the lab's summary.json ----------------------------------------------------------------------

SUMMARY = build_report_data(
    {"preset": "quick", "seed": 7, "started": "2024-06-01T00:00:00+00:00", "scenarios": 2},
    {
        "count_balance": {
            "description": "max - min",
            "unit": "partitions",
            "better": "lower",
            "headline": "Which balances partition counts best?",
            "kinds": [],
        },
        "assign_ms": {
            "description": "time",
            "unit": "ms",
            "better": "lower",
            "headline": "Which is fastest?",
            "kinds": [],
        },
    },
    {
        "summary": [
            {"workload": "zipf-load", "strategy": s, "metric": m, "mean": v}
            for s, m, v in [
                ("range", "count_balance", 1.0),
                ("sticky", "count_balance", 0.0),
                ("range", "assign_ms", 0.5),
                ("sticky", "assign_ms", 1.5),
            ]
        ],
        "scaling": [
            {
                "workload": "kafka-grid",
                "strategy": s,
                "metric": "assign_ms",
                "partitions": p,
                "mean": p / k,
            }
            for s, k in (("range", 100), ("sticky", 10))
            for p in (10, 100, 1000)
        ],
        "errors": [{"workload": "churn", "strategy": "x", "params": "{}", "error": "boom"}],
    },
)


@FUZZ
@given(st.one_of(mutated(SUMMARY), mutated(SUMMARY).flatmap(mutated), json_values))
def test_lab_summary_is_checked_then_printed(data: Any) -> None:
    checked, message = outcome(lambda: check_report_data(data, "out/summary.json"), LabError)
    if checked is None:
        assert message is not None
        assert message.startswith("out/summary.json: "), message
        return
    out = io.StringIO()
    print_report(checked, Console(file=out, width=80))
    assert "\x1b" not in out.getvalue()


@FUZZ
@given(documents(SUMMARY))
def test_lab_summary_file_loads_or_names_the_file(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as directory:
        (Path(directory) / "summary.json").write_bytes(data)
        _, message = outcome(lambda: load_report(Path(directory)), LabError)
    assert message is None or message.startswith(f"{directory}/summary.json: "), message


def test_the_valid_examples_are_valid() -> None:
    """The documents mutated above decode as they are (else the fuzzing would test nothing)."""
    loads_group(_dumps(ASSIGNOR_INPUT))
    check_report_data(copy.deepcopy(SUMMARY))
    metadata.decode("g", _dumps(GROUP), "/coordkit/groups/g")
    decode_record("/p", _dumps(RECORD))
    for template, codec, value in ZNODES:
        path = template.format(t="orders", g="g", c="c", n="1")
        assert codec.decode(codec.encode(value), path) == value

"""Issue 12, fuzzed: every command-line option (and argument) that takes a value, given random
and hostile values through click's ``CliRunner`` on ``coordkit.cli.cli``.

The commands read a ``memory://`` store holding Kafka's nodes and a group. Whatever the value:
no uncaught exception; exit status 0, or 2 for a refused value (1 only where a command says so:
a group with nothing stored, a cluster whose invariants do not hold); a refusal names the option
(or the field, path or value at fault); no control character reaches the output raw; and the
store is unchanged.

``cluster demo``, ``group run``, ``serve`` and ``lab run`` are stopped where they would start
brokers, listeners or Spark (every value is checked before that point, which is what is fuzzed here: a valid value
would otherwise start a cluster or wait as long as it asks); ``lab package`` does not zip.
"""

from __future__ import annotations

import contextlib
import re
import tempfile
from collections.abc import Iterator
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordkit.cli import cli
from coordkit.kafka import layout
from coordkit.kafka.model import BrokerInfo, PartitionState, TopicAssignment
from coordkit.plugins import open_store
from coordkit.store import MetadataStore, paths
from coordkit.support.terminal import visible
from coordkit_memory import MemoryServer

URL = "memory://option-fuzz"
GROUP_INPUT = '{"topics": {"t0": 4}, "members": {"a": {"topics": ["t0"]}, "b": {"topics": ["t0"]}}}'

#: The arguments a command needs besides the fuzzed one (so that it gets to do its work).
BASE: dict[tuple[str, ...], list[str]] = {
    ("tree",): ["--store", URL],
    ("assign",): [],
    ("plugins",): [],
    ("cluster", "check"): ["--store", URL],
    ("cluster", "demo"): ["--store", "memory://option-fuzz-demo"],
    ("group", "describe"): ["--store", URL, "--group", "g"],
    ("group", "run"): ["--store", "memory://option-fuzz-group"],
    ("serve",): ["--store", "memory://option-fuzz-serve", "--port", "0"],
    ("lab", "run"): ["-w", "zipf-load", "-s", "range"],
    ("lab", "show"): [],
    ("lab", "package"): [],
}
#: Commands added by other plugins or modules: fuzzed on a store of their own for what every
#: command owes (no crash, exit status 0, 1 or 2, nothing raw on the terminal, nothing written
#: when refused); their owners give them BASE arguments to be held to the rest.
SCRATCH = "memory://option-fuzz-scratch"
#: Exit status 1 is a result, not an error, for these: nothing stored, invariants broken.
MAY_EXIT_1 = {("group", "describe"), ("cluster", "check")}
#: Words besides the option's names that a refusal may name the value by.
NAMED_AS: dict[str, tuple[str, ...]] = {
    "store_url": ("store URL", "store scheme", "scheme"),
    "path": ("path", "no node"),
    "directory": ("summary.json",),
    "file": ("FILE", "input"),
    "target": ("TARGET",),
}

HOSTILE = [
    "",
    " ",
    "-",
    "--",
    "0",
    "-1",
    "1",
    "07",
    "²",
    "١٢",
    "1_000",
    "nan",
    "inf",
    "-inf",
    "1e400",
    "1e-400",
    "0.0",
    "9" * 30,
    "99999999999999999999",
    "2147483648",
    "-9223372036854775809",
    "\x1b[31m",
    "\x1b]0;pwn\x07",
    "\u202e",
    "\udcff",
    "\x7f",
    "[bold]x",
    "[/oops]",
    "a/b",
    "../x",
    "/",
    "/nope",
    "/proc/x",
    "t0:0:1",
    "bad/name:3:1",
    "t0:3:1",
    "sleep:nan",
    "sleep:-1",
    "sleep:inf",
    "sleep:1e9",
    "sleep:0.01",
    "join:0",
    "join:999",
    "kill:1",
    "kill:99",
    "crash:0",
    "produce:1",
    "create:t:1:1",
    "grow:t:2",
    "0=r",
    "x=r",
    "1=",
    "range",
    "sticky",
    "kafka",
    "latch",
    "zookeeper",
    "offsets-topic",
    "memory://",
    "memory://x",
    "nosuch://x",
    "zipf-load",
    "local[1]",
    "nonsense://x",
    "x" * 500,
]
# A command line cannot hold NUL (argv entries are C strings).
values = st.one_of(
    st.sampled_from(HOSTILE), st.text(st.characters(blacklist_characters="\x00"), max_size=30)
)


def _stop(*_: Any, **__: Any) -> None:
    """Where a command would start brokers or Spark: every value was accepted."""
    raise click.exceptions.Exit(0)


def value_params() -> list[tuple[tuple[str, ...], click.Parameter]]:
    """Every option or argument that takes a value, on every command."""
    ctx = click.Context(cli)
    found: list[tuple[tuple[str, ...], click.Parameter]] = []

    def walk(command: click.Command, path: tuple[str, ...]) -> None:
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None
                walk(sub, (*path, name))
            return
        for param in command.params:
            if isinstance(param, click.Option) and (param.is_flag or param.count):
                continue
            found.append((path, param))

    walk(cli, ())
    return found


PARAMS = value_params()


def snapshot(store: MetadataStore) -> dict[str, tuple[bytes, int]]:
    out: dict[str, tuple[bytes, int]] = {}
    stack = ["/"]
    while stack:
        path = stack.pop()
        data, stat = store.get(path)
        out[path] = (data, stat.version)
        stack.extend(paths.join(path, name) for name in store.children(path))
    return out


@pytest.fixture(scope="module")
def store() -> Iterator[MetadataStore]:
    opened = open_store(URL)
    opened.create(
        "/brokers/ids/0",
        layout.BROKER.encode(BrokerInfo("h0", 9092, "1700000000000")),
        make_parents=True,
    )
    opened.create(
        "/brokers/topics/t", layout.TOPIC.encode(TopicAssignment({0: (0,)})), make_parents=True
    )
    opened.create(
        "/brokers/topics/t/partitions/0/state",
        layout.PARTITION_STATE.encode(PartitionState(0, 1, (0,), 1)),
        make_parents=True,
    )
    opened.create("/consumers/g/offsets/t/0", b"5", make_parents=True)
    opened.create("/consumers/g/owners/t/0", b"[/oops]\x1b[31m", make_parents=True)
    yield opened
    opened.close()
    MemoryServer.discard(URL.removeprefix("memory://"))


@pytest.fixture(scope="module")
def stopped() -> Iterator[None]:
    """``Cluster`` (cluster demo, group run), Spark (lab run) and the zip (lab package) stopped
    where they would start."""
    import coordkit.cli.cluster.demo
    import coordkit.cli.group.command
    import coordkit.cli.serve
    import coordkit_lab.pipeline
    import coordkit_lab.spark

    patch = pytest.MonkeyPatch()
    patch.setattr(coordkit.cli.cluster.demo, "Cluster", _stop)
    patch.setattr(coordkit.cli.group.command, "Cluster", _stop)
    patch.setattr(coordkit.cli.serve, "KafkaServer", _stop)
    patch.setattr(coordkit_lab.pipeline, "run_lab", _stop)
    patch.setattr(coordkit_lab.spark, "require_pyspark", lambda: None)
    patch.setattr(coordkit_lab.spark, "build_code_zip", _stop)
    yield
    patch.undo()


def base(command: tuple[str, ...], param: click.Parameter) -> list[str]:
    if command in BASE:
        return BASE[command]
    takes_store = any(p.name == "store_url" for c, p in PARAMS if c == command)
    return ["--store", SCRATCH] if takes_store else []


def invoke(command: tuple[str, ...], param: click.Parameter, value: str) -> Result:
    args = [*command, *base(command, param)]
    if isinstance(param, click.Option):
        option = next(o for o in param.opts if o.startswith("--"))
        args += [f"{option}={value}"] if value.startswith("-") else [option, value]
    else:
        args += ["--", value]
    with tempfile.TemporaryDirectory() as directory, contextlib.chdir(directory):
        return CliRunner().invoke(cli, args, input=GROUP_INPUT, env={"COLUMNS": "100"})


def names_the_value(output: str, param: click.Parameter, value: str) -> bool:
    words = [*getattr(param, "opts", ()), *NAMED_AS.get(param.name or "", ())]
    shown = visible(value)
    if value.strip() and len(shown) <= 40:
        words.append(shown)
    return any(word in output for word in words)


def check(
    command: tuple[str, ...], param: click.Parameter, value: str, store: MetadataStore
) -> None:
    owned = command in BASE
    scratch = open_store(SCRATCH)
    before, before_scratch = snapshot(store), snapshot(scratch)
    result = invoke(command, param, value)
    where = f"coordkit {' '.join(command)} {param.opts[0]} {value!r}"
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{where}: {result.exception!r}\n{result.output}"
    )
    allowed = {0, 2} if owned and command not in MAY_EXIT_1 else {0, 1, 2}
    assert result.exit_code in allowed, f"{where}: exit {result.exit_code}\n{result.output}"
    assert "Traceback" not in result.output, where
    raw = re.search(
        "[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]", result.output
    )
    assert raw is None, f"{where}: raw {raw.group()!r} in\n{result.output}"
    if result.exit_code == 2 and owned:
        assert names_the_value(result.output, param, value), f"{where}:\n{result.output}"
    assert snapshot(store) == before, where
    if result.exit_code != 0:
        assert snapshot(scratch) == before_scratch, f"{where}: written, then refused"
    scratch.close()


def test_every_option_taking_a_value_is_fuzzed() -> None:
    commands = {command for command, _ in PARAMS}
    assert set(BASE) <= commands, "a command was removed or renamed: update BASE"
    assert len(PARAMS) >= 50


@pytest.mark.parametrize(
    ("command", "param"), PARAMS, ids=[f"{' '.join(c)} {p.opts[0]}" for c, p in PARAMS]
)
def test_hostile_values(
    command: tuple[str, ...], param: click.Parameter, store: MetadataStore, stopped: None
) -> None:
    for value in HOSTILE:
        check(command, param, value, store)


@settings(
    max_examples=2000,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=st.sampled_from(PARAMS), value=values)
def test_random_values(
    case: tuple[tuple[str, ...], click.Parameter], value: str, store: MetadataStore, stopped: None
) -> None:
    command, param = case
    check(command, param, value, store)


def test_the_stubs_are_reached_by_valid_values(store: MetadataStore, stopped: None) -> None:
    """The fuzzing reaches the point where work would start: valid values exit 0 there."""
    params = {(c, p.name): p for c, p in PARAMS}
    assert (
        invoke(("cluster", "demo"), params[("cluster", "demo"), "steps"], "sleep:0.5").exit_code
        == 0
    )
    assert invoke(("group", "run"), params[("group", "run"), "topics"], "t1:4:1").exit_code == 0
    assert invoke(("lab", "run"), params[("lab", "run"), "seed"], "7").exit_code == 0
    assert invoke(("serve",), params[("serve",), "brokers"], "2").exit_code == 0

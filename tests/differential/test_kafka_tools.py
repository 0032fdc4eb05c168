"""Kafka's own command-line tools (the fetched 4.4 jars, unchanged) against Kafka 4.4 (KRaft) and
``coordkit serve``, three brokers each (the module's clusters, ``conftest.py``): the same commands
in the same order on both, each one's outcome compared (issue #31 item 2).

An outcome is the exit status, standard output and what the tool itself says on standard error
(not its log lines, stack traces or the JVM's), normalised where two clusters must differ: hosts
and ports, node ids in a coordinator's column, column widths (tables are compared cell by cell),
the order of a table's rows (the tools print them from hash maps), and a perf test's timings (its
counts are kept).

* A command that the table "What Kafka's command-line tools need that `coordkit serve` does not
  serve yet" (docs/serve.md) lists must work on Kafka and fail on coordkit saying that the node
  does not support the API the row names; every other command must give both the same outcome, or
  differ only as a ``tools.<command>`` row of the table "Where `coordkit serve` differs from Kafka
  4.x" says.
* A row of either table that no command needs fails its check.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import attrs
import pytest

from coordkit.testing.servers import KAFKA_KRAFT_VERSION, kafka_tool
from differential.clusters import Clusters, ClusterUnderTest
from differential.harness import (
    TABLE_PAGE,
    Difference,
    KnownDifference,
    differences,
    known_differences,
    stale_rows,
)
from harness.docs import shown

TOOLS_HEADING = "What Kafka's command-line tools need that `coordkit serve` does not serve yet"
#: The issues that add what the tools need (the table's last column names one of them).
ISSUES = {"#35": "configs and admin APIs", "#36": "security", "#37": "share groups",
          "#38": "transactions"}  # fmt: skip
#: The rows of "Where `coordkit serve` differs from Kafka 4.x" this module holds.
FAMILY = "tools."
TOOL_HEAP = "128m"
TOOL_TIMEOUT = 120.0
TOPIC, GROUP, PERF_TOPIC, PERF_GROUP = "tools-t", "tools-g", "tools-perf", "tools-perf-g"
#: Times a command whose outcome waits for the cluster to settle (a Kafka broker learns of a
#: change a little after its controller) is run again before its outcome is taken.
SETTLE_ATTEMPTS = 10


def _lines(text: str) -> list[str]:
    return [" ".join(line.split()) for line in text.splitlines() if line.strip()]


def table_rows(text: str) -> list[str]:
    """Every line with its cells single-spaced, sorted (a tool prints a table's rows in hash
    order)."""
    return sorted(_lines(text))


def producer_perf(text: str) -> list[str]:
    """The records sent in all, without the rates and latencies (nor the reports of each 5 s
    window a slow run prints before its total)."""
    return [m.group(0) for m in re.finditer(r"^\d+ records sent", text, re.MULTILINE)][-1:]


def consumer_perf(text: str) -> list[str]:
    """The MB and records consumed, of the CSV's columns."""
    rows = [[cell.strip() for cell in line.split(",")] for line in text.splitlines() if "," in line]
    if len(rows) < 2:
        return _lines(text)
    header, values = rows[0], rows[-1]
    keep = ("data.consumed.in.MB", "data.consumed.in.nMsg")
    return [f"{name}={values[header.index(name)]}" for name in keep if name in header]


@attrs.frozen
class Command:
    """One run of a tool: ``args`` with ``{bootstrap}`` replaced by the cluster's address.

    :param label: the tool's arguments as the tools table names the command.
    :param settled: the command is run again (up to :data:`SETTLE_ATTEMPTS` times) until its
        standard output satisfies it.
    """

    name: str
    tool: str
    label: str
    args: tuple[str, ...]
    input: str | None = None
    normalise: Callable[[str], list[str]] = table_rows
    settled: Callable[[str], bool] | None = None


def command(name: str, tool: str, label: str, *args: str, **options: Any) -> Command:
    return Command(name, tool, label, args, **options)


B = "--bootstrap-server"
COMMANDS = (
    command("topics-create", "kafka-topics", "--create", B, "{bootstrap}", "--create", "--topic",
            TOPIC, "--partitions", "2", "--replication-factor", "2"),
    command("console-producer", "kafka-console-producer", "--topic", B, "{bootstrap}", "--topic",
            TOPIC, "--reader-property", "parse.key=true", "--reader-property", "key.separator=:",
            input="".join(f"k{i}:v{i}\n" for i in range(6))),
    command("get-offsets", "kafka-get-offsets", "--topic", B, "{bootstrap}", "--topic", TOPIC),
    command("console-consumer", "kafka-console-consumer", "--group", B, "{bootstrap}", "--topic",
            TOPIC, "--group", GROUP, "--from-beginning", "--max-messages", "6", "--timeout-ms",
            "60000", "--formatter-property", "print.key=true", "--formatter-property",
            "print.partition=true", "--formatter-property", "print.offset=true"),
    command("consumer-groups-list", "kafka-consumer-groups", "--list", B, "{bootstrap}", "--list"),
    command("consumer-groups-describe", "kafka-consumer-groups", "--describe", B, "{bootstrap}",
            "--describe", "--group", GROUP),
    command("consumer-groups-describe-state", "kafka-consumer-groups", "--describe --state", B,
            "{bootstrap}", "--describe", "--group", GROUP, "--state"),
    command("consumer-groups-describe-members", "kafka-consumer-groups", "--describe --members",
            B, "{bootstrap}", "--describe", "--group", GROUP, "--members"),
    command("consumer-groups-reset-dry-run", "kafka-consumer-groups", "--reset-offsets --dry-run",
            B, "{bootstrap}", "--reset-offsets", "--group", GROUP, "--topic", TOPIC,
            "--to-earliest", "--dry-run"),
    command("consumer-groups-reset", "kafka-consumer-groups", "--reset-offsets --execute", B,
            "{bootstrap}", "--reset-offsets", "--group", GROUP, "--topic", f"{TOPIC}:0",
            "--to-offset", "1", "--execute"),
    command("consumer-groups-describe-missing-group", "kafka-consumer-groups", "--describe", B,
            "{bootstrap}", "--describe", "--group", "tools-nogroup"),
    command("topics-alter", "kafka-topics", "--alter --partitions", B, "{bootstrap}", "--alter",
            "--topic", TOPIC, "--partitions", "3"),
    command("get-offsets-after-alter", "kafka-get-offsets", "--topic", B, "{bootstrap}", "--topic",
            TOPIC, settled=lambda out: f"{TOPIC}:2:" in out),
    command("topics-list", "kafka-topics", "--list", B, "{bootstrap}", "--list"),
    command("producer-perf-test", "kafka-producer-perf-test", "--num-records", "--topic",
            PERF_TOPIC, "--num-records", "100", "--record-size", "50", "--throughput", "-1",
            "--command-property", "bootstrap.servers={bootstrap}", "acks=all",
            normalise=producer_perf),
    command("consumer-perf-test", "kafka-consumer-perf-test", "--num-records --group", B,
            "{bootstrap}", "--topic", PERF_TOPIC, "--num-records", "100", "--group", PERF_GROUP,
            "--timeout", "60000", normalise=consumer_perf),
    command("topics-delete", "kafka-topics", "--delete", B, "{bootstrap}", "--delete", "--topic",
            TOPIC),
    command("topics-list-after-delete", "kafka-topics", "--list", B, "{bootstrap}", "--list",
            settled=lambda out: TOPIC not in out.split()),
    # What coordkit serve does not serve yet (the tools table).
    command("topics-describe", "kafka-topics", "--describe", B, "{bootstrap}", "--describe",
            "--topic", PERF_TOPIC),
    command("configs-alter", "kafka-configs", "--alter --add-config", B, "{bootstrap}", "--alter",
            "--entity-type", "topics", "--entity-name", PERF_TOPIC, "--add-config",
            "retention.ms=86400000"),
    command("consumer-groups-delete-offsets", "kafka-consumer-groups", "--delete-offsets", B,
            "{bootstrap}", "--delete-offsets", "--group", PERF_GROUP, "--topic", PERF_TOPIC),
    command("consumer-groups-delete", "kafka-consumer-groups", "--delete", B, "{bootstrap}",
            "--delete", "--group", GROUP),
    command("transactions-list", "kafka-transactions", "list", B, "{bootstrap}", "list"),
)  # fmt: skip
COMMANDS_BY_NAME = {c.name: c for c in COMMANDS}

#: Standard error lines that are not the tool speaking: log lines (``[date] LEVEL ...``, and
#: log4j's own ``date thread LEVEL`` once the JVM shuts down), stack traces.
_NOT_THE_TOOL = re.compile(r"^(\[\d{4}-|\d{4}-\d\d-\d\dT|\s+at |\s*\.\.\. \d+ more|Caused by: |"
                           r"(java|org|kafka)\.[\w.$]+(Exception|Error)\b)")  # fmt: skip
_ADDRESS = re.compile(r"(localhost|127\.0\.0\.1|\[::1\]|[\w.-]+):\d{2,5}\b")
_COORDINATOR_ID = re.compile(r"(HOST:PORT)\s+\((\d+)\)")


@attrs.frozen
class Outcome:
    status: int
    stdout: str
    stderr: str

    def output(self) -> str:
        return f"{self.stdout}\n{self.stderr}"

    def said(self) -> list[str]:
        """What the tool printed on standard error itself."""
        return [line for line in self.stderr.splitlines()
                if line.strip() and not _NOT_THE_TOOL.match(line)]  # fmt: skip

    def normalised(self, run: Command) -> dict[str, Any]:
        def clean(text: str) -> str:
            return _COORDINATOR_ID.sub(r"\1 (ID)", _ADDRESS.sub("HOST:PORT", text))

        return {"status": self.status, "stdout": run.normalise(clean(self.stdout)),
                "stderr": table_rows(clean("\n".join(self.said())))}  # fmt: skip


def run_command(run: Command, cluster: ClusterUnderTest) -> Outcome:
    bootstrap = ",".join(f"{host}:{port}" for host, port in cluster.addresses)
    args = [arg.replace("{bootstrap}", bootstrap) for arg in run.args]
    for _ in range(SETTLE_ATTEMPTS if run.settled else 1):
        done = kafka_tool(KAFKA_KRAFT_VERSION, run.tool, *args, input=run.input, heap=TOOL_HEAP,
                          timeout=TOOL_TIMEOUT)  # fmt: skip
        if run.settled is None or run.settled(done.stdout):
            break
    return Outcome(done.returncode, done.stdout, done.stderr)


@pytest.fixture(scope="module")
def outcomes(clusters: Clusters) -> dict[str, dict[str, Outcome]]:
    """Every command on both clusters, in order; the two clusters side by side."""

    def play(cluster: ClusterUnderTest) -> dict[str, Outcome]:
        return {run.name: run_command(run, cluster) for run in COMMANDS}

    with ThreadPoolExecutor(2) as pool:
        kafka, coordkit = pool.map(play, (clusters.kafka, clusters.coordkit))
    return {"kafka": kafka, "coordkit": coordkit}


# -- the tools table (docs/serve.md) -------------------------------------------------------------


@attrs.frozen
class NeededApi:
    """A row of the tools table: a command of a tool, the API it needs, the issue adding it."""

    #: the page holding the table (``docs/serve.md``)
    document: str
    line: int
    tool: str
    command: str
    api: str
    issue: str

    @property
    def api_key_name(self) -> str:
        """Kafka's name of the API in its ``ApiKeys`` (``DescribeConfigs``: DESCRIBE_CONFIGS),
        which its clients' UnsupportedVersionException names."""
        return re.sub(r"(?<!^)(?=[A-Z])", "_", self.api).upper()

    def names(self, run: Command) -> bool:
        return (self.tool, self.command) == (run.tool, run.label)


def tools_table(document: Path = TABLE_PAGE) -> list[NeededApi]:
    """The rows of the table under the heading :data:`TOOLS_HEADING` of ``document``."""
    where = shown(document)
    lines = document.read_text(encoding="utf-8").splitlines()
    starts = [i for i, line in enumerate(lines) if line.lstrip("#").strip() == TOOLS_HEADING]
    assert len(starts) == 1, f"{where}: expected one heading {TOOLS_HEADING!r}"
    rows: list[NeededApi] = []
    for number, line in enumerate(lines[starts[0] + 1 :], start=starts[0] + 2):
        if line.startswith("#") or (rows and not line.startswith("|")):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        if not line.startswith("|") or cells[0] == "Tool" or set(cells[0]) <= set("-: "):
            continue
        assert len(cells) == 4, f"{where}:{number}: a row needs 4 cells, found {len(cells)}"
        code = [re.findall(r"`([^`]+)`", cell) for cell in cells[:2]]
        api = re.match(r"\w+", cells[2])
        issue = re.match(r"#\d+", cells[3])
        form = f"{where}:{number}: a row is `tool` | `command` | API | #issue"
        assert all(code), form
        assert api, form
        assert issue, form
        rows.append(NeededApi(where, number, code[0][0], code[1][0], api.group(0), issue.group(0)))
    # No row: every command of the script is served (the heading and its table stay for the
    # next command that needs an api coordkit does not answer).
    return rows


@pytest.fixture(scope="module")
def needed() -> list[NeededApi]:
    return tools_table()


@pytest.fixture(scope="module")
def differs() -> list[KnownDifference]:
    return [row for row in known_differences()
            if all(p.startswith(FAMILY) for p in row.scenarios)]  # fmt: skip


def test_every_row_of_the_tools_table_names_a_command_and_an_issue(needed: list[NeededApi]) -> None:
    for row in needed:
        where = f"{row.document} line {row.line}"
        assert [run.name for run in COMMANDS if row.names(run)], f"{where}: {row}"
        assert row.issue in ISSUES, f"{where}: {row.issue} is not one of {ISSUES}"


#: Each command's differences, as the tests find them (for the stale-row check).
FOUND: dict[str, list[Difference]] = {}


@pytest.mark.parametrize("name", list(COMMANDS_BY_NAME))
def test_command(name: str, outcomes: dict[str, dict[str, Outcome]], needed: list[NeededApi],
                 differs: list[KnownDifference]) -> None:  # fmt: skip
    run = COMMANDS_BY_NAME[name]
    kafka, coordkit = outcomes["kafka"][name], outcomes["coordkit"][name]
    listed = [row for row in needed if row.names(run)]
    assert kafka.status == 0, f"{name} failed on Kafka:\n{kafka.output()}"
    if listed:
        (row,) = listed
        complaints = [line for line in [*kafka.stdout.splitlines(), *kafka.said()]
                      if "Exception" in line or line.startswith("Error")]  # fmt: skip
        assert not complaints, f"{name} did not work on Kafka:\n{kafka.output()}"
        said = coordkit.output()
        refused = (f"{name} is listed as needing {row.api} ({row.document} line {row.line}), "
                   f"but coordkit did not refuse it so:\n{said}")  # fmt: skip
        assert row.api_key_name in said, refused
        assert "not support" in said, refused
        return
    found = differences(f"{FAMILY}{name}", kafka.normalised(run), coordkit.normalised(run))
    FOUND[name] = found
    unexplained = [d for d in found if not any(row.covers(d) for row in differs)]
    assert not unexplained, "\n".join(
        [
            "differences the table of docs/serve.md does not list:",
            *map(str, unexplained),
            f"== Kafka\n{kafka.output()}",
            f"== coordkit\n{coordkit.output()}",
        ]
    )


def test_no_tools_row_of_the_tables_is_stale(differs: list[KnownDifference]) -> None:
    stale = stale_rows(differs, FAMILY, COMMANDS_BY_NAME, FOUND)
    assert not stale, "rows of the table that no difference needs:\n" + "\n".join(stale)

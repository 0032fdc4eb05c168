"""Real programs compared (issue #31): the same client program of each client — kafka-python,
aiokafka, confluent-kafka (librdkafka) and Kafka's own Java clients (kafka-clients of the fetched
4.4 jars) — run against Kafka 4.4 (KRaft) and ``coordkit serve``, three brokers each (the
module's clusters, ``conftest.py``), and what each observed must match.

Each program in ``programs/`` plays the same steps with its client's own API and prints one JSON
object, a key per step (the value it observed, or ``{"error": <the client's name for it>}``):

* topics: ``create`` (3 partitions, 2 replicas), ``create_existing``,
  ``create_replication_above_brokers`` (4 replicas), ``partitions_decreased`` (to 2),
  ``partitions_increased`` (to 4), ``delete_missing``, ``describe_missing``, and at the end the
  topics ``list``\\ed and the topic ``describe``\\d (replica and ISR counts, the leader a replica);
* records: ``produced`` (partition and offset of 5, 3, 0 and 2 keyed records sent to partitions
  0-3 with acks=all), ``produce_unknown_topic`` (kafka-python and librdkafka with auto-creation off
  on the client's side: the error; aiokafka and Java, whose metadata requests allow it: the
  brokers create it), ``watermarks`` (low and high of each partition); Java's records carry
  fixed create times, and it records ``offsets_for_times`` (ListOffsets by timestamp) and
  ``max_timestamps`` (ListOffsets for the max timestamp);
* a classic group of two members (``-m1`` then ``-m2``, range assignor but aiokafka's round robin):
  ``group_first_member``, ``group_two_members`` and ``group_after_leave`` (the member's generation
  and partitions), ``group_read`` (what each member read of its partitions), ``group_committed``,
  ``group_described_one`` / ``_two`` / ``_empty`` (state, protocol, assignor, each member's client
  id and assignment), ``commit_by_non_member`` (a consumer of the group that assigned itself a
  partition commits while the group has members), ``group_offsets_altered`` (the admin client's,
  or a commit of no member for aiokafka, whose admin cannot), ``groups_listed``,
  ``describe_missing_group``, ``committed_missing_group``; kafka-python's descriptions of topics
  and groups carry the authorized operations it asks for.

The programs name things by a per-client prefix, the same on both clusters, and record counts
rather than node ids, and client ids rather than member ids: what differs between two clusters
never enters a recording. The one normalisation: generations are replaced by their rank in the
recording (the first one seen is 1), because a client's own rejoins make the numbers depend on
timing (kafka-python rejoins when the metadata it joined with changes), on Kafka as on coordkit;
whether the members share a generation and each rebalance gives a new one is still compared.

A difference fails its client's test unless a row of the table "Where `coordkit serve` differs
from Kafka 4.x" (docs/serve.md) names the client (``clients.<client>``) and the step's path; a
``clients.*`` row that no difference needs fails :func:`test_no_client_row_of_the_table_is_stale`.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import attrs
import pytest

from coordkit.testing.servers import KAFKA_KRAFT_VERSION
from coordkit.testing.servers.kafka_tools import (
    JVM_OPTIONS,
    classpath,
    log4j_option,
    require_java,
    write_log_config,
)
from differential.clusters import Clusters, ClusterUnderTest
from differential.harness import (
    Difference,
    KnownDifference,
    differences,
    known_differences,
    stale_rows,
)

PROGRAMS = Path(__file__).with_name("programs")
#: Each Python client's program and the module it needs (a missing one fails the test, naming
#: the install).
PYTHON_PROGRAMS = {
    "kafka-python": ("kafka_python.py", "kafka", "kafka-python"),
    "aiokafka": ("aiokafka_client.py", "aiokafka", "aiokafka"),
    "confluent-kafka": ("confluent_client.py", "confluent_kafka", "confluent-kafka"),
}
CLIENTS = (*PYTHON_PROGRAMS, "java")
#: The table rows this module holds: their scenario patterns start with it.
FAMILY = "clients."
#: Seconds a program may run (a hang, not a slow run: each takes seconds).
PROGRAM_TIMEOUT = 240
JAVA_HEAP = "128m"
#: The expected outcome of the steps whose answer the plan fixes (checked on Kafka's recording,
#: so that a program that did not do what it says cannot pass by matching itself).
PRODUCED = [[0, 0], [0, 1], [0, 2], [0, 3], [0, 4], [1, 0], [1, 1], [1, 2], [3, 0], [3, 1]]
WATERMARKS = {"0": [0, 5], "1": [0, 3], "2": [0, 0], "3": [0, 2]}
#: Each client's differences, as this module's tests find them (for the stale-row check).
FOUND: dict[str, list[Difference]] = {}


@attrs.frozen
class Run:
    """One program's run against one cluster."""

    client: str
    cluster: str
    returncode: int
    stdout: str
    stderr: str

    def recording(self) -> Any:
        failed = (f"the {self.client} program failed on {self.cluster} (exit status "
                  f"{self.returncode}):\n{self.stderr[-4000:]}")  # fmt: skip
        assert self.returncode == 0, failed
        assert self.stdout.strip(), failed
        return json.loads(self.stdout.strip().splitlines()[-1])


def program_command(client: str, bootstrap: str, prefix: str, scratch: Path) -> list[str]:
    if client == "java":
        java = require_java()  # a missing Java or jar cache fails here, naming the fix
        jars = classpath(KAFKA_KRAFT_VERSION)
        log_config = write_log_config(KAFKA_KRAFT_VERSION, scratch / "log4j2.properties",
                                      log_file=None, level="warn")  # fmt: skip
        return [java, f"-Xmx{JAVA_HEAP}", *JVM_OPTIONS, log4j_option(KAFKA_KRAFT_VERSION, log_config),
                "-cp", jars, str(PROGRAMS / "JavaClients.java"), bootstrap, prefix]  # fmt: skip
    script, module, package = PYTHON_PROGRAMS[client]
    if importlib.util.find_spec(module) is None:
        pytest.fail(f"{client} is not installed: `pip install {package}` (the project's test "
                    f"dependency group has it: `pip install -e . --group test`)")  # fmt: skip
    return [sys.executable, str(PROGRAMS / script), bootstrap, prefix]


def run_program(client: str, cluster: ClusterUnderTest, scratch: Path, again: bool = False) -> Run:
    """The client's program against ``cluster``; ``again``: a second run, under names of its own
    (the first run's topics and group are there), its output named as a first run's."""
    bootstrap = ",".join(f"{host}:{port}" for host, port in cluster.addresses)
    prefix = f"rec-{client}"
    command = program_command(client, bootstrap, f"{prefix}-again" if again else prefix, scratch)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=PROGRAM_TIMEOUT,
                              stdin=subprocess.DEVNULL, check=False)  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else ""
        return Run(client, cluster.name, -1, "", f"timed out after {PROGRAM_TIMEOUT} s\n{stderr}")
    stdout = done.stdout.replace(f"{prefix}-again", prefix) if again else done.stdout
    return Run(client, cluster.name, done.returncode, stdout, done.stderr)


@pytest.fixture(scope="module")
def runs(clusters: Clusters) -> Iterator[dict[tuple[str, str], Run]]:
    """Every program against both clusters, all at once (each names its topics and group by its
    client, so they do not meet)."""
    for client in CLIENTS:  # fail at once, before any program runs, on a missing client
        with tempfile.TemporaryDirectory() as scratch:
            program_command(client, "", "", Path(scratch))
    with tempfile.TemporaryDirectory(prefix="coordkit-recordings-") as scratch:
        jobs = [(client, cluster) for client in CLIENTS
                for cluster in (clusters.kafka, clusters.coordkit)]  # fmt: skip
        with ThreadPoolExecutor(len(jobs)) as pool:
            done = list(pool.map(lambda job: run_program(*job, Path(scratch)), jobs))
        yield {(run.client, run.cluster): run for run in done}


@pytest.fixture(scope="module")
def table() -> list[KnownDifference]:
    return [row for row in known_differences() if row_is_ours(row)]


def row_is_ours(row: KnownDifference) -> bool:
    return all(pattern.startswith(FAMILY) for pattern in row.scenarios)


def normalised(recording: Any) -> Any:
    """Generations replaced by their rank among the generations the recording shows."""
    ranks: dict[int, int] = {}

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                key: ranks.setdefault(item, len(ranks) + 1)
                if key == "generation" and isinstance(item, int)
                else walk(item)
                for key, item in value.items()
            }
        if isinstance(value, list):
            return [walk(item) for item in value]
        return value

    return walk(recording)


def oracle_differences(client: str, oracle: Run, coordkit: Any,
                       table: list[KnownDifference]) -> tuple[list[Difference], list[Difference]]:  # fmt: skip
    """The differences of coordkit's recording from Kafka's ``oracle`` run, and those the table
    does not explain."""
    kafka = normalised(oracle.recording())
    assert kafka["produced"] == PRODUCED
    assert kafka["watermarks"] == WATERMARKS
    assert kafka["group_committed"] == {f"rec-{client}-a:{p}": e for p, (_, e) in
                                        enumerate(WATERMARKS.values())}  # fmt: skip
    found = differences(f"{FAMILY}{client}", kafka, coordkit)
    return found, [d for d in found if not any(row.covers(d) for row in table)]


@pytest.mark.parametrize("client", CLIENTS)
def test_recording(client: str, runs: dict[tuple[str, str], Run], clusters: Clusters,
                   table: list[KnownDifference]) -> None:  # fmt: skip
    coordkit = normalised(runs[client, "coordkit"].recording())
    oracle = runs[client, "kafka"]
    try:
        found, unexplained = oracle_differences(client, oracle, coordkit, table)
    except AssertionError:
        found, unexplained = [], [Difference(f"{FAMILY}{client}", "", "failed", "")]
    if unexplained:
        # The oracle's client may fail on the oracle: kafka-python 3.0.12's member has stopped
        # heartbeating mid-rebalance on a loaded machine and Kafka removed it after its session.
        # Kafka's side runs once more, alone; coordkit's recording stays the one compared.
        with tempfile.TemporaryDirectory(prefix="coordkit-recordings-") as scratch:
            oracle = run_program(client, clusters.kafka, Path(scratch), again=True)
        found, unexplained = oracle_differences(client, oracle, coordkit, table)
    FOUND[client] = found
    assert not unexplained, "\n".join(
        [
            "differences the table of docs/serve.md does not list:",
            *map(str, unexplained),
            f"== coordkit's stderr\n{runs[client, 'coordkit'].stderr[-3000:]}",
        ]
    )


def test_no_client_row_of_the_table_is_stale(table: list[KnownDifference]) -> None:
    """Every ``clients.*`` row covers a difference found, among the clients it names that ran."""
    stale = stale_rows(table, FAMILY, CLIENTS, FOUND)
    assert not stale, "rows of the table that no difference needs:\n" + "\n".join(stale)


@pytest.mark.parametrize("client", CLIENTS)
def test_a_program_without_its_arguments_says_how_to_run_it(client: str, tmp_path: Path) -> None:
    command = program_command(client, "", "", tmp_path)[:-2]  # no bootstrap, no prefix
    done = subprocess.run(command, capture_output=True, text=True, timeout=PROGRAM_TIMEOUT,
                          stdin=subprocess.DEVNULL, check=False)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("usage: "), line
    assert line.endswith("<bootstrap servers> <name prefix>"), line

"""Running a tool against a cluster and normalising what it printed.

A tool is one of Kafka's command-line tools from the fetched 4.4 jars (``kafka_tool``: one JVM per
command) or kcat (Debian's package, ``kcat`` on the PATH). Its :class:`Outcome` is the exit status,
standard output and what the tool itself said on standard error (not log lines, stack traces or
the JVM's). :meth:`Outcome.normalised` replaces only what must differ between two clusters: hosts
and ports, topic and cluster ids (22 characters of base64), member and client-instance ids, log
directory paths, the controller kcat names, throttles and timings; tables are compared line by
line with their cells single-spaced and their rows sorted (the tools print them from hash maps);
JSON documents are compared parsed, their lists sorted.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from coordkit.testing.servers import KAFKA_KRAFT_VERSION, kafka_tool

KCAT_HINT = "apt-get install kcat"
TOOL_HEAP = "128m"
TOOL_TIMEOUT = 120.0
#: Times a command whose output waits for the cluster to settle is run again.
SETTLE_ATTEMPTS = 10

#: Standard error lines that are not the tool speaking: log lines, stack traces.
_NOT_THE_TOOL = re.compile(r"^(\[\d{4}-|\d{4}-\d\d-\d\dT|\s+at |\s*\.\.\. \d+ more|Caused by: |"
                           r"(java|org|kafka)\.[\w.$]+(Exception|Error)\b|SLF4J)")  # fmt: skip
_ADDRESS = re.compile(r"(localhost|127\.0\.0\.1|\[::1\]|[\w-]+(\.[\w-]+)*):\d{2,5}\b")
#: Kafka's Uuid in base64 (topic ids, cluster ids, KIP-848 member ids).
_KAFKA_UUID = re.compile(r"(?<![\w-])[A-Za-z0-9_-]{21}[AQgw](?![\w-])")
#: A classic member id: the client id, a dash and a Java UUID.
_JAVA_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_LOG_DIR = re.compile(r"/tmp/[\w./-]+")
_CONTROLLER = re.compile(r"\s*\(controller\)")
#: kcat's last end-of-partition line (whichever partition reaches its end last).
_EXITING = re.compile(r": exiting$", re.MULTILINE)
#: The coordinator's node id kafka-consumer-groups prints beside its address.
_COORDINATOR_ID = re.compile(r"(HOST:PORT)\s+\((\d+)\)")
_THROTTLE = re.compile(r"(throttle[\w.]*[=: ]+)\d+", re.IGNORECASE)


def require_kcat() -> str:
    found = shutil.which("kcat")
    if found is None:
        raise RuntimeError(f"kcat is not installed: {KCAT_HINT} (bash run test installs it)")
    return found


#: The topics and groups of the AdminClient's script (``admin_client.py``), which the session's
#: Kafka cluster holds too when that module ran first: the tools' lines naming them are left out,
#: with the indented lines under them (a topic's configs).
FOREIGN = re.compile(r"\badmin-[\w-]+")


def without_foreign(text: str) -> str:
    kept: list[str] = []
    skipping = False
    for line in text.splitlines(keepends=True):
        if line[:1] in "{[" and line.strip():  # a JSON document: log_dirs() takes them out
            kept.append(line)
            skipping = False
            continue
        if FOREIGN.search(line):
            skipping = True
            continue
        if skipping and line[:1] in (" ", "\t") and line.strip():
            continue
        skipping = False
        kept.append(line)
    return "".join(kept)


def clean(text: str) -> str:
    """What must differ between two clusters' answers, replaced by placeholders."""
    text = without_foreign(text)
    text = _ADDRESS.sub("HOST:PORT", text)
    text = _JAVA_UUID.sub("UUID", text)
    text = _KAFKA_UUID.sub("ID", text)
    text = _LOG_DIR.sub("LOG_DIR", text)
    text = _CONTROLLER.sub("", text)
    text = _EXITING.sub("", text)
    text = _COORDINATOR_ID.sub(r"\1 (ID)", text)
    return _THROTTLE.sub(r"\1N", text)


def lines(text: str) -> list[str]:
    return [" ".join(line.split()) for line in text.splitlines() if line.strip()]


def table_rows(text: str) -> list[str]:
    """Every line with its cells single-spaced, sorted."""
    return sorted(lines(text))


def in_order(text: str) -> list[str]:
    """Every line with its cells single-spaced, in the order printed (records, offsets)."""
    return lines(text)


def _sorted_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted_json(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        items = [_sorted_json(v) for v in value]
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True))
    return value


def json_lines(text: str) -> list[Any]:
    """Each line that is a JSON document parsed (lists sorted), the others as text."""
    out: list[Any] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if stripped[0] in "{[":
            try:
                out.append(_sorted_json(json.loads(stripped)))
                continue
            except ValueError:
                pass
        out.append(" ".join(stripped.split()))
    return out


def _without_offsets_topic(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_offsets_topic(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_offsets_topic(v) for v in value
                if not (isinstance(v, dict)
                        and str(v.get("partition", "")).startswith(NOT_COMPARED))]  # fmt: skip
    return value


#: Partitions kafka-log-dirs' JSON is compared without: the offsets topic's (each cluster places
#: them its own way, and coordkit keeps committed offsets in the store, not in that topic's logs)
#: and the AdminClient script's (see :data:`FOREIGN`).
NOT_COMPARED = ("__consumer_offsets", "admin-")


def log_dirs(text: str) -> list[Any]:
    """kafka-log-dirs' JSON without the partitions of :data:`NOT_COMPARED`."""
    return [_without_offsets_topic(line) for line in json_lines(text)]


Normaliser = Callable[[str], list[Any]]


@attrs.frozen
class Command:
    """One run of a tool.

    ``args`` may hold ``{bootstrap}`` (the cluster's brokers, ``host:port,...``) and ``{dir}``
    (a scratch folder of the script, for the files a command reads or writes).

    :param needs: the apis the command sends besides ApiVersions and Metadata: when coordkit
        does not advertise one, coordkit's outcome must be the client's refusal naming it.
    :param default: the command runs in the default test run (one per tool, on memory);
        the others in ``tox -e py311-tools`` only.
    :param defect: why coordkit's outcome is wrong (a strict xfail, and an entry of the findings)
        on the stores of ``defect_stores``.
    :param files: files written into ``{dir}`` before the command runs (name → text, which
        may hold ``{bootstrap}``).
    """

    name: str
    tool: str
    args: tuple[str, ...]
    needs: tuple[str, ...] = ()
    default: bool = False
    input: str | None = None
    normalise: Normaliser = table_rows
    settled: Callable[[str], bool] | None = None
    defect: str | None = None
    defect_stores: tuple[str, ...] = ("memory", "zookeeper", "redis")
    files: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        return f"{self.tool} {' '.join(self.args)}"


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
        return {"status": self.status, "stdout": run.normalise(clean(self.stdout)),
                "stderr": table_rows(clean("\n".join(self.said())))}  # fmt: skip


def _fill(text: str, bootstrap: str, scratch: Path) -> str:
    return text.replace("{bootstrap}", bootstrap).replace("{dir}", str(scratch))


def run_once(run: Command, bootstrap: str, scratch: Path) -> Outcome:
    for name, text in run.files:
        (scratch / name).write_text(_fill(text, bootstrap, scratch))
    args = [_fill(arg, bootstrap, scratch) for arg in run.args]
    if run.tool == "kcat":
        done = subprocess.run([require_kcat(), *args], input=run.input, capture_output=True,
                              text=True, timeout=TOOL_TIMEOUT, check=False,
                              stdin=None if run.input is not None else subprocess.DEVNULL)  # fmt: skip
    else:
        done = kafka_tool(KAFKA_KRAFT_VERSION, run.tool, *args, input=run.input, heap=TOOL_HEAP,
                          timeout=TOOL_TIMEOUT)  # fmt: skip
    return Outcome(done.returncode, done.stdout, done.stderr)


def run_command(run: Command, bootstrap: str, scratch: Path) -> Outcome:
    """The command's outcome; a settled command is run again until its output satisfies it."""
    for _ in range(SETTLE_ATTEMPTS if run.settled else 1):
        outcome = run_once(run, bootstrap, scratch)
        if run.settled is None or run.settled(outcome.stdout):
            break
    return outcome


def run_script(commands: Sequence[Command], bootstrap: str, scratch: Path) -> dict[str, Outcome]:
    """Every command in order against one cluster."""
    return {run.name: run_command(run, bootstrap, scratch) for run in commands}


def api_key_name(api: str) -> str:
    """Kafka's ``ApiKeys`` name of an api (``DescribeLogDirs``: DESCRIBE_LOG_DIRS), which its
    clients' UnsupportedVersionException names."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", api).upper()

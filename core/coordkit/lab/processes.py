"""The processes of one run of a lab workload that starts real clients (``real-clients``,
``share-groups``): the brokers (:mod:`.serve_host` or :mod:`.kafka_host`), a producer, the
members, each a Python program of its own whose output goes to files in the run's folder.

Every process is started with a pipe on stdin that this side writes to only to give the broker
host its commands: each child ends when its stdin ends, so none outlives the run even if the
process running the workload dies; on the way out (done or failing) every child still running is
killed and waited for, the brokers first told by the end of their stdin (Kafka's host kills its
JVMs before the run's folder, which holds their data, is removed).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Generic, Protocol, TypeVar

import attrs

from coordkit.lab import LabError

#: Seconds coordkit's brokers may take to start and create the topic (a loaded machine is slow).
STARTUP_SECONDS = 120.0
#: Seconds Kafka's controller and brokers (JVMs) may take to start and create the topic.
KAFKA_STARTUP_SECONDS = 300.0
#: Seconds a process may take to stop when asked.
STOP_SECONDS = 30.0
#: The broker hosts by the kind of brokers a strategy runs on.
BROKER_HOSTS = {"coordkit": "coordkit.lab.serve_host", "kafka": "coordkit.lab.kafka_host"}


@attrs.frozen
class RunEvent:
    """Something the run did (``kind``: ``initial`` or the event's action) at ``time``."""

    time: float
    label: str
    kind: str


@attrs.frozen
class ProcessLog:
    """One member process: its log's lines, when it started, and when it stopped (killed,
    exited) or ``None`` if it ran to the end."""

    name: str
    lines: tuple[str, ...]
    started: float
    ended: float | None


class LabProcess:
    """A child process, its output in files, its stdin a pipe kept open."""

    def __init__(self, name: str, argv: list[str], directory: Path) -> None:
        self.name = name
        self.stdout_path = directory / f"{name}.out"
        self.stderr_path = directory / f"{name}.err"
        with self.stdout_path.open("w") as out, self.stderr_path.open("w") as err:
            self.process = subprocess.Popen(
                [sys.executable, *argv],
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=err,
                text=True,
                env=dict(os.environ, PYTHONUNBUFFERED="1"),
            )
        self.started = time.time()
        self.ended: float | None = None

    @property
    def stdin(self) -> IO[str]:
        assert self.process.stdin is not None
        return self.process.stdin

    def running(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        if self.running():
            self.process.kill()
        self.process.wait(STOP_SECONDS)
        self.close_stdin()

    def terminate(self, timeout: float = STOP_SECONDS) -> None:
        """SIGTERM, and wait: the child finishes what it does and exits (killed if it hangs)."""
        if self.running():
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(STOP_SECONDS)
        self.close_stdin()

    def close_stdin(self) -> None:
        """The end of its stdin: a child that reads it to the end stops (the broker hosts)."""
        if self.ended is None:
            self.ended = time.time()
        if self.process.stdin is not None and not self.process.stdin.closed:
            try:
                self.process.stdin.close()
            except OSError:
                pass

    def output(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    def errors(self, tail: int = 1500) -> str:
        text = self.stderr_path.read_text(errors="replace").strip()
        return text[-tail:] if text else "(nothing on stderr)"

    def failed(self) -> bool:
        """Whether it ended with another status than 0 (SIGTERM's exit included)."""
        return self.process.returncode not in (None, 0)


class BrokerHost:
    """The brokers' process (:data:`BROKER_HOSTS`), ready: its brokers' addresses."""

    def __init__(self, process: LabProcess, kind: str) -> None:
        self.process = process
        self.kind = kind
        self.addresses: dict[int, str] = {}
        for words in map(str.split, process.output().splitlines()):
            if words[:1] == ["broker"] and len(words) == 3:
                self.addresses[int(words[1])] = words[2]

    @property
    def bootstrap(self) -> str:
        return ",".join(self.addresses[b] for b in sorted(self.addresses))

    def stop_broker(self, broker: int) -> Callable[[], bool]:
        """Crash ``broker`` (a SIGKILL of its JVM on Kafka); what says it is gone."""
        self.process.stdin.write(f"stop-broker {broker}\n")
        self.process.stdin.flush()
        return lambda: f"stopped {broker}" in self.process.output().split("\n")


def lab_broker_configs(brokers: int, factor: int) -> list[str]:
    """What every lab's brokers get beyond Kafka's defaults, coordkit's and Kafka's alike: a
    small ``__consumer_offsets`` replicated as the topic, a short first rebalance and the
    shortest classic session the lab's schedules use (Kafka's is 6 s)."""
    return [
        "group.initial.rebalance.delay.ms=500",
        "group.min.session.timeout.ms=100",
        f"offsets.topic.num.partitions={min(10, 2 * brokers)}",
        f"offsets.topic.replication.factor={min(factor, brokers)}",
    ]


class LabProcesses:
    """Every process of one run, started in ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.children: list[LabProcess] = []
        self.host: BrokerHost | None = None

    def start(self, name: str, argv: list[str]) -> LabProcess:
        child = LabProcess(name, argv, self.directory)
        self.children.append(child)
        return child

    def start_brokers(
        self,
        kind: str,
        brokers: int,
        topic: str,
        partitions: int,
        factor: int,
        configs: Sequence[str],
    ) -> BrokerHost:
        """The brokers of ``kind`` (``coordkit`` or ``kafka``) with ``topic`` created and the
        broker ``configs`` (``KEY=VALUE``, after :func:`lab_broker_configs`) set, once their
        host says ``ready``."""
        argv = ["-m", BROKER_HOSTS[kind], str(brokers), topic, str(partitions), str(factor)]
        if kind == "kafka":
            argv.append(str(self.directory / "kafka"))
        startup = KAFKA_STARTUP_SECONDS if kind == "kafka" else STARTUP_SECONDS
        process = self.start("brokers", [*argv, *lab_broker_configs(brokers, factor), *configs])
        deadline = time.monotonic() + startup
        while "ready" not in process.output().split("\n"):
            if not process.running() or time.monotonic() > deadline:
                raise LabError(
                    f"the brokers ({kind}) did not start within {startup:.0f} s: {process.errors()}"
                )
            time.sleep(0.1)
        self.host = BrokerHost(process, kind)
        return self.host

    def check_running(
        self,
        what: str,
        strategy: str,
        needed: Mapping[str, LabProcess | None],
        members: Iterable[LabProcess],
    ) -> None:
        """Raise the error of the first process that stopped while the run waits for ``what``:
        one ``needed`` (by name: ``the producer``), or one of the ``members`` alive."""
        if self.host is not None:
            needed = {"the brokers": self.host.process, **needed}
        for name, child in needed.items():
            if child is not None and not child.running():
                raise LabError(
                    f"{name} ({strategy}) stopped while waiting for {what}: {child.errors()}"
                )
        for member in members:
            if not member.running():
                raise LabError(
                    f"{member.name} ({strategy}) exited with status "
                    f"{member.process.returncode} while waiting for {what}: {member.errors()}"
                )

    def close(self) -> None:
        """The brokers first, told by the end of their stdin; then every other process."""
        if self.host is not None and self.host.process.running():
            self.host.process.close_stdin()
            try:
                self.host.process.process.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                pass
        for child in self.children:
            try:
                child.kill()
            except (OSError, subprocess.TimeoutExpired):
                pass


class LabMember:
    """A member's process (a consumer) and its log, read as it grows; ``alive`` until the run
    kills or stops it."""

    def __init__(self, child: LabProcess, log: Path) -> None:
        self.child = child
        self.log = log
        self.alive = True

    def lines(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def process_log(self) -> ProcessLog:
        return ProcessLog(
            self.child.name,
            tuple(self.lines()),
            self.child.started,
            self.child.ended if not self.alive else None,
        )

    def report(self) -> str:
        """What it did so far, for the error of a run that waited in vain."""
        return f"{self.child.name} logged {len(self.lines())} lines"


M = TypeVar("M", bound=LabMember)


class LabRun(Generic[M]):
    """What every run of real client processes does alike: its processes, its events, waiting
    on its members while the brokers, the producer and the live members keep running."""

    #: How the error of a run that waited in vain names a member, and a hint it gives.
    member_word = "member"
    timeout_hint = ""

    def __init__(self, strategy: str, directory: Path) -> None:
        self.strategy = strategy
        self.directory = directory
        self.processes = LabProcesses(directory)
        self.members: list[M] = []
        self.events: list[RunEvent] = []
        self.producer: LabProcess | None = None
        self.bootstrap = ""

    def live(self) -> list[M]:
        return [m for m in self.members if m.alive]

    def pick(self, number: int) -> M:
        """The live member an event's ``pick`` names."""
        live = self.live()
        return live[number % len(live)]

    def producer_log(self) -> list[str]:
        return (self.directory / "producer.log").read_text().splitlines()

    def wait(self, what: str, done: Callable[[], bool], timeout: float) -> None:
        """Until ``done()``; a process that stops meanwhile, or ``timeout`` seconds, is the
        run's :class:`LabError`."""
        deadline = time.monotonic() + timeout
        while not done():
            self.processes.check_running(
                what,
                self.strategy,
                {"the producer": self.producer},
                [m.child for m in self.live()],
            )
            if time.monotonic() > deadline:
                raise LabError(
                    f"{self.strategy}: no {what} within {timeout:.0f} s{self.timeout_hint}; "
                    + "; ".join(m.report() for m in self.live())
                    + f"; last {self.member_word}'s stderr: {self.members[-1].child.errors(600)}"
                )
            time.sleep(0.1)

    def stop_producer(self, timeout: float = STOP_SECONDS) -> None:
        """SIGTERM: it sends no more and waits for its last acknowledgements (``timeout``)."""
        assert self.producer is not None
        self.producer.terminate(timeout)
        if self.producer.failed():
            raise LabError(
                f"the producer ({self.strategy}) exited with status "
                f"{self.producer.process.returncode}: {self.producer.errors()}"
            )

    def close(self) -> None:
        self.processes.close()


S = TypeVar("S")


class Runnable(Protocol[S]):
    """A run: its steps, and the end of every process it started."""

    def run(self) -> list[S]: ...

    def close(self) -> None: ...


def run_in_temporary_folder(prefix: str, make: Callable[[Path], Runnable[S]]) -> list[S]:
    """``make``'s run in a new folder (``prefix``...), once; every process it started is gone
    and the folder removed when this returns or raises."""
    with tempfile.TemporaryDirectory(prefix=prefix) as directory:
        run = make(Path(directory))
        try:
            return run.run()
        finally:
            run.close()


def acknowledged(lines: Iterable[str]) -> dict[int, float]:
    """The records the brokers acknowledged to the producer, from its log's ``a SEQ PARTITION
    OFFSET SENT`` lines: seq → send time."""
    out = {}
    for line in lines:
        words = line.split()
        if words[:1] == ["a"] and len(words) == 5:
            out[int(words[1])] = float(words[4])
    return out


def drain(producer_log: Path, received: Callable[[], set[int]], timeout: float) -> None:
    """Wait until ``received()`` holds every record the producer had acknowledged (or
    ``timeout`` seconds: what is missing then is the run's measure, not an error)."""
    acked = acknowledged(producer_log.read_text().splitlines()).keys()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if acked <= received():
            return
        time.sleep(0.2)


__all__: Sequence[str] = (
    "BrokerHost",
    "LabMember",
    "LabProcess",
    "LabProcesses",
    "LabRun",
    "ProcessLog",
    "RunEvent",
    "acknowledged",
    "drain",
    "lab_broker_configs",
    "run_in_temporary_folder",
)

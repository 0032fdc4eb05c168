"""One ``real-clients`` run: the processes (brokers, producer, consumers), the events, the logs.

Every process is started with a pipe on stdin that this side never writes to (but the broker
host's commands): each child ends when its stdin ends, so none outlives the run even if the
process running the workload dies; on the way out (done or failing) every child still running is
killed and waited for.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import attrs

from coordkit.lab import LabError
from coordkit_assignors.lab.clients.analysis import ClientStep, ConsumerLog, RunEvent, steps

TOPIC = "lab-records"
GROUP = "lab-group"
#: Seconds the brokers may take to start and create the topic (a loaded machine is slow).
STARTUP_SECONDS = 120.0
#: Seconds Kafka's controller and brokers (JVMs) may take to start and create the topic.
KAFKA_STARTUP_SECONDS = 300.0
#: Seconds the group may take to own every partition again after an event.
SETTLE_SECONDS = 120.0
#: Seconds without an ownership change after which a complete group counts as settled.
QUIET_SECONDS = 1.0
#: Seconds the consumers may take to read every acknowledged record at the end.
DRAIN_SECONDS = 60.0
#: Seconds a process may take to stop when asked.
STOP_SECONDS = 30.0


@attrs.frozen
class ClientEvent:
    """One scheduled event: ``action`` on the consumer (or broker) chosen by ``pick``."""

    action: str  # join | crash | restart | broker-failure
    pick: int


@attrs.frozen
class RunSpec:
    client: str
    assignor: str
    brokers: int
    partitions: int
    replication_factor: int
    consumers: int
    rate: float
    session_ms: int
    gap: float
    events: tuple[ClientEvent, ...]
    #: ``classic`` (JoinGroup/SyncGroup, the client's assignor) or ``consumer`` (KIP-848:
    #: ``assignor`` is the server-side assignor the client names).
    protocol: str = "classic"
    #: ``coordkit`` (coordkit's Kafka server) or ``kafka`` (Apache Kafka 4.4, KRaft).
    broker: str = "coordkit"
    #: The server-side assignors coordkit's brokers offer (``group.consumer.assignors``).
    server_assignors: tuple[str, ...] = ("uniform", "range")


class _Child:
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
        self._close()

    def terminate(self) -> None:
        """SIGTERM, and wait: the child finishes what it does and exits (killed if it hangs)."""
        if self.running():
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(STOP_SECONDS)
        self._close()

    def _close(self) -> None:
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


class _ConsumerState:
    """A consumer's log read as it grows: what it owns, when that last changed."""

    def __init__(self, child: _Child, log: Path) -> None:
        self.child = child
        self.log = log
        self.offset = 0
        self.owned: set[int] = set()
        self.changed = child.started
        self.seqs: set[int] = set()
        self.alive = True

    def refresh(self) -> None:
        if not self.log.exists():
            return
        with self.log.open("rb") as file:
            file.seek(self.offset)
            data = file.read()
        complete = data[: data.rfind(b"\n") + 1]
        self.offset += len(complete)
        for line in complete.decode().splitlines():
            words = line.split()
            if words[:1] == ["r"] and len(words) == 6:
                self.seqs.add(int(words[4]))
            elif words[:1] in (["assigned"], ["revoked"], ["lost"]) and len(words) == 3:
                parts = set() if words[2] == "-" else {int(p) for p in words[2].split(",")}
                if words[0] == "assigned":
                    self.owned |= parts
                else:
                    self.owned -= parts
                self.changed = float(words[1])


class ClientsRun:
    """The processes of one run and what they did."""

    def __init__(self, spec: RunSpec, strategy: str, directory: Path) -> None:
        self.spec = spec
        self.strategy = strategy
        self.directory = directory
        self.children: list[_Child] = []
        self.consumers: list[_ConsumerState] = []
        self.events: list[RunEvent] = []
        self.live_brokers: list[int] = []
        self.host: _Child | None = None
        self.producer: _Child | None = None
        self.bootstrap = ""

    # -- processes
    def _start(self, name: str, argv: list[str]) -> _Child:
        child = _Child(name, argv, self.directory)
        self.children.append(child)
        return child

    def _start_host(self) -> None:
        spec = self.spec
        argv = [
            str(spec.brokers),
            TOPIC,
            str(spec.partitions),
            str(spec.replication_factor),
            str(spec.session_ms),
            str(self._heartbeat_ms()),
        ]
        if spec.broker == "kafka":
            argv = ["-m", "coordkit_assignors.lab.clients.kafka_host", *argv]
            argv.append(str(self.directory / "kafka"))
            startup = KAFKA_STARTUP_SECONDS
        else:
            argv = ["-m", "coordkit_assignors.lab.clients.broker_host", *argv]
            argv.append(",".join(spec.server_assignors))
            startup = STARTUP_SECONDS
        host = self.host = self._start("brokers", argv)
        deadline = time.monotonic() + startup
        while "ready" not in host.output().split("\n"):
            if not host.running() or time.monotonic() > deadline:
                raise LabError(
                    f"the brokers ({spec.broker}) did not start within {startup:.0f} s: "
                    f"{host.errors()}"
                )
            time.sleep(0.1)
        addresses = {}
        for line in host.output().splitlines():
            words = line.split()
            if words[:1] == ["broker"] and len(words) == 3:
                addresses[int(words[1])] = words[2]
        self.live_brokers = sorted(addresses)
        self.bootstrap = ",".join(addresses[b] for b in self.live_brokers)

    def _settings(self, name: str) -> dict[str, Any]:
        return {
            "client": self.spec.client,
            "bootstrap": self.bootstrap,
            "topic": TOPIC,
            "log": str(self.directory / f"{name}.log"),
        }

    def _start_producer(self) -> None:
        settings = {**self._settings("producer"), "rate": self.spec.rate}
        self.producer = self._start(
            "producer",
            ["-m", "coordkit_assignors.lab.clients.producer", json.dumps(settings)],
        )

    def _heartbeat_ms(self) -> int:
        return max(100, self.spec.session_ms // 5)

    def _start_consumer(self) -> _ConsumerState:
        name = f"consumer-{len(self.consumers)}"
        session = self.spec.session_ms
        # The consumer protocol's session and heartbeat are the brokers' (_start_host).
        settings = {
            **self._settings(name),
            "group": GROUP,
            "client_id": name,
            "protocol": self.spec.protocol,
            "assignor": self.spec.assignor,
            "session_ms": session,
            "heartbeat_ms": self._heartbeat_ms(),
            "max_poll_ms": max(30_000, 3 * session),
        }
        child = self._start(
            name, ["-m", "coordkit_assignors.lab.clients.consumer", json.dumps(settings)]
        )
        state = _ConsumerState(child, Path(settings["log"]))
        self.consumers.append(state)
        return state

    def close(self) -> None:
        # The brokers first, told by the end of their stdin: Kafka's host kills its JVMs
        # before the run's directory, which holds their data, is removed.
        if self.spec.broker == "kafka" and self.host is not None and self.host.running():
            self.host._close()
            try:
                self.host.process.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                pass
        for child in self.children:
            try:
                child.kill()
            except (OSError, subprocess.TimeoutExpired):
                pass

    # -- the run
    def run(self) -> list[ClientStep]:
        spec = self.spec
        self._start_host()
        self._start_producer()
        for _ in range(spec.consumers):
            self._start_consumer()
        start = min(c.child.started for c in self.consumers)
        self.events.append(RunEvent(start, f"{spec.consumers} consumers start", "initial"))
        self._settle("the initial assignment", start)
        for event in spec.events:
            time.sleep(spec.gap)
            at = time.time()
            label = self._apply(event)
            self.events.append(RunEvent(at, label, event.action))
            self._settle(label, at, changes=event.action != "broker-failure")
        time.sleep(spec.gap)
        assert self.producer is not None
        self.producer.terminate()
        self._check_running(self.producer, "the producer")
        self._drain()
        end = time.time()
        for state in self.consumers:
            if state.alive:
                state.child.kill()
        return steps(
            strategy=self.strategy,
            partitions=spec.partitions,
            consumers=[
                ConsumerLog(
                    s.child.name,
                    tuple(s.log.read_text().splitlines()) if s.log.exists() else (),
                    s.child.started,
                    s.child.ended if not s.alive else None,
                )
                for s in self.consumers
            ],
            producer=(self.directory / "producer.log").read_text().splitlines(),
            events=self.events,
            start=start,
            end=end,
        )

    def _apply(self, event: ClientEvent) -> str:
        live = [c for c in self.consumers if c.alive]
        match event.action:
            case "crash":
                victim = live[event.pick % len(live)]
                victim.child.kill()
                victim.alive = False
                return f"{victim.child.name} killed (SIGKILL)"
            case "restart":
                victim = live[event.pick % len(live)]
                victim.child.terminate()
                victim.alive = False
                replacement = self._start_consumer()
                return f"{victim.child.name} restarts as {replacement.child.name}"
            case "broker-failure":
                host = self.host
                assert host is not None
                broker = self.live_brokers.pop(event.pick % len(self.live_brokers))
                host.stdin.write(f"stop-broker {broker}\n")
                host.stdin.flush()
                self._wait(
                    f"broker {broker} to stop",
                    lambda: f"stopped {broker}" in host.output().split("\n"),
                    STARTUP_SECONDS,
                )
                return f"broker {broker} crashes"
        joined = self._start_consumer()
        return f"{joined.child.name} joins"

    def _check_running(self, child: _Child, what: str) -> None:
        if child.process.returncode not in (None, 0):
            raise LabError(
                f"{what} ({self.strategy}) exited with status {child.process.returncode}: "
                f"{child.errors()}"
            )

    def _wait(self, what: str, done: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            for child in self.children:
                if child in (self.host, self.producer) and not child.running():
                    raise LabError(
                        f"{'the brokers' if child is self.host else 'the producer'} "
                        f"({self.strategy}) stopped while waiting for {what}: "
                        f"{child.errors()}"
                    )
            for state in self.consumers:
                if state.alive and not state.child.running():
                    raise LabError(
                        f"{state.child.name} ({self.strategy}) exited with status "
                        f"{state.child.process.returncode} while waiting for {what}: "
                        f"{state.child.errors()}"
                    )
            if time.monotonic() > deadline:
                raise LabError(
                    f"{self.strategy}: no {what} within {timeout:.0f} s; "
                    + "; ".join(
                        f"{s.child.name} owns {sorted(s.owned)}" for s in self.consumers if s.alive
                    )
                    + f"; last consumer's stderr: {self.consumers[-1].child.errors(600)}"
                )
            time.sleep(0.1)

    def _settle(self, what: str, since: float, *, changes: bool = True) -> None:
        """Wait until the running consumers own every partition, each at least one (when there
        are enough), with no change for QUIET_SECONDS (and one since ``since`` if ``changes``)."""
        partitions = set(range(self.spec.partitions))

        def settled() -> bool:
            live = [c for c in self.consumers if c.alive]
            for state in live:
                state.refresh()
            owned = set().union(*(c.owned for c in live))
            if owned != partitions:
                return False
            if len(live) <= len(partitions) and any(not c.owned for c in live):
                return False
            last = max(c.changed for c in live)
            if changes and last < since:
                return False
            return time.time() - last >= QUIET_SECONDS

        self._wait(f"settled group after {what!r}", settled, SETTLE_SECONDS)

    def _drain(self) -> None:
        """Wait until the consumers received every acknowledged record (or DRAIN_SECONDS)."""
        acked = set()
        for line in (self.directory / "producer.log").read_text().splitlines():
            words = line.split()
            if words[:1] == ["a"]:
                acked.add(int(words[1]))
        deadline = time.monotonic() + DRAIN_SECONDS
        while time.monotonic() < deadline:
            received: set[int] = set()
            for state in self.consumers:
                state.refresh()
                received |= state.seqs
            if acked <= received:
                return
            time.sleep(0.2)


def run_clients(spec: RunSpec, strategy: str) -> list[ClientStep]:
    """Run ``spec`` once; every process it started is gone when this returns or raises."""
    with tempfile.TemporaryDirectory(prefix="coordkit-lab-clients-") as directory:
        run = ClientsRun(spec, strategy, Path(directory))
        try:
            return run.run()
        finally:
            run.close()


__all__: Sequence[str] = ("ClientEvent", "ClientsRun", "RunSpec", "run_clients")

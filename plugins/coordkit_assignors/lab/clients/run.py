"""One ``real-clients`` run: the processes (brokers, producer, consumers), the events, the logs.

The processes are started, watched and stopped as :mod:`coordkit.lab.processes` does for every
lab workload of real clients; this module says which, with what settings, and when the group has
settled.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from coordkit.lab.processes import (
    LabMember,
    LabProcess,
    LabRun,
    RunEvent,
    drain,
    run_in_temporary_folder,
)
from coordkit_assignors.lab.clients.analysis import ClientStep, steps

TOPIC = "lab-records"
GROUP = "lab-group"
#: Kafka's own server-side assignors, which the ``consumer-*@kafka`` strategies may name.
KAFKA_SERVER_ASSIGNORS = ("uniform", "range")
#: Seconds a broker may take to stop when crashed.
BROKER_STOP_SECONDS = 120.0
#: Seconds the group may take to own every partition again after an event.
SETTLE_SECONDS = 120.0
#: Seconds without an ownership change after which a complete group counts as settled.
QUIET_SECONDS = 1.0
#: Seconds the consumers may take to read every acknowledged record at the end.
DRAIN_SECONDS = 60.0


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


class _ConsumerState(LabMember):
    """A consumer's log read as it grows: what it owns, when that last changed."""

    def __init__(self, child: LabProcess, log: Path) -> None:
        super().__init__(child, log)
        self.offset = 0
        self.owned: set[int] = set()
        self.changed = child.started
        self.seqs: set[int] = set()

    def report(self) -> str:
        return f"{self.child.name} owns {sorted(self.owned)}"

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


class ClientsRun(LabRun[_ConsumerState]):
    """The processes of one run and what they did."""

    member_word = "consumer"

    def __init__(self, spec: RunSpec, strategy: str, directory: Path) -> None:
        super().__init__(strategy, directory)
        self.spec = spec
        self.live_brokers: list[int] = []

    # -- processes
    def _broker_configs(self) -> list[str]:
        """The consumer groups' (KIP-848) session, heartbeat and server-side assignors, by
        Kafka's names; Kafka's brokers take the session and heartbeat as their bounds too (their
        shortest is 45 s and 5 s) and offer their own assignors."""
        spec = self.spec
        session, heartbeat = spec.session_ms, self._heartbeat_ms()
        timing = [
            f"group.consumer.session.timeout.ms={session}",
            f"group.consumer.heartbeat.interval.ms={heartbeat}",
        ]
        if spec.broker == "kafka":
            return [
                f"group.consumer.assignors={','.join(KAFKA_SERVER_ASSIGNORS)}",
                *timing,
                f"group.consumer.min.session.timeout.ms={session}",
                f"group.consumer.min.heartbeat.interval.ms={heartbeat}",
            ]
        return [f"group.consumer.assignors={','.join(spec.server_assignors)}", *timing]

    def _start_host(self) -> None:
        spec = self.spec
        host = self.processes.start_brokers(
            spec.broker, spec.brokers, TOPIC, spec.partitions, spec.replication_factor,
            self._broker_configs(),
        )  # fmt: skip
        self.live_brokers = sorted(host.addresses)
        self.bootstrap = host.bootstrap

    def _settings(self, name: str) -> dict[str, Any]:
        return {
            "client": self.spec.client,
            "bootstrap": self.bootstrap,
            "topic": TOPIC,
            "log": str(self.directory / f"{name}.log"),
        }

    def _start_producer(self) -> None:
        settings = {**self._settings("producer"), "rate": self.spec.rate}
        self.producer = self.processes.start(
            "producer",
            ["-m", "coordkit_assignors.lab.clients.producer", json.dumps(settings)],
        )

    def _heartbeat_ms(self) -> int:
        return max(100, self.spec.session_ms // 5)

    def _start_consumer(self) -> _ConsumerState:
        name = f"consumer-{len(self.members)}"
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
        child = self.processes.start(
            name, ["-m", "coordkit_assignors.lab.clients.consumer", json.dumps(settings)]
        )
        state = _ConsumerState(child, Path(settings["log"]))
        self.members.append(state)
        return state

    # -- the run
    def run(self) -> list[ClientStep]:
        spec = self.spec
        self._start_host()
        self._start_producer()
        for _ in range(spec.consumers):
            self._start_consumer()
        start = min(c.child.started for c in self.members)
        self.events.append(RunEvent(start, f"{spec.consumers} consumers start", "initial"))
        self._settle("the initial assignment", start)
        for event in spec.events:
            time.sleep(spec.gap)
            at = time.time()
            label = self._apply(event)
            self.events.append(RunEvent(at, label, event.action))
            self._settle(label, at, changes=event.action != "broker-failure")
        time.sleep(spec.gap)
        self.stop_producer()
        self._drain()
        end = time.time()
        for state in self.live():
            state.child.kill()
        return steps(
            strategy=self.strategy,
            partitions=spec.partitions,
            consumers=[s.process_log() for s in self.members],
            producer=self.producer_log(),
            events=self.events,
            start=start,
            end=end,
        )

    def _apply(self, event: ClientEvent) -> str:
        match event.action:
            case "crash":
                victim = self.pick(event.pick)
                victim.child.kill()
                victim.alive = False
                return f"{victim.child.name} killed (SIGKILL)"
            case "restart":
                victim = self.pick(event.pick)
                victim.child.terminate()
                victim.alive = False
                replacement = self._start_consumer()
                return f"{victim.child.name} restarts as {replacement.child.name}"
            case "broker-failure":
                host = self.processes.host
                assert host is not None
                broker = self.live_brokers.pop(event.pick % len(self.live_brokers))
                self.wait(f"broker {broker} to stop", host.stop_broker(broker),
                          BROKER_STOP_SECONDS)  # fmt: skip
                return f"broker {broker} crashes"
        joined = self._start_consumer()
        return f"{joined.child.name} joins"

    def _settle(self, what: str, since: float, *, changes: bool = True) -> None:
        """Wait until the running consumers own every partition, each at least one (when there
        are enough), with no change for QUIET_SECONDS (and one since ``since`` if ``changes``)."""
        partitions = set(range(self.spec.partitions))

        def settled() -> bool:
            live = self.live()
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

        self.wait(f"settled group after {what!r}", settled, SETTLE_SECONDS)

    def _drain(self) -> None:
        """Wait until the consumers received every acknowledged record (or DRAIN_SECONDS)."""

        def received() -> set[int]:
            for state in self.members:
                state.refresh()
            return set().union(*(state.seqs for state in self.members))

        drain(self.directory / "producer.log", received, DRAIN_SECONDS)


def run_clients(spec: RunSpec, strategy: str) -> list[ClientStep]:
    """Run ``spec`` once; every process it started is gone when this returns or raises."""
    return run_in_temporary_folder(
        "coordkit-lab-clients-", lambda directory: ClientsRun(spec, strategy, directory)
    )


__all__: Sequence[str] = ("ClientEvent", "ClientsRun", "RunSpec", "run_clients")

"""One ``share-groups`` run: the processes (brokers, producer, share consumers), the events, the
logs.

The processes are started, watched and stopped as :mod:`coordkit.lab.processes` does for every
lab workload of real clients; this module says which, with what settings, and when a member got
its records.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs

from coordkit.lab import LabError
from coordkit.lab.processes import (
    STARTUP_SECONDS,
    LabMember,
    LabRun,
    RunEvent,
    drain,
    run_in_temporary_folder,
)
from coordkit_share_assignors.lab.analysis import ShareStep, steps

TOPIC = "lab-share-records"
GROUP = "lab-share-group"
#: Seconds a member may take to get its first records (start-up, joining, the assignment).
SETTLE_SECONDS = 120.0
#: Seconds the members may take to settle every acknowledged record at the end.
DRAIN_SECONDS = 60.0
#: Seconds the producer may take to stop: its last acknowledgements (a minute at most) first.
PRODUCER_STOP_SECONDS = 90.0


@attrs.frozen
class ShareEvent:
    """One scheduled event: ``action`` on the member chosen by ``pick``."""

    action: str  # join | crash | restart | stall
    pick: int


@attrs.frozen
class RunSpec:
    brokers: int
    partitions: int
    replication_factor: int
    consumers: int
    rate: float
    lock_ms: int
    session_ms: int
    release: float
    reject: float
    gap: float
    seed: int
    events: tuple[ShareEvent, ...]
    #: The share assignor coordkit's brokers use (``group.share.assignors``); unused on Kafka.
    assignor: str = "simple"
    #: ``coordkit`` (coordkit's Kafka server) or ``kafka`` (Apache Kafka 4.4, KRaft).
    broker: str = "coordkit"

    @property
    def heartbeat_ms(self) -> int:
        return max(100, self.session_ms // 5)

    @property
    def stall_seconds(self) -> float:
        """How long a stalling member holds its records: half a lock past it."""
        return 1.5 * self.lock_ms / 1e3

    def broker_configs(self) -> list[str]:
        """What the brokers get beyond their defaults, by Kafka's names (both kinds alike)."""
        return [
            f"group.share.assignors={self.assignor}",
            f"group.share.record.lock.duration.ms={self.lock_ms}",
            f"group.share.session.timeout.ms={self.session_ms}",
            f"group.share.heartbeat.interval.ms={self.heartbeat_ms}",
        ]


def with_lower_bounds(configs: Mapping[str, str]) -> dict[str, str]:
    """``configs`` with the lower bounds Kafka 4.4 checks them against at a broker's start
    (``group.share.min.*``: 15 s locks, 45 s sessions, 5 s heartbeats by default), which
    coordkit serve checks too, moved down to the values set."""
    out = dict(configs)
    for name in ("record.lock.duration.ms", "session.timeout.ms", "heartbeat.interval.ms"):
        value = configs.get(f"group.share.{name}")
        if value is not None:
            out[f"group.share.min.{name}"] = value
    return out


def kafka_settings(configs: Mapping[str, str]) -> dict[str, str]:
    """The broker configs the workload gives coordkit, as Kafka 4.4 takes them: the same lower
    bounds, and Kafka's own assignor left in place."""
    return {k: v for k, v in with_lower_bounds(configs).items() if k != "group.share.assignors"}


class _Member(LabMember):
    """A share consumer's process and its log, read as it grows."""

    def report(self) -> str:
        return f"{self.child.name} got {self.delivered()} records"

    def delivered(self) -> int:
        return sum(1 for line in self.lines() if line.startswith("d "))

    def settled(self) -> set[int]:
        """Records this member accepted or rejected, the brokers agreeing."""
        out = set()
        for line in self.lines():
            words = line.split()
            if (
                words[:1] == ["k"]
                and len(words) == 7
                and words[6] == "ok"
                and words[5] != "release"
            ):
                out.add(int(words[2]))
        return out


class ShareRun(LabRun[_Member]):
    """The processes of one run and what they did."""

    timeout_hint = " (do the brokers serve share groups?)"

    def __init__(self, spec: RunSpec, strategy: str, directory: Path) -> None:
        super().__init__(strategy, directory)
        self.spec = spec

    def _start_host(self) -> None:
        spec = self.spec
        given = dict(word.split("=", 1) for word in spec.broker_configs())
        named = kafka_settings(given) if spec.broker == "kafka" else with_lower_bounds(given)
        host = self.processes.start_brokers(
            spec.broker, spec.brokers, TOPIC, spec.partitions, spec.replication_factor,
            [f"{name}={value}" for name, value in named.items()],
        )  # fmt: skip
        self.bootstrap = host.bootstrap

    def _earliest(self) -> None:
        """The group starts at the topic's first record (its ``share.auto.offset.reset``), so a
        record sent before the first member joined is consumed too."""
        # confluent-kafka's documented imports, though its stubs do not re-export them (the
        # type env, without confluent-kafka, sees no error to ignore).
        from confluent_kafka.admin import (  # type: ignore[attr-defined,unused-ignore]
            AdminClient,
            AlterConfigOpType,
            ConfigEntry,
            ConfigResource,
            ResourceType,
        )

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        entry = ConfigEntry(
            "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
        )
        resource = ConfigResource(ResourceType.GROUP, GROUP, incremental_configs=[entry])
        # Just started brokers may not answer at once (a loaded machine): retry until the
        # start-up's deadline, then say what the last answer was.
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            try:
                for future in admin.incremental_alter_configs([resource]).values():
                    future.result(30)
                return
            except Exception as exc:
                if time.monotonic() > deadline:
                    raise LabError(
                        f"the brokers ({self.spec.broker}) refused the share group's config "
                        f"share.auto.offset.reset=earliest: {type(exc).__name__}: {exc}"
                    ) from None
                time.sleep(1.0)

    def _start_producer(self) -> None:
        settings = {
            "bootstrap": self.bootstrap,
            "topic": TOPIC,
            "rate": self.spec.rate,
            "log": str(self.directory / "producer.log"),
        }
        self.producer = self.processes.start(
            "producer", ["-m", "coordkit_share_assignors.lab.producer", json.dumps(settings)]
        )

    def _start_member(self) -> _Member:
        name = f"consumer-{len(self.members)}"
        spec = self.spec
        log = self.directory / f"{name}.log"
        settings = {
            "bootstrap": self.bootstrap,
            "group": GROUP,
            "topic": TOPIC,
            "client_id": name,
            "log": str(log),
            "seed": spec.seed,
            "release": spec.release,
            "reject": spec.reject,
        }
        child = self.processes.start(
            name, ["-m", "coordkit_share_assignors.lab.consumer", json.dumps(settings)]
        )
        member = _Member(child, log)
        self.members.append(member)
        return member

    # -- the run
    def run(self) -> list[ShareStep]:
        spec = self.spec
        self._start_host()
        self._earliest()
        self._start_producer()
        for _ in range(spec.consumers):
            self._start_member()
        start = min(m.child.started for m in self.members)
        self.events.append(RunEvent(start, f"{spec.consumers} consumers start", "initial"))
        self.wait(
            "every member's first records",
            lambda: all(m.delivered() for m in self.members),
            SETTLE_SECONDS,
        )
        for event in spec.events:
            time.sleep(spec.gap)
            at = time.time()
            label = self._apply(event)
            self.events.append(RunEvent(at, label, event.action))
        time.sleep(spec.gap)
        self.stop_producer(PRODUCER_STOP_SECONDS)
        self._drain()
        end = time.time()
        for member in self.live():
            member.child.kill()
        return steps(
            strategy=self.strategy,
            partitions=spec.partitions,
            members=[m.process_log() for m in self.members],
            producer=self.producer_log(),
            events=self.events,
            end=end,
        )

    def _apply(self, event: ShareEvent) -> str:
        spec = self.spec
        match event.action:
            case "crash":
                victim = self.pick(event.pick)
                victim.child.kill()
                victim.alive = False
                # Its acquired records come back after their lock, its partitions after its
                # session: wait for both.
                time.sleep((spec.lock_ms + spec.session_ms) / 1e3)
                return f"{victim.child.name} killed (SIGKILL)"
            case "restart":
                victim = self.pick(event.pick)
                victim.child.terminate()
                victim.alive = False
                new = self._start_member()
                self.wait(f"{new.child.name}'s first records", lambda: new.delivered() > 0,
                          SETTLE_SECONDS)  # fmt: skip
                return f"{victim.child.name} restarts as {new.child.name}"
            case "stall":
                victim = self.pick(event.pick)
                victim.child.stdin.write(f"stall {spec.stall_seconds}\n")
                victim.child.stdin.flush()
                seen = len(victim.lines())
                self.wait(
                    f"{victim.child.name} to stall and resume",
                    lambda: any(line.startswith("resume") for line in victim.lines()[seen:]),
                    SETTLE_SECONDS + spec.stall_seconds,
                )
                return f"{victim.child.name} stalls {spec.stall_seconds:g} s holding its records"
        joined = self._start_member()
        self.wait(f"{joined.child.name}'s first records", lambda: joined.delivered() > 0,
                  SETTLE_SECONDS)  # fmt: skip
        return f"{joined.child.name} joins"

    def _drain(self) -> None:
        """Wait until the members settled every acknowledged record (or DRAIN_SECONDS)."""
        drain(
            self.directory / "producer.log",
            lambda: set().union(*(member.settled() for member in self.members)),
            DRAIN_SECONDS,
        )


def run_share_groups(spec: RunSpec, strategy: str) -> list[ShareStep]:
    """Run ``spec`` once; every process it started is gone when this returns or raises."""
    return run_in_temporary_folder(
        "coordkit-lab-share-", lambda directory: ShareRun(spec, strategy, directory)
    )


__all__: Sequence[str] = ("RunSpec", "ShareEvent", "ShareRun", "run_share_groups")

"""Chaos schedules: seeded random interleavings of store faults and cluster events.

A schedule is generated from its seed alone (``random.Random(seed)``) and the fault kinds the
backend offers, never from what happens while it runs, so printing the seed is enough to replay
it. Choices that depend on the running cluster (which broker is the controller, which broker is
down) are made when a step runs, from the cluster's state, the same way every time.

Shape: one to three topics first, then 4–9 events. A store fault opens (a server crash or pause,
a session cut) and closes a few events later, so cluster events land while the store is down or
hung. At most one store fault is open at a time, a schedule has at most one server fault (crash or
pause) and two session cuts, and at most two of the three brokers are down at once: a schedule
runs for a few seconds.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import attrs

from harness.faults import CRASH, CUT, EXPIRE, PAUSE

BROKERS = (1, 2, 3)
MAX_PARTITIONS = 12
MIN_EVENTS = 4
MAX_EVENTS = 9
MAX_SERVER_FAULTS = 1
MAX_CUTS = 2
#: Chance that a store fault starts before an event (when none is open).
FAULT_CHANCE = 0.3
#: Topics whose name starts with this allow unclean leader election (and may lose acked records).
UNCLEAN_PREFIX = "unclean-"

# Cluster events.
CREATE_TOPIC = "create-topic"
DELETE_TOPIC = "delete-topic"
ADD_PARTITIONS = "add-partitions"
PRODUCE = "produce"
CRASH_BROKER = "crash-broker"
CRASH_CONTROLLER = "crash-controller"
STOP_BROKER = "stop-broker"
RESTART_BROKER = "restart-broker"
# Store faults and their ends.
CRASH_STORE = "crash-store"
RECOVER_STORE = "recover-store"
PAUSE_STORE = "pause-store"
RESUME_STORE = "resume-store"
CUT_SESSION = "cut-session"
RESTORE_SESSION = "restore-session"
EXPIRE_SESSION = "expire-session"

#: Steps that inflict a fault (counted in the run summary).
FAULT_ACTIONS = frozenset(
    {CRASH_STORE, PAUSE_STORE, CUT_SESSION, EXPIRE_SESSION, CRASH_BROKER, CRASH_CONTROLLER}
)


@attrs.frozen
class Step:
    """One action of a schedule.

    :param broker: the broker acted on; ``None`` for session faults means the controller's
        session, for a restart the lowest-numbered broker that is down.
    :param count: partitions (create: the count; add-partitions: the new total) or records.
    :param hold: for a pause or cut, the least time it lasts (its end waits for the rest).
    :param pause_after: seconds to wait before the next step.
    :param peer: the other broker of a fault between two brokers (process schedules).
    """

    action: str
    broker: int | None = None
    topic: str | None = None
    count: int = 0
    replication_factor: int = 0
    hold: float = 0.0
    pause_after: float = 0.0
    peer: int | None = None

    def __str__(self) -> str:
        words = [self.action]
        if self.topic is not None:
            words.append(self.topic)
        if self.action == CREATE_TOPIC:
            words.append(f"partitions={self.count} rf={self.replication_factor}")
        elif self.action == ADD_PARTITIONS:
            words.append(f"total={self.count}")
        elif self.action == PRODUCE:
            words.append(f"records={self.count}")
        if self.action in (CUT_SESSION, EXPIRE_SESSION):
            words.append("controller" if self.broker is None else f"broker {self.broker}")
        elif self.broker is not None:
            words.append(f"broker {self.broker}")
        if self.peer is not None:
            words.append(f"and broker {self.peer}")
        if self.hold:
            words.append(f"hold={self.hold:.2f}s")
        if self.pause_after:
            words.append(f"then wait {self.pause_after:.2f}s")
        return " ".join(words)


@attrs.frozen
class Schedule:
    seed: int
    backend: str
    steps: tuple[Step, ...]

    def describe(self) -> str:
        lines = [f"schedule seed={self.seed} backend={self.backend} ({len(self.steps)} steps):"]
        lines.extend(f"  {i:2d}. {step}" for i, step in enumerate(self.steps))
        return "\n".join(lines)

    @property
    def fault_steps(self) -> int:
        return sum(step.action in FAULT_ACTIONS for step in self.steps)


class _Generator:
    def __init__(self, seed: int, kinds: Sequence[str], session_timeout: float):
        self.rng = random.Random(seed)
        self.kinds = tuple(kinds)
        self.session_timeout = session_timeout
        self.steps: list[Step] = []
        self.topics: dict[str, int] = {}  # what the schedule believes exists: name -> partitions
        self.deleted: list[str] = []
        self.serial = 0
        self.down = 0
        self.server_faults = 0
        self.cuts = 0
        self.open_fault: str | None = None  # the step that ends the open fault
        self.open_for = 0  # events left before it ends

    def add(
        self,
        action: str,
        *,
        broker: int | None = None,
        topic: str | None = None,
        count: int = 0,
        replication_factor: int = 0,
        hold: float = 0.0,
    ) -> None:
        pause_after = self.rng.choice((0.0, 0.0, 0.0, 0.0, 0.01, 0.05, 0.1))
        self.steps.append(Step(action, broker, topic, count, replication_factor, hold, pause_after))

    # -- cluster events
    def create_topic(self) -> None:
        if self.deleted and self.rng.random() < 0.3:
            name = self.deleted.pop(self.rng.randrange(len(self.deleted)))  # created again
        else:
            self.serial += 1
            unclean = self.rng.random() < 0.1
            name = f"{UNCLEAN_PREFIX if unclean else 't'}{self.serial}"
        partitions = self.rng.randint(1, MAX_PARTITIONS)
        rf = self.rng.choice((1, 2, 3, 3, 3))
        self.topics[name] = partitions
        self.add(CREATE_TOPIC, topic=name, count=partitions, replication_factor=rf)

    def event(self) -> None:
        choices: list[tuple[str, float]] = [(PRODUCE, 3.0), (CREATE_TOPIC, 1.2)]
        if self.topics:
            choices += [(DELETE_TOPIC, 0.8)]
            if any(p < MAX_PARTITIONS for p in self.topics.values()):
                choices += [(ADD_PARTITIONS, 1.0)]
        if self.down < 2:
            choices += [(CRASH_BROKER, 1.2), (CRASH_CONTROLLER, 1.0), (STOP_BROKER, 0.8)]
        if self.down:
            choices += [(RESTART_BROKER, 2.5)]
        action = self.rng.choices([c for c, _ in choices], [w for _, w in choices])[0]
        if action == PRODUCE:
            self.add(PRODUCE, count=self.rng.randint(1, 50))
        elif action == CREATE_TOPIC:
            self.create_topic()
        elif action == DELETE_TOPIC:
            name = self.rng.choice(sorted(self.topics))
            del self.topics[name]
            self.deleted.append(name)
            self.add(DELETE_TOPIC, topic=name)
        elif action == ADD_PARTITIONS:
            name = self.rng.choice(sorted(t for t, p in self.topics.items() if p < MAX_PARTITIONS))
            total = self.rng.randint(self.topics[name] + 1, MAX_PARTITIONS)
            self.topics[name] = total
            self.add(ADD_PARTITIONS, topic=name, count=total)
        elif action in (CRASH_BROKER, STOP_BROKER):
            self.down += 1
            self.add(action, broker=self.rng.choice(BROKERS))
        elif action == CRASH_CONTROLLER:
            self.down += 1
            self.add(CRASH_CONTROLLER)
        else:
            self.down -= 1
            self.add(RESTART_BROKER)

    # -- store faults
    def maybe_open_fault(self) -> None:
        if self.open_fault is not None or self.rng.random() > FAULT_CHANCE:
            return
        kinds = [
            kind
            for kind in self.kinds
            if kind == EXPIRE
            or (kind == CUT and self.cuts < MAX_CUTS)
            or (kind in (CRASH, PAUSE) and self.server_faults < MAX_SERVER_FAULTS)
        ]
        if not kinds:
            return
        kind = self.rng.choice(kinds)
        session = None if self.rng.random() < 0.5 else self.rng.choice(BROKERS)
        timeout = self.session_timeout
        if kind == EXPIRE:
            self.add(EXPIRE_SESSION, broker=session)
            return
        self.open_for = self.rng.randint(0, 3)
        if kind == CRASH:
            self.server_faults += 1
            self.add(CRASH_STORE)
            self.open_fault = RECOVER_STORE
        elif kind == PAUSE:
            self.server_faults += 1
            # Past the session timeout: every session times out on the server's clock.
            self.add(PAUSE_STORE, hold=round(timeout * self.rng.uniform(1.1, 1.3), 2))
            self.open_fault = RESUME_STORE
        else:
            self.cuts += 1
            # Sometimes shorter than the session timeout (the session survives), sometimes longer.
            self.add(
                CUT_SESSION, broker=session, hold=round(self.rng.uniform(0.1, 1.25 * timeout), 2)
            )
            self.open_fault = RESTORE_SESSION

    def maybe_close_fault(self, force: bool = False) -> None:
        if self.open_fault is None:
            return
        if self.open_for > 0 and not force:
            self.open_for -= 1
            return
        self.add(self.open_fault)
        self.open_fault = None


def generate(seed: int, backend: str, kinds: Sequence[str], *, session_timeout: float) -> Schedule:
    """The schedule of ``seed`` on a backend offering fault ``kinds``."""
    gen = _Generator(seed, kinds, session_timeout)
    for _ in range(gen.rng.randint(1, 3)):
        gen.create_topic()
    for _ in range(gen.rng.randint(MIN_EVENTS, MAX_EVENTS)):
        gen.maybe_open_fault()
        gen.event()
        gen.maybe_close_fault()
    gen.maybe_close_fault(force=True)
    return Schedule(seed, backend, tuple(gen.steps))

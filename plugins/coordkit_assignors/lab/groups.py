"""The lab's consumer-group workload: real groups on an in-process cluster, one assignor each run.

``consumer-groups`` starts a cluster (the engine, on a private memory store), creates topics and
``groups`` consumer groups of ``consumers`` members each, all using the scenario's assignor, then
runs a seeded sequence of events — a member joins, leaves (LeaveGroup), crashes (noticed only at
its session timeout), a static member restarts, the broker coordinating a group crashes (the group
moves to the new leader of its offsets-topic partition) — and waits after each for every group to
be stable again. The assignor decides the protocol: ``cooperative-sticky`` rebalances
cooperatively, the others eagerly (every member revokes everything first).

Each step is one event, measured from the group history the engine records: how long until every
partition had an owner again, join rounds, partitions without an owner in between, partitions that
changed owner, and how the groups' coordinators spread over the brokers. Metrics (kind ``groups``):

* ``rebalance-seconds``: from the event until the group's last ownership change of the step,
  after which every partition is owned (a crash includes the session timeout, the same for every
  assignor);
* ``rebalance-rounds``: join rounds the coordinator ran for the event;
* ``partitions-unowned``: partitions of the group left without an owner during the step;
* ``unowned-partition-seconds``: partition-seconds without an owner during the step;
* ``partitions-reassigned``: partitions whose owner changed;
* ``coordinator-skew``: most minus fewest groups coordinated per live broker after the step.

Events are reproducible from the seed; timings vary from run to run (threads).
"""

from __future__ import annotations

import functools
import random
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from coordkit.engine import Cluster, EngineConfig, EngineError
from coordkit.engine.groups import Consumer, GroupHistory
from coordkit.kafka.model import TopicPartition
from coordkit.lab import FunctionMetric, LabError

if TYPE_CHECKING:
    from coordkit.plugins import PluginManager

GROUPS_KIND = "groups"
Param = int | float | bool | str

ACTIONS = ("join", "leave", "crash", "restart-static", "kill-coordinator")
STABLE_TIMEOUT = 60.0


@attrs.frozen
class GroupEvent:
    """One event: ``action`` on group ``group`` (index), member chosen by ``pick``."""

    action: str
    group: int
    pick: int


@attrs.frozen
class GroupCase:
    brokers: int
    topics: int
    partitions: int
    groups: int
    consumers: int
    static: bool
    session_timeout: float
    events: tuple[GroupEvent, ...]

    @property
    def total_partitions(self) -> int:
        return self.topics * self.partitions


@attrs.frozen
class GroupStep:
    """What one event did to the group it concerned."""

    index: int
    event: str
    event_kind: str
    members: int  # running consumers of the group after the step
    partitions: int
    protocol: str
    generation: int
    rebalances: int
    rounds: int
    seconds: float  # event → every partition owned again
    coordinator_seconds: float  # the coordinators' own rebalance time (first trigger → stored)
    unowned: int
    unowned_seconds: float
    reassigned: int
    coordinators_per_broker: tuple[int, ...]
    kind: str = GROUPS_KIND


class ConsumerGroupsWorkload:
    """Registered as workload ``consumer-groups`` (kind ``groups``)."""

    name = "consumer-groups"
    kind = GROUPS_KIND
    strategy_kind = "assignor (protocol follows it)"
    description = (
        "consumer groups on an in-process cluster through seeded joins, leaves, crashes, static "
        "restarts and coordinator crashes; eager versus cooperative rebalancing"
    )
    defaults: Mapping[str, Param] = {
        "brokers": 3,
        "topics": 2,
        "partitions": 12,
        "groups": 3,
        "consumers": 4,
        "events": 6,
        "static": False,
        "session_timeout": 0.6,
    }

    def strategies(self, manager: PluginManager) -> list[str]:
        return manager.assignors.names()

    def feasible(self, params: Mapping[str, Any]) -> bool:
        return int(params["brokers"]) >= 2 and int(params["consumers"]) >= 2

    def cost(self, params: Mapping[str, Any]) -> float:
        return float(params["events"]) * (
            1 + float(params["session_timeout"]) + int(params["groups"]) / 4
        )

    def generate(self, params: Mapping[str, Any], seed: int) -> GroupCase:
        case = GroupCase(
            brokers=int(params["brokers"]),
            topics=int(params["topics"]),
            partitions=int(params["partitions"]),
            groups=int(params["groups"]),
            consumers=int(params["consumers"]),
            static=bool(params["static"]),
            session_timeout=float(params["session_timeout"]),
            events=(),
        )
        problems = [
            f"{name}={value} (needs >= {least})"
            for name, value, least in (
                ("brokers", case.brokers, 2),
                ("topics", case.topics, 1),
                ("partitions", case.partitions, 1),
                ("groups", case.groups, 1),
                ("consumers", case.consumers, 2),
            )
            if value < least
        ]
        if not case.session_timeout >= 0.2:
            problems.append(f"session_timeout={case.session_timeout} (needs >= 0.2 s)")
        if problems:
            raise LabError(f"workload {self.name!r}: " + ", ".join(problems))
        rng = random.Random(seed)
        sizes = [case.consumers] * case.groups
        events = []
        for _ in range(int(params["events"])):
            group = rng.randrange(case.groups)
            choices = [
                a
                for a in ACTIONS
                if (a not in ("leave", "crash") or sizes[group] > 1)
                and (a != "restart-static" or case.static)
            ]
            action = rng.choice(choices)
            sizes[group] += 1 if action == "join" else -1 if action in ("leave", "crash") else 0
            events.append(GroupEvent(action, group, rng.randrange(1 << 16)))
        return attrs.evolve(case, events=tuple(events))

    def simulate(
        self,
        params: Mapping[str, Any],
        seed: int,
        strategy: str,
        manager: PluginManager | None = None,
    ) -> Iterator[GroupStep]:
        case = self.generate({**self.defaults, **params}, seed)
        return _Run(case, strategy, seed).steps()


def _group_id(index: int) -> str:
    return f"lab-group-{index}"


class _Run:
    """One scenario: the cluster, the groups' consumers, and the steps."""

    def __init__(self, case: GroupCase, assignor: str, seed: int):
        self.case = case
        self.assignor = assignor
        self.seed = seed
        self.topics = [f"t{t}" for t in range(case.topics)]
        self.universe = [TopicPartition(t, p) for t in self.topics for p in range(case.partitions)]
        self.members: list[list[Consumer]] = [[] for _ in range(case.groups)]
        self._instances = 0
        self.cluster: Cluster | None = None

    # -- the run
    def steps(self) -> Iterator[GroupStep]:
        name = f"lab-groups-{uuid.uuid4().hex[:12]}"
        config = EngineConfig(
            auto_leader_rebalance=False,
            group_initial_rebalance_delay=0.0,
            offsets_topic_num_partitions=min(50, 4 * self.case.brokers),
        )
        cluster = self.cluster = Cluster(
            # Its own tree, forgotten once the cluster's last session closes.
            f"memory://{name}?lifetime=sessions",
            self.case.brokers,
            config=config,
            seed=self.seed,
        )
        try:
            cluster.start()
            cluster.wait_settled(timeout=STABLE_TIMEOUT)
            for topic in self.topics:
                cluster.create_topic(topic, self.case.partitions, min(2, self.case.brokers))
            for group in range(self.case.groups):
                for _ in range(self.case.consumers):
                    self._start(group)
            for group in range(self.case.groups):
                self._wait_stable(group, "initial assignment")
            yield self._observe(0, 0, "initial", "initial", time.monotonic(), {})
            for index, event in enumerate(self.case.events, start=1):
                group = event.group
                before = self._owners(group)
                started = cluster.clock.monotonic()
                label = self._apply(event)
                self._wait_stable(group, label)
                yield self._observe(index, group, label, event.action, started, before)
        finally:
            cluster.close()

    @property
    def history(self) -> GroupHistory:
        assert self.cluster is not None
        assert self.cluster.group_history is not None  # clusters record history by default
        return self.cluster.group_history

    def _start(self, group: int, instance: str | None = None) -> Consumer:
        assert self.cluster is not None
        if instance is None and self.case.static:
            self._instances += 1
            instance = f"instance-{self._instances}"
        session = self.case.session_timeout
        consumer = self.cluster.start_consumer(
            _group_id(group),
            self.topics,
            assignors=(self.assignor,),
            group_instance_id=instance,
            session_timeout=session,
            heartbeat_interval=session / 5,
            rebalance_timeout=max(10.0, 10 * session),
        )
        self.members[group].append(consumer)
        return consumer

    def _apply(self, event: GroupEvent) -> str:
        assert self.cluster is not None
        members = self.members[event.group]
        group_id = _group_id(event.group)
        match event.action:
            case "leave" if len(members) > 1:
                victim = members.pop(event.pick % len(members))
                victim.close()
                return f"{group_id}: {victim.member_id} leaves"
            case "crash" if len(members) > 1:
                victim = members.pop(event.pick % len(members))
                victim.crash()
                return f"{group_id}: {victim.member_id} crashes"
            case "restart-static" if self.case.static:
                victim = members.pop(event.pick % len(members))
                instance = victim.group_instance_id
                victim.crash()
                self._start(event.group, instance)
                return f"{group_id}: static member {instance} restarts"
            case "kill-coordinator":
                coordinator = self.cluster.group_coordinator(group_id)
                if coordinator is not None and len(self.cluster.live_brokers()) > 1:
                    self.cluster.kill(coordinator)
                    self.cluster.wait_settled(timeout=STABLE_TIMEOUT)
                    # Back at once (on a new session): the cluster keeps its size, the group
                    # stays with the broker that took over its offsets partition.
                    self.cluster.restart(coordinator)
                    return f"{group_id}: coordinator broker {coordinator} crashes"
        self._start(event.group)
        return f"{group_id}: a member joins"

    # -- waiting and measuring
    def _wait_stable(self, group: int, what: str) -> None:
        assert self.cluster is not None
        group_id = _group_id(group)
        try:
            self.cluster.wait_group_stable(group_id, timeout=STABLE_TIMEOUT)
            # Stable, and every partition owned (a cooperative round may still withhold some).
            deadline = time.monotonic() + STABLE_TIMEOUT
            while sum(len(c.assignment()) for c in self.members[group]) != len(self.universe):
                if time.monotonic() > deadline:
                    raise EngineError(f"partitions of {group_id} stay unassigned")
                time.sleep(0.005)
                self.cluster.wait_group_stable(group_id, timeout=STABLE_TIMEOUT)
        except EngineError as exc:
            raise LabError(f"after {what!r} (assignor {self.assignor!r}): {exc}") from exc

    def _owners(self, group: int) -> dict[TopicPartition, frozenset[str]]:
        return {
            tp: frozenset(holders) for tp, holders in self.history.owners(_group_id(group)).items()
        }

    def _observe(
        self,
        index: int,
        group: int,
        event: str,
        event_kind: str,
        started: float,
        before: Mapping[TopicPartition, frozenset[str]],
    ) -> GroupStep:
        assert self.cluster is not None
        history = self.history
        group_id = _group_id(group)
        history.check()
        history.check_owned(group_id, self.universe)
        records = [r for r in history.rebalances(group_id) if r.completed >= started]
        # Stable since the step's last ownership change (the group was waited on to be stable).
        changed = [c.time for c in history.changes(group_id) if c.time >= started]
        stable_at = max(changed, default=started) if index else started
        unowned = history.unavailability(group_id, start=started, end=stable_at)
        after = self._owners(group)
        reassigned = sum(1 for tp, owners in after.items() if before.get(tp) != owners)
        live = self.cluster.live_brokers()
        per_broker = dict.fromkeys(live, 0)
        for g in range(self.case.groups):
            coordinator = self.cluster.group_coordinator(_group_id(g))
            if coordinator is not None:
                per_broker[coordinator] = per_broker.get(coordinator, 0) + 1
        described = self.cluster.describe_group(group_id)
        return GroupStep(
            index=index,
            event=event,
            event_kind=event_kind,
            members=len(self.members[group]),
            partitions=len(self.universe),
            protocol=described.protocol or "",
            generation=described.generation,
            rebalances=len(records),
            rounds=sum(r.rounds for r in records),
            seconds=max(0.0, stable_at - started),
            coordinator_seconds=sum(r.duration for r in records),
            unowned=unowned.partitions if index else 0,
            unowned_seconds=unowned.partition_seconds if index else 0.0,
            reassigned=reassigned if index else 0,
            coordinators_per_broker=tuple(per_broker[b] for b in sorted(per_broker)),
        )


# -- metrics -------------------------------------------------------------------------------------


GroupMetric = functools.partial(FunctionMetric, kinds=(GROUPS_KIND,), step_type=GroupStep)


def _after_event(value: Callable[[GroupStep], float]) -> Callable[[GroupStep], float | None]:
    return lambda step: value(step) if step.index else None


def _skew(step: GroupStep) -> float | None:
    counts = step.coordinators_per_broker
    return float(max(counts) - min(counts)) if counts else None


GROUP_METRICS = (
    GroupMetric(
        "rebalance-seconds",
        "seconds from the event until every partition of the group had an owner again",
        "s",
        "lower",
        _after_event(lambda s: s.seconds),
        headline="Which restores a complete assignment fastest?",
    ),
    GroupMetric(
        "rebalance-rounds",
        "join rounds the coordinator ran for the event",
        "rounds",
        "lower",
        _after_event(lambda s: float(s.rounds)),
        tradeoff="interruption",
    ),
    GroupMetric(
        "partitions-unowned",
        "partitions of the group left without an owner during the rebalance",
        "partitions",
        "lower",
        _after_event(lambda s: float(s.unowned)),
        headline="Which leaves fewest partitions unconsumed during a rebalance?",
        tradeoff="interruption",
    ),
    GroupMetric(
        "unowned-partition-seconds",
        "partition-seconds without an owner during the rebalance",
        "partition-seconds",
        "lower",
        _after_event(lambda s: s.unowned_seconds),
    ),
    GroupMetric(
        "partitions-reassigned",
        "partitions whose owner changed in the step",
        "partitions",
        "lower",
        _after_event(lambda s: float(s.reassigned)),
        tradeoff="movement",
    ),
    GroupMetric(
        "coordinator-skew",
        "most minus fewest groups coordinated per live broker after the step",
        "groups",
        "lower",
        _skew,
    ),
)

CONSUMER_GROUPS = ConsumerGroupsWorkload()

"""The lab's broker-failure workload and the election metrics.

``broker-failures`` runs a real in-process cluster (the engine, on a private memory store) through
a seeded sequence of broker crashes, controller crashes and session expiries, controlled
shutdowns and restarts, producing records (acks=all) and replicating between events. It runs once
per controller election strategy; every strategy meets the same events (events name roles, such
as "the controller" or "the second live broker", resolved when they happen). ``failures=any``
draws every kind of event; ``failures=controller`` only controller crashes and session expiries
(and restarts), for measuring failovers at sizes where each event is costly.

Each step is one event: what the store had to do for it, how the leadership looked after it, how
many partitions could not take writes in between, and how many acknowledged records an unclean
election threw away. Metrics (kind ``elections``):

* ``failover-store-ops``: store round trips of all brokers for a step in which the controller
  changed (the herd a strategy wakes shows here);
* ``failover-seconds``: from the event until the new controller had re-elected every partition
  that needed it (its ready event), in a step in which the controller changed: plotted against
  the step's ``partitions`` (``topics`` x ``partitions`` per topic) in the report;
* ``failover-load-seconds``: the part of that the new controller's term spent loading the
  cluster (a cold controller reads every partition state; ``warm-standby`` takes over its
  standby's image, caught up before the term starts, so the catch-up counts only in
  ``failover-seconds``): plotted against ``partitions`` too, the cold strategies grow with the
  cluster, ``warm-standby`` much less; electing and writing new leaders for the partitions the
  failed broker led grows with the cluster for every strategy;
* ``candidates-woken``: controller candidates woken by the step's watch deliveries;
* ``leader-skew``: most minus fewest partition leaders over the live brokers after the step;
* ``unavailable-partitions``: partitions that lost their live leader during the step;
* ``unavailable-partition-seconds``: partition-seconds without a live leader during the step;
* ``acked-records-lost``: acknowledged records lost to unclean leader elections in the step.

Timings vary from run to run (threads), and which broker wins a ``kafka`` election race can too;
the events and the set of brokers are reproducible from the seed.
"""

from __future__ import annotations

import functools
import random
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from coordkit.engine import Cluster, EngineConfig, EngineObserver, OpCounts
from coordkit.engine.config import UNCLEAN_LEADER_ELECTION_ENABLE
from coordkit.errors import CoordkitError
from coordkit.kafka.model import NO_LEADER
from coordkit.lab import FunctionMetric
from coordkit.strategies.elections import ElectionKind

if TYPE_CHECKING:
    from coordkit.plugins import PluginManager

ELECTIONS_KIND = "elections"
Param = int | float | bool | str

ACTIONS = ("crash-controller", "expire-controller", "crash-broker", "controlled-stop", "restart")
#: The events each ``failures`` mix draws from: ``any``, or only what fails the controller over
#: (and restarts), so that every other event or so measures a failover: what the scaling case of
#: the ``elections`` preset needs at sizes where a scenario costs a minute.
FAILURE_MIXES: Mapping[str, tuple[str, ...]] = {
    "any": ACTIONS,
    "controller": ("crash-controller", "expire-controller", "restart"),
}
SETTLE_TIMEOUT = 60.0


class LabParameterError(CoordkitError, ValueError):
    """A broker-failures parameter is out of range."""


@attrs.frozen
class FailureEvent:
    """One event: ``action`` on the broker named by ``pick`` (an index into the candidates)."""

    action: str
    pick: int
    catch_up: bool  # run a replication round after the event (returning replicas rejoin ISRs)


@attrs.frozen
class FailureCase:
    brokers: int
    topics: int
    partitions: int
    replication_factor: int
    records: int
    unclean: bool
    events: tuple[FailureEvent, ...]


@attrs.frozen
class ElectionStep:
    """What one event did to the cluster."""

    index: int
    event: str
    event_kind: str
    members: int  # live brokers after the step
    partitions: int
    controller_before: int | None
    controller_after: int | None
    epoch_before: int
    epoch_after: int
    ops: OpCounts
    wakeups: int
    unavailable: int  # partitions that lost their live leader during the step
    unavailable_seconds: float  # partition-seconds without a live leader during the step
    offline_after: int
    settle_seconds: float
    leaders_per_broker: tuple[int, ...]
    acked: int
    acked_lost: int
    kind: str = ELECTIONS_KIND
    #: Seconds from the event until a new controller was ready (None: no controller change).
    failover_seconds: float | None = None
    #: Seconds that controller spent loading the cluster (None: no controller change).
    failover_load_seconds: float | None = None

    @property
    def failover(self) -> bool:
        return self.epoch_after != self.epoch_before


class BrokerFailuresWorkload:
    """Registered as workload ``broker-failures`` (kind ``elections``)."""

    name = "broker-failures"
    kind = ELECTIONS_KIND
    strategy_kind = "controller election"
    description = (
        "an in-process cluster through seeded broker and controller crashes, session expiries, "
        "controlled shutdowns and restarts, producing acks=all records in between"
    )
    defaults: Mapping[str, Param] = {
        "brokers": 5,
        "topics": 4,
        "partitions": 25,
        "replication_factor": 3,
        "events": 12,
        "records": 100,
        "unclean": False,
        "catch_up": 0.5,
        "failures": "any",
    }

    def strategies(self, manager: PluginManager) -> list[str]:
        prefix = f"{ElectionKind.CONTROLLER.value}/"
        return sorted(r.name[len(prefix) :] for r in manager.elections if r.name.startswith(prefix))

    def feasible(self, params: Mapping[str, Any]) -> bool:
        return int(params["replication_factor"]) <= int(params["brokers"])

    def cost(self, params: Mapping[str, Any]) -> float:
        # Setting the cluster up and closing it cost about two events.
        return (float(params["events"]) + 2) * (
            1 + int(params["topics"]) * int(params["partitions"]) / 500
        )

    def generate(self, params: Mapping[str, Any], seed: int) -> FailureCase:
        brokers = int(params["brokers"])
        factor = int(params["replication_factor"])
        if brokers < 2 or not 1 <= factor <= brokers:
            raise LabParameterError(
                f"workload {self.name!r}: needs brokers >= 2 and 1 <= replication_factor <= "
                f"brokers, got brokers={brokers}, replication_factor={factor}"
            )
        mix = str(params["failures"])
        if mix not in FAILURE_MIXES:
            raise LabParameterError(
                f"workload {self.name!r} parameter 'failures' must be one of "
                f"{', '.join(FAILURE_MIXES)}, got {mix!r}"
            )
        rng = random.Random(seed)
        events = []
        down = 0
        for _ in range(int(params["events"])):
            choices = [a for a in FAILURE_MIXES[mix] if a != "restart" or down]
            if down >= brokers - 1:  # keep one broker alive
                choices = ["restart"]
            action = rng.choice(choices)
            down += -1 if action == "restart" else 1 if action != "expire-controller" else 0
            events.append(
                FailureEvent(
                    action, rng.randrange(1 << 16), rng.random() < float(params["catch_up"])
                )
            )
        return FailureCase(
            brokers=brokers,
            topics=int(params["topics"]),
            partitions=int(params["partitions"]),
            replication_factor=factor,
            records=int(params["records"]),
            unclean=bool(params["unclean"]),
            events=tuple(events),
        )

    def simulate(
        self,
        params: Mapping[str, Any],
        seed: int,
        strategy: str,
        manager: PluginManager | None = None,
    ) -> Iterator[ElectionStep]:
        resolved = {**self.defaults, **params}
        case = self.generate(resolved, seed)
        return _simulate(case, strategy, seed)


class _ReadyTimes(EngineObserver):
    """When each controller epoch became ready (perf_counter), and how long it spent loading."""

    def __init__(self) -> None:
        self.at: dict[int, float] = {}
        self.load: dict[int, float] = {}
        self.cluster: Cluster | None = None

    def controller_ready(self, broker_id: int, epoch: int, seconds: float) -> None:
        self.at[epoch] = time.perf_counter()
        broker = self.cluster.brokers.get(broker_id) if self.cluster is not None else None
        controller = broker.controller if broker is not None else None
        # Observers hear of readiness after the controller recorded its phases.
        if controller is not None and controller.epoch == epoch and "load" in controller.phases:
            self.load[epoch] = controller.phases["load"]


def _simulate(case: FailureCase, strategy: str, seed: int) -> Iterator[ElectionStep]:
    name = f"lab-elections-{uuid.uuid4().hex[:12]}"
    config = EngineConfig(
        controller_election=strategy,
        offline_election="offline-unclean" if case.unclean else "offline",
        auto_leader_rebalance=False,
        controlled_shutdown_timeout=SETTLE_TIMEOUT,
    )
    ready = _ReadyTimes()
    # Its own tree, forgotten once the cluster's last session closes.
    cluster = Cluster(
        f"memory://{name}?lifetime=sessions",
        case.brokers,
        config=config,
        seed=seed,
        observers=[ready],
    )
    ready.cluster = cluster
    try:
        cluster.start()
        _settle(cluster)
        topic_config = {UNCLEAN_LEADER_ELECTION_ENABLE: "true" if case.unclean else "false"}
        for t in range(case.topics):
            cluster.create_topic(
                f"t{t}", case.partitions, case.replication_factor, config=topic_config
            )
        total = case.topics * case.partitions
        _settle(cluster, lambda: len(cluster.view().partitions) == total)
        cluster.produce(case.records)
        cluster.replicate()
        yield _observe(cluster, 0, "initial", "initial", None, 0, OpCounts(), 0, 0, 0.0, 0.0, 0)
        for index, event in enumerate(case.events, start=1):
            cluster.produce(case.records)
            before_view = cluster.view()
            before_ops = cluster.op_counts()
            before_wakeups = _wakeups(cluster)
            lost_before = cluster.replication.totals().acked_lost
            windows_before, seconds_before = cluster.replication.unavailability()
            started = time.perf_counter()
            label = _apply(cluster, event, before_view.controller)
            _settle(cluster)
            settle = time.perf_counter() - started
            epoch = _settled_epoch(cluster)
            changed = epoch != before_view.epoch
            failover = ready.at[epoch] - started if changed and epoch in ready.at else None
            load = ready.load.get(epoch) if changed else None
            windows, seconds = cluster.replication.unavailability()
            if event.catch_up:
                cluster.replicate()
                _settle(cluster)
            yield _observe(
                cluster,
                index,
                label,
                event.action,
                before_view.controller,
                before_view.epoch,
                cluster.op_counts() - before_ops,
                _wakeups(cluster) - before_wakeups,
                windows - windows_before,
                seconds - seconds_before,
                settle,
                cluster.replication.totals().acked_lost - lost_before,
                failover_seconds=failover,
                failover_load_seconds=load,
            )
    finally:
        cluster.close()


def _apply(cluster: Cluster, event: FailureEvent, controller: int | None) -> str:
    live = cluster.live_brokers()
    others = [b for b in live if b != controller] or live
    dead = [b for b in cluster.broker_ids if b not in live]
    match event.action:
        case "crash-controller" if controller is not None and len(live) > 1:
            cluster.kill(controller)
            return f"crash controller (broker {controller})"
        case "expire-controller" if controller is not None:
            store = cluster.raw_store(controller)
            store.server.expire_session(store.session_id)  # type: ignore[attr-defined]
            return f"controller session expires (broker {controller})"
        case "controlled-stop" if len(live) > 1:
            victim = others[event.pick % len(others)]
            cluster.stop(victim)
            return f"controlled shutdown of broker {victim}"
        case "restart" if dead:
            back = dead[event.pick % len(dead)]
            cluster.restart(back)
            return f"restart broker {back}"
        case _ if len(live) > 1:
            victim = others[event.pick % len(others)]
            cluster.kill(victim)
            return f"crash broker {victim}"
    back = dead[event.pick % len(dead)]
    cluster.restart(back)
    return f"restart broker {back}"


def _settle(cluster: Cluster, also: Callable[[], bool] | None = None) -> None:
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while time.monotonic() < deadline:
        if cluster.settled() and cluster.converged() and (also is None or also()):
            time.sleep(0.01)  # let watch deliveries still in flight arrive
            if cluster.settled():
                return
        time.sleep(0.005)
    raise LabParameterError(f"the cluster did not settle within {SETTLE_TIMEOUT}s")


def _settled_epoch(cluster: Cluster) -> int:
    """The controller epoch of a settled cluster: the term of the broker running it (settled
    means it runs here at the stored epoch), without reading every partition state again."""
    broker = cluster.controller_broker()
    controller = broker.controller if broker is not None else None
    return controller.epoch if controller is not None else cluster.view().epoch


def _wakeups(cluster: Cluster) -> int:
    return sum(getattr(b._candidate, "wakeups", 0) for b in cluster.brokers.values())


def _observe(
    cluster: Cluster,
    index: int,
    event: str,
    event_kind: str,
    controller_before: int | None,
    epoch_before: int,
    ops: OpCounts,
    wakeups: int,
    unavailable: int,
    unavailable_seconds: float,
    settle: float,
    acked_lost: int,
    failover_seconds: float | None = None,
    failover_load_seconds: float | None = None,
) -> ElectionStep:
    view = cluster.view()
    counts = view.leaders_per_broker()
    return ElectionStep(
        index=index,
        event=event,
        event_kind=event_kind,
        members=len(view.brokers),
        partitions=len(view.partitions) + len(view.uninitialised),
        controller_before=controller_before if index else view.controller,
        controller_after=view.controller,
        epoch_before=epoch_before if index else view.epoch,
        epoch_after=view.epoch,
        ops=ops,
        wakeups=wakeups,
        unavailable=unavailable,
        unavailable_seconds=unavailable_seconds,
        offline_after=sum(1 for p in view.partitions if p.leader == NO_LEADER),
        settle_seconds=settle,
        leaders_per_broker=tuple(counts[b] for b in sorted(counts)),
        acked=cluster.replication.totals().acked,
        acked_lost=acked_lost,
        failover_seconds=failover_seconds,
        failover_load_seconds=failover_load_seconds,
    )


# -- metrics -------------------------------------------------------------------------------------


ElectionMetric = functools.partial(FunctionMetric, kinds=(ELECTIONS_KIND,), step_type=ElectionStep)


def _failover_ops(step: ElectionStep) -> float | None:
    return float(step.ops.round_trips) if step.index and step.failover else None


def _failover_seconds(step: ElectionStep) -> float | None:
    return step.failover_seconds if step.index else None


def _failover_load_seconds(step: ElectionStep) -> float | None:
    return step.failover_load_seconds if step.index else None


def _woken(step: ElectionStep) -> float | None:
    return float(step.wakeups) if step.index and step.failover else None


def _skew(step: ElectionStep) -> float | None:
    if not step.leaders_per_broker:
        return None
    return float(max(step.leaders_per_broker) - min(step.leaders_per_broker))


def _unavailable(step: ElectionStep) -> float | None:
    return float(step.unavailable) if step.index else None


def _unavailable_seconds(step: ElectionStep) -> float | None:
    return step.unavailable_seconds if step.index else None


def _lost(step: ElectionStep) -> float | None:
    return float(step.acked_lost) if step.index else None


ELECTION_METRICS = (
    ElectionMetric(
        "failover-store-ops",
        "store round trips of all brokers in a step where the controller changed",
        "round trips",
        "lower",
        _failover_ops,
        headline="Which fails the controller over with least store work?",
    ),
    ElectionMetric(
        "failover-seconds",
        "seconds from the event until the new controller had re-elected what needed it",
        "seconds",
        "lower",
        _failover_seconds,
        headline="Which fails the controller over fastest?",
        scales_with="partitions",
    ),
    ElectionMetric(
        "failover-load-seconds",
        "seconds the new controller's term spent loading the cluster in a controller failover "
        "(a warm standby's catch-up precedes the term)",
        "seconds",
        "lower",
        _failover_load_seconds,
        scales_with="partitions",
    ),
    ElectionMetric(
        "candidates-woken",
        "watch deliveries that woke controller candidates in a controller failover",
        "wakeups",
        "lower",
        _woken,
        headline="Which wakes fewest brokers on failover (herd)?",
    ),
    ElectionMetric(
        "leader-skew",
        "most minus fewest partition leaders over the live brokers after the step",
        "partitions",
        "lower",
        _skew,
    ),
    ElectionMetric(
        "unavailable-partitions",
        "times a partition lost its live leader during the step (until re-elected)",
        "partitions",
        "lower",
        _unavailable,
        headline="Which leaves fewest partitions unavailable?",
    ),
    ElectionMetric(
        "unavailable-partition-seconds",
        "partition-seconds without a live leader during the step",
        "partition-seconds",
        "lower",
        _unavailable_seconds,
    ),
    ElectionMetric(
        "acked-records-lost",
        "acknowledged (acks=all) records lost to unclean leader elections in the step",
        "records",
        "lower",
        _lost,
        headline="Which loses fewest acknowledged records?",
    ),
)

BROKER_FAILURES = BrokerFailuresWorkload()

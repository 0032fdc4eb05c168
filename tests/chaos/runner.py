"""Runs a chaos schedule against a fresh cluster, heals, and checks convergence and safety.

Each run: a fresh namespace on the backend's long-lived server, a fresh three-broker cluster on it,
then the schedule's steps in order. A step that the store's state makes fail (an admin call while
the server is down, a restart whose session cannot be opened) is recorded, not raised: a user's
call during an outage legitimately fails. Then every fault is undone, every stopped broker is
started again, and the cluster must converge within :data:`CONVERGENCE_BOUND` (30) seconds,
measured from the moment the store serves again:

1. :meth:`Cluster.wait_converged` — every invariant of :mod:`coordkit.engine.invariants` holds;
2. then, within the same bound, no partition is under-replicated and every running broker is
   registered.

Across the whole run the history must be sound (one controller per epoch, one leader per leader
epoch, leader epochs never going back; :meth:`HistoryRecorder.violations`), and no acknowledged
record may be lost while only clean elections ran (on topics that never allowed unclean election,
none at all).

Replication runs on the brokers' own threads (``EngineConfig(replication=True)``): followers
fetch and leaders shrink and expand their ISRs by themselves, so produced records are acknowledged
and ISRs refill without the test's help. ``COORDKIT_CHAOS_MANUAL_REPLICATION=1`` makes the heal
phase call :meth:`Cluster.replicate` as well, for an engine without background replication.
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Callable
from typing import Any

import attrs

from chaos import schedule as s
from chaos.schedule import Schedule, Step
from coordkit.engine import Cluster, EngineConfig
from coordkit.engine.config import UNCLEAN_LEADER_ELECTION_ENABLE
from coordkit.engine.errors import EngineError
from coordkit.errors import NoNodeError, StoreError
from coordkit.kafka import layout
from coordkit.store import MetadataStore, SessionState
from coordkit.store.paths import numeric_name
from harness.faults import FaultNotApplicable, StoreFaults

#: Seconds, from the store serving again, within which a healed cluster must converge and its
#: ISRs fill up again. Measured on a loaded 2-core machine (30 schedules each, the run summary
#: prints the slowest): memory 0.2 s, Redis 1.8 s, standalone ZooKeeper 3.2 s, ZooKeeper ensemble
#: 3.9 s. The bound leaves room for JVM pauses, an ensemble electing a leader and every session of
#: a paused server expiring at once; a controller that lost track of its work never gets there.
CONVERGENCE_BOUND = float(os.environ.get("COORDKIT_CHAOS_BOUND", "30"))
#: Store session timeout: a pause or cut lasting longer expires sessions.
SESSION_TIMEOUT = 2.0
MANUAL_REPLICATION = os.environ.get("COORDKIT_CHAOS_MANUAL_REPLICATION", "0") == "1"

CONFIG = EngineConfig(
    controlled_shutdown_timeout=3.0,
    leader_imbalance_check_interval=0.5,  # preferred-leader rebalances race with the faults too
    replica_lag_time_max=2.0,
    replica_fetch_wait_max=0.1,
    replication=True,
)

#: Errors a cluster call may legitimately raise while the store is down or hung.
TOLERATED = (StoreError, EngineError, FaultNotApplicable)


@attrs.define
class RunTotals:
    """Counts across every schedule of a test session (printed as the summary line)."""

    schedules: int = 0
    faults: int = 0
    violations: int = 0
    failed: int = 0
    slowest_heal: dict[str, float] = attrs.Factory(dict)

    def add(self, outcome: Outcome) -> None:
        self.schedules += 1
        self.faults += outcome.faults
        self.violations += len(outcome.problems)
        self.failed += bool(outcome.problems)
        if outcome.heal_seconds is not None:
            backend = outcome.schedule.backend
            self.slowest_heal[backend] = max(
                self.slowest_heal.get(backend, 0.0), outcome.heal_seconds
            )

    def summary(self) -> str:
        slowest = ", ".join(f"{b} {t:.1f}s" for b, t in sorted(self.slowest_heal.items()))
        return (
            f"chaos: {self.schedules} schedules run, {self.faults} faults injected, "
            f"{self.violations} violations ({self.failed} schedules failed); "
            f"slowest heal: {slowest or '-'} (bound {CONVERGENCE_BOUND:.0f}s)"
        )


TOTALS = RunTotals()


@attrs.define
class Outcome:
    """What one schedule did (the log) and what was wrong afterwards (the problems)."""

    schedule: Schedule
    log: list[str] = attrs.Factory(list)
    problems: list[str] = attrs.Factory(list)
    faults: int = 0
    heal_seconds: float | None = None

    def report(self) -> str:
        seed, backend = self.schedule.seed, self.schedule.backend
        replay = f"COORDKIT_CHAOS_SEED={seed} pytest tests/chaos -k {backend}-seed{seed}"
        lines = [
            f"chaos schedule seed={self.schedule.seed} on {self.schedule.backend} failed "
            f"(replay: {replay})",
            *(f"PROBLEM: {p}" for p in self.problems),
            self.schedule.describe(),
            "what happened:",
            *(f"  {line}" for line in self.log),
        ]
        return "\n".join(lines)


class ChaosRun:
    """One schedule on one fresh cluster."""

    def __init__(self, faults: StoreFaults, schedule: Schedule):
        self.faults = faults
        self.schedule = schedule
        self.outcome = Outcome(schedule)
        self.started = time.monotonic()
        self._cluster: Cluster | None = None
        self._hold_until = 0.0
        self._cut: MetadataStore | None = None

    # -- logging
    def note(self, text: str) -> None:
        self.outcome.log.append(f"+{time.monotonic() - self.started:7.3f}s {text}")

    @property
    def cluster(self) -> Cluster:
        assert self._cluster is not None, "the cluster is not started"
        return self._cluster

    # -- the run
    def run(self) -> Outcome:
        url = self.faults.new_url()
        try:
            self._cluster = Cluster(
                lambda: self.faults.open(url),
                list(s.BROKERS),
                config=CONFIG,
                seed=self.schedule.seed,
            ).start()
            self.note(f"cluster started on {url}")
            for index, step in enumerate(self.schedule.steps):
                self._step(index, step)
            self._heal()
            self._check_history()
        except Exception as exc:  # reported with the schedule, not as a bare traceback
            self._fail(f"unexpected {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
        finally:
            self.faults.heal()  # a failed run must not leave the server paused or cut off
            if self._cluster is not None:
                self._cluster.close()
            self.faults.release(url)
        return self.outcome

    def _step(self, index: int, step: Step) -> None:
        began = time.monotonic()
        try:
            detail = self._do(step)
        except TOLERATED as exc:
            self.note(f"{index:2d}. {step} -> {type(exc).__name__}: {exc}")
        else:
            if step.action in s.FAULT_ACTIONS and not detail.startswith("skipped"):
                self.outcome.faults += 1
            self.note(
                f"{index:2d}. {step} -> {detail} ({time.monotonic() - began:.2f}s)"
                if detail
                else f"{index:2d}. {step} -> ok ({time.monotonic() - began:.2f}s)"
            )
        if step.pause_after:
            time.sleep(step.pause_after)

    def _do(self, step: Step) -> str:
        cluster = self.cluster
        action = step.action
        handlers: dict[str, Callable[[Step], str]] = {
            s.CREATE_TOPIC: self._create_topic,
            s.DELETE_TOPIC: lambda st: _quiet(cluster.delete_topic, st.topic),
            s.ADD_PARTITIONS: lambda st: _quiet(cluster.add_partitions, st.topic, st.count),
            s.PRODUCE: self._produce,
            s.CRASH_BROKER: self._crash_broker,
            s.CRASH_CONTROLLER: self._crash_controller,
            s.STOP_BROKER: self._stop_broker,
            s.RESTART_BROKER: self._restart_broker,
            s.CRASH_STORE: lambda st: f"killed {self.faults.crash()}",
            s.RECOVER_STORE: lambda st: _quiet(self.faults.recover),
            s.PAUSE_STORE: self._pause,
            s.RESUME_STORE: self._resume,
            s.CUT_SESSION: self._cut_session,
            s.RESTORE_SESSION: self._restore_session,
            s.EXPIRE_SESSION: self._expire_session,
        }
        return handlers[action](step)

    # -- cluster events
    def _create_topic(self, step: Step) -> str:
        assert step.topic is not None
        config = (
            {UNCLEAN_LEADER_ELECTION_ENABLE: "true"}
            if step.topic.startswith(s.UNCLEAN_PREFIX)
            else None
        )
        self.cluster.create_topic(step.topic, step.count, step.replication_factor, config=config)
        return ""

    def _produce(self, step: Step) -> str:
        accepted = self.cluster.produce(step.count)
        return f"{accepted} records accepted"

    def _crash_broker(self, step: Step) -> str:
        assert step.broker is not None
        if step.broker not in self.cluster.live_brokers():
            return f"skipped: broker {step.broker} is not running"
        self.cluster.kill(step.broker)
        return ""

    def _crash_controller(self, step: Step) -> str:
        holder = self.cluster.controller_broker()
        if holder is None:
            return "skipped: no broker holds a controller term"
        self.cluster.kill(holder.broker_id)
        return f"killed broker {holder.broker_id}"

    def _stop_broker(self, step: Step) -> str:
        assert step.broker is not None
        if step.broker not in self.cluster.live_brokers():
            return f"skipped: broker {step.broker} is not running"
        still_led = self.cluster.stop(step.broker)
        return f"still led {len(still_led)} partitions" if still_led else ""

    def _restart_broker(self, step: Step) -> str:
        down = [b for b in s.BROKERS if b not in self.cluster.live_brokers()]
        if not down:
            return "skipped: every broker is running"
        self.cluster.restart(down[0])
        return f"restarted broker {down[0]}"

    # -- store faults
    def _session(self, broker: int | None) -> tuple[int, MetadataStore]:
        if broker is None:
            holder = self.cluster.controller_broker()
            if holder is None:
                raise FaultNotApplicable("no broker holds a controller term")
            broker = holder.broker_id
        if broker not in self.cluster.live_brokers():
            raise FaultNotApplicable(f"broker {broker} is not running")
        return broker, self.cluster.raw_store(broker)

    def _pause(self, step: Step) -> str:
        what = self.faults.pause()
        self._hold_until = time.monotonic() + step.hold
        return f"paused {what}"

    def _resume(self, step: Step) -> str:
        _sleep_until(self._hold_until)
        self.faults.resume()
        return ""

    def _cut_session(self, step: Step) -> str:
        broker, store = self._session(step.broker)
        self.faults.cut(store)
        self._cut = store
        self._hold_until = time.monotonic() + step.hold
        return f"cut broker {broker}'s session off"

    def _restore_session(self, step: Step) -> str:
        store, self._cut = self._cut, None
        if store is None:
            return "skipped: nothing was cut"
        if store.state is SessionState.CLOSED:
            return "skipped: the session was closed meanwhile (its broker stopped)"
        _sleep_until(self._hold_until)
        self.faults.restore(store)
        return ""

    def _expire_session(self, step: Step) -> str:
        broker, store = self._session(step.broker)
        self.faults.expire(store)
        return f"expired broker {broker}'s session"

    # -- heal and check
    def _heal(self) -> None:
        self.faults.heal()
        healed = time.monotonic()
        deadline = healed + CONVERGENCE_BOUND
        self.note("store healed; restarting stopped brokers")
        cluster = self.cluster
        while True:
            down = [b for b in s.BROKERS if b not in cluster.live_brokers()]
            for broker in down:
                try:
                    cluster.restart(broker)
                    self.note(f"heal: restarted broker {broker}")
                except TOLERATED as exc:
                    if time.monotonic() > deadline:
                        self._fail(f"broker {broker} could not be restarted: {exc}")
                        return
            if not [b for b in s.BROKERS if b not in cluster.live_brokers()]:
                break
            time.sleep(0.2)
        while True:
            try:
                cluster.wait_converged(max(0.0, deadline - time.monotonic()))
                break
            except StoreError as exc:  # the test's admin session is reconnecting itself
                if time.monotonic() > deadline:
                    self._fail(f"the store could not be read to check convergence: {exc}")
                    return
                time.sleep(0.1)
            except EngineError as exc:
                self._fail(f"{exc}\n{self._diagnosis()}")
                return
        self.note(f"heal: converged after {time.monotonic() - healed:.2f}s")
        last = self._replicas_back(deadline)
        self.outcome.heal_seconds = time.monotonic() - healed
        if last:
            self._fail(f"not healed within {CONVERGENCE_BOUND}s of the store serving again: {last}")
            return
        self.note(
            f"heal: ISRs full and every broker registered after {self.outcome.heal_seconds:.2f}s"
        )

    def _diagnosis(self) -> str:
        """Who the store and the brokers think the controller is (for a failure report)."""
        cluster = self.cluster
        holder = cluster.controller_broker()
        try:
            settled: object = cluster.settled()
            view = cluster.view()
            stored = f"store names controller {view.controller} at epoch {view.epoch}"
        except StoreError as exc:
            settled, stored = "?", f"store unreadable: {exc}"
        return (
            f"  ({stored}; in-process controller: {holder!r}; running brokers "
            f"{cluster.live_brokers()}; settled: {settled!r})"
        )

    def _replicas_back(self, deadline: float) -> str:
        """Wait until no partition is under-replicated and every running broker is registered;
        returns what is still wrong at the deadline ('' once healed)."""
        cluster = self.cluster
        while True:
            try:
                result = cluster.converged()
                registered = _registered(cluster)
            except StoreError as exc:
                wrong = f"the store could not be read: {exc}"
            else:
                unregistered = sorted(set(cluster.live_brokers()) - registered)
                wrong = "; ".join(
                    part
                    for part in (
                        "" if result else str(result),
                        f"under-replicated: {_tps(result.under_replicated)}"
                        if result.under_replicated
                        else "",
                        f"running brokers not registered: {unregistered}" if unregistered else "",
                    )
                    if part
                )
                if not wrong:
                    return ""
            if time.monotonic() > deadline:
                return wrong
            if MANUAL_REPLICATION:
                cluster.replicate()
            time.sleep(0.1)

    def _check_history(self) -> None:
        cluster = self.cluster
        history = cluster.history
        assert history is not None
        for problem in history.violations():
            self._fail(f"history: {problem}")
        totals = cluster.replication.totals()
        self.note(f"replication totals: {totals}")
        if totals.unclean_elections == 0 and totals.acked_lost:
            self._fail(f"{totals.acked_lost} acknowledged records lost with only clean elections")
        try:
            partitions = cluster.view().partitions
        except StoreError as exc:
            self._fail(f"the store could not be read to check the logs: {exc}")
            return
        for partition in partitions:
            log = cluster.replication.log(partition.tp)
            if log is not None and log.lost and not partition.topic.startswith(s.UNCLEAN_PREFIX):
                self._fail(
                    f"{partition.topic}-{partition.partition} lost {log.lost} acknowledged records "
                    "although its topic never allowed unclean election"
                )

    def _fail(self, problem: str) -> None:
        self.note(f"PROBLEM: {problem}")
        self.outcome.problems.append(problem)


def _quiet(call: Callable[..., Any], *args: Any) -> str:
    call(*args)
    return ""


def _sleep_until(moment: float) -> None:
    delay = moment - time.monotonic()
    if delay > 0:
        time.sleep(delay)


def _registered(cluster: Cluster) -> set[int]:
    try:
        names = cluster.admin_store.children(layout.BROKER_IDS)
    except NoNodeError:
        return set()
    return {b for name in names if (b := numeric_name(name)) is not None}


def _tps(tps: Any) -> str:
    shown = [f"{t}-{p}" for t, p in list(tps)[:10]]
    return ", ".join(shown) + (f" (+{len(tps) - 10} more)" if len(tps) > 10 else "")


def run_schedule(faults: StoreFaults, schedule: Schedule) -> Outcome:
    """Run ``schedule`` on ``faults``' backend; the outcome lists every problem found."""
    outcome = ChaosRun(faults, schedule).run()
    TOTALS.add(outcome)
    return outcome

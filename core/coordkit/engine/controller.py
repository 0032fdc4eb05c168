"""The controller: one broker's term as the cluster's controller (Kafka's ``KafkaController``).

A term starts when the broker wins a controller election. The controller then, on its own event
thread (Kafka's single-threaded ``ControllerEventManager``):

1. watches ``/brokers/ids``, ``/brokers/topics``, ``/admin/delete_topics``,
   ``/isr_change_notification`` and every topic's assignment (partition additions);
2. loads brokers, topics and every partition state with pipelined bulk reads;
3. deletes topics queued for deletion, initialises partitions that have no state yet and elects
   leaders for partitions whose leader is gone (at which point it is *ready*), then drops dead
   replicas from the other ISRs;
4. then reacts to changes: broker loss and return (including a broker that bounced between two
   looks), new topics and partitions, deletions, ISR changes written by partition leaders,
   controlled-shutdown requests, and the periodic preferred-leader rebalance.

Decisions start from the states the controller keeps (kept current by the leaders' ISR change
notifications, and re-read for preferred-replica elections, as Kafka does). Every write goes
through :class:`~coordkit.engine.fencing.FencedWriter` (epoch check first, in the same multi) in
batches; each partition state write is also conditional on the version of the state node the
decision was based on, so a state that moved underneath fails the batch, which is re-read and
decided again. A fenced write or a lost session ends the term.
"""

from __future__ import annotations

import concurrent.futures
import functools
import gc
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar, cast

from coordkit import layout
from coordkit.clock import Clock
from coordkit.elections import (
    ControllerTerm,
    ElectionKind,
    ElectionReason,
    PartitionElectionInput,
    PartitionLeaderElection,
    new_partition_election,
)
from coordkit.engine import isr_notifications, states
from coordkit.engine.config import UNCLEAN_LEADER_ELECTION_ENABLE, EngineConfig
from coordkit.engine.errors import (
    ControllerFencedError,
    ControllerSessionEndedError,
    EngineError,
)
from coordkit.engine.events import Observers, StateChange
from coordkit.engine.fencing import FencedWriter
from coordkit.engine.states import TP, LeaderIsr
from coordkit.errors import (
    BadVersionError,
    ConnectionLossError,
    LayoutError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
    StoreClosedError,
    StoreError,
)
from coordkit.model import NO_LEADER, BrokerInfo
from coordkit.plugins import get_plugin_manager
from coordkit.store import (
    ChildrenEvent,
    Create,
    DataEvent,
    Delete,
    MetadataStore,
    Op,
    SessionState,
    SetData,
    Stat,
    Watch,
)

log = logging.getLogger("coordkit.engine.controller")

_STOP = object()
#: Rounds of conflicting state writes retried before the controller gives up on a change.
MAX_ROUNDS = 100


F = TypeVar("F", bound=Callable[..., Any])


def _bulk(method: F) -> F:
    """Pause Python's cyclic garbage collector while a bulk phase allocates 100,000s of small
    objects (its full collections would otherwise stall a failover for seconds); reference
    counting still frees memory meanwhile. Nested and concurrent pauses are fine: only the
    outermost pause that found collection on turns it back on."""

    @functools.wraps(method)
    def paused(*args: Any, **kwargs: Any) -> Any:
        enabled = gc.isenabled()
        gc.disable()
        try:
            return method(*args, **kwargs)
        finally:
            if enabled:
                gc.enable()

    return cast(F, paused)


class _Partition:
    __slots__ = ("replicas", "state")

    def __init__(self, replicas: tuple[int, ...], state: LeaderIsr | None = None):
        self.replicas = replicas
        self.state = state


class _Plan:
    """A state to write for one partition, and how to decide again if its node moved."""

    __slots__ = ("isr", "leader", "reason", "replan", "tp")

    def __init__(
        self,
        tp: TP,
        leader: int,
        isr: tuple[int, ...],
        reason: ElectionReason | None,
        replan: Callable[[TP], _Plan | None],
    ):
        self.tp = tp
        self.leader = leader
        self.isr = isr
        self.reason = reason
        self.replan = replan


class _Batch:
    """One multi-op of state writes: the plans, their ops, and which plan owns which op."""

    __slots__ = ("creates_partitions_node", "new_partition_nodes", "ops", "owners", "plans")

    def __init__(self) -> None:
        self.plans: list[_Plan] = []
        self.ops: list[Op] = []
        self.owners: list[int] = []
        self.new_partition_nodes: set[str] = set()
        self.creates_partitions_node = False


class Controller:
    """The controller for one term (created by the broker that won the election).

    :param store: the broker's own store session.
    :param on_fenced: called (once) when a write found a newer epoch; the broker resigns.
    """

    def __init__(
        self,
        store: MetadataStore,
        term: ControllerTerm,
        *,
        config: EngineConfig,
        clock: Clock,
        observers: Observers,
        on_fenced: Callable[[ControllerTerm], None],
    ):
        self.store = store
        self.term = term
        self.config = config
        self.clock = clock
        self.observers = observers
        self._on_fenced = on_fenced
        self._writer = FencedWriter(store, term)
        manager = get_plugin_manager()
        kind = ElectionKind.PARTITION_LEADER.value
        self._offline_default: PartitionLeaderElection = manager.election(
            kind, config.offline_election
        )
        self._offline_clean: PartitionLeaderElection = manager.election(kind, "offline")
        self._offline_unclean: PartitionLeaderElection = manager.election(kind, "offline-unclean")
        self._preferred: PartitionLeaderElection = manager.election(kind, config.preferred_election)
        self._shutdown_election: PartitionLeaderElection = manager.election(
            kind, config.controlled_shutdown_election
        )
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(
            target=self._run,
            name=f"coordkit-controller-{term.broker_id}-e{term.epoch}",
            daemon=True,
        )
        self._stopped = threading.Event()
        self._fenced = False
        self._busy = False
        self._count_lock = threading.Lock()
        self._outstanding = 0  # queued or running events and requests
        self.ready = threading.Event()
        self.ready_seconds: float | None = None
        #: Seconds of the failover phases (load, elect, persist) once ready.
        self.phases: dict[str, float] = {}
        self._watches: list[Watch] = []
        self._topic_watches: dict[str, Watch] = {}
        # The cluster as this controller knows it.
        self._live: dict[int, tuple[BrokerInfo, int]] = {}  # id -> (registration, czxid)
        #: Brokers and topics this controller knows (snapshots other threads may read).
        self.known_brokers: frozenset[int] = frozenset()
        self.known_topics: frozenset[str] = frozenset()
        self._shutting_down: set[int] = set()
        self._excluded: frozenset[int] = frozenset()
        self._topics: dict[str, dict[int, tuple[int, ...]]] = {}
        self._parts: dict[TP, _Partition] = {}
        self._deleting: set[str] = set()
        #: Topics queued for deletion that wait for a replica's broker to come back.
        self._deletion_ineligible: set[str] = set()
        self._partitions_nodes: set[str] = set()
        self._unclean_override: dict[str, bool | None] = {}
        self._next_rebalance = clock.monotonic() + config.leader_imbalance_check_interval
        # Several multis in flight pay off only where a round trip costs something.
        networked = store.characteristics.shared_across_processes
        self._write_concurrency = config.write_concurrency if networked else 1
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None

    # -- lifecycle (any thread) ---------------------------------------------------------------

    @property
    def broker_id(self) -> int:
        return self.term.broker_id

    @property
    def epoch(self) -> int:
        return self.term.epoch

    @property
    def active(self) -> bool:
        return not self._stopped.is_set()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """End the term here (deposed, resigning or closing); the store is not touched."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        self._cancel_watches()
        self._queue.put(_STOP)
        if threading.current_thread() is not self._thread and self._thread.is_alive():
            self._thread.join(timeout=30)

    def idle(self) -> bool:
        """Loaded, and nothing queued or running (tests and tools wait for this)."""
        with self._count_lock:
            return self.ready.is_set() and self._outstanding == 0 and not self._busy

    # -- requests (any thread) ----------------------------------------------------------------

    def controlled_shutdown(self, broker_id: int) -> concurrent.futures.Future[list[TP]]:
        """Move leadership off ``broker_id`` and drop it from ISRs; the future holds the partitions
        it still leads (single-replica partitions, or no other replica in the ISR)."""
        return self._request(self._handle_controlled_shutdown, broker_id)

    def elect_preferred_leaders(
        self, partitions: Iterable[TP] | None = None
    ) -> concurrent.futures.Future[list[TP]]:
        """A preferred-replica election (all partitions by default); the future holds the
        partitions whose leader moved."""
        chosen = None if partitions is None else list(partitions)
        return self._request(self._handle_preferred_election, chosen)

    def check_leader_imbalance(self) -> concurrent.futures.Future[list[TP]]:
        """Run the automatic preferred-leader rebalance check now."""
        return self._request(self._check_leader_imbalance)

    def leaders(self) -> concurrent.futures.Future[dict[TP, LeaderIsr | None]]:
        """The partition states as this controller knows them (copied on its thread)."""
        return self._request(lambda: {tp: p.state for tp, p in self._parts.items()})

    def _request(self, fn: Callable[..., Any], *args: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._enqueue((fn, args, future))
        if self._stopped.is_set():
            self._drain()
        return future

    def _drain(self) -> None:
        """Fail the requests still queued when the term ends (callers ask the next controller)."""
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if item is _STOP:
                continue
            self._done_one()
            if item[2] is not None and not item[2].done():
                item[2].set_exception(
                    EngineError(f"controller {self.broker_id} (epoch {self.epoch}) has stopped")
                )

    def _post(self, fn: Callable[..., Any], *args: Any) -> None:
        if not self._stopped.is_set():
            self._enqueue((fn, args, None))

    def _enqueue(self, item: tuple[Callable[..., Any], tuple[Any, ...], Any]) -> None:
        with self._count_lock:
            self._outstanding += 1
        self._queue.put(item)

    def _done_one(self) -> None:
        with self._count_lock:
            self._outstanding -= 1

    # -- the event thread ---------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._serve()
        finally:
            self._drain()
            if self._pool is not None:
                self._pool.shutdown(wait=False)

    def _serve(self) -> None:
        while not self._stopped.is_set():
            self._busy = True
            try:
                self._startup()
                break
            except ConnectionLossError:
                time.sleep(0.1)
            except Exception as exc:
                if self._end_term_on(exc) or self._session_closed():
                    return
                log.exception("controller %s failed to start", self.broker_id)
                time.sleep(0.1)
            finally:
                self._busy = False
        while not self._stopped.is_set():
            try:
                item = self._queue.get(timeout=0.05)
            except queue.Empty:
                item = None
            if item is _STOP:
                break
            self._busy = True
            try:
                if item is not None:
                    try:
                        self._execute(*item)
                    finally:
                        self._done_one()
                self._maybe_rebalance()
            finally:
                self._busy = False

    def _execute(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        future: concurrent.futures.Future[Any] | None,
    ) -> None:
        try:
            result = fn(*args)
        except ConnectionLossError:
            # The connection may come back with the session: try the event again.
            time.sleep(0.05)
            if not self._stopped.is_set():
                self._enqueue((fn, args, future))
            return
        except Exception as exc:
            if not self._end_term_on(exc) and not self._session_closed():
                log.exception("controller %s: %s failed", self.broker_id, _name(fn))
            if future is not None:
                future.set_exception(exc)
            return
        if future is not None:
            future.set_result(result)

    def _end_term_on(self, exc: BaseException) -> bool:
        """Stop on errors that end the term; True if ``exc`` was one."""
        if isinstance(exc, ControllerFencedError):
            level = (
                logging.INFO if isinstance(exc, ControllerSessionEndedError) else logging.WARNING
            )
            log.log(level, "%s", exc)
            self._fenced = True
            self.stop()
            self._on_fenced(self.term)
            return True
        if isinstance(exc, SessionExpiredError | StoreClosedError):
            # The broker sees the session end and ends the term; stop acting meanwhile.
            self.stop()
            return True
        return False

    def _session_closed(self) -> bool:
        """The broker closed its session under a running call (any error then is moot)."""
        if self.store.state is SessionState.CLOSED:
            self.stop()
            return True
        return False

    def _cancel_watches(self) -> None:
        for watch in [*self._watches, *self._topic_watches.values()]:
            watch.cancel()
        self._watches.clear()
        self._topic_watches.clear()

    # -- failover (Kafka's onControllerFailover) ----------------------------------------------

    @_bulk
    def _startup(self) -> None:
        started = time.perf_counter()
        self._cancel_watches()
        self._watches.append(
            self.store.watch_children(
                layout.BROKER_IDS, lambda e: self._post(self._brokers_changed)
            )
        )
        self._watches.append(
            self.store.watch_children(
                layout.BROKER_TOPICS, lambda e: self._post(self._topics_changed, e)
            )
        )
        self._watches.append(
            self.store.watch_children(
                layout.DELETE_TOPICS, lambda e: self._post(self._delete_requested, e)
            )
        )
        self._watches.append(
            self.store.watch_children(
                isr_notifications.ISR_CHANGE_NOTIFICATION,
                lambda e: self._post(self._isr_changed, e),
            )
        )
        self._topics = {}
        self.known_topics = frozenset()
        self._parts = {}
        self._load_topics(self.store.children(layout.BROKER_TOPICS))
        # Brokers after topics: every broker registered before a loaded topic was created is then
        # live for its first election (read first, a broker registering meanwhile would be missed
        # and its replicas left out of the new partitions' ISRs for good).
        self._live = self._read_brokers()
        self.known_brokers = frozenset(self._live)
        loaded = time.perf_counter()
        queued = self.store.children(layout.DELETE_TOPICS)
        self._delete_topics(queued)
        live = self._live_ids()
        tps = [tp for tp in self._parts if tp[0] not in self._deleting]
        self._prefetch_unclean(tps, live)
        # Leaders first (availability); dead replicas leave the ISRs right after, as an event.
        plans = [self._plan_liveness(tp, live, shrink=False) for tp in tps]
        planned = time.perf_counter()
        changes = self._persist(plans)
        done = time.perf_counter()
        self.ready_seconds = done - started
        self.phases = {
            "load": loaded - started,
            "elect": planned - loaded,
            "persist": done - planned,
        }
        self.ready.set()
        self._post(self._shrink_isrs)
        log.info(
            "controller %s (epoch %s) ready in %.3fs (load %.3fs, elect %.3fs, persist %.3fs): "
            "%d brokers, %d topics, %d partitions, %d states written",
            self.broker_id,
            self.epoch,
            self.ready_seconds,
            self.phases["load"],
            self.phases["elect"],
            self.phases["persist"],
            len(self._live),
            len(self._topics),
            len(self._parts),
            len(changes),
        )
        self.observers.controller_ready(self.broker_id, self.epoch, self.ready_seconds)

    def _read_brokers(self) -> dict[int, tuple[BrokerInfo, int]]:
        ids = sorted(int(c) for c in self.store.children(layout.BROKER_IDS) if c.isdigit())
        paths = [layout.broker_path(b) for b in ids]
        out: dict[int, tuple[BrokerInfo, int]] = {}
        for broker, path, result in zip(ids, paths, self.store.get_many(paths), strict=True):
            if isinstance(result, StoreError):
                continue  # gone since the listing
            data, stat = result
            try:
                out[broker] = (layout.BROKER.decode(data, path), stat.czxid)
            except LayoutError as exc:
                log.warning("ignoring broker registration: %s", exc)
        return out

    def _load_topics(self, topics: Iterable[str]) -> list[TP]:
        """Read assignments and states of ``topics`` (not yet known); returns their partitions."""
        names = sorted(set(topics) - set(self._topics))
        if not names:
            return []
        added: list[TP] = []
        paths = [f"{layout.BROKER_TOPICS}/{t}" for t in names]
        for topic, path, result in zip(names, paths, self._get_many(paths), strict=True):
            if isinstance(result, StoreError):
                continue
            try:
                assignment = states.decode_assignment(path, result[0])
            except LayoutError as exc:
                log.warning("ignoring topic: %s", exc)
                continue
            self._topics[topic] = assignment
            self.known_topics = self.known_topics | {topic}
            for partition, replicas in assignment.items():
                tp = (topic, partition)
                self._parts[tp] = _Partition(replicas)
                added.append(tp)
        self._refresh_states(added)
        for topic in names:
            if topic in self._topics:
                self._watch_topic(topic)
        return added

    def _watch_topic(self, topic: str) -> None:
        if topic in self._topic_watches:
            return

        def changed(event: DataEvent) -> None:
            self._post(self._assignment_changed, topic, event)

        self._topic_watches[topic] = self.store.watch_data(
            f"{layout.BROKER_TOPICS}/{topic}", changed
        )

    def _get_many(self, paths: Sequence[str]) -> list[tuple[bytes, Stat] | StoreError]:
        out: list[tuple[bytes, Stat] | StoreError] = []
        step = self.config.read_batch
        for start in range(0, len(paths), step):
            out.extend(self.store.get_many(paths[start : start + step]))
        return out

    def _refresh_states(self, tps: Sequence[TP]) -> None:
        """Re-read the state nodes of ``tps`` (a pipelined read per batch)."""
        paths = [states.state_path(tp) for tp in tps]
        for tp, path, result in zip(tps, paths, self._get_many(paths), strict=True):
            part = self._parts.get(tp)
            if part is None:
                continue
            if isinstance(result, NoNodeError):
                part.state = None
                continue
            if isinstance(result, StoreError):
                raise result
            data, stat = result
            part.state = states.decode_state(path, data, stat.version)
            self._partitions_nodes.add(tp[0])

    # -- liveness ------------------------------------------------------------------------------

    def _live_ids(self) -> frozenset[int]:
        """Brokers that may hold leadership: registered, not shutting down, not just bounced."""
        return frozenset(self._live) - self._shutting_down - self._excluded

    def _brokers_changed(self) -> None:
        current = self._read_brokers()
        previous = self._live
        dead = set(previous) - set(current)
        born = set(current) - set(previous)
        bounced = {b for b in set(previous) & set(current) if previous[b][1] != current[b][1]}
        self._live = current
        self.known_brokers = frozenset(current)
        self._shutting_down -= dead | bounced
        if dead or bounced:
            log.info(
                "controller %s: brokers %s gone%s",
                self.broker_id,
                sorted(dead),
                f", {sorted(bounced)} bounced" if bounced else "",
            )
            self._broker_failure(dead | bounced, frozenset(bounced))
        if born or bounced:
            self._broker_startup(born | bounced)
            if self._deletion_ineligible:
                self._delete_topics(list(self._deletion_ineligible))

    @_bulk
    def _broker_failure(self, failed: set[int], bounced: frozenset[int]) -> None:
        """Kafka's onBrokerFailure: first elect leaders for the partitions they led, then drop
        them from the ISRs of the others. Decisions come from the cached states (kept current by
        the ISR change notifications); every write is conditional on the state node's version."""
        self._excluded = bounced
        try:
            tps = [
                tp
                for tp, part in self._parts.items()
                if tp[0] not in self._deleting and not failed.isdisjoint(part.replicas)
            ]
            live = self._live_ids()
            self._prefetch_unclean(tps, live)
            self._persist([self._plan_liveness(tp, live, shrink=False) for tp in tps])
            self._persist([self._plan_liveness(tp, live) for tp in tps])
        finally:
            self._excluded = frozenset()

    @_bulk
    def _broker_startup(self, started: set[int]) -> None:
        """Kafka's onBrokerStartup: give new and offline partitions a leader if possible."""
        live = self._live_ids()
        tps = [
            tp
            for tp, part in self._parts.items()
            if tp[0] not in self._deleting and (part.state is None or part.state.leader not in live)
        ]
        self._prefetch_unclean(tps, live)
        self._persist([self._plan_liveness(tp, live) for tp in tps])

    @_bulk
    def _shrink_isrs(self) -> None:
        """Drop replicas of dead brokers from the ISRs (after a failover has restored leaders)."""
        live = self._live_ids()
        tps = [
            tp
            for tp, part in self._parts.items()
            if tp[0] not in self._deleting
            and part.state is not None
            and not live.issuperset(part.state.isr)
        ]
        self._persist([self._plan_liveness(tp, live) for tp in tps])

    def _isr_changed(self, event: ChildrenEvent) -> None:
        """Kafka's IsrChangeNotification: refresh the listed partitions, drop the notices."""
        names = sorted(c for c in event.children or () if c.startswith(isr_notifications.PREFIX))
        if not names:
            return
        paths = [f"{isr_notifications.ISR_CHANGE_NOTIFICATION}/{n}" for n in names]
        changed: set[TP] = set()
        present: list[str] = []
        for path, result in zip(paths, self._get_many(paths), strict=True):
            if isinstance(result, StoreError):
                continue
            present.append(path)
            try:
                changed.update(isr_notifications.decode(path, result[0]))
            except LayoutError as exc:
                log.warning("ignoring %s", exc)
        refreshed = sorted(
            tp for tp in changed if tp in self._parts and tp[0] not in self._deleting
        )
        self._refresh_states(refreshed)
        # A replica may have joined an ISR just before its broker died: reconcile with liveness.
        live = self._live_ids()
        self._persist([self._plan_liveness(tp, live) for tp in refreshed])
        for start in range(0, len(present), self.config.write_batch_ops):
            self._commit_ignoring_missing(
                [Delete(p) for p in present[start : start + self.config.write_batch_ops]]
            )

    def _prefetch_unclean(self, tps: Sequence[TP], live: frozenset[int]) -> None:
        """Read the unclean-election override of topics that have partitions without a live ISR
        member (as Kafka does, only for those)."""
        topics = {
            tp[0]
            for tp in tps
            if (state := self._parts[tp].state) is not None
            and state.leader not in live
            and live.isdisjoint(state.isr)
        }
        if not topics:
            return
        names = sorted(topics)
        paths = [layout.topic_config_path(t) for t in names]
        for topic, path, result in zip(names, paths, self._get_many(paths), strict=True):
            override: bool | None = None
            if not isinstance(result, StoreError):
                try:
                    value = layout.TOPIC_CONFIG.decode(result[0], path).config.get(
                        UNCLEAN_LEADER_ELECTION_ENABLE
                    )
                except LayoutError as exc:
                    log.warning("ignoring topic config: %s", exc)
                    value = None
                if value is not None:
                    override = value.strip().lower() == "true"
            self._unclean_override[topic] = override

    def _offline_strategy(self, topic: str) -> PartitionLeaderElection:
        override = self._unclean_override.get(topic)
        if override is None:
            return self._offline_default
        return self._offline_unclean if override else self._offline_clean

    # -- planning: what to write for a partition -----------------------------------------------

    def _plan_liveness(self, tp: TP, live: frozenset[int], shrink: bool = True) -> _Plan | None:
        """New partitions get their first leader; partitions whose leader is gone get an offline
        election; dead replicas leave the ISR (unless ``shrink`` is off: leaders only)."""
        part = self._parts.get(tp)
        if part is None:
            return None
        state = part.state

        def again(t: TP) -> _Plan | None:
            return self._plan_liveness(t, live, shrink)

        if state is None:
            first = new_partition_election(part.replicas, live)
            if first is None:
                return None  # stays new until a replica is live
            return _Plan(tp, first.leader, first.isr, first.reason, again)
        if state.leader in live:
            if not shrink or all(r in live for r in state.isr):
                return None
            isr = tuple(r for r in state.isr if r in live) or state.isr
            return _Plan(tp, state.leader, isr, None, again)
        result = self._offline_strategy(tp[0]).elect(
            PartitionElectionInput(part.replicas, state.isr, live)
        )
        if result is not None:
            return _Plan(tp, result.leader, result.isr, result.reason, again)
        # No eligible replica: leaderless. Keep the last ISR members so that a clean election
        # waits for one of them (Kafka never empties the ISR).
        isr = tuple(r for r in state.isr if r in live) or state.isr
        if state.leader == NO_LEADER and isr == state.isr:
            return None
        return _Plan(tp, NO_LEADER, isr, None, again)

    # -- persisting ----------------------------------------------------------------------------

    def _persist(self, plans: Iterable[_Plan | None]) -> list[StateChange]:
        """Write planned states in fenced, version-checked batches; re-plan on conflicts.

        On a networked store several batches are in flight at once (``write_concurrency``),
        except batches creating a topic's ``partitions`` node, which go first, one by one.
        """
        pending = [p for p in plans if p is not None]
        changes: list[StateChange] = []
        rounds = 0
        while pending:
            rounds += 1
            if rounds > MAX_ROUNDS:
                raise EngineError(f"controller {self.broker_id}: state writes keep conflicting")
            batches = self._batches(pending)
            pending = []
            creating = [b for b in batches if b.creates_partitions_node]
            rest = [b for b in batches if not b.creates_partitions_node]
            outcomes = [self._commit_batch(b) for b in creating] + self._commit_all(rest)
            fenced: BaseException | None = None
            for batch, outcome in zip([*creating, *rest], outcomes, strict=True):
                if isinstance(outcome, ControllerFencedError):
                    fenced = fenced or outcome
                elif isinstance(outcome, BaseException):
                    pending.extend(self._after_conflict(batch, outcome))
                else:
                    changes.extend(self._applied(batch, outcome))
            if fenced is not None:
                self.observers.partition_states_changed(changes)
                raise fenced
        self.observers.partition_states_changed(changes)
        return changes

    def _batches(self, plans: list[_Plan]) -> list[_Batch]:
        out: list[_Batch] = []
        batch = _Batch()
        claimed: set[str] = set()  # partitions nodes some batch of this round creates
        for plan in plans:
            if len(batch.ops) >= self.config.write_batch_ops:
                out.append(batch)
                batch = _Batch()
            plan_ops = self._ops_for(plan, claimed, batch)
            batch.ops.extend(plan_ops)
            batch.owners.extend([len(batch.plans)] * len(plan_ops))
            batch.plans.append(plan)
        if batch.plans:
            out.append(batch)
        return out

    def _commit_batch(self, batch: _Batch) -> list[Any] | BaseException:
        try:
            return self._writer.commit(batch.ops)
        except (ControllerFencedError, BadVersionError, NodeExistsError, NoNodeError) as exc:
            return exc

    def _commit_all(self, batches: list[_Batch]) -> list[list[Any] | BaseException]:
        if len(batches) <= 1 or self._write_concurrency <= 1:
            return [self._commit_batch(b) for b in batches]
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(
                self._write_concurrency, thread_name_prefix=f"coordkit-controller-{self.broker_id}"
            )
        return list(self._pool.map(self._commit_batch, batches))

    def _after_conflict(self, batch: _Batch, exc: BaseException) -> list[_Plan]:
        """Plans to retry after ``batch`` failed on one of its own ops."""
        if (
            not isinstance(exc, StoreError)
            or exc.op_index is None
            or exc.op_index >= len(batch.ops)
        ):
            raise exc
        failed = batch.plans[batch.owners[exc.op_index]]
        failed_path = batch.ops[exc.op_index].path
        if isinstance(exc, NodeExistsError) and failed_path == states.partitions_path(failed.tp[0]):
            self._partitions_nodes.add(failed.tp[0])
            return batch.plans
        if isinstance(exc, NoNodeError) and failed_path == states.partition_path(failed.tp):
            self._partitions_nodes.discard(failed.tp[0])  # its parent is gone: create it again
            return batch.plans
        # Some state moved underneath (a leader changed its ISR): re-read the whole batch in one
        # pipelined read and decide again, so a batch fails once, not once per stale partition.
        self._refresh_states([p.tp for p in batch.plans])
        return [r for r in (p.replan(p.tp) for p in batch.plans) if r is not None]

    def _ops_for(self, plan: _Plan, claimed: set[str], batch: _Batch) -> list[Op]:
        tp = plan.tp
        part = self._parts[tp]
        state = part.state
        if state is None:
            data = states.encode_state(plan.leader, 0, plan.isr, self.epoch)
            ops: list[Op] = []
            topic = tp[0]
            if topic not in self._partitions_nodes and topic not in claimed:
                ops.append(Create(states.partitions_path(topic)))
                claimed.add(topic)
                batch.new_partition_nodes.add(topic)
            if topic not in self._partitions_nodes:
                batch.creates_partitions_node = True  # ordered after the batch creating it
            ops.append(Create(states.partition_path(tp)))
            ops.append(Create(states.state_path(tp), data))
            return ops
        data = states.encode_state(plan.leader, state.leader_epoch + 1, plan.isr, self.epoch)
        return [SetData(states.state_path(tp), data, state.zk_version)]

    def _applied(self, batch: _Batch, results: list[Any]) -> list[StateChange]:
        self._partitions_nodes |= batch.new_partition_nodes
        versions: dict[int, int] = {}
        owners = batch.owners
        for index, (op, result) in enumerate(zip(batch.ops, results, strict=True)):
            if isinstance(op, SetData):
                versions[owners[index]] = result.version
            elif isinstance(op, Create) and op.path.endswith("/state"):
                versions[owners[index]] = 0
        out: list[StateChange] = []
        for index, plan in enumerate(batch.plans):
            part = self._parts[plan.tp]
            previous = part.state
            epoch = 0 if previous is None else previous.leader_epoch + 1
            current = LeaderIsr(plan.leader, epoch, plan.isr, self.epoch, versions[index])
            part.state = current
            out.append(
                StateChange(plan.tp, previous, current, plan.reason, self.broker_id, part.replicas)
            )
        return out

    # -- topics --------------------------------------------------------------------------------

    def _topics_changed(self, event: ChildrenEvent) -> None:
        children = set(event.children or ())
        for topic in set(self._topics) - children:
            # Removed behind the controller's back: forget it.
            self._forget_topic(topic)
        added = self._load_topics(children - set(self._topics))
        if added:
            live = self._live_ids()
            self._persist([self._plan_liveness(tp, live) for tp in added])

    def _assignment_changed(self, topic: str, event: DataEvent) -> None:
        """Kafka's PartitionModifications: initialise partitions added to a topic."""
        if not event.exists or event.data is None or topic not in self._topics:
            return
        if topic in self._deleting:
            return
        path = f"{layout.BROKER_TOPICS}/{topic}"
        try:
            assignment = layout.TOPIC.decode(event.data, path)
        except LayoutError as exc:
            log.warning("ignoring assignment change: %s", exc)
            return
        known = self._topics[topic]
        added: list[TP] = []
        for partition, replicas in assignment.partitions.items():
            if partition in known:
                if tuple(replicas) != known[partition]:
                    log.warning(
                        "%s-%s: replica list changed to %s outside a reassignment; ignored",
                        topic,
                        partition,
                        list(replicas),
                    )
                continue
            known[partition] = tuple(replicas)
            tp = (topic, partition)
            self._parts[tp] = _Partition(tuple(replicas))
            added.append(tp)
        if added:
            self._refresh_states(added)
            live = self._live_ids()
            self._persist([self._plan_liveness(tp, live) for tp in added])

    def _delete_requested(self, event: ChildrenEvent) -> None:
        self._delete_topics(event.children or ())

    def _delete_topics(self, topics: Iterable[str]) -> None:
        for topic in sorted(topics):
            marker = f"{layout.DELETE_TOPICS}/{topic}"
            if not self.config.delete_topic_enable or topic not in self._topics:
                # Kafka drops the request when deletion is disabled or the topic is unknown.
                if not self.config.delete_topic_enable:
                    log.warning("topic deletion is disabled; dropping request for %s", topic)
                self._commit_ignoring_missing([Delete(marker)])
                continue
            self._deleting.add(topic)
            offline = self._offline_replicas(topic)
            if offline:
                # Kafka's TopicDeletionManager marks the topic ineligible: every replica must stop
                # and delete its log first, so deletion resumes when the brokers are back.
                if topic not in self._deletion_ineligible:
                    log.info(
                        "controller %s: deletion of %s waits for brokers %s (replicas offline)",
                        self.broker_id,
                        topic,
                        sorted(offline),
                    )
                self._deletion_ineligible.add(topic)
                continue
            self._deletion_ineligible.discard(topic)
            self._delete_topic_nodes(topic)

    def _offline_replicas(self, topic: str) -> set[int]:
        """Brokers holding a replica of ``topic`` that are not registered."""
        live = self._live
        return {
            replica
            for replicas in self._topics[topic].values()
            for replica in replicas
            if replica not in live
        }

    def _delete_topic_nodes(self, topic: str) -> None:
        watch = self._topic_watches.pop(topic, None)
        if watch is not None:
            watch.cancel()
        ops: list[Op] = []
        for partition in sorted(self._topics[topic]):
            tp = (topic, partition)
            part = self._parts.get(tp)
            if part is not None and part.state is not None:
                ops.append(Delete(states.state_path(tp)))
                ops.append(Delete(states.partition_path(tp)))
        try:
            for start in range(0, len(ops), self.config.write_batch_ops):
                self._writer.commit(ops[start : start + self.config.write_batch_ops])
            self._writer.commit(self._topic_tail_ops(topic))
        except (NoNodeError, NotEmptyError):
            # The cache missed something: delete exactly what is there.
            self._delete_by_walk(topic)
        self._forget_topic(topic)
        self.observers.topic_deleted(topic)
        log.info("controller %s: deleted topic %s", self.broker_id, topic)

    def _topic_tail_ops(self, topic: str) -> list[Op]:
        paths = [
            states.partitions_path(topic),
            f"{layout.BROKER_TOPICS}/{topic}",
            layout.topic_config_path(topic),
            f"{layout.DELETE_TOPICS}/{topic}",
        ]
        return [
            Delete(path)
            for path, result in zip(paths, self.store.get_many(paths), strict=True)
            if not isinstance(result, StoreError)
        ]

    def _delete_by_walk(self, topic: str) -> None:
        root = f"{layout.BROKER_TOPICS}/{topic}"
        deepest_first: list[str] = []
        level = [root]
        while level:
            deepest_first[:0] = level
            following: list[str] = []
            for path in level:
                try:
                    following.extend(f"{path}/{c}" for c in self.store.children(path))
                except NoNodeError:
                    pass
            level = following
        ops: list[Op] = []
        present = self.store.get_many(deepest_first)
        ops = [
            Delete(path)
            for path, result in zip(deepest_first, present, strict=True)
            if not isinstance(result, StoreError) and path != root
        ]
        for start in range(0, len(ops), self.config.write_batch_ops):
            self._writer.commit(ops[start : start + self.config.write_batch_ops])
        self._writer.commit(
            [op for op in self._topic_tail_ops(topic) if op.path != states.partitions_path(topic)]
        )

    def _commit_ignoring_missing(self, ops: list[Op]) -> None:
        """Commit deletions, leaving out nodes someone else already removed."""
        remaining = list(ops)
        while remaining:
            try:
                self._writer.commit(remaining)
                return
            except NoNodeError as exc:
                if exc.op_index is None:
                    return
                del remaining[exc.op_index]

    def _forget_topic(self, topic: str) -> None:
        watch = self._topic_watches.pop(topic, None)
        if watch is not None:
            watch.cancel()
        self.known_topics = self.known_topics - {topic}
        for partition in self._topics.pop(topic, {}):
            self._parts.pop((topic, partition), None)
        self._deleting.discard(topic)
        self._deletion_ineligible.discard(topic)
        self._partitions_nodes.discard(topic)
        self._unclean_override.pop(topic, None)

    # -- controlled shutdown (Kafka's doControlledShutdown) ------------------------------------

    @_bulk
    def _handle_controlled_shutdown(self, broker_id: int) -> list[TP]:
        if broker_id not in self._live:
            raise EngineError(
                f"controlled shutdown of broker {broker_id}: it is not registered under "
                f"{layout.BROKER_IDS}"
            )
        self._shutting_down.add(broker_id)
        tps = [
            tp
            for tp, part in self._parts.items()
            if tp[0] not in self._deleting and len(part.replicas) > 1 and broker_id in part.replicas
        ]
        live = self._live_ids()
        self._persist([self._plan_shutdown(tp, broker_id, live) for tp in tps])
        return sorted(
            tp
            for tp, part in self._parts.items()
            if part.state is not None and part.state.leader == broker_id
        )

    def _plan_shutdown(self, tp: TP, broker_id: int, live: frozenset[int]) -> _Plan | None:
        part = self._parts.get(tp)
        if part is None or part.state is None:
            return None
        state = part.state

        def again(t: TP) -> _Plan | None:
            return self._plan_shutdown(t, broker_id, live)

        if state.leader == broker_id:
            result = self._shutdown_election.elect(
                PartitionElectionInput(
                    part.replicas, state.isr, live, shutting_down=self._shutting_down
                )
            )
            if result is None:
                return None
            return _Plan(tp, result.leader, result.isr, result.reason, again)
        if broker_id in state.isr and len(state.isr) > 1:
            isr = tuple(r for r in state.isr if r != broker_id)
            return _Plan(tp, state.leader, isr, None, again)
        return None

    # -- preferred leaders ---------------------------------------------------------------------

    def _handle_preferred_election(self, partitions: list[TP] | None) -> list[TP]:
        tps = [
            tp
            for tp in (partitions if partitions is not None else list(self._parts))
            if tp in self._parts and tp[0] not in self._deleting
        ]
        # Kafka reads the states afresh here: the preferred replica may have just rejoined.
        self._refresh_states(tps)
        live = self._live_ids()
        changes = self._persist([self._plan_preferred(tp, live) for tp in tps])
        return [c.tp for c in changes if c.leader_changed]

    def _plan_preferred(self, tp: TP, live: frozenset[int]) -> _Plan | None:
        part = self._parts.get(tp)
        if part is None or part.state is None or part.state.leader == part.replicas[0]:
            return None
        state = part.state
        result = self._preferred.elect(PartitionElectionInput(part.replicas, state.isr, live))
        if result is None:
            return None
        return _Plan(
            tp, result.leader, result.isr, result.reason, lambda t: self._plan_preferred(t, live)
        )

    def imbalance(self) -> dict[int, float]:
        """Per preferred broker: partitions it should lead but does not / partitions it should
        lead (Kafka's leader imbalance ratio). Call on the controller thread or when idle."""
        total: dict[int, int] = {}
        off: dict[int, int] = {}
        for tp, part in self._parts.items():
            if tp[0] in self._deleting or not part.replicas:
                continue
            preferred = part.replicas[0]
            total[preferred] = total.get(preferred, 0) + 1
            if part.state is not None and part.state.leader != preferred:
                off[preferred] = off.get(preferred, 0) + 1
        return {b: off.get(b, 0) / n for b, n in total.items()}

    def _check_leader_imbalance(self) -> list[TP]:
        """Kafka's checkAndTriggerAutoLeaderRebalance."""
        live = self._live_ids()
        threshold = self.config.leader_imbalance_per_broker_percentage / 100
        over = {b for b, ratio in self.imbalance().items() if ratio > threshold and b in live}
        if not over:
            return []
        candidates = [
            tp
            for tp, part in self._parts.items()
            if tp[0] not in self._deleting
            and part.replicas[0] in over
            and part.state is not None
            and part.state.leader != part.replicas[0]
        ]
        log.info(
            "controller %s: leader imbalance above %.0f%% on brokers %s; preferred election for %d "
            "partitions",
            self.broker_id,
            threshold * 100,
            sorted(over),
            len(candidates),
        )
        return self._handle_preferred_election(candidates)

    def _maybe_rebalance(self) -> None:
        if not self.config.auto_leader_rebalance or not self.ready.is_set():
            return
        now = self.clock.monotonic()
        if now < self._next_rebalance:
            return
        self._next_rebalance = now + self.config.leader_imbalance_check_interval
        try:
            self._check_leader_imbalance()
        except ConnectionLossError:
            self._next_rebalance = now  # try again on the next loop
        except Exception as exc:
            if not self._end_term_on(exc):
                log.exception("controller %s: leader rebalance failed", self.broker_id)

    def __repr__(self) -> str:
        state = "active" if self.active else ("fenced" if self._fenced else "stopped")
        return f"<Controller broker={self.broker_id} epoch={self.epoch} {state}>"


def _name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__name__", repr(fn))

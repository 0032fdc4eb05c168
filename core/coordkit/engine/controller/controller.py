"""One broker's term as the cluster's controller (Kafka's ``KafkaController``).

The controller composes one part per responsibility, each readable on its own:

* :class:`~.events.ControllerEventManager` — the event loop: watches and requests only *mark*
  what to look at again; failed passes are retried from the store;
* :class:`~.watches.ControllerWatches` — what is watched in the store, and what each change marks;
* :class:`~.context.ControllerContext` — brokers, topics and partition states read from the store;
* :class:`~.partition_state.PartitionStateMachine` — leader elections and fenced state writes;
* :class:`~.replica_state.ReplicaStateMachine` — dead replicas out of ISRs, leaders' ISR changes;
* :class:`~.deletion.TopicDeletionManager` — ``/admin/delete_topics``;
* :class:`~.shutdown.ControlledShutdown` and :class:`~.preferred.PreferredLeaders`;
* :class:`~.topic_ids.TopicIds` — ids for topics whose node has none.

Each pass is level-triggered (as Kubernetes controllers reconcile observed state): what it writes
is computed from what the store holds now, so a write that failed, timed out or was cut off by a
reconnect or a server restart is planned again on the next pass. The first pass of a term (and any
pass after a failure or a reconnect) reads everything with bulk reads, as Kafka's controller does
on failover, unless a warm election handed over a standby's image (``term.image``, see
:mod:`.image`): then the first pass fills the context from memory. Later passes read only what
their marks name. Safety does not rest on the cache:
every write is fenced by the ``/controller_epoch`` version and by the version of the state node it
replaces, and leader epochs only grow.
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, TypeVar

from coordkit.engine.config import EngineConfig
from coordkit.engine.controller.alter_partition import (
    AlterPartitionResult,
    IsrChange,
    alter_partition,
)
from coordkit.engine.controller.announce import states_to_announce
from coordkit.engine.controller.broker_requests import (
    NO_CHANNEL,
    BrokerRequestChannel,
    RequestBatch,
)
from coordkit.engine.controller.context import ControllerContext
from coordkit.engine.controller.deletion import TopicDeletionManager
from coordkit.engine.controller.events import ControllerEventManager, Marks
from coordkit.engine.controller.partition_state import PartitionStateMachine, bulk
from coordkit.engine.controller.preferred import PreferredLeaders
from coordkit.engine.controller.reassignment import ReassignmentManager
from coordkit.engine.controller.replica_state import ReplicaStateMachine
from coordkit.engine.controller.shutdown import UNKNOWN_BROKER_EPOCH, ControlledShutdown
from coordkit.engine.controller.topic_ids import TopicIds
from coordkit.engine.controller.unclean import UncleanElections
from coordkit.engine.controller.watches import ControllerWatches
from coordkit.engine.errors import ControllerFencedError, ControllerSessionEndedError
from coordkit.engine.events import Observers, StateChange
from coordkit.engine.fencing import FencedWriter
from coordkit.engine.invariants import Violation
from coordkit.engine.states import TP, LeaderIsr
from coordkit.engine.strategies import Strategies
from coordkit.errors import NodeExistsError
from coordkit.kafka import layout
from coordkit.store import MetadataStore, SessionState
from coordkit.strategies.elections import ControllerTerm
from coordkit.support.clock import Clock

log = logging.getLogger("coordkit.engine.controller")

T = TypeVar("T")


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
        strategies: Strategies,
        broker_requests: BrokerRequestChannel = NO_CHANNEL,
    ):
        self.store = store
        self.term = term
        self.config = config
        self.clock = clock
        self.observers = observers
        self._on_fenced = on_fenced
        self._fenced = False
        owner = f"controller {term.broker_id} (epoch {term.epoch})"
        writer = FencedWriter(store, term)
        self.context = ControllerContext(
            store, read_batch=config.read_batch, owner=owner, image=term.image
        )
        # The brokers outside the process hear what the parts write through the requests batch.
        self.requests = RequestBatch(broker_requests, term.broker_id, term.epoch)
        told = Observers(observers, self.requests)
        # Several multis in flight pay off only where a round trip costs something.
        networked = store.characteristics.shared_across_processes
        self.partitions = PartitionStateMachine(
            self.context,
            writer,
            config=config,
            observers=told,
            broker_id=term.broker_id,
            epoch=term.epoch,
            write_concurrency=config.write_concurrency if networked else 1,
            strategies=strategies,
        )
        self.replicas = ReplicaStateMachine(
            self.context, self.partitions, writer, write_batch_ops=config.write_batch_ops
        )
        self.deletion = TopicDeletionManager(
            self.context,
            self.partitions,
            writer,
            config=config,
            observers=observers,
            broker_id=term.broker_id,
            requests=self.requests,
        )
        self.shutdown = ControlledShutdown(
            self.context,
            self.partitions,
            strategies.partition_election(config.controlled_shutdown_election),
        )
        self.preferred = PreferredLeaders(
            self.context, self.partitions, writer, config=config, broker_id=term.broker_id,
            strategies=strategies,
        )  # fmt: skip
        self.unclean = UncleanElections(self.context, self.partitions, strategies)
        self.reassignment = ReassignmentManager(
            self.context, self.partitions, writer, config=config, broker_id=term.broker_id,
            strategies=strategies,
        )  # fmt: skip
        self.topic_ids = TopicIds(
            self.context, writer, broker_id=term.broker_id, write_batch_ops=config.write_batch_ops
        )
        self._events = ControllerEventManager(
            f"coordkit-controller-{term.broker_id}-e{term.epoch}",
            clock=clock,
            reconcile=self._reconcile,
            tick=self._tick,
            end_term=self._end_term_on,
        )
        self._started_at = time.perf_counter()
        self.watches = ControllerWatches(store, self.context, term, self._mark)
        #: Brokers that re-registered between two reads: their leaderships move first.
        self._bounced: set[int] = set()
        self._next_rebalance = clock.monotonic() + config.leader_imbalance_check_interval
        self.ready = threading.Event()
        self.ready_seconds: float | None = None
        #: Seconds of the failover phases (load, elect, persist) once ready.
        self.phases: dict[str, float] = {}

    # -- lifecycle (any thread) ---------------------------------------------------------------

    @property
    def broker_id(self) -> int:
        return self.term.broker_id

    @property
    def epoch(self) -> int:
        return self.term.epoch

    @property
    def active(self) -> bool:
        return not self._events.stopped

    @property
    def known_brokers(self) -> frozenset[int]:
        return self.context.known_brokers

    @property
    def known_topics(self) -> AbstractSet[str]:
        return self.context.known_topics

    def ignored(self) -> tuple[Violation, ...]:
        """The unreadable nodes this controller is leaving alone."""
        return self.context.unreadable.snapshot()

    def ignored_names(self) -> tuple[frozenset[str], frozenset[str]]:
        """Children of ``/brokers/ids`` and ``/brokers/topics`` ignored as unreadable."""
        return self.context.ignored_brokers, self.context.ignored_topics

    def start(self) -> None:
        self.store.add_listener(self._on_session)
        self.watches.start()
        self._events.start()

    def stop(self) -> None:
        """End the term here (deposed, resigning or closing); the store is not touched."""
        self.store.remove_listener(self._on_session)
        self.watches.cancel()
        self._events.stop()
        self.partitions.close()
        self.requests.channel.term_ended(self.epoch)

    def _telling(self, fn: Callable[..., T]) -> Callable[..., T]:
        """``fn`` run on the event thread, its writes then told to brokers elsewhere."""

        @functools.wraps(fn)
        def telling(*args: Any) -> T:
            self.requests.begin(self.context.live)
            try:
                return fn(*args)
            finally:
                self.requests.flush()

        return telling

    def idle(self) -> bool:
        """Loaded, and nothing marked, queued, running or waiting to be retried."""
        return self.ready.is_set() and self._events.idle()

    def retrying(self) -> bool:
        """The last pass failed (e.g. the store was unreachable) and is waiting to be retried."""
        return self._events.retrying()

    def _mark(self, marks: Marks) -> None:
        self._events.mark(marks)

    def _on_session(self, state: SessionState) -> None:
        if state is SessionState.LOST:
            # The term died with the session (its /controller was ephemeral). Stop acting now, on
            # the store's thread, before the broker can register on a new session: Kafka's
            # processExpire resigns before RegisterBrokerAndReelect, so a broker back on a new
            # session is never still a controller beside the one elected meanwhile.
            self._events.halt()
        # Whatever was in flight while the connection was down has an unknown outcome.
        elif state is SessionState.CONNECTED:
            self._mark(Marks(everything=True))

    # -- requests (any thread) ----------------------------------------------------------------

    def controlled_shutdown(
        self, broker_id: int, broker_epoch: int = UNKNOWN_BROKER_EPOCH
    ) -> concurrent.futures.Future[list[TP]]:
        """Move leadership off ``broker_id`` and drop it from ISRs; the future holds the partitions
        it still leads (single-replica partitions, or no other replica in the ISR). A
        ``broker_epoch`` older than its live registration's fails the future
        (:class:`~coordkit.engine.errors.StaleBrokerEpochError`)."""
        return self._events.request(self._telling(self.shutdown.shut_down), broker_id,
                                    broker_epoch)  # fmt: skip

    def alter_partition(
        self, broker_id: int, broker_epoch: int, changes: Sequence[IsrChange]
    ) -> concurrent.futures.Future[AlterPartitionResult]:
        """A leader's ISR changes (Kafka's AlterPartition, :mod:`.alter_partition`); the future
        holds each partition's new state or error."""
        return self._events.request(
            self._telling(functools.partial(alter_partition, self.context, self.partitions)),
            broker_id, broker_epoch, list(changes),
        )  # fmt: skip

    def elect_preferred_leaders(
        self, partitions: Iterable[TP] | None = None
    ) -> concurrent.futures.Future[list[TP]]:
        """A preferred-replica election (all partitions by default); the future holds the
        partitions whose leader moved."""
        chosen = None if partitions is None else list(partitions)
        return self._events.request(self._telling(self.preferred.elect), chosen)

    def elect_unclean_leaders(
        self, partitions: Iterable[TP]
    ) -> concurrent.futures.Future[list[TP]]:
        """An unclean election of the leaderless ``partitions`` (Kafka's ElectLeaders UNCLEAN,
        :mod:`.unclean`); the future holds those that got a leader."""
        return self._events.request(self._telling(self.unclean.elect), list(partitions))

    def check_leader_imbalance(self) -> concurrent.futures.Future[list[TP]]:
        """Run the automatic preferred-leader rebalance check now."""
        return self._events.request(self._telling(self.preferred.rebalance))

    def leaders(self) -> concurrent.futures.Future[dict[TP, LeaderIsr | None]]:
        """The partition states as this controller knows them (copied on its thread)."""
        return self._events.request(
            lambda: {tp: state for tp, _replicas, state in self.context.parts.states()}
        )

    def imbalance(self) -> dict[int, float]:
        """Kafka's leader imbalance ratio per preferred broker (call when idle)."""
        return self.preferred.imbalance()

    # -- the pass (event thread) --------------------------------------------------------------

    def _enable_feature_versioning(self) -> None:
        """``/feature`` as Kafka's controller leaves it when elected: versioning enabled, no
        feature finalized. A node another writer made is left as it is."""
        try:
            self.store.create(layout.FEATURE, layout.NO_FINALIZED_FEATURES)
        except NodeExistsError:
            pass

    @bulk
    def _reconcile(self, marks: Marks) -> None:
        context = self.context
        started = time.perf_counter()
        touched: set[TP] = set()
        brokers_changed = False
        requests = self.requests
        requests.begin(context.live)
        started_brokers: set[int] = set()
        if marks.everything:
            self._enable_feature_versioning()
            # Brokers are compared with the previous read, so a bounce is seen here too.
            _dead, _born, bounced = context.load()
            self._bounced |= bounced
            # The states were just read: pending notifications only need consuming (a mark for
            # them may have been merged into this pass).
            self.replicas.consume_isr_notifications()
            # Everyone is told everything (Kafka's onControllerFailover).
            started_brokers = set(context.live)
        else:
            created: list[TP] = []
            if marks.topics:
                created += context.sync_topics()
            for topic in sorted(marks.assignments):
                created += context.sync_assignment(topic)
            touched.update(created)
            if marks.isr_changes:
                refreshed = self.replicas.consume_isr_notifications()
                touched.update(refreshed)
                requests.states_read(context.parts, refreshed)
            # New partitions are read before the brokers, as a full load does: every broker
            # registered before they were created is then a candidate for their first leader.
            # A warm controller hears of topics and partitions through its image's feed, which
            # may run ahead of the /brokers/ids watch; the re-read makes that order hold here.
            if marks.brokers or created:
                dead, born, bounced = context.sync_brokers()
                if dead or bounced:
                    log.info(
                        "controller %s: brokers %s gone%s",
                        self.broker_id,
                        sorted(dead),
                        f", {sorted(bounced)} bounced" if bounced else "",
                    )
                self._bounced |= bounced
                brokers_changed = marks.brokers or bool(dead or born or bounced)
                started_brokers = born | bounced
        if context.without_ids:
            # Kafka's processTopicIds, on failover and for new topics (before their elections).
            self.topic_ids.process()
        scan_all = marks.everything or brokers_changed
        if marks.everything or marks.deletions or (brokers_changed and self.deletion.ineligible):
            self.deletion.process()
        loaded = time.perf_counter()
        if requests.live_changed(context.live) and (started_brokers or brokers_changed):
            requests.brokers_started(started_brokers, context.parts)
        excluded = frozenset(self._bounced)
        live = context.live_ids(excluded)
        # Leaders first (availability), then dead replicas out of the ISRs (Kafka's
        # onBrokerFailure), then bounced brokers back as candidates (onBrokerStartup). A full
        # scan is one query (vectorised over a warm hand-over's columns), not a loop.
        if scan_all:
            attention = context.needing_attention(live)
        else:
            attention = [tp for tp in touched if self.partitions.needs_attention(tp, live)]
        planned = time.perf_counter()
        written = self.partitions.elect_leaders(attention, live)
        elected = time.perf_counter()
        if not self.ready.is_set():
            self._became_ready(started, loaded, planned, written)
        self.replicas.shrink_dead(attention, live)
        if excluded:
            everyone = context.live_ids()
            self.partitions.elect_leaders(context.needing_attention(everyone), everyone)
            self._bounced.clear()
        if (
            marks.everything
            or marks.reassignments
            or marks.isr_changes
            or brokers_changed
            or self.reassignment.pending
        ):
            self.reassignment.process()
        if marks.everything or marks.preferred:
            self.preferred.process_request()
        # Last: one watch per topic is work that grows with the cluster, and nothing is lost by
        # placing them after the elections (a watch's first delivery compares the assignment
        # version with the one the context read, so a change in between is still seen).
        self.watches.sync_topics()
        if marks.everything:
            self._announce_states()
        requests.flush()
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "controller %s: pass (%s) in %.3fs (sync %.3fs, scan %.3fs, elect %.3fs, rest "
                "%.3fs): %d partitions needed attention, %d leaders written",
                self.broker_id,
                marks,
                time.perf_counter() - started,
                loaded - started,
                planned - loaded,
                elected - planned,
                time.perf_counter() - elected,
                len(attention),
                len(written),
            )

    def _became_ready(
        self, started: float, loaded: float, planned: float, written: list[StateChange]
    ) -> None:
        done = time.perf_counter()
        self.ready_seconds = done - self._started_at
        self.phases = {
            "load": loaded - started,
            "elect": planned - loaded,
            "persist": done - planned,
        }
        self.ready.set()
        self.observers.controller_ready(self.broker_id, self.epoch, self.ready_seconds)
        # After the observers are told: counting a warm hand-over's partitions walks its topics.
        context = self.context
        log.info(
            "controller %s (epoch %s) ready in %.3fs (load %.3fs from %s, elect %.3fs, persist %.3fs): "
            "%d brokers, %d topics, %d partitions, %d states written",
            self.broker_id,
            self.epoch,
            self.ready_seconds,
            self.phases["load"],
            context.loaded_from,
            self.phases["elect"],
            self.phases["persist"],
            len(context.live),
            len(context.topics),
            len(context.parts),
            len(written),
        )

    def _announce_states(self) -> None:
        """Tell observers the states this term loaded that they were not told yet (Kafka's
        LeaderAndIsr/UpdateMetadata to every broker on failover, cut to what they may have missed:
        see :mod:`.announce`), so brokers that restarted learn leaderships nobody had to change."""
        self.observers.partition_states_known(
            states_to_announce(self.observers, self.context.parts, self.broker_id)
        )

    def _tick(self) -> float | None:
        if not self.config.auto_leader_rebalance or not self.ready.is_set():
            return None
        now = self.clock.monotonic()
        if now >= self._next_rebalance:
            self._next_rebalance = now + self.config.leader_imbalance_check_interval
            self._telling(self.preferred.rebalance)()
        return self._next_rebalance

    def _end_term_on(self, exc: BaseException) -> None:
        if isinstance(exc, ControllerFencedError):
            level = (
                logging.INFO if isinstance(exc, ControllerSessionEndedError) else logging.WARNING
            )
            log.log(level, "%s", exc)
            self._fenced = True
            self.store.remove_listener(self._on_session)
            self.watches.cancel()
            self._on_fenced(self.term)
        else:
            # The session ended or was closed: the broker ends the term; stop acting meanwhile.
            self.store.remove_listener(self._on_session)
            self.watches.cancel()

    def __repr__(self) -> str:
        state = "active" if self.active else ("fenced" if self._fenced else "stopped")
        return f"<Controller broker={self.broker_id} epoch={self.epoch} {state}>"

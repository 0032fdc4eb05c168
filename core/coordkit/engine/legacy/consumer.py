"""The legacy ZooKeeper consumer (Kafka 0.8's ``ZookeeperConsumerConnector``) on any store.

Lifecycle:

* :meth:`LegacyConsumer.register` creates the ephemeral ``/consumers/G/ids/C`` with the
  subscription JSON (:meth:`start` does it if needed);
* :meth:`LegacyConsumer.start` watches the group's ids, ``/brokers/ids`` and each subscribed
  topic's ``/brokers/topics/T``, and runs the first rebalance (see
  :mod:`~coordkit.engine.legacy.rebalancer`); later changes of those nodes trigger rebalances on
  the consumer's rebalance thread. Every consumer of the group watches the same nodes, so one
  member joining or leaving wakes all of them: the herd effect the group coordinator removed;
* session loss (the ephemerals are gone): stop fetching and rebalance; before anything else in the
  new session (whichever comes first: this rebalance, or one a watch started, which may run before
  the loss is even reported), the old session's owner nodes are forgotten — never deleted: they may
  be another consumer's by now — and the consumer re-registers (Kafka's ``handleNewSession``);
* :meth:`LegacyConsumer.close` stops fetching, commits (auto-commit), records the release of its
  partitions and ends the session; :meth:`LegacyConsumer.crash` ends the session without either.

The consumer owns the store session it is given (closing or crashing it closes the session). It
counts its store operations (it wraps the session in an
:class:`~coordkit.engine.instrument.InstrumentedStore`), records every rebalance in
:attr:`LegacyConsumer.rebalances` and every ownership change in :attr:`LegacyConsumer.history`
(pass one :class:`OwnershipHistory` to all consumers of a group to check them together).

Consuming is modelled: :meth:`LegacyConsumer.consume` advances a partition's consumed offset as a
stream iterator would, and offsets are committed through the configured offset storage
(``zookeeper``: ``/consumers/G/offsets/T/P``). A partition without a committed offset starts at 0
(``auto.offset.reset=smallest``; there is no log to take the end of).
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable, Mapping

from coordkit.engine.instrument import InstrumentedStore
from coordkit.engine.legacy.config import LegacyConsumerConfig
from coordkit.engine.legacy.errors import LegacyConsumerError, LegacyRebalanceFailedError
from coordkit.engine.legacy.fetching import Fetcher
from coordkit.engine.legacy.history import OwnershipHistory
from coordkit.engine.legacy.ownership import OwnershipClaims
from coordkit.engine.legacy.rebalancer import (
    BROKERS,
    IDS,
    RebalanceLog,
    Rebalancer,
    owners_as_text,
    topic_key,
)
from coordkit.engine.legacy.registration import (
    ConsumerThreadId,
    check_subscription,
    new_consumer_id,
    register,
    registration_for,
    thread_ids_per_topic,
)
from coordkit.engine.strategies import Strategies
from coordkit.errors import CoordkitError
from coordkit.kafka import layout
from coordkit.kafka.model import TopicPartition
from coordkit.store import DataEvent, MetadataStore, SessionState, Watch
from coordkit.strategies.assignment import Assignor
from coordkit.strategies.offsets import OffsetStorage, OffsetStorageFactory
from coordkit.support.clock import Clock, SystemClock

log = logging.getLogger("coordkit.engine.legacy")


class ConsumerState(enum.Enum):
    NEW = "new"
    RUNNING = "running"
    CLOSED = "closed"
    CRASHED = "crashed"


class LegacyConsumer:
    """One legacy consumer of ``group_id``, subscribed to ``topic_count`` (topic → streams).

    :param store: the consumer's own store session (the consumer closes it).
    :param assignor: a registered assignor name (``range``, ``roundrobin``, ``range-ceil``, ...)
        or an :class:`~coordkit.strategies.assignment.Assignor`.
    :param offset_storage: the offset storage factory (by default the registered one that
        ``config.offset_storage`` names).
    :param history: where ownership changes are recorded (share one across a group's consumers).
    """

    def __init__(
        self,
        store: MetadataStore,
        group_id: str,
        topic_count: Mapping[str, int],
        *,
        assignor: str | Assignor = "range",
        config: LegacyConsumerConfig | None = None,
        clock: Clock | None = None,
        history: OwnershipHistory | None = None,
        offset_storage: OffsetStorageFactory | None = None,
    ):
        self.config = config or LegacyConsumerConfig()
        self.clock: Clock = clock or SystemClock()
        self.group_id = group_id
        self.topic_count = check_subscription(topic_count)
        self.consumer_id = new_consumer_id(
            group_id, self.clock, consumer_id=self.config.consumer_id, host=self.config.host
        )
        self.thread_ids: dict[str, tuple[ConsumerThreadId, ...]] = thread_ids_per_topic(
            self.consumer_id, self.topic_count
        )
        if isinstance(assignor, str) or offset_storage is None:
            registered = Strategies.from_plugins(offset_storage=self.config.offset_storage)
            assignor = registered.assignor(assignor) if isinstance(assignor, str) else assignor
            offset_storage = offset_storage or registered.offset_storage
        self.assignor: Assignor = assignor
        self.store = (
            store
            if isinstance(store, InstrumentedStore)
            else InstrumentedStore(store, self.consumer_id)
        )
        self.history = history or OwnershipHistory()
        self.offset_storage: OffsetStorage = offset_storage(
            self.store, **self.config.offset_storage_options
        )
        self.fetcher = Fetcher()
        self.claims = OwnershipClaims(
            self.store, group_id, self.consumer_id, self.history, self.clock
        )
        self._stopping = threading.Event()
        self._rebalancer = Rebalancer(
            store=self.store,
            group_id=group_id,
            consumer_id=self.consumer_id,
            topics=self.topic_count,
            assignor=self.assignor,
            config=self.config,
            clock=self.clock,
            claims=self.claims,
            fetcher=self.fetcher,
            offsets=self.offset_storage,
            stopping=self._stopping,
            observe=self._observe,
            prepare=self._enter_session,
        )
        self.state = ConsumerState.NEW
        self.last_error: BaseException | None = None
        self._cond = threading.Condition()
        self._pending: list[str] = []  # reasons of the rebalance requested and not yet started
        self._busy = False
        self._registered_session: int | None = None
        self._seen: dict[str, object] = {}
        #: Changes heard of a node no rebalance had read yet, while one was under way or
        #: requested: key → (value, reason), compared with that rebalance's read (:meth:`_observe`).
        self._early: dict[str, tuple[object, str]] = {}
        self._watches: list[Watch] = []
        self._thread: threading.Thread | None = None
        self._first_done = threading.Event()
        self._first_error: LegacyRebalanceFailedError | None = None
        self._lifecycle = threading.Lock()

    # -- public state -----------------------------------------------------------------------------

    @property
    def rebalances(self) -> RebalanceLog:
        """Every rebalance so far: ``count``, ``attempts``, ``conflicts``, ``ops``, ``records``."""
        return self._rebalancer.log

    @property
    def threads(self) -> list[str]:
        """This consumer's thread ids, in Kafka's order."""
        unique = {str(t): t for threads in self.thread_ids.values() for t in threads}
        return [str(t) for t in sorted(unique.values(), key=ConsumerThreadId.sort_key)]

    def owned(self) -> dict[TopicPartition, str]:
        """The partitions this consumer fetches and the thread of each (set only once every owner
        node of the rebalance was claimed, cleared before any is released)."""
        return owners_as_text(self.fetcher.owners())

    def positions(self) -> dict[TopicPartition, int]:
        """The consumed offset of every partition being fetched."""
        return self.fetcher.positions()

    @property
    def idle(self) -> bool:
        """No rebalance running or requested."""
        with self._cond:
            return not self._busy and not self._pending

    # -- lifecycle ---------------------------------------------------------------------------------

    def register(self) -> None:
        """Create ``/consumers/G/ids/C`` in the current session (idempotent).

        The owner nodes of an ended session are forgotten first: the registration is what lets
        this consumer delete owner nodes (see :mod:`~coordkit.engine.legacy.ownership`).
        """
        session = self.store.session_id  # read first: a later session re-registers (idempotent)
        self.claims.forget_ended()
        registration = registration_for(self.topic_count, self.clock)
        register(self.store, self.group_id, self.consumer_id, registration)
        self._registered_session = session

    def start(self, *, wait: bool = True, timeout: float | None = None) -> LegacyConsumer:
        """Register (if not yet), watch, and run the first rebalance.

        :param wait: return after the first rebalance (else at once; it runs in the background).
        :raises LegacyRebalanceFailedError: the first rebalance failed every attempt; the consumer
            is closed.
        """
        with self._lifecycle:
            if self.state is not ConsumerState.NEW:
                raise LegacyConsumerError(
                    f"consumer {self.consumer_id!r} of group {self.group_id!r} is {self.state.value}"
                )
            if self._registered_session != self.store.session_id:
                self.register()
            self.state = ConsumerState.RUNNING
            # Requested before watching, so the watches' first deliveries (the current state,
            # which the first rebalance reads anyway) do not queue a second rebalance.
            self._request("start")
            self.store.add_listener(self._on_session)
            self._watch()
            self._thread = threading.Thread(
                target=self._run, name=f"legacy-rebalance-{self.consumer_id}", daemon=True
            )
            self._thread.start()
        if wait:
            if not self._first_done.wait(timeout):
                raise TimeoutError(
                    f"consumer {self.consumer_id!r}: first rebalance still running after {timeout}s"
                )
            if self._first_error is not None:
                self.close()
                raise self._first_error
        return self

    def close(self) -> None:
        """Stop, commit consumed offsets (auto-commit), release the partitions, end the session."""
        self._shutdown(ConsumerState.CLOSED, commit=self.config.auto_commit_enable)

    def crash(self) -> None:
        """End the session abruptly: no commit, no deregistration (the ephemerals just vanish)."""
        self._shutdown(ConsumerState.CRASHED, commit=False)

    def _shutdown(self, final: ConsumerState, *, commit: bool) -> None:
        with self._lifecycle:
            if self.state in (ConsumerState.CLOSED, ConsumerState.CRASHED):
                return
            self.state = final
            self._stopping.set()
            with self._cond:
                self._cond.notify_all()
            for watch in self._watches:
                watch.cancel()
            if final is ConsumerState.CRASHED:
                # Recorded before the session ends, and before any claim in flight can finish.
                self.claims.abandon("crash")
                self.fetcher.stop()
            thread = self._thread
            if thread is not None and thread is not threading.current_thread():
                thread.join(timeout=30)
            if final is ConsumerState.CLOSED:
                stopped = self.fetcher.stop()
                if commit and stopped:
                    try:
                        self._rebalancer.commit(stopped)
                    except CoordkitError as exc:
                        log.warning("consumer %s: final commit failed: %s", self.consumer_id, exc)
                self.claims.abandon("close")
            self.store.remove_listener(self._on_session)
            self.store.close()  # ends the session: registration and owner nodes go with it
            self._first_done.set()

    # -- consuming ---------------------------------------------------------------------------------

    def consume(self, tp: TopicPartition, count: int = 1) -> int:
        """Advance ``tp``'s consumed offset by ``count`` records; returns the new offset.

        :raises LegacyConsumerError: this consumer does not fetch ``tp`` now.
        """
        try:
            return self.fetcher.consume(tp, count)
        except KeyError:
            raise LegacyConsumerError(
                f"consumer {self.consumer_id!r} of group {self.group_id!r} does not own {tp}"
            ) from None

    def commit_offsets(self) -> int:
        """Commit the consumed offsets that moved since the last commit; returns how many."""
        return self._rebalancer.commit()

    # -- watches and session events (store event thread: no store calls here) -------------------

    def _watch(self) -> None:
        self._watches.append(
            self.store.watch_children(
                layout.consumer_ids_path(self.group_id),
                lambda e: self._on_change(IDS, e.children, "group members changed"),
            )
        )
        self._watches.append(
            self.store.watch_children(
                layout.BROKER_IDS, lambda e: self._on_change(BROKERS, e.children, "brokers changed")
            )
        )
        for topic in self.topic_count:
            self._watches.append(
                self.store.watch_data(layout.topic_path(topic), self._topic_callback(topic))
            )

    def _topic_callback(self, topic: str) -> Callable[[DataEvent], None]:
        def changed(event: DataEvent) -> None:
            self._on_change(topic_key(topic), event.data, f"partitions of {topic} changed")

        return changed

    def _observe(self, key: str, value: object) -> None:
        with self._cond:
            self._seen[key] = value
            early = self._early.pop(key, None)
            if early is not None and early[0] != value:
                # Heard before this read was noted: the change may postdate the read (it landed
                # between the store's reply and this call), so look again. At worst — the change
                # predated the read — one rebalance too many.
                self._pending.append(early[1])
                self._cond.notify_all()

    def _on_change(self, key: str, value: object, reason: str) -> None:
        with self._cond:
            if key in self._seen:
                if self._seen[key] == value:
                    return  # what the last rebalance already used
            elif self._busy or self._pending:
                # The rebalance under way or requested has not noted this node yet: it may read
                # it fresher (the usual case: nothing to do) or may already hold an older read,
                # which :meth:`_observe` finds by comparing. Dropping it instead left a consumer
                # holding partitions dealt by a group view without the newcomer, with nothing to
                # make it rebalance again: the others failed every attempt on its owner nodes.
                self._early[key] = (value, reason)
                return
            self._pending.append(reason)
            self._cond.notify_all()

    def _on_session(self, state: SessionState) -> None:
        if state is SessionState.LOST:
            # The owner nodes are gone: another thread may take them now. (A rebalance a watch
            # started may already have claimed anew in the new session: the one requested here
            # releases and claims again.)
            self.fetcher.stop()
            self._request("session lost")
        elif state is SessionState.CONNECTED:
            with self._cond:
                self._cond.notify_all()

    def _request(self, reason: str) -> None:
        with self._cond:
            self._pending.append(reason)
            self._cond.notify_all()

    # -- the rebalance thread ----------------------------------------------------------------------

    def _run(self) -> None:
        next_commit = self.clock.monotonic() + self.config.auto_commit_interval_s
        while True:
            with self._cond:
                while not self._pending and not self._stopping.is_set():
                    remaining = next_commit - self.clock.monotonic()
                    if self.config.auto_commit_enable and remaining <= 0:
                        break
                    self._cond.wait(remaining if self.config.auto_commit_enable else None)
                if self._stopping.is_set():
                    return
                reasons, self._pending = self._pending, []
                # What was heard before this rebalance started, it reads fresher.
                self._early.clear()
                self._busy = True
            try:
                if reasons:
                    self._rebalance(reasons)
                elif self.config.auto_commit_enable:
                    next_commit = self.clock.monotonic() + self.config.auto_commit_interval_s
                    self._rebalancer.commit()
            except CoordkitError as exc:
                self.last_error = exc
                log.warning("consumer %s: %s", self.consumer_id, exc)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
                self._first_done.set()

    def _enter_session(self) -> None:
        """Before anything else in a new session: forget the ended session's owner nodes, then
        re-register (Kafka's ``handleNewSession``: ``resetState``, ``registerConsumerInZK``).
        Idempotent; run before every rebalance attempt."""
        if self._registered_session != self.store.session_id:
            self.register()  # forgets the ended session's owner nodes first
        else:
            self.claims.forget_ended()

    def _rebalance(self, reasons: list[str]) -> None:
        if not self._await_connected():
            return
        try:
            self._enter_session()
        except CoordkitError as exc:  # retried: a rebalance needs the registration first
            self.last_error = exc
            log.warning("consumer %s: registration failed: %s", self.consumer_id, exc)
            self._stopping.wait(self.config.rebalance_backoff_s)
            self._request("re-registration")
            return
        try:
            self._rebalancer.synced_rebalance(reasons)
        except LegacyRebalanceFailedError as exc:
            self.last_error = exc
            if not self._first_done.is_set():
                self._first_error = exc
            log.error("%s", exc)

    def _await_connected(self) -> bool:
        with self._cond:
            while self.store.state is not SessionState.CONNECTED:
                if self._stopping.is_set() or self.store.state is SessionState.CLOSED:
                    return False
                self._cond.wait(0.1)
        return True

    def __repr__(self) -> str:
        return (
            f"<LegacyConsumer {self.consumer_id} group={self.group_id} {self.state.value} "
            f"owns={len(self.fetcher.owners())}>"
        )

"""A broker: its registration under ``/brokers/ids``, its controller candidacy, and (when it
wins) its controller.

Liveness is the ephemeral ``/brokers/ids/N`` node of the broker's store session. Registration
fails with :class:`BrokerIdInUseError` when another live session holds the id; after the broker's
own session is lost it registers again on the new session, replacing a node it finds from one of
its own earlier sessions (a store may not have reaped it yet).
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from coordkit.engine import isr_notifications, states
from coordkit.engine.cluster_id import get_or_create_cluster_id
from coordkit.engine.config import EngineConfig
from coordkit.engine.controller import Controller
from coordkit.engine.controller.broker_requests import NO_CHANNEL, BrokerRequestChannel
from coordkit.engine.controller.shutdown import ControllerClient
from coordkit.engine.controllership import UnreadableControllerNodeError, read_controller
from coordkit.engine.errors import BrokerIdInUseError, ControllerUnavailableError, EngineError
from coordkit.engine.events import Observers, StateChange
from coordkit.engine.groups.coordinator import GroupCoordinator
from coordkit.engine.groups.events import GroupObserver, GroupObservers
from coordkit.engine.replication import IsrProposal
from coordkit.engine.states import TP, LeaderIsr
from coordkit.engine.strategies import Strategies
from coordkit.errors import (
    BadVersionError,
    ConnectionLossError,
    LayoutError,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
    StoreClosedError,
    StoreError,
)
from coordkit.kafka import layout
from coordkit.kafka.model import BrokerInfo
from coordkit.store import Create, Delete, MetadataStore, Op, SessionState, SetData
from coordkit.store.watches import EventThread
from coordkit.strategies.elections import ControllerCandidate, ControllerTerm
from coordkit.support.clock import Clock, SystemClock

if TYPE_CHECKING:
    from coordkit.engine.network import Network

log = logging.getLogger("coordkit.engine.broker")

DEFAULT_PORT = 9092
#: The broker registration Kafka 3.9 writes: endpoints (2), rack (3), the listeners' security
#: protocols (4), supported features (5).
REGISTRATION_VERSION = 5
#: ISR changes per multi a leader writes (each multi adds one notification node).
ISR_WRITE_BATCH = 500


class Broker:
    """One broker on its own store session.

    :param broker_id: Kafka's ``broker.id``.
    :param store: the broker's store session (closed by :meth:`stop` / :meth:`kill`).
    :param rack: ``broker.rack``, used by rack-aware replica placement.
    :param network: the in-process registry through which brokers reach the controller (for
        controlled shutdown); ``None`` for a broker on its own.
    :param group_observers: told about the consumer groups this broker coordinates.
    :param strategies: the strategies it runs with (by default the ones ``config`` names, from the
        registered plugins).
    :param broker_requests: how its controller's requests reach brokers of other processes
        (:mod:`coordkit.engine.controller.broker_requests`); by default none are sent.
    :param controller_client: how it asks a controller of another process for a controlled
        shutdown; without one, only an in-process controller is asked.
    """

    def __init__(
        self,
        broker_id: int,
        store: MetadataStore,
        *,
        host: str = "localhost",
        port: int | None = None,
        rack: str | None = None,
        jmx_port: int = -1,
        config: EngineConfig | None = None,
        clock: Clock | None = None,
        observers: Observers | None = None,
        network: Network[Broker] | None = None,
        group_observers: GroupObserver | None = None,
        strategies: Strategies | None = None,
        broker_requests: BrokerRequestChannel | None = None,
        controller_client: ControllerClient | None = None,
    ):
        if not isinstance(broker_id, int) or isinstance(broker_id, bool) or broker_id < 0:
            raise ValueError(f"broker id must be a non-negative integer, got {broker_id!r}")
        self.broker_id = broker_id
        self.store = store
        self.host = host
        self.port = DEFAULT_PORT + broker_id if port is None else port
        self.rack = rack
        self.jmx_port = jmx_port
        self.config = config or EngineConfig()
        self.strategies = strategies or Strategies.from_plugins(self.config)
        self.clock: Clock = clock or SystemClock()
        self.observers = observers or Observers(events=self.strategies.events)
        self.network = network
        #: How this broker's controller reaches brokers outside the process (none by default).
        self.broker_requests = broker_requests or NO_CHANNEL
        #: How this broker reaches a controller of another process (controlled shutdown).
        self.controller_client = controller_client
        self.controller: Controller | None = None
        self._lock = threading.RLock()
        self._worker = EventThread(f"coordkit-broker-{broker_id}")
        self._sessions: list[int] = []
        self._registered_session: int | None = None
        self._candidate: ControllerCandidate | None = None
        self._started = False
        self._closed = False
        self._lost = False
        self.registrations = 0
        #: The czxid of the current registration (Kafka's broker epoch); -1 before the first.
        self.broker_epoch = -1
        #: ``/cluster/id``, read (or made) when the broker starts, as Kafka's broker does.
        self.cluster_id: str | None = None
        #: The group coordinator for the offsets-topic partitions this broker leads.
        self.group_coordinator = GroupCoordinator(
            broker_id,
            store,
            config=self.config,
            clock=self.clock,
            observers=group_observers or GroupObservers(events=self.strategies.events),
            strategies=self.strategies,
        )

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> Broker:
        """Register and enter the controller election.

        :raises BrokerIdInUseError: another live session holds this broker id.
        :raises LayoutError: ``/cluster/id`` holds something else than a cluster id.
        """
        with self._lock:
            if self._started:
                return self
            self._started = True
        for root in (*layout.PERSISTENT_ROOTS, isr_notifications.ISR_CHANGE_NOTIFICATION):
            self.store.ensure_path(root)
        self.cluster_id = get_or_create_cluster_id(self.store)
        self.store.add_listener(self._on_session)
        self._register()
        # Before the candidacy, so that no offsets-partition leadership event is missed.
        self.observers.add(self.group_coordinator)
        self.group_coordinator.start()
        self._candidate = self.strategies.controller_election.candidate(
            self.store, self.broker_id, self.clock, self._elected, self._deposed
        )
        if self.network is not None:
            self.network.add(self)
        self._candidate.start()
        return self

    @property
    def alive(self) -> bool:
        return self._started and not self._closed

    @property
    def info(self) -> BrokerInfo:
        """The registration, as Kafka 3.9's brokers write it (version 5)."""
        # ``endpoints`` goes through attrs' ``tuple`` converter, whose type mypy cannot infer.
        endpoints: Any = (layout.plaintext_endpoint(self.host, self.port),)
        return BrokerInfo(
            host=self.host,
            port=self.port,
            timestamp=str(self.clock.wall_ms()),
            jmx_port=self.jmx_port,
            version=REGISTRATION_VERSION,
            rack=self.rack,
            endpoints=endpoints,
        )

    def stop(self, *, controlled: bool = True) -> list[TP]:
        """Stop the broker, by default after a controlled shutdown; returns the partitions it
        still led when it left."""
        remaining: list[TP] = []
        if controlled and self.alive:
            try:
                remaining = self.controlled_shutdown()
            except (EngineError, StoreError) as exc:
                # Kafka gives up after its retries and shuts down anyway: so does this broker.
                log.warning("broker %s: controlled shutdown failed: %s", self.broker_id, exc)
        self._shutdown(graceful=True, controlled=controlled)
        return remaining

    def kill(self) -> None:
        """Stop as a crash would: the session ends at once, nothing is handed over."""
        self._shutdown(graceful=False, controlled=False)

    def _shutdown(self, *, graceful: bool, controlled: bool) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        # From here the broker serves nothing (observers see it down before anyone reacts).
        self.observers.broker_stopped(self.broker_id, controlled)
        self.observers.remove(self.group_coordinator)
        self.group_coordinator.close()
        if self.network is not None:
            self.network.remove(self)
        if not graceful:
            # End the session first so that nothing below reaches the store.
            self.store.close()
        if self._candidate is not None:
            try:
                self._candidate.close()
            except StoreError:
                pass
        self._end_term()
        self.store.remove_listener(self._on_session)
        if graceful:
            self.store.close()
        self._worker.stop()

    # -- registration --------------------------------------------------------------------------

    def _register(self) -> None:
        path = layout.broker_path(self.broker_id)
        session = self.store.session_id
        if session not in self._sessions:
            self._sessions.append(session)
        info = self.info
        data = layout.BROKER.encode(info)
        for _ in range(100):
            try:
                self.store.create(path, data, ephemeral=True)
                stat = self.store.exists(path)
                if stat is None or stat.ephemeral_owner != session:
                    continue  # gone or replaced meanwhile: register again
                break
            except NodeExistsError:
                stat = self.store.exists(path)
                if stat is None:
                    continue  # reaped meanwhile
                if stat.ephemeral_owner == session:
                    break  # already ours (a retried create)
                if stat.ephemeral_owner in self._sessions:
                    # Ours from a session that is over: replace it.
                    try:
                        self.store.commit([Delete(path, stat.version)])
                    except (NoNodeError, BadVersionError):
                        pass
                    continue
                if not stat.ephemeral:
                    raise BrokerIdInUseError(
                        f"broker id {self.broker_id}: {path} is a persistent node (version "
                        f"{stat.version}), not a broker's registration: no session owns it and "
                        "none will remove it; delete it, or give this broker another broker.id"
                    ) from None
                raise BrokerIdInUseError(
                    f"broker id {self.broker_id} is already registered at {path} by live session "
                    f"{stat.ephemeral_owner:#x} (this broker's session is {session:#x}); every "
                    "broker needs its own broker.id"
                ) from None
        else:
            raise EngineError(f"broker {self.broker_id}: could not register at {path}")
        self._registered_session = session
        # Kafka's broker epoch (KIP-380): the zxid that created the registration, so that a
        # controller's request meant for an earlier registration of this id is told apart.
        self.broker_epoch = stat.czxid
        self.registrations += 1
        log.info("broker %s registered (session %#x)", self.broker_id, session)
        self.observers.broker_registered(self.broker_id, info, session)

    def _on_session(self, state: SessionState) -> None:
        if state is SessionState.LOST:
            self._lost = True
            self._registered_session = None
        elif state is SessionState.CONNECTED and self._lost:
            self._lost = False
            self._worker.post(self._reregister)

    def _reregister(self) -> None:
        if self._closed:
            return
        for _ in range(50):
            try:
                self._register()
                return
            except ConnectionLossError:
                time.sleep(0.1)
            except (SessionExpiredError, StoreClosedError):
                return
            except BrokerIdInUseError:
                log.exception("broker %s cannot register again", self.broker_id)
                return

    @property
    def registered(self) -> bool:
        return self._registered_session is not None and self._registered_session == (
            self.store.session_id
        )

    # -- controllership ------------------------------------------------------------------------

    def _elected(self, term: ControllerTerm) -> None:
        with self._lock:
            if self._closed:
                return
            previous = self.controller
            controller = Controller(
                self.store,
                term,
                config=self.config,
                clock=self.clock,
                observers=self.observers,
                on_fenced=self._fenced,
                strategies=self.strategies,
                broker_requests=self.broker_requests,
            )
            self.controller = controller
        if previous is not None:
            previous.stop()
        log.info("broker %s is controller (epoch %s)", self.broker_id, term.epoch)
        self.observers.controller_changed(self.broker_id, term.epoch)
        controller.start()

    def _deposed(self, term: ControllerTerm) -> None:
        if self._end_term(term):
            log.info("broker %s is no longer controller (epoch %s)", self.broker_id, term.epoch)
            self.observers.controller_changed(None, term.epoch)

    def _end_term(self, term: ControllerTerm | None = None) -> bool:
        with self._lock:
            controller = self.controller
            if controller is None or (term is not None and controller.term != term):
                return False
            self.controller = None
        controller.stop()
        return True

    def _fenced(self, term: ControllerTerm) -> None:
        candidate = self._candidate
        if candidate is not None and not self._closed:
            self._worker.post(candidate.resign, term)

    @property
    def is_controller(self) -> bool:
        controller = self.controller
        return controller is not None and controller.active

    # -- controlled shutdown -------------------------------------------------------------------

    def controlled_shutdown(self, timeout: float | None = None) -> list[TP]:
        """Ask the controller to move leadership away; returns partitions still led here.

        :raises ControllerUnavailableError: no controller answered in time (or the controller is
            not a broker of this process's network, or ``/controller`` is unreadable).
        """
        limit = self.config.controlled_shutdown_timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            try:
                current = read_controller(self.store)
            except UnreadableControllerNodeError as exc:
                raise ControllerUnavailableError(f"broker {self.broker_id}: {exc}") from None
            holder = None
            if current is not None and self.network is not None:
                holder = self.network.get(current[0].broker_id)
            if current is not None and self.network is not None and holder is None:
                if self.controller_client is None:
                    raise ControllerUnavailableError(
                        f"broker {self.broker_id}: controller {current[0].broker_id} is not a "
                        "broker of this process, and this broker has no way to reach it"
                    )
                # Kafka's ControlledShutdown request, to a controller in another process.
                try:
                    return self.controller_client.controlled_shutdown(
                        current[0].broker_id, self.broker_id, self.broker_epoch,
                        max(0.0, deadline - time.monotonic()),
                    )  # fmt: skip
                except EngineError as exc:  # moved, or not answering: ask again (Kafka retries)
                    last_error = exc
                    time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
                    continue
            controller = holder.controller if holder is not None else None
            if controller is None or not controller.ready.wait(
                timeout=max(0.0, deadline - time.monotonic())
            ):
                time.sleep(0.02)
                continue
            future = controller.controlled_shutdown(self.broker_id)
            try:
                return future.result(timeout=max(0.0, deadline - time.monotonic()))
            except concurrent.futures.TimeoutError:
                break
            except EngineError as exc:  # the controller moved meanwhile: ask the next one
                last_error = exc
                time.sleep(0.02)
        raise ControllerUnavailableError(
            f"broker {self.broker_id}: controlled shutdown not acknowledged within {limit}s"
            + (f" ({last_error})" if last_error else "")
        )

    # -- partition leader duties ---------------------------------------------------------------

    def alter_isr(self, proposals: Sequence[IsrProposal]) -> list[StateChange]:
        """As the partitions' leader, write ISR changes (Kafka's AlterIsr, ZooKeeper mode): each
        state write is conditional on the node's version and made only while the node still shows
        this broker leading at the proposal's leader epoch; each multi also creates an ISR change
        notification for the controller. The last ISR member is never removed.

        :returns: the states written (observers are told as well).
        """
        out: list[StateChange] = []
        pending = [p for p in proposals if p.leader == self.broker_id]
        for _attempt in range(5):
            if not pending:
                break
            paths = [states.state_path(p.tp) for p in pending]
            planned: list[tuple[IsrProposal, LeaderIsr, LeaderIsr, int]] = []
            for proposal, path, result in zip(
                pending, paths, self.store.get_many(paths), strict=True
            ):
                if isinstance(result, StoreError):
                    continue
                data, stat = result
                try:
                    current = states.decode_state(path, data, stat.version)
                except LayoutError:
                    continue
                if (
                    current.leader != self.broker_id
                    or current.leader_epoch != proposal.leader_epoch
                ):
                    continue  # leadership moved meanwhile: not this broker's to change
                isr = tuple(r for r in current.isr if r not in proposal.remove)
                isr += tuple(r for r in proposal.add if r not in isr)
                if not isr or isr == current.isr:
                    continue
                updated = LeaderIsr(
                    current.leader, current.leader_epoch, isr, current.controller_epoch
                )
                planned.append((proposal, current, updated, stat.version))
            pending = []
            for start in range(0, len(planned), ISR_WRITE_BATCH):
                batch = planned[start : start + ISR_WRITE_BATCH]
                written, retry = self._write_isr_batch(batch)
                out.extend(written)
                pending.extend(retry)
        if out:
            self.observers.partition_states_changed(out)
        return out

    def _write_isr_batch(
        self, batch: list[tuple[IsrProposal, LeaderIsr, LeaderIsr, int]]
    ) -> tuple[list[StateChange], list[IsrProposal]]:
        """Commit one multi of ISR writes; a write whose node moved is dropped from the multi and
        its proposal returned to be decided again from a fresh read."""
        retry: list[IsrProposal] = []
        while batch:
            ops: list[Op] = [
                SetData(states.state_path(p.tp), states.encode(updated), version)
                for p, _current, updated, version in batch
            ]
            ops.append(
                Create(
                    isr_notifications.notification_prefix(),
                    isr_notifications.encode([p.tp for p, *_ in batch]),
                    sequential=True,
                )
            )
            try:
                results = self.store.commit(ops)
            except (BadVersionError, NoNodeError) as exc:
                index = exc.op_index
                if index is None:
                    raise
                if index == len(batch):  # no notification folder yet
                    self.store.ensure_path(isr_notifications.ISR_CHANGE_NOTIFICATION)
                    continue
                retry.append(batch.pop(index)[0])
                continue
            changes: list[StateChange] = []
            for (proposal, current, updated, _version), result in zip(batch, results, strict=False):
                updated.zk_version = result.version
                changes.append(StateChange(proposal.tp, current, updated, None, self.broker_id))
            return changes, retry
        return [], retry

    def expand_isr(self, tp: TP, replica: int) -> LeaderIsr | None:
        """As the partition's leader, add a caught-up follower to the ISR (one
        :meth:`alter_isr` item at the leader epoch in the store); ``None`` if this broker does
        not lead the partition."""
        path = states.state_path(tp)
        try:
            data, stat = self.store.get(path)
        except NoNodeError:
            return None
        current = states.decode_state(path, data, stat.version)
        if current.leader != self.broker_id:
            return None
        if replica in current.isr:
            return current
        written = self.alter_isr(
            [IsrProposal(tp, self.broker_id, current.leader_epoch, add=(replica,))]
        )
        return written[0].current if written else None

    def __repr__(self) -> str:
        role = " controller" if self.is_controller else ""
        state = "alive" if self.alive else "stopped"
        return f"<Broker {self.broker_id} {state}{role}>"

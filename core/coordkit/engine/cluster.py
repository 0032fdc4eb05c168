"""N brokers in one process on one store: what ``coordkit cluster``, the tests, the benchmarks and
the lab run.

Each broker gets its own store session (so each has its own ephemeral registration and may be
killed, expired or restarted on its own), wrapped to count store operations and, optionally, to
record the history checked for split brain. An extra admin session creates topics and reads the
cluster back (:meth:`Cluster.view`) the way ``coordkit tree`` would.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

import attrs

from coordkit.engine import states
from coordkit.engine.broker import Broker
from coordkit.engine.config import EngineConfig
from coordkit.engine.controllership import (
    UnreadableControllerNodeError,
    check_controller_nodes,
)
from coordkit.engine.coordinator_choice import (
    GroupCoordinatorMismatchError,
    claim_group_coordinator,
)
from coordkit.engine.errors import EngineError
from coordkit.engine.events import EngineObserver, Observers
from coordkit.engine.groups.config import ConsumerConfig
from coordkit.engine.groups.consumer import Consumer, ConsumerState
from coordkit.engine.groups.events import GroupObserver, GroupObservers
from coordkit.engine.groups.history import GroupHistory
from coordkit.engine.groups.hosting import offsets_partition_for
from coordkit.engine.groups.protocol import GroupDescription, GroupState
from coordkit.engine.history import HistoryRecorder
from coordkit.engine.instrument import InstrumentedStore, OpCounts
from coordkit.engine.invariants import Convergence, Violation, check_cluster
from coordkit.engine.network import Network
from coordkit.engine.replica_fetcher import ReplicaFetcher
from coordkit.engine.replication import IsrProposal, ReplicationModel
from coordkit.engine.settlement import Settlement, settlement
from coordkit.engine.snapshot import ClusterView, read_view, registered_brokers
from coordkit.engine.states import TP
from coordkit.engine.strategies import Strategies, open_store_session
from coordkit.engine.topics import TopicAdmin
from coordkit.errors import ConnectionLossError, LayoutError, NoNodeError, StoreError
from coordkit.kafka import layout
from coordkit.kafka.coordinators import OFFSETS_TOPIC, offsets_topic_partitions
from coordkit.kafka.model import TopicAssignment
from coordkit.store import MetadataStore, SessionState
from coordkit.store.urls import StoreURL
from coordkit.support.clock import Clock, SystemClock

log = logging.getLogger("coordkit.engine.cluster")

StoreOpener = Callable[[], MetadataStore]


def store_opener(url: str, **options: object) -> StoreOpener:
    """Sessions on ``url``; a bare ``memory://`` is refused (each session would get its own tree)."""
    parsed = StoreURL.parse(url)
    if parsed.scheme == "memory" and not (parsed.host_string or parsed.path.strip("/")):
        raise EngineError(
            f"{parsed.redacted()}: brokers need one shared tree; name it, e.g. memory://cluster"
        )
    return lambda: open_store_session(url, **options)


class Cluster:
    """Brokers ``broker_ids`` on sessions from ``open_store``.

    :param open_store: opens a new session on the cluster's store (or a store URL).
    :param racks: broker id → rack, for rack-aware placement.
    :param observers: extra in-process observers of engine events.
    :param record_history: keep the history of elections and state writes, and of consumer
        groups (:attr:`group_history`), for the checks.
    :param group_observers: in-process observers of consumer groups.
    :param seed: seeds topic placement so runs repeat.
    :param strategies: the strategies every broker and consumer runs with (by default the ones
        ``config`` names, from the registered plugins).
    """

    def __init__(
        self,
        open_store: StoreOpener | str,
        broker_ids: Iterable[int] | int = 3,
        *,
        racks: Mapping[int, str] | None = None,
        config: EngineConfig | None = None,
        clock: Clock | None = None,
        observers: Iterable[EngineObserver] = (),
        record_history: bool = True,
        seed: int | None = None,
        group_observers: Iterable[GroupObserver] = (),
        strategies: Strategies | None = None,
    ):
        self._open = store_opener(open_store) if isinstance(open_store, str) else open_store
        ids = range(broker_ids) if isinstance(broker_ids, int) else broker_ids
        self.broker_ids: list[int] = sorted(set(ids))
        self.racks = dict(racks or {})
        self.config = config or EngineConfig()
        self.strategies = strategies or Strategies.from_plugins(self.config)
        self.clock: Clock = clock or SystemClock()
        self.replication = ReplicationModel(self.clock)
        self.observers = Observers(self.replication, *observers, events=self.strategies.events)
        self.history = HistoryRecorder() if record_history else None
        self.group_history = GroupHistory() if record_history else None
        recorders = [self.group_history] if self.group_history is not None else []
        self.group_observers = GroupObservers(
            *recorders, *group_observers, events=self.strategies.events
        )
        self.consumers: list[Consumer] = []
        self.network: Network[Broker] = Network()
        self.brokers: dict[int, Broker] = {}
        #: Each running broker's replica fetcher (when ``config.replication`` is on).
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._retired = OpCounts()
        self._lock = threading.Lock()
        self._admin_store: MetadataStore | None = None
        self._admin: TopicAdmin | None = None
        self._rng = random.Random(seed)

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> Cluster:
        """Start every broker.

        :raises UnreadableControllerNodeError: ``/controller`` or ``/controller_epoch`` holds what
            no election can use (nothing is written then: no broker could become controller).
        :raises GroupCoordinatorMismatchError: the cluster's brokers place group coordinators by
            another strategy (``/coordkit/group_coordinator``).
        """
        self._admin_store = self._open()
        try:
            check_controller_nodes(self._admin_store)
            claim_group_coordinator(self._admin_store, self.strategies.group_coordinator.name)
        except (UnreadableControllerNodeError, GroupCoordinatorMismatchError):
            self._admin_store.close()
            raise
        for root in layout.PERSISTENT_ROOTS:
            self._admin_store.ensure_path(root)
        self._admin = TopicAdmin(
            self._admin_store, rng=self._rng, placement=self.strategies.placement
        )
        for broker_id in self.broker_ids:
            self.start_broker(broker_id)
        return self

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        # Consumers first, without a goodbye: leaving one by one would only start rebalances.
        for consumer in self.consumers:
            consumer.crash()
        for fetcher in list(self.fetchers.values()):
            fetcher.stop()
        self.fetchers.clear()
        running = [b for b in self.brokers.values() if b.alive]
        for broker in running:
            self._retire(broker)
        # End every session first, so that no broker wins an election (and loads the whole
        # cluster) just because the others are going.
        for broker in running:
            broker.store.close()
        for broker in running:
            broker.kill()
        if self._admin_store is not None and self._admin_store.state is not SessionState.CLOSED:
            self._admin_store.close()

    @property
    def admin(self) -> TopicAdmin:
        if self._admin is None:
            raise EngineError("the cluster is not started")
        return self._admin

    @property
    def admin_store(self) -> MetadataStore:
        if self._admin_store is None:
            raise EngineError("the cluster is not started")
        return self._admin_store

    def open_session(self) -> MetadataStore:
        """Another session on the cluster's store (not counted, not recorded)."""
        return self._open()

    # -- brokers -------------------------------------------------------------------------------

    def start_broker(self, broker_id: int) -> Broker:
        """Start (or restart) broker ``broker_id`` on a new session."""
        with self._lock:
            old = self.brokers.get(broker_id)
            if old is not None and old.alive:
                raise EngineError(f"broker {broker_id} is already running")
        store = InstrumentedStore(self._open(), f"broker-{broker_id}")
        if self.history is not None:
            self.history.observe(store, broker_id)
        broker = self.new_broker(broker_id, store)
        try:
            broker.start()
        except Exception:
            store.close()
            raise
        with self._lock:
            if broker_id not in self.broker_ids:
                self.broker_ids.append(broker_id)
                self.broker_ids.sort()
            self.brokers[broker_id] = broker
        if self.config.replication:
            self.fetchers[broker_id] = ReplicaFetcher(broker, self.replication, self.config).start()
        return broker

    def new_broker(self, broker_id: int, store: MetadataStore) -> Broker:
        """The (not yet started) broker ``broker_id`` on session ``store``; a subclass that
        starts brokers of its own kind (``coordkit serve``'s, with real listeners) overrides it."""
        return Broker(
            broker_id,
            store,
            rack=self.racks.get(broker_id),
            config=self.config,
            clock=self.clock,
            observers=self.observers,
            network=self.network,
            group_observers=self.group_observers,
            strategies=self.strategies,
        )

    def _stop_fetcher(self, broker_id: int) -> None:
        fetcher = self.fetchers.pop(broker_id, None)
        if fetcher is not None:
            fetcher.stop()

    restart = start_broker

    def broker(self, broker_id: int) -> Broker:
        try:
            return self.brokers[broker_id]
        except KeyError:
            raise EngineError(
                f"no broker {broker_id} in this cluster (brokers: {self.broker_ids})"
            ) from None

    def live_brokers(self) -> list[int]:
        return sorted(b for b, broker in self.brokers.items() if broker.alive)

    def kill(self, broker_id: int) -> None:
        """Crash a broker: its session ends without a controlled shutdown."""
        broker = self.broker(broker_id)
        self._stop_fetcher(broker_id)
        self._retire(broker)
        broker.kill()

    def stop(self, broker_id: int, *, controlled: bool = True) -> list[TP]:
        """Stop a broker (after a controlled shutdown unless ``controlled=False``)."""
        broker = self.broker(broker_id)
        remaining = broker.stop(controlled=controlled)
        self._stop_fetcher(broker_id)
        self._retire(broker)
        return remaining

    def raw_store(self, broker_id: int) -> MetadataStore:
        """The broker's real store client (what a test backend expires or disconnects)."""
        store = self.broker(broker_id).store
        return store.inner if isinstance(store, InstrumentedStore) else store

    def _retire(self, broker: Broker) -> None:
        if isinstance(broker.store, InstrumentedStore):
            with self._lock:
                self._retired = self._retired + broker.store.counts

    # -- controller ----------------------------------------------------------------------------

    def controller_broker(self) -> Broker | None:
        """The in-process broker holding an active controller term, if any."""
        for broker in self.brokers.values():
            if broker.alive and broker.is_controller:
                return broker
        return None

    def settled(self) -> Settlement:
        """Whether the controller named in the store runs here at the stored epoch, has loaded,
        knows every registered broker and every topic (or ignores it as unreadable), and has
        nothing left to do; and every live broker is registered.

        Never raises on what the store holds: the result is falsy with the reason it waits for
        (an unreadable ``/controller`` or ``/controller_epoch`` blocks every election until an
        operator clears it: :attr:`Settlement.blocked_by`), and lists the unreadable nodes the
        controller is ignoring.
        """
        return settlement(
            self.admin_store, self.brokers, self.live_brokers(), self._registered_brokers
        )

    def converged(self) -> Convergence:
        """Check every invariant of a converged cluster against the store (truthy when none is
        broken; see :mod:`coordkit.engine.invariants`), and that every broker running in this
        process is registered."""
        result = check_cluster(
            self.admin_store, unclean_default=self.config.offline_election == "offline-unclean"
        )
        registered = set(self._registered_brokers())
        missing = tuple(
            Violation(layout.broker_path(b), "broker runs here but is not registered")
            for b in self.live_brokers()
            if b not in registered
        )
        return attrs.evolve(result, violations=result.violations + missing) if missing else result

    def wait_converged(self, timeout: float = 30.0) -> Convergence:
        """Wait until :meth:`converged`; raises :class:`EngineError` listing what is still
        broken after ``timeout`` seconds. A store that is not reachable yet (a restarted server,
        a cut connection coming back) is not converged yet: it is asked again until then."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                result: Convergence | ConnectionLossError = self.converged()
            except ConnectionLossError as exc:
                result = exc
            if isinstance(result, Convergence) and result:
                return result
            if time.monotonic() > deadline:
                raise EngineError(f"cluster did not converge within {timeout}s: {result}")
            time.sleep(0.05)

    def wait_settled(self, timeout: float = 30.0) -> ClusterView:
        """Wait until :meth:`settled`; returns the view then.

        :raises UnreadableControllerNodeError: a controller node was still unreadable after
            ``timeout`` seconds (its message says how to clear it).
        :raises EngineError: not settled within ``timeout`` for another reason.
        """
        deadline = time.monotonic() + timeout
        while not (status := self.settled()):
            if time.monotonic() > deadline:
                if status.blocked_by is not None:
                    raise status.blocked_by
                raise EngineError(
                    f"cluster did not settle within {timeout}s: {status.waiting_for}; {self.view()}"
                )
            time.sleep(0.01)
        return self.view()

    # -- topics --------------------------------------------------------------------------------

    def create_topic(
        self,
        topic: str,
        partitions: int,
        replication_factor: int,
        *,
        config: Mapping[str, str] | None = None,
        assignment: Mapping[int, Sequence[int]] | None = None,
        if_not_exists: bool = False,
    ) -> TopicAssignment:
        """Create a topic (see :meth:`TopicAdmin.create_topic`)."""
        return self.admin.create_topic(
            topic,
            partitions,
            replication_factor,
            config=config,
            assignment=assignment,
            if_not_exists=if_not_exists,
        )

    def delete_topic(self, topic: str) -> None:
        self.admin.delete_topic(topic)

    def add_partitions(self, topic: str, total: int) -> TopicAssignment:
        return self.admin.add_partitions(topic, total)

    # -- reading back --------------------------------------------------------------------------

    def _registered_brokers(self) -> list[int]:
        return registered_brokers(self.admin_store)

    def view(self) -> ClusterView:
        """Controller, epoch, brokers and every partition state, read from the store."""
        return read_view(self.admin_store)

    # -- consumer groups -----------------------------------------------------------------------

    def start_consumer(
        self,
        group_id: str,
        topics: Iterable[str],
        *,
        assignors: Sequence[str] = ("range",),
        group_instance_id: str | None = None,
        session_timeout: float = 10.0,
        heartbeat_interval: float = 3.0,
        rebalance_timeout: float = 60.0,
        client_id: str | None = None,
        metadata_max_age: float = 300.0,
    ) -> Consumer:
        """Start a consumer of ``group_id`` subscribed to ``topics`` (returns at once; it finds
        the coordinator and joins in the background). Times are in seconds.

        :param assignors: ``partition.assignment.strategy``, most preferred first; the consumer
            rebalances cooperatively when every one of them supports it.
        :param group_instance_id: makes it a static member.
        :param metadata_max_age: ``metadata.max.age.ms``: how often a group leader re-reads its
            topics' partition counts besides watching them.
        :raises UnknownNameError: an assignor is not registered.
        :raises ValueError: bad settings (e.g. heartbeat interval not below the session timeout).
        """
        config = ConsumerConfig(
            group_id=group_id,
            topics=tuple(topics),
            assignors=tuple(assignors),
            group_instance_id=group_instance_id,
            session_timeout=session_timeout,
            heartbeat_interval=heartbeat_interval,
            rebalance_timeout=rebalance_timeout,
            client_id=client_id or "",
            metadata_max_age=metadata_max_age,
        )
        consumer = Consumer(
            config,
            network=self.network,
            replication=self.replication,
            clock=self.clock,
            observers=self.group_observers,
            strategies=self.strategies,
        )
        with self._lock:
            self.consumers.append(consumer)
        return consumer.start()

    def running_consumers(self, group_id: str | None = None) -> list[Consumer]:
        return [
            c for c in self.consumers if c.running and (group_id is None or c.group_id == group_id)
        ]

    def group_coordinator(self, group_id: str) -> int | None:
        """The live broker leading ``group_id``'s offsets-topic partition, read from the store
        (``None`` before the offsets topic exists or while the partition has no live leader)."""
        count, _ = offsets_topic_partitions(
            self.admin_store, self.config.offsets_topic_num_partitions
        )
        tp = (
            OFFSETS_TOPIC,
            offsets_partition_for(group_id, self.strategies.group_coordinator, count),
        )
        path = states.state_path(tp)
        try:
            data, stat = self.admin_store.get(path)
        except NoNodeError:
            return None
        try:
            leader = states.decode_state(path, data, stat.version).leader
        except LayoutError:
            return None
        broker = self.brokers.get(leader)
        return leader if broker is not None and broker.alive else None

    def describe_group(self, group_id: str) -> GroupDescription:
        """The group as its coordinator holds it (state ``Dead`` with ``coordinator=None`` when
        no coordinator is available or the group does not exist)."""
        coordinator = self.group_coordinator(group_id)
        broker = self.brokers.get(coordinator) if coordinator is not None else None
        if broker is None or not broker.alive:
            return GroupDescription(group_id, GroupState.DEAD)
        return broker.group_coordinator.describe_group(group_id)

    def group_stable(self, group_id: str) -> bool:
        """Whether ``group_id`` is Stable at its coordinator with exactly this process's running
        consumers as members, each holding the assignment of the current generation."""
        consumers = self.running_consumers(group_id)
        described = self.describe_group(group_id)
        if described.state is not GroupState.STABLE or len(described.members) != len(consumers):
            return False
        return all(
            c.state is ConsumerState.STABLE and c.generation == described.generation
            for c in consumers
        )

    def wait_group_stable(self, group_id: str, timeout: float = 30.0) -> GroupDescription:
        """Wait until :meth:`group_stable`; returns the group's description.

        :raises EngineError: not stable within ``timeout`` (naming a failed consumer's error).
        """
        deadline = time.monotonic() + timeout
        while not self.group_stable(group_id):
            failed = [c for c in self.consumers if c.group_id == group_id and c.error is not None]
            if failed:
                raise EngineError(f"group {group_id!r}: a consumer failed: {failed[0].error}")
            if time.monotonic() > deadline:
                raise EngineError(
                    f"group {group_id!r} did not become stable within {timeout}s: "
                    f"{self.describe_group(group_id)}"
                )
            time.sleep(0.005)
        return self.describe_group(group_id)

    # -- replication ---------------------------------------------------------------------------

    def produce(self, records: int, partitions: Iterable[TP] | None = None) -> int:
        """Append ``records`` to each partition (all by default); returns records accepted."""
        chosen = list(partitions) if partitions is not None else self._known_partitions()
        return sum(self.replication.produce(tp, records) for tp in chosen)

    def replicate(self) -> int:
        """One replication round, now (deterministic tests): every live follower catches up, and
        leaders add caught-up followers to their ISRs through their own sessions. Returns the
        number of ISR expansions written."""
        proposals: dict[TP, IsrProposal] = {}
        for tp, follower in self.replication.replicate():
            log_ = self.replication.log(tp)
            if log_ is None:
                continue
            known = proposals.get(tp)
            add = (*known.add, follower) if known is not None else (follower,)
            proposals[tp] = IsrProposal(tp, log_.leader, log_.leader_epoch, add=add)
        by_leader: dict[int, list[IsrProposal]] = {}
        for proposal in proposals.values():
            by_leader.setdefault(proposal.leader, []).append(proposal)
        expanded = 0
        for leader_id, items in sorted(by_leader.items()):
            leader = self.brokers.get(leader_id)
            if leader is None or not leader.alive:
                continue
            try:
                written = leader.alter_isr(items)
            except StoreError as exc:
                log.debug("ISR expansion by broker %s failed: %s", leader_id, exc)
                continue
            expanded += sum(
                len(c.current.isr) - len(c.previous.isr) for c in written if c.previous is not None
            )
        return expanded

    def _known_partitions(self) -> list[TP]:
        return [p.tp for p in self.view().partitions]

    # -- store work ----------------------------------------------------------------------------

    def op_counts(self, broker_id: int | None = None) -> OpCounts:
        """Store operations of broker sessions (one broker's live session, or all sessions ever)."""
        if broker_id is not None:
            store = self.broker(broker_id).store
            return store.counts if isinstance(store, InstrumentedStore) else OpCounts()
        total = self._retired
        for broker in self.brokers.values():
            if broker.alive and isinstance(broker.store, InstrumentedStore):
                total = total + broker.store.counts
        return total

    def __repr__(self) -> str:
        return f"<Cluster brokers={self.live_brokers()} of {self.broker_ids}>"

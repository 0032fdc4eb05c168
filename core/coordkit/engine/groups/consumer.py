"""The consumer client of the classic group protocol.

Each :class:`Consumer` runs one background thread (its heartbeat thread) that finds the group's
coordinator through any live broker, joins, syncs and then heartbeats every
``heartbeat_interval``; it rejoins when a heartbeat answers REBALANCE_IN_PROGRESS, finds the
coordinator again after NOT_COORDINATOR (or when the coordinator broker is gone), and drops what it
owns when it learns it is no longer a member (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID; fatally on
FENCED_INSTANCE_ID).

* **Eager** (some configured assignor is eager-only): before each rejoin the consumer commits its
  positions and revokes everything.
* **Cooperative** (every configured assignor supports it): it rejoins owning its partitions, then
  commits and revokes only those it lost, and rejoins at once when it revoked any, for the second
  round that hands them over.

**Metadata changes** (Kafka's ``ConsumerCoordinator``): the member that leads the group keeps the
partition counts of the group's topics its assignment was computed from, and rejoins — so the group
rebalances — when they change: a topic gains partitions, a subscribed topic is created or deleted.
It learns of changes from watches on the topics' ``/brokers/topics/T`` nodes (through the
coordinator's broker), and, as a safety net, re-reads the counts every ``metadata_max_age``. Any
member rejoins after :meth:`Consumer.subscribe` changed its topics.

Positions start from the committed offset, else 0; :meth:`Consumer.poll` "consumes" by advancing
each owned partition to its high watermark in the cluster's replication model. Positions are
committed on revoke and on :meth:`Consumer.close` (auto-commit); :meth:`Consumer.crash` stops
without committing or leaving (the coordinator notices at session timeout). A static member
(``group_instance_id``) does not send LeaveGroup on close (KIP-345): a restart with the same
instance id takes its place without a rebalance.

Ownership changes are reported to the group observers (the
:class:`~coordkit.engine.groups.history.GroupHistory` checks them).
"""

from __future__ import annotations

import concurrent.futures
import enum
import itertools
import logging
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, TypeVar

import attrs

from coordkit.engine.errors import EngineError
from coordkit.engine.groups.config import ConsumerConfig
from coordkit.engine.groups.events import GroupObserver
from coordkit.engine.groups.planning import compute_assignment, rebalance_protocol
from coordkit.engine.groups.protocol import (
    NO_GENERATION,
    UNKNOWN_MEMBER_ID,
    ErrorCode,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    Subscription,
    SyncGroupRequest,
)
from coordkit.engine.groups.timing import wait_on_clock
from coordkit.engine.groups.topic_metadata import LeaderMetadata
from coordkit.engine.replication import ReplicationModel
from coordkit.engine.strategies import Strategies
from coordkit.kafka.model import TopicPartition
from coordkit.strategies.assignment import RebalanceProtocol
from coordkit.strategies.offsets import OffsetAndMetadata
from coordkit.support.clock import Clock

if TYPE_CHECKING:
    from coordkit.engine.broker import Broker
    from coordkit.engine.groups.coordinator import GroupCoordinator
    from coordkit.engine.network import Network

log = logging.getLogger("coordkit.engine.groups.consumer")

T = TypeVar("T")

#: Real seconds between checks of a pending long poll for a stop request.
_POLL_SLICE = 0.02
_client_ids = itertools.count(1)


class ConsumerError(EngineError):
    """A consumer cannot go on (fenced, inconsistent protocol, ...) or an operation failed."""


class CommitFailedError(ConsumerError):
    """A commit was refused: the consumer is not a current member of the current generation."""


class ConsumerState(enum.Enum):
    JOINING = "joining"  # looking for the coordinator, in a join round, or syncing
    STABLE = "stable"  # holds the assignment of its generation and heartbeats
    CLOSED = "closed"
    CRASHED = "crashed"
    FAILED = "failed"  # stopped on a fatal error (see Consumer.error)


class _Fatal(Exception):
    def __init__(self, error: ErrorCode, what: str):
        super().__init__(f"{what}: {error.name}")
        self.error = error


class Consumer:
    """A member of a consumer group (see the module documentation).

    Built by :meth:`coordkit.engine.Cluster.start_consumer`; ``network`` reaches the brokers,
    ``replication`` gives high watermarks.
    """

    def __init__(
        self,
        config: ConsumerConfig,
        *,
        network: Network[Broker],
        replication: ReplicationModel,
        clock: Clock,
        observers: GroupObserver,
        strategies: Strategies,
    ):
        strategies.check_assignors(config.assignors)
        self.config = config
        self.group_id = config.group_id
        self.client_id = config.client_id or f"consumer-{next(_client_ids)}"
        self._strategies = strategies
        self.protocol: RebalanceProtocol = rebalance_protocol(
            config.assignors, strategies.assignors
        )
        self._network = network
        self._replication = replication
        self._clock = clock
        self._observers = observers
        self._lock = threading.Lock()
        self._stop = threading.Event()
        # Cuts the heartbeat thread's pause short: stopping, a subscription or metadata change.
        self._wakeup = threading.Event()
        self._thread: threading.Thread | None = None
        self._coordinator: GroupCoordinator | None = None
        self._coordinator_id: int | None = None
        self._member_id = UNKNOWN_MEMBER_ID
        self._generation = NO_GENERATION
        self._assignment: frozenset[TopicPartition] = frozenset()
        self._positions: dict[TopicPartition, int | None] = {}  # None: not fetched yet
        self._rejoin = True
        self._prepared = False  # eager revoke done for the coming join
        self._joined_topics: tuple[str, ...] | None = None  # the subscription of the last join
        # Leader only: the metadata its assignment was computed from, and what it is compared to.
        self._metadata = LeaderMetadata(
            f"group {config.group_id!r}: leader {self.client_id}",
            clock,
            config.metadata_max_age,
            self._wakeup.set,
        )
        self._state = ConsumerState.JOINING
        self._broker_turn = itertools.count()
        self.error: ConsumerError | None = None
        self.rebalances = 0

    # -- public API ----------------------------------------------------------------------------

    def start(self) -> Consumer:
        if self._thread is not None:
            return self
        self._observers.consumer_started(self.group_id, self.client_id, self._clock.monotonic())
        self._thread = threading.Thread(
            target=self._run, name=f"coordkit-consumer-{self.client_id}", daemon=True
        )
        self._thread.start()
        return self

    @property
    def member_id(self) -> str:
        """The id the coordinator gave (``""`` before the first join)."""
        with self._lock:
            return self._member_id

    @property
    def generation(self) -> int:
        """The generation of the current assignment (``-1`` before the first)."""
        with self._lock:
            return self._generation

    @property
    def state(self) -> ConsumerState:
        with self._lock:
            return self._state

    @property
    def coordinator(self) -> int | None:
        """The broker this consumer last found coordinating its group."""
        with self._lock:
            return self._coordinator_id

    @property
    def group_instance_id(self) -> str | None:
        return self.config.group_instance_id

    @property
    def running(self) -> bool:
        return self.state in (ConsumerState.JOINING, ConsumerState.STABLE)

    def subscription(self) -> tuple[str, ...]:
        """The topics this consumer subscribes to now."""
        return self.config.topics

    def subscribe(self, topics: Iterable[str]) -> None:
        """Subscribe to ``topics`` instead (Kafka's ``subscribe``): the consumer rejoins with the
        new list and the group rebalances; nothing happens when the list is unchanged.

        :raises ValueError: no topics, or a name that cannot be a topic.
        :raises ConsumerError: the consumer is closed, crashed or failed.
        """
        config = attrs.evolve(self.config, topics=tuple(topics))
        with self._lock:
            if self._state not in (ConsumerState.JOINING, ConsumerState.STABLE):
                raise ConsumerError(
                    f"group {self.group_id!r}: {self.client_id} is {self._state.value}; "
                    "it cannot subscribe"
                )
            self.config = config
        self._wakeup.set()

    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions this consumer owns now."""
        with self._lock:
            return self._assignment

    def positions(self) -> dict[TopicPartition, int]:
        """Next offset to consume per owned partition (committed offset, else 0, then advanced
        by :meth:`poll`)."""
        self._resolve_positions()
        with self._lock:
            return {tp: pos or 0 for tp, pos in self._positions.items() if tp in self._assignment}

    def poll(self) -> int:
        """Consume every owned partition up to its high watermark; returns records consumed."""
        self._resolve_positions()
        consumed = 0
        with self._lock:
            for tp in self._assignment:
                hw = self._high_watermark(tp)
                position = self._positions.get(tp) or 0
                if hw > position:
                    consumed += hw - position
                    self._positions[tp] = hw
        return consumed

    def lag(self) -> dict[TopicPartition, int]:
        """Records between each owned partition's position and its high watermark."""
        positions = self.positions()
        return {tp: max(0, self._high_watermark(tp) - pos) for tp, pos in positions.items()}

    def commit(self) -> None:
        """Commit the positions of every owned partition (synchronously).

        :raises CommitFailedError: the group rebalanced or this consumer is no longer a member.
        """
        error = self._commit(self.assignment())
        if error is not ErrorCode.NONE:
            raise CommitFailedError(
                f"group {self.group_id!r}: commit by {self.client_id} (member "
                f"{self.member_id or '-'}, generation {self.generation}) failed: {error.name}"
            )

    def close(self, timeout: float = 10.0) -> None:
        """Commit, give up the partitions and leave the group (a static member does not send
        LeaveGroup). Idempotent."""
        if not self._halt(timeout):
            return
        failed = self.state is ConsumerState.FAILED
        owned = self.assignment()
        if not failed:
            self._commit(owned)
        self._release(owned, lost=failed)
        if not failed and self.config.group_instance_id is None and self.member_id:
            coordinator = self._coordinator
            if coordinator is not None:
                coordinator.leave_group(LeaveGroupRequest(self.group_id, self.member_id))
        with self._lock:
            if self._state is not ConsumerState.FAILED:
                self._state = ConsumerState.CLOSED
        self._observers.consumer_stopped(
            self.group_id, self.client_id, False, self._clock.monotonic()
        )

    def crash(self, timeout: float = 10.0) -> None:
        """Stop as a killed process would: no commit, no LeaveGroup; ownership simply ends."""
        if not self._halt(timeout):
            return
        self._release(self.assignment(), lost=True)
        with self._lock:
            self._state = ConsumerState.CRASHED
        self._observers.consumer_stopped(
            self.group_id, self.client_id, True, self._clock.monotonic()
        )

    def _halt(self, timeout: float) -> bool:
        """Stop the thread; ``False`` if this consumer was already stopped."""
        if self._stop.is_set():
            return False
        self._stop.set()
        self._wakeup.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        self._metadata.drop_watch()
        return True

    # -- the heartbeat thread ------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if self._coordinator is None:
                    self._find_coordinator()
                elif self._rejoin_needed():
                    self._join()
                else:
                    self._heartbeat()
                    if self._metadata.track(self._coordinator):
                        self._rejoin = True
                    wait_on_clock(self._clock, self.config.heartbeat_interval, self._wakeup)
                    self._wakeup.clear()  # what woke it is re-read by _rejoin_needed
            except _Fatal as exc:
                self._fail(ConsumerError(f"group {self.group_id!r}: {self.client_id}: {exc}"))
                return
            except Exception as exc:
                log.exception("consumer %s failed", self.client_id)
                self._fail(ConsumerError(f"group {self.group_id!r}: {self.client_id}: {exc!r}"))
                return

    def _fail(self, error: ConsumerError) -> None:
        log.warning("%s", error)
        self._metadata.drop_watch()
        self._release(self.assignment(), lost=True)
        with self._lock:
            self.error = error
            self._state = ConsumerState.FAILED

    def _backoff(self) -> None:
        wait_on_clock(self._clock, self.config.retry_backoff, self._stop)

    def _find_coordinator(self) -> None:
        brokers = [b for b in self._network.brokers() if b.alive]
        if not brokers:
            self._backoff()
            return
        broker = brokers[next(self._broker_turn) % len(brokers)]
        response = broker.group_coordinator.find_coordinator(self.group_id)
        if response.error is ErrorCode.INVALID_GROUP_ID:
            raise _Fatal(response.error, "FindCoordinator")
        target = None if response.coordinator is None else self._network.get(response.coordinator)
        if response.error is not ErrorCode.NONE or target is None or not target.alive:
            self._backoff()
            return
        with self._lock:
            self._coordinator_id = response.coordinator
        self._coordinator = target.group_coordinator

    def _coordinator_lost(self) -> None:
        self._coordinator = None
        self._backoff()

    def _await(self, future: concurrent.futures.Future[T]) -> T | None:
        """The long poll's answer, or ``None`` if the consumer is stopping meanwhile."""
        while not self._stop.is_set():
            try:
                return future.result(timeout=_POLL_SLICE)
            except concurrent.futures.TimeoutError:
                continue
        return None

    def _join(self) -> None:
        coordinator = self._coordinator
        assert coordinator is not None
        cooperative = self.protocol is RebalanceProtocol.COOPERATIVE
        if not cooperative and not self._prepared:
            owned = self.assignment()
            if owned:  # eager: commit and revoke everything before joining
                self._commit(owned)
                self._release(owned, lost=False)
            self._prepared = True
        with self._lock:
            owned = self._assignment if cooperative else frozenset()
            generation = self._generation if cooperative else NO_GENERATION
            member_id = self._member_id
            topics = self.config.topics
            self._joined_topics = topics
            self._state = ConsumerState.JOINING
        request = JoinGroupRequest(
            group_id=self.group_id,
            member_id=member_id,
            group_instance_id=self.config.group_instance_id,
            session_timeout=self.config.session_timeout,
            rebalance_timeout=self.config.rebalance_timeout,
            protocols=self.config.assignors,
            subscription=Subscription(topics, owned, generation),
            client_id=self.client_id,
        )
        joined = self._await(coordinator.join_group(request))
        if joined is None:
            return
        if joined.error is not ErrorCode.NONE:
            self._on_error(joined.error, "JoinGroup")
            return
        with self._lock:
            self._member_id = joined.member_id
        assignments: dict[str, frozenset[TopicPartition]] = {}
        counts: dict[str, int] = {}
        if not joined.is_leader:
            self._metadata.forget()
        elif joined.skip_assignment:
            # A static leader back without a rebalance keeps the assignment it cannot recompute
            # (KIP-814) but watches the group's topics from now on.
            self._metadata.remember(coordinator, self._group_topics(joined), None)
        else:
            assignments, counts = self._lead(coordinator, joined)
        synced = self._await(
            coordinator.sync_group(
                SyncGroupRequest(
                    self.group_id,
                    joined.generation,
                    joined.member_id,
                    self.config.group_instance_id,
                    assignments,
                    counts,
                )
            )
        )
        if synced is None:
            return
        if synced.error is not ErrorCode.NONE:
            self._on_error(synced.error, "SyncGroup")
            return
        self._apply(joined.generation, synced.assignment)

    def _lead(
        self, coordinator: GroupCoordinator, joined: JoinGroupResponse
    ) -> tuple[dict[str, frozenset[TopicPartition]], dict[str, int]]:
        topics = self._group_topics(joined)
        counts = coordinator.topic_partitions(topics)
        self._metadata.remember(coordinator, topics, counts)
        assert joined.protocol is not None
        # Kafka's leader decides by its own configuration: members of a group configure the same
        # assignors, and the coordinator refuses members that share no protocol.
        cooperative = self.protocol is RebalanceProtocol.COOPERATIVE
        assignments = compute_assignment(
            self._strategies.assignor(joined.protocol), joined.members, counts,
            cooperative=cooperative,
        )  # fmt: skip
        return assignments, counts

    # -- rejoin triggers: subscription and metadata changes -------------------------------------

    def _rejoin_needed(self) -> bool:
        if self._rejoin:
            return True
        with self._lock:
            joined, topics = self._joined_topics, self.config.topics
        if joined is not None and joined != topics:
            log.info("consumer %s rejoins: subscription changed to %s", self.client_id, topics)
            return True
        return self._metadata.watched_change()

    @staticmethod
    def _group_topics(joined: JoinGroupResponse) -> list[str]:
        return sorted({t for m in joined.members for t in m.subscription.topics})

    # -- applying an assignment ----------------------------------------------------------------

    def _apply(self, generation: int, assignment: frozenset[TopicPartition]) -> None:
        with self._lock:
            owned = self._assignment
        revoked = owned - assignment
        added = assignment - owned
        if revoked:  # cooperative only: eager members joined owning nothing
            self._commit(revoked)
            self._release(revoked, lost=False)
        fetched = self._fetch_committed(added) if added else {}
        now = self._clock.monotonic()
        with self._lock:
            for tp in added:
                committed = fetched.get(tp)
                self._positions[tp] = committed.offset if committed is not None else None
            self._assignment = assignment
            self._generation = generation
            self._state = ConsumerState.STABLE
            # A cooperative member that gave partitions up rejoins at once so they move on.
            self._rejoin = bool(revoked)
            self._prepared = False
            member_id = self._member_id
            self.rebalances += 1
        if added or not owned:
            self._observers.partitions_assigned(self.group_id, member_id, generation, added, now)

    def _heartbeat(self) -> None:
        coordinator = self._coordinator
        assert coordinator is not None
        with self._lock:
            request = HeartbeatRequest(
                self.group_id, self._generation, self._member_id, self.config.group_instance_id
            )
        response = coordinator.heartbeat(request)
        if response.error is not ErrorCode.NONE:
            self._on_error(response.error, "Heartbeat")

    def _on_error(self, error: ErrorCode, what: str) -> None:
        if error.retriable_with_coordinator_lookup:
            self._coordinator_lost()
        elif error is ErrorCode.REBALANCE_IN_PROGRESS:
            self._rejoin = True
        elif error in (ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID):
            # Out of the group: whatever it owned may already be someone else's.
            self._release(self.assignment(), lost=True)
            with self._lock:
                self._generation = NO_GENERATION
                if error is ErrorCode.UNKNOWN_MEMBER_ID:
                    self._member_id = UNKNOWN_MEMBER_ID
            self._rejoin = True
        else:
            raise _Fatal(error, what)

    # -- ownership and offsets -----------------------------------------------------------------

    def _release(self, partitions: frozenset[TopicPartition], *, lost: bool) -> None:
        if not partitions:
            return
        with self._lock:
            self._assignment = self._assignment - partitions
            for tp in partitions:
                self._positions.pop(tp, None)
            member_id, generation = self._member_id, self._generation
        self._observers.partitions_revoked(
            self.group_id, member_id, generation, partitions, lost, self._clock.monotonic()
        )

    def _high_watermark(self, tp: TopicPartition) -> int:
        partition_log = self._replication.log((tp.topic, tp.partition))
        return 0 if partition_log is None else partition_log.hw

    def _fetch_committed(
        self, partitions: frozenset[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        coordinator = self._coordinator
        if coordinator is None:
            return {}
        response = coordinator.offset_fetch(OffsetFetchRequest(self.group_id, partitions))
        if response.error is not ErrorCode.NONE:
            return {}
        return dict(response.offsets)

    def _resolve_positions(self) -> None:
        with self._lock:
            unknown = frozenset(tp for tp, pos in self._positions.items() if pos is None)
        if not unknown:
            return
        fetched = self._fetch_committed(unknown)
        with self._lock:
            for tp in unknown:
                if tp in self._positions and self._positions[tp] is None:
                    committed = fetched.get(tp)
                    self._positions[tp] = committed.offset if committed is not None else 0

    def _commit(self, partitions: frozenset[TopicPartition]) -> ErrorCode:
        if not partitions:
            return ErrorCode.NONE
        self._resolve_positions()
        now_ms = self._clock.wall_ms()
        with self._lock:
            offsets = {
                tp: OffsetAndMetadata(pos, commit_timestamp=now_ms)
                for tp in partitions
                if (pos := self._positions.get(tp)) is not None
            }
            request = OffsetCommitRequest(
                self.group_id,
                self._generation,
                self._member_id,
                offsets,
                self.config.group_instance_id,
            )
        coordinator = self._coordinator
        if coordinator is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return coordinator.offset_commit(request).error

    def __repr__(self) -> str:
        return (
            f"<Consumer {self.client_id} group={self.group_id!r} member={self.member_id or '-'} "
            f"generation={self.generation} state={self.state.value}>"
        )

"""The group coordinator a broker hosts (Kafka's ``GroupCoordinator``).

**Which groups.** A group belongs to partition ``strategy.partition_for(group, n)`` of the offsets
topic (``__consumer_offsets``, ``n = offsets.topic.num.partitions``); the broker leading that
partition coordinates it. Hosting follows leadership the way Kafka's LeaderAndIsr requests drive it:
the coordinator observes the engine's partition-state events and takes a partition over when its
broker becomes leader, and unloads it (failing waiting requests with NOT_COORDINATOR) when
leadership moves away. A request for a partition it does not host makes it read the partition's
state once, so a broker that led the partition before this coordinator started (a full restart)
takes it over too. Groups are loaded lazily from their persisted metadata
(:mod:`~coordkit.engine.groups.metadata`) on first use, so a new coordinator resumes the generation.

**The protocol.** JoinGroup and SyncGroup are long polls: they return a future completed when the
join round ends or the leader's assignment arrives. A ticker thread, reading the engine clock,
removes members whose session timed out and ends join rounds at the rebalance timeout (or once
every member rejoined, not before ``group.initial.rebalance.delay.ms`` for a group that was empty).

**Durability and fencing.** The group's metadata is written on every completed sync in a multi that
first checks the version of the offsets partition's state node this coordinator took over with: a
broker that lost the partition cannot overwrite the new coordinator's writes. Offsets go through
the configured :class:`~coordkit.offsets.OffsetStorage` on the broker's session, accepted only from
a current member of the current generation.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Sequence

from coordkit import layout
from coordkit.assignment import RebalanceProtocol
from coordkit.clock import Clock
from coordkit.coordinators import OFFSETS_TOPIC, offsets_topic_partitions
from coordkit.elections import ElectionKind
from coordkit.engine import states
from coordkit.engine.config import EngineConfig
from coordkit.engine.errors import TopicExistsError
from coordkit.engine.events import EngineObserver, StateChange
from coordkit.engine.groups import metadata
from coordkit.engine.groups.events import AssignmentRound, GroupObserver, RebalanceCompleted
from coordkit.engine.groups.leadership import GroupLeaderSelection, LeaderCandidate
from coordkit.engine.groups.membership import Group, Member, RebalanceEpisode
from coordkit.engine.groups.planning import rebalance_protocol
from coordkit.engine.groups.protocol import (
    NO_GENERATION,
    UNKNOWN_MEMBER_ID,
    ErrorCode,
    FindCoordinatorResponse,
    GroupDescription,
    GroupState,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinedMember,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberDescription,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from coordkit.engine.groups.topic_metadata import TopicMetadataWatch
from coordkit.engine.topics import TopicAdmin
from coordkit.errors import BadVersionError, LayoutError, NodeExistsError, NoNodeError, StoreError
from coordkit.offsets import OffsetStorage
from coordkit.plugins import get_plugin_manager
from coordkit.store import Check, Create, MetadataStore, Op, SetData

log = logging.getLogger("coordkit.engine.groups")

#: Real seconds between two sweeps of session and rebalance deadlines.
TICK = 0.01

JoinFuture = concurrent.futures.Future[JoinGroupResponse]
SyncFuture = concurrent.futures.Future[SyncGroupResponse]


def _join_done(response: JoinGroupResponse) -> JoinFuture:
    future: JoinFuture = concurrent.futures.Future()
    future.set_result(response)
    return future


def _sync_done(response: SyncGroupResponse) -> SyncFuture:
    future: SyncFuture = concurrent.futures.Future()
    future.set_result(response)
    return future


def offsets_partition_for(
    group_id: str, config: EngineConfig, num_partitions: int | None = None
) -> int:
    """The offsets-topic partition of ``group_id`` under the configured coordinator strategy,
    over ``num_partitions`` (by default ``offsets.topic.num.partitions``; pass the count the
    existing topic has, see :func:`~coordkit.coordinators.offsets_topic_partitions`)."""
    strategy = get_plugin_manager().election(
        ElectionKind.GROUP_COORDINATOR.value, config.group_coordinator
    )
    count = config.offsets_topic_num_partitions if num_partitions is None else num_partitions
    return int(strategy.partition_for(group_id, count))


class GroupCoordinator(EngineObserver):
    """The group coordinator of broker ``broker_id`` on the broker's store session.

    :param observers: told about rebalances (the group history, the lab, the plugin hook).
    """

    def __init__(
        self,
        broker_id: int,
        store: MetadataStore,
        *,
        config: EngineConfig,
        clock: Clock,
        observers: GroupObserver,
    ):
        self.broker_id = broker_id
        self.store = store
        self.config = config
        self.clock = clock
        self.observers = observers
        self._lock = threading.Lock()
        self._hosted: dict[int, int] = {}  # offsets partition → state node version taken over at
        self._seen: dict[int, tuple[int, int]] = {}  # partition → (leader epoch, version) last seen
        self._groups: dict[str, Group] = {}
        self._lost: set[int] = set()  # partitions found lost while a group lock was held
        self._offsets: OffsetStorage | None = None
        self._offsets_partitions: int | None = None  # once the offsets topic exists
        self._closed = threading.Event()
        self._ticker: threading.Thread | None = None
        self._leader_strategy: GroupLeaderSelection = get_plugin_manager().election(
            ElectionKind.GROUP_LEADER.value, config.group_leader
        )

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> GroupCoordinator:
        self._ticker = threading.Thread(
            target=self._tick_loop, name=f"coordkit-groups-{self.broker_id}", daemon=True
        )
        self._ticker.start()
        return self

    def close(self) -> None:
        """Stop serving: every waiting request is answered NOT_COORDINATOR."""
        if self._closed.is_set():
            return
        self._closed.set()
        with self._lock:
            partitions = list(self._hosted)
        for partition in partitions:
            self._unload(partition)
        ticker = self._ticker
        if ticker is not None and ticker is not threading.current_thread():
            ticker.join(timeout=5)

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def hosted_partitions(self) -> list[int]:
        with self._lock:
            return sorted(self._hosted)

    def partition_for(self, group_id: str) -> int:
        return offsets_partition_for(group_id, self.config, self.offsets_partitions())

    def offsets_partitions(self) -> int:
        """Partitions of the offsets topic: the count it has once it exists (read once, as
        Kafka's group metadata manager does), ``offsets.topic.num.partitions`` before."""
        if self._offsets_partitions is not None:
            return self._offsets_partitions
        try:
            count, exists = offsets_topic_partitions(
                self.store, self.config.offsets_topic_num_partitions
            )
        except StoreError:
            return self.config.offsets_topic_num_partitions
        if exists:
            self._offsets_partitions = count
        return count

    # -- engine events (hosting follows offsets-partition leadership) --------------------------

    def partition_states_changed(self, changes: Sequence[StateChange]) -> None:
        for change in changes:
            topic, partition = change.tp
            if topic != OFFSETS_TOPIC:
                continue
            current = change.current
            key = (current.leader_epoch, current.zk_version)
            with self._lock:
                if key <= self._seen.get(partition, (-1, -1)):
                    continue  # writes of one partition can arrive out of order across threads
                self._seen[partition] = key
            if current.leader == self.broker_id and not self.closed:
                self._host(partition, current.zk_version)
            else:
                self._unload(partition)

    def partition_states_known(self, states: Sequence[StateChange]) -> None:
        self.partition_states_changed(states)

    def broker_stopped(self, broker_id: int, controlled: bool) -> None:
        if broker_id == self.broker_id:
            self.close()

    def topic_deleted(self, topic: str) -> None:
        if topic == OFFSETS_TOPIC:
            with self._lock:
                partitions = list(self._hosted)
                self._seen.clear()
            for partition in partitions:
                self._unload(partition)

    def _host(self, partition: int, version: int) -> None:
        with self._lock:
            new = partition not in self._hosted
            self._hosted[partition] = version
        if new:
            log.info("broker %s coordinates offsets partition %s", self.broker_id, partition)

    def _unload(self, partition: int) -> None:
        with self._lock:
            if self._hosted.pop(partition, None) is None:
                return
            groups = [g for g in self._groups.values() if g.partition == partition]
            for group in groups:
                del self._groups[group.group_id]
        log.info("broker %s no longer coordinates offsets partition %s", self.broker_id, partition)
        for group in groups:
            with group.lock:
                group.state = GroupState.DEAD
                for member in group.members.values():
                    self._fail_pending(member, ErrorCode.NOT_COORDINATOR)

    def _hosts(self, partition: int) -> bool:
        with self._lock:
            if partition in self._hosted:
                return True
        # Catch up with the store: this broker may have led the partition since before this
        # coordinator observed anything (a broker restarting into a leadership nobody moved).
        path = states.state_path((OFFSETS_TOPIC, partition))
        try:
            data, stat = self.store.get(path)
        except StoreError:
            return False
        try:
            state = states.decode_state(path, data, stat.version)
        except LayoutError:
            return False  # unreadable: the controller reports it; nobody serves it meanwhile
        if state.leader != self.broker_id or self.closed:
            return False
        with self._lock:
            seen = self._seen.get(partition, (-1, -1))
            if (state.leader_epoch, stat.version) < seen:
                return False
            self._seen[partition] = (state.leader_epoch, stat.version)
        self._host(partition, stat.version)
        return True

    # -- finding groups ------------------------------------------------------------------------

    def _lookup(self, group_id: str, *, create: bool) -> Group | ErrorCode | None:
        """The hosted group (loading it, or creating it when ``create``); ``None`` if it does not
        exist; an error code when this broker cannot serve it."""
        if self.closed:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        try:
            path = metadata.group_path(group_id)
        except ValueError:
            return ErrorCode.INVALID_GROUP_ID
        partition = self.partition_for(group_id)
        if not self._hosts(partition):
            return ErrorCode.NOT_COORDINATOR
        with self._lock:
            group = self._groups.get(group_id)
        if group is not None:
            return group
        try:
            loaded = self._load(group_id, path, partition)
        except StoreError:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if loaded is None and not create:
            return None
        with self._lock:
            if partition not in self._hosted:
                return ErrorCode.NOT_COORDINATOR
            return self._groups.setdefault(group_id, loaded or Group(group_id, partition))

    def _member_group(self, group_id: str, *, create: bool) -> Group | ErrorCode:
        """The group a member request concerns, or the error to answer (UNKNOWN_MEMBER_ID when
        this coordinator has no such group)."""
        found = self._lookup(group_id, create=create)
        return ErrorCode.UNKNOWN_MEMBER_ID if found is None else found

    def _load(self, group_id: str, path: str, partition: int) -> Group | None:
        try:
            data, _ = self.store.get(path)
        except NoNodeError:
            return None
        try:
            persisted = metadata.decode(group_id, data, path)
        except LayoutError:
            log.exception("broker %s: ignoring unreadable group metadata", self.broker_id)
            return None
        group = Group.from_metadata(persisted, partition, self.clock.monotonic())
        log.info(
            "broker %s loaded group %r (generation %s, %s members)",
            self.broker_id,
            group_id,
            group.generation,
            len(group.members),
        )
        return group

    # -- FindCoordinator and metadata (any broker answers) -------------------------------------

    def find_coordinator(self, group_id: str) -> FindCoordinatorResponse:
        """The broker leading the group's offsets partition, read from the partition's state;
        creates the offsets topic on first need (Kafka auto-creates it)."""
        if self.closed:
            return FindCoordinatorResponse(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        try:
            metadata.group_path(group_id)
        except ValueError:
            return FindCoordinatorResponse(ErrorCode.INVALID_GROUP_ID)
        path = states.state_path((OFFSETS_TOPIC, self.partition_for(group_id)))
        try:
            data, stat = self.store.get(path)
        except NoNodeError:
            try:
                self.ensure_offsets_topic()
            except StoreError as exc:
                log.debug("broker %s: offsets topic creation failed: %s", self.broker_id, exc)
            return FindCoordinatorResponse(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        except StoreError:
            return FindCoordinatorResponse(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        try:
            state = states.decode_state(path, data, stat.version)
        except LayoutError:
            return FindCoordinatorResponse(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not state.has_leader:
            return FindCoordinatorResponse(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return FindCoordinatorResponse(ErrorCode.NONE, state.leader)

    def ensure_offsets_topic(self) -> bool:
        """Create the offsets topic unless it exists; ``True`` if this call created it.

        Replication factor: ``offsets.topic.replication.factor`` capped by the live brokers.
        """
        if self.store.exists(layout.topic_path(OFFSETS_TOPIC)) is not None:
            return False
        admin = TopicAdmin(self.store, placement=self.config.placement)
        live = len(admin.brokers())
        factor = max(1, min(self.config.offsets_topic_replication_factor, live))
        try:
            admin.create_topic(
                OFFSETS_TOPIC,
                self.config.offsets_topic_num_partitions,
                factor,
                config={"cleanup.policy": "compact"},
            )
        except TopicExistsError:
            return False
        log.info(
            "broker %s created %s (replication factor %s)", self.broker_id, OFFSETS_TOPIC, factor
        )
        return True

    def topic_partitions(self, topics: Sequence[str]) -> dict[str, int]:
        """Partition counts of the existing ``topics`` (a Metadata request)."""
        names = sorted(set(topics))
        paths = [layout.topic_path(t) for t in names]
        out: dict[str, int] = {}
        for topic, path, result in zip(names, paths, self.store.get_many(paths), strict=True):
            if not isinstance(result, StoreError):
                out[topic] = len(states.decode_assignment(path, result[0]))
        return out

    def watch_topic_metadata(
        self, topics: Iterable[str], on_change: Callable[[], object]
    ) -> TopicMetadataWatch:
        """Partition counts of ``topics`` kept current by watches on this broker's session (what
        a group leader compares with its assignment's metadata); ``on_change`` runs on the
        session's event thread and must not block.

        :raises StoreError: the session cannot set watches (e.g. the broker has stopped).
        """
        return TopicMetadataWatch(self.store, topics, on_change)

    # -- JoinGroup -----------------------------------------------------------------------------

    def join_group(self, request: JoinGroupRequest) -> JoinFuture:
        """Join a round; the future completes when the round ends (or at once on an error)."""
        limits = (self.config.group_min_session_timeout, self.config.group_max_session_timeout)
        if not limits[0] <= request.session_timeout <= limits[1]:
            return _join_done(JoinGroupResponse(ErrorCode.INVALID_SESSION_TIMEOUT))
        group = self._member_group(request.group_id, create=request.member_id == UNKNOWN_MEMBER_ID)
        if isinstance(group, ErrorCode):
            return _join_done(JoinGroupResponse(group))
        with group.lock:
            if group.is_(GroupState.DEAD):
                return _join_done(JoinGroupResponse(ErrorCode.NOT_COORDINATOR))
            instance = request.group_instance_id
            replacing = request.member_id
            if replacing == UNKNOWN_MEMBER_ID and instance is not None:
                replacing = group.static.get(instance, "")
            if not group.supports(request.protocol_type, request.protocols, replacing):
                return _join_done(JoinGroupResponse(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            if request.member_id == UNKNOWN_MEMBER_ID:
                if instance is not None and instance in group.static:
                    return self._replace_static_member(group, request)
                return self._join_new_member(group, request)
            return self._join_known_member(group, request)

    def _new_member_id(self, request: JoinGroupRequest) -> str:
        prefix = request.group_instance_id or request.client_id or "consumer"
        return f"{prefix}-{uuid.uuid4()}"

    def _join_new_member(self, group: Group, request: JoinGroupRequest) -> JoinFuture:
        now = self.clock.monotonic()
        member = Member(
            self._new_member_id(request),
            request.group_instance_id,
            request.client_id,
            request.session_timeout,
            request.rebalance_timeout,
            request.protocols,
            request.subscription,
            group.take_join_order(),
        )
        member.deadline = now + member.session_timeout
        if not group.members:
            group.protocol_type = request.protocol_type
        group.add(member)
        future: JoinFuture = concurrent.futures.Future()
        member.join_future = future
        if group.is_(GroupState.PREPARING_REBALANCE):
            if group.not_before > now:  # still in the initial delay: wait for more members
                group.not_before = min(
                    now + self.config.group_initial_rebalance_delay, group.initial_delay_limit
                )
            self._maybe_complete_join(group)
        else:
            self._prepare_rebalance(group, f"member {member.member_id} joined")
        return future

    def _join_known_member(self, group: Group, request: JoinGroupRequest) -> JoinFuture:
        member = group.members.get(request.member_id)
        error = self._check_member(group, request.member_id, request.group_instance_id)
        if error is not ErrorCode.NONE or member is None:
            return _join_done(JoinGroupResponse(error))
        now = self.clock.monotonic()
        member.deadline = now + member.session_timeout
        unchanged = member.same_join(request.protocols, request.subscription)
        if group.is_(GroupState.COMPLETING_REBALANCE) and unchanged:
            return _join_done(self._join_response(group, member))  # a retried JoinGroup
        if group.is_(GroupState.STABLE) and unchanged and group.leader != member.member_id:
            return _join_done(self._join_response(group, member))
        self._fail_pending(member, ErrorCode.REBALANCE_IN_PROGRESS)
        member.protocols = request.protocols
        member.subscription = request.subscription
        member.session_timeout = request.session_timeout
        member.rebalance_timeout = request.rebalance_timeout
        future: JoinFuture = concurrent.futures.Future()
        member.join_future = future
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(group)
        else:
            self._prepare_rebalance(group, f"member {member.member_id} rejoined")
        return future

    def _replace_static_member(self, group: Group, request: JoinGroupRequest) -> JoinFuture:
        """A static member restarted: the new member id takes the old one's place (join order,
        assignment, leadership); the old id is fenced. No rebalance when the group is Stable and
        the subscription and protocols are unchanged (KIP-345)."""
        instance = request.group_instance_id
        assert instance is not None
        old = group.members[group.static[instance]]
        was_leader = group.leader == old.member_id
        self._fail_pending(old, ErrorCode.FENCED_INSTANCE_ID)
        group.remove(old.member_id)
        now = self.clock.monotonic()
        member = Member(
            self._new_member_id(request),
            instance,
            request.client_id,
            request.session_timeout,
            request.rebalance_timeout,
            request.protocols,
            request.subscription,
            old.join_order,
        )
        member.assignment = old.assignment
        member.deadline = now + member.session_timeout
        group.add(member)
        if was_leader:
            group.leader = member.member_id
        log.info(
            "group %r: static member %r replaced %s by %s",
            group.group_id,
            instance,
            old.member_id,
            member.member_id,
        )
        unchanged = (
            old.protocols == request.protocols
            and old.subscription.topics == request.subscription.topics
        )
        if group.is_(GroupState.STABLE) and unchanged and group.select_protocol() == group.protocol:
            error = self._persist(group)
            if error is not ErrorCode.NONE:
                return _join_done(JoinGroupResponse(error))
            response = JoinGroupResponse(
                ErrorCode.NONE,
                group.generation,
                group.protocol,
                group.leader,
                member.member_id,
                self._joined_members(group) if was_leader else (),
                skip_assignment=was_leader,
            )
            return _join_done(response)
        future: JoinFuture = concurrent.futures.Future()
        member.join_future = future
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(group)
        else:
            self._prepare_rebalance(group, f"static member {instance} rejoined changed")
        return future

    @staticmethod
    def _joined_members(group: Group) -> tuple[JoinedMember, ...]:
        return tuple(
            JoinedMember(m.member_id, m.group_instance_id, m.subscription)
            for m in group.by_join_order()
        )

    def _join_response(self, group: Group, member: Member) -> JoinGroupResponse:
        leader = group.leader
        members: tuple[JoinedMember, ...] = ()
        if leader == member.member_id:
            members = self._joined_members(group)
        return JoinGroupResponse(
            ErrorCode.NONE, group.generation, group.protocol, leader, member.member_id, members
        )

    def _check_member(self, group: Group, member_id: str, instance: str | None) -> ErrorCode:
        """Is ``member_id`` (of ``instance``) a current member? Kafka's fencing order: a static
        instance now held by another member id is fenced; an unknown id is unknown."""
        if instance is not None:
            holder = group.static.get(instance)
            if holder is not None and holder != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member.group_instance_id != instance:
            return ErrorCode.FENCED_INSTANCE_ID
        return ErrorCode.NONE

    # -- rebalancing ---------------------------------------------------------------------------

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        now = self.clock.monotonic()
        if group.is_(GroupState.COMPLETING_REBALANCE):
            for member in group.members.values():
                if member.sync_future is not None:
                    member.sync_future.set_result(
                        SyncGroupResponse(ErrorCode.REBALANCE_IN_PROGRESS)
                    )
                    member.sync_future = None
        initial = group.is_(GroupState.EMPTY)
        group.transition(GroupState.PREPARING_REBALANCE)
        timeout = group.rebalance_timeout()
        group.join_deadline = now + timeout
        if initial:
            group.not_before = now + min(self.config.group_initial_rebalance_delay, timeout)
            group.initial_delay_limit = now + timeout
        else:
            group.not_before = now
        if group.episode is None:
            group.episode = RebalanceEpisode(now, reason)
        log.debug("group %r: preparing rebalance (%s)", group.group_id, reason)
        self.observers.rebalance_started(group.group_id, group.generation, reason, now)
        self._maybe_complete_join(group)

    def _maybe_complete_join(self, group: Group) -> None:
        if not group.is_(GroupState.PREPARING_REBALANCE):
            return
        now = self.clock.monotonic()
        everyone = not group.members or group.all_joined()
        if (everyone and now >= group.not_before) or now >= group.join_deadline:
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        now = self.clock.monotonic()
        for member in list(group.members.values()):
            if not member.awaiting_join:
                self._fail_pending(member, ErrorCode.UNKNOWN_MEMBER_ID)
                group.remove(member.member_id)
                log.info(
                    "group %r: member %s did not rejoin in time", group.group_id, member.member_id
                )
        group.generation += 1
        if not group.members:
            group.transition(GroupState.EMPTY)
            group.protocol = None
            group.leader = None
            group.episode = None
            self._persist(group)
            self.observers.join_completed(group.group_id, group.generation, None, None, (), now)
            return
        group.protocol = group.select_protocol()
        ordered = group.by_join_order()
        current = group.leader if group.leader in group.members else None
        candidates = [
            LeaderCandidate(m.member_id, m.group_instance_id, m.join_order) for m in ordered
        ]
        leader = self._leader_strategy.choose_leader(current, candidates)
        if leader not in group.members:
            log.error(
                "group-leader strategy %r chose %r, not a member of %r; using the earliest member",
                self._leader_strategy.name,
                leader,
                group.group_id,
            )
            leader = ordered[0].member_id
        group.leader = leader
        group.transition(GroupState.COMPLETING_REBALANCE)
        if group.episode is None:
            group.episode = RebalanceEpisode(now, "join")
        group.episode.rounds += 1
        for member in ordered:
            future = member.join_future
            member.join_future = None
            member.deadline = now + member.session_timeout
            if future is not None:
                future.set_result(self._join_response(group, member))
        self.observers.join_completed(
            group.group_id,
            group.generation,
            group.protocol,
            leader,
            tuple(m.member_id for m in ordered),
            now,
        )

    def _remove_member(self, group: Group, member: Member, reason: str) -> None:
        self._fail_pending(member, ErrorCode.UNKNOWN_MEMBER_ID)
        group.remove(member.member_id)
        if group.is_(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, reason)
        else:
            self._maybe_complete_join(group)

    @staticmethod
    def _fail_pending(member: Member, error: ErrorCode) -> None:
        if member.join_future is not None:
            member.join_future.set_result(JoinGroupResponse(error))
            member.join_future = None
        if member.sync_future is not None:
            member.sync_future.set_result(SyncGroupResponse(error))
            member.sync_future = None

    # -- SyncGroup -----------------------------------------------------------------------------

    def sync_group(self, request: SyncGroupRequest) -> SyncFuture:
        """This member's assignment for ``request.generation``; the future completes when the
        leader's SyncGroup has been stored (at once for the leader, or on an error)."""
        group = self._member_group(request.group_id, create=False)
        if isinstance(group, ErrorCode):
            return _sync_done(SyncGroupResponse(group))
        with group.lock:
            if group.is_(GroupState.DEAD):
                return _sync_done(SyncGroupResponse(ErrorCode.NOT_COORDINATOR))
            error = self._check_member(group, request.member_id, request.group_instance_id)
            member = group.members.get(request.member_id)
            if error is not ErrorCode.NONE or member is None:
                return _sync_done(SyncGroupResponse(error))
            if request.generation != group.generation:
                return _sync_done(SyncGroupResponse(ErrorCode.ILLEGAL_GENERATION))
            if group.is_(GroupState.PREPARING_REBALANCE):
                return _sync_done(SyncGroupResponse(ErrorCode.REBALANCE_IN_PROGRESS))
            member.deadline = self.clock.monotonic() + member.session_timeout
            if group.is_(GroupState.STABLE):
                return _sync_done(
                    SyncGroupResponse(ErrorCode.NONE, member.assignment, group.protocol)
                )
            self._fail_pending(member, ErrorCode.REBALANCE_IN_PROGRESS)
            future: SyncFuture = concurrent.futures.Future()
            member.sync_future = future
            if group.leader == member.member_id:
                self._complete_sync(group, request)
            return future

    def _complete_sync(self, group: Group, request: SyncGroupRequest) -> None:
        for member in group.members.values():
            member.assignment = request.assignments.get(member.member_id, frozenset())
        group.topic_partitions = dict(request.topic_partitions)
        error = self._persist(group)
        if error is not ErrorCode.NONE:
            # Kafka resets the assignment and fails the waiting members; they rejoin.
            for member in group.members.values():
                member.assignment = frozenset()
                if member.sync_future is not None:
                    member.sync_future.set_result(SyncGroupResponse(error))
                    member.sync_future = None
            return
        group.transition(GroupState.STABLE)
        now = self.clock.monotonic()
        protocol = group.protocol or ""
        for member in group.members.values():
            member.deadline = now + member.session_timeout
            if member.sync_future is not None:
                member.sync_future.set_result(
                    SyncGroupResponse(ErrorCode.NONE, member.assignment, protocol)
                )
                member.sync_future = None
        members = group.by_join_order()
        cooperative = all(
            rebalance_protocol(m.protocols) is RebalanceProtocol.COOPERATIVE for m in members
        )
        round_ = AssignmentRound(
            group_id=group.group_id,
            generation=group.generation,
            protocol=protocol,
            cooperative=cooperative,
            owned={m.member_id: m.subscription.owned for m in members},
            assigned={m.member_id: m.assignment for m in members},
            topic_partitions=group.topic_partitions,
            time=now,
        )
        self.observers.assignment_synced(round_)
        if round_.revocations_pending():
            return  # members revoke, then rejoin for the next round of this rebalance
        episode = group.episode or RebalanceEpisode(now, "sync")
        group.episode = None
        self.observers.rebalance_completed(
            RebalanceCompleted(
                group_id=group.group_id,
                generation=group.generation,
                protocol=protocol,
                reason=episode.reason,
                rounds=max(1, episode.rounds),
                started=episode.started,
                completed=now,
                assignment=round_.assigned,
            )
        )

    # -- Heartbeat, LeaveGroup -----------------------------------------------------------------

    def heartbeat(self, request: HeartbeatRequest) -> HeartbeatResponse:
        group = self._member_group(request.group_id, create=False)
        if isinstance(group, ErrorCode):
            return HeartbeatResponse(group)
        with group.lock:
            if group.is_(GroupState.DEAD):
                return HeartbeatResponse(ErrorCode.NOT_COORDINATOR)
            if group.is_(GroupState.EMPTY):
                return HeartbeatResponse(ErrorCode.UNKNOWN_MEMBER_ID)
            error = self._check_member(group, request.member_id, request.group_instance_id)
            if error is not ErrorCode.NONE:
                return HeartbeatResponse(error)
            if request.generation != group.generation:
                return HeartbeatResponse(ErrorCode.ILLEGAL_GENERATION)
            member = group.members[request.member_id]
            member.deadline = self.clock.monotonic() + member.session_timeout
            if group.is_(GroupState.PREPARING_REBALANCE):
                return HeartbeatResponse(ErrorCode.REBALANCE_IN_PROGRESS)
            return HeartbeatResponse(ErrorCode.NONE)

    def leave_group(self, request: LeaveGroupRequest) -> LeaveGroupResponse:
        group = self._member_group(request.group_id, create=False)
        if isinstance(group, ErrorCode):
            return LeaveGroupResponse(group)
        with group.lock:
            if group.is_(GroupState.DEAD):
                return LeaveGroupResponse(ErrorCode.NOT_COORDINATOR)
            error = self._check_member(group, request.member_id, request.group_instance_id)
            member = group.members.get(request.member_id)
            if error is not ErrorCode.NONE or member is None:
                return LeaveGroupResponse(error)
            self._remove_member(group, member, f"member {member.member_id} left")
            return LeaveGroupResponse(ErrorCode.NONE)

    # -- offsets -------------------------------------------------------------------------------

    @property
    def offset_storage(self) -> OffsetStorage:
        """The configured offset storage on this broker's session (created on first use)."""
        if self._offsets is None:
            factory = get_plugin_manager().offset_store(self.config.offset_storage)
            if getattr(factory, "name", None) == "offsets-topic":
                # Records go to the group's coordinator partition: the same count it uses.
                self._offsets = factory(self.store, num_partitions=self.offsets_partitions())
            else:
                self._offsets = factory(self.store)
        return self._offsets

    def offset_commit(self, request: OffsetCommitRequest) -> OffsetCommitResponse:
        """Store offsets for a current member of the current generation (or, for a consumer
        outside the group, ``generation=-1`` and ``member_id=""``, while the group is empty)."""
        outside = request.generation == NO_GENERATION and request.member_id == UNKNOWN_MEMBER_ID
        group = self._member_group(request.group_id, create=outside)
        if isinstance(group, ErrorCode):
            return OffsetCommitResponse(group)
        with group.lock:  # no rebalance can complete while the commit is being written
            if group.is_(GroupState.DEAD):
                return OffsetCommitResponse(ErrorCode.NOT_COORDINATOR)
            if not (outside and not group.members):
                error = self._check_member(group, request.member_id, request.group_instance_id)
                if error is not ErrorCode.NONE:
                    return OffsetCommitResponse(error)
                if request.generation != group.generation:
                    return OffsetCommitResponse(ErrorCode.ILLEGAL_GENERATION)
                if group.is_(GroupState.COMPLETING_REBALANCE):
                    return OffsetCommitResponse(ErrorCode.REBALANCE_IN_PROGRESS)
                member = group.members[request.member_id]
                member.deadline = self.clock.monotonic() + member.session_timeout
            if not request.offsets:
                return OffsetCommitResponse(ErrorCode.NONE)
            return OffsetCommitResponse(self._store_offsets(group, request))

    def _store_offsets(self, group: Group, request: OffsetCommitRequest) -> ErrorCode:
        """Write the offsets fenced by the offsets partition's state version (as the group
        metadata), so a broker that has lost the partition cannot store them."""

        def attempt(fence: Check) -> bool:
            self.offset_storage.commit(request.group_id, request.offsets, fence=[fence])
            return True

        return self._fenced_write(
            group.partition, f"group {request.group_id!r}: offset commit", attempt, attempts=3
        )

    def offset_fetch(self, request: OffsetFetchRequest) -> OffsetFetchResponse:
        found = self._lookup(request.group_id, create=False)
        if isinstance(found, ErrorCode):
            return OffsetFetchResponse(found)
        try:
            offsets = self.offset_storage.fetch(request.group_id, request.partitions)
        except StoreError as exc:
            log.warning("group %r: offset fetch failed: %s", request.group_id, exc)
            return OffsetFetchResponse(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return OffsetFetchResponse(ErrorCode.NONE, offsets)

    # -- DescribeGroups ------------------------------------------------------------------------

    def describe_group(self, group_id: str) -> GroupDescription:
        found = self._lookup(group_id, create=False)
        if isinstance(found, ErrorCode):
            return GroupDescription(group_id, GroupState.DEAD)
        if found is None:
            return GroupDescription(group_id, GroupState.DEAD, coordinator=self.broker_id)
        group = found
        with group.lock:
            return GroupDescription(
                group_id=group_id,
                state=group.state,
                generation=group.generation,
                protocol_type=group.protocol_type,
                protocol=group.protocol,
                leader=group.leader,
                coordinator=None if group.is_(GroupState.DEAD) else self.broker_id,
                members=tuple(
                    MemberDescription(
                        m.member_id,
                        m.group_instance_id,
                        m.client_id,
                        m.subscription.topics,
                        m.assignment,
                    )
                    for m in group.by_join_order()
                ),
            )

    # -- persistence ---------------------------------------------------------------------------

    def _persist(self, group: Group) -> ErrorCode:
        """Write the group's metadata, fenced by the offsets partition's state version."""
        path = metadata.group_path(group.group_id)
        data = metadata.encode(group.to_metadata())
        create = False

        def attempt(fence: Check) -> bool:
            nonlocal create
            write: Op = Create(path, data) if create else SetData(path, data)
            try:
                self.store.commit([fence, write])
                return True
            except NoNodeError as exc:
                if exc.op_index != 1:
                    raise
                self.store.ensure_path(metadata.GROUPS_ROOT)
                create = True
            except NodeExistsError:
                create = False
            return False

        return self._fenced_write(
            group.partition, f"group {group.group_id!r}: metadata write", attempt, attempts=10
        )

    def _fenced_write(
        self, partition: int, what: str, attempt: Callable[[Check], bool], *, attempts: int
    ) -> ErrorCode:
        """Run ``attempt(fence)`` until it reports done; ``fence`` checks the version of the
        offsets partition's state node this broker hosts. A failed fence (op 0) re-reads the state
        and goes on only while this broker still leads the partition (an ISR change moved the
        version); a broker that lost it answers NOT_COORDINATOR and has written nothing."""
        state_path = states.state_path((OFFSETS_TOPIC, partition))
        for _ in range(attempts):
            with self._lock:
                version = self._hosted.get(partition)
            if version is None:
                return ErrorCode.NOT_COORDINATOR
            try:
                if attempt(Check(state_path, version)):
                    return ErrorCode.NONE
            except (BadVersionError, NoNodeError) as exc:
                if exc.op_index != 0:
                    log.warning("%s failed: %s", what, exc)
                    return ErrorCode.COORDINATOR_NOT_AVAILABLE
                if not self._still_leader(partition):
                    return ErrorCode.NOT_COORDINATOR
            except StoreError as exc:
                log.warning("%s failed: %s", what, exc)
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode.COORDINATOR_NOT_AVAILABLE

    def _still_leader(self, partition: int) -> bool:
        """After a failed fence check: re-read the state; keep hosting only if still leader."""
        path = states.state_path((OFFSETS_TOPIC, partition))
        try:
            data, stat = self.store.get(path)
        except StoreError:
            self._lose(partition)
            return False
        state = states.decode_state(path, data, stat.version)
        if state.leader != self.broker_id:
            self._lose(partition)
            return False
        with self._lock:
            if partition in self._hosted:
                self._hosted[partition] = stat.version
        return True

    def _lose(self, partition: int) -> None:
        # Called with a group lock held: the ticker unloads (taking every group's lock) later.
        with self._lock:
            self._lost.add(partition)

    # -- deadlines -----------------------------------------------------------------------------

    def _tick_loop(self) -> None:
        while not self._closed.wait(TICK):
            try:
                self._tick()
            except Exception:
                log.exception("broker %s: group coordinator tick failed", self.broker_id)

    def _tick(self) -> None:
        with self._lock:
            lost = list(self._lost)
            self._lost.clear()
            groups = list(self._groups.values())
        for partition in lost:
            self._unload(partition)
        for group in groups:
            with group.lock:
                self._expire(group)

    def _expire(self, group: Group) -> None:
        if group.is_(GroupState.DEAD, GroupState.EMPTY):
            return
        now = self.clock.monotonic()
        for member in list(group.members.values()):
            waiting = member.awaiting_join or member.awaiting_sync
            if not waiting and now > member.deadline and member.member_id in group.members:
                log.info("group %r: member %s session timed out", group.group_id, member.member_id)
                self._remove_member(group, member, f"member {member.member_id} session timed out")
        self._maybe_complete_join(group)

    def __repr__(self) -> str:
        return f"<GroupCoordinator broker={self.broker_id} partitions={self.hosted_partitions()}>"

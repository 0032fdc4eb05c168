"""The group coordinator a broker hosts (Kafka's ``GroupCoordinator``), composed by role:

* :mod:`~coordkit.engine.groups.hosting` — which offsets partitions (and so which groups) this
  broker coordinates, following their leadership;
* :mod:`~coordkit.engine.groups.persistence` — group metadata and offsets, fenced by the offsets
  partition's state version;
* :mod:`~coordkit.engine.groups.rebalance` — the membership state machine and its timers;
* :mod:`~coordkit.engine.groups.join` — the JoinGroup API (new, known and static members);
* :mod:`~coordkit.engine.groups.lookup` — FindCoordinator and topic metadata (any broker);
* :mod:`~coordkit.engine.groups.listing` — DescribeGroups and ListGroups;
* :mod:`~coordkit.engine.groups.modern` — KIP-848's consumer groups (ConsumerGroupHeartbeat,
  ConsumerGroupDescribe), hosted beside the classic ones: one group id, one kind;
* :mod:`~coordkit.engine.share_groups` — KIP-932's share groups (ShareGroupHeartbeat,
  ShareGroupDescribe), hosted beside them too.

This module answers the classic protocol's requests (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, OffsetFetch) and hands the rest over: it finds the group, takes its lock and hands
over to the part that owns the step. A ticker thread, reading the engine clock, expires
sessions and ends join rounds at their deadlines.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable, Iterable, Sequence

from coordkit.engine.config import EngineConfig
from coordkit.engine.events import EngineObserver, StateChange
from coordkit.engine.group_configs import GroupConfigs
from coordkit.engine.groups import metadata
from coordkit.engine.groups.deletion import GroupDeletion
from coordkit.engine.groups.events import GroupObserver
from coordkit.engine.groups.hosting import HostedGroup, PartitionHosting
from coordkit.engine.groups.join import JoinHandler
from coordkit.engine.groups.listing import GroupListings
from coordkit.engine.groups.lookup import CoordinatorLookup
from coordkit.engine.groups.membership import Group
from coordkit.engine.groups.modern.group import ConsumerGroup
from coordkit.engine.groups.modern.heartbeat import ConsumerGroupHeartbeats
from coordkit.engine.groups.modern.protocol import (
    ConsumerGroupDescription,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from coordkit.engine.groups.modern.service import ConsumerGroupService, make_persist
from coordkit.engine.groups.modern.topics import TopicsImage
from coordkit.engine.groups.persistence import GroupPersistence
from coordkit.engine.groups.protocol import (
    NO_GENERATION,
    UNKNOWN_MEMBER_ID,
    ErrorCode,
    FindCoordinatorResponse,
    GroupDescription,
    GroupListing,
    GroupState,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinFuture,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncFuture,
    SyncGroupRequest,
    SyncGroupResponse,
    join_done,
    sync_done,
)
from coordkit.engine.groups.rebalance import Rebalancer
from coordkit.engine.groups.topic_metadata import TopicMetadataWatch
from coordkit.engine.groups.txn_offset_commit import validate_txn_offset_commit
from coordkit.engine.share_groups.events import ShareGroupListeners
from coordkit.engine.share_groups.group import ShareGroup
from coordkit.engine.share_groups.heartbeat import ShareGroupHeartbeats, ShareGroupSettings
from coordkit.engine.share_groups.protocol import (
    ShareGroupDescription,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from coordkit.engine.share_groups.shard import ShareGroupShard
from coordkit.engine.strategies import Strategies
from coordkit.errors import StoreError
from coordkit.kafka.coordinators import OFFSETS_TOPIC
from coordkit.store import MetadataStore
from coordkit.strategies.offsets import OffsetStorage
from coordkit.support.clock import Clock

log = logging.getLogger("coordkit.engine.groups")

#: Real seconds between two sweeps of session and rebalance deadlines.
TICK = 0.01


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
        strategies: Strategies,
    ):
        self.broker_id = broker_id
        self.store = store
        self.config = config
        self.clock = clock
        self.observers = observers
        self.strategies = strategies
        self._closed = threading.Event()
        self._ticker: threading.Thread | None = None
        self.hosting = PartitionHosting(
            broker_id, store, config, strategies.group_coordinator, is_closed=self._closed.is_set
        )
        self.persistence = GroupPersistence(
            broker_id, store, config, clock, self.hosting, strategies.offset_storage
        )
        self.rebalancer = Rebalancer(
            config,
            clock,
            observers,
            strategies.group_leader,
            self.persistence,
            strategies.assignors,
        )
        self.joins = JoinHandler(config, clock, self.rebalancer)
        self.deletion = GroupDeletion(self.persistence, self.hosting)
        self.lookup = CoordinatorLookup(
            broker_id, store, config, strategies, self.hosting, lambda: self.closed
        )
        self.listings = GroupListings(broker_id, store, self.hosting, self._lookup,
                                      lambda: self.closed)  # fmt: skip
        # KIP-848's consumer groups, with the server assignors group.consumer.assignors names.
        self.topics_image = TopicsImage(store)
        # Kafka 4's per-group configs (session timeout, heartbeat interval), followed by watches.
        self.group_configs = GroupConfigs(store)
        self.consumer_groups = ConsumerGroupService(
            ConsumerGroupHeartbeats(
                config,
                clock,
                {n: strategies.server_assignor(n) for n in config.consumer_group_assignors},
                self.topics_image,
                self.group_configs,
            ),
            self.hosting,
            lambda group_id, create: self._lookup(group_id, create=create),
            make_persist(
                store, self.persistence.fenced_write, metadata.group_path, config.write_batch_ops
            ),
        )

        # KIP-932's share groups, with the share assignor group.share.assignors names first.
        self.share_groups = ShareGroupShard(
            ShareGroupHeartbeats(
                ShareGroupSettings(
                    config.share_group_session_timeout,
                    config.share_group_heartbeat_interval,
                    config.share_group_max_size,
                    config.share_group_assignors[0],
                ),
                strategies.share_assignors,
                self.topics_image,
                self.group_configs,
            ),
            self.hosting,
            lambda group_id, create: self._lookup(group_id, create=create),
            store,
            self.persistence.fenced_write,
            metadata.group_path,
            clock.monotonic,
        )

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def share_group_listeners(self) -> ShareGroupListeners:
        """Who is told of share-group members leaving and share groups deleted (the broker's
        share-partition manager registers here)."""
        return self.share_groups.listeners

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
        self._kill(self.hosting.forget_all())
        self.group_configs.close()
        ticker = self._ticker
        if ticker is not None and ticker is not threading.current_thread():
            ticker.join(timeout=5)

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def hosted_partitions(self) -> list[int]:
        return self.hosting.partitions()

    def partition_for(self, group_id: str) -> int:
        return self.hosting.partition_for(group_id)

    def offsets_partitions(self) -> int:
        """Partitions of the offsets topic (the count it has once it exists)."""
        return self.hosting.offsets_partitions()

    @property
    def offset_storage(self) -> OffsetStorage:
        return self.persistence.offset_storage

    # -- engine events (hosting follows offsets-partition leadership) --------------------------

    def partition_states_changed(self, changes: Sequence[StateChange]) -> None:
        self._kill(self.hosting.observe(changes))

    def partition_states_known(self, states: Sequence[StateChange]) -> None:
        self.partition_states_changed(states)

    def broker_stopped(self, broker_id: int, controlled: bool) -> None:
        if broker_id == self.broker_id:
            self.close()

    def topic_deleted(self, topic: str) -> None:
        if topic == OFFSETS_TOPIC:
            self._kill(self.hosting.forget_all())

    def _kill(self, groups: Iterable[HostedGroup]) -> None:
        """Groups of a partition no longer hosted here: Dead, their waiting requests answered
        NOT_COORDINATOR (the members look the coordinator up again)."""
        for group in groups:
            if isinstance(group, ConsumerGroup | ShareGroup):
                with group.lock:
                    group.dead = True
                continue
            with group.lock:
                group.state = GroupState.DEAD
                for member in group.members.values():
                    self.rebalancer.fail_pending(member, ErrorCode.NOT_COORDINATOR)

    # -- finding groups ------------------------------------------------------------------------

    def _lookup(self, group_id: str, *, create: bool) -> HostedGroup | ErrorCode | None:
        """The hosted group (loading it, or creating it when ``create``); ``None`` if it does not
        exist; an error code when this broker cannot serve it."""
        if self.closed:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        try:
            path = metadata.group_path(group_id)
        except ValueError:
            return ErrorCode.INVALID_GROUP_ID
        partition = self.hosting.partition_for(group_id)
        if not self.hosting.hosts(partition):
            return ErrorCode.NOT_COORDINATOR
        group = self.hosting.group(group_id)
        if group is not None:
            return group
        try:
            loaded = self.persistence.load(group_id, path, partition)
        except StoreError:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if loaded is None and not create:
            return None
        adopted = self.hosting.adopt(loaded or Group(group_id, partition))
        return ErrorCode.NOT_COORDINATOR if adopted is None else adopted

    def _member_group(self, group_id: str, *, create: bool) -> Group | ErrorCode:
        """The classic group a member request concerns, or the error to answer
        (UNKNOWN_MEMBER_ID when this coordinator has no such group). An empty consumer group
        becomes a classic group when a classic member joins (Kafka's default migration policy);
        classic members in a consumer group with members are not served."""
        found = self._lookup(group_id, create=create)
        if isinstance(found, ConsumerGroup):
            return self._classic_in_place_of(found, create=create)
        if isinstance(found, ShareGroup):  # a share group's id: not a classic group's
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL if create else ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.UNKNOWN_MEMBER_ID if found is None else found

    def _classic_in_place_of(self, group: ConsumerGroup, *, create: bool) -> Group | ErrorCode:
        with group.lock:
            if not create:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if group.members or group.dead:
                return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
            classic = Group(group.group_id, group.partition)
            if not self.hosting.replace(group, classic):
                return ErrorCode.NOT_COORDINATOR
            group.dead = True
            log.info("group %r: empty consumer group becomes a classic group", group.group_id)
            return classic

    # -- FindCoordinator and metadata (any broker answers: see .lookup) ------------------------

    def find_coordinator(self, group_id: str) -> FindCoordinatorResponse:
        return self.lookup.find_coordinator(group_id)

    def ensure_offsets_topic(self) -> bool:
        return self.lookup.ensure_offsets_topic()

    def topic_partitions(self, topics: Sequence[str]) -> dict[str, int]:
        return self.lookup.topic_partitions(topics)

    def watch_topic_metadata(
        self, topics: Iterable[str], on_change: Callable[[], object]
    ) -> TopicMetadataWatch:
        return self.lookup.watch_topic_metadata(topics, on_change)

    # -- JoinGroup, SyncGroup -------------------------------------------------------------------

    def join_group(self, request: JoinGroupRequest) -> JoinFuture:
        """Join a round; the future completes when the round ends (or at once on an error)."""
        limits = (self.config.group_min_session_timeout, self.config.group_max_session_timeout)
        if not limits[0] <= request.session_timeout <= limits[1]:
            return join_done(JoinGroupResponse(ErrorCode.INVALID_SESSION_TIMEOUT))
        group = self._member_group(request.group_id, create=request.member_id == UNKNOWN_MEMBER_ID)
        if isinstance(group, ErrorCode):
            return join_done(JoinGroupResponse(group))
        with group.lock:
            if group.is_(GroupState.DEAD):
                return join_done(JoinGroupResponse(ErrorCode.NOT_COORDINATOR))
            return self.joins.handle(group, request)

    def sync_group(self, request: SyncGroupRequest) -> SyncFuture:
        """This member's assignment for ``request.generation``; the future completes when the
        leader's SyncGroup has been stored (at once for the leader, or on an error)."""
        group = self._member_group(request.group_id, create=False)
        if isinstance(group, ErrorCode):
            return sync_done(SyncGroupResponse(group))
        with group.lock:
            if group.is_(GroupState.DEAD):
                return sync_done(SyncGroupResponse(ErrorCode.NOT_COORDINATOR))
            error = self.rebalancer.check_member(
                group, request.member_id, request.group_instance_id
            )
            member = group.members.get(request.member_id)
            if error is not ErrorCode.NONE or member is None:
                return sync_done(SyncGroupResponse(error))
            if request.protocol_type not in (None, group.protocol_type) or (
                request.protocol not in (None, group.protocol)
                and group.is_(GroupState.COMPLETING_REBALANCE, GroupState.STABLE)
            ):
                return sync_done(SyncGroupResponse(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            if request.generation != group.generation:
                return sync_done(SyncGroupResponse(ErrorCode.ILLEGAL_GENERATION))
            if group.is_(GroupState.PREPARING_REBALANCE):
                return sync_done(SyncGroupResponse(ErrorCode.REBALANCE_IN_PROGRESS))
            member.deadline = self.clock.monotonic() + member.session_timeout
            if group.is_(GroupState.STABLE):
                return sync_done(
                    SyncGroupResponse(
                        ErrorCode.NONE, member.assignment, group.protocol, member.raw_assignment
                    )
                )
            self.rebalancer.fail_pending(member, ErrorCode.REBALANCE_IN_PROGRESS)
            future: SyncFuture = concurrent.futures.Future()
            member.sync_future = future
            if group.leader == member.member_id:
                self.rebalancer.complete_sync(group, request)
            return future

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
            error = self.rebalancer.check_member(
                group, request.member_id, request.group_instance_id
            )
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
        """A member leaves; a static member may also be named by its ``group_instance_id`` alone
        (``member_id`` ``""``: LeaveGroup v3+, an admin removing it)."""
        group = self._member_group(request.group_id, create=False)
        if isinstance(group, ErrorCode):
            return LeaveGroupResponse(group)
        with group.lock:
            if group.is_(GroupState.DEAD):
                return LeaveGroupResponse(ErrorCode.NOT_COORDINATOR)
            member_id = request.member_id
            if member_id == UNKNOWN_MEMBER_ID and request.group_instance_id is not None:
                member_id = group.static.get(request.group_instance_id, UNKNOWN_MEMBER_ID)
            error = self.rebalancer.check_member(group, member_id, request.group_instance_id)
            member = group.members.get(member_id)
            if error is not ErrorCode.NONE or member is None:
                return LeaveGroupResponse(error)
            self.rebalancer.remove_member(group, member, f"member {member.member_id} left")
            return LeaveGroupResponse(ErrorCode.NONE)

    # -- offsets -------------------------------------------------------------------------------

    def offset_commit(self, request: OffsetCommitRequest) -> OffsetCommitResponse:
        """Store offsets for a current member of the current generation (or, for a consumer
        outside the group, ``generation=-1`` and ``member_id=""``, while the group is empty)."""
        outside = request.generation == NO_GENERATION and request.member_id == UNKNOWN_MEMBER_ID
        found = self._lookup(request.group_id, create=outside)
        if isinstance(found, ConsumerGroup):
            return self._consumer_group_commit(found, request)
        if isinstance(found, ShareGroup):  # share groups commit no offsets
            return OffsetCommitResponse(ErrorCode.GROUP_ID_NOT_FOUND)
        group = ErrorCode.UNKNOWN_MEMBER_ID if found is None else found
        if isinstance(group, ErrorCode):
            return OffsetCommitResponse(group)
        with group.lock:  # no rebalance can complete while the commit is being written
            if group.is_(GroupState.DEAD):
                return OffsetCommitResponse(ErrorCode.NOT_COORDINATOR)
            if not (outside and not group.members):
                error = self.rebalancer.check_member(
                    group, request.member_id, request.group_instance_id
                )
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
            return OffsetCommitResponse(self.persistence.store_offsets(group, request.offsets))

    def _consumer_group_commit(
        self, group: ConsumerGroup, request: OffsetCommitRequest
    ) -> OffsetCommitResponse:
        """OffsetCommit to a consumer group: the generation is the member epoch."""
        with group.lock:
            if group.dead:
                return OffsetCommitResponse(ErrorCode.NOT_COORDINATOR)
            error, refused = self.consumer_groups.validate_offset_commit(
                group, request.member_id, request.generation, request.offsets
            )
            if error is not ErrorCode.NONE:
                return OffsetCommitResponse(error)
            offsets = {tp: o for tp, o in request.offsets.items() if tp not in refused}
            if not offsets:
                return OffsetCommitResponse(ErrorCode.NONE, refused)
            stored = self.persistence.store_offsets(group, offsets)
            return OffsetCommitResponse(stored, refused)

    def offset_fetch(self, request: OffsetFetchRequest) -> OffsetFetchResponse:
        found = self._lookup(request.group_id, create=False)
        if isinstance(found, ErrorCode):
            return OffsetFetchResponse(found)
        if isinstance(found, ConsumerGroup):
            with found.lock:
                error = self.consumer_groups.validate_offset_fetch(
                    found, request.member_id, request.member_epoch
                )
            if error is not ErrorCode.NONE:
                return OffsetFetchResponse(error)
        try:
            offsets = self.persistence.fetch_offsets(request.group_id, request.partitions)
        except StoreError as exc:
            log.warning("group %r: offset fetch failed: %s", request.group_id, exc)
            return OffsetFetchResponse(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return OffsetFetchResponse(ErrorCode.NONE, offsets)

    def validate_txn_offset_commit(
        self, group_id: str, member_id: str, generation: int, group_instance_id: str | None
    ) -> ErrorCode:
        """TxnOffsetCommit's member check (see :mod:`.txn_offset_commit`)."""
        found = self._lookup(group_id, create=False)
        return validate_txn_offset_commit(found, member_id, generation, group_instance_id)

    # -- the consumer group protocol (KIP-848) --------------------------------------------------

    def consumer_group_heartbeat(
        self, request: ConsumerGroupHeartbeatRequest
    ) -> ConsumerGroupHeartbeatResponse:
        return self.consumer_groups.heartbeat(request)

    def consumer_group_describe(self, group_ids: Sequence[str]) -> list[ConsumerGroupDescription]:
        return self.consumer_groups.describe(group_ids)

    # -- the share group protocol (KIP-932) -----------------------------------------------------

    def share_group_heartbeat(
        self, request: ShareGroupHeartbeatRequest
    ) -> ShareGroupHeartbeatResponse:
        return self.share_groups.heartbeat(request)

    def share_group_describe(self, group_ids: Sequence[str]) -> list[ShareGroupDescription]:
        return self.share_groups.describe(group_ids)

    def empty_share_group(self, group_id: str) -> tuple[int, str | None]:
        """The share group an AlterShareGroupOffsets changes: found, or made empty and stored."""
        return self.share_groups.empty_group(group_id)

    # -- DescribeGroups, ListGroups (see .listing) ----------------------------------------------

    def describe_group(self, group_id: str) -> GroupDescription:
        return self.listings.describe_group(group_id)

    def list_groups(self) -> list[GroupListing]:
        """Raises :class:`StoreError` when the store cannot list the groups."""
        return self.listings.list_groups()

    # -- DeleteGroups (see .deletion) -----------------------------------------------------------

    def delete_group(self, group_id: str) -> int:
        """Delete an empty group and its offsets; Kafka's error code (NON_EMPTY_GROUP,
        GROUP_ID_NOT_FOUND, NOT_COORDINATOR, ...)."""
        found = self._lookup(group_id, create=False)
        if isinstance(found, ErrorCode):
            return found
        if isinstance(found, ShareGroup):
            return self.share_groups.delete(found)
        return self.deletion.delete(group_id, found)

    def delete_offsets(
        self, group_id: str, asked: dict[str, list[int]]
    ) -> tuple[int, dict[str, int]]:
        """OffsetDelete: the request's error code and each topic's (see .deletion)."""
        found = self._lookup(group_id, create=False)
        if isinstance(found, ErrorCode):
            return found, {}
        if isinstance(found, ShareGroup):  # DeleteShareGroupOffsets is the share groups' api
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        return self.deletion.delete_offsets(group_id, found, asked)

    # -- deadlines -----------------------------------------------------------------------------

    def _tick_loop(self) -> None:
        while not self._closed.wait(TICK):
            try:
                self._tick()
            except Exception:
                log.exception("broker %s: group coordinator tick failed", self.broker_id)

    def _tick(self) -> None:
        for partition in self.hosting.take_lost():
            self._kill(self.hosting.unload(partition))
        now = self.clock.monotonic()
        for group in self.hosting.groups():
            if isinstance(group, ConsumerGroup):
                self.consumer_groups.expire(group, now)
                continue
            if isinstance(group, ShareGroup):
                self.share_groups.expire(group, now)
                continue
            with group.lock:
                self.rebalancer.expire(group)

    def __repr__(self) -> str:
        return f"<GroupCoordinator broker={self.broker_id} partitions={self.hosted_partitions()}>"

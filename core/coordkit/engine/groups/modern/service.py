"""The consumer group protocol's entry points on a broker's group coordinator: finding or creating
the group (or taking over an empty classic group of the same id), answering under the group's
lock, persisting what changed, describing, validating offset commits and fetches by member epoch,
and sweeping deadlines.

:class:`~coordkit.engine.groups.coordinator.GroupCoordinator` composes it; group lookup and the
fenced writes are the coordinator's, handed in.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence

from coordkit.engine.groups.hosting import HostedGroup, PartitionHosting
from coordkit.engine.groups.membership import Group
from coordkit.engine.groups.modern import persistence as stored
from coordkit.engine.groups.modern.group import ConsumerGroup
from coordkit.engine.groups.modern.heartbeat import ConsumerGroupHeartbeats
from coordkit.engine.groups.modern.member import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
)
from coordkit.engine.groups.modern.protocol import (
    ConsumerGroupDescription,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ConsumerMemberDescription,
    HeartbeatError,
)
from coordkit.engine.groups.protocol import ErrorCode, GroupState
from coordkit.engine.share_groups.group import ShareGroup
from coordkit.errors import StoreError
from coordkit.kafka.model import TopicPartition
from coordkit.store import MetadataStore

log = logging.getLogger("coordkit.engine.groups")

#: ``(group id, create?)`` -> the hosted group, ``None`` (no such group) or why not served here.
Lookup = Callable[[str, bool], HostedGroup | ErrorCode | None]
#: Persist a consumer group: :func:`coordkit.engine.groups.modern.persistence.persist` bound to
#: the coordinator's store and fence.
Persist = Callable[[ConsumerGroup], ErrorCode]


class ConsumerGroupService:
    def __init__(
        self,
        heartbeats: ConsumerGroupHeartbeats,
        hosting: PartitionHosting,
        lookup: Lookup,
        persist: Persist,
    ):
        self.heartbeats = heartbeats
        self.hosting = hosting
        self._lookup = lookup
        self._persist = persist

    # -- ConsumerGroupHeartbeat ------------------------------------------------------------------

    def heartbeat(self, request: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
        try:
            self.heartbeats.validate(request)
        except HeartbeatError as exc:
            return ConsumerGroupHeartbeatResponse(exc.error, exc.message)
        joining = request.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        group = self._group(request.group_id, create=joining)
        if isinstance(group, ConsumerGroupHeartbeatResponse):
            return group
        with group.lock:
            if group.dead or self.hosting.group(group.group_id) is not group:
                return ConsumerGroupHeartbeatResponse(ErrorCode.NOT_COORDINATOR)
            try:
                if request.member_epoch in (
                    LEAVE_GROUP_MEMBER_EPOCH,
                    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                ):
                    response = self.heartbeats.leave(group, request)
                else:
                    response = self.heartbeats.heartbeat(group, request)
            except HeartbeatError as exc:
                self._settle_failed(group)
                return ConsumerGroupHeartbeatResponse(exc.error, exc.message)
            error = self._persist(group)
            if error is not ErrorCode.NONE:
                # What is in memory was not stored: the next request loads the group as stored.
                self.hosting.replace(group, None)
                return ConsumerGroupHeartbeatResponse(error)
            return response

    def _group(
        self, group_id: str, *, create: bool
    ) -> ConsumerGroup | ConsumerGroupHeartbeatResponse:
        found = self._lookup(group_id, False)
        if isinstance(found, ErrorCode):
            return ConsumerGroupHeartbeatResponse(found)
        if isinstance(found, ConsumerGroup):
            return found
        if found is None:
            if not create:
                return ConsumerGroupHeartbeatResponse(
                    ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."
                )
            partition = self.hosting.partition_for(group_id)
            adopted = self.hosting.adopt(ConsumerGroup(group_id, partition))
            if adopted is None:
                return ConsumerGroupHeartbeatResponse(ErrorCode.NOT_COORDINATOR)
            if isinstance(adopted, ConsumerGroup):
                return adopted
            found = adopted
        if isinstance(found, ShareGroup):
            return ConsumerGroupHeartbeatResponse(
                ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group."
            )
        # A classic group of the same id: an empty one becomes a consumer group (Kafka's
        # default migration policy); one with members is not a consumer group.
        classic: Group = found
        with classic.lock:
            if create and not classic.members and not classic.is_(GroupState.DEAD):
                group = ConsumerGroup(group_id, classic.partition)
                group.persisted_header = b"classic"  # its node exists: written over
                if self.hosting.replace(classic, group):
                    classic.state = GroupState.DEAD
                    log.info("group %r: empty classic group becomes a consumer group", group_id)
                    return group
                return ConsumerGroupHeartbeatResponse(ErrorCode.NOT_COORDINATOR)
        return ConsumerGroupHeartbeatResponse(
            ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group."
        )

    def _settle_failed(self, group: ConsumerGroup) -> None:
        """After a refused request: a group created for it and left empty is forgotten; one whose
        memory may have moved past the store is loaded again by the next request."""
        changed = bool(group.dirty_members or group.removed_members)
        if changed or (not group.members and group.persisted_header is None):
            self.hosting.replace(group, None)

    # -- ConsumerGroupDescribe -------------------------------------------------------------------

    def describe(self, group_ids: Sequence[str]) -> list[ConsumerGroupDescription]:
        return [self._describe(group_id) for group_id in group_ids]

    def _describe(self, group_id: str) -> ConsumerGroupDescription:
        found = self._lookup(group_id, False)
        if isinstance(found, ErrorCode):
            return ConsumerGroupDescription(group_id, found, state="")
        if found is None:
            return ConsumerGroupDescription(
                group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", state=""
            )
        if not isinstance(found, ConsumerGroup):
            return ConsumerGroupDescription(
                group_id, ErrorCode.GROUP_ID_NOT_FOUND,
                f"Group {group_id} is not a consumer group.", state="",
            )  # fmt: skip
        group = found
        with group.lock:
            if group.dead:
                return ConsumerGroupDescription(group_id, ErrorCode.NOT_COORDINATOR, state="")
            return ConsumerGroupDescription(
                group_id=group_id,
                state=group.state.value,
                group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch,
                assignor_name=group.assignor_name or self.heartbeats.default_assignor,
                members=tuple(
                    ConsumerMemberDescription(
                        member_id=m.member_id,
                        instance_id=m.instance_id,
                        rack_id=m.rack_id,
                        member_epoch=m.member_epoch,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        subscribed_topic_names=m.subscribed_topic_names,
                        subscribed_topic_regex=m.subscribed_topic_regex,
                        # Kafka shows what the member holds: kept and still to revoke.
                        assignment=m.owned(),
                        target_assignment=group.target.get(m.member_id, {}),
                        state=m.state,
                    )
                    for m in group.members.values()
                ),
            )

    # -- offsets (Kafka's ``ConsumerGroup.validateOffsetCommit`` / ``validateOffsetFetch``) -------

    @staticmethod
    def validate_offset_commit(
        group: ConsumerGroup, member_id: str, epoch: int, partitions: Iterable[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """The commit's error, and the partitions refused alone (Kafka 4.4's
        ``validateOffsetCommit``): a commit at the member's epoch is taken whole; one at an older
        epoch, partition by partition — those the member has held since that epoch or before (a
        commit sent before its answer moved the member on); a newer epoch is stale."""
        if epoch < 0 and not group.members:
            return (
                ErrorCode.NONE,
                {},
            )  # an admin, or a consumer outside the group, on an empty group
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID, {}
        if epoch > member.member_epoch or epoch < 0:
            return ErrorCode.STALE_MEMBER_EPOCH, {}
        if epoch == member.member_epoch:
            return ErrorCode.NONE, {}
        ids = {name: topic.topic_id for name, topic in group.subscription_metadata.items()}
        refused: dict[TopicPartition, ErrorCode] = {}
        for tp in partitions:
            topic_id = ids.get(tp.topic)
            since = None if topic_id is None else group.assignment_epoch_of(
                member_id, topic_id, tp.partition
            )  # fmt: skip
            if since is None or epoch < since:
                refused[tp] = ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE, refused

    @staticmethod
    def validate_offset_fetch(group: ConsumerGroup, member_id: str | None, epoch: int) -> ErrorCode:
        if member_id is None and epoch < 0:
            return ErrorCode.NONE
        member = group.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    # -- deadlines -------------------------------------------------------------------------------

    def expire(self, group: ConsumerGroup, now: float) -> None:
        """Fence the members past their deadlines, compute a target that was held back by the
        assignment interval, and store the result (the ticker's sweep)."""
        with group.lock:
            if group.dead:
                return
            fenced = self.heartbeats.expire(group, now)
            targets = self.heartbeats.targets
            try:
                resolved = targets.refresh_regexes(group, now)
            except StoreError as exc:
                log.warning("group %r: regex subscriptions not resolved: %s", group.group_id, exc)
                resolved = False
            try:
                computed = targets.maybe_compute(group, now)
            except HeartbeatError:
                computed = False  # logged; the next heartbeat answers the error
            if not (fenced or resolved or computed):
                return
            if self._persist(group) is not ErrorCode.NONE:
                self.hosting.replace(group, None)


def make_persist(
    store: MetadataStore,
    fenced: stored.FencedWrite,
    path_of: Callable[[str], str],
    batch: int,
) -> Persist:
    def persist(group: ConsumerGroup) -> ErrorCode:
        return stored.persist(store, group, path_of(group.group_id), fenced, batch)

    return persist

"""The share-group part of Kafka's ``GroupCoordinatorShard`` on a broker's group coordinator:
finding or creating a share group (one group id, one kind: a classic or consumer group of the
same id is not a share group), answering ShareGroupHeartbeat under the group's lock, storing what
changed (fenced by the offsets partition, as every coordinator write), ShareGroupDescribe,
DeleteGroups of a share group, and the sweep of ended sessions.

Members leaving, fenced or deleted with their group are told to the registered
:class:`~coordkit.engine.share_groups.events.ShareGroupListener`\\ s once stored.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from coordkit.engine.groups.deletion import NON_EMPTY_GROUP
from coordkit.engine.groups.metadata import GROUPS_ROOT
from coordkit.engine.groups.modern.protocol import HeartbeatError
from coordkit.engine.groups.protocol import ErrorCode
from coordkit.engine.share_groups import records
from coordkit.engine.share_groups.events import ShareGroupListeners
from coordkit.engine.share_groups.group import ShareGroup
from coordkit.engine.share_groups.heartbeat import ShareGroupHeartbeats, validate
from coordkit.engine.share_groups.protocol import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    ShareGroupDescription,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
    ShareMemberDescription,
)
from coordkit.errors import NoNodeError, StoreError
from coordkit.store import Check, Create, Delete, MetadataStore, SetData

log = logging.getLogger("coordkit.engine.share_groups")

#: ``(group id, create?)`` -> the hosted group, ``None`` (no such group) or why not served here.
Lookup = Callable[[str, bool], object]
#: Runs ``attempt(fence)`` fenced by the group's offsets partition (``GroupPersistence``'s).
FencedWrite = Callable[[int, str, Callable[[Check], bool]], ErrorCode]


class Hosting(Protocol):
    """What the shard needs of the coordinator's ``PartitionHosting``."""

    def partition_for(self, group_id: str) -> int: ...
    def group(self, group_id: str) -> Any: ...
    def adopt(self, group: Any) -> Any: ...
    def replace(self, old: Any, new: Any) -> bool: ...


class ShareGroupShard:
    """Share groups on one coordinator.

    :param lookup: the coordinator's group lookup (loads stored groups of hosted partitions).
    :param path_of: a group's node path.
    """

    def __init__(
        self,
        heartbeats: ShareGroupHeartbeats,
        hosting: Hosting,
        lookup: Lookup,
        store: MetadataStore,
        fenced: FencedWrite,
        path_of: Callable[[str], str],
        monotonic: Callable[[], float],
    ):
        self.heartbeats = heartbeats
        self.hosting = hosting
        self._lookup = lookup
        self.store = store
        self._fenced = fenced
        self._path_of = path_of
        self._monotonic = monotonic
        self.listeners = ShareGroupListeners()

    # -- ShareGroupHeartbeat -------------------------------------------------------------------

    def heartbeat(self, request: ShareGroupHeartbeatRequest) -> ShareGroupHeartbeatResponse:
        try:
            validate(request)
        except HeartbeatError as exc:
            return ShareGroupHeartbeatResponse(exc.error, exc.message or None)
        joining = request.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        leaving = request.member_epoch == LEAVE_GROUP_MEMBER_EPOCH
        group = self._group(request.group_id, create=joining, leaving=leaving)
        if isinstance(group, ShareGroupHeartbeatResponse):
            return group
        with group.lock:
            if group.dead or self.hosting.group(group.group_id) is not group:
                return ShareGroupHeartbeatResponse(ErrorCode.NOT_COORDINATOR)
            try:
                if leaving:
                    response = self.heartbeats.leave(group, request)
                else:
                    response = self.heartbeats.heartbeat(group, request, self._monotonic())
            except HeartbeatError as exc:
                self._settle_failed(group)
                return ShareGroupHeartbeatResponse(exc.error, exc.message)
            error = self._persist(group)
            if error is not ErrorCode.NONE:
                self.hosting.replace(group, None)  # the next request loads it as stored
                return ShareGroupHeartbeatResponse(error)
        if leaving:
            self.listeners.member_left(group.group_id, request.member_id)
        return response

    def _group(
        self, group_id: str, *, create: bool, leaving: bool = False
    ) -> ShareGroup | ShareGroupHeartbeatResponse:
        found = self._lookup(group_id, False)
        if isinstance(found, ErrorCode):
            return ShareGroupHeartbeatResponse(found)
        if isinstance(found, ShareGroup):
            return found
        if found is not None:
            return ShareGroupHeartbeatResponse(
                ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."
            )
        if not create:
            # Kafka 4.4's words: a leave names the group, a heartbeat the share group.
            kind = "Group" if leaving else "Share group"
            return ShareGroupHeartbeatResponse(
                ErrorCode.GROUP_ID_NOT_FOUND, f"{kind} {group_id} not found."
            )
        adopted = self.hosting.adopt(ShareGroup(group_id, self.hosting.partition_for(group_id)))
        if isinstance(adopted, ShareGroup):
            return adopted
        if adopted is None:
            return ShareGroupHeartbeatResponse(ErrorCode.NOT_COORDINATOR)
        return ShareGroupHeartbeatResponse(
            ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."
        )

    def _settle_failed(self, group: ShareGroup) -> None:
        """After a refused request the group in memory may be ahead of the store: dropped, the
        next request loads it as stored (a group created for it and never stored is forgotten)."""
        if group.persisted is None or records.encode(group) != group.persisted:
            self.hosting.replace(group, None)

    # -- storing -------------------------------------------------------------------------------

    def _persist(self, group: ShareGroup) -> ErrorCode:
        data = records.encode(group)
        if data == group.persisted:
            return ErrorCode.NONE
        path = self._path_of(group.group_id)
        op = Create(path, data) if group.persisted is None else SetData(path, data)

        def attempt(fence: Check) -> bool:
            try:
                self.store.commit([fence, op])
            except NoNodeError as exc:
                if exc.op_index != 1 or not isinstance(op, Create):
                    raise
                self.store.ensure_path(GROUPS_ROOT)  # the first group ever
                return False
            return True

        try:
            error = self._fenced(group.partition, f"share group {group.group_id!r}: write", attempt)
        except StoreError as exc:
            log.warning("share group %r: write refused: %s", group.group_id, exc)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if error is ErrorCode.NONE:
            group.persisted = data
        return error

    # -- ShareGroupDescribe --------------------------------------------------------------------

    def describe(self, group_ids: Sequence[str]) -> list[ShareGroupDescription]:
        return [self._describe(group_id) for group_id in group_ids]

    def _describe(self, group_id: str) -> ShareGroupDescription:
        found = self._lookup(group_id, False)
        if isinstance(found, ErrorCode):
            return ShareGroupDescription(group_id, found)
        if found is None:
            return ShareGroupDescription(
                group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."
            )
        if not isinstance(found, ShareGroup):
            return ShareGroupDescription(
                group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group."
            )
        with found.lock:
            if found.dead:
                return ShareGroupDescription(group_id, ErrorCode.NOT_COORDINATOR)
            return ShareGroupDescription(
                group_id=group_id,
                state=found.state.value,
                group_epoch=found.group_epoch,
                assignment_epoch=found.assignment_epoch,
                assignor_name=found.assignor_name or self.heartbeats.settings.assignor,
                members=tuple(
                    ShareMemberDescription(
                        member_id=m.member_id,
                        rack_id=m.rack_id,
                        member_epoch=m.member_epoch,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        subscribed_topic_names=m.subscribed_topic_names,
                        assignment=m.assigned,
                    )
                    for m in found.members.values()
                ),
            )

    # -- AlterShareGroupOffsets ----------------------------------------------------------------

    def empty_group(self, group_id: str) -> tuple[int, str | None]:
        """Ready ``group_id`` for an offset change as Kafka's ``alterShareGroupOffsets`` does:
        found, or made and stored as an empty share group (ListGroups and DescribeGroups show it
        then); GROUP_ID_NOT_FOUND for a group of another kind, NON_EMPTY_GROUP with members."""
        group = self._group(group_id, create=True)
        if isinstance(group, ShareGroupHeartbeatResponse):
            return group.error, group.message
        with group.lock:
            if group.dead or self.hosting.group(group_id) is not group:
                return ErrorCode.NOT_COORDINATOR, None
            if group.members:
                return NON_EMPTY_GROUP, None
            error = self._persist(group)
            if error is not ErrorCode.NONE:
                self.hosting.replace(group, None)
            return error, None

    # -- DeleteGroups --------------------------------------------------------------------------

    def delete(self, group: ShareGroup) -> int:
        """Delete an empty share group (NON_EMPTY_GROUP while it has members); its share-partition
        state goes with it (the listeners are told)."""
        with group.lock:
            if group.dead:
                return ErrorCode.NOT_COORDINATOR
            if group.members:
                return NON_EMPTY_GROUP
            if group.persisted is not None:
                path = self._path_of(group.group_id)

                def attempt(fence: Check) -> bool:
                    try:
                        self.store.commit([fence, Delete(path)])
                    except NoNodeError as exc:
                        if exc.op_index != 1:
                            raise
                    return True

                try:
                    error = self._fenced(
                        group.partition, f"share group {group.group_id!r}: delete", attempt
                    )
                except StoreError as exc:
                    log.warning("share group %r: delete refused: %s", group.group_id, exc)
                    return ErrorCode.COORDINATOR_NOT_AVAILABLE
                if error is not ErrorCode.NONE:
                    return error
            group.dead = True
            self.hosting.replace(group, None)
        log.info("share group %r deleted", group.group_id)
        self.listeners.group_deleted(group.group_id)
        return ErrorCode.NONE

    # -- deadlines -----------------------------------------------------------------------------

    def expire(self, group: ShareGroup, now: float) -> None:
        """Fence the members whose session ended and store the group (the ticker's sweep)."""
        with group.lock:
            if group.dead:
                return
            fenced = self.heartbeats.expire(group, now)
            if not fenced:
                return
            if self._persist(group) is not ErrorCode.NONE:
                self.hosting.replace(group, None)
                return
        for member_id in fenced:
            self.listeners.member_left(group.group_id, member_id)

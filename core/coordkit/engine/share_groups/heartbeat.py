"""ShareGroupHeartbeat on one share group (``GroupMetadataManager``'s share-group part in Kafka
4.4): members join with a client-chosen id at epoch 0, heartbeat at their epoch, leave with -1 or
are fenced when their session ends; the group epoch moves when a member joins, leaves or changes
its subscription, or when a subscribed topic changes; the target assignment is computed at the
next heartbeat after that with the share-partition assignor, and each member takes its target as
soon as it heartbeats (no revocation in a share group).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import attrs

from coordkit.engine.group_configs import (
    SHARE_HEARTBEAT_INTERVAL_MS,
    SHARE_SESSION_TIMEOUT_MS,
    GroupConfigs,
)
from coordkit.engine.groups.modern.group import SubscribedTopic
from coordkit.engine.groups.modern.java_order import java_hash_map_order, java_hash_set_order
from coordkit.engine.groups.modern.protocol import HeartbeatError
from coordkit.engine.groups.modern.topics import TopicsImage
from coordkit.engine.groups.protocol import ErrorCode
from coordkit.engine.share_groups.group import ShareGroup, ShareGroupMember, assignment
from coordkit.engine.share_groups.protocol import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from coordkit.strategies.share_assignment import (
    GroupSpec,
    MemberSpec,
    PartitionAssignorError,
    ShareAssignor,
    TopicDescriber,
    TopicDescription,
)
from coordkit.strategies.target_assignment import java_hash_set_order as java_uuid_set_order

log = logging.getLogger("coordkit.engine.share_groups")


@attrs.frozen
class ShareGroupSettings:
    """The broker configs a share group follows (Kafka 4.4's ``group.share.*``).

    :param session_timeout: ``group.share.session.timeout.ms``, in seconds.
    :param heartbeat_interval: ``group.share.heartbeat.interval.ms``, in seconds.
    :param max_size: ``group.share.max.size``.
    :param assignor: the first of ``group.share.assignors``: the assignor share groups use.
    """

    session_timeout: float = 45.0
    heartbeat_interval: float = 5.0
    max_size: int = 200
    assignor: str = "simple"


def validate(request: ShareGroupHeartbeatRequest) -> None:
    """Kafka's ``throwIfShareGroupHeartbeatRequestIsInvalid``: INVALID_REQUEST, nothing read."""

    def invalid(message: str) -> HeartbeatError:
        return HeartbeatError(ErrorCode.INVALID_REQUEST, message)

    if not request.member_id.strip():
        # Kafka 4.4's KafkaApis refuses it before the coordinator, with no message.
        raise HeartbeatError(ErrorCode.INVALID_REQUEST, "")
    if not request.group_id.strip():
        raise invalid("GroupId can't be empty.")
    if request.rack_id is not None and not request.rack_id.strip():
        raise invalid("RackId can't be empty.")
    if request.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
        if not request.subscribed_topic_names:
            raise invalid("SubscribedTopicNames must be set in first request.")
    elif request.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
        raise invalid("MemberEpoch is invalid.")


class ShareGroupHeartbeats:
    """Heartbeats, leaves, session expiry and target assignments of the share groups of one
    coordinator, with the share assignor ``group.share.assignors`` names first."""

    def __init__(
        self,
        settings: ShareGroupSettings,
        assignors: Mapping[str, ShareAssignor],
        topics: TopicsImage,
        group_configs: GroupConfigs | None = None,
    ):
        self.settings = settings
        #: Each group's own ``share.session.timeout.ms`` and ``share.heartbeat.interval.ms``
        #: (Kafka 4's GROUP config resource), over the broker's.
        self.group_configs = group_configs
        #: ``None`` when no plugin registered the assignor the settings name (``coordkit serve``
        #: refuses to start then; an engine built otherwise answers joins with an error).
        self.assignor = assignors.get(settings.assignor)
        self.topics = topics

    def heartbeat_interval_ms(self, group_id: str) -> int:
        """The group's ``share.heartbeat.interval.ms``, else the broker's."""
        own = self._own(group_id, SHARE_HEARTBEAT_INTERVAL_MS)
        return own if own is not None else round(self.settings.heartbeat_interval * 1000)

    def session_timeout(self, group_id: str) -> float:
        """The group's ``share.session.timeout.ms`` in seconds, else the broker's."""
        own = self._own(group_id, SHARE_SESSION_TIMEOUT_MS)
        return own / 1000 if own is not None else self.settings.session_timeout

    def _own(self, group_id: str, name: str) -> int | None:
        if self.group_configs is None:
            return None
        own = self.group_configs.int_value(group_id, name)
        return own if own is not None and own > 0 else None

    # -- a member's heartbeat ------------------------------------------------------------------

    def heartbeat(
        self, group: ShareGroup, request: ShareGroupHeartbeatRequest, now: float
    ) -> ShareGroupHeartbeatResponse:
        """A joining or known member's heartbeat (the caller holds the group's lock)."""
        member_id = request.member_id
        member = group.members.get(member_id)
        if member is None:
            if request.member_epoch != JOIN_GROUP_MEMBER_EPOCH:
                raise HeartbeatError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {member_id} is not a member of group {group.group_id}.",
                )
            if len(group.members) >= self.settings.max_size:
                raise HeartbeatError(
                    ErrorCode.GROUP_MAX_SIZE_REACHED,
                    "The share group has reached its maximum capacity of "
                    f"{self.settings.max_size} members.",
                )
            member = ShareGroupMember(member_id)
            log.info("share group %r: member %s joins", group.group_id, member_id)
        elif request.member_epoch != JOIN_GROUP_MEMBER_EPOCH:
            # Epoch 0 from a known member is a rejoin (a consumer that lost its epoch): Kafka
            # 4.4 takes it, with the member's target.
            _check_epoch(member, request.member_epoch)
        updated = attrs.evolve(
            member,
            rack_id=member.rack_id if request.rack_id is None else request.rack_id,
            subscribed_topic_names=(
                member.subscribed_topic_names
                if request.subscribed_topic_names is None
                else tuple(dict.fromkeys(request.subscribed_topic_names))
            ),
            client_id=request.client_id,
            client_host=request.client_host,
        )
        bump = member_id not in group.members or set(updated.subscribed_topic_names) != set(
            member.subscribed_topic_names
        )
        metadata = self.topics.topics(group.subscribed_topic_names(member_id, updated))
        if metadata != group.subscription_metadata:
            group.subscription_metadata = dict(metadata)
            bump = True
        group.members[member_id] = updated
        if bump:
            group.group_epoch += 1
            log.info("share group %r: group epoch bumped to %d", group.group_id, group.group_epoch)
        if group.group_epoch > group.assignment_epoch:
            self.compute_target(group)
        updated = self._reconcile(group, updated)
        group.session_deadlines[member_id] = now + self.session_timeout(group.group_id)
        changed = updated.assigned != member.assigned
        return ShareGroupHeartbeatResponse(
            member_id=member_id,
            member_epoch=updated.member_epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms(group.group_id),
            assignment=(
                updated.assigned
                if request.member_epoch == JOIN_GROUP_MEMBER_EPOCH or changed
                else None
            ),
        )

    @staticmethod
    def _reconcile(group: ShareGroup, member: ShareGroupMember) -> ShareGroupMember:
        """Kafka's ``ShareGroupAssignmentBuilder``: the member takes its target at once."""
        if member.member_epoch == group.assignment_epoch:
            return member
        updated = attrs.evolve(
            member,
            previous_member_epoch=member.member_epoch,
            member_epoch=group.assignment_epoch,
            assigned=group.target.get(member.member_id, {}),
        )
        group.members[member.member_id] = updated
        return updated

    # -- leaving -------------------------------------------------------------------------------

    def leave(
        self, group: ShareGroup, request: ShareGroupHeartbeatRequest
    ) -> ShareGroupHeartbeatResponse:
        """Kafka's ``shareGroupLeave``: the member goes and the group epoch moves."""
        member = group.members.get(request.member_id)
        if member is None:
            raise HeartbeatError(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Member {request.member_id} is not a member of group {group.group_id}.",
            )
        self.remove(group, member.member_id, "left")
        return ShareGroupHeartbeatResponse(
            member_id=member.member_id,
            member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
            heartbeat_interval_ms=0,
        )

    def remove(self, group: ShareGroup, member_id: str, why: str) -> None:
        """The member goes, the group epoch moves and the others' target is computed at once
        (Kafka 4.4 describes the group at its new assignment epoch straight away)."""
        group.remove_member(member_id)
        group.subscription_metadata = dict(self.topics.topics(group.subscribed_topic_names()))
        group.group_epoch += 1
        log.info("share group %r: member %s %s; group epoch bumped to %d", group.group_id,
                 member_id, why, group.group_epoch)  # fmt: skip
        self.compute_target(group)

    def expire(self, group: ShareGroup, now: float) -> list[str]:
        """Fence the members whose session ended (Kafka's ``shareGroupFenceMember``)."""
        gone = [m for m, deadline in group.session_deadlines.items() if deadline <= now]
        for member_id in gone:
            self.remove(group, member_id, "fenced: session timed out")
        return gone

    # -- the target assignment (Kafka's TargetAssignmentBuilder for share groups) --------------

    def compute_target(self, group: ShareGroup) -> None:
        """Every member's target at the group epoch, from the share assignor. The members and
        their topics are handed over in the order Kafka's coordinator iterates them (hash maps
        and sets of member ids, topic names and topic ids)."""
        assignor = self.assignor
        if assignor is None:
            raise HeartbeatError(
                ErrorCode.UNKNOWN_SERVER_ERROR,
                f"No share-partition assignor {self.settings.assignor!r} is registered "
                "(group.share.assignors).",
            )
        ids = {name: topic.topic_id for name, topic in group.subscription_metadata.items()}
        known = set(ids.values())
        specs: dict[str, MemberSpec] = {}
        for member_id in java_hash_map_order(group.members):
            member = group.members[member_id]
            current = group.target.get(member_id, {})
            specs[member_id] = MemberSpec(
                subscribed_topic_ids=[
                    ids[t] for t in java_hash_set_order(member.subscribed_topic_names) if t in ids
                ],
                rack=member.rack_id,
                assignment={
                    t: current[t] for t in java_uuid_set_order(current) if t in known
                },
            )  # fmt: skip
        describer = TopicDescriber(
            TopicDescription(
                topic.topic_id,
                topic.name,
                topic.partitions,
                self._racks(group, topic),
            )
            for topic in group.subscription_metadata.values()
        )
        try:
            result = assignor.assign(GroupSpec(specs), describer)
        except PartitionAssignorError as exc:
            log.error("share group %r: target assignment failed: %s", group.group_id, exc)
            raise HeartbeatError(
                ErrorCode.UNKNOWN_SERVER_ERROR,
                f"Failed to compute a new target assignment for epoch {group.group_epoch}: {exc}",
            ) from None
        group.target = {
            m: assignment(result.members[m].as_sets()) if m in result else {} for m in group.members
        }
        group.assignment_epoch = group.group_epoch
        group.assignor_name = assignor.name
        log.info("share group %r: target assignment for epoch %d computed with %r",
                 group.group_id, group.group_epoch, assignor.name)  # fmt: skip

    def _racks(
        self, group: ShareGroup, topic: SubscribedTopic
    ) -> tuple[frozenset[str], ...] | None:
        if not any(m.rack_id is not None for m in group.members.values()):
            return None
        racks = self.topics.partition_racks(topic.name)
        return racks if racks is not None and len(racks) == topic.partitions else None


def _check_epoch(member: ShareGroupMember, received: int) -> None:
    """Kafka's ``throwIfShareGroupMemberEpochIsInvalid``."""
    if received > member.member_epoch:
        raise HeartbeatError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The share group member has a greater member epoch ({received}) than the one "
            f"known by the group coordinator ({member.member_epoch}). The member must abandon "
            "all its partitions and rejoin.",
        )
    if received < member.member_epoch and received != member.previous_member_epoch:
        raise HeartbeatError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The share group member has a smaller member epoch ({received}) than the one "
            f"known by the group coordinator ({member.member_epoch}), and it does not match the "
            f"previous member epoch ({member.previous_member_epoch}). The member must abandon "
            "all its partitions and rejoin.",
        )

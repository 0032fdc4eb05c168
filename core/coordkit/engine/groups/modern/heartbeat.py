"""ConsumerGroupHeartbeat on a hosted consumer group (the consumer-group part of Kafka's
``GroupMetadataManager``).

One heartbeat, in Kafka's three steps:

1. the member is created or updated from the request; if what it subscribes to changed, or the
   subscribed topics did (created, deleted, partitions added), the group epoch is bumped;
2. if the group epoch is past the assignment epoch, the server assignor computes a new target
   assignment from every member's subscription, rack and current target;
3. the member is reconciled one step towards its target (:mod:`.reconciliation`).

The caller holds the group's lock, and persists the group afterwards (restoring it when the write
fails, so an answer never reports a state that was not stored). Session deadlines and revocation
deadlines are kept in the group and swept by :meth:`ConsumerGroupHeartbeats.expire`.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Mapping

import attrs

from coordkit.engine.config import EngineConfig
from coordkit.engine.group_configs import (
    CONSUMER_HEARTBEAT_INTERVAL_MS,
    CONSUMER_SESSION_TIMEOUT_MS,
    GroupConfigs,
)
from coordkit.engine.groups.modern.group import ConsumerGroup
from coordkit.engine.groups.modern.member import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Assignment,
    ConsumerGroupMember,
    MemberState,
    new_member_id,
)
from coordkit.engine.groups.modern.protocol import (
    CLIENT_MEMBER_ID_VERSION,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    HeartbeatError,
)
from coordkit.engine.groups.modern.reconciliation import FencedMemberEpochError, reconcile
from coordkit.engine.groups.modern.target import TargetAssignmentBuilder
from coordkit.engine.groups.modern.topics import TopicsImage
from coordkit.engine.groups.protocol import ErrorCode
from coordkit.strategies.target_assignment import (
    ServerAssignor,
)
from coordkit.support.clock import Clock

log = logging.getLogger("coordkit.engine.groups")


def _invalid(message: str) -> HeartbeatError:
    return HeartbeatError(ErrorCode.INVALID_REQUEST, message)


class ConsumerGroupHeartbeats:
    """The consumer group protocol on the groups a coordinator hosts.

    :param assignors: the server-side assignors ``group.consumer.assignors`` names, in its order
        (the first is the default).
    :param group_configs: each group's own ``consumer.session.timeout.ms`` and
        ``consumer.heartbeat.interval.ms`` (Kafka 4's group configs), over the broker's.
    """

    def __init__(
        self,
        config: EngineConfig,
        clock: Clock,
        assignors: Mapping[str, ServerAssignor],
        topics: TopicsImage,
        group_configs: GroupConfigs | None = None,
    ):
        self.config = config
        self.group_configs = group_configs
        self.clock = clock
        self.assignors = dict(assignors)
        self.topics = topics
        self.targets = TargetAssignmentBuilder(
            self.assignors, topics, config.consumer_group_assignment_interval
        )

    @property
    def default_assignor(self) -> str:
        return self.targets.default_assignor

    @property
    def heartbeat_interval_ms(self) -> int:
        return round(self.config.consumer_group_heartbeat_interval * 1000)

    def group_heartbeat_interval_ms(self, group_id: str) -> int:
        """The group's ``consumer.heartbeat.interval.ms``, else the broker's."""
        if self.group_configs is not None:
            own = self.group_configs.int_value(group_id, CONSUMER_HEARTBEAT_INTERVAL_MS)
            if own is not None:
                return own
        return self.heartbeat_interval_ms

    def group_session_timeout(self, group_id: str) -> float:
        """The group's ``consumer.session.timeout.ms`` in seconds, else the broker's."""
        if self.group_configs is not None:
            own = self.group_configs.int_value(group_id, CONSUMER_SESSION_TIMEOUT_MS)
            if own is not None:
                return own / 1000
        return self.config.consumer_group_session_timeout

    # -- validation ------------------------------------------------------------------------------

    def validate(self, request: ConsumerGroupHeartbeatRequest) -> None:
        """Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid``."""
        if not request.group_id:
            raise _invalid("GroupId can't be empty.")
        if request.instance_id is not None and not request.instance_id:
            raise _invalid("InstanceId can't be empty.")
        if request.rack_id is not None and not request.rack_id:
            raise _invalid("RackId can't be empty.")
        epoch = request.member_epoch
        if request.version >= CLIENT_MEMBER_ID_VERSION and not request.member_id.strip():
            raise _invalid("MemberId can't be empty.")
        if epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if not request.member_id:
                raise _invalid("MemberId can't be empty.")
        elif epoch == JOIN_GROUP_MEMBER_EPOCH:
            if request.rebalance_timeout_ms == -1:
                raise _invalid("RebalanceTimeoutMs must be provided in first request.")
            if request.owned is None or any(request.owned.values()):
                raise _invalid("TopicPartitions must be empty when (re-)joining.")
            if not request.subscribed_topic_names and request.subscribed_topic_regex is None:
                raise _invalid(
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
                )
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if not request.member_id:
                raise _invalid("MemberId can't be empty.")
            if request.instance_id is None:
                raise _invalid("InstanceId can't be null.")
        else:
            raise _invalid("MemberEpoch is invalid.")
        if request.subscribed_topic_regex is not None:
            try:
                re.compile(request.subscribed_topic_regex)
            except re.error as exc:
                raise HeartbeatError(
                    ErrorCode.INVALID_REGULAR_EXPRESSION,
                    f"SubscribedTopicRegex `{request.subscribed_topic_regex}` is not a valid "
                    f"regular expression: {exc}.",
                ) from None
        if request.server_assignor is not None and request.server_assignor not in self.assignors:
            raise HeartbeatError(
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {request.server_assignor} is not supported. "
                f"Supported assignors: {', '.join(self.assignors)}.",
            )

    # -- the heartbeat ---------------------------------------------------------------------------

    def heartbeat(
        self, group: ConsumerGroup, request: ConsumerGroupHeartbeatRequest
    ) -> ConsumerGroupHeartbeatResponse:
        """Answer a heartbeat (epoch >= 0) of ``group``; raises :class:`HeartbeatError`."""
        epoch = request.member_epoch
        joining = epoch == JOIN_GROUP_MEMBER_EPOCH
        member_id = request.member_id or new_member_id()
        if len(group.members) >= self.config.consumer_group_max_size and (
            not request.member_id or request.member_id not in group.members
        ):
            raise HeartbeatError(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                "The consumer group has reached its maximum capacity of "
                f"{self.config.consumer_group_max_size} members.",
            )
        if request.instance_id is None:
            member = self._dynamic_member(group, member_id, epoch, request, joining)
            replaced = None
        else:
            member, replaced = self._static_member(group, member_id, epoch, request, joining)

        updated = attrs.evolve(
            member,
            instance_id=request.instance_id if request.instance_id is not None
            else member.instance_id,
            rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
            rebalance_timeout=request.rebalance_timeout_ms / 1000
            if request.rebalance_timeout_ms != -1 else member.rebalance_timeout,
            server_assignor=request.server_assignor if request.server_assignor is not None
            else member.server_assignor,
            subscribed_topic_names=request.subscribed_topic_names
            if request.subscribed_topic_names is not None else member.subscribed_topic_names,
            subscribed_topic_regex=request.subscribed_topic_regex
            if request.subscribed_topic_regex is not None else member.subscribed_topic_regex,
            client_id=request.client_id,
            client_host=request.client_host,
        )  # fmt: skip
        if request.subscribed_topic_regex == "":
            updated = attrs.evolve(updated, subscribed_topic_regex=None)

        # 1. The group epoch moves when the subscriptions, or the subscribed topics, changed.
        # Kafka 4.4 bumps on a changed server assignor too (the group may prefer another).
        # A new regex bumps once resolved (the coordinator's sweep), as Kafka resolves regexes
        # in the background; one the group has resolved already bumps now.
        regex = updated.subscribed_topic_regex
        bump = (
            updated.subscribed_topic_names != member.subscribed_topic_names
            or updated.server_assignor != member.server_assignor
            or (regex != member.subscribed_topic_regex
                and (regex is None or regex in group.resolved_regexes))
        )  # fmt: skip
        if replaced is not None:
            # The new member takes the old one's target too (Kafka's ``replaceMember``).
            inherited = group.target.get(replaced.member_id, {})
            group.remove_member(replaced.member_id)
            group.target[updated.member_id] = inherited
            group.dirty_members.add(updated.member_id)
        metadata = self.targets.subscription_metadata(
            group, group.members.get(updated.member_id), updated
        )
        if metadata != group.subscription_metadata:
            bump = True
        group_epoch = group.group_epoch + 1 if bump else group.group_epoch
        if bump:
            group.subscription_metadata = metadata
            group.group_epoch = group_epoch
            log.info("group %r: group epoch bumped to %d", group.group_id, group_epoch)

        # 2. A new target when the group epoch is past the assignment epoch (at most once per
        # group.consumer.assignment.interval.ms, as Kafka 4.4; until then members reconcile
        # towards the target they have).
        group.update_member(updated)
        self.targets.maybe_compute(group, self.clock.monotonic())
        target = group.target.get(updated.member_id, {})

        # 3. One step of reconciliation.
        reconciled = self._reconcile(group, updated, target, request.owned)
        self.touch(group, reconciled.member_id)

        full = joining or (
            request.rebalance_timeout_ms != -1
            and request.subscribed_topic_names is not None
            and request.owned is not None
        )
        changed = reconciled.assigned_partitions != member.assigned_partitions
        return ConsumerGroupHeartbeatResponse(
            member_id=reconciled.member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self.group_heartbeat_interval_ms(group.group_id),
            assignment=reconciled.assigned_partitions if full or changed else None,
        )

    def _dynamic_member(
        self,
        group: ConsumerGroup,
        member_id: str,
        epoch: int,
        request: ConsumerGroupHeartbeatRequest,
        joining: bool,
    ) -> ConsumerGroupMember:
        member = group.members.get(member_id)
        if member is None:
            if not joining:
                raise HeartbeatError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {member_id} is not a member of group {group.group_id}.",
                )
            log.info("group %r: member %s joins (consumer protocol)", group.group_id, member_id)
            return ConsumerGroupMember(member_id)
        self._check_epoch(member, epoch, request.owned)
        return member

    def _static_member(
        self,
        group: ConsumerGroup,
        member_id: str,
        epoch: int,
        request: ConsumerGroupHeartbeatRequest,
        joining: bool,
    ) -> tuple[ConsumerGroupMember, ConsumerGroupMember | None]:
        """The member, and the static member it replaces (a rejoin under the same instance id)."""
        instance_id = request.instance_id
        existing = group.static_member(instance_id)
        if joining:
            if existing is None:
                if member_id in group.members:
                    self._check_epoch(group.members[member_id], epoch, request.owned)
                    return group.members[member_id], None
                log.info("group %r: static member %s (instance %s) joins", group.group_id,
                         member_id, instance_id)  # fmt: skip
                return ConsumerGroupMember(member_id, instance_id=instance_id), None
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise HeartbeatError(
                    ErrorCode.UNRELEASED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {instance_id} cannot join the "
                    f"group because the instance id is owned by {existing.member_id} member.",
                )
            log.info("group %r: static member %s replaces %s (instance %s)", group.group_id,
                     member_id, existing.member_id, instance_id)  # fmt: skip
            # The new member takes the old one's place, and its assignment: it reconciles to it.
            successor = attrs.evolve(
                existing, member_id=member_id, member_epoch=0, previous_member_epoch=0
            )
            return successor, existing
        if existing is None:
            raise HeartbeatError(
                ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown."
            )
        if existing.member_id != member_id:
            raise HeartbeatError(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Static member {member_id} with instance id {instance_id} was fenced by member "
                f"{existing.member_id}.",
            )
        self._check_epoch(existing, epoch, request.owned)
        return existing, None

    @staticmethod
    def _check_epoch(
        member: ConsumerGroupMember, epoch: int, owned: Mapping[uuid.UUID, tuple[int, ...]] | None
    ) -> None:
        """Kafka's ``throwIfConsumerGroupMemberEpochIsInvalid``."""
        if epoch > member.member_epoch:
            raise HeartbeatError(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a greater member epoch ({epoch}) than the one "
                f"known by the group coordinator ({member.member_epoch}). The member must abandon "
                "all its partitions and rejoin.",
            )
        if epoch < member.member_epoch and (
            epoch != member.previous_member_epoch
            or not _is_subset(owned, member.assigned_partitions)
        ):
            raise HeartbeatError(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a smaller member epoch ({epoch}) than the one "
                f"known by the group coordinator ({member.member_epoch}). The member must abandon "
                "all its partitions and rejoin.",
            )

    def _reconcile(
        self,
        group: ConsumerGroup,
        member: ConsumerGroupMember,
        target: Assignment,
        owned: Mapping[uuid.UUID, tuple[int, ...]] | None,
    ) -> ConsumerGroupMember:
        if member.is_reconciled_to(group.assignment_epoch):
            return member
        try:
            reconciled = reconcile(
                member, group.assignment_epoch, target, group.partition_epoch, owned
            )
        except FencedMemberEpochError as exc:
            raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH, str(exc)) from None
        group.update_member(reconciled)
        if reconciled.state is MemberState.UNREVOKED_PARTITIONS:
            if member.state is not MemberState.UNREVOKED_PARTITIONS or (
                member.member_epoch != reconciled.member_epoch
            ) or reconciled.member_id not in group.rebalance_deadlines:  # fmt: skip
                group.rebalance_deadlines[reconciled.member_id] = (
                    self.clock.monotonic() + reconciled.rebalance_timeout,
                    reconciled.member_epoch,
                )
        else:
            group.rebalance_deadlines.pop(reconciled.member_id, None)
        if reconciled != member:
            log.debug("group %r: member %s now %s at epoch %d", group.group_id,
                      reconciled.member_id, reconciled.state.value, reconciled.member_epoch)  # fmt: skip
        return reconciled

    def touch(self, group: ConsumerGroup, member_id: str) -> None:
        """The member's session starts again."""
        timeout = self.group_session_timeout(group.group_id)
        group.session_deadlines[member_id] = self.clock.monotonic() + timeout

    # -- leaving, fencing, expiry ----------------------------------------------------------------

    def leave(
        self, group: ConsumerGroup, request: ConsumerGroupHeartbeatRequest
    ) -> ConsumerGroupHeartbeatResponse:
        """Epoch -1 (leave) or -2 (a static member away for a while)."""
        if request.instance_id is None:
            member = group.members.get(request.member_id)
            if member is None:
                raise HeartbeatError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {request.member_id} is not a member of group {group.group_id}.",
                )
            log.info("group %r: member %s left", group.group_id, member.member_id)
            self.fence(group, member)
            return ConsumerGroupHeartbeatResponse(
                member_id=request.member_id, member_epoch=request.member_epoch
            )
        member = group.static_member(request.instance_id)
        if member is None:
            raise HeartbeatError(
                ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {request.instance_id} is unknown."
            )
        if member.member_id != request.member_id:
            raise HeartbeatError(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Static member {request.member_id} with instance id {request.instance_id} was "
                f"fenced by member {member.member_id}.",
            )
        if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            log.info("group %r: static member %s (instance %s) left for a while", group.group_id,
                     member.member_id, request.instance_id)  # fmt: skip
            group.update_member(
                attrs.evolve(
                    member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                    partitions_pending_revocation={},
                )
            )  # fmt: skip
            group.rebalance_deadlines.pop(member.member_id, None)
            return ConsumerGroupHeartbeatResponse(
                member_id=member.member_id, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH
            )
        log.info("group %r: static member %s (instance %s) left", group.group_id,
                 member.member_id, request.instance_id)  # fmt: skip
        self.fence(group, member)
        return ConsumerGroupHeartbeatResponse(
            member_id=request.member_id, member_epoch=request.member_epoch
        )

    def fence(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        """Remove the member: its partitions are free, and the group epoch moves."""
        group.remove_member(member.member_id)
        group.subscription_metadata = self.targets.subscription_metadata(group)
        group.group_epoch += 1

    def expire(self, group: ConsumerGroup, now: float) -> bool:
        """Fence members whose session ended or who did not revoke in time; whether any was."""
        fenced = False
        for member_id, deadline in list(group.session_deadlines.items()):
            member = group.members.get(member_id)
            if member is not None and now >= deadline:
                log.info("group %r: member %s fenced: its session expired", group.group_id,
                         member_id)  # fmt: skip
                self.fence(group, member)
                fenced = True
        for member_id, (deadline, epoch) in list(group.rebalance_deadlines.items()):
            member = group.members.get(member_id)
            if member is None or member.member_epoch != epoch:
                group.rebalance_deadlines.pop(member_id, None)
            elif now >= deadline:
                log.info("group %r: member %s fenced: it did not revoke its partitions within "
                         "%.1fs at epoch %d", group.group_id, member_id, member.rebalance_timeout,
                         epoch)  # fmt: skip
                self.fence(group, member)
                fenced = True
        return fenced


def _is_subset(owned: Mapping[uuid.UUID, tuple[int, ...]] | None, assigned: Assignment) -> bool:
    """Kafka's ``isSubset``: every owned partition is among the assigned ones."""
    if owned is None:
        return False
    for topic_id, partitions in owned.items():
        have = assigned.get(topic_id)
        if have is None or any(p not in have for p in partitions):
            return False
    return True

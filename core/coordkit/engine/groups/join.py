"""JoinGroup: a new member, a known member rejoining, a static member restarting (KIP-345).

JoinGroup is a long poll: the future completes when the join round ends (or at once with an
error). A new member gets an id and joins the round (a Stable group starts one); a known member
that rejoins unchanged while the group completes or is stable gets its answer at once; a static
member that restarts takes its old id's place (join order, assignment, leadership) and fences the
old id, without a rebalance when nothing about it changed.

A wire client of JoinGroup v4+ without a ``group.instance.id`` first gets MEMBER_ID_REQUIRED and
the id to join with (KIP-394): the id waits in :attr:`Group.pending` until that member joins with
it or its session timeout passes, and a join round does not end while ids are pending.
"""

from __future__ import annotations

import concurrent.futures
import logging
import uuid

from coordkit.engine.config import EngineConfig
from coordkit.engine.groups.membership import Group, Member
from coordkit.engine.groups.protocol import (
    UNKNOWN_MEMBER_ID,
    ErrorCode,
    GroupState,
    JoinFuture,
    JoinGroupRequest,
    JoinGroupResponse,
    join_done,
)
from coordkit.engine.groups.rebalance import Rebalancer
from coordkit.support.clock import Clock

log = logging.getLogger("coordkit.engine.groups")


class JoinHandler:
    def __init__(self, config: EngineConfig, clock: Clock, rebalancer: Rebalancer):
        self.config = config
        self.clock = clock
        self.rebalancer = rebalancer

    def handle(self, group: Group, request: JoinGroupRequest) -> JoinFuture:
        """Join ``group`` (its lock held, the group not Dead)."""
        instance = request.group_instance_id
        replacing = request.member_id
        if replacing == UNKNOWN_MEMBER_ID and instance is not None:
            replacing = group.static.get(instance, "")
        if not group.supports(request.protocol_type, request.protocols, replacing):
            return join_done(JoinGroupResponse(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        if request.member_id == UNKNOWN_MEMBER_ID:
            if instance is not None and instance in group.static:
                return self._replace_static_member(group, request)
            if request.require_known_member_id and instance is None:
                member_id = self._new_member_id(request)
                group.pending[member_id] = self.clock.monotonic() + request.session_timeout
                return join_done(
                    JoinGroupResponse(ErrorCode.MEMBER_ID_REQUIRED, member_id=member_id)
                )
            return self._join_new_member(group, request)
        if group.pending.pop(request.member_id, None) is not None:
            return self._join_new_member(group, request, request.member_id)
        return self._join_known_member(group, request)

    def _new_member_id(self, request: JoinGroupRequest) -> str:
        prefix = request.group_instance_id or request.client_id or "consumer"
        return f"{prefix}-{uuid.uuid4()}"

    def _join_new_member(
        self, group: Group, request: JoinGroupRequest, member_id: str | None = None
    ) -> JoinFuture:
        now = self.clock.monotonic()
        member = Member(
            member_id or self._new_member_id(request),
            request.group_instance_id,
            request.client_id,
            request.session_timeout,
            request.rebalance_timeout,
            request.protocols,
            request.subscription,
            group.take_join_order(),
            metadata=request.metadata,
            client_host=request.client_host,
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
            self.rebalancer.maybe_complete_join(group)
        else:
            self.rebalancer.prepare(group, f"member {member.member_id} joined")
        return future

    def _join_known_member(self, group: Group, request: JoinGroupRequest) -> JoinFuture:
        member = group.members.get(request.member_id)
        error = self.rebalancer.check_member(group, request.member_id, request.group_instance_id)
        if error is not ErrorCode.NONE or member is None:
            return join_done(JoinGroupResponse(error))
        now = self.clock.monotonic()
        member.deadline = now + member.session_timeout
        unchanged = member.same_join(request.protocols, request.subscription, request.metadata)
        if group.is_(GroupState.COMPLETING_REBALANCE) and unchanged:
            return join_done(self.rebalancer.join_response(group, member))  # a retried JoinGroup
        if group.is_(GroupState.STABLE) and unchanged and group.leader != member.member_id:
            return join_done(self.rebalancer.join_response(group, member))
        self.rebalancer.fail_pending(member, ErrorCode.REBALANCE_IN_PROGRESS)
        member.protocols = request.protocols
        member.subscription = request.subscription
        member.metadata = dict(request.metadata)
        member.session_timeout = request.session_timeout
        member.rebalance_timeout = request.rebalance_timeout
        future: JoinFuture = concurrent.futures.Future()
        member.join_future = future
        if group.is_(GroupState.PREPARING_REBALANCE):
            self.rebalancer.maybe_complete_join(group)
        else:
            self.rebalancer.prepare(group, f"member {member.member_id} rejoined")
        return future

    def _replace_static_member(self, group: Group, request: JoinGroupRequest) -> JoinFuture:
        """A static member restarted: the new member id takes the old one's place (join order,
        assignment, leadership); the old id is fenced. No rebalance when the group is Stable and
        the subscription and protocols are unchanged (KIP-345)."""
        instance = request.group_instance_id
        assert instance is not None
        old = group.members[group.static[instance]]
        was_leader = group.leader == old.member_id
        self.rebalancer.fail_pending(old, ErrorCode.FENCED_INSTANCE_ID)
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
            metadata=request.metadata,
            client_host=request.client_host,
        )
        member.assignment = old.assignment
        member.raw_assignment = old.raw_assignment
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
            error = self.rebalancer.persistence.persist(group)
            if error is not ErrorCode.NONE:
                return join_done(JoinGroupResponse(error))
            response = JoinGroupResponse(
                ErrorCode.NONE,
                group.generation,
                group.protocol,
                group.leader,
                member.member_id,
                self.rebalancer.joined_members(group) if was_leader else (),
                skip_assignment=was_leader,
            )
            return join_done(response)
        future: JoinFuture = concurrent.futures.Future()
        member.join_future = future
        if group.is_(GroupState.PREPARING_REBALANCE):
            self.rebalancer.maybe_complete_join(group)
        else:
            self.rebalancer.prepare(group, f"static member {instance} rejoined changed")
        return future

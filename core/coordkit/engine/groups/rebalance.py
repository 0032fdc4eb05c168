"""A group's membership state and timers (the rebalance half of Kafka's ``GroupCoordinator``).

A rebalance is a sequence of states (``Empty`` → ``PreparingRebalance`` → ``CompletingRebalance``
→ ``Stable``, see :mod:`~coordkit.engine.groups.membership`): a join round opens, ends when every
member rejoined (not before ``group.initial.rebalance.delay.ms`` for a group that was empty) or
at the rebalance timeout, the generation grows, the group-leader strategy picks the leader, and the
leader's SyncGroup assignment makes the group Stable. The coordinator's ticker calls
:meth:`Rebalancer.expire` to remove members whose session timed out and to end join rounds at their
deadline. Every method is called with the group's lock held.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from coordkit.engine.config import EngineConfig
from coordkit.engine.groups.events import AssignmentRound, GroupObserver, RebalanceCompleted
from coordkit.engine.groups.membership import Group, Member, RebalanceEpisode
from coordkit.engine.groups.persistence import GroupPersistence
from coordkit.engine.groups.planning import rebalance_protocol
from coordkit.engine.groups.protocol import (
    ErrorCode,
    GroupState,
    JoinedMember,
    JoinGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from coordkit.strategies.assignment import Assignor, RebalanceProtocol
from coordkit.strategies.elections import GroupLeaderSelection, LeaderCandidate
from coordkit.support.clock import Clock

log = logging.getLogger("coordkit.engine.groups")


class Rebalancer:
    def __init__(
        self,
        config: EngineConfig,
        clock: Clock,
        observers: GroupObserver,
        leader_strategy: GroupLeaderSelection,
        persistence: GroupPersistence,
        assignors: Mapping[str, Assignor],
    ):
        self.config = config
        self.clock = clock
        self.observers = observers
        self._leader_strategy = leader_strategy
        self.persistence = persistence
        self._assignors = assignors

    @staticmethod
    def joined_members(group: Group) -> tuple[JoinedMember, ...]:
        protocol = group.protocol or ""
        return tuple(
            JoinedMember(m.member_id, m.group_instance_id, m.subscription, m.metadata.get(protocol))
            for m in group.by_join_order()
        )

    def join_response(self, group: Group, member: Member) -> JoinGroupResponse:
        leader = group.leader
        members: tuple[JoinedMember, ...] = ()
        if leader == member.member_id:
            members = self.joined_members(group)
        return JoinGroupResponse(
            ErrorCode.NONE, group.generation, group.protocol, leader, member.member_id, members
        )

    @staticmethod
    def check_member(group: Group, member_id: str, instance: str | None) -> ErrorCode:
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

    def prepare(self, group: Group, reason: str) -> None:
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
        log.info(
            "group %r: preparing to rebalance, generation %d (%s)",
            group.group_id,
            group.generation,
            reason,
        )
        self.observers.rebalance_started(group.group_id, group.generation, reason, now)
        self.maybe_complete_join(group)

    def maybe_complete_join(self, group: Group) -> None:
        if not group.is_(GroupState.PREPARING_REBALANCE):
            return
        now = self.clock.monotonic()
        everyone = not group.members or group.all_joined()
        if (everyone and now >= group.not_before) or now >= group.join_deadline:
            self.complete_join(group)

    def complete_join(self, group: Group) -> None:
        now = self.clock.monotonic()
        for member in list(group.members.values()):
            if not member.awaiting_join:
                self.fail_pending(member, ErrorCode.UNKNOWN_MEMBER_ID)
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
            self.persistence.persist(group)
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
        log.info(
            "group %r: stabilized generation %d with %d members (leader %s)",
            group.group_id,
            group.generation,
            len(ordered),
            leader,
        )
        if group.episode is None:
            group.episode = RebalanceEpisode(now, "join")
        group.episode.rounds += 1
        for member in ordered:
            future = member.join_future
            member.join_future = None
            member.deadline = now + member.session_timeout
            if future is not None:
                future.set_result(self.join_response(group, member))
        self.observers.join_completed(
            group.group_id,
            group.generation,
            group.protocol,
            leader,
            tuple(m.member_id for m in ordered),
            now,
        )

    def remove_member(self, group: Group, member: Member, reason: str) -> None:
        self.fail_pending(member, ErrorCode.UNKNOWN_MEMBER_ID)
        group.remove(member.member_id)
        if group.is_(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.prepare(group, reason)
        else:
            self.maybe_complete_join(group)

    @staticmethod
    def fail_pending(member: Member, error: ErrorCode) -> None:
        if member.join_future is not None:
            member.join_future.set_result(JoinGroupResponse(error))
            member.join_future = None
        if member.sync_future is not None:
            member.sync_future.set_result(SyncGroupResponse(error))
            member.sync_future = None

    def complete_sync(self, group: Group, request: SyncGroupRequest) -> None:
        raw = request.raw_assignments
        for member in group.members.values():
            member.assignment = request.assignments.get(member.member_id, frozenset())
            # A wire leader leaves members without partitions out: they get empty bytes.
            member.raw_assignment = raw.get(member.member_id, b"") if raw else None
        group.topic_partitions = dict(request.topic_partitions)
        error = self.persistence.persist(group)
        if error is not ErrorCode.NONE:
            # Kafka resets the assignment, fails the waiting members and prepares a rebalance
            # ("Error ... when storing group assignment during SyncGroup"): the members rejoin
            # a new round, never the generation whose assignment was not stored.
            for member in group.members.values():
                member.assignment = frozenset()
                member.raw_assignment = None
                if member.sync_future is not None:
                    member.sync_future.set_result(SyncGroupResponse(error))
                    member.sync_future = None
            self.prepare(
                group,
                f"error {error.name} when storing group assignment during SyncGroup "
                f"(member: {request.member_id})",
            )
            return
        group.transition(GroupState.STABLE)
        now = self.clock.monotonic()
        protocol = group.protocol or ""
        for member in group.members.values():
            member.deadline = now + member.session_timeout
            if member.sync_future is not None:
                member.sync_future.set_result(
                    SyncGroupResponse(
                        ErrorCode.NONE, member.assignment, protocol, member.raw_assignment
                    )
                )
                member.sync_future = None
        members = group.by_join_order()
        cooperative = all(
            rebalance_protocol(m.protocols, self._assignors) is RebalanceProtocol.COOPERATIVE
            for m in members
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

    def expire(self, group: Group) -> None:
        now = self.clock.monotonic()
        for member_id, deadline in list(group.pending.items()):
            if now > deadline:  # handed out with MEMBER_ID_REQUIRED, never joined with
                del group.pending[member_id]
        if group.is_(GroupState.DEAD, GroupState.EMPTY):
            return
        for member in list(group.members.values()):
            waiting = member.awaiting_join or member.awaiting_sync
            if not waiting and now > member.deadline and member.member_id in group.members:
                log.info("group %r: member %s session timed out", group.group_id, member.member_id)
                self.remove_member(group, member, f"member {member.member_id} session timed out")
        self.maybe_complete_join(group)

"""Moving a member towards its target assignment (Kafka's ``CurrentAssignmentBuilder``).

The rule that keeps a partition from being owned by two members at once: a member first gives
back (revokes) what is no longer in its target, staying at its epoch until its heartbeat no longer
lists those partitions; it is then moved to the target epoch and given the partitions of its target
that no other member still owns. Partitions another member still holds are *unreleased*: they are
withheld and handed over on a later heartbeat, once their owner has let them go.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping

import attrs

from coordkit.engine.groups.modern.member import Assignment, ConsumerGroupMember, MemberState

#: ``(topic id, partition) -> epoch`` of the member owning it, or -1 when nobody does.
PartitionEpoch = Callable[[uuid.UUID, int], int]
#: What a heartbeat says the member owns (``None``: not sent, unchanged since the last one).
Owned = Mapping[uuid.UUID, Iterable[int]] | None


class FencedMemberEpochError(Exception):
    """The member must give up all its partitions and rejoin (FENCED_MEMBER_EPOCH)."""


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Assignment,
    partition_epoch: PartitionEpoch,
    owned: Owned,
) -> ConsumerGroupMember:
    """The member after one step towards ``target`` at ``target_epoch`` (Kafka's ``build``)."""
    if member.state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
        return member
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        # It may move on only once its heartbeat no longer lists what it must revoke.
        if _owns_any(owned, member.partitions_pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, target_epoch, target, partition_epoch, owned)
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    # UNKNOWN (a state from a newer coordinator): start again from nothing.
    if owned is None or any(owned.values()):
        raise FencedMemberEpochError(
            "The consumer group member is in a unknown state. "
            "The member must abandon all its partitions and rejoin."
        )
    return _next(member, target_epoch, target_epoch, target, partition_epoch, owned)


def _owns_any(owned: Owned, revoking: Assignment) -> bool:
    """Whether the heartbeat still lists a partition of ``revoking`` (not sent: assume so)."""
    if owned is None:
        return True
    for topic_id, partitions in owned.items():
        pending = revoking.get(topic_id)
        if pending and any(p in pending for p in partitions):
            return True
    return False


def _next(
    member: ConsumerGroupMember,
    member_epoch: int,
    target_epoch: int,
    target: Assignment,
    partition_epoch: PartitionEpoch,
    owned: Owned,
) -> ConsumerGroupMember:
    unreleased = False
    assigned: dict[uuid.UUID, set[int]] = {}
    revoking: dict[uuid.UUID, frozenset[int]] = {}
    pending: dict[uuid.UUID, set[int]] = {}
    current = member.assigned_partitions
    for topic_id in {*target, *current}:
        wanted = target.get(topic_id, frozenset())
        held = current.get(topic_id, frozenset())
        kept = held & wanted
        gone = held - kept
        new = set(wanted - kept)
        free = {p for p in new if partition_epoch(topic_id, p) == -1}
        unreleased = unreleased or len(free) != len(new)
        if kept:
            assigned[topic_id] = set(kept)
        if gone:
            revoking[topic_id] = gone
        if free:
            pending[topic_id] = free

    if revoking and _owns_any(owned, revoking):
        # Give back first, at the current epoch.
        return attrs.evolve(
            member,
            state=MemberState.UNREVOKED_PARTITIONS,
            member_epoch=member_epoch,
            previous_member_epoch=member.member_epoch,
            assigned_partitions=assigned,
            partitions_pending_revocation=revoking,
        )
    for topic_id, partitions in pending.items():
        assigned.setdefault(topic_id, set()).update(partitions)
    return attrs.evolve(
        member,
        state=MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE,
        # Kafka's ``updateMemberEpoch``: the epoch it had becomes the previous one.
        member_epoch=target_epoch,
        previous_member_epoch=member.member_epoch,
        assigned_partitions=assigned,
        partitions_pending_revocation={},
    )

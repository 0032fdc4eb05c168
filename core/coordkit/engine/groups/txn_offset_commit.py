"""TxnOffsetCommit's check of the committing member (Kafka's
``OffsetMetadataManager.validateTransactionalOffsetCommit`` and the groups'
``validateOffsetCommit`` with ``isTransactional``).

A producer outside the group (no member, generation -1) commits to any group: an empty or unknown
one, and one with members too, of either protocol (TxnOffsetCommit below v3 names no member; a
consumer group of Kafka 4.4 takes it as well). A request naming a
member must name a current one (a static instance its holder: FENCED_INSTANCE_ID for another
member id, UNKNOWN_MEMBER_ID for an instance nobody holds) of the group's generation
(ILLEGAL_GENERATION); a group that does not exist takes generation -1 only. A consumer group of
the KIP-848 protocol checks the member's epoch exactly (ILLEGAL_GENERATION, the stale epoch
Kafka converts). The group's state is not enforced (a rebalance in progress is no refusal).
"""

from __future__ import annotations

from coordkit.engine.groups.hosting import HostedGroup
from coordkit.engine.groups.membership import Group
from coordkit.engine.groups.modern.group import ConsumerGroup
from coordkit.engine.groups.protocol import ErrorCode, GroupState


def validate_txn_offset_commit(
    found: HostedGroup | ErrorCode | None,
    member_id: str,
    generation: int,
    group_instance_id: str | None,
) -> ErrorCode:
    """The commit's error for the group ``found`` (as the coordinator looked it up: ``None``
    when it does not exist, an error code when it cannot be served)."""
    if isinstance(found, ErrorCode):
        return found
    if found is None:
        return ErrorCode.NONE if generation < 0 else ErrorCode.ILLEGAL_GENERATION
    if isinstance(found, ConsumerGroup):
        with found.lock:
            return _consumer_group(found, member_id, generation, group_instance_id)
    if not isinstance(found, Group):  # a share group's id: no offsets committed to it
        return ErrorCode.GROUP_ID_NOT_FOUND
    with found.lock:
        return _classic_group(found, member_id, generation, group_instance_id)


def _consumer_group(
    group: ConsumerGroup, member_id: str, generation: int, group_instance_id: str | None
) -> ErrorCode:
    if group.dead:
        return ErrorCode.NOT_COORDINATOR
    if generation < 0 and (not group.members or (not member_id and group_instance_id is None)):
        return ErrorCode.NONE
    member = group.members.get(member_id)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    return ErrorCode.NONE if generation == member.member_epoch else ErrorCode.ILLEGAL_GENERATION


def _classic_group(
    group: Group, member_id: str, generation: int, group_instance_id: str | None
) -> ErrorCode:
    if group.is_(GroupState.DEAD):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if generation < 0 and group.is_(GroupState.EMPTY):
        return ErrorCode.NONE
    if generation < 0 and not member_id and group_instance_id is None:
        return ErrorCode.NONE
    if group_instance_id is not None:
        holder = group.static.get(group_instance_id)
        if holder is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if holder != member_id:
            return ErrorCode.FENCED_INSTANCE_ID
    if member_id not in group.members:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if generation != group.generation:
        return ErrorCode.ILLEGAL_GENERATION
    return ErrorCode.NONE

"""DescribeShareGroupOffsets (v0-1), AlterShareGroupOffsets and DeleteShareGroupOffsets (v0):
the share-group offset admin apis of ``kafka-share-groups.sh`` (issue 37), answered by the
group's coordinator from the share-partition states in the store
(:mod:`~coordkit.serve.dataplane.share.persister`), as Kafka 4.4 answers them (recorded from a
running broker):

* Describe: each partition's start offset, the leader epoch of its state and (v1) its lag — the
  high watermark less the start offset less the records after it already acknowledged or
  archived (KIP-1226); a partition without state (an unknown group or topic included): start
  offset -1, lag -1, no error. No topics named: every topic the group has a state for.
* Alter (a group that does not exist is made, an empty share group, as Kafka makes it; one
  with members: NON_EMPTY_GROUP; one of another kind: GROUP_ID_NOT_FOUND): each partition
  starts afresh at the given offset, with a new state epoch; a negative offset forgets the
  state (the partition starts where ``share.auto.offset.reset`` says). Unknown topics and partitions:
  UNKNOWN_TOPIC_OR_PARTITION.
* Delete (the group must exist, GROUP_ID_NOT_FOUND, and have no members): the topics' states
  go.

The lag's high watermark is the leader's: read in this process, or asked of a leader in another
(ListOffsets, as Kafka's ``NetworkPartitionMetadataClient``). Another broker answers
NOT_COORDINATOR. A share-partition leader in another process that holds
an altered or deleted state in memory reads it again when a member next opens a share session
(:meth:`~coordkit.serve.dataplane.share.partition_manager.SharePartitionManager.revalidate`).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from functools import partial
from typing import Any

from coordkit.kafka.acls import AclOperation, ResourceType
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.apis.fetch import high_watermark
from coordkit.serve.apis.share.leader_offsets import latest_offset
from coordkit.serve.authorization import (
    GROUP_AUTHORIZATION_FAILED,
    TOPIC_AUTHORIZATION_FAILED,
    allowed,
    allowed_names,
)
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext
from coordkit.serve.dataplane.share.in_flight import RecordState
from coordkit.serve.dataplane.share.persister import StorePersister
from coordkit.serve.dataplane.share.share_state import ShareState

DescribeResponse = messages.DescribeShareGroupOffsetsResponse
DescribeGroup = nested(DescribeResponse, "DescribeShareGroupOffsetsResponseGroup")
DescribeTopic = nested(DescribeResponse, "DescribeShareGroupOffsetsResponseTopic")
DescribePartition = nested(DescribeResponse, "DescribeShareGroupOffsetsResponsePartition")
AlterResponse = messages.AlterShareGroupOffsetsResponse
AlterTopic = nested(AlterResponse, "AlterShareGroupOffsetsResponseTopic")
AlterPartition = nested(AlterResponse, "AlterShareGroupOffsetsResponsePartition")
DeleteResponse = messages.DeleteShareGroupOffsetsResponse
DeleteTopic = nested(DeleteResponse, "DeleteShareGroupOffsetsResponseTopic")

#: The first DescribeShareGroupOffsets version with the lag.
LAG_VERSION = 1
NO_TOPIC_ID = uuid.UUID(int=0)
_UNKNOWN = "This server does not host this topic-partition."
_DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


async def topic_ids(ctx: BrokerContext, names: Iterable[str]) -> dict[str, uuid.UUID]:
    """The ids of the topics ``names`` that exist (the store read again for one not known)."""
    wanted = list(names)
    if any(ctx.topic_ids.id_of(n) == NO_TOPIC_ID for n in wanted):
        await ctx.blocking(lambda: ctx.topic_ids.refresh(ctx.broker.store))
    return {n: i for n in wanted if (i := ctx.topic_ids.id_of(n)) != NO_TOPIC_ID}


def _hosts(ctx: BrokerContext, group_id: str) -> bool:
    """Whether this broker is ``group_id``'s coordinator."""
    coordinator = ctx.broker.group_coordinator
    return coordinator.partition_for(group_id) in coordinator.hosted_partitions()


def _members(ctx: BrokerContext, group_id: str) -> int | None:
    """How many members the share group ``group_id`` has (``None``: no such share group)."""
    describe = getattr(ctx.broker.group_coordinator, "share_group_describe", None)
    if describe is None:
        return None
    (found,) = describe([group_id])
    if int(found.error) != errors.NONE:
        return None
    return len(found.members)


async def _lag(ctx: BrokerContext, topic: str, partition: int, state: ShareState) -> int:
    """KIP-1226's lag, from the leader's high watermark: read where a broker of this process
    leads the partition, else asked of the leader in its process
    (:func:`~.leader_offsets.latest_offset`); -1 without a leader or an answer."""
    tp = (topic, partition)
    leadership = ctx.leadership(tp)
    replicas = ctx.logs.replicas
    if leadership is None:
        return -1
    leader = ctx if leadership[0] == ctx.broker_id else None
    if leader is None and replicas is not None:
        leader = getattr(replicas, "contexts", {}).get(leadership[0])
    if leader is None:
        asked = await ctx.blocking(partial(latest_offset, ctx, leadership[0], tp))
        if asked is None:
            return -1
        hw = asked
    else:
        partition_log = leader.logs.find(tp)
        if partition_log is None:
            return -1
        hw = high_watermark(leader, tp, partition_log)
    done = sum(
        b.last_offset - b.first_offset + 1 for b in state.batches if b.delivery_state in _DONE
    )
    return max(hw - state.start_offset - done, 0)


async def _describe_group(ctx: BrokerContext, version: int, group: Any) -> Any:
    group_id = group.group_id
    answer = DescribeGroup(group_id=group_id, topics=[], error_code=errors.NONE)
    if not allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        answer.error_code = GROUP_AUTHORIZATION_FAILED
        return answer
    if not _hosts(ctx, group_id):
        answer.error_code = errors.NOT_COORDINATOR
        return answer
    persister = StorePersister(ctx.broker.store)
    if group.topics is None:
        stored = await ctx.blocking(lambda: persister.partitions(group_id))
        names = await ctx.topic_names({t for t, _ in stored})
        asked: dict[str, list[int]] = {}
        for stored_id, partition in stored:
            if stored_id in names:
                asked.setdefault(names[stored_id], []).append(partition)
    else:
        asked = {t.topic_name: list(t.partitions) for t in group.topics}
    readable = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, asked)
    ids = await topic_ids(ctx, asked)
    for name, partitions in asked.items():
        topic_id = ids.get(name)
        rows = []
        for partition in partitions:
            row = DescribePartition(partition_index=partition, start_offset=-1, leader_epoch=0,
                                    lag=-1, error_code=errors.NONE)  # fmt: skip
            if name not in readable:
                row.error_code = TOPIC_AUTHORIZATION_FAILED
            elif topic_id is not None:
                found = await ctx.blocking(partial(persister.read, group_id, topic_id, partition))
                if found is not None:
                    state = found[0]
                    row.start_offset, row.leader_epoch = state.start_offset, state.leader_epoch
                    if version >= LAG_VERSION:
                        row.lag = await _lag(ctx, name, partition, state)
            rows.append(row)
        answer.topics.append(
            DescribeTopic(topic_name=name, topic_id=topic_id or NO_TOPIC_ID, partitions=rows)
        )
    return answer


async def handle_describe_share_group_offsets(ctx: BrokerContext, request: Request) -> Any:
    groups = [await _describe_group(ctx, request.version, g) for g in request.body.groups]
    return DescribeResponse(throttle_time_ms=0, groups=groups)


async def _partition_counts(ctx: BrokerContext, names: Iterable[str]) -> dict[str, int]:
    wanted = list(names)
    return await ctx.blocking(lambda: ctx.broker.group_coordinator.topic_partitions(wanted))


def _empty_group_error(ctx: BrokerContext, group_id: str) -> int:
    """The refusal of a DeleteShareGroupOffsets for ``group_id``, or NONE: Kafka deletes the
    offsets of an empty share group only (AlterShareGroupOffsets makes the group: see
    :meth:`~coordkit.engine.share_groups.shard.ShareGroupShard.empty_group`)."""
    if not _hosts(ctx, group_id):
        return errors.NOT_COORDINATOR
    members = _members(ctx, group_id)
    if members is None:
        return errors.GROUP_ID_NOT_FOUND
    return errors.NON_EMPTY_GROUP if members else errors.NONE


_REFUSALS = {
    errors.NOT_COORDINATOR: "This is not the correct coordinator.",
    errors.NON_EMPTY_GROUP: "The group is not empty.",
    GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
}


async def handle_alter_share_group_offsets(ctx: BrokerContext, request: Request) -> Any:
    body = request.body
    group_id = body.group_id
    code, message = GROUP_AUTHORIZATION_FAILED, None
    if allowed(ctx, AclOperation.READ, ResourceType.GROUP, group_id):
        code = errors.NOT_COORDINATOR
        if _hosts(ctx, group_id):
            # Kafka's getOrMaybeCreateShareGroup: a group that does not exist is made (empty).
            empty = ctx.broker.group_coordinator.empty_share_group
            code, message = await ctx.blocking(partial(empty, group_id))
    if code:
        return AlterResponse(throttle_time_ms=0, error_code=code,
                             error_message=message or _REFUSALS.get(code),
                             responses=[])  # fmt: skip
    names = [t.topic_name for t in body.topics]
    readable = allowed_names(ctx, AclOperation.READ, ResourceType.TOPIC, names)
    counts = await _partition_counts(ctx, names)
    ids = await topic_ids(ctx, names)
    persister = StorePersister(ctx.broker.store)
    unknown, known = [], []
    for topic in body.topics:
        name = topic.topic_name
        topic_id = ids.get(name)
        if topic_id is None or name not in counts:
            rows = [AlterPartition(partition_index=p.partition_index, error_code=(
                        TOPIC_AUTHORIZATION_FAILED if name not in readable
                        else errors.UNKNOWN_TOPIC_OR_PARTITION), error_message=_UNKNOWN)
                    for p in topic.partitions]  # fmt: skip
            unknown.append(AlterTopic(topic_name=name, topic_id=NO_TOPIC_ID, partitions=rows))
            continue
        rows = []
        for partition in topic.partitions:
            row = AlterPartition(partition_index=partition.partition_index,
                                 error_code=errors.NONE)  # fmt: skip
            if name not in readable:
                row.error_code = TOPIC_AUTHORIZATION_FAILED
            elif not 0 <= partition.partition_index < counts[name]:
                row.error_code, row.error_message = errors.UNKNOWN_TOPIC_OR_PARTITION, _UNKNOWN
            else:
                await ctx.blocking(
                    partial(_reset, persister, group_id, topic_id, partition.partition_index,
                            partition.start_offset)
                )  # fmt: skip
            rows.append(row)
        known.append(AlterTopic(topic_name=name, topic_id=topic_id, partitions=rows))
    # Kafka 4.4 answers the unknown topics first.
    return AlterResponse(throttle_time_ms=0, error_code=errors.NONE, responses=unknown + known)


def _reset(
    persister: StorePersister, group_id: str, topic_id: uuid.UUID, partition: int, offset: int
) -> None:
    """The state of a partition started afresh at ``offset`` (a new state epoch, written over
    whatever is there; a negative offset: the state forgotten)."""
    found = persister.read(group_id, topic_id, partition)
    if offset < 0:
        persister.delete(group_id, topic_id, partition)
        return
    epoch = 0 if found is None else found[0].state_epoch + 1
    state = ShareState(offset, 0, epoch)
    persister.write(group_id, topic_id, partition, state, None if found is None else found[1])


def _delete(persister: StorePersister, group_id: str, topic_id: uuid.UUID, count: int) -> None:
    for partition in range(count):
        persister.delete(group_id, topic_id, partition)


async def handle_delete_share_group_offsets(ctx: BrokerContext, request: Request) -> Any:
    body = request.body
    group_id = body.group_id
    code = (
        GROUP_AUTHORIZATION_FAILED
        if not allowed(ctx, AclOperation.DELETE, ResourceType.GROUP, group_id)
        else _empty_group_error(ctx, group_id)
    )
    if code:
        message = f"Group {group_id} not found." if code == errors.GROUP_ID_NOT_FOUND else (
            _REFUSALS.get(code))  # fmt: skip
        return DeleteResponse(throttle_time_ms=0, error_code=code, error_message=message,
                              responses=[])  # fmt: skip
    names = [t.topic_name for t in body.topics]
    readable = allowed_names(ctx, AclOperation.READ, ResourceType.TOPIC, names)
    counts = await _partition_counts(ctx, names)
    ids = await topic_ids(ctx, names)
    persister = StorePersister(ctx.broker.store)
    deleted, refused = [], []
    for name in names:
        topic_id = ids.get(name)
        if name not in readable:
            refused.append(DeleteTopic(topic_name=name, topic_id=topic_id or NO_TOPIC_ID,
                                       error_code=TOPIC_AUTHORIZATION_FAILED))  # fmt: skip
        elif topic_id is None or name not in counts:
            refused.append(DeleteTopic(topic_name=name, topic_id=NO_TOPIC_ID,
                                       error_code=errors.UNKNOWN_TOPIC_OR_PARTITION,
                                       error_message=_UNKNOWN))  # fmt: skip
        else:
            partitions = counts[name]
            await ctx.blocking(partial(_delete, persister, group_id, topic_id, partitions))
            deleted.append(DeleteTopic(topic_name=name, topic_id=topic_id,
                                       error_code=errors.NONE))  # fmt: skip
    # Kafka 4.4 answers the deleted topics first.
    return DeleteResponse(throttle_time_ms=0, error_code=errors.NONE, responses=deleted + refused)


#: api name → (lowest version, highest version, handler).
SHARE_OFFSET_APIS: dict[str, tuple[int, int, Any]] = {
    "DescribeShareGroupOffsets": (0, 1, handle_describe_share_group_offsets),
    "AlterShareGroupOffsets": (0, 0, handle_alter_share_group_offsets),
    "DeleteShareGroupOffsets": (0, 0, handle_delete_share_group_offsets),
}

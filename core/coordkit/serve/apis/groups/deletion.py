"""DeleteGroups and OffsetDelete through the engine coordinator (its :mod:`deletion
<coordkit.engine.groups.deletion>` part), answered as Kafka 4's broker and coordinator answer.

DeleteGroups: per group NONE, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, or NOT_COORDINATOR when
another broker coordinates it; v3's error message is null, as Kafka 4.4 answers.
OffsetDelete: a topic the cluster does not have, or a partition beyond its count, is
UNKNOWN_TOPIC_OR_PARTITION before the coordinator sees the request (Kafka's ``KafkaApis``); the
coordinator's refusal of the whole request (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP,
NOT_COORDINATOR) is the top-level error with no topics; otherwise each asked partition answers
NONE or, for a topic the group subscribes to, GROUP_SUBSCRIBED_TO_TOPIC. Offsets deleted take
those pending in open transactions with them, as Kafka's tombstones do.
"""

from __future__ import annotations

import functools
from typing import Any

from coordkit.engine.groups import ErrorCode
from coordkit.kafka.acls import AclOperation, ResourceType
from coordkit.kafka.model import TopicPartition
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.apis.groups.waiting import coordinator
from coordkit.serve.authorization import (
    GROUP_AUTHORIZATION_FAILED,
    TOPIC_AUTHORIZATION_FAILED,
    allowed_names,
)
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext
from coordkit.serve.transactions.coordinator import coordinator_of

DeleteResponse = messages.DeleteGroupsResponse
DeletedGroup = nested(DeleteResponse, "DeletableGroupResult")
OffsetDeleteResponse = messages.OffsetDeleteResponse
DeletedTopic = nested(OffsetDeleteResponse, "OffsetDeleteResponseTopic")
DeletedPartition = nested(OffsetDeleteResponse, "OffsetDeleteResponsePartition")

DELETE_VERSIONS = (0, 3)
OFFSET_DELETE_VERSIONS = (0, 0)


async def handle_delete_groups(ctx: BrokerContext, request: Request) -> Any:
    names = list(request.body.groups_names)
    # Kafka's KafkaApis: Delete on each group, or GROUP_AUTHORIZATION_FAILED and it stays.
    deletable = allowed_names(ctx, AclOperation.DELETE, ResourceType.GROUP, names)

    def delete() -> list[int]:
        return [
            int(coordinator(ctx).delete_group(name))
            if name in deletable
            else GROUP_AUTHORIZATION_FAILED
            for name in names
        ]

    codes = await ctx.blocking(delete)
    # A deleted group's offsets pending in open transactions go with it (Kafka's tombstones).
    pending = coordinator_of(ctx).txn_offsets
    for name, code in zip(names, codes, strict=True):
        if code == errors.NONE:
            await ctx.blocking(functools.partial(pending.drop, name, None))
    results = [
        DeletedGroup(group_id=name, error_code=code, error_message=None)
        for name, code in zip(names, codes, strict=True)
    ]
    return DeleteResponse(throttle_time_ms=0, results=results)


async def handle_offset_delete(ctx: BrokerContext, request: Request) -> Any:
    body = request.body
    names = [t.name for t in body.topics]
    # Kafka's KafkaApis: Delete on the group (or the whole request refused), Read on each topic.
    if not allowed_names(ctx, AclOperation.DELETE, ResourceType.GROUP, [body.group_id]):
        return OffsetDeleteResponse(error_code=GROUP_AUTHORIZATION_FAILED, throttle_time_ms=0,
                                    topics=[])  # fmt: skip
    readable = allowed_names(ctx, AclOperation.READ, ResourceType.TOPIC, names)
    engine = coordinator(ctx)
    counts = await ctx.blocking(lambda: engine.topic_partitions(names))
    asked: dict[str, list[int]] = {}
    unknown: dict[str, set[int]] = {}
    for topic in body.topics:
        for p in topic.partitions:
            if topic.name not in readable:
                continue
            if 0 <= p.partition_index < counts.get(topic.name, 0):
                asked.setdefault(topic.name, []).append(p.partition_index)
            else:
                unknown.setdefault(topic.name, set()).add(p.partition_index)
    error, codes = await ctx.blocking(lambda: engine.delete_offsets(body.group_id, asked))
    if error != ErrorCode.NONE:
        return OffsetDeleteResponse(error_code=int(error), throttle_time_ms=0, topics=[])
    # The deleted offsets' pending ones in open transactions go with them (Kafka's tombstones).
    deleted = [TopicPartition(topic, p) for topic, ps in asked.items()
               if codes.get(topic, errors.NONE) == errors.NONE for p in ps]  # fmt: skip
    if deleted:
        pending = coordinator_of(ctx).txn_offsets
        await ctx.blocking(functools.partial(pending.drop, body.group_id, deleted))
    topics = []
    for topic in body.topics:
        missing = unknown.get(topic.name, set())
        topics.append(DeletedTopic(name=topic.name, partitions=[
            DeletedPartition(
                partition_index=p.partition_index,
                error_code=(TOPIC_AUTHORIZATION_FAILED if topic.name not in readable
                            else errors.UNKNOWN_TOPIC_OR_PARTITION if p.partition_index in missing
                            else codes.get(topic.name, errors.NONE)),
            ) for p in topic.partitions]))  # fmt: skip
    return OffsetDeleteResponse(error_code=errors.NONE, throttle_time_ms=0, topics=topics)

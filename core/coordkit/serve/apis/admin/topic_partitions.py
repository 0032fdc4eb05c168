"""DescribeTopicPartitions (KIP-966): topics and their partitions with cursor paging, which
Kafka 4's ``kafka-topics --describe`` and AdminClient ``describeTopics`` ask for.

As Kafka's ``DescribeTopicPartitionsRequestHandler`` and
``KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse``: no topics named means every
topic; topics are answered in name order from the cursor's topic on, partitions from the cursor's
partition on, at most ``response_partition_limit`` partitions (capped at Kafka's
``max.request.partition.size.limit``, 2000) with ``next_cursor`` naming where to go on. A named
topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for a name
Kafka refuses), left out when every topic was asked for. A cursor whose topic is not among the
named ones, or whose partition is negative, is INVALID_REQUEST for every named topic (Kafka's
error response). Replicas and ISR are the partition state's, offline replicas those not
registered; there are no eligible leader replicas (KIP-966's ELR is KRaft's): empty lists.

Under an authorizer, as Kafka's handler: a topic the principal may not Describe is left out of a
listing of every topic, and answered TOPIC_AUTHORIZATION_FAILED (no id, no partitions) after the
others when named; each answered topic carries the operations the principal may do on it.
"""

from __future__ import annotations

import uuid
from typing import Any

from coordkit.engine.cluster_id import kafka_uuid
from coordkit.engine.snapshot import ClusterView, read_view, registered_brokers
from coordkit.kafka.acls import AclOperation, ResourceType
from coordkit.kafka.model import NO_LEADER
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.apis.metadata import INTERNAL_TOPICS, valid_name
from coordkit.serve.authorization import (
    TOPIC_AUTHORIZATION_FAILED,
    allowed_names,
    authorized_operations,
)
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext

Response = messages.DescribeTopicPartitionsResponse
Topic_ = nested(Response, "DescribeTopicPartitionsResponseTopic")
Partition_ = nested(Response, "DescribeTopicPartitionsResponsePartition")
Cursor_ = nested(Response, "Cursor")

VERSIONS = (0, 0)
#: Kafka's ``max.request.partition.size.limit`` default.
MAX_PARTITIONS = 2000
NO_TOPIC_ID = uuid.UUID(int=0)


def _topic_id(view: ClusterView, name: str) -> uuid.UUID:
    text = view.topic_ids.get(name)
    try:
        return NO_TOPIC_ID if text is None else kafka_uuid(text)
    except ValueError:
        return NO_TOPIC_ID


def _partitions(view: ClusterView, live: set[int]) -> dict[str, dict[int, Any]]:
    found: dict[str, dict[int, Any]] = {}
    for p in view.partitions:
        found.setdefault(p.topic, {})[p.partition] = Partition_(
            error_code=errors.NONE,
            partition_index=p.partition,
            leader_id=p.leader if p.leader in live else NO_LEADER,
            leader_epoch=p.leader_epoch,
            replica_nodes=list(p.replicas),
            isr_nodes=list(p.isr),
            eligible_leader_replicas=[],
            last_known_elr=[],
            offline_replicas=[r for r in p.replicas if r not in live],
        )
    for topic, partition in view.uninitialised:
        found.setdefault(topic, {})[partition] = Partition_(
            error_code=errors.LEADER_NOT_AVAILABLE, partition_index=partition,
            leader_id=NO_LEADER, leader_epoch=-1, replica_nodes=[], isr_nodes=[],
            eligible_leader_replicas=[], last_known_elr=[], offline_replicas=[],
        )  # fmt: skip
    return found


def _refused(request: Request, code: int) -> Any:
    return Response(
        throttle_time_ms=0,
        topics=[
            Topic_(
                error_code=code, name=t.name, topic_id=NO_TOPIC_ID, is_internal=False, partitions=[]
            )
            for t in request.body.topics
        ],
        next_cursor=None,
    )


async def handle_describe_topic_partitions(ctx: BrokerContext, request: Request) -> Any:
    body = request.body
    every = not body.topics
    cursor = body.cursor
    start_topic = "" if cursor is None else cursor.topic_name
    store = ctx.broker.store
    if not every:
        names = sorted({t.name for t in body.topics if t.name >= start_topic})
        if cursor is not None and cursor.topic_name not in names:
            return _refused(request, errors.INVALID_REQUEST)
    if cursor is not None and cursor.partition_index < 0:
        return _refused(request, errors.INVALID_REQUEST)
    view = await ctx.blocking(lambda: read_view(store, None if every else names))
    live = set(await ctx.blocking(lambda: registered_brokers(store)))
    by_topic = _partitions(view, live)
    if every:
        names = sorted(t for t in by_topic if t >= start_topic)
    described = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    refused = [] if every else [name for name in names if name not in described]
    names = [name for name in names if name in described]
    remaining = max(min(MAX_PARTITIONS, body.response_partition_limit), 1)
    topics: list[Any] = []
    next_cursor = None
    for name in names:
        if remaining == 0:
            next_cursor = Cursor_(topic_name=name, partition_index=0)
            break
        found = by_topic.get(name)
        if found is None:
            if not every:
                code = errors.UNKNOWN_TOPIC_OR_PARTITION
                if not valid_name(name):
                    code = errors.INVALID_TOPIC_EXCEPTION
                topics.append(Topic_(error_code=code, name=name, topic_id=_topic_id(view, name),
                                     is_internal=name in INTERNAL_TOPICS, partitions=[],
                                     topic_authorized_operations=authorized_operations(
                                         ctx, ResourceType.TOPIC, name)))  # fmt: skip
            continue
        first = cursor.partition_index if cursor is not None and name == start_topic else 0
        upper = min(len(found), first + remaining)
        chosen = [found[i] for i in range(first, upper) if i in found]
        topics.append(Topic_(error_code=errors.NONE, name=name, topic_id=_topic_id(view, name),
                             is_internal=name in INTERNAL_TOPICS, partitions=chosen,
                             topic_authorized_operations=authorized_operations(
                                 ctx, ResourceType.TOPIC, name)))  # fmt: skip
        if upper < len(found):
            next_cursor = Cursor_(topic_name=name, partition_index=upper)
            break
        remaining -= len(chosen)
    topics += [
        Topic_(error_code=TOPIC_AUTHORIZATION_FAILED, name=name, topic_id=NO_TOPIC_ID,
               is_internal=False, partitions=[])
        for name in refused
    ]  # fmt: skip
    return Response(throttle_time_ms=0, topics=topics, next_cursor=next_cursor)

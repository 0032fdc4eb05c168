"""DeleteRecords: move a partition's log start offset on its leader (Kafka's
``ReplicaManager.deleteRecords`` and ``Partition.deleteRecordsOnLeader``).

Per partition, as Kafka answers: a partition this broker has no metadata for is
UNKNOWN_TOPIC_OR_PARTITION, one it does not lead NOT_LEADER_OR_FOLLOWER; offset -1 means the
high watermark; an offset past the high watermark (or below -1) is OFFSET_OUT_OF_RANGE; a topic
whose ``cleanup.policy`` leaves out ``delete`` is POLICY_VIOLATION. Otherwise the leader's log
start moves up to the offset (never back) and the answer's low watermark is the log start.

The records below go with their segments at the next retention check (Kafka's
``deleteLogStartOffsetBreachedSegments``); followers learn the new log start from the leader's
Fetch answers (``log_start_offset``) and follow it. Kafka holds the answer until every live
follower has reported the new log start (``DelayedDeleteRecords``); coordkit answers once the
leader's log start moved, with the same low watermark.

Under an authorizer each topic needs Delete: else its partitions are TOPIC_AUTHORIZATION_FAILED
(before any other check, so a refused principal learns nothing of the topic) and keep their
records, as Kafka's ``KafkaApis.handleDeleteRecordsRequest``.
"""

from __future__ import annotations

from typing import Any

from coordkit.kafka.acls import AclOperation, ResourceType
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.apis.fetch import high_watermark
from coordkit.serve.authorization import TOPIC_AUTHORIZATION_FAILED, allowed_names
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext
from coordkit.serve.topic_configs import CLEANUP_POLICY

Response = messages.DeleteRecordsResponse
TopicResult = nested(Response, "DeleteRecordsTopicResult")
PartitionResult = nested(Response, "DeleteRecordsPartitionResult")

VERSIONS = (0, 2)
#: Kafka's ``DeleteRecordsRequest.HIGH_WATERMARK``: delete up to the high watermark.
HIGH_WATERMARK = -1
NO_WATERMARK = -1


def _deletable(ctx: BrokerContext, topics: list[str]) -> dict[str, bool]:
    """Whether each topic's ``cleanup.policy`` includes ``delete`` (store work, off the loop)."""
    found = {}
    for topic in topics:
        try:
            found[topic] = "delete" in ctx.topic_configs.value(topic, CLEANUP_POLICY)
        except Exception:
            found[topic] = True
    return found


def _delete(ctx: BrokerContext, topic: str, partition: int, offset: int, deletable: bool) -> Any:
    answer = PartitionResult(partition_index=partition, low_watermark=NO_WATERMARK)
    tp = (topic, partition)
    error, _ = ctx.leader_error(tp)
    if error:
        answer.error_code = error
        return answer
    if not deletable:
        answer.error_code = errors.POLICY_VIOLATION
        return answer
    partition_log = ctx.logs.get(tp)
    hw = high_watermark(ctx, tp, partition_log)
    wanted = hw if offset == HIGH_WATERMARK else offset
    if wanted < 0 or wanted > hw:
        answer.error_code = errors.OFFSET_OUT_OF_RANGE
        return answer
    partition_log.maybe_increment_log_start(wanted)
    answer.error_code = errors.NONE
    answer.low_watermark = partition_log.log_start
    return answer


def _refused(partition: int) -> Any:
    return PartitionResult(partition_index=partition, low_watermark=NO_WATERMARK,
                           error_code=TOPIC_AUTHORIZATION_FAILED)  # fmt: skip


async def handle_delete_records(ctx: BrokerContext, request: Request) -> Any:
    topics = request.body.topics
    may_delete = allowed_names(ctx, AclOperation.DELETE, ResourceType.TOPIC,
                               [t.name for t in topics])  # fmt: skip
    names = sorted(may_delete)
    deletable = await ctx.blocking(lambda: _deletable(ctx, names))
    return Response(
        throttle_time_ms=0,
        topics=[
            TopicResult(
                name=t.name,
                partitions=[
                    _delete(ctx, t.name, p.partition_index, p.offset, deletable[t.name])
                    if t.name in may_delete
                    else _refused(p.partition_index)
                    for p in t.partitions
                ],
            )
            for t in topics
        ],
    )

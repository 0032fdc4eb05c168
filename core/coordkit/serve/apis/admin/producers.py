"""DescribeProducers (KIP-664): the idempotent producers a partition's log holds state of.

As Kafka's ``ReplicaManager.activeProducerState``: any replica holding the partition's log
answers (the admin client asks the leader), with each producer's id, epoch, last sequence and
the timestamp of its last batch, the coordinator epoch of its last transaction marker and the
first offset of its open transaction (-1 when none: what ``kafka-transactions abort`` and
``find-hanging`` read, the latter for every partition a broker holds, the internal topics'
too); a partition the broker holds no replica of is NOT_LEADER_OR_FOLLOWER, one the cluster does
not have UNKNOWN_TOPIC_OR_PARTITION.

Under an authorizer each topic needs Read: else its partitions are TOPIC_AUTHORIZATION_FAILED
with Kafka's message, before the topic's existence is looked at (``KafkaApis``).
"""

from __future__ import annotations

from typing import Any

from coordkit.kafka.acls import AclOperation, ResourceType
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.apis.metadata import valid_name
from coordkit.serve.authorization import (
    AUTHORIZATION_MESSAGES,
    TOPIC_AUTHORIZATION_FAILED,
    allowed_names,
)
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext

Response = messages.DescribeProducersResponse
Topic_ = nested(Response, "TopicResponse")
Partition_ = nested(Response, "PartitionResponse")
Producer_ = nested(Response, "ProducerState")

VERSIONS = (0, 0)
NONE_KNOWN = -1


def _describe(ctx: BrokerContext, topic: str, partition: int) -> Any:
    answer = Partition_(partition_index=partition, error_code=errors.NONE, error_message=None,
                        active_producers=[])  # fmt: skip
    tp = (topic, partition)
    state = ctx.replication.log(tp)
    if state is None:
        answer.error_code = errors.UNKNOWN_TOPIC_OR_PARTITION
        return answer
    if ctx.broker_id not in state.replicas:
        answer.error_code = errors.NOT_LEADER_OR_FOLLOWER
        return answer
    partition_log = ctx.logs.find(tp)
    if partition_log is None:
        # A replica whose log nothing was written to yet: no producers. So are the partitions
        # of __consumer_offsets and __transaction_state, whose state coordkit keeps in the
        # store (Kafka's list a transaction's producer while its offsets are pending).
        return answer
    answer.active_producers = [
        Producer_(
            producer_id=producer_id,
            producer_epoch=entry.epoch,
            last_sequence=entry.last_seq,
            last_timestamp=entry.batches[-1].timestamp if entry.batches else NONE_KNOWN,
            coordinator_epoch=entry.coordinator_epoch,
            current_txn_start_offset=entry.current_txn_first_offset,
        )
        for producer_id, entry in partition_log.producers.entries()
    ]
    return answer


def _refused(partition: int) -> Any:
    return Partition_(partition_index=partition, error_code=TOPIC_AUTHORIZATION_FAILED,
                      error_message=AUTHORIZATION_MESSAGES[TOPIC_AUTHORIZATION_FAILED],
                      active_producers=[])  # fmt: skip


async def handle_describe_producers(ctx: BrokerContext, request: Request) -> Any:
    topics = request.body.topics
    # Kafka checks a topic's name before its ACLs; a name it refuses is no topic to hide.
    named = [t.name for t in topics if valid_name(t.name)]
    readable = allowed_names(ctx, AclOperation.READ, ResourceType.TOPIC, named)
    return Response(
        throttle_time_ms=0,
        topics=[
            Topic_(name=t.name, partitions=[
                _describe(ctx, t.name, p)
                if t.name in readable or not valid_name(t.name) else _refused(p)
                for p in t.partition_indexes])
            for t in topics
        ],
    )  # fmt: skip

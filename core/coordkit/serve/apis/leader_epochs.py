"""OffsetForLeaderEpoch: where an epoch of a partition's log ends, as its leader sees it.

Consumers ask after a partition's leader moved (KIP-320): "the last record I read was written in
epoch E — where does E end in your log?". An end below the consumer's position means the new
leader's log was truncated under it, and the consumer seeks back to that end. Followers in this
process truncate in memory (:mod:`coordkit.serve.dataplane.replicas`); followers in other processes ask
too (:mod:`coordkit.serve.dataplane.remote_replicas`).

Kafka's rules (``ReplicaManager.lastOffsetForLeaderEpoch``, ``Partition.lastOffsetForLeaderEpoch``):
a broker that holds no replica answers NOT_LEADER_OR_FOLLOWER (UNKNOWN_TOPIC_OR_PARTITION when
no such partition exists); a ``current_leader_epoch`` (v2+; -1: none) older than the partition's
is FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH; then only the leader answers, whatever
``replica_id`` (v3+) says, from the epochs of its log's batches
(:meth:`~coordkit.serve.dataplane.log.PartitionLog.leader_end_offset_for`).

Under an authorizer (KIP-320's rule in ``KafkaApis.handleOffsetForLeaderEpochRequest``):
ClusterAction on the cluster (a follower broker) answers every topic; otherwise a topic needs
Describe, and one without it has each partition answered TOPIC_AUTHORIZATION_FAILED, after the
others.
"""

from __future__ import annotations

from typing import Any

from coordkit.kafka.acls import AclOperation, ResourceType
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.authorization import (
    TOPIC_AUTHORIZATION_FAILED,
    allowed_names,
    cluster_allowed,
)
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext

OffsetForLeaderEpochResponse = messages.OffsetForLeaderEpochResponse
TopicResult = nested(OffsetForLeaderEpochResponse, "OffsetForLeaderTopicResult")
EpochEndOffset = nested(OffsetForLeaderEpochResponse, "EpochEndOffset")
#: ``current_leader_epoch`` when the client does not fence (and before v2).
NO_EPOCH = -1


def _end_offset(ctx: BrokerContext, topic: str, partition: Any) -> Any:
    tp = (topic, partition.partition)
    answer = EpochEndOffset(partition=partition.partition, error_code=errors.NONE,
                            leader_epoch=-1, end_offset=-1)  # fmt: skip
    state = ctx.replication.log(tp)
    fencing = partition.current_leader_epoch != NO_EPOCH
    if state is None:
        answer.error_code = errors.UNKNOWN_TOPIC_OR_PARTITION
    elif ctx.broker_id not in state.replicas:
        answer.error_code = errors.NOT_LEADER_OR_FOLLOWER
    elif fencing and partition.current_leader_epoch < state.leader_epoch:
        answer.error_code = errors.FENCED_LEADER_EPOCH
    elif fencing and partition.current_leader_epoch > state.leader_epoch:
        answer.error_code = errors.UNKNOWN_LEADER_EPOCH
    elif state.leader != ctx.broker_id:
        answer.error_code = errors.NOT_LEADER_OR_FOLLOWER
    else:
        answer.leader_epoch, answer.end_offset = ctx.logs.get(tp).leader_end_offset_for(
            partition.leader_epoch, state.leader_epoch
        )
    return answer


def _describable(ctx: BrokerContext, topics: list[str]) -> set[str]:
    if cluster_allowed(ctx, AclOperation.CLUSTER_ACTION):
        return set(topics)
    return allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topics)


async def handle_offset_for_leader_epoch(ctx: BrokerContext, request: Request) -> Any:
    asked = request.body.topics
    described = _describable(ctx, [t.topic for t in asked])
    topics = [
        TopicResult(topic=t.topic, partitions=[_end_offset(ctx, t.topic, p) for p in t.partitions])
        for t in asked
        if t.topic in described
    ]
    topics += [
        TopicResult(topic=t.topic, partitions=[
            EpochEndOffset(partition=p.partition, error_code=TOPIC_AUTHORIZATION_FAILED,
                           leader_epoch=-1, end_offset=-1)
            for p in t.partitions])
        for t in asked
        if t.topic not in described
    ]  # fmt: skip
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)

"""TxnOffsetCommit: a transactional producer commits a group's offsets inside its transaction
(KIP-98; its group coordinator holds them, see :mod:`coordkit.serve.transactions.txn_offsets`,
until the transaction's marker reaches the group's ``__consumer_offsets`` partition).

As Kafka's ``KafkaApis.handleTxnOffsetCommitRequest``: Write on the transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition), Read on the group
(GROUP_AUTHORIZATION_FAILED), Read on each topic (TOPIC_AUTHORIZATION_FAILED); a partition the
cluster does not have is UNKNOWN_TOPIC_OR_PARTITION; a broker that does not coordinate the group
answers NOT_COORDINATOR; metadata longer than Kafka's ``offset.metadata.max.bytes`` (4096) is
OFFSET_METADATA_TOO_LARGE; a group id no store can hold, INVALID_GROUP_ID. The write is verified
with the producer's transaction as Kafka's group coordinator verifies it (KIP-890): its offsets
partition added by AddOffsetsToTxn, the producer's id and epoch those of the transaction
(TRANSACTION_ABORTABLE, INVALID_PRODUCER_ID_MAPPING, INVALID_PRODUCER_EPOCH), so nothing is held
that no marker would end. From v3 (KIP-447) the
member id, generation and group instance id are checked against the group as Kafka's group
coordinator checks them (``validateTransactionalOffsetCommit``: ILLEGAL_GENERATION,
UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID), for every partition that got that far. Versions 0-4 (v5
adds AddOffsetsToTxn's work under transaction version 2, v6 names topics by id: not served).
"""

from __future__ import annotations

import functools
import time
from typing import Any

from coordkit.engine.groups.protocol import ErrorCode
from coordkit.kafka.acls import AclOperation, ResourceType
from coordkit.kafka.coordinators import OFFSETS_TOPIC
from coordkit.kafka.model import TopicPartition
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.authorization import (
    GROUP_AUTHORIZATION_FAILED,
    TOPIC_AUTHORIZATION_FAILED,
    allowed,
    allowed_names,
)
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext
from coordkit.serve.transactions.coordinator import coordinator_of
from coordkit.serve.transactions.verification import (
    SupportedOperation,
    txn_offset_commit_error,
    verifier_of,
)
from coordkit.strategies.offsets import (
    InvalidOffsetRequestError,
    OffsetAndMetadata,
    validate_group_id,
)

Response = messages.TxnOffsetCommitResponse
TopicAnswer = nested(Response, "TxnOffsetCommitResponseTopic")
PartitionAnswer = nested(Response, "TxnOffsetCommitResponsePartition")

VERSIONS = (0, 4)
#: v3+ name the committing member: its id, generation and group instance id (KIP-447).
MEMBER_VERSION = 3
#: Kafka's ``offset.metadata.max.bytes`` default.
OFFSET_METADATA_MAX_BYTES = 4096
OFFSET_METADATA_TOO_LARGE = 12


def _checked(
    ctx: BrokerContext, request: Request, wanted: list[tuple[str, int]]
) -> dict[tuple[str, int], int]:
    """The codes of the partitions of ``wanted`` refused before the group coordinator is asked
    (Kafka's ``KafkaApis`` checks): every partition's when the whole request is refused."""
    body = request.body
    if not allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
        return dict.fromkeys(wanted, errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not allowed(ctx, AclOperation.READ, ResourceType.GROUP, body.group_id):
        return dict.fromkeys(wanted, GROUP_AUTHORIZATION_FAILED)
    try:
        validate_group_id(body.group_id)
    except InvalidOffsetRequestError:
        return dict.fromkeys(wanted, errors.INVALID_GROUP_ID)
    if not ctx.leads((OFFSETS_TOPIC, ctx.broker.group_coordinator.partition_for(body.group_id))):
        return dict.fromkeys(wanted, errors.NOT_COORDINATOR)
    readable = allowed_names(ctx, AclOperation.READ, ResourceType.TOPIC, (t for t, _ in wanted))
    codes: dict[tuple[str, int], int] = {}
    for tp in wanted:
        if tp[0] not in readable:
            codes[tp] = TOPIC_AUTHORIZATION_FAILED
        elif ctx.leadership(tp) is None:
            codes[tp] = errors.UNKNOWN_TOPIC_OR_PARTITION
    return codes


async def _verified(ctx: BrokerContext, request: Request) -> int:
    """The transaction's verification with its coordinator (KIP-890, as Kafka 4.4's group
    coordinator asks before it writes the offsets): the group's ``__consumer_offsets`` partition
    must be in the producer's transaction (AddOffsetsToTxn added it), else nothing is held that
    no marker would end."""
    body = request.body
    partition = (OFFSETS_TOPIC, ctx.broker.group_coordinator.partition_for(body.group_id))
    operation = SupportedOperation.for_txn_offset_commit(request.version)
    unverified = await verifier_of(ctx).verify(
        body.transactional_id, (body.producer_id, body.producer_epoch), [partition], operation
    )
    return txn_offset_commit_error(unverified[partition]) if unverified else errors.NONE


def _held(ctx: BrokerContext, request: Request, rest: list[tuple[str, int]]) -> dict[Any, int]:
    """The verified partitions' codes, their offsets held pending (store work: off the loop)."""
    body = request.body
    wanted = {(t.name, p.partition_index): p for t in body.topics for p in t.partitions}
    group_coordinator = ctx.broker.group_coordinator
    if request.version >= MEMBER_VERSION:
        member = group_coordinator.validate_txn_offset_commit(
            body.group_id,
            body.member_id,
            body.generation_id_or_member_epoch,
            body.group_instance_id,
        )
        if member is not ErrorCode.NONE:
            return dict.fromkeys(rest, int(member))
    codes: dict[tuple[str, int], int] = {}
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    now = int(time.time() * 1000)
    for tp in rest:
        partition = wanted[tp]
        metadata = partition.committed_metadata or ""
        if len(metadata.encode()) > OFFSET_METADATA_MAX_BYTES:
            codes[tp] = OFFSET_METADATA_TOO_LARGE
        elif partition.committed_offset < 0:
            codes[tp] = errors.INVALID_REQUEST
        else:
            codes[tp] = errors.NONE
            epoch = partition.committed_leader_epoch if request.version >= 2 else -1
            offsets[TopicPartition(*tp)] = OffsetAndMetadata(
                partition.committed_offset, metadata, commit_timestamp=now, leader_epoch=epoch
            )
    if offsets:
        pending = coordinator_of(ctx).txn_offsets
        held = pending.add(body.producer_id, body.producer_epoch, body.group_id, offsets)
        if held is not ErrorCode.NONE:
            codes.update(dict.fromkeys(((tp.topic, tp.partition) for tp in offsets), int(held)))
    return codes


async def _codes(ctx: BrokerContext, request: Request) -> dict[tuple[str, int], int]:
    body = request.body
    wanted = [(t.name, p.partition_index) for t in body.topics for p in t.partitions]
    codes = _checked(ctx, request, wanted)
    # The rest reach the group coordinator (Kafka's KafkaApis filters the above first).
    rest = [tp for tp in wanted if tp not in codes]
    if not rest:
        return codes
    verified = await _verified(ctx, request)
    if verified:
        return {**codes, **dict.fromkeys(rest, verified)}
    held = await ctx.blocking(functools.partial(_held, ctx, request, rest))
    return {**codes, **held}


async def handle_txn_offset_commit(ctx: BrokerContext, request: Request) -> Any:
    codes = await _codes(ctx, request)
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), code in codes.items():
        by_topic.setdefault(topic, []).append(
            PartitionAnswer(partition_index=partition, error_code=code)
        )
    return Response(
        throttle_time_ms=0,
        topics=[TopicAnswer(name=topic, partitions=answers) for topic, answers in by_topic.items()],
    )

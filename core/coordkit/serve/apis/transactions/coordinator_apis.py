"""The transaction coordinator's apis a transactional producer sends (Kafka's ``KafkaApis``
handlers of them, over :class:`~coordkit.serve.transactions.coordinator.TransactionCoordinator`):

* AddPartitionsToTxn v0-3 (the clients' versions): Write on the transactional id
  (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition), Write on each topic; a refused
  topic (TOPIC_AUTHORIZATION_FAILED, internal topics too) or one the cluster does not have
  (UNKNOWN_TOPIC_OR_PARTITION) fails the transaction, and the other partitions are
  OPERATION_NOT_ATTEMPTED. v4-5 are brokers' (KIP-890 part 1: a partition leader verifying a
  transactional Produce), batched by transaction: ClusterAction on the cluster (else the
  request's top-level CLUSTER_AUTHORIZATION_FAILED), no topic authorization; ``verify_only``
  answers each partition NONE if it is in the producer's ongoing transaction, else
  TRANSACTION_ABORTABLE (the leader turns it into what its client knows), or the transaction's
  INVALID_PRODUCER_ID_MAPPING / PRODUCER_FENCED / CONCURRENT_TRANSACTIONS; without it (which
  Kafka 3.9's brokers never send: transaction version 2's) the partitions are added, as Kafka
  3.9's coordinator does. v5 only lets the answer carry TRANSACTION_ABORTABLE, which
  the coordinator gives at v4 too, as Kafka's does;
* AddOffsetsToTxn v0-4: Write on the transactional id, Read on the group (GROUP_AUTHORIZATION_
  FAILED), then the group's ``__consumer_offsets`` partition added as a partition;
* EndTxn v0-4 (v5 bumps the epoch of every transaction, KIP-890's transaction version 2: not
  served): Write on the transactional id.

Below the versions that know PRODUCER_FENCED (2 for these three), it is answered
INVALID_PRODUCER_EPOCH, as Kafka answers older clients.
"""

from __future__ import annotations

from typing import Any

from coordkit.engine.states import TP
from coordkit.kafka.acls import AclOperation, ResourceType
from coordkit.kafka.coordinators import OFFSETS_TOPIC
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.apis.metadata import INTERNAL_TOPICS
from coordkit.serve.authorization import (
    CLUSTER_AUTHORIZATION_FAILED,
    GROUP_AUTHORIZATION_FAILED,
    TOPIC_AUTHORIZATION_FAILED,
    allowed,
    allowed_names,
    cluster_allowed,
)
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext
from coordkit.serve.transactions.coordinator import coordinator_of

AddPartitionsResponse = messages.AddPartitionsToTxnResponse
TopicResult = nested(AddPartitionsResponse, "AddPartitionsToTxnTopicResult")
PartitionResult = nested(AddPartitionsResponse, "AddPartitionsToTxnPartitionResult")
TransactionResult = nested(AddPartitionsResponse, "AddPartitionsToTxnResult")
AddOffsetsResponse = messages.AddOffsetsToTxnResponse
EndTxnResponse = messages.EndTxnResponse

ADD_PARTITIONS_VERSIONS = (0, 5)
#: AddPartitionsToTxn's first version of brokers' requests (batched, ``verify_only``).
FIRST_BROKER_VERSION = 4
ADD_OFFSETS_VERSIONS = (0, 4)
END_TXN_VERSIONS = (0, 4)
#: The first version of these apis whose clients know PRODUCER_FENCED (KIP-588).
PRODUCER_FENCED_VERSION = 2
OPERATION_NOT_ATTEMPTED = 55


def _for_version(code: int, version: int) -> int:
    if code == errors.PRODUCER_FENCED and version < PRODUCER_FENCED_VERSION:
        return errors.INVALID_PRODUCER_EPOCH
    return code


def _may_write(ctx: BrokerContext, transactional_id: str) -> bool:
    return allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)


async def _transaction_codes(
    ctx: BrokerContext,
    version: int,
    transactional_id: str,
    producer: tuple[int, int],
    wanted: list[TP],
    verify_only: bool,
) -> dict[TP, int]:
    """One transaction's partition codes (Kafka's per-transaction part of
    ``handleAddPartitionsToTxnRequest``). A client's (v0-3) needs Write on the id and on each
    topic; a broker's (v4+) was authorized as a whole."""
    codes: dict[TP, int] = {}
    if version < FIRST_BROKER_VERSION and not _may_write(ctx, transactional_id):
        return dict.fromkeys(wanted, errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if version < FIRST_BROKER_VERSION:
        writable = allowed_names(ctx, AclOperation.WRITE, ResourceType.TOPIC,
                                 (t for t, _ in wanted if t not in INTERNAL_TOPICS))  # fmt: skip
    else:
        writable = {t for t, _ in wanted}
    for tp in wanted:
        if tp[0] not in writable:
            codes[tp] = TOPIC_AUTHORIZATION_FAILED
        elif ctx.leadership(tp) is None:
            codes[tp] = errors.UNKNOWN_TOPIC_OR_PARTITION
    if codes:
        return {tp: codes.get(tp, OPERATION_NOT_ATTEMPTED) for tp in wanted}
    coordinator = coordinator_of(ctx)
    if verify_only:
        return await coordinator.verify_partitions(transactional_id, *producer, set(wanted))
    code = await coordinator.add_partitions(transactional_id, *producer, set(wanted))
    return dict.fromkeys(wanted, _for_version(code, version))


def _topic_results(codes: dict[TP, int]) -> list[Any]:
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), code in codes.items():
        by_topic.setdefault(topic, []).append(
            PartitionResult(partition_index=partition, partition_error_code=code)
        )
    return [TopicResult(name=topic, results_by_partition=results)
            for topic, results in by_topic.items()]  # fmt: skip


async def handle_add_partitions_to_txn(ctx: BrokerContext, request: Request) -> Any:
    body, version = request.body, request.version
    if version < FIRST_BROKER_VERSION:
        wanted = [(t.name, p) for t in body.v3_and_below_topics for p in t.partitions]
        producer = (body.v3_and_below_producer_id, body.v3_and_below_producer_epoch)
        codes = await _transaction_codes(ctx, version, body.v3_and_below_transactional_id,
                                         producer, wanted, verify_only=False)  # fmt: skip
        return AddPartitionsResponse(throttle_time_ms=0,
                                     results_by_topic_v3_and_below=_topic_results(codes))  # fmt: skip
    # Brokers only (a leader verifying a transactional Produce): a refusal is the request's.
    if not cluster_allowed(ctx, AclOperation.CLUSTER_ACTION):
        return AddPartitionsResponse(throttle_time_ms=0, error_code=CLUSTER_AUTHORIZATION_FAILED,
                                     results_by_transaction=[])  # fmt: skip
    results = []
    for transaction in body.transactions:
        wanted = [(t.name, p) for t in transaction.topics for p in t.partitions]
        codes = await _transaction_codes(
            ctx, version, transaction.transactional_id,
            (transaction.producer_id, transaction.producer_epoch), wanted,
            verify_only=bool(transaction.verify_only),
        )  # fmt: skip
        results.append(TransactionResult(transactional_id=transaction.transactional_id,
                                         topic_results=_topic_results(codes)))  # fmt: skip
    return AddPartitionsResponse(throttle_time_ms=0, error_code=errors.NONE,
                                 results_by_transaction=results)  # fmt: skip


async def handle_add_offsets_to_txn(ctx: BrokerContext, request: Request) -> Any:
    body = request.body
    if not _may_write(ctx, body.transactional_id):
        code = errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not allowed(ctx, AclOperation.READ, ResourceType.GROUP, body.group_id):
        code = GROUP_AUTHORIZATION_FAILED
    else:
        hosting = ctx.broker.group_coordinator.hosting
        partition = hosting.partition_for(body.group_id)
        code = await coordinator_of(ctx).add_partitions(
            body.transactional_id, body.producer_id, body.producer_epoch,
            {(OFFSETS_TOPIC, partition)},
        )  # fmt: skip
    return AddOffsetsResponse(throttle_time_ms=0, error_code=_for_version(code, request.version))


async def handle_end_txn(ctx: BrokerContext, request: Request) -> Any:
    body = request.body
    if not _may_write(ctx, body.transactional_id):
        code = errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    else:
        code = await coordinator_of(ctx).end_transaction(
            body.transactional_id, body.producer_id, body.producer_epoch, bool(body.committed)
        )
    return EndTxnResponse(throttle_time_ms=0, error_code=_for_version(code, request.version))

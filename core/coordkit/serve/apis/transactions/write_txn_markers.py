"""WriteTxnMarkers: a transaction coordinator asks a partition leader to end a producer's
transaction with a commit or abort marker (Kafka's ``KafkaApis.handleWriteTxnMarkersRequest``).

Brokers only: the request needs ClusterAction on the cluster (CLUSTER_AUTHORIZATION_FAILED for
every partition otherwise). Each partition's marker is appended by its leader as Kafka's
coordinator-origin append: checked against the producer's state (INVALID_PRODUCER_EPOCH,
TRANSACTION_COORDINATOR_FENCED: nothing appended), then waited for as acks=all (the coordinator
completes the transaction only once every partition's marker is replicated), within the
broker's ``request.timeout.ms`` (REQUEST_TIMED_OUT). A partition this broker does not lead is
NOT_LEADER_OR_FOLLOWER, one the cluster does not have UNKNOWN_TOPIC_OR_PARTITION.

A marker to a ``__consumer_offsets`` partition ends the producer's offsets committed inside the
transaction (TxnOffsetCommit) to the groups of that partition, which this broker coordinates:
stored as committed with a commit marker, dropped with an abort
(:mod:`coordkit.serve.transactions.txn_offsets`, which reads them from the store on a broker
that took the partition over); offsets the store did not take are kept and the partition
answered COORDINATOR_NOT_AVAILABLE, so that the coordinator sends the marker again.

Version 1 (Kafka 3.9's and 4's baseline, flexible) and 2 (KIP-1228: the transaction version of
the marker, which a leader without partition verification does not need).
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from coordkit.kafka.acls import AclOperation
from coordkit.kafka.coordinators import OFFSETS_TOPIC
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.authorization import CLUSTER_AUTHORIZATION_FAILED, cluster_allowed
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext
from coordkit.serve.dataplane.log_transactions import append_end_txn_marker
from coordkit.serve.dataplane.transaction_index import EndTxnMarker
from coordkit.serve.transactions.coordinator import coordinator_of

Response = messages.WriteTxnMarkersResponse
MarkerResult = nested(Response, "WritableTxnMarkerResult")
TopicResult = nested(Response, "WritableTxnMarkerTopicResult")
PartitionResult = nested(Response, "WritableTxnMarkerPartitionResult")

VERSIONS = (1, 2)
#: Kafka's ``request.timeout.ms`` default: how long a marker waits for the ISR.
REQUEST_TIMEOUT_MS = 30_000


def _append(ctx: BrokerContext, marker: Any, topic: str, partition: int) -> tuple[int, int]:
    """One partition's marker appended: ``(error code, the offset after it or -1)``."""
    tp = (topic, partition)
    error, leadership = ctx.leader_error(tp)
    if error or leadership is None:
        return error, -1
    partition_log = ctx.logs.get(tp)
    end = EndTxnMarker(commit=bool(marker.transaction_result),
                       coordinator_epoch=marker.coordinator_epoch)  # fmt: skip
    error, offset = append_end_txn_marker(partition_log, marker.producer_id,
                                          marker.producer_epoch, end, leadership[1])  # fmt: skip
    if error:
        return error, -1
    if ctx.logs.replicas is not None:
        ctx.logs.replicas.appended(ctx, tp, partition_log, 1)
    return errors.NONE, offset + 1


async def _end_txn_offsets(ctx: BrokerContext, marker: Any, partition: int) -> int:
    """The producer's pending offsets of the groups of offsets partition ``partition``
    stored (commit) or dropped (abort)."""
    pending = coordinator_of(ctx).txn_offsets
    end = functools.partial(pending.end, partition, marker.producer_id,
                            bool(marker.transaction_result))  # fmt: skip
    return int(await ctx.blocking(end))


async def handle_write_txn_markers(ctx: BrokerContext, request: Request) -> Any:
    permitted = cluster_allowed(ctx, AclOperation.CLUSTER_ACTION)
    results = []
    waits: list[tuple[Any, tuple[str, int], int]] = []
    for marker in request.body.markers:
        topics = []
        for topic in marker.topics:
            answers = []
            for index in topic.partition_indexes:
                answer = PartitionResult(partition_index=index, error_code=errors.NONE)
                if not permitted:
                    answer.error_code = CLUSTER_AUTHORIZATION_FAILED
                else:
                    answer.error_code, end = _append(ctx, marker, topic.name, index)
                    if not answer.error_code and topic.name == OFFSETS_TOPIC:
                        answer.error_code = await _end_txn_offsets(ctx, marker, index)
                    if not answer.error_code:
                        waits.append((answer, (topic.name, index), end))
                answers.append(answer)
            topics.append(TopicResult(name=topic.name, partitions=answers))
        results.append(MarkerResult(producer_id=marker.producer_id, topics=topics))
    if waits:
        ctx.logs.appended()
    replicas = ctx.logs.replicas
    if waits and replicas is not None:
        timeout = REQUEST_TIMEOUT_MS / 1000
        outcomes = await asyncio.gather(
            *(replicas.wait_committed(ctx, tp, end, timeout) for _, tp, end in waits)
        )
        for (answer, _, _), error in zip(waits, outcomes, strict=True):
            answer.error_code = error
    return Response(markers=results)

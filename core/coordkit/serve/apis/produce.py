"""Produce: record batches appended to the leader's log, offsets assigned by the leader, copied
by the followers (:mod:`coordkit.serve.dataplane.replicas`).

* acks=0 gets no response (Kafka's rule: the producer reads none), and a failure closes the
  connection (the one sign such a producer gets);
* acks=1 is answered once the leader appended;
* acks=-1 (all) once every ISR member has the records, i.e. the high watermark passed them, or
  REQUEST_TIMED_OUT at the request's ``timeout_ms`` (the records stay in the leader's log and
  may still commit, as in Kafka); NOT_LEADER_OR_FOLLOWER when the leadership moved meanwhile.
  Those answers keep the offset the records got, as Kafka's ``DelayedProduce`` keeps it.

``min.insync.replicas`` (the topic's config, else the broker's; capped by the replica count, as
Kafka's ``Partition.effectiveMinIsr``): with acks=all and an ISR smaller than it, a partition's
records are refused before they are appended (NOT_ENOUGH_REPLICAS, Kafka's
``Partition.appendRecordsToLeader``); acks=0 and 1 are not refused. Under it the high watermark
does not move (KAFKA-15583, see :mod:`coordkit.engine.replication`), so a produce waiting for its
records while the ISR shrinks below it waits until the ISR grows back or its timeout; it is
answered NOT_ENOUGH_REPLICAS_AFTER_APPEND only when the high watermark passed its records
before the ISR shrank (Kafka's ``Partition.checkEnoughReplicasReachOffset``).

Idempotent producers (a producer id in the batch) are checked per partition as Kafka does (see
:mod:`coordkit.serve.dataplane.producer_state`): a retried batch is answered with its original offset and not
appended again.

A partition's records are checked in Kafka's order, each failure its error: a transactional batch
in a request without a transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, for the whole
request), an unknown partition, anything but exactly one record batch of format v2
(INVALID_RECORD), an internal topic (INVALID_TOPIC_EXCEPTION: only coordinators write there),
another leader (NOT_LEADER_OR_FOLLOWER), a batch over ``message.max.bytes`` (MESSAGE_TOO_LARGE),
a CRC-32C that does not match (CORRUPT_MESSAGE), then what the log refuses (INVALID_RECORD for
a batch that does not decode, or, in a topic whose ``cleanup.policy`` has ``compact``, holds a
record without key — with Kafka's ``LogValidator`` message and record errors —, the idempotent
producer checks) — those last answered with the
log start offset, as Kafka's leader answers what it refuses while appending.

A transactional batch opening the producer's transaction in a partition is first verified with
the transaction coordinator (KIP-890 part 1, ``transaction.partition.verification.enable``, on
by default: see :mod:`coordkit.serve.transactions.verification`); a partition it does not verify
is answered what Kafka's leader answers (INVALID_TXN_STATE "Partition was not added to the
transaction", TRANSACTION_ABORTABLE from v11, NOT_ENOUGH_REPLICAS while the coordinator cannot
tell) with log start offset -1, and nothing appended. Transactional batches of more than one
producer in one request are INVALID_PRODUCER_ID_MAPPING for every partition.

From Produce 10 a partition refused for another leader names the current leader and its endpoint
(KIP-951); from 13 topics are named by id, and an id this process does not know is
UNKNOWN_TOPIC_ID for each of its partitions.

A batch larger than its topic's ``max.message.bytes`` (read with the topic's configs before the
appends; the broker's ``message.max.bytes`` default for a topic not read) is MESSAGE_TOO_LARGE.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import uuid
from typing import Any

from coordkit.engine.states import TP
from coordkit.errors import StoreError
from coordkit.kafka.acls import AclOperation, ResourceType
from coordkit.protocol import Request, messages, records
from coordkit.protocol.crc32c import crc32c
from coordkit.protocol.errors import ProtocolError
from coordkit.serve import errors
from coordkit.serve.apis.metadata import INTERNAL_TOPICS, node_endpoints
from coordkit.serve.authorization import TOPIC_AUTHORIZATION_FAILED, allowed, allowed_names
from coordkit.serve.classes import nested
from coordkit.serve.connection import CloseConnectionError
from coordkit.serve.context import BrokerContext
from coordkit.serve.dataplane.producer_state import VerificationGuard
from coordkit.serve.topic_configs import MAX_MESSAGE_BYTES
from coordkit.serve.transactions.verification import (
    SupportedOperation,
    Unverified,
    produce_refusal,
    verifier_of,
)

log = logging.getLogger("coordkit.serve")

Response = messages.ProduceResponse
TopicResponse = nested(Response, "TopicProduceResponse")
PartitionResponse = nested(Response, "PartitionProduceResponse")
LeaderIdAndEpoch = nested(Response, "LeaderIdAndEpoch")
NodeEndpoint = nested(Response, "NodeEndpoint")
RecordError = nested(Response, "BatchIndexAndErrorMessage")
#: The first Produce version whose NOT_LEADER_OR_FOLLOWER names the current leader (KIP-951),
#: and the first naming topics by id (KIP-516).
CURRENT_LEADER_VERSION = 10
TOPIC_ID_VERSION = 13
ACKS_ALL = -1
#: Kafka's ``message.max.bytes`` default: the largest record batch a leader appends.
MESSAGE_MAX_BYTES = 1_048_588
#: A batch's base offset and length, before what its length counts.
_LOG_OVERHEAD = 12
_MAGIC_OFFSET = 16
#: Kafka's ``LegacyRecord.RECORD_OVERHEAD_V0``: a batch length below any format's smallest
#: record is corrupt.
_SMALLEST_BATCH_LENGTH = 14
_CRC = struct.Struct(">I")
_CRC_OFFSET = 17
_CRC_START = 21
#: Record batch attributes: the transactional bit.
_TRANSACTIONAL = 0x10


class _CorruptBatchError(Exception):
    """A batch length no record format allows."""


def _batch_size(data: bytes, pos: int) -> int | None:
    """The size of the whole batch at ``pos``; ``None`` when no whole batch is there (Kafka's
    ``ByteBufferLogInputStream.nextBatch``)."""
    left = len(data) - pos
    if left < _LOG_OVERHEAD:
        return None
    length = int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True)
    if length < _SMALLEST_BATCH_LENGTH:
        raise _CorruptBatchError(length)
    if left < _MAGIC_OFFSET + 1 or left < _LOG_OVERHEAD + length:
        return None
    return _LOG_OVERHEAD + length


def single_batch(data: bytes) -> tuple[int, bytes]:
    """Kafka's ``ProduceRequest.validateRecords`` for v3+: the records field must hold exactly
    one whole record batch of format v2. ``(NONE, the batch)``, or the error code and ``b""``
    (bytes after the batch too few for another one are passed over, as Kafka passes them)."""
    try:
        size = _batch_size(data, 0)
        if size is None or data[_MAGIC_OFFSET] != records.MAGIC:
            return errors.INVALID_RECORD, b""
        if _batch_size(data, size) is not None:
            return errors.INVALID_RECORD, b""
    except _CorruptBatchError:
        return errors.CORRUPT_MESSAGE, b""
    return errors.NONE, data[:size]


def _transactional(data: bytes) -> bool:
    """Whether the records field's first batch is transactional (Kafka's
    ``ProduceRequest.hasTransactionalRecords`` looks at each partition's first batch)."""
    return len(data) > _MAGIC_OFFSET + 6 and bool(data[_MAGIC_OFFSET + 6] & _TRANSACTIONAL)


def _append(
    ctx: BrokerContext,
    topic: str,
    partition: Any,
    acks: int,
    version: int,
    verified: VerificationGuard | None = None,
) -> tuple[Any, int]:
    """Append one partition's records; its answer and the offset acks=all waits for (-1: none)."""
    tp = (topic, partition.index)
    answer = PartitionResponse(index=partition.index, base_offset=-1, log_append_time_ms=-1)
    error, leadership = ctx.leader_error(tp)
    if error == errors.UNKNOWN_TOPIC_OR_PARTITION:
        answer.error_code = error
        return answer, -1
    shape, batch = single_batch(bytes(partition.records or b""))
    if shape:
        answer.error_code = shape
        return answer, -1
    if acks not in (0, 1, ACKS_ALL):
        answer.error_code = errors.INVALID_REQUIRED_ACKS
        return answer, -1
    if topic in INTERNAL_TOPICS:
        answer.error_code = errors.INVALID_TOPIC_EXCEPTION
        return answer, -1
    if error or leadership is None:
        answer.error_code = error
        if leadership is not None and version >= CURRENT_LEADER_VERSION:
            answer.current_leader = LeaderIdAndEpoch(leader_id=leadership[0],
                                                     leader_epoch=leadership[1])  # fmt: skip
        return answer, -1
    state = ctx.replication.log(tp)
    if acks == ACKS_ALL and state is not None and state.under_min_isr():
        # Kafka's leader refuses before appending, answering its log start offset.
        log.info("broker %s: refused an acks=all produce to %s-%s: ISR %s is smaller than "
                 "min.insync.replicas %s", ctx.broker_id, *tp, list(state.isr),
                 state.effective_min_isr())  # fmt: skip
        answer.error_code = errors.NOT_ENOUGH_REPLICAS
        answer.log_start_offset = ctx.logs.get(tp).log_start
        return answer, -1
    if len(batch) > _max_message_bytes(ctx, tp[0]):
        answer.error_code = errors.MESSAGE_TOO_LARGE
        return answer, -1
    if _CRC.unpack_from(batch, _CRC_OFFSET)[0] != crc32c(memoryview(batch)[_CRC_START:]):
        answer.error_code = errors.CORRUPT_MESSAGE
        return answer, -1
    epoch = leadership[1]
    partition_log = ctx.logs.get(tp)
    try:
        if partition_log.config.compact:
            _refuse_keyless(batch, tp)
        appended = partition_log.append(
            batch, epoch, verify_crc=False, verified=verified,
            verification=ctx.settings.transaction_partition_verification_enable,
        )  # fmt: skip
    except _KeylessRecordsError as exc:
        log.info("broker %s: refused a produce to %s-%s: %s", ctx.broker_id, *tp, exc)
        answer.error_code = errors.INVALID_RECORD
        answer.error_message = str(exc)
        answer.record_errors = [RecordError(batch_index=index, batch_index_error_message=exc.why)
                                for index in exc.indexes]  # fmt: skip
        answer.log_start_offset = partition_log.log_start
        return answer, -1
    except ProtocolError as exc:
        log.info("broker %s: refused a produce to %s-%s: %s", ctx.broker_id, *tp, exc)
        answer.error_code = errors.INVALID_RECORD
        answer.error_message = str(exc)
        answer.log_start_offset = partition_log.log_start
        return answer, -1
    answer.error_code = appended.error
    answer.log_start_offset = partition_log.log_start
    if appended.error:
        return answer, -1
    answer.base_offset = appended.base_offset
    answer.log_append_time_ms = appended.log_append_time
    replicas = ctx.logs.replicas
    if replicas is not None and appended.records:
        replicas.appended(ctx, tp, partition_log, appended.records)
    return answer, appended.end_offset


class _KeylessRecordsError(Exception):
    """Records without key for a compacted topic (Kafka's ``LogValidator.validateKey``)."""

    def __init__(self, indexes: list[int], tp: TP) -> None:
        self.indexes = indexes
        self.why = (
            f"Compacted topic cannot accept message without key in topic partition {tp[0]}-{tp[1]}"
        )
        shown = ", ".join(f"RecordError(batchIndex={i}, message='{self.why}')" for i in indexes[:3])
        super().__init__(
            f"One or more records have been rejected due to {len(indexes)} record errors in "
            f"total, and only showing the first three errors at most: [{shown}]"
        )


def _refuse_keyless(batch: bytes, tp: TP) -> None:
    """:raises _KeylessRecordsError: a record of ``batch`` has no key.
    :raises ProtocolError: the batch does not decode."""
    decoded = records.decode_batch(batch, verify_crc=False)
    keyless = [i for i, record in enumerate(decoded.records) if record.key is None]
    if keyless:
        raise _KeylessRecordsError(keyless, tp)


class _TransactionalBatches:
    """A Produce request's transactional batches, checked with the coordinator before they
    are appended (Kafka's ``ReplicaManager.handleProduceAppend``)."""

    def __init__(self) -> None:
        #: The partitions' (producer id, epoch).
        self.producers: dict[TP, tuple[int, int]] = {}
        #: The partitions the coordinator did not verify, with what the producer is told.
        self.refused: dict[TP, Unverified] = {}
        #: The guards the verified partitions append under.
        self.guards: dict[TP, VerificationGuard] = {}

    def add(self, tp: TP, records_field: bytes) -> None:
        shape, batch = single_batch(records_field)
        if shape or not _transactional(batch):
            return
        try:
            header = records.read_batch_header(batch)
        except ProtocolError:
            return  # the append refuses it
        if header.producer_id >= 0:
            self.producers[tp] = (header.producer_id, header.producer_epoch)

    async def verify(self, ctx: BrokerContext, transactional_id: str, version: int) -> None:
        """Ask the coordinator about the partitions led here whose producer has no open
        transaction in them."""
        if not self.producers or not ctx.settings.transaction_partition_verification_enable:
            return
        (producer,) = set(self.producers.values())
        for tp in self.producers:
            error, _ = ctx.leader_error(tp)
            if error:
                continue  # answered by the append's own checks
            guard = ctx.logs.get(tp).producers.start_verification(producer[0])
            if guard is not None:
                self.guards[tp] = guard
        if not self.guards:
            return
        operation = SupportedOperation.for_produce(version)
        unverified = await verifier_of(ctx).verify(transactional_id, producer, self.guards,
                                                   operation)  # fmt: skip
        self.refused = {tp: produce_refusal(code, operation) for tp, code in unverified.items()}
        if self.refused:
            log.info("broker %s: transactional produce of %r refused: %s", ctx.broker_id,
                     transactional_id, self.refused)  # fmt: skip


def _unverified(partition: Any, refusal: Unverified) -> Any:
    """A partition the coordinator did not verify: Kafka answers it before any append (no
    offsets, log start offset -1)."""
    return PartitionResponse(index=partition.index, error_code=refusal.code,
                             error_message=refusal.message, base_offset=-1,
                             log_append_time_ms=-1, log_start_offset=-1)  # fmt: skip


def _topic_response(version: int, topic: Any, answers: list[Any]) -> Any:
    if version >= TOPIC_ID_VERSION:
        return TopicResponse(topic_id=topic.topic_id, partition_responses=answers)
    return TopicResponse(name=topic.name, partition_responses=answers)


def _unknown_id(partition: Any) -> Any:
    return PartitionResponse(index=partition.index, error_code=errors.UNKNOWN_TOPIC_ID,
                             base_offset=-1, log_append_time_ms=-1)  # fmt: skip


def _refused(version: int, body: Any, code: int) -> Any:
    """Every partition of the request answered ``code`` (an error of the whole request)."""
    return Response(
        throttle_time_ms=0,
        responses=[
            _topic_response(
                version,
                topic,
                [
                    PartitionResponse(
                        index=p.index, error_code=code, base_offset=-1, log_append_time_ms=-1
                    )
                    for p in topic.partition_data
                ],
            )
            for topic in body.topic_data
        ],
    )


def _max_message_bytes(ctx: BrokerContext, topic: str) -> int:
    """The largest batch ``topic`` takes (its ``max.message.bytes``), as Kafka's leader checks
    each batch against its log's config."""
    if not ctx.topic_configs.known(topic):
        return MESSAGE_MAX_BYTES
    return int(ctx.topic_configs.value(topic, MAX_MESSAGE_BYTES))


async def _read_topic_configs(
    ctx: BrokerContext, body: Any, names: dict[uuid.UUID, str] | None
) -> None:
    """Read, off the event loop, the configs of the topics this broker leads partitions of and
    has not read yet (its ``min.insync.replicas``), as a Kafka broker reads a topic's configs
    when it first serves it."""
    configs = ctx.topic_configs
    wanted = []
    for topic in body.topic_data:
        name = topic.name if names is None else names.get(topic.topic_id)
        if (
            name is not None
            and not configs.known(name)
            and any(ctx.leads((name, p.index)) for p in topic.partition_data)
        ):
            wanted.append(name)
    if wanted:
        try:
            await ctx.blocking(lambda: configs.read_missing(wanted))
        except StoreError as exc:
            log.warning("broker %s: topic configs of %s not read: %s", ctx.broker_id, wanted, exc)


async def handle_produce(ctx: BrokerContext, request: Request) -> Any:
    body = request.body
    acks = int(body.acks)
    if any(
        _transactional(bytes(p.records or b"")) for t in body.topic_data for p in t.partition_data
    ) and (
        body.transactional_id is None
        or not allowed(
            ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id
        )
    ):
        # Kafka authorizes transactional records against the request's transactional id (Write
        # on it), and without one, or refused, refuses the whole request.
        if acks == 0:
            raise CloseConnectionError("acks=0 transactional records without a transactional id")
        return _refused(request.version, body, errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    version = request.version
    names: dict[uuid.UUID, str] = {}
    if version >= TOPIC_ID_VERSION:
        names = await ctx.topic_names(t.topic_id for t in body.topic_data)
    await _read_topic_configs(ctx, body, names if version >= TOPIC_ID_VERSION else None)
    # Kafka's KafkaApis: Write on each topic, or TOPIC_AUTHORIZATION_FAILED and nothing appended.
    writable = allowed_names(ctx, AclOperation.WRITE, ResourceType.TOPIC, (
        n for t in body.topic_data
        if (n := names.get(t.topic_id) if version >= TOPIC_ID_VERSION else t.name) is not None
    ))  # fmt: skip
    transactional = _TransactionalBatches()
    if body.transactional_id is not None:
        for topic in body.topic_data:
            name = names.get(topic.topic_id) if version >= TOPIC_ID_VERSION else topic.name
            if name is not None and name in writable:
                for partition in topic.partition_data:
                    tp = (name, partition.index)
                    if ctx.leader_error(tp)[0] != errors.UNKNOWN_TOPIC_OR_PARTITION:
                        transactional.add(tp, bytes(partition.records or b""))
        if len(set(transactional.producers.values())) > 1:
            # Kafka's InvalidPidMappingException, the whole request's error.
            if acks == 0:
                raise CloseConnectionError("transactional records of more than one producer")
            return _refused(version, body, errors.INVALID_PRODUCER_ID_MAPPING)
        await transactional.verify(ctx, body.transactional_id, version)
    responses = []
    waits: list[tuple[Any, TP, int]] = []
    failed: list[tuple[str | None, int, int]] = []
    for topic in body.topic_data:
        name = names.get(topic.topic_id) if version >= TOPIC_ID_VERSION else topic.name
        answers = []
        for partition in topic.partition_data:
            tp = (name or "", partition.index)
            if name is None:
                answer, end = _unknown_id(partition), -1
            elif name not in writable:
                answer = PartitionResponse(index=partition.index, base_offset=-1,
                                           error_code=TOPIC_AUTHORIZATION_FAILED,
                                           log_append_time_ms=-1)  # fmt: skip
                end = -1
            elif tp in transactional.refused:
                answer, end = _unverified(partition, transactional.refused[tp]), -1
            else:
                answer, end = _append(ctx, name, partition, acks, version,
                                      transactional.guards.get(tp))  # fmt: skip
            answers.append(answer)
            if answer.error_code:
                failed.append((name, answer.index, answer.error_code))
            if acks == ACKS_ALL and end >= 0 and name is not None:
                waits.append((answer, (name, partition.index), end))
        responses.append(_topic_response(version, topic, answers))
    ctx.logs.appended()
    if acks == 0:
        if failed:
            # The producer reads no answer: Kafka closes the connection to tell it.
            raise CloseConnectionError(f"acks=0 produce failed: {failed}")
        return None
    replicas = ctx.logs.replicas
    if waits and replicas is not None:
        timeout = max(int(body.timeout_ms), 0) / 1000
        outcomes = await asyncio.gather(
            *(replicas.wait_committed(ctx, tp, end, timeout) for _, tp, end in waits)
        )
        for (answer, tp, _), error in zip(waits, outcomes, strict=True):
            if error:
                answer.error_code = error
                moved = ctx.leadership(tp)
                if (
                    error == errors.NOT_LEADER_OR_FOLLOWER
                    and moved
                    and version >= CURRENT_LEADER_VERSION
                ):
                    answer.current_leader = LeaderIdAndEpoch(leader_id=moved[0],
                                                             leader_epoch=moved[1])  # fmt: skip
    response: Any = Response(responses=responses, throttle_time_ms=0)
    if version >= CURRENT_LEADER_VERSION:
        leaders = {
            a.current_leader.leader_id
            for t in responses
            for a in t.partition_responses
            if a.error_code == errors.NOT_LEADER_OR_FOLLOWER and a.current_leader is not None
        }
        response.node_endpoints = await node_endpoints(ctx, leaders, NodeEndpoint)
    return response

"""Produce: record batches appended to the leader's log, offsets assigned by the leader, copied
by the followers (:mod:`coordkit.serve.replicas`).

* acks=0 gets no response (Kafka's rule: the producer reads none);
* acks=1 is answered once the leader appended;
* acks=-1 (all) once every ISR member has the records, i.e. the high watermark passed them, or
  REQUEST_TIMED_OUT at the request's ``timeout_ms`` (the records stay in the leader's log and
  may still commit, as in Kafka); NOT_LEADER_OR_FOLLOWER when the leadership moved meanwhile.

Idempotent producers (a producer id in the batch) are checked per partition as Kafka does (see
:mod:`coordkit.serve.producers`): a retried batch is answered with its original offset and not
appended again.

Limits: ``min.insync.replicas`` is not enforced (the engine has no such setting; Kafka's default,
1, never refuses), so NOT_ENOUGH_REPLICAS is never answered.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from coordkit.engine.states import TP
from coordkit.protocol import Request, messages
from coordkit.protocol.errors import ProtocolError
from coordkit.serve import errors
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext

log = logging.getLogger("coordkit.serve")

Response = messages.ProduceResponse
TopicResponse = nested(Response, "TopicProduceResponse")
PartitionResponse = nested(Response, "PartitionProduceResponse")
ACKS_ALL = -1


def _append(ctx: BrokerContext, topic: str, partition: Any, acks: int) -> tuple[Any, int]:
    """Append one partition's records; its answer and the offset acks=all waits for (-1: none)."""
    tp = (topic, partition.index)
    answer = PartitionResponse(index=partition.index, base_offset=-1, log_append_time_ms=-1)
    if acks not in (0, 1, ACKS_ALL):
        answer.error_code = errors.INVALID_REQUIRED_ACKS
        return answer, -1
    error, leadership = ctx.leader_error(tp)
    if error or leadership is None:
        # NOT_LEADER_OR_FOLLOWER: the new leader itself (``current_leader``) goes back from v10
        # on, which is not served; the client refreshes its metadata.
        answer.error_code = error
        return answer, -1
    epoch = leadership[1]
    partition_log = ctx.logs.get(tp)
    try:
        appended = partition_log.append(bytes(partition.records or b""), epoch)
    except ProtocolError as exc:
        log.info("broker %s: refused a produce to %s-%s: %s", ctx.broker_id, *tp, exc)
        answer.error_code = errors.CORRUPT_MESSAGE
        answer.error_message = str(exc)
        return answer, -1
    answer.error_code = appended.error
    if appended.error:
        return answer, -1
    answer.base_offset = appended.base_offset
    answer.log_start_offset = partition_log.log_start
    replicas = ctx.logs.replicas
    if replicas is not None and appended.records:
        replicas.appended(ctx, tp, partition_log, appended.records)
    return answer, appended.end_offset


async def handle_produce(ctx: BrokerContext, request: Request) -> Any:
    body = request.body
    acks = int(body.acks)
    responses = []
    waits: list[tuple[Any, TP, int]] = []
    for topic in body.topic_data:
        answers = []
        for partition in topic.partition_data:
            answer, end = _append(ctx, topic.name, partition, acks)
            answers.append(answer)
            if acks == ACKS_ALL and end >= 0:
                waits.append((answer, (topic.name, partition.index), end))
        responses.append(TopicResponse(name=topic.name, partition_responses=answers))
    ctx.logs.appended()
    if acks == 0:
        return None  # the producer reads no answer
    replicas = ctx.logs.replicas
    if waits and replicas is not None:
        timeout = max(int(body.timeout_ms), 0) / 1000
        outcomes = await asyncio.gather(
            *(replicas.wait_committed(ctx, tp, end, timeout) for _, tp, end in waits)
        )
        for (answer, _, _), error in zip(waits, outcomes, strict=True):
            if error:
                answer.error_code = error
                answer.base_offset = -1
    return Response(responses=responses, throttle_time_ms=0)

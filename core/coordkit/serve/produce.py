"""Produce: record batches appended to the leader's in-memory log, offsets assigned by the leader.

acks=0 gets no response (Kafka's rule), acks=1 the leader's answer once it appended. acks=-1
(all) is answered as acks=1 in this slice: followers do not copy record bytes yet, so the
leader's log is the only copy and its end is the high watermark.
"""

from __future__ import annotations

import logging
from typing import Any

from coordkit.protocol import Request, messages
from coordkit.protocol.errors import ProtocolError
from coordkit.serve import errors
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext

log = logging.getLogger("coordkit.serve")

Response = messages.ProduceResponse
TopicResponse = nested(Response, "TopicProduceResponse")
PartitionResponse = nested(Response, "PartitionProduceResponse")


def _append(ctx: BrokerContext, topic: str, partition: Any, acks: int) -> Any:
    tp = (topic, partition.index)
    answer = PartitionResponse(index=partition.index, base_offset=-1, log_append_time_ms=-1)
    if acks not in (0, 1, -1):
        answer.error_code = errors.INVALID_REQUIRED_ACKS
        return answer
    error, leadership = ctx.leader_error(tp)
    if error or leadership is None:
        # NOT_LEADER_OR_FOLLOWER: the new leader itself (``current_leader``) goes back from v10
        # on, which is not served; the client refreshes its metadata.
        answer.error_code = error
        return answer
    epoch = leadership[1]
    partition_log = ctx.logs.get(tp)
    try:
        answer.base_offset = partition_log.append(bytes(partition.records or b""), epoch)
    except ProtocolError as exc:
        log.info("broker %s: refused a produce to %s-%s: %s", ctx.broker_id, *tp, exc)
        answer.error_code = errors.CORRUPT_MESSAGE
        answer.error_message = str(exc)
        return answer
    answer.log_start_offset = partition_log.log_start
    return answer


async def handle_produce(ctx: BrokerContext, request: Request) -> Any:
    body = request.body
    acks = int(body.acks)
    responses = []
    for topic in body.topic_data:
        answers = [_append(ctx, topic.name, p, acks) for p in topic.partition_data]
        responses.append(TopicResponse(name=topic.name, partition_responses=answers))
    ctx.logs.appended()
    if acks == 0:
        return None  # the producer reads no answer
    return Response(responses=responses, throttle_time_ms=0)

"""InitProducerId: a producer id for an idempotent producer, from its broker's block of ids
(:class:`~coordkit.serve.dataplane.producer_state.ProducerIds`), or for a transactional id from
its transaction coordinator (:mod:`coordkit.serve.transactions.coordinator`: the id's producer id
with its epoch bumped, fencing older producers).

Authorization as Kafka's ``KafkaApis.handleInitProducerIdRequest``: Write on the transactional
id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer needs IdempotentWrite on the
cluster or Write on some topic (Kafka's ``authorizeByResourceType``, see
:func:`~coordkit.serve.authorization.allowed_by_resource_type`), else
CLUSTER_AUTHORIZATION_FAILED. Below v4, PRODUCER_FENCED is answered INVALID_PRODUCER_EPOCH
(KIP-588).
"""

from __future__ import annotations

import logging
from typing import Any

from coordkit.errors import LayoutError, StoreError
from coordkit.kafka.acls import AclOperation, ResourceType
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.authorization import (
    CLUSTER_AUTHORIZATION_FAILED,
    allowed,
    allowed_by_resource_type,
    cluster_allowed,
)
from coordkit.serve.context import BrokerContext
from coordkit.serve.dataplane.producer_state import NO_PRODUCER_ID
from coordkit.serve.transactions.coordinator import coordinator_of

log = logging.getLogger("coordkit.serve")

Response = messages.InitProducerIdResponse
#: The first version whose clients know PRODUCER_FENCED, and the first naming the producer's
#: current id and epoch (KIP-360).
PRODUCER_FENCED_VERSION = 4
EXPECTED_PRODUCER_VERSION = 3


def _refused(code: int) -> Any:
    return Response(throttle_time_ms=0, error_code=code, producer_id=NO_PRODUCER_ID,
                    producer_epoch=-1)  # fmt: skip


async def handle_init_producer_id(ctx: BrokerContext, request: Request) -> Any:
    body = request.body
    if body.transactional_id is not None:
        return await _transactional(ctx, request)
    # Kafka's KafkaApis: IdempotentWrite on the cluster, or Write on some topic.
    if not cluster_allowed(ctx, AclOperation.IDEMPOTENT_WRITE):
        try:
            writes = await ctx.blocking(
                lambda: allowed_by_resource_type(ctx, AclOperation.WRITE, ResourceType.TOPIC)
            )
        except StoreError as exc:
            log.warning("broker %s: the topic ACLs not read: %s", ctx.broker_id, exc)
            return _refused(errors.COORDINATOR_NOT_AVAILABLE)
        if not writes:
            return _refused(CLUSTER_AUTHORIZATION_FAILED)
    supply = ctx.logs.producer_ids
    try:
        producer_id = await ctx.blocking(lambda: supply.next_id(ctx.broker.store, ctx.broker_id))
    except (StoreError, LayoutError) as exc:
        # The store is unreachable or holds something else: the client retries (and logs).
        log.warning("broker %s: no producer id handed out: %s", ctx.broker_id, exc)
        return _refused(errors.COORDINATOR_NOT_AVAILABLE)
    return Response(throttle_time_ms=0, error_code=errors.NONE, producer_id=producer_id,
                    producer_epoch=0)  # fmt: skip


async def _transactional(ctx: BrokerContext, request: Request) -> Any:
    body = request.body
    if not allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
        return _refused(errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    expected = request.version >= EXPECTED_PRODUCER_VERSION
    result = await coordinator_of(ctx).init_producer_id(
        body.transactional_id,
        body.transaction_timeout_ms,
        body.producer_id if expected else NO_PRODUCER_ID,
        body.producer_epoch if expected else -1,
    )
    code = result.error
    if code == errors.PRODUCER_FENCED and request.version < PRODUCER_FENCED_VERSION:
        code = errors.INVALID_PRODUCER_EPOCH
    if code:
        return _refused(code)
    return Response(throttle_time_ms=0, error_code=errors.NONE, producer_id=result.producer_id,
                    producer_epoch=result.producer_epoch)  # fmt: skip

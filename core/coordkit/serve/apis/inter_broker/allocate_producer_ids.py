"""AllocateProducerIds: a Kafka 3.9 broker asks the controller for a block of producer ids for
its idempotent producers (KIP-730; Kafka's ``KafkaController.processAllocateProducerIds``).

Only the active controller answers (NOT_CONTROLLER otherwise); a broker it does not know as live
is BROKER_ID_NOT_REGISTERED, an earlier registration of it STALE_BROKER_EPOCH. The block is
claimed from ``/latest_producer_id_block`` as coordkit's own brokers claim theirs, so ids never
overlap whichever kind of broker hands them out.
"""

from __future__ import annotations

import logging
from typing import Any

from coordkit.errors import LayoutError, StoreError
from coordkit.kafka.acls import AclOperation
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.authorization import CLUSTER_AUTHORIZATION_FAILED, cluster_allowed
from coordkit.serve.context import BrokerContext
from coordkit.serve.dataplane.producer_state import claim_block

log = logging.getLogger("coordkit.serve")

Response = messages.AllocateProducerIdsResponse


def _refused(code: int) -> Any:
    return Response(throttle_time_ms=0, error_code=code, producer_id_start=-1, producer_id_len=0)


async def handle_allocate_producer_ids(ctx: BrokerContext, request: Request) -> Any:
    body = request.body
    if not cluster_allowed(ctx, AclOperation.CLUSTER_ACTION):
        return _refused(CLUSTER_AUTHORIZATION_FAILED)  # Kafka's authorizeClusterOperation
    controller = ctx.broker.controller
    if controller is None or not controller.active:
        return _refused(errors.NOT_CONTROLLER)
    live = controller.context.live.get(body.broker_id)
    if live is None:
        log.warning("controller %s: AllocateProducerIds from broker %s, which is not registered",
                    ctx.broker_id, body.broker_id)  # fmt: skip
        return _refused(errors.BROKER_ID_NOT_REGISTERED)
    if live[1] != body.broker_epoch:
        log.warning("controller %s: AllocateProducerIds from broker %s refused: broker epoch %s, "
                    "its registration's is %s", ctx.broker_id, body.broker_id, body.broker_epoch,
                    live[1])  # fmt: skip
        return _refused(errors.STALE_BROKER_EPOCH)
    try:
        block = await ctx.blocking(lambda: claim_block(ctx.broker.store, body.broker_id))
    except (StoreError, LayoutError) as exc:
        log.warning("controller %s: no producer id block for broker %s: %s", ctx.broker_id,
                    body.broker_id, exc)  # fmt: skip
        return _refused(errors.UNKNOWN_SERVER_ERROR)
    return Response(throttle_time_ms=0, error_code=errors.NONE, producer_id_start=block.first,
                    producer_id_len=block.last - block.first + 1)  # fmt: skip

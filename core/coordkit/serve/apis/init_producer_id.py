"""InitProducerId: a producer id for an idempotent producer, from its broker's block of ids
(:class:`~coordkit.serve.dataplane.producer_state.ProducerIds`); a transactional id is refused
with UNSUPPORTED_VERSION until transactions are served."""

from __future__ import annotations

import logging
from typing import Any

from coordkit.errors import LayoutError, StoreError
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.context import BrokerContext
from coordkit.serve.dataplane.producer_state import NO_PRODUCER_ID

log = logging.getLogger("coordkit.serve")

Response = messages.InitProducerIdResponse


async def handle_init_producer_id(ctx: BrokerContext, request: Request) -> Any:
    """A new producer id with epoch 0 for an idempotent producer; transactions are not served."""
    body = request.body
    if body.transactional_id is not None:
        # What a broker answers for an api it does not serve: the producer fails at once with
        # "the version of API is not supported" instead of retrying a coordinator that never
        # comes (COORDINATOR_NOT_AVAILABLE would make it retry until its timeout).
        return Response(throttle_time_ms=0, error_code=errors.UNSUPPORTED_VERSION,
                        producer_id=NO_PRODUCER_ID, producer_epoch=-1)  # fmt: skip
    supply = ctx.logs.producer_ids
    try:
        producer_id = await ctx.blocking(lambda: supply.next_id(ctx.broker.store, ctx.broker_id))
    except (StoreError, LayoutError) as exc:
        # The store is unreachable or holds something else: the client retries (and logs).
        log.warning("broker %s: no producer id handed out: %s", ctx.broker_id, exc)
        return Response(throttle_time_ms=0, error_code=errors.COORDINATOR_NOT_AVAILABLE,
                        producer_id=NO_PRODUCER_ID, producer_epoch=-1)  # fmt: skip
    return Response(throttle_time_ms=0, error_code=errors.NONE, producer_id=producer_id,
                    producer_epoch=0)  # fmt: skip

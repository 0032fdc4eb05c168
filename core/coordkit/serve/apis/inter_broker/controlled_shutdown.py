"""ControlledShutdown: a broker of another process asks the controller to move leadership off it
before it stops (Kafka's ``KafkaApis.handleControlledShutdownRequest`` and
``KafkaController.doControlledShutdown``).

Only the active controller acts; any other broker answers STALE_CONTROLLER_EPOCH (Kafka's
``ControllerMovedException``), and the asking broker looks for the controller again. A broker the
controller does not know as live is BROKER_NOT_AVAILABLE; a request naming an earlier registration
of the broker (its broker epoch) is STALE_BROKER_EPOCH. The answer lists the partitions the broker
still leads (no other replica in their ISR).
"""

from __future__ import annotations

import concurrent.futures
import logging
from typing import Any

from coordkit.engine.controller.shutdown import UNKNOWN_BROKER_EPOCH
from coordkit.engine.errors import BrokerNotAvailableError, EngineError, StaleBrokerEpochError
from coordkit.kafka.acls import AclOperation
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.authorization import CLUSTER_AUTHORIZATION_FAILED, cluster_allowed
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext

log = logging.getLogger("coordkit.serve")

ControlledShutdownResponse = messages.ControlledShutdownResponse
RemainingPartition = nested(ControlledShutdownResponse, "RemainingPartition")


async def handle_controlled_shutdown(ctx: BrokerContext, request: Request) -> Any:
    body = request.body
    broker_epoch = getattr(body, "broker_epoch", UNKNOWN_BROKER_EPOCH)
    if not cluster_allowed(ctx, AclOperation.CLUSTER_ACTION):
        return _refused(CLUSTER_AUTHORIZATION_FAILED)  # Kafka's authorizeClusterOperation
    controller = ctx.broker.controller
    if controller is None or not controller.active:
        return _refused(errors.STALE_CONTROLLER_EPOCH)
    future = controller.controlled_shutdown(body.broker_id, broker_epoch)
    timeout = ctx.broker.config.controlled_shutdown_timeout
    try:
        remaining = await ctx.blocking(lambda: future.result(timeout=timeout))
    except BrokerNotAvailableError as exc:
        log.warning("controller %s: %s", ctx.broker_id, exc)
        return _refused(errors.BROKER_NOT_AVAILABLE)
    except StaleBrokerEpochError as exc:
        log.warning("controller %s: %s (STALE_BROKER_EPOCH)", ctx.broker_id, exc)
        return _refused(errors.STALE_BROKER_EPOCH)
    except concurrent.futures.TimeoutError:
        return _refused(errors.REQUEST_TIMED_OUT)
    except (EngineError, concurrent.futures.CancelledError):
        # The term ended meanwhile (fenced, stopped): the controller moved.
        return _refused(errors.STALE_CONTROLLER_EPOCH)
    log.info("controller %s: controlled shutdown of broker %s, %d partitions still led",
             ctx.broker_id, body.broker_id, len(remaining))  # fmt: skip
    return ControlledShutdownResponse(error_code=errors.NONE, remaining_partitions=[
        RemainingPartition(topic_name=topic, partition_index=partition)
        for topic, partition in remaining
    ])  # fmt: skip


def _refused(code: int) -> Any:
    return ControlledShutdownResponse(error_code=code, remaining_partitions=[])

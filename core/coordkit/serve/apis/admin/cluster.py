"""DescribeCluster (KIP-700): the cluster id, the controller and the registered brokers.

As Kafka's ``AuthHelper.computeDescribeClusterResponse``: a broker answers endpoint type 1
(brokers) only; type 2 (controllers) is MISMATCHED_ENDPOINT_TYPE and any other
UNSUPPORTED_ENDPOINT_TYPE (INVALID_REQUEST at v0, which has no such codes). The controller id is
the engine's controller, as a ZooKeeper-mode broker answers (a KRaft broker names a random live
broker). Every registered broker is live (a registration is the broker's session), so v2's
``include_fenced_brokers`` adds none and none is fenced. Asked for, the cluster's authorized
operations are what the authorizer allows the principal (every one without an authorizer; 0
without Describe on the cluster), as Kafka computes them.
"""

from __future__ import annotations

from typing import Any

from coordkit.engine.controllership import read_controller
from coordkit.errors import CoordkitError
from coordkit.kafka.model import NO_LEADER
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.apis.metadata import read_brokers
from coordkit.serve.authorization import NO_AUTHORIZED_OPERATIONS, cluster_authorized_operations
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext

Response = messages.DescribeClusterResponse
Broker_ = nested(Response, "DescribeClusterBroker")

VERSIONS = (0, 2)
#: Kafka's ``EndpointType`` ids.
BROKER_ENDPOINT = 1
CONTROLLER_ENDPOINT = 2
ENDPOINT_NAMES = {BROKER_ENDPOINT: "BROKER", CONTROLLER_ENDPOINT: "CONTROLLER"}


def _endpoint_error(request: Request) -> Any | None:
    wanted = request.body.endpoint_type
    if wanted == BROKER_ENDPOINT:
        return None
    v0 = request.version == 0
    if wanted not in ENDPOINT_NAMES:
        code = errors.INVALID_REQUEST if v0 else errors.UNSUPPORTED_ENDPOINT_TYPE
        message = f"Unsupported endpoint type {wanted}"
    else:
        code = errors.INVALID_REQUEST if v0 else errors.MISMATCHED_ENDPOINT_TYPE
        message = (
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of "
            f"type {ENDPOINT_NAMES[wanted]}"
        )
    return Response(throttle_time_ms=0, error_code=code, error_message=message)


def _controller(ctx: BrokerContext) -> int:
    try:
        found = read_controller(ctx.broker.store)
    except CoordkitError:
        return NO_LEADER
    return NO_LEADER if found is None else found[0].broker_id


async def handle_describe_cluster(ctx: BrokerContext, request: Request) -> Any:
    refused = _endpoint_error(request)
    if refused is not None:
        return refused
    brokers = await ctx.blocking(lambda: read_brokers(ctx.broker.store))
    controller = await ctx.blocking(lambda: _controller(ctx))
    return Response(
        throttle_time_ms=0,
        error_code=errors.NONE,
        error_message=None,
        endpoint_type=BROKER_ENDPOINT,
        cluster_id=ctx.broker.cluster_id,
        controller_id=controller,
        brokers=[
            Broker_(broker_id=b, host=info.host, port=info.port, rack=info.rack, is_fenced=False)
            for b, info in brokers
        ],
        cluster_authorized_operations=(
            cluster_authorized_operations(ctx)
            if request.body.include_cluster_authorized_operations
            else NO_AUTHORIZED_OPERATIONS
        ),
    )

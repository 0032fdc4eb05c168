"""ListConfigResources (v0-1), as Kafka 4.4's ``KafkaApis.handleListConfigResources``.

v0 lists the client-metrics subscriptions (what ``kafka-client-metrics --list`` asked before
KIP-1142); v1 the resources of the types asked (none: every type Kafka lists), in Kafka's order:
groups with configs, client-metrics subscriptions, every broker as BROKER_LOGGER and as BROKER,
every topic. A type Kafka cannot list: UNSUPPORTED_VERSION, nothing listed. Under an authorizer
it needs DescribeConfigs on the cluster.
"""

from __future__ import annotations

from typing import Any

from coordkit.engine.configs import CLIENT_METRICS, GROUPS, ConfigAdmin
from coordkit.errors import NoNodeError
from coordkit.kafka import layout
from coordkit.kafka.acls import AclOperation
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.apis.configs import values
from coordkit.serve.apis.metadata import read_brokers
from coordkit.serve.authorization import CLUSTER_AUTHORIZATION_FAILED, cluster_allowed
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext

VERSIONS = (0, 1)

Response = messages.ListConfigResourcesResponse
Resource = nested(Response, "ConfigResource")

#: The types Kafka lists, in its order (``supportedResourceTypes`` of v1; v0: client metrics).
_LISTED = (values.GROUP, values.CLIENT_METRICS, values.BROKER_LOGGER, values.BROKER,
           values.TOPIC)  # fmt: skip


def _list(ctx: BrokerContext, types: list[int]) -> list[Any]:
    store = ctx.broker.store
    admin = ConfigAdmin(store)
    found: list[Any] = []
    if values.GROUP in types:
        found += [Resource(resource_name=g, resource_type=values.GROUP)
                  for g in admin.names(GROUPS)]  # fmt: skip
    if values.CLIENT_METRICS in types:
        found += [Resource(resource_name=s, resource_type=values.CLIENT_METRICS)
                  for s in admin.names(CLIENT_METRICS)]  # fmt: skip
    brokers = [str(b) for b, _ in read_brokers(store)] if (
        values.BROKER in types or values.BROKER_LOGGER in types) else []  # fmt: skip
    for kind in (values.BROKER_LOGGER, values.BROKER):
        if kind in types:
            found += [Resource(resource_name=b, resource_type=kind) for b in brokers]
    if values.TOPIC in types:
        try:
            topics = sorted(store.children(layout.BROKER_TOPICS))
        except NoNodeError:
            topics = []
        found += [Resource(resource_name=t, resource_type=values.TOPIC) for t in topics]
    return found


async def handle_list_config_resources(ctx: BrokerContext, request: Request) -> Any:
    if not cluster_allowed(ctx, AclOperation.DESCRIBE_CONFIGS):
        return Response(throttle_time_ms=0, error_code=CLUSTER_AUTHORIZATION_FAILED,
                        config_resources=[])  # fmt: skip
    if request.version == 0:
        types = [values.CLIENT_METRICS]
    else:
        asked = list(request.body.resource_types or [])
        if any(t not in _LISTED for t in asked):
            return Response(throttle_time_ms=0, error_code=errors.UNSUPPORTED_VERSION,
                            config_resources=[])  # fmt: skip
        types = asked or list(_LISTED)
    resources = await ctx.blocking(lambda: _list(ctx, types))
    return Response(throttle_time_ms=0, error_code=errors.NONE, config_resources=resources)

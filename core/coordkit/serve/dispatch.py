"""Request dispatch: which apis and versions this server answers, ApiVersions itself, and the
handler of every other api (one module per api family).

The advertised ranges are exactly what the handlers fill in correctly. Lower bounds: Produce 3 and
Fetch 4 are the first versions that carry record batches v2 (the only format the logs keep);
ListOffsets 1 is the first without v0's offset lists. Upper bounds: Kafka 4.4's, for the apis
whose newer versions name topics by id (Fetch 18, Produce 13, DeleteTopics 6: every topic has an
id in its node) or add fields coordkit fills in as Kafka does (Metadata 13's top-level error,
ListOffsets 11's tiered-storage timestamps, ApiVersions 5's cluster and node check).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from coordkit.protocol import APIS, KafkaCodec, ProtocolError, Request, messages
from coordkit.serve import errors
from coordkit.serve.apis.acls import ACL_APIS
from coordkit.serve.apis.admin import ADMIN_APIS
from coordkit.serve.apis.configs import CONFIG_APIS
from coordkit.serve.apis.fetch import handle_fetch, handle_list_offsets
from coordkit.serve.apis.groups import GROUP_APIS
from coordkit.serve.apis.init_producer_id import handle_init_producer_id
from coordkit.serve.apis.inter_broker import INTER_BROKER_APIS
from coordkit.serve.apis.leader_epochs import handle_offset_for_leader_epoch
from coordkit.serve.apis.metadata import handle_metadata
from coordkit.serve.apis.partitions import handle_create_partitions
from coordkit.serve.apis.produce import handle_produce
from coordkit.serve.apis.share import SHARE_APIS
from coordkit.serve.apis.topics import handle_create_topics, handle_delete_topics
from coordkit.serve.apis.transactions import TRANSACTION_APIS
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext
from coordkit.serve.listeners.sasl import SASL_APIS

log = logging.getLogger("coordkit.serve")

Handler = Callable[[BrokerContext, Request], Awaitable[Any]]

ApiVersionsResponse = messages.ApiVersionsResponse
ApiVersion = nested(ApiVersionsResponse, "ApiVersion")


#: Kafka's ``ApiVersionsRequest.isValid``: from v3 on, the client software name and version
#: each match this pattern (so an empty one does not).
CLIENT_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")
CLIENT_SOFTWARE_VERSION = 3
#: From v5 a client may name the cluster and node it means to reach (KIP-1242); a broker of
#: another cluster or id answers REBOOTSTRAP_REQUIRED, as Kafka's ``KafkaApis`` does.
TARGET_CHECK_VERSION = 5
#: A v5 request's node id when it names no node.
NO_NODE = -1


def _valid(request: Request) -> bool:
    """Kafka's ``ApiVersionsRequest.isValid``: from v5 a cluster id and a node id come
    together or not at all; from v3 the client software name and version match the pattern."""
    body = request.body
    if request.version >= TARGET_CHECK_VERSION and (body.cluster_id is None) != (
        body.node_id == NO_NODE
    ):
        return False
    return request.version < CLIENT_SOFTWARE_VERSION or bool(
        CLIENT_SOFTWARE.fullmatch(body.client_software_name or "")
        and CLIENT_SOFTWARE.fullmatch(body.client_software_version or "")
    )


async def handle_api_versions(ctx: BrokerContext, request: Request) -> Any:
    body = request.body
    if not _valid(request):
        # Kafka's answer: INVALID_REQUEST and no ranges.
        return ApiVersionsResponse(error_code=errors.INVALID_REQUEST, api_keys=[],
                                   throttle_time_ms=0)  # fmt: skip
    if (
        request.version >= TARGET_CHECK_VERSION
        and body.cluster_id is not None
        and (body.cluster_id != ctx.broker.cluster_id or body.node_id != ctx.broker_id)
    ):
        # Kafka answers no ranges: the client bootstraps again.
        log.info("broker %s: ApiVersions for cluster %r, node %s: REBOOTSTRAP_REQUIRED",
                 ctx.broker_id, body.cluster_id, body.node_id)  # fmt: skip
        return ApiVersionsResponse(error_code=errors.REBOOTSTRAP_REQUIRED, api_keys=[],
                                   throttle_time_ms=0)  # fmt: skip
    return ApiVersionsResponse(error_code=errors.NONE, api_keys=advertised(), throttle_time_ms=0)


#: api name → (lowest version, highest version, handler).
SUPPORTED: dict[str, tuple[int, int, Handler]] = {
    "ApiVersions": (0, 5, handle_api_versions),
    **GROUP_APIS,  # FindCoordinator, JoinGroup, ... ListGroups: see coordkit.serve.apis.groups
    "Metadata": (0, 13, handle_metadata),
    "Produce": (3, 13, handle_produce),
    "Fetch": (4, 18, handle_fetch),
    "ListOffsets": (1, 11, handle_list_offsets),
    "InitProducerId": (0, 5, handle_init_producer_id),
    "CreateTopics": (2, 7, handle_create_topics),
    "DeleteTopics": (1, 6, handle_delete_topics),
    "CreatePartitions": (0, 3, handle_create_partitions),
    # kafka-python asks v2-4, librdkafka v2; v0-1 differ only in fields left out.
    "OffsetForLeaderEpoch": (2, 4, handle_offset_for_leader_epoch),
    **INTER_BROKER_APIS,  # LeaderAndIsr, ... AllocateProducerIds: see apis.inter_broker
    **CONFIG_APIS,  # DescribeConfigs, AlterConfigs, IncrementalAlterConfigs
    **ADMIN_APIS,  # DescribeCluster, ... DescribeTopicPartitions: see apis.admin
    **ACL_APIS,  # DescribeAcls, CreateAcls, DeleteAcls: see apis.acls
    **SASL_APIS,  # SaslHandshake, ... AlterUserScramCredentials: see serve.listeners.sasl
    **SHARE_APIS,  # ShareGroupHeartbeat, ShareFetch, ...: see apis.share
    **TRANSACTION_APIS,  # AddPartitionsToTxn, EndTxn, ...: see apis.transactions
}
API_VERSIONS_KEY = APIS["ApiVersions"].key


def advertised() -> list[Any]:
    """The ApiVersions entries: every api this server answers, with its version range."""
    return sorted(
        (
            ApiVersion(api_key=APIS[name].key, min_version=lo, max_version=hi)
            for name, (lo, hi, _) in SUPPORTED.items()
        ),
        key=lambda entry: entry.api_key,
    )


class UnservedRequestError(Exception):
    """A request this server does not answer (its api or version is not advertised): Kafka
    closes such a connection, and so does the listener."""


class Dispatcher:
    """Decodes a frame, runs its api's handler for one broker, encodes the answer."""

    def __init__(self, ctx: BrokerContext, codec: KafkaCodec) -> None:
        self.ctx = ctx
        self.codec = codec

    async def answer(self, frame: bytes) -> bytes | None:
        """The response frame for request ``frame`` (``None``: the request gets no answer).

        :raises ProtocolError: the frame is malformed.
        :raises UnservedRequestError: the api or version is not one this server answers.
        """
        try:
            request = self.codec.decode_request(frame)
        except ProtocolError as exc:
            unsupported = _unsupported_api_versions(exc)
            if unsupported is None:
                raise
            return unsupported
        served = SUPPORTED.get(request.api.name)
        if served is None or not served[0] <= request.version <= served[1]:
            raise UnservedRequestError(
                f"{request.api.name} v{request.version} is not served (see ApiVersions)"
            )
        response = await served[2](self.ctx, request)
        if response is None:
            return None
        return self.codec.encode_response(
            response, version=request.version, correlation_id=request.correlation_id
        )


def _unsupported_api_versions(exc: ProtocolError) -> bytes | None:
    """Kafka's answer to an ApiVersions request of a version it does not know: a v0 response
    with UNSUPPORTED_VERSION and ApiVersions' own range, so that the client retries with a
    version both speak. ``None`` for any other decoding failure."""
    lo, hi, _ = SUPPORTED["ApiVersions"]
    if exc.api_key != API_VERSIONS_KEY or exc.correlation_id is None or exc.version is None:
        return None
    if lo <= exc.version <= hi:
        return None  # a known version, badly encoded: a malformed frame
    response = ApiVersionsResponse(
        error_code=errors.UNSUPPORTED_VERSION,
        api_keys=[ApiVersion(api_key=API_VERSIONS_KEY, min_version=lo, max_version=hi)],
    )
    return KafkaCodec().encode_response(response, version=0, correlation_id=exc.correlation_id)

"""The high watermark of a partition led by a broker of another process, asked of its leader
with ListOffsets (latest, read_uncommitted: the high watermark), as Kafka 4.4's
``NetworkPartitionMetadataClient.listLatestOffsets`` asks for DescribeShareGroupOffsets' lag
(KIP-1226). Over the inter-broker listener (the process's connector: its TLS and SASL); one
connection per question, as the admin api that asks is rare."""

from __future__ import annotations

import logging

from coordkit.engine.states import TP
from coordkit.errors import StoreError
from coordkit.protocol import messages
from coordkit.protocol.errors import ProtocolError
from coordkit.serve import errors
from coordkit.serve.apis.metadata import read_brokers
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext
from coordkit.serve.control_plane.connection import BrokerConnection, UnservedVersionError

log = logging.getLogger("coordkit.serve.share")

OffsetsRequest = messages.ListOffsetsRequest
OffsetsTopic = nested(OffsetsRequest, "ListOffsetsTopic")
OffsetsPartition = nested(OffsetsRequest, "ListOffsetsPartition")
#: Kafka's ``ListOffsetsRequest.LATEST_TIMESTAMP``.
LATEST_TIMESTAMP = -1
#: A consumer's ListOffsets (replica id -1), versions with the offset and isolation level.
VERSIONS = (2, 7)
TIMEOUT_SECONDS = 5.0


def latest_offset(ctx: BrokerContext, leader: int, tp: TP) -> int | None:
    """``tp``'s high watermark as its leader, broker ``leader``, answers (blocking; ``None``:
    the leader not registered, not reached or refusing, which the caller shows as no lag)."""
    info = dict(read_brokers(ctx.broker.store)).get(leader)
    if info is None:
        return None
    topic, partition = tp
    request = OffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        OffsetsTopic(name=topic, partitions=[
            OffsetsPartition(partition_index=partition, timestamp=LATEST_TIMESTAMP)])])  # fmt: skip
    try:
        connection = BrokerConnection(ctx.connector.address_of(info),
                                      f"coordkit-broker-{ctx.broker_id}", TIMEOUT_SECONDS,
                                      connector=ctx.connector)  # fmt: skip
        try:
            version = connection.versions({"ListOffsets": VERSIONS})["ListOffsets"]
            answer = connection.call(request, version)
        finally:
            connection.close()
    except (OSError, ProtocolError, StoreError, UnservedVersionError) as exc:
        log.info("broker %s: the high watermark of %s-%s not asked of broker %s: %s",
                 ctx.broker_id, topic, partition, leader, exc)  # fmt: skip
        return None
    for answered in answer.topics:
        for result in answered.partitions:
            if (answered.name, result.partition_index) == tp and result.error_code == errors.NONE:
                offset: int = result.offset
                return offset
    return None

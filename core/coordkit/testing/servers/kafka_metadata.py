"""Kafka's Metadata over a raw socket, with coordkit's own codec: how the kit's Kafka fixtures
know a broker is serving and which brokers it knows (no Kafka client is imported)."""

from __future__ import annotations

import socket
from collections.abc import Mapping

import attrs

#: Metadata v12: the newest coordkit's codec speaks, and served by Kafka 3.9 and 4 alike (Kafka 4
#: dropped v0-v3).
METADATA_VERSION = 12


@attrs.frozen
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None


@attrs.frozen
class ClusterMetadata:
    """What one node's Metadata response says about the cluster."""

    cluster_id: str | None
    controller_id: int
    brokers: Mapping[int, BrokerInfo]
    #: Each topic's partition count.
    topics: Mapping[str, int]


def fetch_metadata(host: str, port: int, timeout: float = 5.0) -> ClusterMetadata | None:
    """Ask one broker for Metadata (all topics); ``None`` when it does not answer (yet)."""
    # Imported here: the kit's pytest plugin imports this package in every run, and the codec's
    # message definitions take a tenth of a second to load.
    from coordkit.protocol import KafkaCodec, ProtocolError, messages

    codec = KafkaCodec()
    request = messages.MetadataRequest(topics=None, allow_auto_topic_creation=False)
    frame = codec.encode_request(
        request, version=METADATA_VERSION, correlation_id=1, client_id="coordkit-kafka-fixture"
    )
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(frame)
            size = codec.frame_size(_read_exactly(sock, 4))
            _, body = codec.decode_response("Metadata", METADATA_VERSION, _read_exactly(sock, size))
    except (OSError, EOFError, ProtocolError):
        return None
    return ClusterMetadata(
        cluster_id=body.cluster_id,
        controller_id=body.controller_id,
        brokers={
            broker.node_id: BrokerInfo(broker.node_id, broker.host, broker.port, broker.rack)
            for broker in body.brokers
        },
        topics={topic.name: len(topic.partitions) for topic in body.topics if topic.name},
    )


def _read_exactly(sock: socket.socket, count: int) -> bytes:
    data = bytearray()
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise EOFError("the broker closed the connection")
        data += chunk
    return bytes(data)

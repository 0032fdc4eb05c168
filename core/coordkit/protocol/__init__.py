"""Kafka's binary protocol: message codecs generated from Kafka's own definitions, record batches.

The message classes and their encoders and decoders come from Kafka's JSON message definitions
(vendored from Kafka 3.8.0 in ``definitions/``), compiled once per (api, version)::

    from coordkit.protocol import KafkaCodec, messages

    codec = KafkaCodec()
    frame = codec.encode_request(
        messages.MetadataRequest(topics=[messages.MetadataRequest.MetadataRequestTopic(name="t")]),
        version=12,
        correlation_id=7,
        client_id="me",
    )
    request = codec.decode_request(frame[4:])  # after the size prefix
    request.body.topics[0].name  # 't'

Everything read from the wire is checked; a bad frame raises :class:`ProtocolError` naming the
api, version and field path. Record batches (format v2) are in :mod:`coordkit.protocol.records`.
"""

from coordkit.protocol import messages
from coordkit.protocol.codec import (
    DEFAULT_MAX_FRAME_BYTES,
    FrameReader,
    KafkaCodec,
    Request,
    lookup_api,
    request_header_version,
    response_header_version,
)
from coordkit.protocol.errors import ProtocolError
from coordkit.protocol.messages import APIS, APIS_BY_KEY, ApiSchema, compile_all
from coordkit.protocol.structs import Struct

__all__ = [
    "APIS",
    "APIS_BY_KEY",
    "DEFAULT_MAX_FRAME_BYTES",
    "ApiSchema",
    "FrameReader",
    "KafkaCodec",
    "ProtocolError",
    "Request",
    "Struct",
    "compile_all",
    "lookup_api",
    "messages",
    "request_header_version",
    "response_header_version",
]

"""Scenarios of frames: which a broker answers, which it passes over and which close the
connection (an unknown api, a bad size, a body that does not decode, ...).

Each frame is sent on a fresh connection followed by a valid ApiVersions v0 request
(:func:`~differential.harness.probe_frame`): the connection's end, or which answer comes first,
tells what the broker did, without a clock deciding it. An answered frame is recorded decoded.

Versions: what each frame is about — an api or version a broker does not serve, ApiVersions at
an unknown version and at v0, and otherwise ApiVersions v5 and Metadata v13 (the highest both
sides support).
"""

from __future__ import annotations

import struct
from typing import Any

from coordkit.protocol import KafkaCodec, messages
from differential import requests as rq
from differential.harness import CLIENT_ID, FrameOutcome, Side, probe_frame, scenario

CORRELATION_ID = 7
#: The ApiVersions request header v2 (flexible) up to and including the client id:
#: api key 18, version, correlation id, client id (an int16-length string), then no tags.
_HEADER_V1 = struct.Struct(">hhih")


def outcome(side: Side, frame: bytes, api: str | None = None, version: int = 0) -> list[Any]:
    """The frame's fate on a fresh connection to broker 0, the answer decoded as ``api`` at
    ``version`` when there is one."""
    result: FrameOutcome = probe_frame(side.connect(0), frame, CORRELATION_ID)
    if result.frame is None or api is None:
        return [result.kind]
    _, body = KafkaCodec().decode_response(api, version, result.frame)
    return [result.kind, body]


def framed(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def header(api_key: int, version: int, client_id: str = CLIENT_ID) -> bytes:
    """A request header v1 (api key, version, correlation id, client id)."""
    name = client_id.encode()
    return _HEADER_V1.pack(api_key, version, CORRELATION_ID, len(name)) + name


def request_frame(request: Any, version: int) -> bytes:
    return KafkaCodec().encode_request(request, version=version, correlation_id=CORRELATION_ID,
                                       client_id=CLIENT_ID)  # fmt: skip


NO_VERSIONS: dict[str, int] = {}
API_VERSIONS = {"ApiVersions": rq.API_VERSIONS}
METADATA = {"Metadata": rq.METADATA}


@scenario("frames.api_versions_unknown_version", versions=NO_VERSIONS,
          older_versions="ApiVersions v127: a version no broker knows")  # fmt: skip
def api_versions_unknown_version(side: Side) -> list[Any]:
    """ApiVersions at a version the broker does not know (127, header v2): answered with a v0
    response, UNSUPPORTED_VERSION and ApiVersions' own range, so that the client retries with a
    version both speak."""
    frame = framed(header(18, 127) + b"\x00")  # the flexible header's empty tagged fields
    return outcome(side, frame, "ApiVersions", 0)


@scenario("frames.api_versions_v0", versions={"ApiVersions": 0},
          older_versions="ApiVersions v0: what a client that knows nothing of the broker sends")  # fmt: skip
def api_versions_v0(side: Side) -> list[Any]:
    """ApiVersions v0: answered, error NONE (the ranges have a scenario of their own)."""
    answer = side.call(0, messages.ApiVersionsRequest(), 0)
    return [answer.error_code, len(answer.api_keys) > 0]


@scenario("frames.unknown_api_key", versions=NO_VERSIONS,
          older_versions="api key 9999: no such api")  # fmt: skip
def unknown_api_key(side: Side) -> list[Any]:
    """A request of api key 9999: the connection is closed."""
    return outcome(side, framed(header(9999, 0)))


@scenario("frames.unsupported_version", versions=NO_VERSIONS,
          older_versions="Metadata v99: a version no broker knows")  # fmt: skip
def unsupported_version(side: Side) -> list[Any]:
    """Metadata v99: the connection is closed (only ApiVersions is answered at a version the
    broker does not know)."""
    return outcome(side, framed(header(3, 99) + b"\x00\x00\x00\x00"))


@scenario("frames.produce_v2", versions=NO_VERSIONS,
          older_versions="Produce v2: below what either side serves (message format v1)")  # fmt: skip
def produce_v2(side: Side) -> list[Any]:
    """Produce v2, which neither side serves (Kafka 4 dropped v0-2; coordkit serves v3+): the
    connection is closed."""
    body = struct.pack(">hii", 1, 1000, 0)  # acks, timeout, no topics
    return outcome(side, framed(header(0, 2) + body))


@scenario("frames.offset_commit_v1", versions=NO_VERSIONS,
          older_versions="OffsetCommit v1: removed in Kafka 4 (KIP-896)")  # fmt: skip
def offset_commit_v1(side: Side) -> list[Any]:
    """OffsetCommit v1, which Kafka 4 no longer serves (KIP-896): it closes the connection.
    Built by hand: the codec, generated from Kafka 4.4's definitions, has no v1 either."""
    group = side.group().encode()
    body = (
        header(8, 1)
        + struct.pack(">h", len(group)) + group  # group id
        + struct.pack(">i", -1)  # generation
        + struct.pack(">h", 0)  # member id ""
        + struct.pack(">i", 0)  # no topics
    )  # fmt: skip
    return outcome(side, framed(body))


@scenario("frames.truncated_body", versions=METADATA)
def truncated_body(side: Side) -> list[Any]:
    """A Metadata v13 request cut in the middle of its topic name (the size prefix matching
    what is sent): the connection is closed."""
    frame = request_frame(rq.metadata([side.topic("long-enough-name")]), rq.METADATA)
    body = frame[4:-12]
    return outcome(side, framed(body))


@scenario("frames.string_longer_than_frame", versions=METADATA)
def string_longer_than_frame(side: Side) -> list[Any]:
    """A Metadata v13 request whose one topic name claims 70,000 bytes of the few left: the
    connection is closed."""
    body = (
        header(3, rq.METADATA) + b"\x00"  # the flexible header's empty tagged fields
        + b"\x02" + bytes(16)  # a compact array of one topic; its (zero) topic id
        + bytes([0xF1, 0xA2, 0x04]) + b"n"  # a compact string of 70,000 bytes (varint 70,001)
        + b"\x00\x00\x00\x00"  # the rest of a request: tags, two flags, tags
    )  # fmt: skip
    return outcome(side, framed(body))


@scenario("frames.trailing_bytes", versions=API_VERSIONS)
def trailing_bytes(side: Side) -> list[Any]:
    """An ApiVersions v5 request followed by ten bytes inside its frame: answered (brokers pass
    over what follows a request's last field)."""
    frame = request_frame(messages.ApiVersionsRequest(client_software_name="coordkit",
                                                      client_software_version="1"),
                          rq.API_VERSIONS)  # fmt: skip
    answer = outcome(side, framed(frame[4:] + bytes(10)), "ApiVersions", rq.API_VERSIONS)
    return [answer[0], answer[1].error_code if len(answer) > 1 else None]


@scenario("frames.null_client_id", versions=METADATA)
def null_client_id(side: Side) -> list[Any]:
    """A Metadata v13 request whose header has a null client id: answered."""
    frame = KafkaCodec().encode_request(rq.metadata([]), version=rq.METADATA,
                                        correlation_id=CORRELATION_ID, client_id=None)  # fmt: skip
    answer = outcome(side, frame, "Metadata", rq.METADATA)
    return [answer[0], len(answer[1].brokers) if len(answer) > 1 else None]


@scenario("frames.negative_size", versions=NO_VERSIONS,
          older_versions="no request: a size prefix alone")  # fmt: skip
def negative_size(side: Side) -> list[Any]:
    """A size prefix of -1: the connection is closed."""
    return outcome(side, struct.pack(">i", -1))


@scenario("frames.oversized_frame", versions=NO_VERSIONS,
          older_versions="no request: a size prefix alone")  # fmt: skip
def oversized_frame(side: Side) -> list[Any]:
    """A size prefix of 200 MiB, over ``socket.request.max.bytes`` (100 MiB): the connection
    is closed before anything more is read."""
    return outcome(side, struct.pack(">i", 200 * 1024 * 1024))


@scenario("frames.empty_frame", versions=NO_VERSIONS,
          older_versions="no request: an empty frame")  # fmt: skip
def empty_frame(side: Side) -> list[Any]:
    """A frame of size 0 (no header at all): the connection is closed."""
    return outcome(side, struct.pack(">i", 0))


@scenario("frames.header_cut_short", versions=NO_VERSIONS,
          older_versions="no request: two bytes of a header")  # fmt: skip
def header_cut_short(side: Side) -> list[Any]:
    """A frame holding only an api key (2 bytes): the connection is closed."""
    return outcome(side, framed(struct.pack(">h", 3)))


@scenario("frames.bad_tagged_fields", versions=METADATA)
def bad_tagged_fields(side: Side) -> list[Any]:
    """A Metadata v13 request whose tagged fields claim a tag of 1,000 bytes that is not there:
    the connection is closed."""
    frame = request_frame(rq.metadata([]), rq.METADATA)
    body = frame[4:-1] + bytes([1, 5]) + bytes([0xE8, 0x07])  # one tag, number 5, size 1000
    return outcome(side, framed(body))


@scenario("frames.null_required_array", versions={"DeleteTopics": rq.DELETE_TOPICS})
def null_required_array(side: Side) -> list[Any]:
    """A DeleteTopics v6 request whose topics array, which may not be null, is null: the
    connection is closed."""
    body = (
        header(20, rq.DELETE_TOPICS) + b"\x00"  # the flexible header's empty tagged fields
        + b"\x00"  # a null compact array
        + struct.pack(">i", 1000) + b"\x00"  # the timeout; no tags
    )  # fmt: skip
    return outcome(side, framed(body))


@scenario("frames.pipelined_requests", versions={**METADATA, **API_VERSIONS})
def pipelined_requests(side: Side) -> list[Any]:
    """Three requests sent back to back on one connection before any answer is read: answered
    in order, each with its own correlation id."""
    connection = side.connect(1)
    connection.send(rq.metadata([]), rq.METADATA)
    connection.send(messages.ApiVersionsRequest(client_software_name="coordkit",
                                                client_software_version="1"),
                    rq.API_VERSIONS)  # fmt: skip
    connection.send(rq.metadata(None), rq.METADATA)
    answers = [connection.receive() for _ in range(3)]
    return [type(a).__name__ for a in answers]

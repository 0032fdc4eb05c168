"""Frames in, messages out (and back): headers, api and version checks, the frame size limit.

A Kafka frame is an int32 size and that many bytes: a request header (v1, or v2 once the api
version is flexible: client id, then tagged fields) or a response header (v0, or v1 once flexible;
ApiVersions responses always use v0 so that any client can read them) followed by the body.
"""

from __future__ import annotations

import struct
from typing import Any

from attrs import field, frozen

from coordkit.protocol import messages, wire
from coordkit.protocol.errors import ProtocolError
from coordkit.protocol.messages import APIS, APIS_BY_KEY, ApiSchema
from coordkit.protocol.structs import Struct

#: Kafka's ``socket.request.max.bytes`` default (100 MiB).
DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024
_SIZE = struct.Struct(">i")
_KEY_VERSION = struct.Struct(">hh")
_KEY_VERSION_CORRELATION = struct.Struct(">hhi")
_CORRELATION = struct.Struct(">i")


def request_header_version(api: ApiSchema, version: int) -> int:
    """Kafka's ``ApiKeys.requestHeaderVersion``: 2 for flexible versions, else 1."""
    return 2 if api.request.flexible(version) else 1


def response_header_version(api: ApiSchema, version: int) -> int:
    """Kafka's ``ApiKeys.responseHeaderVersion``: 1 for flexible versions, else 0 — but always 0
    for ApiVersions, whose response a client must read before it knows what the broker speaks."""
    if api.name == "ApiVersions":
        return 0
    return 1 if api.response.flexible(version) else 0


@frozen
class Request:
    """A decoded request: which api and version, the header and the body."""

    api: ApiSchema
    version: int
    header: Any = field(repr=False)
    body: Any
    #: Bytes after the body that the decoder passed over (see :meth:`KafkaCodec.decode_request`).
    ignored_bytes: int = 0

    @property
    def correlation_id(self) -> int:
        return int(self.header.correlation_id)

    @property
    def client_id(self) -> str | None:
        client_id: str | None = self.header.client_id
        return client_id


def api_of(message: Struct) -> ApiSchema:
    """The api a request or response object belongs to."""
    name = type(message).KAFKA_NAME.removesuffix("Request").removesuffix("Response")
    try:
        return APIS[name]
    except KeyError:
        raise ProtocolError(f"{type(message).__name__} is not a request or response") from None


def lookup_api(api: str | int) -> ApiSchema:
    """An api by name (``Metadata``) or key (3)."""
    found = APIS.get(api) if isinstance(api, str) else APIS_BY_KEY.get(api)
    if found is None:
        if isinstance(api, int):
            raise ProtocolError("unknown api key", api_key=api)
        raise ProtocolError(f"unknown api {api!r} (known: {', '.join(APIS)})")
    return found


class KafkaCodec:
    """Encodes and decodes Kafka frames for the apis coordkit speaks.

    :param max_frame_bytes: the largest frame accepted (Kafka's ``socket.request.max.bytes``);
        a larger size prefix is refused before anything is read or allocated.
    """

    def __init__(self, *, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        if max_frame_bytes < 8:
            raise ValueError(f"max_frame_bytes must be at least 8, not {max_frame_bytes}")
        self.max_frame_bytes = max_frame_bytes

    # -- frames -----------------------------------------------------------------------------

    def frame_size(self, prefix: wire.Buffer) -> int:
        """The size in a frame's 4-byte prefix, checked against the limit."""
        if len(prefix) < 4:
            raise ProtocolError(f"frame size needs 4 bytes, {len(prefix)} given")
        size: int = _SIZE.unpack_from(prefix, 0)[0]
        if size < 0:
            raise ProtocolError(f"frame size {size} is negative")
        if size > self.max_frame_bytes:
            raise ProtocolError(
                f"frame of {size} bytes exceeds the limit of {self.max_frame_bytes} bytes"
            )
        return size

    def _frame(self, out: bytearray) -> bytes:
        size = len(out) - 4
        if size > self.max_frame_bytes:
            raise ProtocolError(
                f"frame of {size} bytes exceeds the limit of {self.max_frame_bytes}"
            )
        _SIZE.pack_into(out, 0, size)
        return bytes(out)

    # -- requests ---------------------------------------------------------------------------

    def decode_request(self, frame: wire.Buffer) -> Request:
        """Decode one request frame (the bytes after the size prefix).

        Bytes after the body are passed over, as Kafka passes over them; their count is
        :attr:`Request.ignored_bytes`.
        """
        if len(frame) > self.max_frame_bytes:
            raise ProtocolError(f"frame of {len(frame)} bytes exceeds the limit")
        if len(frame) < 4:
            raise ProtocolError(f"request header needs at least 4 bytes, {len(frame)} given",
                                kind="header")  # fmt: skip
        key, version = _KEY_VERSION.unpack_from(frame, 0)
        correlation = _CORRELATION.unpack_from(frame, 4)[0] if len(frame) >= 8 else None
        api = APIS_BY_KEY.get(key)
        if api is None:
            raise ProtocolError("unknown api key", api_key=key, version=version,
                                kind="request", correlation_id=correlation)  # fmt: skip
        if version not in api.versions:
            raise ProtocolError(
                f"unsupported version (valid: {api.versions})",
                api=api.name,
                api_key=key,
                version=version,
                kind="request",
                correlation_id=correlation,
            )
        header_plan = messages.plan("RequestHeader", request_header_version(api, version))
        body_plan = messages.plan(api.request.name, version)
        where: dict[str, Any] = {"api": api.name, "api_key": key, "version": version,
                                 "correlation_id": correlation}  # fmt: skip
        try:
            header, pos = header_plan.decode(frame, 0)
        except wire.Fail as e:
            raise ProtocolError(e.reason, kind="request header", path=e.path, **where) from None
        try:
            body, pos = body_plan.decode(frame, pos)
        except wire.Fail as e:
            raise ProtocolError(e.reason, kind="request", path=e.path, **where) from None
        # Lenient on purpose, as Kafka is: a broker reads the fields a version defines and passes
        # over whatever follows them (Kafka's generated readers never check that a request's
        # buffer is used up). librdkafka 2.16 relies on it: its Metadata v9+ request for all
        # topics reserves four bytes for the topic count, writes the null compact array into the
        # first and sends the other three (read as the two flags and the tagged fields) ahead of
        # the real ones. Responses and bodies decoded on their own stay strict.
        return Request(api, version, header, body, ignored_bytes=len(frame) - pos)

    def encode_request(
        self,
        body: Struct,
        *,
        version: int,
        correlation_id: int,
        client_id: str | None = "coordkit",
    ) -> bytes:
        """A request frame (size prefix included) for ``body`` at ``version``."""
        api = api_of(body)
        header_version = request_header_version(api, version)
        header = messages.message_class("RequestHeader")(
            request_api_key=api.key,
            request_api_version=version,
            correlation_id=correlation_id,
            client_id=client_id,
        )
        out = bytearray(4)
        self._encode_into(out, "RequestHeader", header_version, header, api, "request header")
        self._encode_into(out, api.request.name, version, body, api, "request")
        return self._frame(out)

    # -- responses --------------------------------------------------------------------------

    def encode_response(self, body: Struct, *, version: int, correlation_id: int) -> bytes:
        """A response frame (size prefix included) for ``body`` at ``version``."""
        api = api_of(body)
        header = messages.message_class("ResponseHeader")(correlation_id=correlation_id)
        out = bytearray(4)
        header_version = response_header_version(api, version)
        self._encode_into(out, "ResponseHeader", header_version, header, api, "response header")
        self._encode_into(out, api.response.name, version, body, api, "response")
        return self._frame(out)

    def decode_response(
        self, api: str | int, version: int, frame: wire.Buffer
    ) -> tuple[int, Struct]:
        """Decode a response frame of ``api`` at ``version``: ``(correlation_id, body)``."""
        schema = lookup_api(api)
        if len(frame) > self.max_frame_bytes:
            raise ProtocolError(f"frame of {len(frame)} bytes exceeds the limit")
        where: dict[str, Any] = {"api": schema.name, "api_key": schema.key, "version": version}
        if version not in schema.versions:
            raise ProtocolError(f"unsupported version (valid: {schema.versions})",
                                kind="response", **where)  # fmt: skip
        header_plan = messages.plan("ResponseHeader", response_header_version(schema, version))
        try:
            header, pos = header_plan.decode(frame, 0)
        except wire.Fail as e:
            raise ProtocolError(e.reason, kind="response header", path=e.path, **where) from None
        where["correlation_id"] = header.correlation_id
        try:
            body, pos = messages.plan(schema.response.name, version).decode(frame, pos)
        except wire.Fail as e:
            raise ProtocolError(e.reason, kind="response", path=e.path, **where) from None
        if pos != len(frame):
            raise ProtocolError(f"{len(frame) - pos} bytes left over after the response",
                                kind="response", **where)  # fmt: skip
        return int(header.correlation_id), body

    # -- bodies alone -----------------------------------------------------------------------

    def encode_body(self, body: Struct, version: int) -> bytes:
        """Only the body, no header or size (what kafka-python's ``encode()`` gives)."""
        api = api_of(body)
        out = bytearray()
        self._encode_into(out, type(body).KAFKA_NAME, version, body, api, _kind(body))
        return bytes(out)

    def decode_body(self, name: str, version: int, data: wire.Buffer) -> Struct:
        """Only a body: ``name`` is ``MetadataRequest``, ``FetchResponse`` and so on."""
        plan = messages.plan(name, version)
        try:
            body, pos = plan.decode(data, 0)
        except wire.Fail as e:
            raise ProtocolError(e.reason, path=e.path, **_where(plan)) from None
        if pos != len(data):
            raise ProtocolError(f"{len(data) - pos} bytes left over", **_where(plan))
        result: Struct = body
        return result

    def _encode_into(
        self, out: bytearray, name: str, version: int, value: Struct, api: ApiSchema, kind: str
    ) -> None:
        plan = messages.plan(name, version)
        try:
            plan.encode(out, value)
        except wire.Fail as e:
            raise ProtocolError(e.reason, api=api.name, api_key=api.key, version=version,
                                kind=kind, path=e.path) from None  # fmt: skip


def _where(plan: messages.Plan) -> dict[str, Any]:
    spec = plan.spec
    return {"api": spec.api, "api_key": spec.api_key, "version": plan.version, "kind": spec.kind}


def _kind(body: Struct) -> str:
    return "request" if type(body).KAFKA_NAME.endswith("Request") else "response"


class FrameReader:
    """Splits a byte stream into frames, refusing a size over the limit before buffering it.

    ``feed(data)`` returns the frames completed by ``data`` (each without its size prefix).
    """

    def __init__(self, codec: KafkaCodec) -> None:
        self.codec = codec
        self._buffer = bytearray()

    def feed(self, data: wire.Buffer) -> list[bytes]:
        self._buffer += data
        frames: list[bytes] = []
        pos = 0
        buffer = self._buffer
        while len(buffer) - pos >= 4:
            size = self.codec.frame_size(bytes(buffer[pos : pos + 4]))
            if len(buffer) - pos - 4 < size:
                break
            frames.append(bytes(buffer[pos + 4 : pos + 4 + size]))
            pos += 4 + size
        del buffer[:pos]
        return frames

    @property
    def pending(self) -> int:
        """Bytes held for a frame not yet complete."""
        return len(self._buffer)

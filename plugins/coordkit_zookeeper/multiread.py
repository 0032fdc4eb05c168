"""ZooKeeper's ``multiRead`` (3.6+): many ``getData`` calls in one request and one reply.

Pipelining already keeps thousands of ``getData`` requests in flight, but each is still a request
the server queues, processes and answers on its own, and a reply kazoo decodes on its own; reading
100,000 partition states that way runs at about 15,000 reads a second. ``multiRead`` (opcode 22)
carries up to a few thousand reads per request: the wire format is a ``multi``'s —
``MultiHeader(type, done, err)`` before each op and a ``done`` header at the end — and the reply
holds, per op, either ``GetDataResponse`` (data, stat) or an ``ErrorResponse`` (error code).
Unlike ``multi``, the ops are independent: one missing node fails only its own slot.

Servers older than 3.6 do not know the opcode, so the store asks for it only when the URL says
``multi_read=true``, or (``auto``, the default) after one probe request has come back well formed.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

from kazoo.exceptions import EXCEPTIONS
from kazoo.protocol.serialization import GetData, ZnodeStat

#: The request type of ``multiRead`` in ZooKeeper's ``ZooDefs.OpCode``.
MULTI_READ = 22
#: Reads per request: replies stay far below ``jute.maxbuffer`` (1 MiB by default) for the small
#: nodes the engine reads in bulk, while a request costs the server one queue slot.
PATHS_PER_REQUEST = 1000

_HEADER = struct.Struct("!iBi")
_INT = struct.Struct("!i")
_STAT = struct.Struct("!qqqqiiiqiiq")
_OP_HEADER = _HEADER.pack(GetData.type, False, -1)
_DONE = _HEADER.pack(-1, True, -1)
_ERROR = -1


class MultiRead:
    """A kazoo protocol request reading the data and stat of ``paths`` (absolute, chrooted)."""

    type = MULTI_READ
    __slots__ = ("paths",)

    def __init__(self, paths: Sequence[str]):
        self.paths = paths

    def serialize(self) -> bytes:
        out = bytearray()
        for path in self.paths:
            encoded = path.encode("utf-8")
            out += _OP_HEADER
            out += _INT.pack(len(encoded))
            out += encoded
            out += b"\0"  # no watch
        out += _DONE
        return bytes(out)

    def deserialize(self, buffer: bytes, offset: int) -> list[tuple[bytes, ZnodeStat] | Exception]:
        """One ``(data, stat)`` or kazoo exception per path, in order."""
        results: list[tuple[bytes, ZnodeStat] | Exception] = []
        unpack_header, unpack_int, unpack_stat = (
            _HEADER.unpack_from,
            _INT.unpack_from,
            _STAT.unpack_from,
        )
        stat_size = _STAT.size
        while True:
            op_type, done, _err = unpack_header(buffer, offset)
            offset += _HEADER.size
            if done:
                break
            if op_type == _ERROR:
                code = unpack_int(buffer, offset)[0]
                offset += 4
                results.append(EXCEPTIONS[code]())
                continue
            if op_type != GetData.type:
                raise ValueError(f"multiRead reply holds an op of type {op_type}, not getData")
            length = unpack_int(buffer, offset)[0]
            offset += 4
            if length < 0:  # a null buffer: a node created without data by a non-kazoo client
                data = b""
            else:
                data = bytes(buffer[offset : offset + length])
                offset += length
            stat = ZnodeStat._make(unpack_stat(buffer, offset))
            offset += stat_size
            results.append((data, stat))
        if len(results) != len(self.paths):
            raise ValueError(
                f"multiRead reply has {len(results)} results for {len(self.paths)} paths"
            )
        return results

    def __repr__(self) -> str:
        # kazoo logs requests at DEBUG; a thousand paths would swamp the log.
        first = self.paths[0] if self.paths else ""
        return f"MultiRead({len(self.paths)} paths from {first!r})"


def chunks(items: Sequence[Any], size: int = PATHS_PER_REQUEST) -> list[Sequence[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def read_all(run: Callable[[list[Any], str], list[Any]], full_paths: list[str]) -> list[Any]:
    """Read ``full_paths`` with pipelined multiRead requests sent by ``run`` (the store's
    pipelined sender); one reply or error per path."""
    requests = [MultiRead(chunk) for chunk in chunks(full_paths)]
    replies: list[Any] = []
    for request, reply in zip(requests, run(requests, "get"), strict=True):
        if isinstance(reply, BaseException):
            replies.extend([reply] * len(request.paths))
        else:
            replies.extend(reply)
    return replies

"""Bulk calls: many script calls streamed over one connection.

redis-py's pipeline packs every command before sending the first, so the client and the server
take turns. Here batch *n+1* is packed while the server runs batch *n* (a window of calls stays in
flight), which keeps both busy. Each call is independent: one reply per call, in order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import redis.exceptions as rex

from coordkit_redis.codec import pack_command
from coordkit_redis.scripts import LuaScript

T = TypeVar("T")

#: Script calls in flight at once.
WINDOW = 4


def stream_calls(
    client: Any,
    script: LuaScript,
    prefix: Sequence[str],
    calls: Iterable[tuple[T, Sequence[bytes | str]]],
    on_reply: Callable[[T, Any], None],
) -> list[T]:
    """Run ``script`` once per call (``(tag, args)``), calling ``on_reply(tag, reply)`` in order.

    A reply is the script's return value or the server's error instance. Returns the tags of calls
    the server refused with NOSCRIPT (it did not run them): the caller loads the script and sends
    them again. Connection failures propagate (the outcome of calls in flight is unknown).
    """
    head = ["EVALSHA", script.sha, "1", *prefix]
    pool = client.connection_pool
    connection = pool.get_connection()
    unknown_script: list[T] = []
    inflight: deque[T] = deque()

    def receive() -> None:
        tag = inflight.popleft()
        try:
            reply = connection.read_response()
        except rex.NoScriptError:
            unknown_script.append(tag)
            return
        except rex.ResponseError as exc:
            reply = exc
        on_reply(tag, reply)

    try:
        for tag, args in calls:
            connection.send_packed_command([pack_command([*head, *args])], check_health=False)
            inflight.append(tag)
            if len(inflight) >= WINDOW:
                receive()
        while inflight:
            receive()
    except BaseException:
        connection.disconnect()  # replies may still be on the way: never reuse this connection
        raise
    finally:
        pool.release(connection)
    return unknown_script

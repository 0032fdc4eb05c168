"""Pipelined requests on kazoo's connection: thousands in flight on the session's own socket.

kazoo's public ``*_async`` calls cost a wake-up byte, a ``threading.Condition`` and a trip through
the connection thread's ``select`` loop *per request*, and the loop sends one request and reads one
reply per turn. That caps a client at a few thousand requests a second, while a controller writes
100,000 partition states at once. Two things here lift the cap without changing what goes over the
wire (each op is still its own ZooKeeper request, answered in order on the same session):

* :func:`submit` queues many protocol requests with one wake-up and completes them into one
  :class:`Batch` (a slot per request, one event for the lot) instead of a result object each;
* :class:`BatchingConnectionHandler` (installed by :func:`install_batching`) sends everything queued
  in one write per turn and reads replies through a buffer, handling every complete reply in it
  before going back to ``select``.

Both use kazoo's connection internals (``client._queue``/``_pending``, the handler's ``_read``/
``_send_request``/``_read_socket``), as in kazoo 2.11; :func:`install_batching` checks for them
and leaves kazoo's own handler in place if they are missing, and :func:`submit` works with either
handler (the fault tests run bulk operations on both).
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Sequence
from typing import Any

from kazoo.exceptions import (
    AuthFailedError,
    ConnectionClosedError,
    ConnectionDropped,
    SessionExpiredError,
)
from kazoo.protocol import connection as kazoo_connection
from kazoo.protocol.serialization import Auth, int_struct
from kazoo.protocol.states import KeeperState

#: Bytes of requests written per turn of the connection loop (replies are read in between).
SEND_BATCH_BYTES = 256 * 1024
#: Kept below glibc's mmap threshold: every recv allocates a buffer of this size.
RECV_BYTES = 64 * 1024

_PENDING = object()
_REQUIRED = (
    "_read",
    "_read_socket",
    "_send_request",
    "_connect",
    "_write",
    "_socket_error_handling",
)


class Batch:
    """Results of requests submitted together: ``results[i]`` is the reply or the exception."""

    def __init__(self, size: int):
        self.results: list[Any] = [_PENDING] * size
        self._remaining = size
        self._lock = threading.Lock()
        self._done = threading.Event()
        if size == 0:
            self._done.set()

    def complete(self, index: int, value: Any) -> None:
        with self._lock:
            if self.results[index] is not _PENDING:
                return
            self.results[index] = value
            self._remaining -= 1
            if self._remaining == 0:
                self._done.set()

    def fail_pending(self, exc_factory: Any) -> None:
        for index, value in enumerate(self.results):
            if value is _PENDING:
                self.complete(index, exc_factory())

    def wait(self, idle_timeout: float) -> bool:
        """Wait for every reply; give up when none arrives for ``idle_timeout`` seconds."""
        seen = -1
        while not self._done.wait(idle_timeout):
            with self._lock:
                remaining = self._remaining
            if remaining == seen:
                return False
            seen = remaining
        return True


class _Slot:
    """Stands in for kazoo's async result object: kazoo calls ``set`` or ``set_exception``."""

    __slots__ = ("_batch", "_index")

    def __init__(self, batch: Batch, index: int):
        self._batch = batch
        self._index = index

    def set(self, value: Any = None) -> None:
        self._batch.complete(self._index, value)

    def set_exception(self, exception: BaseException) -> None:
        self._batch.complete(self._index, exception)


def submit(client: Any, requests: Sequence[Any]) -> Batch:
    """Queue ``requests`` (kazoo protocol objects with absolute, chrooted paths) on ``client``'s
    session, in order, and return their :class:`Batch` at once."""
    batch = Batch(len(requests))
    if not requests:
        return batch
    state = client._state
    if state == KeeperState.AUTH_FAILED:
        batch.fail_pending(AuthFailedError)
        return batch
    if state == KeeperState.CLOSED:
        batch.fail_pending(lambda: ConnectionClosedError("Connection has been closed"))
        return batch
    if state == KeeperState.EXPIRED_SESSION:
        batch.fail_pending(SessionExpiredError)
        return batch
    client._queue.extend((request, _Slot(batch, index)) for index, request in enumerate(requests))
    connection = client._connection
    wake = connection._write_sock
    try:
        if wake is None:
            raise OSError("connection closed")
        # kazoo's own handler sends one queued request per wake-up byte; ours drains the queue.
        wake.sendall(
            b"\0" if isinstance(connection, BatchingConnectionHandler) else b"\0" * len(requests)
        )
    except OSError:
        batch.fail_pending(lambda: ConnectionClosedError("Connection has been closed"))
    return batch


def install_batching(client: Any) -> bool:
    """Switch ``client``'s connection handler to :class:`BatchingConnectionHandler` (before
    ``start``). Returns False, leaving kazoo's handler, if this kazoo lacks the internals used."""
    handler = client._connection
    if type(handler) is not kazoo_connection.ConnectionHandler:
        return False
    if not all(hasattr(handler, name) for name in _REQUIRED) or not hasattr(
        kazoo_connection, "CLOSE_RESPONSE"
    ):
        return False
    handler.__class__ = BatchingConnectionHandler
    return True


class BatchingConnectionHandler(kazoo_connection.ConnectionHandler):  # type: ignore[misc]
    """kazoo's connection loop with batched writes and buffered reads (see the module docstring)."""

    _inbox: bytes = b""
    _inbox_at: int = 0
    _xid: int

    def _connect(self, host: str, hostip: str, port: int) -> Any:
        self._inbox, self._inbox_at = b"", 0  # a new socket: nothing buffered from the old one
        return super()._connect(host, hostip, port)

    # -- reading
    def _read(self, length: int, timeout: float) -> bytes:
        while len(self._inbox) - self._inbox_at < length:
            self._fill(timeout)
        start = self._inbox_at
        self._inbox_at = start + length
        return self._inbox[start : self._inbox_at]

    def _fill(self, timeout: float) -> None:
        sock = self._socket
        tls_buffered = hasattr(sock, "pending") and sock.pending() > 0
        if not tls_buffered and not self.handler.select([sock], [], [], timeout)[0]:
            raise self.handler.timeout_exception("socket time-out during read")
        with self._socket_error_handling():
            try:
                chunk = sock.recv(RECV_BYTES)
            except ssl.SSLError as exc:
                if exc.errno in (ssl.SSL_ERROR_WANT_READ, ssl.SSL_ERROR_WANT_WRITE):
                    return
                raise
        if not chunk:
            raise ConnectionDropped("socket connection broken")
        self._inbox = self._inbox[self._inbox_at :] + chunk
        self._inbox_at = 0

    def _buffered_reply(self) -> bool:
        available = len(self._inbox) - self._inbox_at
        if (
            available >= 4
            and available >= 4 + int_struct.unpack_from(self._inbox, self._inbox_at)[0]
        ):
            return True
        sock = self._socket
        # TLS may hold decrypted bytes the socket's select() will not report.
        return bool(hasattr(sock, "pending") and sock.pending() > 0)

    def _read_socket(self, read_timeout: float) -> Any:
        # The loop selects on the socket, which stays quiet while replies sit in our buffer.
        while True:
            response = super()._read_socket(read_timeout)
            if response == kazoo_connection.CLOSE_RESPONSE or not self._buffered_reply():
                return response

    # -- writing
    def _send_request(self, read_timeout: float, connect_timeout: float) -> None:
        client = self.client
        try:
            self._read_sock.recv(65536)  # every wake-up byte: the whole queue is drained below
        except OSError:
            pass
        queue = client._queue
        frames = bytearray()
        while queue and len(frames) < SEND_BATCH_BYTES:
            request, async_object = queue[0]
            if request is kazoo_connection._SESSION_EXPIRED:
                raise SessionExpiredError("Session expired: Testing")
            if request is kazoo_connection._CONNECTION_DROP:
                raise ConnectionDropped("Connection dropped: Testing")
            if request.type == Auth.type:
                xid = kazoo_connection.AUTH_XID
            else:
                self._xid = (self._xid % 2147483647) + 1
                xid = self._xid
            body = bytearray(int_struct.pack(xid))
            if request.type:
                body += int_struct.pack(request.type)
            body += request.serialize()
            self.logger.debug("Sending request(xid=%s): %s", xid, request)
            frames += int_struct.pack(len(body))
            frames += body
            queue.popleft()
            client._pending.append((request, async_object, xid))
        if frames:
            self._write(bytes(frames), connect_timeout)
        if queue:
            self._write_sock.send(b"\0")  # more than one batch queued: come back next turn

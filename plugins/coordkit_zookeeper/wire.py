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
  before going back to ``select``;
* watch notifications no one-shot kazoo watch waits on (a change feed's, by the million when a
  controller rewrites 1,333,334 states) are read off that buffer in one pass and handed to
  :attr:`BatchingConnectionHandler.notice_sink` as a list, instead of one trip each through
  kazoo's reading, which deserializes each twice and builds an event kazoo then drops.

The batching handler also keeps the session's heartbeat well inside the timeout and measures it:
a ping whenever the connection has been quiet for a tenth of the timeout (woken by
:mod:`coordkit_zookeeper.heartbeats`, or right after reading replies, when the connection thread
has its turn anyway), and :attr:`BatchingConnectionHandler.worst_heartbeat_gap`, the longest the
server went without a packet from this client while connected.

Both use kazoo's connection internals (``client._queue``/``_pending``, the handler's ``_read``/
``_send_request``/``_read_socket``), as in kazoo 2.11; :func:`install_batching` checks for them
and leaves kazoo's own handler in place if they are missing, and :func:`submit` works with either
handler (the fault tests run bulk operations on both).
"""

from __future__ import annotations

import ssl
import struct
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from kazoo.exceptions import (
    AuthFailedError,
    ConnectionClosedError,
    ConnectionDropped,
    SessionExpiredError,
)
from kazoo.protocol import connection as kazoo_connection
from kazoo.protocol.connection import (
    CHANGED_EVENT,
    CHILD_EVENT,
    CREATED_EVENT,
    DELETED_EVENT,
    PING_XID,
    WATCH_XID,
)
from kazoo.protocol.serialization import Auth, PingInstance, int_struct
from kazoo.protocol.states import KeeperState

from coordkit_zookeeper.heartbeats import BEATS_PER_TIMEOUT, PACER

#: Bytes of requests written per turn of the connection loop (replies are read in between).
SEND_BATCH_BYTES = 256 * 1024
#: Kept below glibc's mmap threshold: every recv allocates a buffer of this size.
RECV_BYTES = 64 * 1024

_PENDING = object()
#: A notification's frame up to its path: length, reply header (xid -1, zxid, err), then the
#: WatcherEvent's type, state and path length.
_NOTICE_HEAD = struct.Struct(">iiqiiii")
#: A notification: ``(event type, path as on the wire)``.
Notice = tuple[int, str]
_NOTICE_KINDS = frozenset((CREATED_EVENT, DELETED_EVENT, CHANGED_EVENT, CHILD_EVENT))
#: Notifications that fire kazoo's child watches (the others fire its data watches, but CHILD).
_CHILD_KINDS = frozenset((CHILD_EVENT, DELETED_EVENT))
#: A ping as kazoo frames it: length, xid -2, the ping opcode (no body).
_PING_FRAME = int_struct.pack(8) + int_struct.pack(PING_XID) + int_struct.pack(PingInstance.type)
_REQUIRED = (
    "_read",
    "_read_socket",
    "_send_request",
    "_connect",
    "_write",
    "_socket_error_handling",
    "_submit",
    "_connect_attempt",
    "ping_outstanding",
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
    # Heartbeats: seconds between pings when quiet (None: not connected), the write timeout, the
    # last write (monotonic), the worst gap between writes while connected. Writes happen on the
    # connection thread and, for pings, on the pacer's: one at a time.
    _beat_interval: float | None = None
    _beat_timeout: float = 1.0
    _last_write: float = 0.0
    _worst_gap: float = 0.0
    _write_lock: threading.Lock
    #: Where notifications read in bulk go (set by the change feeds, :mod:`.treewatch`); called on
    #: this thread, in wire order, with notifications no one-shot kazoo watch waits on (kazoo's
    #: own reading would do nothing with them). None: kazoo reads every notification.
    notice_sink: Callable[[list[Notice]], None] | None = None

    def _connect(self, host: str, hostip: str, port: int) -> Any:
        self._inbox, self._inbox_at = b"", 0  # a new socket: nothing buffered from the old one
        if not hasattr(self, "_write_lock"):
            self._write_lock = threading.Lock()
        read_timeout_ms, connect_timeout_ms = super()._connect(host, hostip, port)
        # kazoo's read timeout is two thirds of the negotiated session timeout.
        self._beat_interval = read_timeout_ms * 1.5 / 1000 / BEATS_PER_TIMEOUT
        self._beat_timeout = connect_timeout_ms / 1000
        if not isinstance(self._socket, ssl.SSLSocket):  # TLS: no writes from a second thread
            PACER.register(self)
        return read_timeout_ms, connect_timeout_ms

    def _connect_attempt(self, host: str, hostip: str, port: int, retry: Any) -> Any:
        try:
            return super()._connect_attempt(host, hostip, port, retry)
        finally:
            self._beat_interval = None
            PACER.unregister(self)

    # -- heartbeats
    @property
    def worst_heartbeat_gap(self) -> float:
        """Seconds: the longest time between two packets sent on a connection, including the time
        since the last one while connected (gaps across a reconnect are not counted)."""
        if self._beat_interval is None:
            return self._worst_gap
        return max(self._worst_gap, time.monotonic() - self._last_write)

    @property
    def heartbeat_interval(self) -> float | None:
        return self._beat_interval

    def beat(self, now: float) -> float | None:
        """The pacer's look (its thread): ping if the connection has been quiet for the interval;
        returns when to look again (None: not connected).

        The ping goes out from here, not through kazoo's loop, and is not marked outstanding:
        kazoo's loop keeps its own schedule, its own pings and its check that they are answered
        (a dead connection is still found), and this thread needs no turn of the loop's."""
        interval = self._beat_interval
        sock = self._socket
        if interval is None or sock is None:
            return None
        due = self._last_write + interval
        if now < due:
            return due
        if not self._write_lock.acquire(blocking=False):
            return now + interval / 4  # the connection thread is writing: not quiet after all
        try:
            if self._socket is not sock or self._beat_interval is None:
                return None  # the connection changed meanwhile
            if not self._send_ping_frame(sock):
                return now + interval / 4  # the socket's buffer is full: busy, not quiet
            self._wrote(time.monotonic())
        except OSError:
            return None  # a broken connection: the connection thread finds out for itself
        finally:
            self._write_lock.release()
        return time.monotonic() + interval

    def _send_ping_frame(self, sock: Any) -> bool:
        """Send a whole ping frame, or nothing (False) if the socket takes no bytes now."""
        try:
            sent = sock.send(_PING_FRAME)
        except BlockingIOError:
            return False
        while sent < len(_PING_FRAME):  # a frame once begun is finished
            if not self.handler.select([], [sock], [], self._beat_timeout)[1]:
                raise OSError("socket time-out during write")
            try:
                sent += sock.send(_PING_FRAME[sent:])
            except BlockingIOError:
                continue
        return True

    def _wrote(self, now: float) -> None:
        if self._beat_interval is not None:
            self._worst_gap = max(self._worst_gap, now - self._last_write)
        self._last_write = now

    def _write(self, msg: bytes, timeout: float) -> None:
        with self._write_lock:
            # Straight to the (non-blocking) socket: kazoo selects first, which lets other
            # threads take the GIL before the bytes leave. What does not fit goes kazoo's way.
            now = time.monotonic()
            with self._socket_error_handling():
                try:
                    sent = self._socket.send(msg)
                except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                    sent = 0
            if sent < len(msg):
                super()._write(msg[sent:], timeout)
                now = time.monotonic()
            self._wrote(now)

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

    def _complete_packet(self) -> bool:
        available = len(self._inbox) - self._inbox_at
        return (
            available >= 4
            and available >= 4 + int_struct.unpack_from(self._inbox, self._inbox_at)[0]
        )

    def _buffered_reply(self) -> bool:
        if self._complete_packet():
            return True
        sock = self._socket
        # TLS may hold decrypted bytes the socket's select() will not report.
        return bool(hasattr(sock, "pending") and sock.pending() > 0)

    def _take_notices(self) -> None:
        """Hand the notifications at the head of the buffer to :attr:`notice_sink`, up to the
        first packet that is not one, is incomplete, or has a one-shot kazoo watch waiting."""
        sink = self.notice_sink
        if sink is None:
            return
        client = self.client
        data_watchers, child_watchers = client._data_watchers, client._child_watchers
        inbox, at = self._inbox, self._inbox_at
        end = len(inbox)
        head = _NOTICE_HEAD.size
        unpack = _NOTICE_HEAD.unpack_from
        taken: list[Notice] = []
        while end - at >= head:
            length, xid, _zxid, _err, kind, _state, size = unpack(inbox, at)
            if xid != WATCH_XID or end - at < 4 + length or size < 0 or length != head - 4 + size:
                break  # a reply, a partial packet, or an odd one: kazoo's reading
            if kind not in _NOTICE_KINDS:
                break
            try:
                path = inbox[at + head : at + head + size].decode()
            except UnicodeDecodeError:
                break
            # As kazoo's reading picks the watches a notification fires: kazoo dispatches it (and
            # the change feeds hear of it there).
            if (kind != CHILD_EVENT and data_watchers.get(path)) or (
                kind in _CHILD_KINDS and child_watchers.get(path)
            ):
                break
            taken.append((kind, path))
            at += 4 + length
        if not taken:
            return
        self._inbox_at = at
        sink(taken)

    def _read_socket(self, read_timeout: float) -> Any:
        # The loop selects on the socket, which stays quiet while replies sit in our buffer.
        response: Any = None
        bulk = self.notice_sink is not None and not isinstance(self._socket, ssl.SSLSocket)
        if bulk:
            if not self._complete_packet():
                self._fill(read_timeout)  # the socket is readable: this does not wait
            self._take_notices()
        # What is left at the head, if complete, is for kazoo; a partial packet waits for the
        # socket to be readable again (not for this call to block on it).
        while not bulk or self._complete_packet():
            response = super()._read_socket(read_timeout)
            if response == kazoo_connection.CLOSE_RESPONSE or not self._buffered_reply():
                break
            if bulk:
                self._take_notices()
        # This thread has its turn now, perhaps before the pacer's: ping here if one is due (not
        # marked outstanding, as the pacer's).
        interval = self._beat_interval
        if (
            interval is not None
            and response != kazoo_connection.CLOSE_RESPONSE
            and time.monotonic() - self._last_write >= interval
        ):
            self._submit(PingInstance, self._beat_timeout, PING_XID)
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

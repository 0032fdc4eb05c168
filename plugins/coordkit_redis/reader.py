"""The change reader: the thread that follows a store client's change feed on its own connection.

It blocks in XREAD on the streams the feed follows (:mod:`coordkit_redis.changes`) and tells the
watch hub what changed; the hub re-reads on the store's event thread, so no callback runs here.
Keeping the session alive is not its job (:mod:`coordkit_redis.sessions` has its own thread and
connection): a slow read here delays notifications, never a renewal. It only lends a hand: after
a read, it renews the session itself if the keeper's thread is late.

A newly followed stream is picked up at once: the thread adding the watch unblocks the reader's
XREAD with ``CLIENT UNBLOCK`` (a server that refuses it costs at most one idle wait,
:data:`MAX_BLOCK`, of latency on a new watch). After a connection failure the reader reports it
(SUSPENDED, until the keeper finds the session alive), reconnects, and checks every followed stream
before reading on: a stream trimmed past its position, or reset, means a full resync of the
watches. So does a gap in the numbers of the entries it reads (trimmed past while connected).
"""

from __future__ import annotations

import logging
import socket
import threading
from typing import Any

from coordkit.store.watches import WatchHub
from coordkit_redis.changes import ChangeFeed
from coordkit_redis.failures import is_connection_failure, translate
from coordkit_redis.sessions import MAX_BACKOFF, MIN_BACKOFF, RedisSessionKeeper

log = logging.getLogger("coordkit.store.redis")

#: Seconds an idle reader waits in XREAD before looking for new streams to follow.
MAX_BLOCK = 0.5
#: Seconds a reader that found entries waits before reading again: while changes pour in, a client
#: reads them in batches (at most 1/COALESCE reads a second) instead of waking up for every
#: entry; the first change after a quiet spell is read at once.
COALESCE = 0.05


def interrupt_blocked_read(client: Any) -> None:
    """Wake a thread blocked in XREAD BLOCK on ``client`` (a single-connection client) by
    shutting its socket down."""
    connection = getattr(client, "connection", None)
    sock = getattr(connection, "_sock", None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class ChangeReader:
    """Reads ``feed`` on ``client`` (a single-connection client it owns) in a daemon thread."""

    def __init__(
        self, *, name: str, feed: ChangeFeed, client: Any, keeper: RedisSessionKeeper, hub: WatchHub
    ):
        self._name = name
        self._feed = feed
        self._client = client
        self._keeper = keeper
        self._hub = hub
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._connection_id: int | None = None  # the reader's connection, for CLIENT UNBLOCK
        self._can_unblock = True

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._run, name=f"coordkit-redis-changes-{self._name}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._interrupt()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        self._disconnect()

    def wake(self, client: Any) -> None:
        """Make the reader pick up newly followed streams now (``client``: any other connection)."""
        target = self._connection_id
        if target is None or not self._can_unblock:
            return
        import redis.exceptions as rex

        try:
            client.execute_command("CLIENT", "UNBLOCK", target)
        except rex.ResponseError as exc:  # an ACL without CLIENT UNBLOCK: wait for MAX_BLOCK
            self._can_unblock = False
            log.debug("%s: cannot unblock the change reader: %s", self._name, exc)

    def _own_id(self) -> int | None:
        """The reader connection's id (it changes with every reconnect), or None for a user who
        may not run CLIENT commands (then new watches wait for the idle read to end)."""
        import redis.exceptions as rex

        try:
            return int(self._client.client_id())
        except rex.ResponseError as exc:
            self._can_unblock = False
            log.debug("%s: cannot unblock the change reader: %s", self._name, exc)
            return None

    def _interrupt(self) -> None:
        interrupt_blocked_read(self._client)

    def _disconnect(self) -> None:
        try:
            self._client.connection.disconnect()
        except Exception:
            pass

    def _run(self) -> None:
        backoff = MIN_BACKOFF
        check = False  # after a failure: are the positions still good?
        block_ms = int(MAX_BLOCK * 1000)
        while not self._stop.is_set():
            try:
                if self._connection_id is None and self._can_unblock:
                    self._connection_id = self._own_id()
                resync = self._feed.repair(self._client)
                if check:
                    resync = self._feed.needs_resync(self._client) or resync
                    check = False
                if resync:
                    self._hub.resync()
                read, missed = self._feed.poll(self._client, block_ms)
                if missed:
                    # It fell more than a shard's length behind (a write storm where it watches):
                    # what it skipped is read afresh.
                    log.debug("%s: change reader was trimmed past: re-reading watches", self._name)
                    self._hub.resync()
                self._keeper.renew_if_late(self._client)
                backoff = MIN_BACKOFF
                if read:
                    self._stop.wait(COALESCE)
            except Exception as exc:
                if self._stop.is_set():
                    break
                self._connection_id = None
                if is_connection_failure(exc):
                    # Its blocking read is the first to see a connection go, as kazoo's
                    # connection thread is: SUSPENDED until the keeper finds the session alive.
                    self._disconnect()
                    self._keeper.connection_failed()
                    check = True
                else:
                    log.warning("%s: change reader: %s", self._name, translate(exc))
                self._stop.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF)

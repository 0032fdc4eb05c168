"""Heartbeats every tenth of the session timeout for the batching connections of this process.

ZooKeeper expires a session when the server hears nothing from its client for the session timeout.
kazoo's connection thread pings after a third of the timeout without a send, less up to 0.4 s of
jitter, so an idle session normally goes a third of its timeout between packets: any scheduling
delay (a busy interpreter: the connection thread needs the GIL like every other thread) eats the
rest of the margin kazoo leaves itself before its own dead-connection check.

The pacer is one daemon thread for the whole process, running while a batching connection is up.
When a connection has sent nothing for a tenth of its negotiated timeout, the pacer sends it a
ping (:meth:`~coordkit_zookeeper.wire.BatchingConnectionHandler.beat`); so does the connection
thread after reading replies, when it has its turn anyway. Neither marks the ping outstanding:
kazoo's own schedule, its pings and its check that they are answered (the way it finds a dead
connection) stay as they were. TLS connections get only the connection thread's pings (an SSL
socket takes no writes from a second thread). Watch callbacks never run on kazoo's connection
thread (kazoo hands them to its callback thread; the store's hub re-reads on its own event
thread), so nothing of ours delays a ping either.
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import Protocol

#: Pings per session timeout when the connection is otherwise quiet.
BEATS_PER_TIMEOUT = 10
#: Longest the pacer sleeps between looks (a new connection registers itself anyway).
MAX_SLEEP = 0.5
MIN_SLEEP = 0.005


class Paced(Protocol):
    def beat(self, now: float) -> float | None:
        """Ping now if due; return when to look again (None: not connected)."""


class Pacer:
    """The process's heartbeat thread (see the module docstring)."""

    def __init__(self) -> None:
        self._connections: weakref.WeakSet[Paced] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._changed = threading.Event()

    def register(self, connection: Paced) -> None:
        with self._lock:
            self._connections.add(connection)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="coordkit-zookeeper-heartbeats", daemon=True
                )
                self._thread.start()
        self._changed.set()

    def unregister(self, connection: Paced) -> None:
        with self._lock:
            self._connections.discard(connection)

    def _run(self) -> None:
        while True:
            self._changed.clear()  # before the snapshot: a registration after it wakes the wait
            with self._lock:
                connections = list(self._connections)
                if not connections:
                    self._thread = None
                    return
            now = time.monotonic()
            wake_at = now + MAX_SLEEP
            for connection in connections:
                due = connection.beat(now)
                if due is not None:
                    wake_at = min(wake_at, due)
            self._changed.wait(max(MIN_SLEEP, wake_at - time.monotonic()))


PACER = Pacer()

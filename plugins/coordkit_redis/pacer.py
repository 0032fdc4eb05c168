"""One thread for the whole process that renews the Redis sessions whose keeper is late.

Every session has a keeper thread (:mod:`coordkit_redis.sessions`), but in a process with many
busy threads each keeper waits for a turn on the GIL of its own, and now and then that wait is
long. The pacer covers for them: it looks at every session of the process and, in one turn, sends
a renewal for each that has gone half a beat without one, on a connection of that session's store
(the keeper's own may be stuck waiting for a reply), before it reads any reply. One thread getting
a turn renews them all, where a hundred keepers would each have had to get one. (ZooKeeper
connections have the same arrangement: :mod:`coordkit_zookeeper.heartbeats`.)
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import Any, Protocol

#: Longest the pacer sleeps between looks (a new session registers itself anyway).
MAX_SLEEP = 0.5
MIN_SLEEP = 0.005


class Paced(Protocol):
    def pace_due(self, now: float) -> float | None:
        """When this session is late (None: nothing to renew)."""

    def send_renewal(self) -> tuple[Any, float] | None:
        """Send a renewal without reading the reply: the connection and the send time, or None
        if none was sent."""

    def finish_renewal(self, connection: Any, sent: float) -> None:
        """Read the reply of the renewal sent at ``sent`` on ``connection``."""


class Pacer:
    """The process's pacer thread (see the module docstring); runs while a session is open."""

    def __init__(self) -> None:
        self._sessions: weakref.WeakSet[Paced] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._changed = threading.Event()

    def register(self, session: Paced) -> None:
        with self._lock:
            self._sessions.add(session)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="coordkit-redis-pacer", daemon=True
                )
                self._thread.start()
        self._changed.set()

    def unregister(self, session: Paced) -> None:
        with self._lock:
            self._sessions.discard(session)

    def _run(self) -> None:
        while True:
            self._changed.clear()  # before the snapshot: a registration after it wakes the wait
            with self._lock:
                sessions = list(self._sessions)
                if not sessions:
                    self._thread = None
                    return
            now = time.monotonic()
            wake_at = now + MAX_SLEEP
            sent: list[tuple[Paced, Any, float]] = []
            for session in sessions:
                due = session.pace_due(now)
                if due is None:
                    continue
                if due > now:
                    wake_at = min(wake_at, due)
                    continue
                renewal = session.send_renewal()
                if renewal is not None:
                    sent.append((session, *renewal))
            # Every renewal is on the wire before the first reply is awaited.
            for session, connection, at in sent:
                session.finish_renewal(connection, at)
            self._changed.wait(max(MIN_SLEEP, wake_at - time.monotonic()))


PACER = Pacer()

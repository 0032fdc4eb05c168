"""A database file as the clients of one process share it, and the connections of one client.

Every store client of a file in this process shares one :class:`SharedFile`: the change feed (one
reader thread, not one per client), a lock that queues this process's writers in order (they wait
on each other without SQLite's sleep-and-retry busy handler, which is left for writers in other
processes), and the list of this process's live sessions, which no reaper here expires (their
clients are alive and connected; a late heartbeat is no death). A :class:`ConnectionPool` gives
one client's calls their connections.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from typing import ClassVar, TypeVar

from coordkit.errors import ConnectionLossError, StoreClosedError
from coordkit.support.clock import Clock
from coordkit_sqlite.changes import ChangeFeed
from coordkit_sqlite.config import SqliteConfig
from coordkit_sqlite.schema import connect, immediate
from coordkit_sqlite.tree import Retention, Tx

T = TypeVar("T")

#: A live session of this process: ``() -> (session id, timeout ms)``, or ``None`` when its client
#: is not connected right now.
LiveSession = Callable[[], "tuple[int, int] | None"]


class SharedFile:
    """This process's clients of one database file: its change feed, its writer queue, its live
    sessions."""

    _registry: ClassVar[dict[str, SharedFile]] = {}
    _registry_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, key: str, config: SqliteConfig):
        self.key = key
        self.path = config.path
        self.write_lock = threading.Lock()
        self.feed = ChangeFeed(
            config.path, poll_interval=config.poll_interval, busy_timeout=config.busy_timeout
        )
        self._sessions: list[LiveSession] = []
        self._users = 0

    @classmethod
    def acquire(cls, config: SqliteConfig) -> SharedFile:
        """The shared state of ``config.path`` (made on first use; the file must be set up)."""
        key = os.path.realpath(config.path)
        with cls._registry_lock:
            shared = cls._registry.get(key)
            if shared is None:
                shared = cls._registry[key] = SharedFile(key, config)
            shared._users += 1
            # Clients asking for a shorter poll interval get it; the others lose nothing by it.
            shared.feed.poll_interval = min(shared.feed.poll_interval, config.poll_interval)
            return shared

    def release(self) -> None:
        with self._registry_lock:
            self._users -= 1
            if self._users > 0:
                return
            self._registry.pop(self.key, None)
        self.feed.stop()

    @classmethod
    def existing(cls, path: str) -> SharedFile | None:
        """The shared state of ``path`` if a client in this process has it open."""
        with cls._registry_lock:
            return cls._registry.get(os.path.realpath(path))

    # -- live sessions
    def add_session(self, live: LiveSession) -> None:
        with self._registry_lock:
            self._sessions.append(live)

    def remove_session(self, live: LiveSession) -> None:
        with self._registry_lock:
            if live in self._sessions:
                self._sessions.remove(live)

    def reap(self, tx: Tx) -> int:
        """End overdue sessions — after renewing this process's live ones, so that a client whose
        heartbeat is merely late (or a clock moved on) is never taken for dead by its neighbour."""
        with self._registry_lock:
            sources = list(self._sessions)
        for live in sources:
            found = live()
            if found is not None:
                session_id, timeout_ms = found
                tx.conn.execute(
                    "UPDATE sessions SET expires_ms = max(expires_ms, ?) WHERE id = ?",
                    (tx.now_ms + timeout_ms, session_id),
                )
        return tx.reap(tx.now_ms)

    def write(
        self,
        conn: sqlite3.Connection,
        work: Callable[[Tx], T],
        *,
        clock: Clock,
        kept: Retention,
    ) -> T:
        """:func:`write` after this process's earlier writers, at ``clock``'s time; this
        process's watchers hear of it at once."""
        with self.write_lock:
            result = write(conn, work, now_ms=clock.wall_ms(), kept=kept)
        self.feed.nudge()
        return result


def write(conn: sqlite3.Connection, work: Callable[[Tx], T], *, now_ms: int, kept: Retention) -> T:
    """Run ``work`` in one write transaction and commit it with its change log entries; anything
    raised rolls everything back."""
    with immediate(conn):
        tx = Tx(conn, now_ms)
        result = work(tx)
        tx.finish(kept)
    return result


class ConnectionPool:
    """Connections of one store client: idle ones are reused, so a client holds as many as it
    has calls running at once (its session keeper included).

    :meth:`disconnect` cuts the client off the file without ending its session, as a lost network
    does to a ZooKeeper client: every connection is closed once its call returns, and calls fail
    with ``ConnectionLossError`` until :meth:`reconnect`.
    """

    def __init__(self, config: SqliteConfig, *, read_only: bool):
        self._config = config
        self._read_only = read_only
        self._idle: list[sqlite3.Connection] = []
        self._borrowed = 0
        self._returned = threading.Condition()
        self._closed = False
        self._offline = False

    def adopt(self, conn: sqlite3.Connection) -> None:
        """Keep ``conn`` (the connection that opened the file) for later calls."""
        with self._returned:
            self._idle.append(conn)

    def check_online(self) -> None:
        if self._closed:
            raise StoreClosedError("store client is closed")
        if self._offline:
            raise ConnectionLossError(f"sqlite store {self._config.path}: disconnected")

    @contextlib.contextmanager
    def borrow(self) -> Iterator[sqlite3.Connection]:
        with self._returned:
            self.check_online()
            conn = self._idle.pop() if self._idle else None
            self._borrowed += 1
        broken = True
        try:
            if conn is None:
                conn = connect(
                    self._config.path,
                    busy_timeout=self._config.busy_timeout,
                    read_only=self._read_only,
                )
            yield conn
            broken = False
        except sqlite3.Error:
            raise  # it may be the connection that failed: a fresh one next time
        except BaseException:
            broken = False  # a store error (no node, bad version...): the connection is fine
            raise
        finally:
            with self._returned:
                self._borrowed -= 1
                keep = conn is not None and not (
                    broken or self._closed or self._offline or conn.in_transaction
                )
                if keep:
                    self._idle.append(conn)  # type: ignore[arg-type]
                self._returned.notify_all()
            if conn is not None and not keep:
                conn.close()

    def refresh(self) -> None:
        """Drop idle connections (the file was replaced: later calls open the new one)."""
        with self._returned:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    # -- faults and the end
    def disconnect(self, wait: float = 10.0) -> None:
        """Cut this client off; returns once every connection it had is closed (calls running now
        finish first, for up to ``wait`` seconds)."""
        with self._returned:
            self._offline = True
        self.refresh()
        deadline = time.monotonic() + wait
        with self._returned:
            while self._borrowed and time.monotonic() < deadline:
                self._returned.wait(deadline - time.monotonic())

    def reconnect(self) -> None:
        with self._returned:
            self._offline = False

    @property
    def offline(self) -> bool:
        return self._offline

    def close(self) -> None:
        with self._returned:
            self._closed = True
        self.refresh()

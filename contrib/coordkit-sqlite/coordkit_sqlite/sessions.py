"""Sessions: a row per live session, pushed on by heartbeats; the thread that keeps one alive.

A session row holds the wall-clock millisecond it expires at. Its client's keeper thread renews it
every third of the timeout (a thread of its own: watch callbacks never delay it; the client's pool
opens it a connection when all are busy), and every write of the session renews it too. Any
client ends overdue sessions — their ephemeral nodes go in one transaction, as ZooKeeper's leader
does it — when it opens a session or heartbeats, so a dead process's nodes vanish once its timeout
has passed while any other client of the file lives. A reaper first renews the sessions of
connected clients in its own process (see :meth:`~coordkit_sqlite.files.SharedFile.reap`).

Time is the store's clock (``clock`` option, default the system's): every process on the machine
reads the same wall clock, so one process's deadline means the same to all.
"""

from __future__ import annotations

import functools
import logging
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any

from coordkit.errors import StoreError
from coordkit.store import SessionKeeper, SessionState
from coordkit.store.watches import EventThread, WatchHub
from coordkit.support.clock import Clock, SystemClock
from coordkit_sqlite.config import SqliteConfig
from coordkit_sqlite.files import ConnectionPool, SharedFile, write
from coordkit_sqlite.schema import connect, open_file, translate
from coordkit_sqlite.tree import Retention, Tx, wall_ms

log = logging.getLogger("coordkit.store.sqlite")

MIN_BACKOFF = 0.02
MAX_BACKOFF = 1.0


def new_session_id() -> int:
    """A random id in [2**52, 2**53): never reused, even by a client of a re-created file."""
    return (1 << 52) | secrets.randbits(52)


def open_session(tx: Tx, session_id: int, timeout_ms: int) -> bool:
    """Insert a session row (False if the id is taken)."""
    inserted = tx.conn.execute(
        "INSERT OR IGNORE INTO sessions (id, timeout_ms, expires_ms, pid) VALUES (?, ?, ?, ?)",
        (session_id, timeout_ms, tx.now_ms + timeout_ms, os.getpid()),
    ).rowcount
    return inserted == 1


def touch_session(tx: Tx, session_id: int, timeout_ms: int) -> bool:
    """Push the session's expiry on; False if it has ended. As on a ZooKeeper server, a session
    ends when a reaper ends it, not at its deadline: one no reaper got to yet lives on."""
    renewed = tx.conn.execute(
        "UPDATE sessions SET expires_ms = ? WHERE id = ?", (tx.now_ms + timeout_ms, session_id)
    ).rowcount
    return renewed == 1


def expire_in_file(config: SqliteConfig, session_id: int) -> bool:
    """End ``session_id`` of the file as its timeout would (any client may); False if it had
    ended already."""
    where = f"sqlite store {config.path}"
    open_file(config.path, busy_timeout=config.busy_timeout, read_only=True).close()
    work = functools.partial(Tx.end_session, session_id=session_id, expired=True)
    try:
        conn = connect(config.path, busy_timeout=config.busy_timeout, read_only=False)
        try:
            shared = SharedFile.existing(config.path)  # queue behind this process's writers
            if shared is None:
                return write(conn, work, now_ms=wall_ms(), kept=config.retention)
            return shared.write(conn, work, clock=SystemClock(), kept=config.retention)
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise translate(exc, where) from None


class SqliteSessionKeeper(SessionKeeper):
    """A sqlite client's session: its state and listeners, and the thread that keeps it alive.

    :param clock: the time sessions are judged by.
    :param read_only: hold no session (opening one writes): the thread only checks that the file
        can be read, to report SUSPENDED and CONNECTED as a session would.
    """

    def __init__(
        self,
        *,
        name: str,
        shared: SharedFile,
        pool: ConnectionPool,
        clock: Clock,
        timeout: float,
        kept: Retention,
        events: EventThread,
        hub: WatchHub,
        read_only: bool = False,
    ):
        super().__init__(events, name=name, log=log)
        self._shared = shared
        self._pool = pool
        self.clock = clock
        self._timeout_ms = max(1, int(timeout * 1000))
        self._interval = timeout / 3
        self._kept = kept
        self._hub = hub
        self._read_only = read_only
        self._session_lock = threading.Lock()  # session transitions: heartbeats, close
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- state
    @property
    def timeout_ms(self) -> int:
        return self._timeout_ms

    def _write(self, conn: sqlite3.Connection, work: Callable[[Tx], Any]) -> Any:
        return self._shared.write(conn, work, clock=self.clock, kept=self._kept)

    # -- lifecycle
    def open(self) -> None:
        """Start the first session and the keeper thread."""
        if not self._read_only:
            with self._pool.borrow() as conn:
                self._open_session(conn)
            self._shared.add_session(self.live)
        self._thread = threading.Thread(
            target=self._run, name=f"coordkit-sqlite-session-{self._name}", daemon=True
        )
        self._thread.start()

    def _open_session(self, conn: sqlite3.Connection) -> None:
        for _ in range(8):
            session_id = new_session_id()
            if self._write(conn, functools.partial(self._opened, session_id=session_id)):
                self.session_id = session_id
                return
        raise StoreError(f"{self._name}: could not allocate a unique session id")

    def _opened(self, tx: Tx, session_id: int) -> bool:
        self._shared.reap(tx)
        return open_session(tx, session_id, self._timeout_ms)

    def live(self) -> tuple[int, int] | None:
        """``(session id, timeout ms)`` while the client is connected."""
        if self.state is not SessionState.CONNECTED or self._pool.offline:
            return None
        return self.session_id, self._timeout_ms

    def close(self) -> None:
        """End the session (deleting its ephemerals) and stop the keeper thread."""
        with self._session_lock:
            self._stop.set()
            # A LOST session has no ephemerals left; a SUSPENDED one may be back by now.
            if not self._read_only and self.state in (
                SessionState.CONNECTED,
                SessionState.SUSPENDED,
            ):
                session_id = self.session_id
                try:
                    with self._pool.borrow() as conn:
                        self._write(conn, lambda tx: tx.end_session(session_id, expired=False))
                except (StoreError, sqlite3.Error) as exc:  # it will expire by itself
                    error = translate(exc, self._name) if isinstance(exc, sqlite3.Error) else exc
                    log.warning("%s: could not end session %#x: %s", self._name, session_id, error)
            self.change_state(SessionState.CLOSED)
        self._shared.remove_session(self.live)
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)

    # -- hints from operations and the feed (any thread)
    def connection_failed(self) -> None:
        """A call could not reach the file: report SUSPENDED and let the keeper recover."""
        self.suspend()

    def check_now(self) -> None:
        """The session may be gone (a write was refused, the log says it expired): look now."""
        self._wake.set()

    # -- the keeper thread
    def _run(self) -> None:
        backoff = MIN_BACKOFF
        next_beat = time.monotonic() + self._interval
        while not self._stop.is_set():
            self._wake.wait(max(0.0, next_beat - time.monotonic()))
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                # A connection per beat from the pool: never one left open on a file that was
                # replaced, or through a cut.
                with self._pool.borrow() as conn:
                    if self.state in (SessionState.SUSPENDED, SessionState.LOST):
                        resync = self._recover(conn)
                    else:
                        resync = self._heartbeat(conn)
                if resync:
                    self._hub.resync()
                next_beat = time.monotonic() + self._interval
                backoff = MIN_BACKOFF
            except (StoreError, sqlite3.Error) as exc:
                if self._stop.is_set():
                    break
                error = translate(exc, self._name) if isinstance(exc, sqlite3.Error) else exc
                log.debug("%s: session keeper: %s", self._name, error)
                self.connection_failed()
                # Retry soon (or at once when woken, e.g. by a reconnect), not at the next beat.
                next_beat = time.monotonic() + backoff
                backoff = min(backoff * 2, MAX_BACKOFF)

    def _renew(self, conn: sqlite3.Connection) -> bool:
        """Heartbeat: True if the session was alive (now renewed); overdue sessions of others are
        ended."""
        if self._read_only:
            conn.execute("SELECT value FROM meta WHERE key = 'zxid'").fetchone()
            return True
        session_id = self.session_id

        def beat(tx: Tx) -> bool:
            alive = touch_session(tx, session_id, self._timeout_ms)
            self._shared.reap(tx)
            return alive

        alive: bool = self._write(conn, beat)
        return alive

    def _heartbeat(self, conn: sqlite3.Connection) -> bool:
        """Renew the session (or replace a lost one); True if every watch must be re-read."""
        with self._session_lock:
            if self._stop.is_set():
                return False
            if self._renew(conn):
                return False
            self._replace_session(conn)
            return True

    def _recover(self, conn: sqlite3.Connection) -> bool:
        """Back from SUSPENDED (session alive, or lost meanwhile) or retrying after LOST."""
        with self._session_lock:
            if self._stop.is_set():
                return False
            if self.state is SessionState.LOST or not self._renew(conn):
                self._replace_session(conn)
            else:
                self.change_state(SessionState.CONNECTED)
            return True

    def _replace_session(self, conn: sqlite3.Connection) -> None:
        """The session is gone: LOST, then a new session and CONNECTED (the caller re-reads
        every watch)."""
        self.change_state(SessionState.LOST)
        self._open_session(conn)
        self.change_state(SessionState.CONNECTED)

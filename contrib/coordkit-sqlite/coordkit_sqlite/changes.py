"""The change feed: one thread per database file in a process reads the ``changes`` table and tells
every store client of that file in this process what changed.

It looks every ``poll_interval`` whether anyone committed (``PRAGMA data_version``, which costs no
disk read), and at once when a client of this process commits (:meth:`ChangeFeed.nudge`). It reads
entries after the last one it saw; if writers trimmed the log past that point (this process was
stopped for a while), every subscriber re-reads what it watches instead.

It feeds this process's change feeds (``watch_tree``) too, from the ``feed`` table
(:mod:`coordkit_sqlite.treefeeds`); :meth:`ChangeFeed.sync` reads at once, on the caller's thread,
which is how a feed's ``flush`` covers every change committed before it.

It also notices the file being deleted or replaced under its clients (SQLite keeps using the old
file through open connections, which would split them from everyone who opens the path anew): its
subscribers then drop their connections and reopen the path, and re-read what they watch.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from typing import Protocol

from coordkit_sqlite.schema import connect, snapshot
from coordkit_sqlite.treefeeds import TreeFeeds

log = logging.getLogger("coordkit.store.sqlite")

READ_COUNT = 5_000
MAX_BACKOFF = 1.0

#: Kind and subject of one change: ``D``/``C`` and a path, or ``X`` and a session id.
Change = tuple[str, str]


class Subscriber(Protocol):
    def changed(self, changes: list[Change]) -> None:
        """Entries of the log, in commit order (called on the feed's thread)."""

    def resync(self) -> None:
        """Entries were missed: re-read everything watched."""

    def replaced(self) -> None:
        """The file at the path is not the one connections were opened on (or is gone)."""


class ChangeFeed:
    """Reads one file's change log for the subscribers of this process.

    The starting point is read when the feed is made, before any subscriber can register a watch,
    so nothing committed after a watch's first read is missed.
    """

    def __init__(self, path: str, *, poll_interval: float, busy_timeout: float):
        self.path = path
        self.poll_interval = poll_interval
        self._busy_timeout = busy_timeout
        self._subscribers: list[Subscriber] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        # One look at a time: the feed's thread, or a caller of sync().
        self._poll_lock = threading.Lock()
        self.trees = TreeFeeds(self.sync)
        self._identity: tuple[int, int] | None = _identity(path)
        self._conn: sqlite3.Connection | None = self._connect()
        self.position = self._newest(self._conn)
        self._version: int | None = None
        self._thread = threading.Thread(
            target=self._run, name=f"coordkit-sqlite-feed-{path}", daemon=True
        )
        self._thread.start()

    def _connect(self) -> sqlite3.Connection:
        return connect(self.path, busy_timeout=self._busy_timeout, read_only=True)

    @staticmethod
    def _newest(conn: sqlite3.Connection) -> int:
        return int(conn.execute("SELECT coalesce(max(id), 0) FROM changes").fetchone()[0])

    def subscribe(self, subscriber: Subscriber) -> None:
        """Add ``subscriber``, a client that has just opened the file now at the path. If that is
        not the file this feed reads (replaced since its last look), the feed switches first: a
        replacement that came before the client is not news to it (told, it would drop the
        connections it just opened and suspend a session that never lost the file)."""
        with self._poll_lock:
            try:
                identity: tuple[int, int] | None = _identity(self.path)
            except FileNotFoundError:
                identity = None
            if identity is not None and identity != self._identity:
                try:
                    self._switch(identity)
                except (sqlite3.Error, OSError) as exc:  # the feed's thread tries again
                    log.debug("%s: change feed: %s", self.path, exc)
                    self._close_connection()
            with self._lock:
                self._subscribers.append(subscriber)

    def unsubscribe(self, subscriber: Subscriber) -> None:
        with self._lock:
            if subscriber in self._subscribers:
                self._subscribers.remove(subscriber)

    def nudge(self) -> None:
        """Someone in this process committed: look now rather than at the next poll."""
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=10)

    # -- the feed thread
    def _run(self) -> None:
        backoff = self.poll_interval
        more = False
        while not self._stop.is_set():
            if not more:
                self._wake.wait(self.poll_interval)
                self._wake.clear()
            if self._stop.is_set():
                break
            try:
                with self._poll_lock:
                    more = self._poll_guarded()
                backoff = self.poll_interval
            except (sqlite3.Error, OSError):
                more = False
                self._stop.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF)
        with self._poll_lock:
            self._close_connection()

    def sync(self, timeout: float) -> bool:
        """Read the log and the feed now, on this thread, until nothing more is there; False if
        the file could not be read (or another look did not end within ``timeout``)."""
        if not self._poll_lock.acquire(timeout=max(0.0, timeout)):
            return False
        try:
            if self._stop.is_set():
                return False
            while self._poll_guarded():
                pass
            return True
        except (sqlite3.Error, OSError):
            return False
        finally:
            self._poll_lock.release()

    def _poll_guarded(self) -> bool:
        """:meth:`_poll`; a failure drops the connection (the file is unreachable for now: read
        on from the same point when it is back) and is raised again."""
        try:
            return self._poll()
        except (sqlite3.Error, OSError) as exc:
            log.debug("%s: change feed: %s", self.path, exc)
            self._close_connection()
            raise

    def _close_connection(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except sqlite3.Error:
                pass
            self._conn = None
            self._version = None

    def _poll(self) -> bool:
        """Read and dispatch new entries; True if there may be more right away."""
        try:
            identity: tuple[int, int] | None = _identity(self.path)
        except FileNotFoundError:
            identity = None
        if identity != self._identity:
            self._switch(identity)
        if identity is None:
            raise FileNotFoundError(f"{self.path} is gone")
        if self._conn is None:
            self._conn = self._connect()
        conn = self._conn
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        if version == self._version and not self.trees.waiting():
            return False
        with snapshot(conn):
            full_trees = self.trees.read(conn)
            trimmed = conn.execute("SELECT value FROM meta WHERE key = 'trimmed'").fetchone()[0]
            rows = conn.execute(
                "SELECT id, kind, subject FROM changes WHERE id > ? ORDER BY id LIMIT ?",
                (self.position, READ_COUNT),
            ).fetchall()
        full = len(rows) == READ_COUNT or full_trees
        if not full:
            self._version = version  # everything up to this version has been read
        missed = trimmed > self.position
        if rows:
            self.position = rows[-1][0]
        elif missed:
            self.position = trimmed
        changes = [(kind, subject) for _, kind, subject in rows]
        for subscriber in self._subscribers_now():
            try:
                if missed:
                    subscriber.resync()
                if changes:
                    subscriber.changed(changes)
            except Exception:
                log.exception("%s: change feed subscriber %r failed", self.path, subscriber)
        return full

    def _subscribers_now(self) -> list[Subscriber]:
        with self._lock:
            return list(self._subscribers)

    def _switch(self, identity: tuple[int, int] | None) -> None:
        """A different file (or none) is at the path now: read the new one from its newest entry,
        and have every subscriber drop its connections and re-read what it watches."""
        what = "deleted" if identity is None else "replaced"
        log.warning("%s: the database file was %s under its clients", self.path, what)
        self._close_connection()
        if identity is not None:
            self._conn = self._connect()
            self.position = self._newest(self._conn)
            self.trees.resync_all(self._conn)
        self._identity = identity
        for subscriber in self._subscribers_now():
            try:
                subscriber.replaced()
            except Exception:
                log.exception("%s: change feed subscriber %r failed", self.path, subscriber)


def _identity(path: str) -> tuple[int, int]:
    """Which file is at ``path`` (device and inode)."""
    info = os.stat(path)
    return info.st_dev, info.st_ino

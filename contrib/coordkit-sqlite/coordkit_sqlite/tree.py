"""ZooKeeper's node rules as SQL, inside one write transaction.

A :class:`Tx` runs on a connection that holds SQLite's write lock (``BEGIN IMMEDIATE``). Every
check reads the transaction's own state, so later ops of a multi see the effects of earlier ones;
a failure raises the store error and the caller rolls the SQL transaction (or savepoint) back, so a
failed op changes nothing. :meth:`Tx.finish` writes the zxid counter, the change log entries and
the change feed's rows (each create, set and delete with the state it wrote) of whatever committed.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

import attrs

from coordkit.errors import (
    BadVersionError,
    InvalidPathError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    StoreError,
)
from coordkit.store import ANY_VERSION, Check, Create, Delete, Op, SetData, Stat, paths

#: Columns of a node row that make its Stat (see :func:`stat_of`).
STAT_COLUMNS = "czxid, mzxid, pzxid, ctime, mtime, version, cversion, owner, length(data), children"

Row = tuple[Any, ...]

#: Columns of a ``feed`` row after its id, in order (see :data:`FEED_COLUMNS`).
FEED_COLUMNS = (
    "zxid, kind, path, data, czxid, mzxid, pzxid, ctime, mtime, version, cversion, owner, children"
)
#: Feed row kinds: TreeEventKind values.
CREATED, CHANGED, DELETED = "created", "changed", "deleted"


@attrs.frozen
class Retention:
    """What writers keep: the last ``changes`` entries of the change log (for watchers that fell
    behind) and the last ``feed`` changes of the change feed's history (to resume feeds)."""

    changes: int = attrs.field(validator=attrs.validators.ge(1))
    feed: int = attrs.field(validator=attrs.validators.ge(1))


def wall_ms() -> int:
    """Milliseconds since the epoch: node times and session expiry (one machine, one clock)."""
    return time.time_ns() // 1_000_000


def stat_of(row: Row) -> Stat:
    """A Stat from a row holding :data:`STAT_COLUMNS` in order (ACLs are not kept: aversion 0)."""
    return Stat(
        czxid=row[0],
        mzxid=row[1],
        pzxid=row[2],
        ctime=row[3],
        mtime=row[4],
        version=row[5],
        cversion=row[6],
        aversion=0,
        ephemeral_owner=row[7],
        data_length=row[8],
        num_children=row[9],
    )


def parent_of(path: str) -> str:
    """The parent a create of ``path`` goes under (a sequential ``/q/`` creates inside ``/q``)."""
    return paths.parent(path.rstrip("/") + "/x") if path.endswith("/") else paths.parent(path)


def _check_version(current: int, version: int, path: str) -> None:
    if version not in (ANY_VERSION, current):
        raise BadVersionError(f"expected version {version}, node is at {current}", path=path)


class Tx:
    """The writes of one SQL transaction; ops get zxids from :meth:`begin_op`.

    :param now_ms: the wall-clock time stamped on created and modified nodes.
    """

    def __init__(self, conn: sqlite3.Connection, now_ms: int):
        self.conn = conn
        self.now_ms = now_ms
        meta = dict(
            conn.execute(
                "SELECT key, value FROM meta WHERE key IN ('zxid', 'trimmed', 'feed_trimmed')"
            )
        )
        self._saved_zxid = self.last_zxid = int(meta["zxid"])
        self.trimmed = int(meta["trimmed"])
        self.feed_trimmed = int(meta["feed_trimmed"])
        self.zxid = self.last_zxid + 1
        self.events: list[tuple[int, str, str]] = []
        #: Rows for the ``feed`` table, in :data:`FEED_COLUMNS` order.
        self.feed: list[Row] = []

    # -- ops and their zxids
    def begin_op(self) -> tuple[int, int]:
        """Start an op (or a multi) with the next zxid; returns a mark for :meth:`undo_op`."""
        self.zxid = self.last_zxid + 1
        return len(self.events), len(self.feed)

    def end_op(self) -> None:
        """The op succeeded: its zxid is used if it changed anything."""
        if self.events and self.events[-1][0] == self.zxid:
            self.last_zxid = self.zxid

    def undo_op(self, mark: tuple[int, int]) -> None:
        """The op failed and its savepoint was rolled back: forget its events."""
        del self.events[mark[0] :]
        del self.feed[mark[1] :]

    def _event(self, kind: str, subject: str) -> None:
        self.events.append((self.zxid, kind, subject))

    def finish(self, kept: Retention) -> None:
        """Write the zxid counter, the change log and the feed; trim each to about what ``kept``
        says (in steps, not on every write: one DELETE per 1/16 of it)."""
        if self.last_zxid == self._saved_zxid:
            return
        conn = self.conn
        conn.execute("UPDATE meta SET value = ? WHERE key = 'zxid'", (self.last_zxid,))
        conn.executemany("INSERT INTO changes (zxid, kind, subject) VALUES (?, ?, ?)", self.events)
        cut = self._newest("changes") - kept.changes
        if cut > self.trimmed + max(1, kept.changes // 16):
            conn.execute("DELETE FROM changes WHERE id <= ?", (cut,))
            conn.execute("UPDATE meta SET value = ? WHERE key = 'trimmed'", (cut,))
        if self.feed:
            before = self._newest("feed")
            conn.executemany(
                f"INSERT INTO feed ({FEED_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                self.feed,
            )
            # Never this transaction's own rows: a feed that kept up gets them all, however many.
            cut = min(self._newest("feed") - kept.feed, before)
            if cut > self.feed_trimmed + max(1, kept.feed // 16):
                self._trim_feed(cut)

    def _newest(self, table: str) -> int:
        row = self.conn.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", (table,))
        found = row.fetchone()
        return 0 if found is None else int(found[0])

    def _trim_feed(self, cut: int) -> None:
        """Delete feed rows up to about ``cut``, whole transactions only: every change after the
        new floor stays, so a feed resumes exactly from any position at or after it."""
        conn = self.conn
        row = conn.execute("SELECT zxid FROM feed WHERE id > ? ORDER BY id LIMIT 1", (cut,))
        kept_zxid = int(row.fetchone()[0])
        first = conn.execute("SELECT min(id) FROM feed WHERE zxid = ?", (kept_zxid,)).fetchone()
        last_gone = int(first[0]) - 1
        if last_gone <= self.feed_trimmed:
            return  # one transaction holds the rows to cut: it stays whole
        conn.execute("DELETE FROM feed WHERE id <= ?", (last_gone,))
        conn.execute("UPDATE meta SET value = ? WHERE key = 'feed_trimmed'", (last_gone,))
        conn.execute("UPDATE meta SET value = ? WHERE key = 'feed_floor'", (kept_zxid - 1,))

    # -- reads inside the transaction
    def _row(self, path: str, columns: str) -> Row | None:
        row: Row | None = self.conn.execute(
            f"SELECT {columns} FROM nodes WHERE path = ?", (path,)
        ).fetchone()
        return row

    def existing(self, path: str, version: int) -> Row:
        """``(version, children)`` of ``path``, which must exist at ``version``."""
        row = self._row(path, "version, children")
        if row is None:
            raise NoNodeError("no node", path=path)
        _check_version(row[0], version, path)
        return row

    # -- the ops
    def create(self, path: str, data: bytes, owner: int, sequential: bool) -> str:
        parent = parent_of(path)
        row = self._row(parent, "owner, creations")
        if row is None:
            raise NoNodeError(f"parent {parent} does not exist", path=path)
        if row[0]:
            raise NoChildrenForEphemeralsError(f"parent {parent} is ephemeral", path=path)
        if sequential:
            path = paths.sequential_name(path, row[1])
        z, now = self.zxid, self.now_ms
        try:
            self.conn.execute(
                "INSERT INTO nodes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0, ?, 0, 0)",
                (path, parent, paths.basename(path), data, z, z, z, now, now, owner),
            )
        except sqlite3.IntegrityError:
            raise NodeExistsError("node already exists", path=path) from None
        self.conn.execute(
            "UPDATE nodes SET cversion = cversion + 1, creations = creations + 1, "
            "children = children + 1, pzxid = ? WHERE path = ?",
            (z, parent),
        )
        self._event("D", path)
        self._event("C", parent)
        self.feed.append((z, CREATED, path, data, z, z, z, now, now, 0, 0, owner, 0))
        return path

    def create_parents(self, path: str) -> None:
        """Create every missing ancestor of ``path`` as an empty persistent node."""
        for ancestor in paths.ancestors(path.rstrip("/") + ("/x" if path.endswith("/") else "")):
            if self._row(ancestor, "1") is None:
                self.create(ancestor, b"", 0, False)

    def set(self, path: str, data: bytes, version: int) -> Stat:
        row = self._row(path, "version, czxid, pzxid, ctime, cversion, owner, children")
        if row is None:
            raise NoNodeError("no node", path=path)
        _check_version(row[0], version, path)
        new_version = row[0] + 1
        self.conn.execute(
            "UPDATE nodes SET data = ?, version = ?, mzxid = ?, mtime = ? WHERE path = ?",
            (data, new_version, self.zxid, self.now_ms, path),
        )
        self._event("D", path)
        z, now = self.zxid, self.now_ms
        self.feed.append(
            (
                z,
                CHANGED,
                path,
                data,
                row[1],
                z,
                row[2],
                row[3],
                now,
                new_version,
                row[4],
                row[5],
                row[6],
            )
        )
        return Stat(
            czxid=row[1],
            mzxid=z,
            pzxid=row[2],
            ctime=row[3],
            mtime=now,
            version=new_version,
            cversion=row[4],
            aversion=0,
            ephemeral_owner=row[5],
            data_length=len(data),
            num_children=row[6],
        )

    def delete(self, path: str, version: int, *, recursive: bool = False) -> None:
        """A single delete, of the whole subtree if ``recursive``."""
        _, children = self.existing(path, version)
        if path == paths.ROOT:
            raise StoreError("the root node cannot be deleted", path=path)
        if recursive:
            for descendant in self._descendants(path):
                self.remove(descendant)
        elif children:
            raise NotEmptyError(f"node has {children} children", path=path)
        self.remove(path)

    def delete_in_multi(self, path: str, version: int) -> None:
        """A delete inside a multi-op (as ZooKeeper's multi: never recursive)."""
        _, children = self.existing(path, version)
        if children:
            raise NotEmptyError(f"node has {children} children", path=path)
        if path == paths.ROOT:
            raise InvalidPathError("the root node has no parent", path=path)
        self.remove(path)

    def remove(self, path: str) -> None:
        """Remove a node whose children are gone, and count it in its parent."""
        parent = paths.parent(path)
        self.conn.execute("DELETE FROM nodes WHERE path = ?", (path,))
        self.conn.execute(
            "UPDATE nodes SET children = children - 1, cversion = cversion + 1, pzxid = ? "
            "WHERE path = ?",
            (self.zxid, parent),
        )
        self._event("D", path)
        self._event("C", path)
        self._event("C", parent)
        self.feed.append((self.zxid, DELETED, path, *(None,) * 10))

    def _descendants(self, path: str) -> list[str]:
        """Every descendant of ``path``, deepest first: in byte order the paths under ``/a`` are
        exactly those between ``/a/`` and ``/a0`` (``0`` follows ``/``)."""
        found = [
            row[0]
            for row in self.conn.execute(
                "SELECT path FROM nodes WHERE path > ? AND path < ?", (f"{path}/", f"{path}0")
            )
        ]
        found.sort(key=lambda p: p.count("/"), reverse=True)
        return found

    def run(self, op: Op, session_id: int, *, in_multi: bool) -> Any:
        """Apply one op; returns its result as :meth:`MetadataStore.commit` does."""
        match op:
            case Create(path=path, data=data, ephemeral=ephemeral, sequential=sequential):
                return self.create(path, data, session_id if ephemeral else 0, sequential)
            case SetData(path=path, data=data, version=version):
                return self.set(path, data, version)
            case Delete(path=path, version=version):
                if in_multi:
                    self.delete_in_multi(path, version)
                else:
                    self.delete(path, version)
                return None
            case Check(path=path, version=version):
                self.existing(path, version)
                return None
        raise TypeError(f"not a store operation: {op!r}")

    # -- sessions
    def end_session(self, session_id: int, *, expired: bool) -> bool:
        """Delete a session's ephemeral nodes (in one zxid, as ZooKeeper's closeSession) and its
        row; ``expired`` adds an ``X`` event so its owner learns at once. Returns whether the
        session still existed."""
        listed = self.conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,)).rowcount
        owned = [
            row[0]
            for row in self.conn.execute(
                "SELECT path FROM nodes WHERE owner = ? ORDER BY path", (session_id,)
            )
        ]
        if not (listed or owned):
            return False
        self.begin_op()
        for path in owned:  # ephemerals have no children: any order works
            self.remove(path)
        if expired:
            self._event("X", str(session_id))
        self.end_op()
        return True

    def reap(self, now_ms: int, limit: int = 100) -> int:
        """End sessions whose expiry time has passed (any client may); returns how many."""
        due = [
            row[0]
            for row in self.conn.execute(
                "SELECT id FROM sessions WHERE expires_ms < ? ORDER BY expires_ms LIMIT ?",
                (now_ms, limit),
            )
        ]
        for session_id in due:
            self.end_session(session_id, expired=True)
        return len(due)

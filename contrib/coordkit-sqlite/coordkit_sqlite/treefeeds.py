"""Change feeds (:meth:`~coordkit.store.MetadataStore.watch_tree`) from the ``feed`` table.

Every write transaction appends its creates, sets and deletes to the table with the zxid it
committed at and the state each wrote (:mod:`coordkit_sqlite.tree`), whichever process wrote it.
The change feed thread of a file in this process (:class:`~coordkit_sqlite.changes.ChangeFeed`)
reads the rows after the last one it read and hands each :class:`TreeFeeds` subscription those at
or below its path, in row order — commit order, since rows are appended under the write lock.

A subscription remembers the last row it was given (``after_id``). While its client is cut off or
has lost its session it is given nothing; once the client is connected again it goes on from that
row, as if nothing happened — unless writers trimmed the table past it meanwhile
(``feed_history``), in which case it gets a RESYNC at the newest zxid and goes on from there.
``since=`` resumes the same way from a zxid the table still covers (``feed_floor``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from sqlite3 import Connection

from coordkit.store import Stat, TreeCallback, TreeEvent, TreeEventKind
from coordkit.store.changefeed import TreeFeed, at_or_below
from coordkit.store.watches import EventThread
from coordkit_sqlite.schema import snapshot
from coordkit_sqlite.tree import FEED_COLUMNS, Row

#: Feed rows read per look (a feed far behind catches up in several).
READ_COUNT = 5_000

#: (kind, path, position, data, stat): one change as a feed delivers it.
Change = tuple[TreeEventKind, str, int, bytes | None, Stat | None]
#: Reads the file once more, then waits for the feeds of this process to be handed what it
#: found (``timeout`` seconds at most); False if that failed or timed out.
Sync = Callable[[float], bool]

_KINDS = {kind.value: kind for kind in TreeEventKind}


def change_of(row: Row) -> Change:
    """A change from a feed row holding :data:`~coordkit_sqlite.tree.FEED_COLUMNS` in order."""
    zxid, kind, path, data = row[0], _KINDS[row[1]], row[2], row[3]
    if data is None:
        return kind, path, zxid, None, None
    stat = Stat(
        czxid=row[4],
        mzxid=row[5],
        pzxid=row[6],
        ctime=row[7],
        mtime=row[8],
        version=row[9],
        cversion=row[10],
        aversion=0,
        ephemeral_owner=row[11],
        data_length=len(data),
        num_children=row[12],
    )
    return kind, path, zxid, bytes(data), stat


def to_events(changes: list[Change]) -> list[TreeEvent]:
    return [TreeEvent(kind, path, pos, data, stat) for kind, path, pos, data, stat in changes]


def _below(root: str) -> tuple[str, tuple[str, ...]]:
    """An SQL condition on ``path`` (and its parameters): at or below ``root``. In byte order the
    paths under ``/a`` are exactly those between ``/a/`` and ``/a0`` (``0`` follows ``/``)."""
    if root == "/":
        return "1", ()
    return "(path = ? OR (path > ? AND path < ?))", (root, f"{root}/", f"{root}0")


class SqliteTreeFeed(TreeFeed[Change]):
    """A feed whose :meth:`flush` first has the file read once more, so that after a write of
    this client returns, a flush covers every change committed before it."""

    def __init__(
        self,
        path: str,
        callback: TreeCallback,
        events: EventThread,
        sync: Sync,
        on_cancel: Callable[[TreeFeed[Change]], None],
    ):
        super().__init__(path, callback, events, to_events, on_cancel)
        self._sync = sync

    def flush(self, timeout: float = 10.0) -> bool:
        if self.cancelled:
            return super().flush(timeout)
        deadline = time.monotonic() + timeout
        synced = self._sync(timeout)
        # On the event thread (a callback flushing) this delivers what waits, whatever the read.
        delivered = super().flush(max(0.0, deadline - time.monotonic()))
        return synced and delivered


class _Subscription:
    __slots__ = ("after_id", "behind", "connected", "feed", "owner", "root")

    def __init__(
        self,
        feed: SqliteTreeFeed,
        root: str,
        owner: object,
        connected: Callable[[], bool],
        after_id: int,
    ):
        self.feed = feed
        self.root = root
        self.owner = owner
        self.connected = connected
        self.after_id = after_id  # the last feed row handed to it (or skipped as not its own)
        self.behind = False  # its client was not connected when rows came


class TreeFeeds:
    """The change feeds of one file in this process."""

    def __init__(self, sync: Sync):
        self._sync = sync
        # Held while rows are read and handed out, and while a feed starts: a feed's starting
        # row and the rows the reader hands it then never overlap or leave a gap.
        self._lock = threading.RLock()
        self._subscriptions: list[_Subscription] = []

    def subscribe(
        self,
        conn: Connection,
        *,
        root: str,
        callback: TreeCallback,
        events: EventThread,
        since: int | None,
        owner: object,
        connected: Callable[[], bool],
    ) -> SqliteTreeFeed:
        """Start a feed on ``root``: the changes after ``since`` if the table still covers it,
        else RESYNC at the newest zxid; then every change as the reader finds it."""
        with self._lock:
            feed = SqliteTreeFeed(root, callback, events, self._sync, self._cancelled)
            with snapshot(conn):
                now, floor, top = _position(conn)
                replay: list[Change] | None = None
                # since=0 (no change seen yet) gets RESYNC, as on the other stores: reading the
                # subtree is cheaper than replaying a file's whole history.
                if since is not None and since > 0 and floor <= since <= now:
                    where, params = _below(root)
                    replay = [
                        change_of(row)
                        for row in conn.execute(
                            f"SELECT {FEED_COLUMNS} FROM feed WHERE zxid > ? AND id <= ? "
                            f"AND {where} ORDER BY id",
                            (since, top, *params),
                        )
                    ]
            if replay is None:
                feed.push([(TreeEventKind.RESYNC, root, now, None, None)])
            elif replay:
                feed.push(replay)
            self._subscriptions.append(_Subscription(feed, root, owner, connected, top))
            return feed

    def forget(self, owner: object) -> None:
        """``owner`` (a store client) closed: end its feeds."""
        with self._lock:
            feeds = [s.feed for s in self._subscriptions if s.owner is owner]
        for feed in feeds:
            feed.cancel()

    def _cancelled(self, feed: TreeFeed[Change]) -> None:
        with self._lock:
            self._subscriptions = [s for s in self._subscriptions if s.feed is not feed]

    def waiting(self) -> bool:
        """Whether a feed missed rows while its client was away and the client is back (it must
        be given them even if nothing was written since)."""
        with self._lock:
            return any(s.behind and s.connected() for s in self._subscriptions)

    def read(self, conn: Connection) -> bool:
        """Hand every feed whose client is connected the rows after its last one (the caller
        holds a read transaction on ``conn``); True if there may be more right away."""
        with self._lock:
            ready = []
            for sub in self._subscriptions:
                if sub.connected():
                    ready.append(sub)
                else:
                    sub.behind = True
            if not ready:
                return False
            now, _floor, top = _position(conn)
            trimmed = int(
                conn.execute("SELECT value FROM meta WHERE key = 'feed_trimmed'").fetchone()[0]
            )
            for sub in ready:
                sub.behind = False
                if sub.after_id < trimmed:  # rows it lacks were trimmed: it must re-read
                    sub.feed.push([(TreeEventKind.RESYNC, sub.root, now, None, None)])
                    sub.after_id = top
            low = min(sub.after_id for sub in ready)
            rows = conn.execute(
                f"SELECT id, {FEED_COLUMNS} FROM feed WHERE id > ? ORDER BY id LIMIT ?",
                (low, READ_COUNT),
            ).fetchall()
            if not rows:
                return False
            last = rows[-1][0]
            for sub in ready:
                root, after = sub.root, sub.after_id
                mine = [
                    change_of(row[1:])
                    for row in rows
                    if row[0] > after and at_or_below(row[3], root)
                ]
                if mine:
                    sub.feed.push(mine)
                sub.after_id = max(after, last)
            return len(rows) == READ_COUNT

    def resync_all(self, conn: Connection) -> None:
        """Another file is at the path now (replaced, restored): every feed re-reads, and goes on
        from the new file's newest row."""
        with self._lock:
            with snapshot(conn):
                now, _floor, top = _position(conn)
            for sub in self._subscriptions:
                sub.feed.push([(TreeEventKind.RESYNC, sub.root, now, None, None)])
                sub.after_id = top
                sub.behind = False


def _position(conn: Connection) -> tuple[int, int, int]:
    """The zxid counter, the feed's floor and its newest row id (in the caller's transaction)."""
    meta = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('zxid', 'feed_floor')"))
    top = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'feed'").fetchone()
    return int(meta["zxid"]), int(meta["feed_floor"]), 0 if top is None else int(top[0])

"""The sqlite store client: one ZooKeeper-style session on a database file.

Reads are single statements or short read transactions; every write is one ``BEGIN IMMEDIATE``
transaction that also renews the session and appends its changes to the log (see
:mod:`coordkit_sqlite.tree`). Watches go through the shared :class:`~coordkit.store.watches.WatchHub`,
fed by the change feed (:mod:`coordkit_sqlite.changes`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from coordkit.errors import (
    ConnectionLossError,
    NoNodeError,
    SessionExpiredError,
    StoreClosedError,
    StoreError,
)
from coordkit.store import (
    ANY_VERSION,
    Check,
    ChildrenCallback,
    Create,
    DataCallback,
    Delete,
    KeptSessionStore,
    Op,
    SessionState,
    SetData,
    Stat,
    StoreCharacteristics,
    TreeCallback,
    TreeWatch,
    Watch,
    check_data,
    describe_op,
    paths,
)
from coordkit.store.changefeed import check_since
from coordkit.store.urls import StoreURL
from coordkit.store.watches import EventThread, WatchHub
from coordkit.support.clock import Clock, SystemClock
from coordkit_sqlite.changes import Change
from coordkit_sqlite.config import CHARACTERISTICS, SqliteConfig
from coordkit_sqlite.files import ConnectionPool, SharedFile
from coordkit_sqlite.schema import open_file, snapshot, translate
from coordkit_sqlite.sessions import SqliteSessionKeeper, touch_session
from coordkit_sqlite.tree import STAT_COLUMNS, Tx, stat_of

T = TypeVar("T")

#: Ops of one apply() per SQL transaction: one commit (one fsync) per batch, and the write lock is
#: released between batches so heartbeats of other clients get through.
APPLY_BATCH = 500
#: Paths of one get_many() per read transaction.
READ_BATCH = 1000


class SqliteStore(KeptSessionStore):
    """A client session on a SQLite file emulating ZooKeeper.

    With ``read_only`` it opens the file read-only and holds no session (a session is a row
    written to the file): a missing file is a :class:`NoNodeError`, every write method raises
    ``ReadOnlyError``, and watches work as usual; the session id is 0.

    Besides the store contract, :meth:`disconnect` cuts the client off the file (calls fail with
    ``ConnectionLossError``, the session expires if the cut outlasts its timeout) and
    :meth:`reconnect` lets it back, as a network partition does to a ZooKeeper client.
    """

    characteristics: StoreCharacteristics = CHARACTERISTICS
    _keeper: SqliteSessionKeeper

    def __init__(
        self,
        url: StoreURL,
        config: SqliteConfig,
        *,
        read_only: bool = False,
        clock: Clock | None = None,
    ):
        self.url = url
        self.config = config
        self.read_only = read_only
        self._where = f"sqlite store {config.path}"
        first = open_file(config.path, busy_timeout=config.busy_timeout, read_only=read_only)
        self._pool = ConnectionPool(config, read_only=read_only)
        self._pool.adopt(first)
        try:
            self._shared = SharedFile.acquire(config)
        except (sqlite3.Error, OSError) as exc:  # the file went away since it was opened
            self._pool.close()
            if isinstance(exc, sqlite3.Error):
                raise translate(exc, self._where) from None
            raise ConnectionLossError(f"{self._where}: {exc}") from None
        self._events = EventThread(f"coordkit-sqlite-events-{config.path}")
        self._hub = WatchHub(self._events, self._read_data, self._read_children)
        self._clock: Clock = clock or SystemClock()
        self._keeper = SqliteSessionKeeper(
            name=config.path,
            shared=self._shared,
            pool=self._pool,
            clock=self._clock,
            timeout=config.session_timeout,
            kept=config.retention,
            events=self._events,
            hub=self._hub,
            read_only=read_only,
        )
        try:
            self._keeper.open()
        except BaseException as exc:
            self._events.stop()
            self._shared.release()
            self._pool.close()
            if isinstance(exc, sqlite3.Error):
                raise translate(exc, self._where) from None
            raise
        self._shared.feed.subscribe(self)

    # -- session
    def close(self) -> None:
        if self._keeper.state is SessionState.CLOSED:
            return
        self._shared.feed.unsubscribe(self)
        self._shared.feed.trees.forget(self)
        self._keeper.close()
        self._events.stop()
        self._pool.close()
        self._shared.release()

    def flush_events(self, timeout: float = 10.0) -> bool:
        """Wait until every watch and listener callback queued so far has run."""
        return self._events.flush(timeout)

    def disconnect(self) -> None:
        """Cut this client off the file (its session lives on until it times out)."""
        self._require_open()
        self._pool.disconnect()
        self._keeper.connection_failed()

    def reconnect(self) -> None:
        """Let the client back; it reports CONNECTED (or LOST, then a new session) and re-reads
        every watched node."""
        self._require_open()
        self._pool.reconnect()
        self._keeper.check_now()

    # -- plumbing
    def _require_open(self) -> None:
        if self._keeper.state is SessionState.CLOSED:
            raise StoreClosedError("store client is closed")

    def _require_connected(self, path: str | None) -> None:
        state = self._keeper.state
        if state is SessionState.CLOSED:
            raise StoreClosedError("store client is closed", path=path)
        if state is SessionState.SUSPENDED:
            raise ConnectionLossError(f"{self._where}: not connected", path=path)

    def _failed(self, exc: sqlite3.Error, path: str | None) -> StoreError:
        if self._keeper.state is SessionState.CLOSED:
            return StoreClosedError("store client is closed", path=path)
        error = translate(exc, self._where, path)
        if isinstance(error, ConnectionLossError):
            self._keeper.connection_failed()
            self._keeper.check_now()
        return error

    def _read(self, path: str | None, work: Callable[[sqlite3.Connection], T]) -> T:
        self._require_connected(path)
        try:
            with self._pool.borrow() as conn:
                return work(conn)
        except ConnectionLossError:
            self._keeper.connection_failed()
            raise
        except sqlite3.Error as exc:
            raise self._failed(exc, path) from None

    def _write(self, path: str | None, work: Callable[[Tx, int], T]) -> T:
        """``work(tx, session_id)`` in one write transaction of this session (which it renews)."""
        self._require_connected(path)
        session_id = self._keeper.session_id
        timeout_ms = self._keeper.timeout_ms

        def in_session(tx: Tx) -> T:
            if not touch_session(tx, session_id, timeout_ms):
                raise SessionExpiredError(f"session {session_id:#x} has expired", path=path)
            return work(tx, session_id)

        try:
            with self._pool.borrow() as conn:
                return self._shared.write(
                    conn, in_session, clock=self._clock, kept=self.config.retention
                )
        except SessionExpiredError:
            self._keeper.check_now()
            raise
        except ConnectionLossError:
            self._keeper.connection_failed()
            raise
        except sqlite3.Error as exc:
            raise self._failed(exc, path) from None

    # -- single operations
    def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> str:
        self.check_writable("create", path)
        paths.validate(path, sequential=sequential)
        data = check_data(path, data)

        def create(tx: Tx, session_id: int) -> str:
            tx.begin_op()
            if make_parents:
                tx.create_parents(path)
            created = tx.create(path, data, session_id if ephemeral else 0, sequential)
            tx.end_op()
            return created

        return self._write(path, create)

    def get(self, path: str) -> tuple[bytes, Stat]:
        paths.validate(path)
        found = self._read(path, lambda conn: _get(conn, path))
        if found is None:
            raise NoNodeError("no node", path=path)
        return found

    def exists(self, path: str) -> Stat | None:
        paths.validate(path)
        row = self._read(
            path,
            lambda conn: conn.execute(
                f"SELECT {STAT_COLUMNS} FROM nodes WHERE path = ?", (path,)
            ).fetchone(),
        )
        return None if row is None else stat_of(row)

    def children(self, path: str) -> list[str]:
        found = self._children(path)
        if found is None:
            raise NoNodeError("no node", path=path)
        return found[0]

    def _children(self, path: str) -> tuple[list[str], Stat] | None:
        paths.validate(path)

        def read(conn: sqlite3.Connection) -> tuple[list[str], Stat] | None:
            with snapshot(conn):
                row = conn.execute(
                    f"SELECT {STAT_COLUMNS} FROM nodes WHERE path = ?", (path,)
                ).fetchone()
                if row is None:
                    return None
                names = [
                    r[0] for r in conn.execute("SELECT name FROM nodes WHERE parent = ?", (path,))
                ]
            return sorted(names), stat_of(row)

        return self._read(path, read)

    def set(self, path: str, data: bytes, version: int = ANY_VERSION) -> Stat:
        self.check_writable("set", path)
        paths.validate(path)
        data = check_data(path, data)

        def set_data(tx: Tx, _session_id: int) -> Stat:
            tx.begin_op()
            stat = tx.set(path, data, int(version))
            tx.end_op()
            return stat

        return self._write(path, set_data)

    def delete(self, path: str, version: int = ANY_VERSION, *, recursive: bool = False) -> None:
        self.check_writable("delete", path)
        paths.validate(path)

        def delete(tx: Tx, _session_id: int) -> None:
            tx.begin_op()
            tx.delete(path, int(version), recursive=recursive)
            tx.end_op()

        self._write(path, delete)

    # -- multi-operations
    def commit(self, ops: Sequence[Op]) -> list[Any]:
        self.check_writable("commit a transaction")
        ops = _checked(ops)
        if not ops:
            self._require_connected(None)
            return []

        def multi(tx: Tx, session_id: int) -> list[Any]:
            tx.begin_op()
            results: list[Any] = []
            for index, op in enumerate(ops):
                try:
                    results.append(tx.run(op, session_id, in_multi=True))
                except StoreError as exc:
                    exc.op_index = index
                    exc.message = f"{exc.message} [transaction op {index}: {describe_op(op)}]"
                    raise
            tx.end_op()
            return results

        return self._write(None, multi)

    def get_many(self, paths_: Sequence[str]) -> list[tuple[bytes, Stat] | StoreError]:
        self._require_connected(None)
        results: list[tuple[bytes, Stat] | StoreError] = []
        wanted: list[tuple[int, str]] = []
        for index, path in enumerate(paths_):
            try:
                wanted.append((index, paths.validate(path)))
                results.append(NoNodeError("no node", path=path, op_index=index))
            except StoreError as exc:
                exc.op_index = index
                results.append(exc)

        def read(conn: sqlite3.Connection, batch: list[tuple[int, str]]) -> None:
            with snapshot(conn):
                for index, path in batch:
                    found = _get(conn, path)
                    if found is not None:
                        results[index] = found

        for start in range(0, len(wanted), READ_BATCH):
            batch = wanted[start : start + READ_BATCH]
            self._read(None, lambda conn, batch=batch: read(conn, batch))  # type: ignore[misc]
        return results

    def apply(self, ops: Sequence[Op]) -> list[Any]:
        self.check_writable("apply operations")
        ops = list(ops)
        results: list[Any] = [None] * len(ops)
        todo: list[tuple[int, Op]] = []
        for index, op in enumerate(ops):
            try:
                _checked([op])
                todo.append((index, op))
            except StoreError as exc:
                exc.op_index = index
                results[index] = exc

        def run_batch(tx: Tx, session_id: int, batch: list[tuple[int, Op]]) -> None:
            # Each op is its own transaction (its own zxid); a savepoint undoes a failed one.
            for index, op in batch:
                mark = tx.begin_op()
                tx.conn.execute("SAVEPOINT op")
                try:
                    results[index] = tx.run(op, session_id, in_multi=False)
                except StoreError as exc:
                    tx.conn.execute("ROLLBACK TO op")
                    tx.undo_op(mark)
                    exc.op_index = index
                    results[index] = exc
                else:
                    tx.end_op()
                tx.conn.execute("RELEASE op")

        for start in range(0, len(todo), APPLY_BATCH):
            batch = todo[start : start + APPLY_BATCH]
            try:
                self._write(None, lambda tx, sid, batch=batch: run_batch(tx, sid, batch))  # type: ignore[misc]
            except StoreError as exc:
                # Not atomic: batches done stand; this one and every later one get the error.
                for index, op in todo[start:]:
                    results[index] = type(exc)(exc.message, path=op.path, op_index=index)
                break
        return results

    # -- watches
    def watch_data(self, path: str, callback: DataCallback) -> Watch:
        paths.validate(path)
        self._require_open()
        return self._hub.add_data_watch(path, callback)

    def watch_children(self, path: str, callback: ChildrenCallback) -> Watch:
        paths.validate(path)
        self._require_open()
        return self._hub.add_children_watch(path, callback)

    def watch_tree(
        self, path: str, callback: TreeCallback, *, since: int | None = None
    ) -> TreeWatch:
        """The change feed, from the file's ``feed`` table (see :mod:`coordkit_sqlite.treefeeds`):
        every create, set and delete at or below ``path`` by any process, at the zxid it was
        committed at, with the state it wrote. ``since`` resumes exactly while the table still
        holds what followed it (the last ``feed_history`` changes); a cut connection or a lost
        session resumes where the feed stood."""
        paths.validate(path)
        check_since(since)
        self._require_open()
        feeds = self._shared.feed.trees
        return self._read(
            path,
            lambda conn: feeds.subscribe(
                conn,
                root=path,
                callback=callback,
                events=self._events,
                since=since,
                owner=self,
                connected=self._connected,
            ),
        )

    def _connected(self) -> bool:
        return self._keeper.state is SessionState.CONNECTED and not self._pool.offline

    def _read_data(self, path: str) -> tuple[bytes, Stat] | None:
        try:
            return self.get(path)
        except NoNodeError:
            return None

    def _read_children(self, path: str) -> tuple[list[str], Stat] | None:
        return self._children(path)

    # -- from the change feed (its thread)
    def changed(self, changes: list[Change]) -> None:
        if self._keeper.state is not SessionState.CONNECTED:
            return  # the keeper re-reads every watch when the client is back
        wanted: dict[Change, tuple[str, str]] = {}
        for kind, path in self._hub.watched():
            # A node's creation or deletion (D) matters to a children watch on it too.
            wanted[("D", path)] = ("data", path)
            if kind == "children":
                wanted[("C", path)] = ("children", path)
        own = str(self._keeper.session_id)
        due: list[tuple[str, str]] = []
        for change in changes:
            if change[0] == "X":
                if change[1] == own:
                    self._keeper.check_now()
                continue
            hit = wanted.get(change)
            if hit is not None:
                due.append(hit)
        if due:
            self._hub.notify_many(due)

    def resync(self) -> None:
        self._hub.resync()

    def replaced(self) -> None:
        # Connections still read the file that was at the path: reopen it and check the session
        # there (the keeper reports what it finds); watches are re-read when it is back.
        self._pool.refresh()
        self._keeper.connection_failed()
        self._keeper.check_now()


def _get(conn: sqlite3.Connection, path: str) -> tuple[bytes, Stat] | None:
    row = conn.execute(f"SELECT data, {STAT_COLUMNS} FROM nodes WHERE path = ?", (path,)).fetchone()
    return None if row is None else (bytes(row[0]), stat_of(row[1:]))


def _checked(ops: Sequence[Op]) -> list[Op]:
    """Validate every op (path, value, type) before anything is written; errors name the op."""
    out = list(ops)
    for index, op in enumerate(out):
        try:
            if not isinstance(op, Create | SetData | Delete | Check):
                raise TypeError(f"not a store operation: {op!r}")
            paths.validate(op.path, sequential=isinstance(op, Create) and op.sequential)
            if isinstance(op, Create | SetData):
                check_data(op.path, op.data)
        except StoreError as exc:
            exc.op_index = index
            raise
    return out

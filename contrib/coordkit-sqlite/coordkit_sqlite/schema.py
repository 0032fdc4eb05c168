"""The database file: its tables, opening connections to it, and mapping SQLite's failures.

Tables:

* ``nodes`` — one row per node: ZooKeeper's ``Stat`` fields, the data, the parent and name (for
  children listings) and ``creations``, the children created so far (ZooKeeper numbers sequential
  children by creations; ``cversion`` also counts deletions);
* ``sessions`` — one row per live session with the wall-clock millisecond it expires at unless a
  heartbeat (or any write of the session) pushes it on;
* ``changes`` — the change log watchers read: kind ``D`` (a node's data or existence), ``C`` (its
  children) or ``X`` (a session expired), the subject, and the zxid of the transaction;
* ``feed`` — the change feed's history (``watch_tree``): every create, set and delete with the zxid
  of its transaction and the state it wrote (data and ``Stat`` fields; none for a delete);
* ``meta`` — the zxid counter, how far the change log has been trimmed (``trimmed``: the last
  entry deleted), and the same for the feed (``feed_trimmed``: the last row deleted;
  ``feed_floor``: every change at a later zxid is still in the feed).

The file is marked with SQLite's ``application_id`` so a store never writes into a database that is
not one of its own, and ``user_version`` names the layout.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import time
from collections.abc import Iterator
from urllib.parse import quote

from coordkit.errors import ConnectionLossError, NoNodeError, StoreError

#: "cksq" — marks a coordkit store in the database header.
APPLICATION_ID = 0x636B7371
LAYOUT_VERSION = 2
#: Layouts this code upgrades in place (1: before the change feed's table).
UPGRADABLE = (1,)

#: The change feed's history, added by layout 2.
FEED_DDL = (
    """CREATE TABLE feed (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        zxid INTEGER NOT NULL,
        kind TEXT NOT NULL,
        path TEXT NOT NULL,
        data BLOB,
        czxid INTEGER,
        mzxid INTEGER,
        pzxid INTEGER,
        ctime INTEGER,
        mtime INTEGER,
        version INTEGER,
        cversion INTEGER,
        owner INTEGER,
        children INTEGER
    )""",
    "CREATE INDEX feed_by_zxid ON feed (zxid)",
)

DDL = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL)",
    """CREATE TABLE nodes (
        path TEXT PRIMARY KEY NOT NULL,
        parent TEXT NOT NULL,
        name TEXT NOT NULL,
        data BLOB NOT NULL,
        czxid INTEGER NOT NULL,
        mzxid INTEGER NOT NULL,
        pzxid INTEGER NOT NULL,
        ctime INTEGER NOT NULL,
        mtime INTEGER NOT NULL,
        version INTEGER NOT NULL,
        cversion INTEGER NOT NULL,
        owner INTEGER NOT NULL,
        children INTEGER NOT NULL,
        creations INTEGER NOT NULL
    )""",
    "CREATE INDEX nodes_by_parent ON nodes (parent)",
    "CREATE INDEX nodes_by_owner ON nodes (owner) WHERE owner <> 0",
    """CREATE TABLE sessions (
        id INTEGER PRIMARY KEY NOT NULL,
        timeout_ms INTEGER NOT NULL,
        expires_ms INTEGER NOT NULL,
        pid INTEGER NOT NULL
    )""",
    "CREATE INDEX sessions_by_expiry ON sessions (expires_ms)",
    """CREATE TABLE changes (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        zxid INTEGER NOT NULL,
        kind TEXT NOT NULL,
        subject TEXT NOT NULL
    )""",
    *FEED_DDL,
    "INSERT INTO meta (key, value) VALUES ('zxid', 0), ('trimmed', 0), ('feed_trimmed', 0), "
    "('feed_floor', 0)",
    """INSERT INTO nodes VALUES ('/', '', '', x'', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)""",
    f"PRAGMA application_id = {APPLICATION_ID}",
    f"PRAGMA user_version = {LAYOUT_VERSION}",
)

#: File systems whose locks SQLite cannot rely on (the SQLite FAQ: "do not use SQLite on a network
#: file system"); WSL's Windows drives (9p) included.
NETWORK_FILE_SYSTEMS = frozenset(
    {"nfs", "nfs4", "cifs", "smb3", "smbfs", "ncpfs", "afs", "9p", "fuse.sshfs", "ceph",
     "glusterfs", "fuse.glusterfs", "lustre", "gpfs"}
)  # fmt: skip
_MOUNT_ESCAPE = re.compile(r"\\([0-7]{3})")

#: SQLite's words for a lock it could not get in time, or a file it cannot reach: the store is
#: unreachable for now (ConnectionLossError), not broken.
_UNREACHABLE = (
    "locked",
    "busy",
    "disk i/o",
    "unable to open",
    "readonly database",
    "attempt to write a readonly",
)


def unreachable(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and any(w in text for w in _UNREACHABLE)


def translate(exc: sqlite3.Error, where: str, path: str | None = None) -> StoreError:
    """A store error for a failure of SQLite on the file ``where``."""
    if unreachable(exc):
        return ConnectionLossError(f"{where}: {exc}", path=path)
    return StoreError(f"{where}: SQLite failed: {exc}", path=path)


def connect(
    path: str, *, busy_timeout: float, read_only: bool, create: bool = False
) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit) that any thread may use.

    Read-only connections open the file with ``mode=ro``: SQLite writes nothing through them (it
    may create the ``-wal`` and ``-shm`` files holding its lock state if no other connection has).
    Only ``create`` makes a missing file; otherwise a file removed meanwhile is an error.
    """
    mode = "ro" if read_only else "rwc" if create else "rw"
    target = f"file:{quote(path)}?mode={mode}"
    conn = sqlite3.connect(
        target, uri=True, timeout=busy_timeout, isolation_level=None, check_same_thread=False
    )
    try:
        # FULL: a commit is on disk before it returns (WAL's NORMAL may lose the last commits
        # in a power failure). A per-connection setting.
        conn.execute("PRAGMA synchronous = FULL")
    except BaseException:
        conn.close()
        raise
    return conn


def file_system_type(path: str, mounts: str | None = None) -> str | None:
    """The type of the file system holding ``path`` (from ``/proc/self/mounts``, or ``mounts``);
    ``None`` where the mount table cannot be read (not Linux)."""
    if mounts is None:
        try:
            with open("/proc/self/mounts", encoding="utf-8", errors="replace") as table:
                mounts = table.read()
        except OSError:
            return None
    folder = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    best: tuple[str, str] | None = None
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = _MOUNT_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), fields[1])
        inside = folder == point or folder.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best[0])):
            best = (point, fields[2])
    return None if best is None else best[1]


def open_file(path: str, *, busy_timeout: float, read_only: bool) -> sqlite3.Connection:
    """Open ``path`` as a coordkit store, creating the file and its tables unless ``read_only``.

    :raises NoNodeError: a read-only open of a file that does not exist (nothing is created).
    :raises StoreError: the file is not a coordkit store, or cannot be opened; one line naming it.
    """
    where = f"sqlite store {path}"
    if os.path.isdir(path):
        raise StoreError(f"{where}: is a directory, not a database file")
    exists = os.path.exists(path)
    if read_only and not exists:
        raise NoNodeError(f"{where}: no such file (nothing was created)")
    if not exists:
        folder = os.path.dirname(path) or "."
        if not os.path.isdir(folder):
            raise StoreError(f"{where}: directory {folder} does not exist")
    kind = file_system_type(path)
    if kind in NETWORK_FILE_SYSTEMS:
        raise StoreError(
            f"{where}: is on a network file system ({kind}), whose locks SQLite cannot rely on; "
            "a sqlite store must be on a local disk"
        )
    try:
        conn = connect(path, busy_timeout=busy_timeout, read_only=read_only, create=not read_only)
    except sqlite3.Error as exc:
        raise translate(exc, where) from None
    try:
        _prepare(conn, where, read_only=read_only)
    except sqlite3.DatabaseError as exc:
        conn.close()
        if "not a database" in str(exc) or "malformed" in str(exc):
            raise StoreError(f"{where}: not a SQLite database ({exc})") from None
        raise translate(exc, where) from None
    except BaseException:
        conn.close()
        raise
    return conn


def _prepare(conn: sqlite3.Connection, where: str, *, read_only: bool) -> None:
    """Check the file is a coordkit store of a layout this code reads; set up a new one, or
    upgrade an older one."""
    layout = _layout(conn, where)
    if layout in UPGRADABLE:
        if read_only:
            raise StoreError(
                f"{where}: a coordkit store of layout {layout} (an older coordkit-sqlite); open "
                f"it once for writing with this version to upgrade it to layout {LAYOUT_VERSION}"
            )
        _check_wal(conn, where, read_only=False)
        with immediate(conn):
            if _layout(conn, where) in UPGRADABLE:  # nobody upgraded it while we waited
                _upgrade(conn, where)
        return
    if layout is not None:
        _check_wal(conn, where, read_only=read_only)
        return
    if read_only:
        raise StoreError(f"{where}: an empty file, not yet a coordkit store (nothing was created)")
    # WAL first (it cannot change inside a transaction): readers then never block the writer.
    _check_wal(conn, where, read_only=False)
    with immediate(conn):
        if _layout(conn, where) is None:  # nobody set it up while we waited for the lock
            for statement in DDL:
                conn.execute(statement)


def _upgrade(conn: sqlite3.Connection, where: str) -> None:
    """Layout 1 → 2: add the change feed's table, its history starting now. Refused while
    sessions of other clients live: those are of an older coordkit-sqlite (this one would have
    upgraded the file), and their writes would be missing from the feed."""
    now_ms = time.time_ns() // 1_000_000
    live = conn.execute("SELECT count(*) FROM sessions WHERE expires_ms >= ?", (now_ms,))
    count = int(live.fetchone()[0])
    if count:
        raise StoreError(
            f"{where}: a coordkit store of layout 1 in use by {count} live session(s) of an "
            f"older coordkit-sqlite; close them (or wait for their timeout) and open it again "
            f"to upgrade it to layout {LAYOUT_VERSION}"
        )
    for statement in FEED_DDL:
        conn.execute(statement)
    zxid = conn.execute("SELECT value FROM meta WHERE key = 'zxid'").fetchone()[0]
    conn.execute(
        "INSERT INTO meta (key, value) VALUES ('feed_trimmed', 0), ('feed_floor', ?)", (zxid,)
    )
    conn.execute(f"PRAGMA user_version = {LAYOUT_VERSION}")


def _layout(conn: sqlite3.Connection, where: str) -> int | None:
    """The layout version of a coordkit store; ``None`` for an empty database."""
    application_id = conn.execute("PRAGMA application_id").fetchone()[0]
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if application_id == APPLICATION_ID:
        if version != LAYOUT_VERSION and version not in UPGRADABLE:
            raise StoreError(
                f"{where}: a coordkit store of layout {version}; this coordkit-sqlite reads "
                f"layout {LAYOUT_VERSION}"
            )
        return int(version)
    tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master LIMIT 4")]
    if application_id != 0 or tables:
        listed = f" (it holds {', '.join(map(repr, tables[:3]))}...)" if tables else ""
        raise StoreError(
            f"{where}: a SQLite database of another application, not a coordkit store{listed}; "
            "nothing was changed"
        )
    return None


def _check_wal(conn: sqlite3.Connection, where: str, *, read_only: bool) -> None:
    mode = conn.execute("PRAGMA journal_mode" if read_only else "PRAGMA journal_mode = WAL")
    if str(mode.fetchone()[0]).lower() != "wal":
        raise StoreError(
            f"{where}: SQLite cannot use WAL mode on this file (a network file system?); "
            "a sqlite store must be on a local disk"
        )


@contextlib.contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[None]:
    """A write transaction: SQLite's write lock is taken at BEGIN (waiting up to the busy timeout),
    so it never fails half-way for want of the lock; anything raised rolls it back."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    try:
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


@contextlib.contextmanager
def snapshot(conn: sqlite3.Connection) -> Iterator[None]:
    """A read transaction: every query inside sees one committed state."""
    conn.execute("BEGIN")
    try:
        yield
    finally:
        if conn.in_transaction:
            conn.execute("COMMIT")

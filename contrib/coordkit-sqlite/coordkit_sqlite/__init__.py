"""coordkit-sqlite: a coordkit metadata store in one SQLite file, shared by the processes of one
machine.

``sqlite:///path/to/file.db?session_timeout=10&poll_interval=0.02&busy_timeout=5&changes_kept=10000&feed_history=10000``
(see :mod:`coordkit_sqlite.config`). ZooKeeper's data model on the standard library's sqlite3:
nodes with ZooKeeper's version counters and sequential numbering, sessions with heartbeats that any
client expires once overdue (deleting their ephemeral nodes), watches across processes through a
change log, atomic multi-ops as one SQL transaction. The file is created on first use; opened with
``read_only=True`` nothing is created and a missing file is an error.

Loading the plugin imports nothing but coordkit: ``sqlite3`` (which a Python may be built without)
is imported when a store is opened.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from coordkit import hookimpl
from coordkit.errors import MissingDependencyError
from coordkit.store.urls import StoreURL

if TYPE_CHECKING:
    from coordkit_sqlite.store import SqliteStore

__all__ = ["expire_session", "open_sqlite_store"]
__version__ = "0.1.0"


def _require_sqlite3() -> None:
    try:
        import sqlite3  # noqa: F401
    except ImportError:
        raise MissingDependencyError(
            "the sqlite:// store needs Python's sqlite3 module, which this Python was built "
            "without (rebuild it with the SQLite headers, e.g. libsqlite3-dev, installed)"
        ) from None


def open_sqlite_store(url: StoreURL, *, read_only: bool = False, **options: Any) -> SqliteStore:
    """Open ``sqlite:///path``; options (override the URL's query): ``session_timeout``,
    ``poll_interval``, ``busy_timeout``, ``changes_kept``, ``feed_history``; and ``clock`` (a
    :class:`coordkit.support.clock.Clock`: the time nodes are stamped with and sessions time out by;
    every client of the file must read the same time, so only a clock that follows the system's
    wall clock may span processes)."""
    _require_sqlite3()
    from coordkit_sqlite.config import SqliteConfig
    from coordkit_sqlite.store import SqliteStore

    clock = options.pop("clock", None)
    return SqliteStore(url, SqliteConfig.from_url(url, options), read_only=read_only, clock=clock)


def expire_session(url: str | StoreURL, session_id: int) -> bool:
    """End ``session_id`` of the store at ``url`` as its timeout would (any client may): its
    ephemeral nodes are deleted and its owner sees LOST, then a new session. Returns False if it
    had ended already."""
    _require_sqlite3()
    from coordkit_sqlite.config import SqliteConfig
    from coordkit_sqlite.sessions import expire_in_file

    parsed = url if isinstance(url, StoreURL) else StoreURL.parse(url)
    return expire_in_file(SqliteConfig.from_url(parsed), session_id)


@hookimpl
def coordkit_register_stores(register: Any) -> None:
    register("sqlite", open_sqlite_store)

"""``sqlite:///path/to/file.db`` URLs → the settings of a store, and what the store guarantees.

The path after ``sqlite://`` is absolute (``sqlite:///tmp/x.db`` is ``/tmp/x.db``, and so is
``sqlite:////tmp/x.db``); there is no host, as the file must be on this machine. Query
parameters (open options of the same names override them):

* ``session_timeout`` — seconds a session outlives its last heartbeat (default 10);
* ``poll_interval`` — seconds between looks at the change log for other processes' writes
  (default 0.02; writes from this process are seen at once);
* ``busy_timeout`` — seconds a write waits for SQLite's lock before failing with
  ``ConnectionLossError`` (default 5);
* ``changes_kept`` — change-log entries kept for watchers that fell behind (default 10,000);
* ``feed_history`` — changes kept in the change feed's history, with the values they wrote: a
  ``watch_tree`` resumes exactly from a position within it, and gets RESYNC beyond it (default
  10,000).

Numbers go through :func:`coordkit.store.urls.parse_seconds` / :func:`~coordkit.store.urls.parse_int`, so a bad
value is an :class:`~coordkit.errors.InvalidURLError` naming the parameter, the value and the range.
"""

from __future__ import annotations

import os
from typing import Any

import attrs

from coordkit.errors import InvalidURLError
from coordkit.store import StoreCharacteristics
from coordkit.store.urls import StoreURL, parse_int, parse_seconds
from coordkit_sqlite.tree import Retention

DEFAULT_SESSION_TIMEOUT = 10.0
DEFAULT_POLL_INTERVAL = 0.02
DEFAULT_BUSY_TIMEOUT = 5.0
DEFAULT_CHANGES_KEPT = 10_000
DEFAULT_FEED_HISTORY = 10_000
MAX_CHANGES_KEPT = 100_000_000
#: Polling faster than this only burns CPU; slower than this makes watches useless.
POLL_RANGE = (0.001, 10.0)

PARAMS = ("session_timeout", "poll_interval", "busy_timeout", "changes_kept", "feed_history")

CHARACTERISTICS = StoreCharacteristics(
    linearizable_writes=True,
    durable=True,
    shared_across_processes=True,
    ordered_change_feed=True,
    change_feed_history=True,
    notes=(
        "one SQLite file in WAL mode with synchronous=FULL: shared by the processes of one "
        "machine only (a local file system; never NFS or SMB, whose locks SQLite cannot trust)"
    ),
)


@attrs.frozen
class SqliteConfig:
    """What a ``sqlite://`` URL asks for (checked before anything is opened)."""

    path: str
    session_timeout: float = DEFAULT_SESSION_TIMEOUT
    poll_interval: float = DEFAULT_POLL_INTERVAL
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT
    changes_kept: int = DEFAULT_CHANGES_KEPT
    feed_history: int = DEFAULT_FEED_HISTORY

    @classmethod
    def from_url(cls, url: StoreURL, options: dict[str, Any] | None = None) -> SqliteConfig:
        """:param options: open options, overriding the URL's parameters of the same names."""
        where = url.where
        if url.scheme != "sqlite":
            raise InvalidURLError(f"{where}: expected sqlite:///path/to/file.db")
        if url.username is not None or url.password is not None:
            raise InvalidURLError(f"{where}: a sqlite store takes no user name or password")
        if url.hosts:
            raise InvalidURLError(
                f"{where}: a sqlite store is a file on this machine and takes no host; "
                "expected sqlite:///path/to/file.db (three slashes, then an absolute path)"
            )
        path = url.path
        if not path or path == "/" or path.endswith("/"):
            raise InvalidURLError(f"{where}: expected sqlite:///path/to/file.db (a file name)")
        unknown = sorted(set(url.params) - set(PARAMS))
        if unknown:
            raise InvalidURLError(
                f"{where}: unknown parameter(s) {', '.join(map(repr, unknown))}; "
                f"known: {', '.join(PARAMS)}"
            )
        settings: dict[str, Any] = dict(url.params)
        unknown_options = sorted(set(options or {}) - set(PARAMS))
        if unknown_options:
            raise TypeError(f"sqlite store: unknown option(s) {', '.join(unknown_options)}")
        settings.update({k: v for k, v in (options or {}).items() if v is not None})
        return cls(
            # One leading slash: sqlite:////tmp/x.db (SQLAlchemy's absolute form) is /tmp/x.db too,
            # and a "//" would be read as a host in the file: URI SQLite is given.
            path="/" + os.path.normpath(path).lstrip("/"),
            session_timeout=_seconds(settings, "session_timeout", DEFAULT_SESSION_TIMEOUT, where),
            poll_interval=_seconds(
                settings, "poll_interval", DEFAULT_POLL_INTERVAL, where, *POLL_RANGE
            ),
            busy_timeout=_seconds(settings, "busy_timeout", DEFAULT_BUSY_TIMEOUT, where),
            changes_kept=_count(settings, "changes_kept", DEFAULT_CHANGES_KEPT, where),
            feed_history=_count(settings, "feed_history", DEFAULT_FEED_HISTORY, where),
        )

    @property
    def retention(self) -> Retention:
        return Retention(changes=self.changes_kept, feed=self.feed_history)


def _count(settings: dict[str, Any], name: str, default: int, where: str) -> int:
    raw = settings.get(name)
    if raw is None:
        return default
    return parse_int(where, name, raw, low=1, high=MAX_CHANGES_KEPT)


def _seconds(
    settings: dict[str, Any],
    name: str,
    default: float,
    where: str,
    low: float | None = None,
    high: float | None = None,
) -> float:
    raw = settings.get(name)
    if raw is None:
        return default
    bounds: dict[str, float] = {}
    if low is not None:
        bounds["low"] = low
    if high is not None:
        bounds["high"] = high
    return parse_seconds(where, name, raw, **bounds)

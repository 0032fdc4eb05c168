"""The sqlite store under coordkit's conformance kit (``coordkit.testing``): a backend with every
fault hook the kit knows, on files in a temporary directory.

Two configurations run the whole suite: the defaults, and a change log trimmed to a few entries
and polled slowly, so watchers keep falling behind the trim and must catch up by re-reading.
"""

from __future__ import annotations

import itertools
import os
import shutil
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coordkit.store import MetadataStore, SessionState
from coordkit.testing import StoreBackend
from coordkit_sqlite import expire_session

#: The trimmed log keeps the change feed's default history: the kit's resumption tests replay
#: several changes, which a history of three would (correctly) answer with RESYNC.
CONFIGURATIONS = {
    "defaults": "",
    "trimmed-log": "?changes_kept=3&poll_interval=0.05",
}


class ShiftedClock:
    """The system clock, moved forward by :meth:`advance` (it keeps running in between, so a
    session in another process, on the plain system clock, reads the same time until then)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.offset

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000 + int(self.offset * 1000)

    def advance(self, seconds: float) -> None:
        self.offset += seconds


class SqliteBackend(StoreBackend):
    """One database file per test; each test's sessions keep time by a clock of their own."""

    name = "sqlite"

    def __init__(self, directory: Path, query: str = ""):
        self.directory = directory
        self.query = query
        self._ids = itertools.count(1)
        self._clocks: dict[str, ShiftedClock] = {}
        self._opened: list[MetadataStore] = []

    def new_url(self) -> str:
        url = f"sqlite://{self.directory}/{next(self._ids)}.db{self.query}"
        self._clocks[url] = ShiftedClock()
        return url

    def open(self, url: str, **options: Any) -> MetadataStore:
        options.setdefault("clock", self._clocks.setdefault(url, ShiftedClock()))
        store = super().open(url, **options)
        self._opened.append(store)
        return store

    def expire(self, store: MetadataStore) -> None:
        expire_session(store.url, store.session_id)

    def disconnect(self, store: MetadataStore) -> None:
        store.disconnect()  # type: ignore[attr-defined]

    def reconnect(self, store: MetadataStore) -> None:
        store.reconnect()  # type: ignore[attr-defined]

    def advance_clock(self, seconds: float) -> None:
        for clock in self._clocks.values():
            clock.advance(seconds)

    def restart(self) -> None:
        """A crash of every process using the files, then a new start on what they left.

        A kill -9 leaves the database, its write-ahead log and its lock state (``-shm``) on disk
        as they are, with no checkpoint. Here: every client of this process is cut off (closing
        its connections while a read-only witness holds the file, so none of them checkpoints),
        the three files are copied as they are onto new inodes (no lock of a running process
        holds them), and the clients come back: SQLite rebuilds its state from the log, as
        after a crash, and keeps exactly the transactions that were committed.
        """
        live = [s for s in self._opened if s.state is not SessionState.CLOSED]
        files = sorted({s.config.path for s in live})  # type: ignore[attr-defined]
        witnesses = []
        for path in files:
            witness = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            witness.execute("SELECT count(*) FROM sqlite_master").fetchone()
            witnesses.append(witness)
        for store in live:
            store.disconnect()  # type: ignore[attr-defined]
        for path in files:
            for name in (path, f"{path}-wal", f"{path}-shm"):
                if os.path.exists(name):
                    shutil.copyfile(name, f"{name}.crashed")
                    os.replace(f"{name}.crashed", name)
        for witness in witnesses:
            witness.close()
        for store in live:
            store.reconnect()  # type: ignore[attr-defined]

    def close(self) -> None:
        for store in self._opened:
            if store.state is not SessionState.CLOSED:
                store.close()


@pytest.fixture(scope="session", params=sorted(CONFIGURATIONS))
def coordkit_store_backend(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SqliteBackend]:
    backend = SqliteBackend(tmp_path_factory.mktemp("sqlite"), CONFIGURATIONS[request.param])
    yield backend
    backend.close()

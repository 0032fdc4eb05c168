"""The shared change feed and a file replaced under its clients."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from coordkit.store import SessionState
from coordkit.store.urls import StoreURL
from coordkit_sqlite import open_sqlite_store


def test_a_client_opened_after_the_file_was_replaced_is_not_told_of_the_replacement(
    tmp_path: Path,
) -> None:
    """A crash-restart copies the files onto new inodes; a client opened on the new file before
    the process's feed looked again must not be suspended when the feed finds the replacement
    (seen in CI: a session readable right after a restart, then "not connected")."""
    path = tmp_path / "replaced.db"
    # The feed's thread does not look by itself within the test.
    url = StoreURL.parse(f"sqlite://{path}?poll_interval=10")
    first = open_sqlite_store(url)
    second = None
    try:
        first.create("/a", b"kept")
        for name in (str(path), f"{path}-wal", f"{path}-shm"):
            if os.path.exists(name):
                shutil.copyfile(name, f"{name}.copy")
                os.replace(f"{name}.copy", name)
        second = open_sqlite_store(url)
        heard: list[SessionState] = []
        second.add_listener(heard.append)
        second._shared.feed.sync(5.0)  # the feed's next look
        second.flush_events()
        assert SessionState.SUSPENDED not in heard
        assert second.state is SessionState.CONNECTED
        assert second.get("/a")[0] == b"kept"
    finally:
        if second is not None:
            second.close()
        first.close()

"""What the memory store offers beyond the contract: named servers, a controllable clock."""

from __future__ import annotations

import pytest

from coordkit.errors import InvalidURLError, SessionExpiredError
from coordkit.plugins import open_store
from coordkit.store import SessionState
from coordkit.support.clock import ManualClock
from coordkit_memory import MemoryServer, MemoryStore
from harness.waiting import wait_for


def test_named_servers_are_shared_and_private_ones_are_not() -> None:
    a = open_store("memory://shared-test")
    b = open_store("memory://shared-test")
    private = open_store("memory://")
    try:
        a.create("/x", b"1")
        assert b.get("/x")[0] == b"1"
        assert private.exists("/x") is None
    finally:
        for s in (a, b, private):
            s.close()
        MemoryServer.discard("shared-test")
    fresh = open_store("memory://shared-test")
    assert fresh.exists("/x") is None
    fresh.close()


def test_a_tree_that_lives_for_its_sessions_is_forgotten_when_the_last_one_ends() -> None:
    url = "memory://sessions-lifetime?lifetime=sessions"
    first, second = open_store(url), open_store(url)
    first.create("/kept", b"1")
    first.close()
    assert second.get("/kept")[0] == b"1"  # one session is left: the tree stays
    second.close()
    fresh = open_store(url)
    try:
        assert fresh.exists("/kept") is None
    finally:
        fresh.close()


def test_a_tree_that_lives_for_the_process_outlives_its_sessions() -> None:
    store = open_store("memory://process-lifetime?lifetime=process")
    store.create("/kept", b"1")
    store.close()
    again = open_store("memory://process-lifetime")
    try:
        assert again.get("/kept")[0] == b"1"
    finally:
        again.close()
        MemoryServer.discard("process-lifetime")


def test_an_unknown_lifetime_is_refused_naming_the_url_and_the_choices() -> None:
    with pytest.raises(
        InvalidURLError, match=r"lifetime='forever' is not one of process, sessions"
    ):
        open_store("memory://x?lifetime=forever")


def test_disconnected_session_expires_when_the_clock_passes_its_timeout() -> None:
    clock = ManualClock()
    server = MemoryServer(clock=clock)
    owner = MemoryStore.connect(server, session_timeout=5.0)
    watcher = MemoryStore.connect(server)
    owner.create("/lease", b"", ephemeral=True)
    states: list[SessionState] = []
    owner.add_listener(states.append)
    owner.disconnect()
    clock.advance(4.9)
    assert watcher.exists("/lease") is not None  # within the timeout
    clock.advance(0.2)
    assert watcher.exists("/lease") is None
    owner.reconnect()
    wait_for(
        lambda: states[-2:] == [SessionState.LOST, SessionState.CONNECTED],
        what="LOST then CONNECTED",
    )
    owner.close()
    watcher.close()


def test_connected_sessions_never_expire_by_time() -> None:
    clock = ManualClock()
    server = MemoryServer(clock=clock)
    store = MemoryStore.connect(server, session_timeout=1.0)
    store.create("/e", b"", ephemeral=True)
    clock.advance(3600)
    assert store.exists("/e") is not None
    assert store.session_id in server.session_ids()
    store.close()


def test_timestamps_follow_the_servers_clock() -> None:
    clock = ManualClock(wall_ms=1_000)
    store = MemoryStore.connect(MemoryServer(clock=clock))
    store.create("/t", b"")
    clock.advance(2.5)
    stat = store.set("/t", b"x")
    assert (stat.ctime, stat.mtime) == (1_000, 3_500)
    store.close()


def test_expire_unknown_session_is_an_error() -> None:
    server = MemoryServer()
    with pytest.raises(SessionExpiredError):
        server.expire_session(12345)


@pytest.mark.parametrize("url", ["memory://name?bogus=1", "memory://host:1/path"])
def test_bad_memory_urls(url: str) -> None:
    with pytest.raises(InvalidURLError):
        open_store(url)


def test_unknown_option_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="colour"):
        open_store("memory://", colour="blue")


def test_changes_go_only_to_clients_watching_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server sends a change only to the clients that watch its path (a data change also to a
    children watch on the same path), so many idle sessions cost a commit nothing."""
    server = MemoryServer()
    watcher, idle = MemoryStore.connect(server), MemoryStore.connect(server)
    delivered: dict[str, list[tuple[str, str]]] = {"watcher": [], "idle": []}
    for name, client in (("watcher", watcher), ("idle", idle)):
        original = client._changed

        def spy(events: list[tuple[str, str]], _name: str = name, _orig: object = original) -> None:
            delivered[_name].extend(events)
            _orig(events)  # type: ignore[operator]

        monkeypatch.setattr(client, "_changed", spy)
    seen: list[object] = []
    data_watch = watcher.watch_data("/a", seen.append)
    kids: list[object] = []
    watcher.watch_children("/p", kids.append)
    watcher.flush_events()
    idle.create("/a", b"1")
    idle.create("/p", b"")  # a data event: the children watch on /p must hear of it
    idle.create("/unwatched", b"")
    wait_for(lambda: len(seen) == 2 and len(kids) == 2, what="the watches to fire")
    assert delivered["idle"] == []
    assert {path for _, path in delivered["watcher"]} == {"/a", "/p"}
    data_watch.cancel()
    delivered["watcher"].clear()
    idle.set("/a", b"2")
    assert delivered["watcher"] == []
    watcher.close()
    idle.set("/p", b"x")
    assert delivered["watcher"] == []
    idle.close()

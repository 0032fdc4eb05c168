"""Issue 18 on a real redis-server: the change stream is sharded by directory, the Lua scripts and
the client agree on the shards, a client reads the shards of what it watches and nothing else
(also after dropping a watch, and for a user who may not unblock clients), a session's writes
renew it, and the heartbeat reports its gap on the server's clock. Server-side faults: a shard
trimmed past a reader that is still connected, a shard lost while a client was cut off (the other
shards resume where they were), and a watch added while the server was unreachable."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from coordkit.plugins import get_plugin_manager
from coordkit.store import Create, MetadataStore, SessionState, SetData, Stat
from coordkit.store.watches import EventThread, WatchHub
from coordkit_redis.changes import ChangeFeed
from coordkit_redis.keys import KeySpace, shard_number
from coordkit_redis.scripts import SCRIPTS
from harness.proxy import TCPProxy
from harness.redis_server import RedisServer
from harness.waiting import wait_for


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    with RedisServer() as instance:
        yield instance


@pytest.fixture
def opened() -> Iterator[list[MetadataStore]]:
    stores: list[MetadataStore] = []
    yield stores
    for store in stores:
        store.close()


def open_store(opened: list[MetadataStore], url: str, **options: Any) -> Any:
    store = get_plugin_manager().store_for(url, **options)
    opened.append(store)
    return store


class Recorder:
    def __init__(self) -> None:
        self._data: list[bytes | None] = []
        self._lock = threading.Lock()

    def __call__(self, event: Any) -> None:
        with self._lock:
            self._data.append(event.data)

    def data(self) -> list[bytes | None]:
        with self._lock:
            return list(self._data)


def stream_events(admin: Any, key: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for _id, fields in admin.xrange(key):
        words = fields[b"e"].decode().split("\n")
        out.extend(zip(words[::2], words[1::2], strict=True))
    return out


def directories_in_distinct_shards(count: int, prefix: str) -> list[str]:
    found: dict[int, str] = {}
    i = 0
    while len(found) < count:
        directory = f"{prefix}{i}"
        found.setdefault(shard_number(directory), directory)
        i += 1
    return list(found.values())


def test_scripts_file_events_in_the_shard_the_client_computes(
    server: RedisServer, opened: list[MetadataStore]
) -> None:
    url = server.url(prefix="shards")
    store = open_store(opened, url)
    keys = KeySpace("shards")
    for directory in ("/plain", "/ünïcode", "/with space", "/a/b"):
        store.create(f"{directory}/x", b"1", make_parents=True)
        store.set(f"{directory}/x", b"2")
    with server.client() as admin:
        names = {key.decode() for key in admin.keys("*")}
        assert all(name.startswith("{shards}:") for name in names)  # one hash tag, one slot
        for directory in ("/plain", "/ünïcode", "/with space", "/a/b"):
            filed = stream_events(admin, keys.shard_of(directory))
            assert ("D", f"{directory}/x") in filed  # the node's events: under its parent
            assert ("C", directory) in filed  # its parent's children: under the parent itself
        everything = [e for name in names if ":log:" in name for e in stream_events(admin, name)]
        misfiled = [
            (kind, path)
            for name in names
            if ":log:" in name
            for kind, path in stream_events(admin, name)
            if name != keys.shard_of(path if kind == "C" else path.rsplit("/", 1)[0] or "/")
        ]
        assert everything
        assert not misfiled


def test_a_client_reads_the_shards_of_its_watches_and_not_the_writes_elsewhere(
    server: RedisServer, opened: list[MetadataStore]
) -> None:
    url = server.url(prefix="interest")
    watched, *elsewhere = directories_in_distinct_shards(6, "/d")
    writer = open_store(opened, url)
    watcher = open_store(opened, url)
    writer.create(f"{watched}/node", b"0", make_parents=True)
    for directory in elsewhere:
        writer.create(directory, b"")
        writer.apply([Create(f"{directory}/n{i}") for i in range(200)])
    seen = Recorder()
    watcher.watch_data(f"{watched}/node", seen)
    wait_for(lambda: seen.data() == [b"0"], what="the first read")
    feed = watcher.change_feed
    keys = KeySpace("interest")
    assert set(feed.positions) == {keys.expiries, keys.shard_of(watched)}
    before = feed.entries_read
    for round_ in range(5):
        for directory in elsewhere:
            writer.apply([SetData(f"{directory}/n{i}", b"%d" % round_) for i in range(200)])
    writer.set(f"{watched}/node", b"1")
    wait_for(lambda: seen.data()[-1:] == [b"1"], what="the watched change")
    # 25 bulk writes of 200 nodes elsewhere were not read; the watched directory's write was.
    assert feed.entries_read - before == 1


def test_a_dropped_watch_stops_the_reads_of_its_shard(
    server: RedisServer, opened: list[MetadataStore]
) -> None:
    url = server.url(prefix="drop")
    keys = KeySpace("drop")
    gone, kept = directories_in_distinct_shards(2, "/dir")
    writer = open_store(opened, url)
    watcher = open_store(opened, url)
    writer.create(f"{gone}/node", b"", make_parents=True)
    writer.create(f"{kept}/node", b"", make_parents=True)
    seen = Recorder()
    watch = watcher.watch_data(f"{gone}/node", lambda event: None)
    watcher.watch_data(f"{kept}/node", seen)
    assert keys.shard_of(gone) in watcher.change_feed.positions
    watch.cancel()
    writer.set(f"{gone}/node", b"wakes the reader, which drops the shard")
    wait_for(
        lambda: keys.shard_of(gone) not in watcher.change_feed.positions,
        what="the shard to be dropped",
    )
    before = watcher.change_feed.entries_read
    for i in range(20):
        writer.set(f"{gone}/node", b"%d" % i)
    writer.set(f"{kept}/node", b"last")
    wait_for(lambda: seen.data()[-1:] == [b"last"], what="the change that is still watched")
    assert watcher.change_feed.entries_read - before == 1


def test_watches_work_for_a_user_who_may_not_unblock_clients(
    server: RedisServer, opened: list[MetadataStore]
) -> None:
    """Without CLIENT UNBLOCK a new watch's shard is picked up after the reader's idle wait."""
    with server.client() as admin:
        admin.execute_command(
            "ACL", "SETUSER", "plain", "on", ">plain-Pw-1", "~*", "&*", "+@all", "-client"
        )
    url = server.url(prefix="noblock", username="plain", password="plain-Pw-1")
    writer = open_store(opened, url)
    watcher = open_store(opened, url)
    writer.create("/late/node", b"0", make_parents=True)
    seen = Recorder()
    watcher.watch_data("/late/node", seen)
    wait_for(lambda: seen.data() == [b"0"], what="the first read")
    writer.set("/late/node", b"1")
    wait_for(lambda: seen.data()[-1:] == [b"1"], what="the change, without CLIENT UNBLOCK")


# -- server-side faults -------------------------------------------------------------------------


class RecordingHub:
    """A watch hub whose re-reads are recorded instead of read (the feed is driven by hand)."""

    def __init__(self, watches: list[tuple[str, str]]) -> None:
        self.events = EventThread("test-shard-faults")
        self.hub = WatchHub(self.events, self._read, self._read)
        self.reads: list[str] = []
        for kind, path in watches:
            add = self.hub.add_data_watch if kind == "data" else self.hub.add_children_watch
            add(path, lambda event: None)
        self.events.flush()
        self.reads.clear()

    def _read(self, path: str) -> tuple[Any, Stat] | None:
        self.reads.append(path)
        return None

    def reread(self) -> list[str]:
        self.events.flush()
        return sorted(set(self.reads))


def test_a_reader_trimmed_past_while_connected_sees_the_gap(
    server: RedisServer, opened: list[MetadataStore]
) -> None:
    """A reader that falls more than a shard's length behind, without any reconnect, is told
    to re-read (XREAD itself skips trimmed entries silently)."""
    keys = KeySpace("gap")
    writer = open_store(opened, server.url(prefix="gap", stream_maxlen=5))
    writer.create("/w/node", b"", make_parents=True)
    recorder = RecordingHub([("data", "/w/node")])
    feed = ChangeFeed(keys, recorder.hub, lambda session: None, sessions=False)
    try:
        with server.client() as client:
            feed.start(client)
            assert set(feed.positions) == {keys.shard_of("/w")}
            writer.set("/w/node", b"near")
            assert feed.poll(client, 1) == (1, False)  # caught up: the next entry, no gap
            assert recorder.reread() == ["/w/node"]
            recorder.reads.clear()
            writer.create("/w/other", b"")
            for i in range(400):  # MAXLEN ~ trims whole nodes of 100 entries
                writer.set("/w/other", b"%d" % i)
            first_kept = client.xrange(keys.shard_of("/w"), count=1)[0][1][b"n"]
            assert int(first_kept) > 3, "the shard must be trimmed past the reader"
            read, missed = feed.poll(client, 1)
            assert missed
            assert 0 < read < 400
            # Reading on from there is gap-free again.
            writer.set("/w/node", b"after")
            assert feed.poll(client, 1) == (1, False)
            assert "/w/node" in recorder.reread()
    finally:
        recorder.events.stop()


def test_a_shard_lost_on_the_server_resyncs_and_the_others_resume(
    server: RedisServer, opened: list[MetadataStore]
) -> None:
    """While the client is cut off, one shard it reads is deleted on the server with changes it
    had not read (a server that lost data); the other shard's changes are read where it left."""
    url = server.url(prefix="lost")
    keys = KeySpace("lost")
    lost_dir, kept_dir = directories_in_distinct_shards(2, "/l")
    proxy = TCPProxy(server.host, server.port)
    try:
        writer = open_store(opened, url)
        watcher = open_store(opened, url.replace(f"{server.host}:{server.port}", proxy.address))
        writer.create(f"{lost_dir}/node", b"0", make_parents=True)
        writer.create(f"{kept_dir}/node", b"0", make_parents=True)
        lost, kept = Recorder(), Recorder()
        watcher.watch_data(f"{lost_dir}/node", lost)
        watcher.watch_data(f"{kept_dir}/node", kept)
        wait_for(lambda: lost.data() == [b"0"] and kept.data() == [b"0"], what="first reads")

        proxy.cut()
        wait_for(lambda: watcher.state is SessionState.SUSPENDED, what="SUSPENDED")
        writer.set(f"{lost_dir}/node", b"unread")
        writer.set(f"{kept_dir}/node", b"1")
        writer.set(f"{kept_dir}/node", b"2")
        with server.client() as admin:
            assert admin.delete(keys.shard_of(lost_dir)) == 1
        proxy.restore()

        wait_for(lambda: kept.data()[-1:] == [b"2"], what="the kept shard's changes")
        wait_for(lambda: lost.data()[-1:] == [b"unread"], what="a resync of the lost shard")
        assert watcher.state is SessionState.CONNECTED
        writer.set(f"{lost_dir}/node", b"later")
        wait_for(lambda: lost.data()[-1:] == [b"later"], what="the lost shard followed again")
    finally:
        for store in opened:  # before the proxy goes: their sessions end cleanly
            store.close()
        proxy.close()


def test_a_watch_added_while_the_server_is_unreachable_follows_its_shard_once_back(
    server: RedisServer, opened: list[MetadataStore]
) -> None:
    url = server.url(prefix="away")
    proxy = TCPProxy(server.host, server.port)
    try:
        writer = open_store(opened, url)
        watcher = open_store(opened, url.replace(f"{server.host}:{server.port}", proxy.address))
        writer.create("/away/node", b"0", make_parents=True)
        proxy.cut()
        wait_for(lambda: watcher.state is SessionState.SUSPENDED, what="SUSPENDED")
        seen = Recorder()
        watcher.watch_data("/away/node", seen)  # its shard cannot be looked up now
        writer.set("/away/node", b"while away")
        proxy.restore()
        wait_for(lambda: seen.data()[-1:] == [b"while away"], what="the read once back")
        assert KeySpace("away").shard_of("/away") in watcher.change_feed.positions
        writer.set("/away/node", b"after")
        wait_for(lambda: seen.data()[-1:] == [b"after"], what="a change read from its shard")
    finally:
        for store in opened:  # before the proxy goes: their sessions end cleanly
            store.close()
        proxy.close()


# -- sessions: scripts called directly, so that no heartbeat thread interferes --------------------


def run(admin: Any, keys: KeySpace, script: Any, *args: str) -> Any:
    admin.execute_command("SCRIPT", "LOAD", script.source)
    return admin.execute_command("EVALSHA", script.sha, 1, keys.zxid, keys.base, "100", *args)


def test_a_write_renews_its_session_as_a_request_renews_a_zookeeper_session(
    server: RedisServer,
) -> None:
    keys = KeySpace("renewal")
    session = "4503599627370497"
    with server.client() as admin:
        assert run(admin, keys, SCRIPTS.session_open, session, "2000") == 1
        for i in range(3):  # 3 x 1.2 s: past the 2 s timeout unless the writes renew it
            time.sleep(1.2)
            reply = run(admin, keys, SCRIPTS.ops, session, "e", "c", f"/n{i}", "", "")
            assert reply == f"P/n{i}".encode()
        assert admin.exists(keys.session(int(session)))


def test_the_heartbeat_reports_the_gap_since_the_last_renewal_on_the_servers_clock(
    server: RedisServer,
) -> None:
    keys = KeySpace("gaps")
    session = "4503599627370498"
    with server.client() as admin:
        assert run(admin, keys, SCRIPTS.session_open, session, "1000") == 1
        time.sleep(0.3)
        alive, gap = run(admin, keys, SCRIPTS.heartbeat, session, "1000")
        assert alive == 1
        assert 300 <= gap < 1000
        time.sleep(1.3)  # past the timeout: the session key is gone
        alive, gap = run(admin, keys, SCRIPTS.heartbeat, session, "1000")
        assert alive == 0
        assert gap >= 1300

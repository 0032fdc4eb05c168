"""The Redis change feed's tree stream beyond the store kit: the entry encoding (binary data), what a
store without feeds pays (nothing is appended), the marker that turns a period without
subscribers into a RESYNC, trimming (``tree_maxlen``), a gap in the entry numbers, and the state
each op of a multi wrote. On a real redis-server (the kit's StoreFeedTests cover the contract)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from coordkit.errors import InvalidURLError
from coordkit.plugins import get_plugin_manager
from coordkit.store import Create, SetData, Stat, TreeEventKind
from coordkit.store.watches import EventThread
from coordkit.testing.store import FeedRecorder
from coordkit_redis.keys import KeySpace
from coordkit_redis.treefeed import RedisTreeFeed, TreeFeeds, decode_entry
from harness.redis_server import RedisServer
from harness.waiting import wait_for

CREATED, CHANGED, DELETED, RESYNC = (
    TreeEventKind.CREATED,
    TreeEventKind.CHANGED,
    TreeEventKind.DELETED,
    TreeEventKind.RESYNC,
)


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    with RedisServer() as instance:
        yield instance


@pytest.fixture
def opened() -> Iterator[list[Any]]:
    stores: list[Any] = []
    yield stores
    for store in stores:
        store.close()


def open_store(opened: list[Any], url: str, **options: Any) -> Any:
    store = get_plugin_manager().store_for(url, **options)
    opened.append(store)
    return store


def stream_length(server: RedisServer, prefix: str) -> int:
    with server.client() as admin:
        return int(admin.xlen(KeySpace(prefix).tree))


def test_an_entry_carries_binary_data_and_every_op_of_its_transaction() -> None:
    fields = {
        b"k": b"csd",
        b"p": b"/a\n/b\n/c",
        b"s": b"7,7,7,1,1,0,0,0,3,0\n2,7,2,1,1,4,0,0,4,0\n",
        b"d": b"\n\x00\nxy\r\n",
    }
    (created, changed, deleted) = decode_entry(7, fields) or []
    assert created == (CREATED, "/a", 7, b"\n\x00\n", created[4])
    assert isinstance(created[4], Stat)
    assert created[4].data_length == 3
    assert changed[:4] == (CHANGED, "/b", 7, b"xy\r\n")
    assert changed[4] is not None
    assert changed[4].version == 4
    assert deleted == (DELETED, "/c", 7, None, None)
    assert decode_entry(9, {b"k": b"m", b"p": b"", b"s": b"", b"d": b""}) is None


def test_a_store_without_feeds_appends_nothing_and_closing_the_last_stops_it(
    server: RedisServer, opened: list[Any]
) -> None:
    url = server.url(prefix="cost")
    writer = open_store(opened, url)
    writer.create("/a", b"0")
    writer.apply([SetData("/a", b"%d" % i) for i in range(50)])
    assert stream_length(server, "cost") == 0, "nobody follows: no tree stream is written"
    follower = open_store(opened, url)
    seen = FeedRecorder()
    assert follower.watch_tree("/", seen).flush(10)
    writer.set("/a", b"followed")
    length = stream_length(server, "cost")
    assert length == 2  # the first subscriber's marker, then the set
    follower.close()
    writer.apply([SetData("/a", b"%d" % i) for i in range(50)])
    assert stream_length(server, "cost") == length, "after its close, writes stop recording"


def test_a_period_without_subscribers_is_a_gap_a_resume_cannot_replay(
    server: RedisServer, opened: list[Any]
) -> None:
    url = server.url(prefix="gap")
    writer = open_store(opened, url)
    writer.create("/t", b"")
    first = open_store(opened, url)
    seen = FeedRecorder()
    feed = first.watch_tree("/t", seen)
    writer.set("/t", b"1")
    assert feed.flush(10)
    mark = feed.position
    first.close()  # unregisters: nobody follows
    stat = writer.set("/t", b"2")  # not recorded
    again = FeedRecorder()
    resumed = writer.watch_tree("/t", again, since=mark)
    assert resumed.flush(10)
    assert [e.kind for e in again.events] == [RESYNC], "a change may be missing: re-read"
    assert again.events[0].position >= stat.mzxid


def test_an_expired_registration_stops_costing_writes_and_its_feed_resyncs(
    server: RedisServer, opened: list[Any]
) -> None:
    url = server.url(prefix="lease")
    writer = open_store(opened, url)
    writer.create("/t", b"")
    follower = open_store(opened, url)
    seen = FeedRecorder()
    feed = follower.watch_tree("/t", seen)
    assert feed.flush(10)
    keys = KeySpace("lease")
    with server.client() as admin:
        # The follower's lease ran out (a client starved or cut off for longer than it).
        admin.zadd(keys.tree_subscribers, {follower.tree_feeds.subscriber_id: 0})
    length = stream_length(server, "lease")
    writer.set("/t", b"unrecorded")
    assert stream_length(server, "lease") == length, "an expired registration costs no writes"
    # The reader's next renewal finds nobody registered: its marker makes the feed re-read.
    wait_for(lambda: [e.kind for e in seen.events] == [RESYNC, RESYNC], 20, "a RESYNC")
    writer.set("/t", b"recorded")
    assert feed.flush(10)
    assert [(e.kind, e.data) for e in seen.events[2:]] == [(CHANGED, b"recorded")]
    positions = [e.position for e in seen.events]
    assert positions == sorted(positions)


def test_a_resume_past_the_trimmed_history_opens_with_resync(
    server: RedisServer, opened: list[Any]
) -> None:
    url = server.url(prefix="trim")
    store = open_store(opened, url, tree_maxlen=10)
    store.create("/t", b"")
    seen = FeedRecorder()
    feed = store.watch_tree("/t", seen)
    store.set("/t", b"0")
    assert feed.flush(10)
    early = feed.position
    for i in range(1, 400):
        store.set("/t", b"%d" % i)
    assert feed.flush(10)
    assert stream_length(server, "trim") < 300, "the stream keeps about tree_maxlen zxids"
    assert (seen.events[-1].kind, seen.events[-1].data) == (CHANGED, b"399")
    late = feed.position
    again, recent = FeedRecorder(), FeedRecorder()
    assert store.watch_tree("/t", again, since=early).flush(10)
    assert [e.kind for e in again.events] == [RESYNC]
    store.set("/t", b"last")
    assert store.watch_tree("/t", recent, since=late).flush(10)
    assert [(e.kind, e.data) for e in recent.events] == [(CHANGED, b"last")]


def test_a_resume_inside_a_bulk_calls_entry_replays_only_what_followed(
    server: RedisServer, opened: list[Any]
) -> None:
    store = open_store(opened, server.url(prefix="bulk"))
    store.create("/t", b"")
    seen = FeedRecorder()
    feed = store.watch_tree("/t", seen)
    stats = store.apply([SetData("/t", b"%d" % i) for i in range(10)])  # one script: one entry
    assert feed.flush(10)
    assert [e.data for e in seen.events[1:]] == [b"%d" % i for i in range(10)]
    assert [e.position for e in seen.events[1:]] == [stat.mzxid for stat in stats]
    again = FeedRecorder()
    assert store.watch_tree("/t", again, since=stats[4].mzxid).flush(10)
    assert [(e.kind, e.data) for e in again.events] == [(CHANGED, b"%d" % i) for i in range(5, 10)]


def test_a_gap_in_the_entry_numbers_is_a_resync_before_what_follows() -> None:
    events = EventThread("tree-gap")
    seen = FeedRecorder()
    try:
        feeds: Any = type(
            "Feeds", (), {"cancelled": lambda self, feed: None, "wait_read": lambda *a: True}
        )()
        feed = RedisTreeFeed("/t", seen, events, feeds, (5, 40))
        stat = b"9,9,9,1,1,0,0,0,1,0"
        entry = {b"k": b"c", b"p": b"/t/a", b"s": stat, b"d": b"x"}
        TreeFeeds._hand(feed, [((5, 40), None), ((9, 43), decode_entry(9, entry))])
        assert feed.flush(10)
    finally:
        events.stop()
    assert [(e.kind, e.position) for e in seen.events] == [(RESYNC, 8), (CREATED, 9)]
    assert feed.after == (9, 43)


def test_each_op_of_a_multi_carries_the_state_it_wrote(
    server: RedisServer, opened: list[Any]
) -> None:
    store = open_store(opened, server.url(prefix="multi"))
    seen = FeedRecorder()
    feed = store.watch_tree("/", seen)
    done = store.commit([Create("/m", b"created"), SetData("/m", b"set")])
    assert feed.flush(10)
    created, changed = seen.events[1:]
    assert (created.kind, created.data, changed.kind, changed.data) == (
        CREATED,
        b"created",
        CHANGED,
        b"set",
    )
    assert created.stat is not None
    assert changed.stat is not None
    assert (created.stat.version, changed.stat.version) == (0, 1)
    assert created.position == changed.position == done[1].mzxid == changed.stat.mzxid


def test_tree_maxlen_is_checked(server: RedisServer) -> None:
    with pytest.raises(InvalidURLError, match="tree_maxlen"):
        get_plugin_manager().store_for(server.url(prefix="bad") + "&tree_maxlen=0")

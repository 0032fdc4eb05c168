"""Change feeds (``watch_tree``) below the contract suite: the value objects and their merge rule,
the base class's refusal, the delivery machinery, and the memory store's bounded history (the
contract suite covers feeds end to end on every backend)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import attrs
import pytest

from coordkit.engine.instrument import InstrumentedStore
from coordkit.store import (
    MetadataStore,
    Stat,
    TreeEvent,
    TreeEventKind,
    UnsupportedError,
)
from coordkit.store.changefeed import TreeFeed, at_or_below
from coordkit.store.urls import StoreURL
from coordkit.store.watches import EventThread
from coordkit_memory import MemoryServer, MemoryStore, open_memory_store

CREATED, CHANGED, DELETED, RESYNC = (
    TreeEventKind.CREATED,
    TreeEventKind.CHANGED,
    TreeEventKind.DELETED,
    TreeEventKind.RESYNC,
)


def stat(mzxid: int) -> Stat:
    return Stat(mzxid, mzxid, mzxid, 0, 0, 0, 0, 0, 0, 0, 0)


# -- TreeEvent ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"kind": CREATED, "data": None, "stat": stat(1)}, ValueError, "needs both data and stat"),
        ({"kind": CHANGED, "data": b"x", "stat": None}, ValueError, "needs both data and stat"),
        ({"kind": DELETED, "data": b"x", "stat": None}, ValueError, "carries no data"),
        ({"kind": RESYNC, "data": None, "stat": stat(1)}, ValueError, "carries no data"),
        ({"kind": CREATED, "position": -1}, ValueError, "position must be a non-negative int"),
        ({"kind": CREATED, "position": True}, ValueError, "position must be a non-negative int"),
        ({"kind": "created"}, TypeError, "kind"),
        ({"kind": CREATED, "data": "text"}, TypeError, "data"),
    ],
)
def test_a_tree_event_refuses_what_its_kind_cannot_carry(
    kwargs: dict[str, object], error: type[Exception], message: str
) -> None:
    fields: dict[str, object] = {"path": "/a", "position": 1, "data": b"", "stat": stat(1)}
    fields.update(kwargs)
    with pytest.raises(error, match=message):
        TreeEvent(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("event", "held", "news"),
    [
        (TreeEvent(CREATED, "/a", 5, b"", stat(5)), None, True),
        (TreeEvent(CHANGED, "/a", 5, b"", stat(5)), stat(3), True),
        (TreeEvent(CHANGED, "/a", 5, b"", stat(5)), stat(5), False),  # the read saw it already
        (TreeEvent(CHANGED, "/a", 7, b"", stat(5)), stat(6), False),  # an older state, later
        (TreeEvent(DELETED, "/a", 5), stat(3), True),
        (TreeEvent(DELETED, "/a", 5), stat(5), False),  # the node held was created after
        (TreeEvent(DELETED, "/a", 5), None, False),  # nothing to delete
        (TreeEvent(RESYNC, "/", 5), stat(9), True),
        # Created and deleted again before the read: nothing to apply, its DELETED follows.
        (TreeEvent(CREATED, "/a", 5), None, False),
        (TreeEvent(CHANGED, "/a", 5), stat(3), False),
    ],
)
def test_newer_than_merges_a_feed_with_a_read_of_the_tree(
    event: TreeEvent, held: Stat | None, news: bool
) -> None:
    assert event.newer_than(held) is news


@pytest.mark.parametrize(
    ("path", "root", "below"),
    [
        ("/a", "/a", True),
        ("/a/b/c", "/a", True),
        ("/ab", "/a", False),
        ("/", "/a", False),
        ("/anything", "/", True),
    ],
)
def test_at_or_below(path: str, root: str, below: bool) -> None:
    assert at_or_below(path, root) is below


# -- the base class -----------------------------------------------------------------------------


@pytest.fixture
def memory() -> Iterator[MemoryStore]:
    store = open_memory_store(StoreURL.parse(f"memory://feed-unit-{uuid.uuid4().hex}"))
    yield store
    store.close()


def test_a_store_without_the_feed_refuses_naming_the_characteristic(memory: MemoryStore) -> None:
    memory.characteristics = attrs.evolve(memory.characteristics, ordered_change_feed=False)
    with pytest.raises(UnsupportedError, match="lacks ordered_change_feed"):
        MetadataStore.watch_tree(memory, "/a", print)


def test_an_instrumented_store_passes_the_feed_through_and_counts_it(memory: MemoryStore) -> None:
    wrapped = InstrumentedStore(memory, "test")
    seen: list[TreeEvent] = []
    watch = wrapped.watch_tree("/a", seen.append)
    memory.create("/a", b"1")
    assert watch.flush()
    assert [e.kind for e in seen] == [RESYNC, CREATED]
    assert wrapped.counts.watches == 1
    assert wrapped.counts.watch_events == 2


# -- delivery -----------------------------------------------------------------------------------


def test_flush_from_a_callback_delivers_what_waits_instead_of_deadlocking() -> None:
    events = EventThread("feed-unit")
    try:
        seen: list[int] = []
        flushed: list[bool] = []
        feed: TreeFeed[int] = TreeFeed(
            "/",
            lambda e: seen.append(e.position),
            events,
            lambda items: [TreeEvent(RESYNC, "/", i) for i in items],
        )

        def push_more_then_flush() -> None:
            feed.push([2, 3])
            flushed.append(feed.flush(1.0))

        feed.push([1])
        events.post(push_more_then_flush)
        assert feed.flush(5.0)
        assert flushed == [True]
        assert seen == [1, 2, 3]
    finally:
        events.stop()


def test_a_failing_resolve_is_logged_and_the_feed_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    events = EventThread("feed-unit")
    try:
        seen: list[int] = []

        def resolve(items: list[int]) -> list[TreeEvent]:
            if 0 in items:
                raise RuntimeError("backend trouble")
            return [TreeEvent(RESYNC, "/", i) for i in items]

        feed: TreeFeed[int] = TreeFeed("/", lambda e: seen.append(e.position), events, resolve)
        feed.push([0])
        assert feed.flush(5.0)
        feed.push([4])
        assert feed.flush(5.0)
        assert seen == [4]
        assert "resolving 1 item(s) failed" in caplog.text
    finally:
        events.stop()


def test_cancel_releases_a_waiting_flush() -> None:
    events = EventThread("feed-unit")
    gate = threading.Event()
    try:
        feed: TreeFeed[int] = TreeFeed(
            "/", lambda e: gate.wait(5), events, lambda items: [TreeEvent(RESYNC, "/", 1)]
        )
        feed.push([1, 2])
        results: list[bool] = []
        waiter = threading.Thread(target=lambda: results.append(feed.flush(10.0)))
        waiter.start()
        feed.cancel()
        gate.set()
        waiter.join(10)
        assert results == [True]
        assert feed.backlog() == 0
    finally:
        events.stop()


# -- the memory store's history -----------------------------------------------------------------


def test_memory_resumes_exactly_within_its_history_and_resyncs_beyond_it() -> None:
    server = MemoryServer(feed_history=4)
    store = MemoryStore.connect(server)
    try:
        first: list[TreeEvent] = []
        watch = store.watch_tree("/", first.append)
        store.create("/a", b"0")
        assert watch.flush()
        mark = first[-1].position
        watch.cancel()
        for value in (b"1", b"2", b"3"):
            store.set("/a", value)
        within: list[TreeEvent] = []
        assert store.watch_tree("/", within.append, since=mark).flush()
        assert [(e.kind, e.data) for e in within] == [
            (CHANGED, b"1"),
            (CHANGED, b"2"),
            (CHANGED, b"3"),
        ]
        store.set("/a", b"4")
        store.set("/a", b"5")  # the change right after mark is gone from the history now
        beyond: list[TreeEvent] = []
        assert store.watch_tree("/", beyond.append, since=mark).flush()
        assert [e.kind for e in beyond] == [RESYNC]
        assert beyond[0].position == store.exists("/a").mzxid  # type: ignore[union-attr]
        assert server.changes.retained() == 4
    finally:
        store.close()


def test_a_server_nobody_follows_records_nothing() -> None:
    server = MemoryServer()
    store = MemoryStore.connect(server)
    try:
        for i in range(20):
            store.create(f"/n{i}", b"")
        assert server.changes.retained() == 0
    finally:
        store.close()


def test_closing_a_client_ends_its_feeds() -> None:
    server = MemoryServer()
    store, writer = MemoryStore.connect(server), MemoryStore.connect(server)
    try:
        seen: list[TreeEvent] = []
        watch = store.watch_tree("/", seen.append)
        assert watch.flush()
        store.close()
        writer.create("/after", b"")
        assert watch.flush(1.0)
        assert [e.kind for e in seen] == [RESYNC]
    finally:
        writer.close()

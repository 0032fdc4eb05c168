"""The store contract: change feeds (``watch_tree``) deliver every change below a path in commit
order, with positions, and never lose one silently (a gap is a RESYNC)."""

from __future__ import annotations

import threading

import pytest

from coordkit.store import (
    ConnectionLossError,
    Create,
    Delete,
    MetadataStore,
    NoNodeError,
    SessionState,
    SetData,
    Stat,
    TreeEvent,
    TreeEventKind,
    TreeWatch,
)
from coordkit.store import tree as store_tree
from coordkit.store.changefeed import at_or_below
from coordkit.testing.backends import Capability, StoreBackend, StoreFactory, requires
from coordkit.testing.store.base import StoreSuite
from coordkit.testing.waiting import default_timeout, wait_for

CREATED = TreeEventKind.CREATED
CHANGED = TreeEventKind.CHANGED
DELETED = TreeEventKind.DELETED
RESYNC = TreeEventKind.RESYNC

#: A writer's record of what it committed: (kind, path, zxid of the transaction).
Logged = tuple[TreeEventKind, str, int]


class FeedRecorder:
    """A ``watch_tree`` callback that keeps every event it receives (thread-safe)."""

    def __init__(self) -> None:
        self._events: list[TreeEvent] = []
        self._lock = threading.Lock()

    def __call__(self, event: TreeEvent) -> None:
        with self._lock:
            self._events.append(event)

    @property
    def events(self) -> list[TreeEvent]:
        with self._lock:
            return list(self._events)

    def changes(self, under: str = "/") -> list[tuple[TreeEventKind, str]]:
        """(kind, path) of every event but RESYNC, at or below ``under``."""
        return [
            (e.kind, e.path)
            for e in self.events
            if e.kind is not RESYNC and at_or_below(e.path, under)
        ]


def read_tree(store: MetadataStore, root: str) -> dict[str, tuple[bytes, Stat]]:
    """Every node at or below ``root`` (a node deleted during the walk is left out; none at all
    when ``root`` is gone)."""
    try:
        return store_tree.read_tree(store, root)
    except NoNodeError:
        return {}


def tree_of(store: MetadataStore, root: str) -> dict[str, tuple[bytes, int]]:
    """``read_tree`` as path → (data, mzxid), for comparing with a :class:`TreeImage`."""
    return {path: (data, stat.mzxid) for path, (data, stat) in read_tree(store, root).items()}


class TreeImage:
    """What a subscriber keeps, built as the contract says it can be: re-read the subtree on
    RESYNC, merge every other event with :meth:`TreeEvent.newer_than`. The contract promises the
    image ends equal to the tree. Events are applied on the test's thread, by :meth:`catch_up`."""

    def __init__(self, store: MetadataStore, root: str, recorder: FeedRecorder):
        self.store = store
        self.root = root
        self.recorder = recorder
        self.nodes: dict[str, tuple[bytes, Stat]] = {}
        self.applied = 0

    def catch_up(self) -> dict[str, tuple[bytes, int]]:
        events = self.recorder.events
        for event in events[self.applied :]:
            if event.kind is RESYNC:
                self.nodes = read_tree(self.store, self.root)
                continue
            held = self.nodes.get(event.path)
            if not event.newer_than(None if held is None else held[1]):
                continue
            if event.kind is DELETED:
                del self.nodes[event.path]
            else:
                assert event.data is not None
                assert event.stat is not None
                self.nodes[event.path] = (event.data, event.stat)
        self.applied = len(events)
        return {path: (data, stat.mzxid) for path, (data, stat) in self.nodes.items()}


def _flushed(watch: TreeWatch) -> None:
    assert watch.flush(default_timeout()), "the feed did not catch up with the client's writes"


def _non_decreasing(events: list[TreeEvent]) -> None:
    positions = [e.position for e in events]
    assert positions == sorted(positions), f"positions must never decrease: {positions}"


@requires(Capability.ORDERED_CHANGE_FEED)
class StoreFeedTests(StoreSuite):
    """Change feeds: order, positions, depth, resumption, cancelling, gaps."""

    def test_a_feed_opens_with_resync_at_a_position_covering_what_exists(
        self, store: MetadataStore
    ) -> None:
        store.create("/t/a", b"a", make_parents=True)
        stat = store.set("/t/a", b"a1")
        seen = FeedRecorder()
        watch = store.watch_tree("/t", seen)
        _flushed(watch)
        (opening,) = seen.events
        assert opening.kind is RESYNC
        assert opening.path == "/t"
        assert opening.position >= stat.mzxid, "the opening RESYNC must cover what already exists"
        assert opening.data is None
        assert opening.stat is None

    def test_each_change_arrives_in_order_with_its_state_and_position(
        self, store: MetadataStore
    ) -> None:
        seen = FeedRecorder()
        watch = store.watch_tree("/t", seen)
        _flushed(watch)
        written: list[tuple[TreeEventKind, str, bytes | None, Stat | None]] = []

        def step(kind: TreeEventKind, path: str, data: bytes | None = None) -> None:
            _flushed(watch)
            written.append((kind, path, data, store.exists(path)))

        store.create("/t", b"root")
        step(CREATED, "/t", b"root")
        store.set("/t", b"v1")
        step(CHANGED, "/t", b"v1")
        store.create("/t/x", b"x0")
        step(CREATED, "/t/x", b"x0")
        store.create("/t/x/y", b"y0")
        step(CREATED, "/t/x/y", b"y0")
        store.set("/t/x", b"x1")
        step(CHANGED, "/t/x", b"x1")
        store.delete("/t/x/y")
        step(DELETED, "/t/x/y")
        store.delete("/t/x")
        step(DELETED, "/t/x")
        events = seen.events
        assert events[0].kind is RESYNC
        assert [(e.kind, e.path) for e in events[1:]] == [(k, p) for k, p, _d, _s in written]
        for event, (_kind, path, data, stat) in zip(events[1:], written, strict=True):
            assert event.data == data, f"{path}: the event must carry the state the change wrote"
            if stat is not None:
                assert event.stat is not None
                assert event.stat.version == stat.version
                assert event.position == stat.mzxid == event.stat.mzxid
        positions = [e.position for e in events]
        assert positions == sorted(set(positions)), (
            f"separate transactions must have strictly increasing positions: {positions}"
        )

    def test_a_transaction_arrives_whole_in_op_order_at_one_position(
        self, store: MetadataStore
    ) -> None:
        store.create("/t/s", b"s", make_parents=True)
        store.create("/t/d", b"d")
        seen = FeedRecorder()
        watch = store.watch_tree("/t", seen)
        _flushed(watch)
        results = store.commit(
            [Create("/t/a", b"1"), SetData("/t/s", b"s2"), Create("/t/a/b", b"2"), Delete("/t/d")]
        )
        _flushed(watch)
        changes = seen.events[1:]
        assert [(e.kind, e.path) for e in changes] == [
            (CREATED, "/t/a"),
            (CHANGED, "/t/s"),
            (CREATED, "/t/a/b"),
            (DELETED, "/t/d"),
        ]
        assert {e.position for e in changes} == {results[1].mzxid}, (
            "every change of one transaction is at the transaction's position"
        )

    def test_every_depth_is_followed_and_nothing_outside_the_path(
        self, store: MetadataStore, other: MetadataStore
    ) -> None:
        seen = FeedRecorder()
        watch = store.watch_tree("/t", seen)
        _flushed(watch)
        other.create("/t2/x", b"sibling with a common prefix", make_parents=True)
        other.create("/elsewhere", b"")
        store.create("/t/a/b/c/d/e/f", b"deep", make_parents=True)
        other.set("/elsewhere", b"1")
        store.set("/t/a/b/c/d/e/f", b"deeper")
        _flushed(watch)
        deep = ["/t", "/t/a", "/t/a/b", "/t/a/b/c", "/t/a/b/c/d", "/t/a/b/c/d/e", "/t/a/b/c/d/e/f"]
        assert seen.changes() == [(CREATED, p) for p in deep] + [(CHANGED, deep[-1])]
        assert seen.events[-1].data == b"deeper"

    def test_a_feed_on_the_root_follows_the_whole_tree(self, store: MetadataStore) -> None:
        seen = FeedRecorder()
        watch = store.watch_tree("/", seen)
        _flushed(watch)
        store.create("/x", b"1")
        store.create("/x/y", b"2")
        store.delete("/x/y")
        _flushed(watch)
        assert seen.changes() == [(CREATED, "/x"), (CREATED, "/x/y"), (DELETED, "/x/y")]

    def test_flush_after_a_write_covers_every_change_before_it(self, store: MetadataStore) -> None:
        store.create("/t", b"")
        seen = FeedRecorder()
        watch = store.watch_tree("/t", seen)
        creates = [Create(f"/t/n{i:03d}", b"0") for i in range(150)]
        sets = [SetData(f"/t/n{i:03d}", b"1") for i in range(0, 150, 2)]
        store.apply(creates)
        store.apply(sets)
        _flushed(watch)
        changes = seen.changes()
        assert [p for k, p in changes if k is CREATED] == [op.path for op in creates]
        assert len([p for k, p in changes if k is CHANGED]) == len(sets)
        last = {e.path: e.data for e in seen.events if e.kind is not RESYNC}
        assert all(last[op.path] == op.data for op in sets)
        _non_decreasing(seen.events)

    def test_concurrent_writers_are_delivered_in_commit_order(
        self, store: MetadataStore, open_session: StoreFactory
    ) -> None:
        seen, logs = self._run_writers(store, open_session)
        events = seen.events
        _non_decreasing(events)
        for base, log in logs.items():
            delivered = seen.changes(base)
            committed = [(kind, path) for kind, path, _zxid in log]
            # Every change arrives, in commit order (a node deleted again before a store without
            # history read it is reported without its state).
            assert delivered == committed, f"{base}: changes missing or out of commit order"
        shared = [e.stat.version for e in events if e.path == "/t/shared" and e.stat is not None]
        # Without history, notices read in one batch may all see the node's latest state.
        assert shared == sorted(shared), "a node's states must never go back to an older one"
        image = TreeImage(store, "/t", seen)
        wait_for(lambda: image.catch_up() == tree_of(store, "/t"), what="the image to match")

    @requires(Capability.CHANGE_FEED_HISTORY)
    def test_with_history_every_change_is_at_its_own_transactions_position(
        self, store: MetadataStore, open_session: StoreFactory
    ) -> None:
        seen, logs = self._run_writers(store, open_session)
        for base, log in logs.items():
            delivered = [
                (e.kind, e.path, e.position) for e in seen.events if at_or_below(e.path, base)
            ]
            assert delivered == log, f"{base}: the feed must hold exactly what was committed"
        shared = [e.stat.version for e in seen.events if e.path == "/t/shared" and e.stat]
        assert shared == list(range(1, len(shared) + 1)), "every state of a node, in order"

    def _run_writers(
        self, store: MetadataStore, open_session: StoreFactory
    ) -> tuple[FeedRecorder, dict[str, list[Logged]]]:
        """Four sessions each writing their own subtree (creates, sets, multi-ops, deletes) and
        one shared node, while ``store`` follows ``/t``; returns once the feed caught up."""
        store.create("/t/shared", b"", make_parents=True)
        seen = FeedRecorder()
        watch = store.watch_tree("/t", seen)
        _flushed(watch)
        writers = [open_session() for _ in range(4)]
        logs: dict[str, list[Logged]] = {f"/t/w{i}": [] for i in range(len(writers))}
        failures: list[BaseException] = []

        def work(session: MetadataStore, base: str, log: list[Logged]) -> None:
            def created(path: str) -> None:
                stat = session.exists(path)
                assert stat is not None
                log.append((CREATED, path, stat.czxid))

            try:
                session.create(base, b"")
                created(base)
                for n in range(8):
                    node = f"{base}/n{n}"
                    session.create(node, b"a")
                    created(node)
                    log.append((CHANGED, node, session.set(node, b"b").mzxid))
                    done = session.commit(
                        [
                            SetData(node, b"c"),
                            Create(f"{node}/leaf", b"l"),
                            SetData("/t/shared", f"{base}:{n}".encode()),
                        ]
                    )
                    log.append((CHANGED, node, done[0].mzxid))
                    log.append((CREATED, f"{node}/leaf", done[0].mzxid))
                    if n % 2:
                        gone = session.commit(
                            [Delete(f"{node}/leaf"), Delete(node), SetData("/t/shared", b"-")]
                        )
                        log.append((DELETED, f"{node}/leaf", gone[2].mzxid))
                        log.append((DELETED, node, gone[2].mzxid))
            except BaseException as exc:  # reported by the test thread
                failures.append(exc)

        threads = [
            threading.Thread(target=work, args=(session, base, logs[base]))
            for session, base in zip(writers, logs, strict=True)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not failures, failures
        store.exists("/t")  # a request answered after every write: the flush below covers them
        store.set("/t/shared", b"end")
        _flushed(watch)
        return seen, logs

    @requires(Capability.CHANGE_FEED_HISTORY)
    def test_resuming_from_a_position_replays_exactly_what_followed(
        self, store: MetadataStore
    ) -> None:
        store.create("/t", b"")
        first = FeedRecorder()
        watch = store.watch_tree("/t", first)
        store.set("/t", b"1")
        store.create("/t/a", b"a")
        _flushed(watch)
        mark = watch.position
        assert mark == first.events[-1].position
        watch.cancel()
        store.set("/t/a", b"a2")
        store.create("/elsewhere", b"")
        store.delete("/t/a")
        store.create("/t/b", b"b")
        again = FeedRecorder()
        resumed = store.watch_tree("/t", again, since=mark)
        _flushed(resumed)
        assert [(e.kind, e.path, e.data) for e in again.events] == [
            (CHANGED, "/t/a", b"a2"),
            (DELETED, "/t/a", None),
            (CREATED, "/t/b", b"b"),
        ], "a resumed feed replays what followed its position, without RESYNC"
        assert mark is not None
        assert all(e.position > mark for e in again.events)

    def test_resuming_from_a_position_the_store_cannot_replay_opens_with_resync(
        self, store: MetadataStore
    ) -> None:
        store.create("/t/a", b"", make_parents=True)
        stat = store.set("/t/a", b"1")
        seen = FeedRecorder()
        watch = store.watch_tree("/t", seen, since=stat.mzxid + 1_000_000)  # from the future
        _flushed(watch)
        assert seen.events, "a position newer than the store: the feed must open with RESYNC"
        assert seen.events[0].kind is RESYNC
        assert seen.events[0].position >= stat.mzxid
        watch.cancel()
        # Position 0 is before everything: a store keeping its whole history may replay it all
        # (a fresh one can); otherwise the feed opens with RESYNC.
        seen = FeedRecorder()
        watch = store.watch_tree("/t", seen, since=0)
        _flushed(watch)
        assert seen.events, "since=0: the feed must open with RESYNC or replay every change"
        if seen.events[0].kind is not RESYNC:
            assert store.characteristics.change_feed_history
            assert seen.changes() == [(CREATED, "/t"), (CREATED, "/t/a"), (CHANGED, "/t/a")]
        else:
            assert seen.events[0].position >= stat.mzxid
        watch.cancel()

    @pytest.mark.parametrize("since", [-1, "7", 1.5, True])
    def test_a_bad_since_is_refused(self, store: MetadataStore, since: object) -> None:
        with pytest.raises((TypeError, ValueError), match="since"):
            store.watch_tree("/t", FeedRecorder(), since=since)  # type: ignore[arg-type]

    def test_a_cancelled_feed_receives_nothing_more(self, store: MetadataStore) -> None:
        store.create("/t", b"0")
        seen, witness = FeedRecorder(), FeedRecorder()
        watch = store.watch_tree("/t", seen)
        _flushed(watch)
        before = seen.events
        watch.cancel()
        watch.cancel()  # idempotent
        assert watch.flush(1.0), "flushing a cancelled feed must not wait"
        follower = store.watch_tree("/t", witness)
        store.set("/t", b"1")
        store.create("/t/c", b"")
        _flushed(follower)
        assert witness.changes() == [(CHANGED, "/t"), (CREATED, "/t/c")]
        assert seen.events == before

    def test_a_failing_callback_does_not_stop_the_feed(self, store: MetadataStore) -> None:
        seen = FeedRecorder()

        def fragile(event: TreeEvent) -> None:
            seen(event)
            if event.path == "/t/bad":
                raise RuntimeError("subscriber bug")

        watch = store.watch_tree("/t", fragile)
        store.create("/t", b"")
        store.create("/t/bad", b"")
        store.create("/t/good", b"")
        _flushed(watch)
        assert seen.changes()[-1] == (CREATED, "/t/good")

    @requires(Capability.CUT_CONNECTION)
    def test_a_cut_connection_loses_no_change_silently(
        self, store_backend: StoreBackend, store: MetadataStore, other: MetadataStore
    ) -> None:
        image = self._follow(store, other)
        store_backend.disconnect(store)
        other.set("/t/keep", b"k2")
        other.delete("/t/gone")
        other.create("/t/new", b"n")
        store_backend.reconnect(store)
        self._converges(image, other, "the changes made while cut off")
        other.set("/t/new", b"n2")
        self._converges(image, other, "a change after the reconnect")
        _non_decreasing(image.recorder.events)

    @requires(Capability.CUT_CONNECTION)
    def test_opening_a_feed_while_cut_off_fails_fast(
        self, store_backend: StoreBackend, store: MetadataStore
    ) -> None:
        store_backend.disconnect(store)
        wait_for(lambda: store.state is SessionState.SUSPENDED, what="SUSPENDED")
        with pytest.raises(ConnectionLossError):
            store.watch_tree("/t", FeedRecorder())
        store_backend.reconnect(store)
        wait_for(lambda: store.state is SessionState.CONNECTED, what="CONNECTED")
        seen = FeedRecorder()
        _flushed(store.watch_tree("/t", seen))
        assert [e.kind for e in seen.events] == [RESYNC]

    @requires(Capability.CUT_CONNECTION, Capability.CHANGE_FEED_HISTORY)
    def test_with_history_a_cut_connection_resumes_without_resync(
        self, store_backend: StoreBackend, store: MetadataStore, other: MetadataStore
    ) -> None:
        image = self._follow(store, other)
        store_backend.disconnect(store)
        other.delete("/t/gone")
        store_backend.reconnect(store)
        self._converges(image, other, "the delete made while cut off")
        assert [e.kind for e in image.recorder.events].count(RESYNC) == 1
        assert image.recorder.changes()[-1] == (DELETED, "/t/gone")

    @requires(Capability.EXPIRE_SESSION, Capability.EPHEMERAL_NODES)
    def test_a_lost_session_loses_no_change_silently(
        self, store_backend: StoreBackend, store: MetadataStore, other: MetadataStore
    ) -> None:
        store.create("/t/mine", b"", ephemeral=True, make_parents=True)
        image = self._follow(store, other)
        store_backend.expire(store)
        other.set("/t/keep", b"after")
        self._converges(image, other, "the lost session's ephemeral going and later changes")
        assert "/t/mine" not in image.nodes
        _non_decreasing(image.recorder.events)

    def _follow(self, store: MetadataStore, other: MetadataStore) -> TreeImage:
        other.create("/t/keep", b"k", make_parents=True)
        other.create("/t/gone", b"g")
        seen = FeedRecorder()
        store.watch_tree("/t", seen)
        image = TreeImage(store, "/t", seen)
        self._converges(image, other, "the feed's opening state")
        return image

    @staticmethod
    def _converges(image: TreeImage, other: MetadataStore, what: str) -> None:
        wait_for(
            lambda: image.catch_up() == tree_of(other, "/t"),
            what=f"the subscriber's image to show {what}",
        )

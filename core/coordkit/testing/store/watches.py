"""The store contract: persistent, level-triggered watches that deliver in order and survive reconnects."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from coordkit.store import DataEvent, MetadataStore, SessionState
from coordkit.testing.backends import Capability, StoreBackend, requires
from coordkit.testing.store.base import Recorder, StoreSuite
from coordkit.testing.waiting import wait_for


class StoreWatchTests(StoreSuite):
    """Persistent, level-triggered watches that deliver in order and survive reconnects."""

    def test_data_watch_delivers_current_state_then_changes(
        self, store: MetadataStore, other: MetadataStore
    ) -> None:
        store.create("/w", b"v0")
        seen = Recorder()
        store.watch_data("/w", seen)
        wait_for(lambda: seen.values() == [b"v0"], what="initial state")
        other.set("/w", b"v1")
        wait_for(
            lambda: seen.values()[-1:] == [b"v1"],
            what="the watch to deliver the change to v1 (a watch must not miss a change)",
        )
        other.delete("/w")
        wait_for(lambda: seen.last() is not None and not seen.last().exists, what="deletion")

    def test_data_watch_on_missing_node_sees_its_creation(
        self, store: MetadataStore, other: MetadataStore
    ) -> None:
        seen = Recorder()
        store.watch_data("/later", seen)
        wait_for(lambda: len(seen.events) == 1, what="initial state")
        assert not seen.events[0].exists
        other.create("/later", b"here")
        wait_for(lambda: seen.last().exists, what="creation")
        assert seen.last().data == b"here"

    @requires(Capability.EPHEMERAL_NODES)
    def test_children_watch_tracks_membership(
        self, store: MetadataStore, other: MetadataStore
    ) -> None:
        store.create("/ids", b"")
        seen = Recorder()
        store.watch_children("/ids", seen)
        wait_for(lambda: seen.last() is not None and seen.last().children == (), what="initial")
        other.create("/ids/1", b"", ephemeral=True)
        other.create("/ids/2", b"")
        wait_for(lambda: seen.last().children == ("1", "2"), what="two children")
        other.close()
        wait_for(lambda: seen.last().children == ("2",), what="ephemeral child gone")

    def test_children_watch_on_missing_node_sees_creation_and_deletion(
        self, store: MetadataStore, other: MetadataStore
    ) -> None:
        seen = Recorder()
        store.watch_children("/later", seen)
        wait_for(lambda: len(seen.events) == 1, what="initial state")
        assert not seen.events[0].exists
        other.create("/later", b"")
        wait_for(lambda: seen.last().children == (), what="node created, no children")
        other.delete("/later")
        wait_for(lambda: not seen.last().exists, what="node deleted")

    def test_children_watch_ignores_data_changes_of_children(
        self, store: MetadataStore, other: MetadataStore
    ) -> None:
        store.create("/ids/1", b"a", make_parents=True)
        seen = Recorder()
        store.watch_children("/ids", seen)
        wait_for(lambda: len(seen.events) == 1, what="initial")
        other.set("/ids/1", b"b")
        other.create("/ids/2", b"")
        wait_for(lambda: seen.last().children == ("1", "2"), what="new child")
        assert len(seen.events) == 2

    def test_events_arrive_in_commit_order_and_end_on_the_latest_state(
        self, store: MetadataStore, other: MetadataStore
    ) -> None:
        store.create("/seq", b"0")
        seen = Recorder()
        store.watch_data("/seq", seen)
        wait_for(lambda: seen.events, what="initial")
        for i in range(1, 51):
            other.set("/seq", str(i).encode())
        wait_for(lambda: seen.values()[-1] == b"50", what="final state")
        versions = [e.stat.version for e in seen.events]
        assert versions == sorted(set(versions)), "deliveries must be strictly increasing versions"
        values = [int(v) for v in seen.values()]  # type: ignore[arg-type]
        assert values == sorted(values)

    def test_cancelled_watch_receives_nothing_more(
        self, store: MetadataStore, other: MetadataStore
    ) -> None:
        store.create("/c", b"0")
        seen, witness = Recorder(), Recorder()
        watch = store.watch_data("/c", seen)
        wait_for(lambda: seen.events, what="initial")
        watch.cancel()
        store.watch_data("/c", witness)
        other.set("/c", b"1")
        wait_for(lambda: witness.values()[-1:] == [b"1"], what="witness sees change")
        assert seen.values() == [b"0"]

    def test_two_watchers_on_one_path_both_deliver(
        self, store: MetadataStore, other: MetadataStore
    ) -> None:
        store.create("/two", b"0")
        first, second = Recorder(), Recorder()
        store.watch_data("/two", first)
        store.watch_data("/two", second)
        other.set("/two", b"1")
        wait_for(
            lambda: first.values()[-1:] == [b"1"] and second.values()[-1:] == [b"1"], what="both"
        )

    @requires(Capability.CUT_CONNECTION)
    def test_watch_catches_up_after_connection_loss(
        self, store_backend: StoreBackend, store: MetadataStore, other: MetadataStore
    ) -> None:
        store.create("/state", b"before")
        store.create("/members", b"")
        data_seen, children_seen = Recorder(), Recorder()
        store.watch_data("/state", data_seen)
        store.watch_children("/members", children_seen)
        wait_for(lambda: data_seen.events and children_seen.events, what="initial")
        store_backend.disconnect(store)
        other.set("/state", b"during")
        other.create("/members/m1", b"")
        store_backend.reconnect(store)
        wait_for(
            lambda: data_seen.values()[-1:] == [b"during"], what="missed data change delivered"
        )
        wait_for(lambda: children_seen.last().children == ("m1",), what="missed child delivered")
        other.set("/state", b"after")
        wait_for(lambda: data_seen.values()[-1:] == [b"after"], what="later change delivered")

    @requires(Capability.EXPIRE_SESSION)
    def test_watch_survives_session_expiry(
        self, store_backend: StoreBackend, store: MetadataStore, other: MetadataStore
    ) -> None:
        store.create("/keep", b"1")
        seen = Recorder()
        store.watch_data("/keep", seen)
        wait_for(lambda: seen.events, what="initial")
        store_backend.expire(store)
        wait_for(
            lambda: store.state is SessionState.CONNECTED and store.exists("/keep") is not None,
            what="new session",
        )
        other.set("/keep", b"2")
        wait_for(lambda: seen.values()[-1:] == [b"2"], what="change after expiry")

    def test_callbacks_run_one_at_a_time(self, store: MetadataStore, other: MetadataStore) -> None:
        store.create("/serial", b"0")
        active = 0
        overlap = False
        finals: list[int] = []
        lock = threading.Lock()

        def make(index: int) -> Callable[[DataEvent], None]:
            def slow(event: DataEvent) -> None:
                nonlocal active, overlap
                with lock:
                    active += 1
                    overlap = overlap or active > 1
                time.sleep(0.002)
                with lock:
                    active -= 1
                    if event.data == b"done":
                        finals.append(index)

            return slow

        for index in range(3):
            store.watch_data("/serial", make(index))
        for i in range(20):
            other.set("/serial", str(i).encode())
        other.set("/serial", b"done")
        wait_for(lambda: sorted(finals) == [0, 1, 2], what="every watcher sees the final state")
        assert not overlap

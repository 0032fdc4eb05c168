"""The Redis change feed's pure parts (issue 18): which shard an event is filed under, which
shards a watch reads, the dispatch of shard entries to watched paths, and when a resumed stream
needs a resync. No server needed (tests/faults/test_redis_change_shards.py checks the Lua side)."""

from __future__ import annotations

import threading
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from coordkit.store import Stat
from coordkit.store.watches import EventThread, WatchHub
from coordkit_redis import changes
from coordkit_redis.changes import START, ChangeFeed
from coordkit_redis.keys import SHARDS, KeySpace, event_directory, shard_number

KEYS = KeySpace("t")


def test_events_are_filed_under_their_directory() -> None:
    assert event_directory("D", "/a/b") == "/a"
    assert event_directory("D", "/a") == "/"
    assert event_directory("D", "/") == "/"
    assert event_directory("C", "/a/b") == "/a/b"
    assert event_directory("C", "/") == "/"


def test_a_watch_reads_the_shards_of_its_events_and_no_others() -> None:
    assert KEYS.watch_streams("data", "/a/b") == (KEYS.shard_of("/a"),)
    children = KEYS.watch_streams("children", "/a/b")
    assert set(children) == {KEYS.shard_of("/a"), KEYS.shard_of("/a/b")}
    assert KEYS.watch_streams("children", "/") == (KEYS.shard_of("/"),)
    # Siblings share their parent's shard: a data watch on each reads one stream.
    assert {KEYS.watch_streams("data", f"/owners/t/{p}") for p in range(100)} == {
        (KEYS.shard_of("/owners/t"),)
    }


def test_shards_spread_directories_and_name_keys_of_the_store() -> None:
    directories = [f"/brokers/topics/t{i}/partitions/{p}" for i in range(100) for p in range(10)]
    numbers = {shard_number(d) for d in directories}
    # 1,000 directories over 256 shards leave about 5 empty by chance; a poor hash leaves many.
    assert len(numbers) > SHARDS - 20
    assert all(0 <= n < SHARDS for n in numbers)
    assert KEYS.shard(0) == "{t}:log:00"
    assert KEYS.shard(255) == "{t}:log:ff"


class Hub:
    """A watch hub over a fixed tree whose re-reads are recorded."""

    def __init__(self, watches: list[tuple[str, str]]):
        self.reads: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.events = EventThread("test-shards")
        self.hub = WatchHub(self.events, self._data, self._children)
        for kind, path in watches:
            add = self.hub.add_data_watch if kind == "data" else self.hub.add_children_watch
            add(path, lambda event: None)
        self.events.flush()
        with self.lock:
            self.reads.clear()

    def _data(self, path: str) -> tuple[bytes, Stat] | None:
        with self.lock:
            self.reads.append(("data", path))
        return None

    def _children(self, path: str) -> tuple[list[str], Stat] | None:
        with self.lock:
            self.reads.append(("children", path))
        return None

    def reread(self) -> set[tuple[str, str]]:
        self.events.flush()
        with self.lock:
            return set(self.reads)


PATHS = st.sampled_from(["/a", "/a/b", "/a/b/c", "/ab", "/b", "/a/bc", "/"])
EVENTS = st.lists(st.tuples(st.sampled_from(["D", "C"]), PATHS), min_size=1, max_size=12)


def expected_rereads(
    watches: list[tuple[str, str]], events: list[tuple[str, str]]
) -> set[tuple[str, str]]:
    """The reference: a D event re-reads data and children watches on its path, a C event the
    children watch on its path."""
    out: set[tuple[str, str]] = set()
    for kind, path in events:
        for watch_kind, watched in watches:
            if watched == path and (kind == "D" or watch_kind == "children"):
                out.add((watch_kind, watched))
    return out


@settings(max_examples=60, deadline=None)
@given(
    watches=st.lists(st.tuples(st.sampled_from(["data", "children"]), PATHS), unique=True),
    events=EVENTS,
    many=st.booleans(),
)
def test_dispatch_rereads_exactly_the_watches_an_entry_names(
    watches: list[tuple[str, str]], events: list[tuple[str, str]], many: bool
) -> None:
    """Both ways of reading an entry (searching for a few watched keys, parsing it for many)
    match the reference, prefixes and siblings of watched paths included."""
    padding = [("data", f"/pad/{i}") for i in range(changes.SEARCHED + 1)] if many else []
    hub = Hub(watches + padding)
    try:
        feed = ChangeFeed(KEYS, hub.hub, lambda session: None)
        payload = "\n".join(f"{kind}\n{path}" for kind, path in events).encode()
        feed.dispatch([(b"1-0", {b"z": b"1", b"e": payload})])
        assert hub.reread() == expected_rereads(watches, events)
    finally:
        hub.events.stop()


def info(**fields: Any) -> dict[str, Any]:
    base = {"length": 5, "last-generated-id": b"100-0", "recorded-first-entry-id": b"50-0"}
    base.update(fields)
    return base


def test_a_resumed_stream_resyncs_only_when_entries_may_be_gone() -> None:
    resume = changes._resume_point
    assert resume(info(), (100, 0)) == (False, (100, 0))  # nothing new
    assert resume(info(), (60, 0)) == (False, (100, 0))  # new entries, all kept
    assert resume(info(), (40, 0)) == (True, (100, 0))  # trimmed past the position
    assert resume(info(**{"max-deleted-entry-id": b"70-0"}), (60, 0))[0]
    assert resume(info(), (200, 0)) == (True, (100, 0))  # the server lost entries
    assert resume(None, (60, 0)) == (True, START)  # the stream is gone
    assert resume(None, START) == (False, START)  # never written: nothing missed

"""Contract: ephemeral nodes live and die with their session; sequential names are unique."""

from __future__ import annotations

import re
import threading

import pytest

from coordkit.store import MetadataStore, NoChildrenForEphemeralsError, SessionState
from harness.backends import Backend, StoreFactory
from harness.waiting import wait_for

SEQ = re.compile(r"^/q/job-(\d{10})$")


def test_ephemeral_node_is_owned_by_the_session(store: MetadataStore, other: MetadataStore) -> None:
    store.create("/eph", b"me", ephemeral=True)
    stat = other.exists("/eph")
    assert stat is not None
    assert stat.ephemeral
    assert stat.ephemeral_owner == store.session_id
    assert store.session_id != other.session_id


def test_ephemeral_nodes_vanish_when_the_session_closes(
    store: MetadataStore, other: MetadataStore
) -> None:
    store.create("/live", b"")
    store.create("/live/a", b"", ephemeral=True)
    store.create("/persistent", b"")
    store.close()
    assert other.children("/live") == []
    assert other.exists("/persistent") is not None


def test_ephemeral_nodes_vanish_when_the_session_expires(
    backend: Backend, store: MetadataStore, other: MetadataStore
) -> None:
    states: list[SessionState] = []
    store.add_listener(states.append)
    old_session = store.session_id
    store.create("/lease", b"", ephemeral=True)
    backend.expire(store)
    wait_for(lambda: other.exists("/lease") is None, what="ephemeral gone after expiry")
    wait_for(lambda: SessionState.LOST in states, what="owner sees LOST")
    wait_for(lambda: store.state is SessionState.CONNECTED, what="a new session")
    assert store.session_id != old_session
    # The new session works and owns what it creates.
    store.create("/lease", b"again", ephemeral=True)
    assert other.exists("/lease").ephemeral_owner == store.session_id  # type: ignore[union-attr]


def test_ephemeral_nodes_cannot_have_children(store: MetadataStore) -> None:
    store.create("/e", b"", ephemeral=True)
    with pytest.raises(NoChildrenForEphemeralsError) as info:
        store.create("/e/child", b"")
    assert info.value.path == "/e/child"


def test_ephemeral_survives_connection_loss_without_expiry(
    backend: Backend, store: MetadataStore, other: MetadataStore
) -> None:
    store.create("/sticky", b"", ephemeral=True)
    session = store.session_id
    backend.disconnect(store)
    assert other.exists("/sticky") is not None
    backend.reconnect(store)
    wait_for(lambda: store.state is SessionState.CONNECTED, what="reconnect")
    assert store.session_id == session
    assert other.exists("/sticky").ephemeral_owner == session  # type: ignore[union-attr]


def test_sequential_names_have_ten_digits_and_increase(store: MetadataStore) -> None:
    store.create("/q", b"")
    made = [store.create("/q/job-", b"", sequential=True) for _ in range(5)]
    numbers = [int(SEQ.match(p).group(1)) for p in made]  # type: ignore[union-attr]
    assert numbers[0] == 0
    assert numbers == sorted(numbers)
    assert len(set(numbers)) == 5
    assert store.children("/q") == sorted(p.rsplit("/", 1)[1] for p in made)


def test_sequence_counts_child_creations_not_deletions(store: MetadataStore) -> None:
    store.create("/q", b"")
    for name in ("a", "b"):
        store.create(f"/q/{name}", b"")
        store.delete(f"/q/{name}")
    # As real ZooKeeper does: two creations came before (deletions bump cversion, not the number).
    assert store.create("/q/job-", b"", sequential=True) == "/q/job-0000000002"
    assert store.exists("/q").cversion == 5  # type: ignore[union-attr]


def test_sequential_numbers_are_unique_under_concurrent_creators(
    open_session: StoreFactory,
) -> None:
    stores = [open_session() for _ in range(4)]
    stores[0].create("/q", b"")
    made: list[str] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def worker(s: MetadataStore) -> None:
        try:
            for _ in range(25):
                path = s.create("/q/job-", b"", sequential=True, ephemeral=True)
                with lock:
                    made.append(path)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(s,)) for s in stores for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(made) == 200
    assert len(set(made)) == 200
    assert all(SEQ.match(p) for p in made)
    assert sorted(int(p[-10:]) for p in made) == list(range(200))


def test_ephemeral_sequential_node_is_removed_with_its_session(
    store: MetadataStore, other: MetadataStore
) -> None:
    store.create("/q", b"")
    path = store.create("/q/job-", b"", ephemeral=True, sequential=True)
    assert other.exists(path) is not None
    store.close()
    assert other.exists(path) is None

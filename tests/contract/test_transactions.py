"""Contract: multi-ops are all-or-nothing; a failed one leaves the store unchanged."""

from __future__ import annotations

import pytest

from coordkit.store import (
    BadVersionError,
    Check,
    Create,
    Delete,
    InvalidPathError,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
    SetData,
    Stat,
)
from harness.backends import StoreFactory


def snapshot(store: MetadataStore, root: str = "/") -> dict[str, tuple[bytes, int]]:
    out = {}
    stack = [root]
    while stack:
        path = stack.pop()
        data, stat = store.get(path)
        out[path] = (data, stat.version)
        stack.extend(f"{path.rstrip('/')}/{c}" for c in store.children(path))
    return out


def test_commit_applies_every_op_and_returns_results(store: MetadataStore) -> None:
    store.create("/epoch", b"1")
    results = store.commit(
        [
            Check("/epoch", 0),
            Create("/new", b"n"),
            SetData("/epoch", b"2", 0),
            Create("/new/seq-", b"", sequential=True),
        ]
    )
    assert results[0] is None
    assert results[1] == "/new"
    assert isinstance(results[2], Stat)
    assert results[2].version == 1
    assert results[3] == "/new/seq-0000000000"
    assert store.get("/epoch")[0] == b"2"


def test_failed_check_leaves_store_unchanged_and_names_op(store: MetadataStore) -> None:
    store.create("/controller_epoch", b"7")
    store.set("/controller_epoch", b"8")
    before = snapshot(store)
    with pytest.raises(BadVersionError) as info:
        store.commit([Create("/controller", b"c", ephemeral=True), Check("/controller_epoch", 0)])
    assert info.value.op_index == 1
    assert info.value.path == "/controller_epoch"
    assert snapshot(store) == before


def test_late_failure_rolls_back_earlier_creates_sets_and_deletes(store: MetadataStore) -> None:
    store.create("/a", b"a0")
    store.create("/b", b"b0")
    before = snapshot(store)
    with pytest.raises(NodeExistsError) as info:
        store.commit(
            [
                Create("/c", b""),
                Create("/c/d", b""),
                SetData("/a", b"a1"),
                Delete("/b"),
                Create("/a", b"dup"),
            ]
        )
    assert info.value.op_index == 4
    assert snapshot(store) == before


def test_ops_see_the_effects_of_earlier_ops(store: MetadataStore) -> None:
    store.create("/x", b"old")
    store.commit([Delete("/x"), Create("/x", b"new"), SetData("/x", b"newer", 0), Check("/x", 1)])
    data, stat = store.get("/x")
    assert (data, stat.version) == (b"newer", 1)


def test_missing_node_in_transaction_raises_no_node(store: MetadataStore) -> None:
    with pytest.raises(NoNodeError) as info:
        store.commit([Create("/ok", b""), SetData("/absent", b"")])
    assert info.value.op_index == 1
    assert store.exists("/ok") is None


def test_invalid_path_in_transaction_applies_nothing(store: MetadataStore) -> None:
    with pytest.raises(InvalidPathError) as info:
        store.commit([Create("/fine", b""), Create("bad", b"")])
    assert info.value.op_index == 1
    assert store.exists("/fine") is None


def test_transaction_builder(store: MetadataStore) -> None:
    store.create("/t", b"")
    results = store.transaction().create("/t/1", b"1").set("/t", b"parent").check("/t", 1).commit()
    assert results[0] == "/t/1"
    assert store.get("/t")[0] == b"parent"


def test_ephemeral_created_in_transaction_belongs_to_session(
    store: MetadataStore, other: MetadataStore
) -> None:
    store.commit([Create("/eph", b"", ephemeral=True)])
    assert other.exists("/eph").ephemeral_owner == store.session_id  # type: ignore[union-attr]
    store.close()
    assert other.exists("/eph") is None


def test_concurrent_version_checked_updates_lose_nothing(open_session: StoreFactory) -> None:
    import threading

    stores = [open_session() for _ in range(3)]
    stores[0].create("/counter", b"0")

    def bump(s: MetadataStore, times: int) -> None:
        done = 0
        while done < times:
            data, stat = s.get("/counter")
            try:
                s.commit([SetData("/counter", str(int(data) + 1).encode(), stat.version)])
                done += 1
            except BadVersionError:
                continue

    threads = [threading.Thread(target=bump, args=(s, 30)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    data, stat = stores[0].get("/counter")
    assert int(data) == 90
    assert stat.version == 90


def test_failed_transaction_consumes_no_sequence_number(store: MetadataStore) -> None:
    store.create("/q", b"")
    with pytest.raises(NoNodeError):
        store.commit([Create("/q/job-", b"", sequential=True), SetData("/absent", b"")])
    assert store.children("/q") == []
    assert store.create("/q/job-", b"", sequential=True) == "/q/job-0000000000"

"""The store contract: multi-ops are all-or-nothing; a failed one leaves the store unchanged."""

from __future__ import annotations

import threading

import pytest

from coordkit.store import (
    ANY_VERSION,
    MAX_DATA_SIZE,
    BadVersionError,
    Check,
    Create,
    DataTooLargeError,
    Delete,
    InvalidPathError,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
    SetData,
    Stat,
)
from coordkit.testing.backends import Capability, StoreFactory, requires
from coordkit.testing.store.base import StoreSuite, snapshot

ATOMIC = "a failed commit must leave the store unchanged (atomicity)"


class StoreTransactionTests(StoreSuite):
    """Multi-ops are all-or-nothing; a failed one leaves the store unchanged."""

    @requires(Capability.SEQUENTIAL_NODES)
    def test_commit_applies_every_op_and_returns_results(self, store: MetadataStore) -> None:
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

    @requires(Capability.EPHEMERAL_NODES)
    def test_failed_check_leaves_store_unchanged_and_names_op(self, store: MetadataStore) -> None:
        store.create("/controller_epoch", b"7")
        store.set("/controller_epoch", b"8")
        before = snapshot(store)
        with pytest.raises(BadVersionError) as info:
            store.commit(
                [Create("/controller", b"c", ephemeral=True), Check("/controller_epoch", 0)]
            )
        assert info.value.op_index == 1
        assert info.value.path == "/controller_epoch"
        assert snapshot(store) == before, ATOMIC

    def test_late_failure_rolls_back_earlier_creates_sets_and_deletes(
        self, store: MetadataStore
    ) -> None:
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
        assert snapshot(store) == before, ATOMIC

    def test_ops_see_the_effects_of_earlier_ops(self, store: MetadataStore) -> None:
        store.create("/x", b"old")
        store.commit(
            [Delete("/x"), Create("/x", b"new"), SetData("/x", b"newer", 0), Check("/x", 1)]
        )
        data, stat = store.get("/x")
        assert (data, stat.version) == (b"newer", 1)

    def test_missing_node_in_transaction_raises_no_node(self, store: MetadataStore) -> None:
        with pytest.raises(NoNodeError) as info:
            store.commit([Create("/ok", b""), SetData("/absent", b"")])
        assert info.value.op_index == 1
        assert store.exists("/ok") is None, ATOMIC

    def test_invalid_path_in_transaction_applies_nothing(self, store: MetadataStore) -> None:
        with pytest.raises(InvalidPathError) as info:
            store.commit([Create("/fine", b""), Create("bad", b"")])
        assert info.value.op_index == 1
        assert store.exists("/fine") is None, ATOMIC

    def test_transaction_builder(self, store: MetadataStore) -> None:
        store.create("/t", b"")
        results = (
            store.transaction().create("/t/1", b"1").set("/t", b"parent").check("/t", 1).commit()
        )
        assert results[0] == "/t/1"
        assert store.get("/t")[0] == b"parent"

    @requires(Capability.EPHEMERAL_NODES)
    def test_ephemeral_created_in_transaction_belongs_to_session(
        self, store: MetadataStore, other: MetadataStore
    ) -> None:
        store.commit([Create("/eph", b"", ephemeral=True)])
        assert other.exists("/eph").ephemeral_owner == store.session_id  # type: ignore[union-attr]
        store.close()
        assert other.exists("/eph") is None

    def test_concurrent_version_checked_updates_lose_nothing(
        self, open_session: StoreFactory
    ) -> None:
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

    @requires(Capability.SEQUENTIAL_NODES)
    def test_failed_transaction_consumes_no_sequence_number(self, store: MetadataStore) -> None:
        store.create("/q", b"")
        with pytest.raises(NoNodeError):
            store.commit([Create("/q/job-", b"", sequential=True), SetData("/absent", b"")])
        assert store.children("/q") == [], ATOMIC
        assert store.create("/q/job-", b"", sequential=True) == "/q/job-0000000000", (
            "a failed commit must consume no sequence number"
        )

    # -- set_many: version-checked sets as columns, one transaction -----------------------------

    def test_set_many_sets_every_node_behind_its_checks_and_returns_their_stats(
        self, store: MetadataStore
    ) -> None:
        _epoch_and_nodes(store, "/a", "/b", "/c")
        store.set("/b", b"1")
        written = store.set_many(
            ["/a", "/b", "/c"], [b"a", b"b", b"c"], [0, 1, ANY_VERSION], checks=[Check("/epoch", 0)]
        )
        assert len(written) == 3
        assert written.column("version") == [1, 2, 1]
        assert [s.version for s in written] == [1, 2, 1]
        for path, stat in zip(["/a", "/b", "/c"], written, strict=True):
            data, now = store.get(path)
            assert data == path[1:].encode()
            assert stat == now, "set_many returns each node's stat as the store holds it"
        assert written.column("mzxid") == [s.mzxid for s in written]
        assert store.set_many([], [], []).column("version") == []

    def test_set_many_with_a_stale_version_changes_nothing_and_names_the_op(
        self, store: MetadataStore
    ) -> None:
        _epoch_and_nodes(store, "/a", "/b", "/c")
        before = snapshot(store)
        with pytest.raises(BadVersionError) as info:
            store.set_many(
                ["/a", "/b", "/c"], [b"x", b"y", b"z"], [0, 0, 5], checks=[Check("/epoch", 0)]
            )
        assert info.value.op_index == 3, "op_index counts the checks first"
        assert info.value.path == "/c"
        assert snapshot(store) == before, ATOMIC

    def test_set_many_behind_a_failed_check_changes_nothing(self, store: MetadataStore) -> None:
        store.create("/epoch", b"1")
        store.set("/epoch", b"2")
        store.create("/a", b"0")
        before = snapshot(store)
        with pytest.raises(BadVersionError) as info:
            store.set_many(["/a"], [b"x"], [0], checks=[Check("/epoch", 0)])
        assert info.value.op_index == 0
        assert info.value.path == "/epoch"
        with pytest.raises(NoNodeError) as missing:
            store.set_many(["/a", "/absent"], [b"x", b"y"], [0, 0])
        assert missing.value.op_index == 1
        assert snapshot(store) == before, ATOMIC

    def test_set_many_refuses_bad_input_before_writing(self, store: MetadataStore) -> None:
        store.create("/a", b"0")
        before = snapshot(store)
        with pytest.raises(InvalidPathError) as info:
            store.set_many(["/a", "bad"], [b"x", b"y"], [0, 0])
        assert info.value.op_index == 1
        with pytest.raises(DataTooLargeError) as big:
            store.set_many(["/a"], [b"x" * (MAX_DATA_SIZE + 1)], [0])
        assert big.value.op_index == 0
        with pytest.raises(ValueError, match="2 paths, 1 values"):
            store.set_many(["/a", "/a"], [b"x"], [0, 0])
        assert snapshot(store) == before, ATOMIC


def _epoch_and_nodes(store: MetadataStore, *paths: str) -> None:
    """``/epoch`` and ``paths``, each at version 0."""
    store.create("/epoch", b"1")
    for path in paths:
        store.create(path, b"0")

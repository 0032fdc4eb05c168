"""The store contract: pipelined bulk reads and writes give one result or error per op, in order."""

from __future__ import annotations

from coordkit.store import (
    BadVersionError,
    Check,
    Create,
    Delete,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
    SetData,
    Stat,
)
from coordkit.testing.store.base import StoreSuite


class StoreBulkTests(StoreSuite):
    """Pipelined bulk reads and writes give one result or error per op, in order."""

    def test_get_many_returns_results_in_order_with_errors_in_place(
        self, store: MetadataStore
    ) -> None:
        store.create("/a", b"1")
        store.create("/c", b"3")
        results = store.get_many(["/a", "/b", "/c"])
        assert results[0][0] == b"1"  # type: ignore[index]
        assert isinstance(results[1], NoNodeError)
        assert results[1].path == "/b"
        assert results[2][0] == b"3"  # type: ignore[index]

    def test_get_many_of_many_nodes(self, store: MetadataStore) -> None:
        store.create("/p", b"")
        store.apply([Create(f"/p/{i}", str(i).encode()) for i in range(2000)])
        results = store.get_many([f"/p/{i}" for i in range(2000)])
        assert [r[0] for r in results] == [str(i).encode() for i in range(2000)]  # type: ignore[index]

    def test_apply_is_not_atomic_and_reports_each_op(self, store: MetadataStore) -> None:
        store.create("/exists", b"")
        results = store.apply(
            [
                Create("/one", b"1"),
                Create("/exists", b""),
                SetData("/one", b"2", 0),
                SetData("/one", b"3", 0),
                Delete("/exists"),
                Check("/one", 1),
            ]
        )
        assert results[0] == "/one"
        assert isinstance(results[1], NodeExistsError)
        assert results[1].op_index == 1
        assert isinstance(results[2], Stat)
        assert isinstance(results[3], BadVersionError)
        assert results[4] is None
        assert results[5] is None
        assert store.get("/one")[0] == b"2"
        assert store.exists("/exists") is None

    def test_apply_empty_and_get_many_empty(self, store: MetadataStore) -> None:
        assert store.apply([]) == []
        assert store.get_many([]) == []

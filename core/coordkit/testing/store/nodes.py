"""The store contract: creating, reading, updating and deleting nodes."""

from __future__ import annotations

import pytest

from coordkit.store import (
    MAX_DATA_SIZE,
    BadVersionError,
    DataTooLargeError,
    InvalidPathError,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    StoreError,
)
from coordkit.testing.backends import Capability, requires
from coordkit.testing.store.base import StoreSuite


class StoreNodeTests(StoreSuite):
    """Creating, reading, updating and deleting nodes."""

    def test_create_then_get_returns_data_and_version_zero(self, store: MetadataStore) -> None:
        assert store.create("/a", b"hello") == "/a"
        data, stat = store.get("/a")
        assert data == b"hello"
        assert stat.version == 0
        assert stat.data_length == 5
        assert stat.num_children == 0
        assert not stat.ephemeral

    def test_create_empty_value_by_default(self, store: MetadataStore) -> None:
        store.create("/empty")
        assert store.get("/empty")[0] == b""

    def test_create_existing_node_raises_node_exists_naming_path(
        self, store: MetadataStore
    ) -> None:
        store.create("/dup", b"1")
        with pytest.raises(NodeExistsError) as info:
            store.create("/dup", b"2")
        assert info.value.path == "/dup"
        assert store.get("/dup")[0] == b"1"

    def test_create_without_parent_raises_no_node(self, store: MetadataStore) -> None:
        with pytest.raises(NoNodeError) as info:
            store.create("/missing/child", b"")
        assert "/missing" in str(info.value)
        assert store.exists("/missing") is None

    def test_create_make_parents_creates_every_ancestor(self, store: MetadataStore) -> None:
        store.create("/x/y/z", b"leaf", make_parents=True)
        assert store.get("/x/y/z")[0] == b"leaf"
        assert store.get("/x/y")[0] == b""
        assert store.children("/x") == ["y"]

    @requires(Capability.EPHEMERAL_NODES)
    def test_failed_create_with_make_parents_leaves_no_parents(self, store: MetadataStore) -> None:
        store.create("/p", b"")
        store.create("/p/q", b"", ephemeral=True)
        with pytest.raises(StoreError):
            store.create("/p/q/r/s", b"", make_parents=True)
        assert store.exists("/p/q/r") is None

    @pytest.mark.parametrize(
        "path", ["", "a", "/a/", "//a", "/a//b", "/a/./b", "/a/../b", "/a\x00b", "/a\x01"]
    )
    def test_invalid_paths_are_rejected_naming_the_path(
        self, store: MetadataStore, path: str
    ) -> None:
        with pytest.raises(InvalidPathError) as info:
            store.create(path, b"")
        assert info.value.path == path
        with pytest.raises(InvalidPathError):
            store.get(path)

    def test_oversized_value_is_rejected_and_nothing_created(self, store: MetadataStore) -> None:
        with pytest.raises(DataTooLargeError) as info:
            store.create("/big", b"x" * (MAX_DATA_SIZE + 1))
        assert info.value.path == "/big"
        assert store.exists("/big") is None
        store.create("/big", b"x" * 1000)
        with pytest.raises(DataTooLargeError):
            store.set("/big", b"x" * (MAX_DATA_SIZE + 1))
        assert store.get("/big")[0] == b"x" * 1000

    def test_value_at_the_size_limit_is_accepted(self, store: MetadataStore) -> None:
        store.create("/limit", b"y" * MAX_DATA_SIZE)
        assert len(store.get("/limit")[0]) == MAX_DATA_SIZE

    def test_non_bytes_value_is_a_type_error(self, store: MetadataStore) -> None:
        with pytest.raises(TypeError):
            store.create("/s", "text")  # type: ignore[arg-type]

    def test_get_missing_node_raises_no_node_naming_path(self, store: MetadataStore) -> None:
        with pytest.raises(NoNodeError) as info:
            store.get("/nope")
        assert info.value.path == "/nope"

    def test_exists_returns_stat_or_none(self, store: MetadataStore) -> None:
        assert store.exists("/e") is None
        store.create("/e", b"abc")
        stat = store.exists("/e")
        assert stat is not None
        assert stat.data_length == 3

    def test_root_always_exists(self, store: MetadataStore) -> None:
        assert store.exists("/") is not None
        assert store.children("/") == []

    def test_children_are_sorted_names(self, store: MetadataStore) -> None:
        store.create("/c", b"")
        for name in ["b", "a", "10", "2"]:
            store.create(f"/c/{name}", b"")
        assert store.children("/c") == ["10", "2", "a", "b"]
        assert store.exists("/c").num_children == 4  # type: ignore[union-attr]

    def test_children_of_missing_node_raises_no_node(self, store: MetadataStore) -> None:
        with pytest.raises(NoNodeError):
            store.children("/ghost")

    def test_set_increments_version_and_updates_data(self, store: MetadataStore) -> None:
        created = store.create("/v", b"0")
        assert created == "/v"
        before = store.exists("/v")
        stat = store.set("/v", b"1")
        assert stat.version == 1
        assert store.set("/v", b"2").version == 2
        data, latest = store.get("/v")
        assert data == b"2"
        assert latest.version == 2
        assert before is not None
        assert latest.mzxid > before.mzxid
        assert latest.czxid == before.czxid
        assert latest.mtime >= before.ctime

    def test_set_with_matching_version_succeeds(self, store: MetadataStore) -> None:
        store.create("/cas", b"a")
        assert store.set("/cas", b"b", version=0).version == 1
        assert store.set("/cas", b"c", version=1).version == 2

    def test_set_with_wrong_version_raises_and_keeps_value(self, store: MetadataStore) -> None:
        store.create("/cas", b"a")
        with pytest.raises(BadVersionError) as info:
            store.set("/cas", b"b", version=5)
        assert info.value.path == "/cas"
        data, stat = store.get("/cas")
        assert (data, stat.version) == (b"a", 0)

    def test_set_missing_node_raises_no_node(self, store: MetadataStore) -> None:
        with pytest.raises(NoNodeError):
            store.set("/none", b"x")

    def test_delete_removes_node_and_updates_parent(self, store: MetadataStore) -> None:
        store.create("/d", b"")
        store.create("/d/x", b"")
        cversion = store.exists("/d").cversion  # type: ignore[union-attr]
        store.delete("/d/x")
        assert store.exists("/d/x") is None
        parent = store.exists("/d")
        assert parent is not None
        assert parent.num_children == 0
        assert parent.cversion == cversion + 1

    def test_delete_with_wrong_version_raises_and_keeps_node(self, store: MetadataStore) -> None:
        store.create("/d", b"keep")
        with pytest.raises(BadVersionError):
            store.delete("/d", version=3)
        assert store.get("/d")[0] == b"keep"
        store.delete("/d", version=0)
        assert store.exists("/d") is None

    def test_delete_node_with_children_raises_not_empty(self, store: MetadataStore) -> None:
        store.create("/d/e", b"", make_parents=True)
        with pytest.raises(NotEmptyError) as info:
            store.delete("/d")
        assert info.value.path == "/d"
        assert store.exists("/d/e") is not None

    def test_recursive_delete_removes_the_subtree(self, store: MetadataStore) -> None:
        for path in ["/r/a/1", "/r/a/2", "/r/b"]:
            store.create(path, b"", make_parents=True)
        store.delete("/r", recursive=True)
        assert store.exists("/r") is None
        assert store.children("/") == []

    def test_delete_missing_node_raises_no_node(self, store: MetadataStore) -> None:
        with pytest.raises(NoNodeError):
            store.delete("/ghost")

    def test_writes_are_visible_to_other_sessions(
        self, store: MetadataStore, other: MetadataStore
    ) -> None:
        store.create("/shared", b"one")
        assert other.get("/shared")[0] == b"one"
        other.set("/shared", b"two")
        assert store.get("/shared")[0] == b"two"

    def test_ensure_path_is_idempotent(self, store: MetadataStore) -> None:
        store.ensure_path("/brokers/ids")
        store.ensure_path("/brokers/ids")
        assert store.children("/brokers") == ["ids"]

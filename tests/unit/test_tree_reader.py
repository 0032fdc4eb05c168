"""The one reader of a subtree (coordkit.store.tree): what it reads, how deep, and what it leaves
out when the tree changes under it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from coordkit.errors import NoNodeError
from coordkit.store import read_tree, tree_paths
from coordkit.store.tree import children
from coordkit_memory import MemoryServer, MemoryStore


@pytest.fixture
def store() -> Iterator[MemoryStore]:
    client = MemoryStore.connect(MemoryServer())
    for path, data in [("/a", b"1"), ("/a/b", b"2"), ("/a/b/c", b"3"), ("/a/d", b""), ("/e", b"")]:
        client.create(path, data)
    yield client
    client.close()


def test_read_tree_reads_every_node_parents_first(store: MemoryStore) -> None:
    nodes = read_tree(store, "/a")
    assert {path: data for path, (data, _) in nodes.items()} == {
        "/a": b"1",
        "/a/b": b"2",
        "/a/d": b"",
        "/a/b/c": b"3",
    }
    order = list(nodes)
    assert order.index("/a/b") < order.index("/a/b/c")
    assert nodes["/a/b"][1] == store.exists("/a/b")


def test_read_tree_of_the_root_holds_the_root(store: MemoryStore) -> None:
    assert {"/", "/a", "/e", "/a/b/c"} <= set(read_tree(store))


@pytest.mark.parametrize(
    ("depth", "expected"),
    [(0, {"/a"}), (1, {"/a", "/a/b", "/a/d"}), (None, {"/a", "/a/b", "/a/d", "/a/b/c"})],
)
def test_depth_stops_that_many_levels_below_the_root(
    store: MemoryStore, depth: int | None, expected: set[str]
) -> None:
    assert set(read_tree(store, "/a", depth=depth)) == expected


def test_a_missing_root_is_no_node(store: MemoryStore) -> None:
    with pytest.raises(NoNodeError):
        read_tree(store, "/ghost")
    with pytest.raises(NoNodeError):
        tree_paths(store, "/ghost")


def test_a_node_deleted_during_the_walk_is_left_out(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    listed = store.children

    def children_then_deleted(path: str) -> list[str]:
        # Another session deletes /a/b after /a lists it, before the walk reads it.
        names = listed(path)
        if path == "/a":
            store.delete("/a/b", recursive=True)
        return names

    monkeypatch.setattr(store, "children", children_then_deleted)
    assert set(read_tree(store, "/a")) == {"/a", "/a/d"}


def test_tree_paths_lists_without_reading(store: MemoryStore) -> None:
    found = tree_paths(store, "/a")
    assert set(found) == {"/a", "/a/b", "/a/b/c", "/a/d"}
    assert found.index("/a/b") < found.index("/a/b/c")


def test_children_of_a_missing_node_are_none(store: MemoryStore) -> None:
    assert children(store, "/a") == ["b", "d"]
    assert children(store, "/ghost") == []

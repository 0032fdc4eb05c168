"""Reading a subtree: a node and everything below it, for the tools that show a cluster's tree
(``coordkit tree``), the writers that take a subtree apart, and the tests that compare trees.

The tree is read as it stands while other sessions may be changing it: a node deleted after its
parent listed it is left out, not an error; only a missing root is (``NoNodeError``, as ``get``
raises it).
"""

from __future__ import annotations

from coordkit.errors import NoNodeError
from coordkit.store import paths
from coordkit.store.data_model import Stat
from coordkit.store.interface import MetadataStore


def children(store: MetadataStore, path: str) -> list[str]:
    """``path``'s children; none when the node does not exist."""
    try:
        return store.children(path)
    except NoNodeError:
        return []


def read_tree(
    store: MetadataStore, root: str = "/", *, depth: int | None = None
) -> dict[str, tuple[bytes, Stat]]:
    """``root`` and its descendants, path → ``(data, stat)``, parents before children.

    Read breadth-first with one pipelined ``get_many`` per level, so a large subtree costs a few
    round trips per level rather than one per node; a node whose stat shows no children is not
    listed.

    :param depth: read at most this many levels below ``root`` (0: ``root`` alone; ``None``: all).
    :raises NoNodeError: ``root`` does not exist. Any other store error is raised as it is.
    """
    paths.validate(root)
    out: dict[str, tuple[bytes, Stat]] = {}
    level = [root]
    below = 0
    while level:
        next_level: list[str] = []
        for path, result in zip(level, store.get_many(level), strict=True):
            if isinstance(result, Exception):
                if isinstance(result, NoNodeError) and path != root:
                    continue  # deleted after its parent listed it
                raise result
            out[path] = result
            if result[1].num_children and (depth is None or below < depth):
                next_level.extend(paths.join(path, name) for name in children(store, path))
        level = next_level
        below += 1
    return out


def tree_paths(store: MetadataStore, root: str) -> list[str]:
    """The paths of ``root`` and its descendants, parents before children, from listings alone
    (no node is read: for a caller that wants names, such as one deleting the subtree).

    :raises NoNodeError: ``root`` does not exist.
    """
    paths.validate(root)
    out = [root]
    index = 0
    while index < len(out):
        path = out[index]
        index += 1
        try:
            out.extend(paths.join(path, name) for name in store.children(path))
        except NoNodeError:
            if path == root:
                raise
    return out

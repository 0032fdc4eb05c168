"""Operations on many nodes that ZooKeeper has no single request for: creating a node with its
missing ancestors (one multi), deleting a subtree (level by level, deepest first; not atomic)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kazoo import exceptions as kz
from kazoo.protocol import serialization as proto

from coordkit.errors import BadVersionError, NodeExistsError, NoNodeError, StoreError
from coordkit.store import ANY_VERSION, Create, Op, paths
from coordkit_zookeeper.errors import translate

if TYPE_CHECKING:
    from coordkit_zookeeper.session import ZooKeeperSession


def create_with_parents(store: ZooKeeperSession, op: Create) -> str:
    """Create ``op``'s node and every missing ancestor in one multi: a failure leaves no parents
    behind; an ancestor another client creates meanwhile means trying again."""
    leaf = op.path.rstrip("/") + "/x" if op.path.endswith("/") else op.path
    ancestors = paths.ancestors(leaf)
    # All missing ancestors and the node in one multi: a failure leaves no parents behind.
    for _attempt in range(10):
        found = store._run([proto.Exists(store._full(p), None) for p in ancestors], "exists")
        for path, result in zip(ancestors, found, strict=True):
            if isinstance(result, BaseException):
                raise translate(result, path=path, action="exists", closing=store._closing)
        missing = [p for p, stat in zip(ancestors, found, strict=True) if stat is None]
        ops: list[Op] = [Create(p) for p in missing]
        ops.append(op)
        try:
            results = store._multi(ops, tag=False)
        except StoreError as exc:
            if (
                isinstance(exc, NodeExistsError)
                and exc.op_index is not None
                and exc.op_index < len(missing)
            ):
                continue  # another client created an ancestor meanwhile
            exc.op_index = None  # a plain create, not a transaction
            raise
        created: str = results[-1]
        return created
    raise NodeExistsError("ancestors keep changing under a concurrent writer", path=op.path)


def delete_tree(store: ZooKeeperSession, path: str, version: int) -> None:
    """Delete ``path`` and everything below it (``version`` checks ``path`` itself)."""
    stat = store.exists(path)
    if stat is None:
        raise NoNodeError("no node", path=path)
    if version not in (ANY_VERSION, stat.version):
        raise BadVersionError(f"expected version {version}, node is at {stat.version}", path=path)
    if path == "/":
        raise StoreError("the root node cannot be deleted", path=path)
    # Not atomic (ZooKeeper has no recursive delete): list level by level, delete deepest first.
    levels: list[list[str]] = []
    frontier = [path]
    while frontier:
        listed = store._run([proto.GetChildren(store._full(p), None) for p in frontier], "children")
        below: list[str] = []
        for parent, names in zip(frontier, listed, strict=True):
            if isinstance(names, BaseException):
                if isinstance(names, kz.NoNodeError):
                    continue  # deleted meanwhile
                raise translate(names, path=parent, action="children", closing=store._closing)
            below.extend(paths.join(parent, name) for name in names)
        if below:
            levels.append(below)
        frontier = below
    for level in reversed(levels):
        replies = store._run([proto.Delete(store._full(p), ANY_VERSION) for p in level], "delete")
        for node, reply in zip(level, replies, strict=True):
            if isinstance(reply, BaseException) and not isinstance(reply, kz.NoNodeError):
                raise translate(reply, path=node, action="delete", closing=store._closing)
    store._wait(store._client.delete_async(path, version), path, "delete", version=version)

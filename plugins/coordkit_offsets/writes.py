"""All-or-nothing writes of many nodes, creating what is missing, safe under concurrent writers.

Both offset storages commit many ``path → value`` pairs at once. Each pair is a ``SetData`` when
the node exists and a ``Create`` when it does not (with ``Create`` ops for missing ancestors placed
first), all in one multi. Which ops are needed is read just before, so a concurrent committer or
deleter can invalidate the plan: the multi then fails with ``NodeExistsError`` or ``NoNodeError``,
the store is unchanged, and the plan is re-read and retried. Any other failure (an ephemeral parent,
an oversized value, a lost session) is the caller's: nothing was written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from coordkit.errors import NodeExistsError, NoNodeError, NotEmptyError, StoreError
from coordkit.store import Check, Create, Delete, MetadataStore, Op, SetData, paths, tree_paths

#: How often a plan invalidated by a concurrent writer is re-read before giving up.
DEFAULT_MAX_ATTEMPTS = 10


class ConcurrentModificationError(StoreError):
    """A multi kept failing because other sessions changed the same nodes between read and write."""


def _missing(result: tuple[bytes, object] | StoreError) -> bool:
    if isinstance(result, NoNodeError):
        return True
    if isinstance(result, StoreError):
        raise result
    return False


def plan_upsert(
    store: MetadataStore,
    values: Mapping[str, bytes],
    ancestor_data: Mapping[str, bytes] | None = None,
) -> list[Op]:
    """The ops that make every node of ``values`` hold its value, from one pipelined read.

    :param ancestor_data: what a missing ancestor is created with (empty by default).
    """
    ancestor_data = ancestor_data or {}
    leaves = sorted(values)
    leaf_set = set(leaves)
    ancestors = sorted(
        {a for path in leaves for a in paths.ancestors(path)} - leaf_set,
        key=lambda a: (a.count("/"), a),
    )
    reads = store.get_many([*ancestors, *leaves])
    ops: list[Op] = [
        Create(path, ancestor_data.get(path, b""))
        for path, result in zip(ancestors, reads[: len(ancestors)], strict=True)
        if _missing(result)
    ]
    for path, result in zip(leaves, reads[len(ancestors) :], strict=True):
        if _missing(result):
            ops.append(Create(path, values[path]))
        else:
            ops.append(SetData(path, values[path]))
    return ops


def upsert_atomically(
    store: MetadataStore,
    values: Mapping[str, bytes],
    *,
    what: str,
    ancestor_data: Mapping[str, bytes] | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    fence: Sequence[Check] = (),
) -> None:
    """Write every ``path → value`` of ``values`` in one multi, or nothing.

    :param what: names the request in errors (e.g. ``"commit of group 'g' to /consumers"``).
    :param ancestor_data: what a missing ancestor is created with (empty by default).
    :param fence: checks placed first in the multi; a failed one is raised as it is.
    :raises StoreError: the store refused the multi; nothing was written.
    :raises ConcurrentModificationError: other writers kept invalidating the plan.
    """
    if not values:
        return
    fence = list(fence)
    for _ in range(max_attempts):
        ops = [*fence, *plan_upsert(store, values, ancestor_data)]
        try:
            store.commit(ops)
        except (NodeExistsError, NoNodeError) as exc:
            if exc.op_index is not None and exc.op_index < len(fence):
                raise  # the fence itself: the caller no longer holds what it checked
            continue  # a concurrent writer created or deleted a node after our read
        return
    raise ConcurrentModificationError(
        f"{what}: other sessions kept changing the same nodes; gave up after {max_attempts} "
        "attempts (nothing was written)"
    )


def delete_tree_atomically(
    store: MetadataStore, root: str, *, what: str, max_attempts: int = DEFAULT_MAX_ATTEMPTS
) -> None:
    """Delete ``root`` and everything under it in one multi (no error if it does not exist)."""
    for _ in range(max_attempts):
        try:
            nodes = tree_paths(store, root)
        except NoNodeError:
            return
        ops: Sequence[Op] = [Delete(path) for path in reversed(nodes)]  # children before parents
        try:
            store.commit(ops)
        except (NoNodeError, NotEmptyError):
            continue  # the tree changed under us
        return
    raise ConcurrentModificationError(
        f"{what}: other sessions kept changing {root}; gave up after {max_attempts} attempts"
    )


def delete_nodes_atomically(
    store: MetadataStore,
    wanted: Sequence[str],
    *,
    what: str,
    fence: Sequence[Check] = (),
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
) -> None:
    """Delete those of the leaf nodes ``wanted`` that exist, in one multi after ``fence``."""
    for _ in range(max_attempts):
        present = []
        for path, result in zip(wanted, store.get_many(list(wanted)), strict=True):
            if isinstance(result, NoNodeError):
                continue
            if isinstance(result, StoreError):
                raise result
            present.append(path)
        if not present:
            return
        try:
            store.commit([*fence, *(Delete(path) for path in present)])
        except NoNodeError as exc:
            if exc.op_index is not None and exc.op_index < len(fence):
                raise
            continue  # deleted meanwhile: look again
        return
    raise ConcurrentModificationError(
        f"{what}: other sessions kept changing the nodes; gave up after {max_attempts} attempts"
    )

"""The metadata store contract itself: :class:`MetadataStore`, the abstract session every backend
implements, and :class:`Transaction`, the builder of its multi-operation commits."""

from __future__ import annotations

import abc
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Self

from coordkit.errors import (
    NodeExistsError,
    StoreError,
    UnsupportedError,
)
from coordkit.store import paths

if TYPE_CHECKING:
    from coordkit.store.urls import StoreURL

from coordkit.store.data_model import (
    ANY_VERSION,
    ReadOnlyError,
    SessionState,
    Stat,
    StatColumns,
    StoreCharacteristics,
)
from coordkit.store.events import (
    ChildrenCallback,
    DataCallback,
    SessionListener,
    TreeCallback,
    TreeWatch,
    Watch,
)
from coordkit.store.ops import Check, Create, Delete, Op, SetData, check_set_columns, set_many_ops

# -- the store ----------------------------------------------------------------------------------


class MetadataStore(abc.ABC):
    """A client session on a ZooKeeper-shaped tree of versioned nodes.

    Watches are level-triggered and persistent: a callback first receives the current state, then
    the new state after changes. Rapid changes may be coalesced, but a watcher always ends on the
    latest state, states arrive in commit order, and after a reconnect the store re-reads every
    watched node and delivers what changed while it was away. Callbacks and session listeners run
    one at a time on the store's event thread.
    """

    url: StoreURL
    characteristics: StoreCharacteristics
    #: Opened with ``read_only=True``: opening created nothing (no chroot, no session keys) and
    #: every write method raises :class:`ReadOnlyError`.
    read_only: bool = False

    # -- session
    @property
    @abc.abstractmethod
    def session_id(self) -> int:
        """The current session's id (changes after the session is lost)."""

    @property
    @abc.abstractmethod
    def state(self) -> SessionState: ...

    @abc.abstractmethod
    def add_listener(self, listener: SessionListener) -> None:
        """Call ``listener(state)`` on the event thread after every session state change."""

    @abc.abstractmethod
    def remove_listener(self, listener: SessionListener) -> None: ...

    @abc.abstractmethod
    def close(self) -> None:
        """End the session (its ephemeral nodes are deleted) and stop the event thread."""

    # -- single operations
    @abc.abstractmethod
    def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> str:
        """Create a node; returns its path (with the sequence suffix for sequential nodes)."""

    @abc.abstractmethod
    def get(self, path: str) -> tuple[bytes, Stat]: ...

    @abc.abstractmethod
    def exists(self, path: str) -> Stat | None: ...

    @abc.abstractmethod
    def children(self, path: str) -> list[str]:
        """Names (not paths) of the children, sorted."""

    @abc.abstractmethod
    def set(self, path: str, data: bytes, version: int = ANY_VERSION) -> Stat: ...

    @abc.abstractmethod
    def delete(self, path: str, version: int = ANY_VERSION, *, recursive: bool = False) -> None: ...

    # -- multi-operations
    @abc.abstractmethod
    def commit(self, ops: Sequence[Op]) -> list[Any]:
        """Apply ``ops`` atomically: all or none.

        :returns: one result per op — the created path for :class:`Create`, the new :class:`Stat`
            for :class:`SetData`, ``None`` for :class:`Delete` and :class:`Check`.
        :raises StoreError: the failing op's own error type, with ``op_index`` set; the store is
            unchanged.
        """

    def set_many(
        self,
        paths_: Sequence[str],
        data: Sequence[bytes],
        versions: Sequence[int],
        *,
        checks: Sequence[Check] = (),
    ) -> StatColumns:
        """Set many nodes at once, atomically: ``commit([*checks, *sets])`` with a
        :class:`SetData` per ``(path, data, version)``, given as columns so that a backend can
        encode 100,000s of version-checked writes without an object per write (a controller's
        bulk state writes).

        :returns: the new stats of the set nodes (not of the checks), as columns.
        :raises StoreError: as :meth:`commit`, ``op_index`` counting the checks first; the store
            is unchanged.
        """
        check_set_columns(paths_, data, versions)
        return StatColumns.of(
            self.commit(set_many_ops(paths_, data, versions, checks))[len(checks) :]
        )

    def transaction(self) -> Transaction:
        return Transaction(self)

    @abc.abstractmethod
    def get_many(self, paths_: Sequence[str]) -> list[tuple[bytes, Stat] | StoreError]:
        """Read many nodes in one pipelined exchange; a missing node yields a ``NoNodeError``."""

    @abc.abstractmethod
    def apply(self, ops: Sequence[Op]) -> list[Any]:
        """Apply independent ops pipelined, not atomically: one result or error per op, in order."""

    # -- watches
    @abc.abstractmethod
    def watch_data(self, path: str, callback: DataCallback) -> Watch: ...

    @abc.abstractmethod
    def watch_children(self, path: str, callback: ChildrenCallback) -> Watch: ...

    def watch_tree(
        self, path: str, callback: TreeCallback, *, since: int | None = None
    ) -> TreeWatch:
        """Follow every create, change and delete at or below ``path``, in commit order.

        ``callback`` gets :class:`TreeEvent` s on the event thread, one at a time, positions never
        decreasing. The feed opens with a RESYNC event at the position it starts from (read the
        subtree, then apply what follows with :meth:`TreeEvent.newer_than`), unless it resumes:
        with ``since`` (a position from an earlier event of this store), a store with
        ``change_feed_history`` replays exactly the changes after it; without (ZooKeeper: unless
        nothing at all was committed since), or when ``since`` is older than the history kept or
        newer than the store, the feed opens with RESYNC instead. A RESYNC later in the feed
        (session lost, connection cut on ZooKeeper, history trimmed) means the same: re-read,
        then go on. Without history, events carry the node's state when the client read it; a
        node created or changed and deleted again before that read is still reported, without
        its state (:attr:`TreeEvent.state_known`), then as DELETED.

        :raises UnsupportedError: the store lacks ``ordered_change_feed``.
        :raises ConnectionLossError: the client is not connected (nothing was registered).
        """
        self.require("ordered_change_feed")
        raise UnsupportedError(f"{type(self).__name__} declares a change feed but has none")

    # -- conveniences shared by all backends
    def ensure_path(self, path: str) -> None:
        """Create ``path`` and any missing ancestors as empty persistent nodes."""
        paths.validate(path)
        if path == paths.ROOT or self.exists(path) is not None:
            return
        try:
            self.create(path, b"", make_parents=True)
        except NodeExistsError:
            pass

    def check_writable(self, action: str, path: str | None = None) -> None:
        """Raise :class:`ReadOnlyError` if the store was opened read-only (backends call this
        first in every write method)."""
        if self.read_only:
            raise ReadOnlyError(
                f"cannot {action}: {self.url.redacted()} was opened read-only", path=path
            )

    def require(self, *characteristics: str) -> None:
        """Raise :class:`UnsupportedError` unless the backend has every named characteristic."""
        missing = self.characteristics.missing(*characteristics)
        if missing:
            raise UnsupportedError(
                f"store {self.url.redacted()} lacks {', '.join(missing)}"
                + (f" ({self.characteristics.notes})" if self.characteristics.notes else "")
            )

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.url.redacted()} session={self.session_id:#x} {self.state.value}>"


class Transaction:
    """Builder for an atomic multi-op: ``store.transaction().check(...).set(...).commit()``."""

    def __init__(self, store: MetadataStore):
        self._store = store
        self.ops: list[Op] = []

    def create(
        self, path: str, data: bytes = b"", *, ephemeral: bool = False, sequential: bool = False
    ) -> Self:
        self.ops.append(Create(path, data, ephemeral, sequential))
        return self

    def set(self, path: str, data: bytes, version: int = ANY_VERSION) -> Self:
        self.ops.append(SetData(path, data, version))
        return self

    def delete(self, path: str, version: int = ANY_VERSION) -> Self:
        self.ops.append(Delete(path, version))
        return self

    def check(self, path: str, version: int) -> Self:
        self.ops.append(Check(path, version))
        return self

    def extend(self, ops: Iterable[Op]) -> Self:
        self.ops.extend(ops)
        return self

    def commit(self) -> list[Any]:
        return self._store.commit(self.ops)

"""The metadata store contract: ZooKeeper's data model, because Kafka's layout assumes it.

Every backend (memory, ZooKeeper, Redis) implements :class:`MetadataStore`; the contract suite in
``tests/contract`` holds them all to the same behaviour. Errors come from :mod:`coordkit.errors` and
are re-exported here.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Self, overload

import attrs

from coordkit import paths
from coordkit.errors import (
    AuthFailedError,
    BadVersionError,
    ConnectionLossError,
    DataTooLargeError,
    InvalidPathError,
    NoAuthError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
    StoreClosedError,
    StoreError,
    UnsupportedError,
)

if TYPE_CHECKING:
    from coordkit.urls import StoreURL

__all__ = [
    "ANY_VERSION",
    "MAX_DATA_SIZE",
    "AuthFailedError",
    "BadVersionError",
    "Check",
    "ChildrenEvent",
    "ConnectionLossError",
    "Create",
    "DataEvent",
    "DataTooLargeError",
    "Delete",
    "InvalidPathError",
    "MetadataStore",
    "NoAuthError",
    "NoChildrenForEphemeralsError",
    "NoNodeError",
    "NodeExistsError",
    "NotEmptyError",
    "Op",
    "ReadOnlyError",
    "SessionExpiredError",
    "SessionState",
    "SetData",
    "Stat",
    "StatColumns",
    "StoreCharacteristics",
    "StoreClosedError",
    "StoreError",
    "Transaction",
    "TreeCallback",
    "TreeEvent",
    "TreeEventKind",
    "TreeWatch",
    "UnsupportedError",
    "Watch",
]

ANY_VERSION = -1


class ReadOnlyError(StoreError):
    """A write on a store opened with ``read_only=True`` (nothing was sent)."""


#: Largest node value every backend accepts: ZooKeeper's default jute.maxbuffer is 1 MiB including
#: request framing, so a round 1,000,000 bytes keeps all backends identical.
MAX_DATA_SIZE = 1_000_000


class SessionState(enum.Enum):
    """Client session state, as Kafka's ZooKeeper client saw it."""

    CONNECTED = "connected"
    SUSPENDED = "suspended"  # connection lost, session may still be alive
    LOST = "lost"  # session expired: ephemerals gone; a new session follows
    CLOSED = "closed"  # closed by its owner


@attrs.frozen
class Stat:
    """Node metadata, field for field ZooKeeper's ``Stat``."""

    czxid: int
    mzxid: int
    pzxid: int
    ctime: int
    mtime: int
    version: int
    cversion: int
    aversion: int
    ephemeral_owner: int
    data_length: int
    num_children: int

    @property
    def ephemeral(self) -> bool:
        return self.ephemeral_owner != 0


_STAT_FIELDS = tuple(field.name for field in attrs.fields(Stat))


class StatColumns(Sequence[Stat]):
    """The stats of many nodes as columns, one list of ints per :class:`Stat` field: what
    :meth:`MetadataStore.set_many` returns. A :class:`Stat` is built only for an item asked for;
    a caller that needs one field of 100,000 stats reads :meth:`column`."""

    __slots__ = ("_columns", "_size")

    def __init__(self, columns: dict[str, list[int]]):
        sizes = {len(values) for values in columns.values()}
        if set(columns) != set(_STAT_FIELDS) or len(sizes) != 1:
            raise ValueError(f"stat columns need the fields {_STAT_FIELDS}, all of one length")
        self._columns = columns
        self._size = sizes.pop()

    @classmethod
    def of(cls, stats: Iterable[Stat]) -> StatColumns:
        """Columns of ``stats`` (the generic way; backends may build the columns directly)."""
        listed = list(stats)
        return cls({name: [getattr(s, name) for s in listed] for name in _STAT_FIELDS})

    def column(self, name: str) -> list[int]:
        """One field of every stat, in order (``"version"``, ``"mzxid"``, ...)."""
        return self._columns[name]

    def __len__(self) -> int:
        return self._size

    @overload
    def __getitem__(self, index: int) -> Stat: ...
    @overload
    def __getitem__(self, index: slice) -> list[Stat]: ...
    def __getitem__(self, index: int | slice) -> Stat | list[Stat]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._size))]
        columns = self._columns
        return Stat(*(columns[name][index] for name in _STAT_FIELDS))

    def __repr__(self) -> str:
        return f"StatColumns({self._size} stats)"


@attrs.frozen
class StoreCharacteristics:
    """What a backend guarantees, so a caller can refuse one that lacks something it needs."""

    linearizable_writes: bool
    durable: bool
    shared_across_processes: bool
    ephemeral_nodes: bool = True
    sequential_nodes: bool = True
    reliable_watches: bool = True
    #: :meth:`MetadataStore.watch_tree` works: every change below a path, in commit order, with
    #: positions (see :class:`TreeEvent`).
    ordered_change_feed: bool = False
    #: The change feed resumes from a past position by replaying what followed it, and each event
    #: carries the state its own change wrote (without it: RESYNC on resume, and events carry the
    #: node's state when the client read it).
    change_feed_history: bool = False
    #: Clients on other machines share the tree, its sessions and watches: the store is a network
    #: service (false for an in-process store or one that lives in a machine's files).
    multi_host: bool = False
    max_data_size: int = MAX_DATA_SIZE
    notes: str = ""

    def missing(self, *required: str) -> list[str]:
        unknown = [name for name in required if not hasattr(self, name)]
        if unknown:
            raise ValueError(f"unknown store characteristic(s): {', '.join(unknown)}")
        return [name for name in required if not getattr(self, name)]


# -- operations ---------------------------------------------------------------------------------


@attrs.frozen
class Create:
    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequential: bool = False


@attrs.frozen
class SetData:
    path: str
    data: bytes
    version: int = ANY_VERSION


@attrs.frozen
class Delete:
    path: str
    version: int = ANY_VERSION


@attrs.frozen
class Check:
    path: str
    version: int


Op = Create | SetData | Delete | Check


# -- watches ------------------------------------------------------------------------------------


@attrs.frozen
class DataEvent:
    """The state of a watched node: ``stat is None`` when the node does not exist."""

    path: str
    data: bytes | None
    stat: Stat | None

    @property
    def exists(self) -> bool:
        return self.stat is not None


@attrs.frozen
class ChildrenEvent:
    """The children of a watched node: ``children is None`` when the node does not exist."""

    path: str
    children: tuple[str, ...] | None
    stat: Stat | None

    @property
    def exists(self) -> bool:
        return self.children is not None


class Watch(abc.ABC):
    """A registered watch; :meth:`cancel` stops further deliveries."""

    path: str

    @abc.abstractmethod
    def cancel(self) -> None: ...


DataCallback = Callable[[DataEvent], Any]
ChildrenCallback = Callable[[ChildrenEvent], Any]
SessionListener = Callable[[SessionState], Any]


# -- change feeds -------------------------------------------------------------------------------


class TreeEventKind(enum.Enum):
    """What a :class:`TreeEvent` reports."""

    CREATED = "created"
    CHANGED = "changed"
    DELETED = "deleted"
    #: Changes may have been missed (the feed started, a session or connection was lost, history
    #: was trimmed): re-read the subtree; every change after the event's position follows.
    RESYNC = "resync"


def _check_position(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{attribute.name} must be a non-negative int, got {value!r}")


@attrs.frozen
class TreeEvent:
    """One entry of a change feed (:meth:`MetadataStore.watch_tree`).

    ``position`` is a point in the store's history (ZooKeeper's zxid; memory's own counter; Redis's
    global revision), never decreasing along a feed:

    * CREATED / CHANGED: ``data`` and ``stat`` are the node's state at ``position`` (at least as
      new as the change reported; exactly the change's own state where the store keeps history,
      ``change_feed_history``). A store without history reads the state after the notice; if
      the node was deleted again before that read, both are None (:attr:`state_known` is False)
      and its DELETED follows.
    * DELETED: the node was deleted at or before ``position`` (exactly at it with history).
    * RESYNC: no ``data``/``stat``; everything after ``position`` follows, anything up to it may
      have been missed.
    """

    kind: TreeEventKind = attrs.field(validator=attrs.validators.instance_of(TreeEventKind))
    path: str = attrs.field(validator=attrs.validators.instance_of(str))
    position: int = attrs.field(validator=_check_position)
    data: bytes | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(bytes))
    )
    stat: Stat | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(Stat))
    )

    def __attrs_post_init__(self) -> None:
        has_state = self.kind in (TreeEventKind.CREATED, TreeEventKind.CHANGED)
        if (self.data is None) != (self.stat is None) and has_state:
            raise ValueError(f"{self.path}: a {self.kind.value} event needs both data and stat")
        if not has_state and (self.data is not None or self.stat is not None):
            raise ValueError(f"{self.path}: a {self.kind.value} event carries no data or stat")

    @property
    def state_known(self) -> bool:
        """Whether a CREATED/CHANGED event carries the node's state (False: the node was gone
        before the store could read it; its DELETED follows)."""
        return self.stat is not None

    def newer_than(self, held: Stat | None) -> bool:
        """Whether this event changes an image that holds the node at ``held`` (None: absent),
        the rule for merging a feed with a read of the tree: a state newer than the held one,
        or a delete after it. RESYNC is always news."""
        return self.newer_than_mzxid(None if held is None else held.mzxid)

    def newer_than_mzxid(self, held: int | None) -> bool:
        """:meth:`newer_than` for an image that keeps only the ``mzxid`` of what it holds (None:
        absent): the rule compares nothing else."""
        match self.kind:
            case TreeEventKind.RESYNC:
                return True
            case TreeEventKind.DELETED:
                return held is not None and held < self.position
        if self.stat is None:
            return False  # gone before it could be read: the DELETED that follows is the news
        return held is None or held < self.stat.mzxid


class TreeWatch(Watch):
    """A running change feed: :meth:`cancel` stops it, :meth:`flush` waits for it to catch up."""

    #: Position of the last event delivered to the callback (None before the first).
    position: int | None = None

    @abc.abstractmethod
    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every change the client had been told of when called has been delivered to
        the callback (False on timeout). After a write on the same client returns, this covers
        every change below the path committed before that write (run from a callback, it
        delivers what is waiting first)."""


TreeCallback = Callable[[TreeEvent], Any]


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


def check_set_columns(
    paths_: Sequence[str], data: Sequence[bytes], versions: Sequence[int]
) -> None:
    """Refuse :meth:`MetadataStore.set_many` columns of different lengths."""
    if not len(paths_) == len(data) == len(versions):
        raise ValueError(
            f"set_many: {len(paths_)} paths, {len(data)} values and {len(versions)} versions"
        )


def set_many_ops(
    paths_: Sequence[str], data: Sequence[bytes], versions: Sequence[int], checks: Sequence[Check]
) -> list[Op]:
    """The ops of :meth:`MetadataStore.set_many` as one :meth:`~MetadataStore.commit` takes them
    (the checks first)."""
    return [*checks, *map(SetData, paths_, data, versions)]


def check_data(path: str, data: bytes, limit: int = MAX_DATA_SIZE) -> bytes:
    """Validate a node value before any backend sends it."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(f"{path}: node data must be bytes, got {type(data).__name__}")
    if len(data) > limit:
        raise DataTooLargeError(
            f"value of {len(data):,} bytes exceeds the {limit:,}-byte limit", path=path
        )
    return bytes(data)


def describe_op(op: Op) -> str:
    """A short human description of an op for error messages."""
    match op:
        case Create(path=p, ephemeral=e, sequential=s):
            kind = "ephemeral " if e else ""
            return f"create {kind}{'sequential ' if s else ''}{p}"
        case SetData(path=p, version=v):
            return f"set {p}" + (f" at version {v}" if v != ANY_VERSION else "")
        case Delete(path=p, version=v):
            return f"delete {p}" + (f" at version {v}" if v != ANY_VERSION else "")
        case Check(path=p, version=v):
            return f"check {p} is at version {v}"
    raise TypeError(f"not a store operation: {op!r}")

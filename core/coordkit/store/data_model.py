"""ZooKeeper's data model as every backend keeps it: versions, node stats (one by one or as
columns), session states, the size limit, and what a backend guarantees."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, overload

import attrs

from coordkit.errors import (
    StoreError,
)

if TYPE_CHECKING:
    pass


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

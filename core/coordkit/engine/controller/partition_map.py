"""The controller's partitions and assignments as mappings that a standby's image can back without
a Python object per partition (issue 16: a 2,000,000-partition failover must not build 2,000,000
objects before it can act).

:class:`PartitionMap` is ``TP → PartitionInfo``. Partitions loaded from the store (a cold load)
and partitions the controller has touched are plain :class:`PartitionInfo` objects; partitions a
warm hand-over brought are rows of per-topic numpy columns (:class:`TopicColumns`, lent by the
image) until something reads one: then it becomes a :class:`PartitionInfo` for good, and the row is
marked taken. Readers see one mapping; what needs work is found by :meth:`PartitionMap.needing_attention`,
a vectorised query over the columns plus a loop over the objects (few, after a warm hand-over).

A hand-over does not even build the columns of every topic: the image lends its topics as they
are (:class:`LentTopics`), and a topic becomes :class:`TopicColumns` when something first reads or
writes one of its partitions, or a scan's brokers are named in it (the lender's index by
broker). A failover that concerns a few topics touches those topics, not the cluster's thousands
(issue 16: failover flat in size).

:class:`~.assignment_map.AssignmentMap` (its own module) is the same for assignments.

The row format (:data:`STATE_DTYPE`, the status codes) is shared with :mod:`.image`.
"""

from __future__ import annotations

import operator
from collections.abc import (
    Collection,
    Iterable,
    Iterator,
    Mapping,
    MutableMapping,
    Sequence,
)
from typing import Protocol, TypeVar, overload

import numpy as np

from coordkit.engine.states import TP, LeaderIsr

STATE_DTYPE = np.dtype(
    [
        ("leader", "<i8"),
        ("leader_epoch", "<i8"),
        ("controller_epoch", "<i8"),
        ("zk_version", "<i8"),
        ("mzxid", "<i8"),
        ("isr", "<i4"),  # index into the image's table of ISR tuples
        ("status", "i1"),
    ]
)
#: Status of a partition's state node in a row.
ABSENT, READABLE, UNREADABLE, UNKNOWN = 0, 1, 2, 3

Replicas = tuple[int, ...]
_T = TypeVar("_T")
_first = operator.itemgetter(0)


class PartitionInfo:
    """A partition's replica assignment and its state as last read or written."""

    __slots__ = ("replicas", "state")

    def __init__(self, replicas: Replicas, state: LeaderIsr | None = None):
        self.replicas = replicas
        self.state = state


def needs_attention(part: PartitionInfo, live: frozenset[int]) -> bool:
    """Whether a liveness pass could plan a write for ``part``: no state yet, a leader outside
    ``live``, or an ISR naming a broker outside ``live``."""
    state = part.state
    if state is None:
        return True
    return state.leader not in live or not live.issuperset(state.isr)


class TopicColumns:
    """One topic's partitions ``0..n-1`` as an image held them at hand-over (never written: a
    partition that changes leaves the columns for a :class:`PartitionInfo`).

    :param replicas: replicas of each partition (interned tuples, shared with the image).
    :param states: rows of :data:`STATE_DTYPE` (a copy: the image keeps following its feed).
    :param table: the ISR tuples the rows' ``isr`` field indexes (append-only).
    :param census: when every row is READABLE, the brokers the rows name as leader or ISR member
        (-1 for no leader); ``None`` when unknown or some row is not READABLE. A liveness scan
        skips the topic when the census is within the live brokers.
    """

    __slots__ = ("census", "remaining", "replicas", "states", "table", "taken")

    def __init__(
        self,
        replicas: Sequence[Replicas],
        states: np.ndarray,
        table: Sequence[Replicas],
        census: frozenset[int] | None = None,
    ):
        if len(replicas) != len(states):
            raise ValueError(f"{len(replicas)} replica lists for {len(states)} state rows")
        self.replicas = replicas
        self.states = states
        self.table = table
        self.census = census
        #: Rows that became objects (or were removed).
        self.taken = np.zeros(len(states), dtype=bool)
        self.remaining = len(states)

    def has(self, partition: int) -> bool:
        return 0 <= partition < len(self.taken) and not self.taken[partition]

    def info(self, partition: int) -> PartitionInfo:
        row = self.states[partition]
        replicas = self.replicas[partition]
        if int(row["status"]) != READABLE:
            return PartitionInfo(replicas)
        state = LeaderIsr(
            int(row["leader"]),
            int(row["leader_epoch"]),
            self.table[int(row["isr"])],
            int(row["controller_epoch"]),
            int(row["zk_version"]),
        )
        return PartitionInfo(replicas, state)

    def rows(
        self, chosen: np.ndarray | None = None
    ) -> Iterator[tuple[int, Replicas, LeaderIsr | None]]:
        """``(partition, replicas, state)`` of the rows not taken (or of the row numbers
        ``chosen``, the caller's pick among them), without keeping objects."""
        rows = np.flatnonzero(~self.taken) if chosen is None else chosen
        picked = self.states[rows]  # whole columns to Python at once: row access is slow
        table = self.table
        replicas = self.replicas
        for partition, status, leader, epoch, c_epoch, version, isr in zip(
            rows.tolist(),
            picked["status"].tolist(),
            picked["leader"].tolist(),
            picked["leader_epoch"].tolist(),
            picked["controller_epoch"].tolist(),
            picked["zk_version"].tolist(),
            picked["isr"].tolist(),
            strict=True,
        ):
            state = (
                LeaderIsr(leader, epoch, table[isr], c_epoch, version)
                if status == READABLE
                else None
            )
            yield partition, replicas[partition], state


class LentTopics(Protocol):
    """Topics a standby's image lent at hand-over, each whole and regular (every partition
    ``0..n-1`` has a READABLE state), read-only from then on (the image copies a topic before
    changing it)."""

    def names(self) -> Collection[str]:
        """The topics lent."""
        ...

    def replicas(self, topic: str) -> Sequence[Replicas]:
        """Replicas of the topic's partitions ``0..n-1``."""
        ...

    def mzxid(self, topic: str) -> int:
        """mzxid of the topic's assignment node."""
        ...

    def naming(self) -> Mapping[int, Collection[str]]:
        """By broker (-1: no leader), the topics whose states name it as leader or ISR member
        (the union of their censuses, inverted: a scan looks up dead brokers, not topics)."""
        ...

    def rows(self, topic: str) -> int:
        """The topic's partition count."""
        ...

    def columns(self, topic: str) -> TopicColumns:
        """The topic as columns (built on each call)."""
        ...


class LentNames:
    """The topics a lender lent that one map still takes from it: the lender's own (immutable)
    collection of names and the few taken back since, so lending costs no copy of the names."""

    __slots__ = ("_gone", "_names")

    def __init__(self) -> None:
        self._names: Collection[str] = ()
        self._gone: set[str] = set()

    def lend(self, names: Collection[str]) -> None:
        if self._names:
            raise ValueError("topics are lent once")
        self._names = names

    def __contains__(self, topic: object) -> bool:
        return topic in self._names and topic not in self._gone

    def take(self, topic: str) -> bool:
        """Stop taking ``topic`` from the lender; whether it was lent here until now."""
        if topic in self:
            self._gone.add(topic)
            return True
        return False

    def __len__(self) -> int:
        return len(self._names) - len(self._gone)

    def __iter__(self) -> Iterator[str]:
        gone = self._gone
        return (topic for topic in self._names if topic not in gone)


class PartitionMap(MutableMapping[TP, PartitionInfo]):
    """``TP → PartitionInfo``, partly backed by :class:`TopicColumns` (see the module doc).

    Reading a column row (``parts[tp]``, ``parts.get(tp)``, ``items()``) turns it into an object
    kept in the map, so an update made through it is never lost; full read-only scans use
    :meth:`states`, which keeps nothing.
    """

    def __init__(self) -> None:
        self._objects: dict[TP, PartitionInfo] = {}
        self._columns: dict[str, TopicColumns] = {}
        self._in_columns = 0
        #: Topics lent and not yet turned into columns (see :meth:`add_lent`).
        self._lent_names = LentNames()
        self._lent: LentTopics | None = None
        #: Their partitions, counted when first asked (a walk of the lent topics), then kept.
        self._lent_rows: int | None = None

    # -- loading -------------------------------------------------------------------------------

    def add_lent(self, lent: LentTopics) -> None:
        """Back the partitions of the topics ``lent`` names by it, each topic turned into columns
        when first needed (one lender per map: a warm hand-over fills a fresh map)."""
        if self._lent is not None:
            raise ValueError("a partition map takes topics from one lender")
        names = lent.names()
        taken = [topic for topic in self._columns if topic in names]
        if taken:
            raise ValueError(f"{sorted(taken)[0]}: already backed by columns")
        self._lent = lent
        self._lent_names.lend(names)
        # Objects already held for a lent topic win over its rows: bring those topics in now.
        for topic in sorted({tp[0] for tp in self._objects if tp[0] in names}):
            self._lent_names.take(topic)
            self.add_columns(topic, lent.columns(topic))

    def _column(self, topic: str) -> TopicColumns | None:
        """``topic``'s columns, built now if it was lent and not yet needed."""
        columns = self._columns.get(topic)
        if columns is None and self._lent_names.take(topic):
            assert self._lent is not None
            if self._lent_rows is not None:
                self._lent_rows -= self._lent.rows(topic)
            # No object of a lent topic exists (setting one builds the topic first): no scan
            # of the objects for it, which may be many by then.
            columns = self._lent.columns(topic)
            self._install(topic, columns)
        return columns

    def _build_naming(self, brokers: Iterable[int]) -> None:
        """Build the lent topics whose states name any of ``brokers`` (the lender's index)."""
        assert self._lent is not None
        naming = self._lent.naming()
        for broker in brokers:
            for topic in sorted(t for t in naming.get(broker, ()) if t in self._lent_names):
                self._column(topic)

    def _all_columns(self) -> dict[str, TopicColumns]:
        """Every topic's columns, the lent ones built (for whole scans)."""
        for topic in sorted(self._lent_names):
            self._column(topic)
        return self._columns

    def add_columns(self, topic: str, columns: TopicColumns) -> None:
        """Back ``topic``'s partitions ``0..n-1`` by ``columns`` (objects already held win)."""
        if topic in self._columns or topic in self._lent_names:
            raise ValueError(f"{topic}: already backed by columns")
        for tp in [tp for tp in self._objects if tp[0] == topic] if self._objects else []:
            if columns.has(tp[1]):
                columns.taken[tp[1]] = True
                columns.remaining -= 1
        self._install(topic, columns)

    def _install(self, topic: str, columns: TopicColumns) -> None:
        if columns.remaining:
            self._columns[topic] = columns
            self._in_columns += columns.remaining

    @property
    def in_columns(self) -> int:
        """Partitions still held as column rows, lent ones included (the rest are objects)."""
        lent = self._lent
        if lent is None:
            return self._in_columns
        if self._lent_rows is None:
            self._lent_rows = sum(lent.rows(topic) for topic in self._lent_names)
        return self._in_columns + self._lent_rows

    @property
    def lent_topics(self) -> int:
        """Topics lent at hand-over and not built into columns yet."""
        return len(self._lent_names)

    def _take(self, topic: str, columns: TopicColumns, partition: int) -> None:
        columns.taken[partition] = True
        columns.remaining -= 1
        self._in_columns -= 1
        if not columns.remaining:
            del self._columns[topic]

    # -- the mapping ---------------------------------------------------------------------------

    def __getitem__(self, tp: TP) -> PartitionInfo:
        part = self._objects.get(tp)
        if part is not None:
            return part
        columns = self._column(tp[0])
        if columns is None or not columns.has(tp[1]):
            raise KeyError(tp)
        part = self._objects[tp] = columns.info(tp[1])
        self._take(tp[0], columns, tp[1])
        return part

    @overload
    def get(self, tp: TP, /) -> PartitionInfo | None: ...
    @overload
    def get(self, tp: TP, /, default: PartitionInfo | _T) -> PartitionInfo | _T: ...
    def get(self, tp: TP, /, default: object = None) -> object:
        # Mapping.get goes through __getitem__ and a KeyError: the objects first, directly.
        part = self._objects.get(tp)
        if part is not None:
            return part
        try:
            return self[tp]
        except KeyError:
            return default

    def __contains__(self, tp: object) -> bool:
        if tp in self._objects:
            return True
        if not isinstance(tp, tuple) or len(tp) != 2 or not isinstance(tp[0], str):
            return False
        columns = self._column(tp[0])
        return columns is not None and isinstance(tp[1], int) and columns.has(tp[1])

    def __setitem__(self, tp: TP, part: PartitionInfo) -> None:
        columns = self._column(tp[0])
        if columns is not None and columns.has(tp[1]):
            self._take(tp[0], columns, tp[1])
        self._objects[tp] = part

    def __delitem__(self, tp: TP) -> None:
        if tp in self._objects:
            del self._objects[tp]
            return
        columns = self._column(tp[0])
        if columns is None or not columns.has(tp[1]):
            raise KeyError(tp)
        self._take(tp[0], columns, tp[1])

    def __len__(self) -> int:
        return len(self._objects) + self.in_columns

    def __iter__(self) -> Iterator[TP]:
        # A snapshot: reading a row while iterating moves it between the two holders.
        objects = list(self._objects)
        pending = [(t, np.flatnonzero(~c.taken)) for t, c in self._all_columns().items()]
        yield from objects
        for topic, rows in pending:
            for partition in rows.tolist():
                yield (topic, partition)

    def forget_topic(self, topic: str, partitions: Sequence[int]) -> None:
        """Remove ``topic``'s ``partitions`` (its columns at once)."""
        if self._lent_names.take(topic) and self._lent_rows is not None:
            assert self._lent is not None
            self._lent_rows -= self._lent.rows(topic)
        columns = self._columns.pop(topic, None)
        if columns is not None:
            self._in_columns -= columns.remaining
        for partition in partitions:
            self._objects.pop((topic, partition), None)

    # -- scans ---------------------------------------------------------------------------------

    def states(self) -> Iterator[tuple[TP, Replicas, LeaderIsr | None]]:
        """``(tp, replicas, state)`` of every partition, keeping no object for column rows (for
        read-only scans; a state must be changed through ``parts[tp]``)."""
        for tp, part in list(self._objects.items()):
            yield tp, part.replicas, part.state
        for topic, columns in list(self._all_columns().items()):
            for partition, replicas, state in columns.rows():
                yield (topic, partition), replicas, state

    def object_states(self) -> Iterator[tuple[TP, Replicas, LeaderIsr | None]]:
        """:meth:`states` of the partitions held as objects only."""
        for tp, part in list(self._objects.items()):
            yield tp, part.replicas, part.state

    def column_topics(self) -> list[tuple[str, TopicColumns]]:
        """Topics with rows still in columns (rows marked ``taken`` are objects now)."""
        return list(self._all_columns().items())

    def needing_attention(self, live: frozenset[int]) -> list[TP]:
        """Partitions a liveness pass may have to write (:func:`needs_attention`): without state,
        led by a broker outside ``live``, or with an ISR naming one. Column rows are queried with
        numpy (leader not in ``live``, ISR index among the tuples naming a dead broker)."""
        out = [tp for tp, part in self._objects.items() if needs_attention(part, live)]
        if self._lent_names:
            assert self._lent is not None
            # Lent topics are regular: only those naming a broker outside ``live`` can need
            # work, and only those are built.
            self._build_naming([b for b in self._lent.naming() if b not in live])
        if not self._columns:
            return out
        # Liveness by lookup (ids shifted by one: slot 0 is NO_LEADER and anything out of range),
        # cheaper per topic than np.isin's sort.
        top = max((b for b in live if b >= 0), default=-1) + 2
        alive = np.zeros(top + 1, dtype=bool)
        alive[[b + 1 for b in live if b >= 0]] = True
        dead_isr: dict[int, np.ndarray] = {}  # by id(table): which ISR tuples name a dead broker
        for topic, columns in self._columns.items():
            if columns.census is not None and columns.census <= live:
                continue  # every row readable, led and followed by live brokers only
            table = columns.table
            bad = dead_isr.get(id(table))
            if bad is None or len(bad) < len(table):
                bad = dead_isr[id(table)] = np.fromiter(
                    (not live.issuperset(isr) for isr in list(table)), dtype=bool
                )
            rows = columns.states
            need = ~alive[np.clip(rows["leader"] + 1, 0, top)]
            need |= rows["status"] != READABLE
            need |= bad[rows["isr"]]
            need &= ~columns.taken
            if need.any():
                out.extend((topic, partition) for partition in np.flatnonzero(need).tolist())
        return out

    def naming(self, broker: int, *, as_leader_only: bool = False) -> list[TP]:
        """Partitions whose state names ``broker`` as leader (or ISR member, unless
        ``as_leader_only``): what a controlled shutdown of ``broker`` has to change. Column rows
        are queried with numpy; topics whose census does not name ``broker`` are skipped."""
        out = [tp for tp, _part in self._naming_objects(broker, as_leader_only)]
        out.extend(self._naming_rows(broker, as_leader_only))
        return out

    def naming_parts(self, broker: int) -> list[tuple[TP, PartitionInfo]]:
        """:meth:`naming` (leader or ISR member) with each partition's object, sorted by
        partition: a controlled shutdown plans from these without looking each one up again
        (column rows become objects here, as the plans would make them)."""
        out = self._naming_objects(broker, False)
        out.extend((tp, self[tp]) for tp in self._naming_rows(broker, False))
        out.sort(key=_first)
        return out

    def _naming_objects(self, broker: int, as_leader_only: bool) -> list[tuple[TP, PartitionInfo]]:
        return [
            (tp, part)
            for tp, part in self._objects.items()
            if part.state is not None
            and (part.state.leader == broker or (not as_leader_only and broker in part.state.isr))
        ]

    def _naming_rows(self, broker: int, as_leader_only: bool) -> list[TP]:
        out: list[TP] = []
        if self._lent_names:
            self._build_naming([broker])
        in_isr: dict[int, np.ndarray] = {}  # by id(table): which ISR tuples name the broker
        for topic, columns in self._columns.items():
            if columns.census is not None and broker not in columns.census:
                continue
            rows = columns.states
            need = rows["leader"] == broker
            if not as_leader_only:
                table = columns.table
                named = in_isr.get(id(table))
                if named is None or len(named) < len(table):
                    named = in_isr[id(table)] = np.fromiter(
                        (broker in isr for isr in list(table)), dtype=bool
                    )
                need |= named[rows["isr"]]
            need &= rows["status"] == READABLE
            need &= ~columns.taken
            if need.any():
                out.extend((topic, partition) for partition in np.flatnonzero(need).tolist())
        return out

    def nbytes(self) -> int:
        """Bytes of the column rows and masks (objects not counted; lent topics count when
        built)."""
        return sum(c.states.nbytes + c.taken.nbytes for c in self._columns.values())

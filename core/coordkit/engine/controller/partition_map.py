"""The controller's partitions and assignments as mappings that a standby's image can back without
a Python object per partition (issue 16: a 2,000,000-partition failover must not build 2,000,000
objects before it can act).

:class:`PartitionMap` is ``TP → PartitionInfo``. Partitions loaded from the store (a cold load)
and partitions the controller has touched are plain :class:`PartitionInfo` objects; partitions a
warm hand-over brought are rows of per-topic numpy columns (:class:`TopicColumns`, copied from the
image) until something reads one: then it becomes a :class:`PartitionInfo` for good, and the row is
marked taken. Readers see one mapping; what needs work is found by :meth:`PartitionMap.needing_attention`,
a vectorised query over the columns plus a loop over the objects (few, after a warm hand-over).

:class:`AssignmentMap` is ``topic → {partition: replicas}``, each topic's dict built on first
access from the image's list of replica tuples.

The row format (:data:`STATE_DTYPE`, the status codes) is shared with :mod:`.image`.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping, Sequence

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

    # -- loading -------------------------------------------------------------------------------

    def add_columns(self, topic: str, columns: TopicColumns) -> None:
        """Back ``topic``'s partitions ``0..n-1`` by ``columns`` (objects already held win)."""
        if topic in self._columns:
            raise ValueError(f"{topic}: already backed by columns")
        for tp in [tp for tp in self._objects if tp[0] == topic] if self._objects else []:
            if columns.has(tp[1]):
                columns.taken[tp[1]] = True
                columns.remaining -= 1
        if columns.remaining:
            self._columns[topic] = columns
            self._in_columns += columns.remaining

    @property
    def in_columns(self) -> int:
        """Partitions still held as column rows (the rest are objects)."""
        return self._in_columns

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
        columns = self._columns.get(tp[0])
        if columns is None or not columns.has(tp[1]):
            raise KeyError(tp)
        part = self._objects[tp] = columns.info(tp[1])
        self._take(tp[0], columns, tp[1])
        return part

    def __contains__(self, tp: object) -> bool:
        if tp in self._objects:
            return True
        if not isinstance(tp, tuple) or len(tp) != 2:
            return False
        columns = self._columns.get(tp[0])
        return columns is not None and isinstance(tp[1], int) and columns.has(tp[1])

    def __setitem__(self, tp: TP, part: PartitionInfo) -> None:
        columns = self._columns.get(tp[0])
        if columns is not None and columns.has(tp[1]):
            self._take(tp[0], columns, tp[1])
        self._objects[tp] = part

    def __delitem__(self, tp: TP) -> None:
        if tp in self._objects:
            del self._objects[tp]
            return
        columns = self._columns.get(tp[0])
        if columns is None or not columns.has(tp[1]):
            raise KeyError(tp)
        self._take(tp[0], columns, tp[1])

    def __len__(self) -> int:
        return len(self._objects) + self._in_columns

    def __iter__(self) -> Iterator[TP]:
        # A snapshot: reading a row while iterating moves it between the two holders.
        objects = list(self._objects)
        pending = [(t, np.flatnonzero(~c.taken)) for t, c in self._columns.items()]
        yield from objects
        for topic, rows in pending:
            for partition in rows.tolist():
                yield (topic, partition)

    def forget_topic(self, topic: str, partitions: Sequence[int]) -> None:
        """Remove ``topic``'s ``partitions`` (its columns at once)."""
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
        for topic, columns in list(self._columns.items()):
            for partition, replicas, state in columns.rows():
                yield (topic, partition), replicas, state

    def object_states(self) -> Iterator[tuple[TP, Replicas, LeaderIsr | None]]:
        """:meth:`states` of the partitions held as objects only."""
        for tp, part in list(self._objects.items()):
            yield tp, part.replicas, part.state

    def column_topics(self) -> list[tuple[str, TopicColumns]]:
        """Topics with rows still in columns (rows marked ``taken`` are objects now)."""
        return list(self._columns.items())

    def needing_attention(self, live: frozenset[int]) -> list[TP]:
        """Partitions a liveness pass may have to write (:func:`needs_attention`): without state,
        led by a broker outside ``live``, or with an ISR naming one. Column rows are queried with
        numpy (leader not in ``live``, ISR index among the tuples naming a dead broker)."""
        out = [tp for tp, part in self._objects.items() if needs_attention(part, live)]
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
        out = [
            tp
            for tp, part in self._objects.items()
            if part.state is not None
            and (part.state.leader == broker or (not as_leader_only and broker in part.state.isr))
        ]
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
        """Bytes of the column rows and masks (objects not counted)."""
        return sum(c.states.nbytes + c.taken.nbytes for c in self._columns.values())


class AssignmentMap(MutableMapping[str, dict[int, Replicas]]):
    """``topic → {partition: replicas}``; a topic handed over as a list of replica tuples (its
    partitions ``0..n-1``) becomes a dict on first access."""

    def __init__(self) -> None:
        self._topics: dict[str, dict[int, Replicas] | Sequence[Replicas]] = {}

    def add_list(self, topic: str, replicas: Sequence[Replicas]) -> None:
        self._topics[topic] = replicas

    def __getitem__(self, topic: str) -> dict[int, Replicas]:
        held = self._topics[topic]
        if isinstance(held, dict):
            return held
        built = self._topics[topic] = dict(enumerate(held))
        return built

    def __contains__(self, topic: object) -> bool:
        return topic in self._topics

    def __setitem__(self, topic: str, assignment: dict[int, Replicas]) -> None:
        self._topics[topic] = assignment

    def __delitem__(self, topic: str) -> None:
        del self._topics[topic]

    def __len__(self) -> int:
        return len(self._topics)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._topics))

    def partitions(self, topic: str) -> Sequence[int]:
        """Partition numbers of ``topic`` (without building its dict)."""
        held = self._topics.get(topic)
        if held is None:
            return []
        return list(held) if isinstance(held, dict) else range(len(held))

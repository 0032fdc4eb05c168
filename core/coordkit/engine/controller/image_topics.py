"""The columns a :class:`~.image.MetadataImage` keeps per topic, and what it lends a controller.

* :class:`ImageTopic` — one topic: its replica lists (interned tuples), a numpy structured array of
  its partition states (:data:`~.partition_map.STATE_DTYPE`), the states that do not fit the
  columns (:class:`LooseState`), and its count of partitions led and followed per broker;
* :class:`TupleTable` — the distinct ISR tuples, each stored once and named by an index;
* :class:`BrokerIndex` — broker → the topics that name it (lent to the context as it is, copied
  before the image next changes it);
* :class:`LentImageTopics` — what :meth:`~.image.MetadataImage.fill` hands the controller's
  context.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import numpy as np

from coordkit.engine.controller.partition_map import (
    ABSENT,
    READABLE,
    STATE_DTYPE,
    UNKNOWN,
    TopicColumns,
)
from coordkit.engine.states import LeaderIsr

#: The states of a topic with no partition yet.
EMPTY = np.zeros(0, dtype=STATE_DTYPE)
#: Positions of fields in a row read with ``.item()``.
FIELDS: tuple[str, ...] = STATE_DTYPE.names or ()
LEADER, MZXID, ISR, STATUS = (FIELDS.index(n) for n in ("leader", "mzxid", "isr", "status"))


class TupleTable:
    """Interned replica and ISR tuples, each with an index (the ``isr`` column holds it);
    append-only, so a context holding the table may read it while the image grows it."""

    __slots__ = ("ids", "table")

    def __init__(self) -> None:
        self.table: list[tuple[int, ...]] = [()]
        self.ids: dict[tuple[int, ...], int] = {(): 0}

    def index(self, value: tuple[int, ...]) -> int:
        found = self.ids.get(value)
        if found is None:
            found = self.ids[value] = len(self.table)
            self.table.append(value)
        return found

    def intern(self, value: tuple[int, ...]) -> tuple[int, ...]:
        return self.table[self.index(value)]


class LooseState:
    """A partition state kept outside the columns."""

    __slots__ = ("mzxid", "reason", "state", "status")

    def __init__(self, status: int, mzxid: int, state: LeaderIsr | None, reason: str | None):
        self.status = status
        self.mzxid = mzxid
        self.state = state
        self.reason = reason


class BrokerIndex:
    """By broker (-1: no leader), the topics whose census names it; lent to a hand-over as it is
    and copied before its next change (so a hand-over copies nothing)."""

    __slots__ = ("by_broker", "lent")

    def __init__(self) -> None:
        self.by_broker: dict[int, set[str]] = {}
        self.lent = False

    def lend(self) -> dict[int, set[str]]:
        self.lent = True
        return self.by_broker

    def _own(self) -> dict[int, set[str]]:
        if self.lent:
            self.by_broker = {broker: set(names) for broker, names in self.by_broker.items()}
            self.lent = False
        return self.by_broker

    def add(self, broker: int, topic: str) -> None:
        self._own().setdefault(broker, set()).add(topic)

    def discard(self, broker: int, topic: str) -> None:
        named = self.by_broker.get(broker)
        if named is None or topic not in named:
            return
        by_broker = self._own()
        named = by_broker[broker]
        named.discard(topic)
        if not named:
            del by_broker[broker]


class ImageTopic:
    """One topic: its assignment node and its partition states, columnar.

    Beside the rows it keeps their census, exact at every write: how many times each broker is
    named as a READABLE row's leader or ISR member (``census``), and how many rows are not
    READABLE (``irregular``). A hand-over gives the census to the controller, which skips the
    topic in a liveness scan when every broker it names is live and every row is readable — so a
    failover that concerns no broker of a topic costs nothing per partition of it (issue 16: a
    2,000,000-partition failover must not scale with the cluster).
    """

    __slots__ = (
        "census",
        "error",
        "generation",
        "irregular",
        "loose",
        "mzxid",
        "name",
        "naming",
        "reasons",
        "replicas",
        "shared",
        "sparse",
        "states",
    )

    def __init__(self, name: str, mzxid: int, generation: int, naming: BrokerIndex):
        self.name = name
        #: The image's index, by broker, of the topics whose census names it (kept by
        #: :meth:`_count` as keys appear and go).
        self.naming = naming
        self.mzxid = mzxid
        #: The image's lending generation this object was made in (see ``MetadataImage._writable``).
        self.generation = generation
        #: Replicas of partitions 0..n-1 (interned tuples), or None (unreadable or not dense).
        #: A tuple, not a list: a tuple of interned tuples of ints leaves the garbage collector's
        #: view after one collection, so a 2,000,000-partition image adds nothing to the full
        #: collections of its process (as lists it added 14 ms to each, at any moment).
        self.replicas: tuple[tuple[int, ...], ...] | None = None
        #: A readable assignment whose partitions are not 0..n-1 (rare; its states are loose).
        self.sparse: dict[int, tuple[int, ...]] | None = None
        #: Why the assignment is unreadable (None: readable).
        self.error: str | None = None
        self.states: np.ndarray = EMPTY
        #: ``states`` is shared with a lent copy of this topic: copy the array before writing.
        self.shared = False
        self.loose: dict[int, LooseState] = {}
        #: Why an UNREADABLE column state is unreadable, by partition.
        self.reasons: dict[int, str] = {}
        #: Broker id (-1: no leader) → times a READABLE row names it as leader or ISR member.
        self.census: dict[int, int] = {}
        #: Rows whose status is not READABLE.
        self.irregular = 0

    def copy(self, generation: int) -> ImageTopic:
        """A writable copy, sharing the (copy-on-write) array and the interned tuples."""
        twin = ImageTopic(self.name, self.mzxid, generation, self.naming)
        twin.replicas = self.replicas  # replaced, never changed in place
        twin.sparse = None if self.sparse is None else dict(self.sparse)
        twin.error = self.error
        twin.states = self.states
        twin.shared = True
        twin.loose = dict(self.loose)
        twin.reasons = dict(self.reasons)
        twin.census = dict(self.census)
        twin.irregular = self.irregular
        return twin

    @property
    def regular(self) -> bool:
        """Readable, dense, and every partition's state READABLE in the columns (a hand-over can
        lend it as it is)."""
        replicas = self.replicas
        return (
            self.error is None
            and replicas is not None
            and len(replicas) > 0
            and not self.irregular
            and not self.loose
            and len(self.states) == len(replicas)
        )

    def create_columns(self, count: int) -> None:
        """Columns for partitions 0..count-1 of a new topic: no state node yet (ABSENT)."""
        self.states = np.zeros(count, dtype=STATE_DTYPE)
        self.shared = False
        self.forget_census()
        self.irregular = count

    def forget_census(self) -> None:
        """Empty the census (and take the topic out of the image's index)."""
        self.leave_index()
        self.census = {}

    def leave_index(self) -> None:
        """Take the topic out of the image's index, its census kept (a lent topic going)."""
        for broker in self.census:
            self._unname(broker)

    def _unname(self, broker: int) -> None:
        self.naming.discard(broker, self.name)

    def _count(self, leader: int, isr: tuple[int, ...], step: int) -> None:
        census = self.census
        for broker in (leader, *isr):
            held = census.get(broker, 0)
            left = held + step
            if left:
                census[broker] = left
                if not held:
                    self.naming.add(broker, self.name)
            else:
                del census[broker]
                self._unname(broker)

    def _uncount_row(self, partition: int, table: Sequence[tuple[int, ...]]) -> None:
        row = self.states[partition].item()
        if row[STATUS] == READABLE:
            self._count(row[LEADER], table[row[ISR]], -1)
        else:
            self.irregular -= 1

    def assignment(self) -> dict[int, tuple[int, ...]] | None:
        if self.replicas is not None:
            return dict(enumerate(self.replicas))
        return None if self.sparse is None else dict(self.sparse)

    def resize(self, count: int, tuples: TupleTable) -> None:
        """Columns for partitions 0..count-1: new ones are UNKNOWN (their state node may predate
        the assignment naming them) unless the feed brought their state already."""
        have = len(self.states)
        if count <= have:
            return
        grown = np.zeros(count, dtype=STATE_DTYPE)
        grown[:have] = self.states
        grown["status"][have:] = UNKNOWN
        self.states = grown
        self.shared = False
        self.irregular += count - have
        for partition in [p for p in self.loose if have <= p < count]:
            held = self.loose.pop(partition)
            self.put(partition, held.status, held.mzxid, held.state, held.reason, tuples)

    def status_and_mzxid(self, partition: int) -> tuple[int, int | None]:
        """``(status, mzxid of the state held)`` of one partition, the row read once (the feed
        asks this of every state event); the mzxid is None without a state held."""
        loose = self.loose.get(partition)
        if loose is not None:
            if loose.status in (ABSENT, UNKNOWN):
                return loose.status, None
            return loose.status, loose.mzxid
        if 0 <= partition < len(self.states):
            row = self.states[partition].item()  # one conversion, not one per field
            status = row[STATUS]
            return status, None if status in (ABSENT, UNKNOWN) else row[MZXID]
        return ABSENT, None

    def put(
        self,
        partition: int,
        status: int,
        mzxid: int,
        state: LeaderIsr | None,
        reason: str | None,
        tuples: TupleTable,
    ) -> None:
        self.reasons.pop(partition, None)
        if 0 <= partition < len(self.states):
            self.loose.pop(partition, None)
            if self.shared:
                # Copy on write: the context filled from this array keeps the rows it was given.
                self.states = self.states.copy()
                self.shared = False
            self._uncount_row(partition, tuples.table)
            try:
                if state is not None:
                    self.states[partition] = (
                        state.leader,
                        state.leader_epoch,
                        state.controller_epoch,
                        state.zk_version,
                        mzxid,
                        tuples.index(state.isr),
                        status,
                    )
                else:
                    self.states[partition] = (0, 0, 0, 0, mzxid, 0, status)
                    if reason is not None:
                        self.reasons[partition] = reason
            except OverflowError:
                self.states[partition] = (0, 0, 0, 0, 0, 0, UNKNOWN)  # held loose below
                self.irregular += 1
            else:
                if status != READABLE:
                    self.irregular += 1
                elif state is not None:
                    self._count(state.leader, state.isr, +1)
                else:
                    self._count(0, (), +1)  # as the row reads back
                return
        if status == ABSENT:
            self.loose.pop(partition, None)
        else:
            self.loose[partition] = LooseState(status, mzxid, state, reason)

    def get(
        self, partition: int, table: Sequence[tuple[int, ...]]
    ) -> tuple[int, LeaderIsr | None, str | None]:
        """``(status, state, reason)`` of one partition."""
        loose = self.loose.get(partition)
        if loose is not None:
            return loose.status, loose.state, loose.reason
        if not 0 <= partition < len(self.states):
            return ABSENT, None, None
        row = self.states[partition]
        status = int(row["status"])
        if status != READABLE:
            return status, None, self.reasons.get(partition)
        state = LeaderIsr(
            int(row["leader"]),
            int(row["leader_epoch"]),
            table[int(row["isr"])],
            int(row["controller_epoch"]),
            int(row["zk_version"]),
        )
        return status, state, None


class LentImageTopics:
    """Regular topics a hand-over lent, as the context's partition map takes them
    (:class:`~.partition_map.LentTopics`); the image never changes these objects again."""

    __slots__ = ("_naming", "_table", "_topics")

    def __init__(
        self,
        topics: dict[str, ImageTopic],
        table: Sequence[tuple[int, ...]],
        naming: dict[int, set[str]],
    ):
        self._topics = topics
        self._table = table
        self._naming = naming

    def naming(self) -> Mapping[int, Collection[str]]:
        return self._naming

    def names(self) -> Collection[str]:
        return self._topics.keys()

    def replicas(self, topic: str) -> Sequence[tuple[int, ...]]:
        replicas = self._topics[topic].replicas
        assert replicas is not None
        return replicas

    def mzxid(self, topic: str) -> int:
        return self._topics[topic].mzxid

    def rows(self, topic: str) -> int:
        return len(self._topics[topic].states)

    def columns(self, topic: str) -> TopicColumns:
        lent = self._topics[topic]
        assert lent.replicas is not None
        return TopicColumns(lent.replicas, lent.states, self._table, frozenset(lent.census))

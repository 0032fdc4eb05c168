"""A standby controller's image of the cluster: brokers, topics and partition states, kept current
by the store's change feed (:meth:`~coordkit.store.MetadataStore.watch_tree` on ``/brokers``).

A ``warm-standby`` candidate keeps one (KRaft's standby controllers hold the metadata log the same
way), so that on winning the election its controller fills :class:`~.context.ControllerContext`
from memory instead of reading every partition state from the store (:meth:`MetadataImage.fill`).

Merging a feed with reads follows :meth:`~coordkit.store.TreeEvent.newer_than` (by mzxid): the
feed opens with RESYNC (and says RESYNC again after a lost session or a trimmed history); the
image then buffers what follows, re-reads the subtree with bulk reads (:meth:`MetadataImage.sync`,
on the owner's thread, never the store's event thread), replaces its contents with the read and
replays the buffer, keeping only events newer than what the read returned. Events of a store without
history that carry no state (``state_known`` False) are skipped: their DELETED follows.

Representation (the image must fit 2,000,000 partitions): per topic, one numpy structured array
of the partition states (:data:`~.partition_map.STATE_DTYPE`: leader, leader epoch, controller
epoch, node version, mzxid, ISR as an index into a table of the distinct ISR tuples, status: 45
bytes a partition) and a tuple of interned replica tuples (the same few tuples are shared by every
partition that has them; tuples, which the garbage collector stops walking). States that do not
fit the columns (a partition the assignment does not name yet, a number beyond 64 bits) live in a
small per-topic dict. :meth:`MetadataImage.nbytes`
reports the size; the readable API is :meth:`MetadataImage.brokers`,
:meth:`MetadataImage.topics`, :meth:`MetadataImage.partition_state` and :meth:`fill`.

:meth:`fill` lends the topics to the context as they are (no copy and no object per partition;
each hand-over starts a new generation, and the image copies a topic of an earlier generation
before it next changes it, so the context keeps what it was given): the context's
:class:`~.partition_map.PartitionMap` builds a topic's columns when it first needs them, turns a
row into an object only when the controller reads it, and finds the partitions needing work with
a vectorised query, so a hand-over costs no Python work per partition, and none per topic for the
topics the failover does not concern.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from coordkit import layout
from coordkit.engine import states
from coordkit.engine.controller.partition_map import (
    ABSENT,
    READABLE,
    STATE_DTYPE,
    UNKNOWN,
    UNREADABLE,
    PartitionInfo,
    TopicColumns,
)
from coordkit.engine.states import TP, LeaderIsr
from coordkit.errors import LayoutError, NoNodeError, StoreError
from coordkit.store import MetadataStore, Stat, TreeEvent, TreeEventKind

if TYPE_CHECKING:
    from coordkit.engine.controller.context import ControllerContext

log = logging.getLogger("coordkit.engine.controller")

#: What an image follows: the brokers' registrations and the topics with their partition states.
ROOT = "/brokers"

_BROKER_PREFIX = layout.BROKER_IDS + "/"
_TOPIC_PREFIX = layout.BROKER_TOPICS + "/"
_EMPTY = np.zeros(0, dtype=STATE_DTYPE)
#: ``(topic, mzxid)`` of a changed assignment node (mzxid None: deleted); ``(None, None)``: any.
AssignmentListener = Callable[[str | None, int | None], None]
#: Positions of fields in a row read with ``.item()``.
_FIELDS: tuple[str, ...] = STATE_DTYPE.names or ()
_LEADER, _MZXID, _ISR, _STATUS = (_FIELDS.index(n) for n in ("leader", "mzxid", "isr", "status"))


class _Tuples:
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


class _Loose:
    """A partition state kept outside the columns."""

    __slots__ = ("mzxid", "reason", "state", "status")

    def __init__(self, status: int, mzxid: int, state: LeaderIsr | None, reason: str | None):
        self.status = status
        self.mzxid = mzxid
        self.state = state
        self.reason = reason


class _Index:
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


class _Topic:
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

    def __init__(self, name: str, mzxid: int, generation: int, naming: _Index):
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
        self.states: np.ndarray = _EMPTY
        #: ``states`` is shared with a lent copy of this topic: copy the array before writing.
        self.shared = False
        self.loose: dict[int, _Loose] = {}
        #: Why an UNREADABLE column state is unreadable, by partition.
        self.reasons: dict[int, str] = {}
        #: Broker id (-1: no leader) → times a READABLE row names it as leader or ISR member.
        self.census: dict[int, int] = {}
        #: Rows whose status is not READABLE.
        self.irregular = 0

    def copy(self, generation: int) -> _Topic:
        """A writable copy, sharing the (copy-on-write) array and the interned tuples."""
        twin = _Topic(self.name, self.mzxid, generation, self.naming)
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
        if row[_STATUS] == READABLE:
            self._count(row[_LEADER], table[row[_ISR]], -1)
        else:
            self.irregular -= 1

    def assignment(self) -> dict[int, tuple[int, ...]] | None:
        if self.replicas is not None:
            return dict(enumerate(self.replicas))
        return None if self.sparse is None else dict(self.sparse)

    def resize(self, count: int, tuples: _Tuples) -> None:
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
            status = row[_STATUS]
            return status, None if status in (ABSENT, UNKNOWN) else row[_MZXID]
        return ABSENT, None

    def put(
        self,
        partition: int,
        status: int,
        mzxid: int,
        state: LeaderIsr | None,
        reason: str | None,
        tuples: _Tuples,
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
            self.loose[partition] = _Loose(status, mzxid, state, reason)

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


class _Lent:
    """Regular topics a hand-over lent, as the context's partition map takes them
    (:class:`~.partition_map.LentTopics`); the image never changes these objects again."""

    __slots__ = ("_naming", "_table", "_topics")

    def __init__(
        self,
        topics: dict[str, _Topic],
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


class MetadataImage:
    """Brokers, topics and partition states below ``/brokers``, as of :attr:`position`.

    Thread use: :meth:`apply` runs on the store's event thread (the feed's callback);
    :meth:`sync` and :meth:`fill` on the owner's threads; a lock keeps them apart.

    :param read_batch: paths per bulk read when the image re-reads the subtree.
    """

    def __init__(self, *, read_batch: int = 10_000) -> None:
        self.read_batch = read_batch
        self._lock = threading.Lock()
        self._brokers: dict[str, tuple[bytes, int, int]] = {}  # name → (data, czxid, mzxid)
        self._topics: dict[str, _Topic] = {}
        self._tuples = _Tuples()
        #: Bumped by each hand-over: a topic made in an earlier generation may be lent to a
        #: context and is copied before the image changes it (:meth:`_writable`).
        self._generation = 0
        #: Topics not :attr:`_Topic.regular` (kept at every change: a hand-over lends the rest
        #: without looking at each).
        self._irregular: set[str] = set()
        #: By broker (-1: no leader), the topics whose census names it.
        self._naming = _Index()
        #: ``_topics`` is lent to a hand-over as it is: copy it before changing it.
        self._topics_lent = False
        #: Position of the last change applied (None before the first read).
        self.position: int | None = None
        #: Position of a RESYNC not yet followed by a re-read (None: the image is current).
        self._resync_at: int | None = None
        self._buffer: list[TreeEvent] = []
        self._assignment_listeners: list[AssignmentListener] = []
        #: Assignment changes applied under the lock, told to the listeners after it.
        self._untold: list[tuple[str | None, int | None]] = []
        #: Events applied and subtree re-reads done (for tests and reports).
        self.events_applied = 0
        self.reads = 0

    # -- state -----------------------------------------------------------------------------------

    @property
    def current(self) -> bool:
        """Whether every change the feed delivered is applied (no re-read pending)."""
        with self._lock:
            return self._resync_at is None and self.position is not None

    def brokers(self) -> dict[str, tuple[bytes, int]]:
        """Children of ``/brokers/ids``: name → (registration bytes, czxid)."""
        with self._lock:
            return {name: (data, czxid) for name, (data, czxid, _m) in self._brokers.items()}

    def topics(self) -> dict[str, dict[int, tuple[int, ...]] | None]:
        """Each topic's replica assignment (None where its node is unreadable)."""
        with self._lock:
            return {name: topic.assignment() for name, topic in self._topics.items()}

    def partition_state(self, tp: TP) -> LeaderIsr | None:
        """The state of ``tp`` (None: no state node, or one that does not decode)."""
        with self._lock:
            topic = self._topics.get(tp[0])
            return None if topic is None else topic.get(tp[1], self._tuples.table)[1]

    def partitions(self) -> int:
        """Partitions the assignments name."""
        with self._lock:
            return sum(
                len(t.replicas or t.sparse or ()) for t in self._topics.values() if not t.error
            )

    def nbytes(self) -> int:
        """Bytes of the columns and of the per-partition lists (interned tuples counted once)."""
        with self._lock:
            total = 0
            for topic in self._topics.values():
                total += topic.states.nbytes + 8 * len(topic.replicas or ())
            return total + 8 * len(self._tuples.table)

    def topic_names(self) -> list[str]:
        with self._lock:
            return list(self._topics)

    # -- following assignments ---------------------------------------------------------------------

    def follow_assignments(self, listener: AssignmentListener) -> Callable[[], None]:
        """Call ``listener(topic, mzxid)`` after the feed changed a topic's assignment node
        (``mzxid`` None: deleted) and ``listener(None, None)`` after a re-read (any topic may have
        changed), on the thread that applied it, outside the image's lock. A controller handed
        the image follows its topics this way, created and deleted ones included, instead of one
        store watch per topic (thousands at millions of partitions, each a round trip) and a
        watch on ``/brokers/topics`` (each delivery a read of every topic's name). Returns the
        function that stops the calls."""
        with self._lock:
            self._assignment_listeners.append(listener)

        def stop() -> None:
            with self._lock:
                if listener in self._assignment_listeners:
                    self._assignment_listeners.remove(listener)

        return stop

    def _tell(self) -> None:
        with self._lock:
            untold, self._untold = self._untold, []
            listeners = list(self._assignment_listeners)
        for topic, mzxid in untold:
            for listener in listeners:
                listener(topic, mzxid)

    # -- the feed (store event thread) -----------------------------------------------------------

    def apply(self, event: TreeEvent) -> bool:
        """Apply one feed event; True when it asks for a re-read (call :meth:`sync`)."""
        with self._lock:
            if event.kind is TreeEventKind.RESYNC:
                self._resync_at = event.position
                self._buffer = []
                return True
            if self._resync_at is not None:
                self._buffer.append(event)
                return False
            self._apply(event)
            if not self._untold:
                return False
        self._tell()
        return False

    def _apply(self, event: TreeEvent) -> None:
        self.position = event.position
        self.events_applied += 1
        path = event.path
        if path.startswith(_BROKER_PREFIX):
            name = path[len(_BROKER_PREFIX) :]
            if "/" in name:
                return
            held = self._brokers.get(name)
            if not event.newer_than_mzxid(None if held is None else held[2]):
                return
            if event.kind is TreeEventKind.DELETED:
                del self._brokers[name]
            elif event.data is not None and event.stat is not None:
                self._brokers[name] = (event.data, event.stat.czxid, event.stat.mzxid)
            return
        if not path.startswith(_TOPIC_PREFIX):
            return
        rest = path[len(_TOPIC_PREFIX) :]
        if "/" not in rest:
            self._topic_event(rest, event)
            return
        tp = states.parse_state_path(path)
        if tp is None:
            return
        topic = self._topics.get(tp[0])
        if topic is None:
            return  # a child event for a topic gone (its DELETED came first)
        status, held_at = topic.status_and_mzxid(tp[1])
        if status != UNKNOWN and not event.newer_than_mzxid(held_at):
            return
        topic = self._writable(tp[0], topic)
        if event.kind is TreeEventKind.DELETED:
            topic.put(tp[1], ABSENT, 0, None, None, self._tuples)
        elif event.data is not None and event.stat is not None:
            self._put_state(topic, tp, event.data, event.stat, self._tuples)
        # A state write changes only the rows: a regular topic that stays so needs no look.
        if topic.irregular or topic.loose or tp[0] in self._irregular:
            self._classify(tp[0], topic)

    def _topic_event(self, name: str, event: TreeEvent) -> None:
        topic = self._topics.get(name)
        if not event.newer_than_mzxid(None if topic is None else topic.mzxid):
            return
        if event.kind is TreeEventKind.DELETED:
            del self._own_topics()[name]
            self._irregular.discard(name)
            if topic is not None:
                topic.leave_index()
            if self._assignment_listeners:
                self._untold.append((name, None))
            return
        if event.data is None or event.stat is None:
            return
        if self._assignment_listeners:
            self._untold.append((name, event.stat.mzxid))
        if topic is None or event.kind is TreeEventKind.CREATED:
            # A new node: no partition state can predate it (states are its descendants).
            if topic is not None:
                topic.leave_index()  # the node was deleted and created again
            topic = self._own_topics()[name] = _Topic(
                name, event.stat.mzxid, self._generation, self._naming
            )
            self._set_assignment(name, topic, event.data, self._tuples, created=True)
        else:
            topic = self._writable(name, topic)
            topic.mzxid = event.stat.mzxid
            self._set_assignment(name, topic, event.data, self._tuples, created=False)
        self._classify(name, topic)

    def _classify(self, name: str, topic: _Topic) -> None:
        if topic.regular:
            self._irregular.discard(name)
        else:
            self._irregular.add(name)

    def _writable(self, name: str, topic: _Topic) -> _Topic:
        """``topic`` (held as ``name``), copied first if a hand-over may have lent it."""
        if topic.generation == self._generation:
            return topic
        twin = self._own_topics()[name] = topic.copy(self._generation)
        return twin

    def _own_topics(self) -> dict[str, _Topic]:
        """The topic dict, copied first if a hand-over was lent it (a C-speed copy, once)."""
        if self._topics_lent:
            self._topics = dict(self._topics)
            self._topics_lent = False
        return self._topics

    # -- decoding --------------------------------------------------------------------------------

    @staticmethod
    def _set_assignment(
        name: str, topic: _Topic, data: bytes, tuples: _Tuples, *, created: bool
    ) -> None:
        path = _TOPIC_PREFIX + name
        try:
            assignment = states.decode_assignment(path, data)
        except LayoutError as exc:
            topic.error = exc.detail
            return
        topic.error = None
        intern = tuples.intern
        if sorted(assignment) == list(range(len(assignment))):
            topic.sparse = None
            topic.replicas = tuple([intern(assignment[p]) for p in range(len(assignment))])
            if created and not len(topic.states):
                topic.create_columns(len(assignment))
            else:
                topic.resize(len(assignment), tuples)
        else:
            topic.replicas = None
            topic.sparse = {p: intern(r) for p, r in assignment.items()}

    @staticmethod
    def _put_state(topic: _Topic, tp: TP, data: bytes, stat: Stat, tuples: _Tuples) -> None:
        try:
            state = states.decode_state(states.state_path(tp), data, stat.version)
        except LayoutError as exc:
            topic.put(tp[1], UNREADABLE, stat.mzxid, None, exc.detail, tuples)
            return
        state.isr = tuples.intern(state.isr)
        topic.put(tp[1], READABLE, stat.mzxid, state, None, tuples)

    # -- re-reading (owner's thread) ---------------------------------------------------------------

    def sync(self, store: MetadataStore, *, attempts: int = 5) -> bool:
        """Do the re-read a RESYNC asked for, if any; True when the image is current.

        Reads the subtree as a cold controller would (children, then bulk reads), then, under the
        lock, replaces the image with the read and replays the events buffered meanwhile. A RESYNC
        arriving during the read makes the read stale: it starts again (``attempts`` times).
        """
        for _ in range(attempts):
            with self._lock:
                target = self._resync_at
            if target is None:
                return self.position is not None
            brokers, topics, tuples, naming = self._read(store)
            with self._lock:
                if self._resync_at != target:
                    continue
                self._brokers = brokers
                self._irregular = set()
                for name, topic in topics.items():
                    topic.generation = self._generation
                    self._classify(name, topic)
                self._topics = topics
                self._topics_lent = False
                self._tuples = tuples
                self._naming = naming
                self.position = target
                self.reads += 1
                buffered, self._buffer = self._buffer, []
                self._resync_at = None
                for event in buffered:
                    self._apply(event)
                # Whatever changed before the re-read was not told one by one.
                self._untold = [(None, None)] if self._assignment_listeners else []
            self._tell()
            log.info(
                "image re-read at position %s: %d brokers, %d topics (%d events replayed)",
                target,
                len(brokers),
                len(topics),
                len(buffered),
            )
            return True
        return False

    def _get_many(
        self, store: MetadataStore, paths: Sequence[str]
    ) -> list[tuple[bytes, Stat] | StoreError]:
        out: list[tuple[bytes, Stat] | StoreError] = []
        for start in range(0, len(paths), self.read_batch):
            out.extend(store.get_many(paths[start : start + self.read_batch]))
        return out

    def _read(
        self, store: MetadataStore
    ) -> tuple[dict[str, tuple[bytes, int, int]], dict[str, _Topic], _Tuples, _Index]:
        def children(path: str) -> list[str]:
            try:
                return store.children(path)
            except NoNodeError:
                return []

        tuples = _Tuples()  # a fresh table: contexts filled earlier keep the old one
        naming = _Index()
        brokers: dict[str, tuple[bytes, int, int]] = {}
        names = children(layout.BROKER_IDS)
        for name, result in zip(
            names, self._get_many(store, [_BROKER_PREFIX + n for n in names]), strict=True
        ):
            if isinstance(result, NoNodeError):
                continue
            if isinstance(result, StoreError):
                raise result
            brokers[name] = (result[0], result[1].czxid, result[1].mzxid)
        topics: dict[str, _Topic] = {}
        names = children(layout.BROKER_TOPICS)
        wanted: list[TP] = []
        for name, result in zip(
            names, self._get_many(store, [_TOPIC_PREFIX + n for n in names]), strict=True
        ):
            if isinstance(result, NoNodeError):
                continue
            if isinstance(result, StoreError):
                raise result
            # Its generation is set when the read is installed.
            topic = topics[name] = _Topic(name, result[1].mzxid, -1, naming)
            self._set_assignment(name, topic, result[0], tuples, created=True)
            if topic.replicas is not None:
                wanted.extend((name, p) for p in range(len(topic.replicas)))
            elif topic.sparse is not None:
                wanted.extend((name, p) for p in topic.sparse)
        for tp, result in zip(
            wanted, self._get_many(store, [states.state_path(tp) for tp in wanted]), strict=True
        ):
            if isinstance(result, NoNodeError):
                continue
            if isinstance(result, StoreError):
                raise result
            self._put_state(topics[tp[0]], tp, result[0], result[1], tuples)
        return brokers, topics, tuples, naming

    # -- the hand-over (controller's thread) --------------------------------------------------------

    def fill(self, context: ControllerContext) -> bool:
        """Fill ``context`` as :meth:`ControllerContext.load` would from the store; False (and
        ``context`` untouched) when the image is not current. Partitions whose state the image
        cannot vouch for (UNKNOWN: named by an assignment after their node may have appeared) are
        read from the store, as few as they are.

        Regular topics (every partition's state READABLE in the columns) are lent as they are:
        the image copies a topic before it next changes it, and the context's
        :class:`~.partition_map.PartitionMap` builds a topic's columns only when it needs them,
        so the hand-over copies nothing and does no Python work per lent topic (:class:`_Lent`).
        The other topics are handed over one by one (few, as a rule)."""
        unknown: list[TP] = []
        with self._lock:
            if self._resync_at is not None or self.position is None:
                return False
            brokers = [
                (name, (data, Stat(czxid, mzxid, 0, 0, 0, 0, 0, 0, 0, len(data), 0)))
                for name, (data, czxid, mzxid) in self._brokers.items()
            ]
            context.reset_topics()
            # Lent as they are: from here on the image copies the dict before changing it, and
            # a topic object (a new generation) before changing that.
            topics = self._topics
            self._topics_lent = True
            self._generation += 1
            parts = context.parts
            table = self._tuples.table
            lent = topics
            if self._irregular:
                lent = dict(topics)
                for name in self._irregular:
                    del lent[name]
            lender = _Lent(lent, table, self._naming.lend())
            context.topics.add_lent(lender)
            context.assignment_mzxid.add_lent(lender)
            context.partitions_nodes.add_lent(lent.keys())
            parts.add_lent(lender)
            ignored: set[str] = set()
            for name in sorted(self._irregular):  # the topics not lent (few, as a rule)
                topic = topics[name]
                path = _TOPIC_PREFIX + name
                if topic.error is not None:
                    context.unreadable.record(path, topic.error)
                    ignored.add(name)
                    continue
                context.unreadable.clear(path)
                context.assignment_mzxid[name] = topic.mzxid
                has_state = False
                assignment: dict[int, tuple[int, ...]] | Sequence[tuple[int, ...]]
                if topic.replicas is not None:
                    assignment = topic.replicas
                    context.topics.add_list(name, assignment)
                    rows = topic.states[: len(assignment)]
                    status = rows["status"]
                    counts = np.bincount(status, minlength=UNKNOWN + 1)
                    has_state = bool(counts[READABLE] or counts[UNREADABLE])
                    parts.add_columns(name, TopicColumns(assignment, rows, table))
                    if counts[UNREADABLE]:
                        for partition in np.flatnonzero(status == UNREADABLE).tolist():
                            self._unreadable(
                                context, (name, partition), topic.reasons.get(partition, "?")
                            )
                    if counts[UNKNOWN]:
                        unknown.extend(
                            (name, partition)
                            for partition in np.flatnonzero(status == UNKNOWN).tolist()
                            if partition not in topic.loose
                        )
                else:
                    assert topic.sparse is not None
                    assignment = dict(topic.sparse)
                    context.topics[name] = assignment
                for partition, loose in topic.loose.items():
                    if isinstance(assignment, dict):
                        replicas = assignment.get(partition)
                    else:
                        replicas = assignment[partition] if partition < len(assignment) else None
                    if replicas is None:
                        continue  # a state the assignment does not name (yet)
                    tp = (name, partition)
                    parts[tp] = PartitionInfo(replicas, loose.state)
                    if loose.status == UNREADABLE:
                        self._unreadable(context, tp, loose.reason or "?")
                    if loose.status in (READABLE, UNREADABLE):
                        has_state = True
                    elif loose.status == UNKNOWN:
                        unknown.append(tp)
                if topic.sparse is not None:
                    for partition, replicas in topic.sparse.items():
                        if (name, partition) not in parts:
                            parts[(name, partition)] = PartitionInfo(replicas)
                if has_state:
                    context.partitions_nodes.add(name)
            # A snapshot other threads read: the lent dict's names, which no longer change.
            context.known_topics = topics.keys() - ignored if ignored else topics.keys()
            context.ignored_topics = frozenset(ignored)
        context.take_brokers(brokers)
        if unknown:
            context.refresh_states(unknown)
        return True

    @staticmethod
    def _unreadable(context: ControllerContext, tp: TP, reason: str) -> None:
        context.unreadable_states.add(tp)
        context.unreadable.record(states.state_path(tp), reason)

    def __repr__(self) -> str:
        state = "current" if self._resync_at is None else f"re-read pending ({self._resync_at})"
        return f"<MetadataImage at {self.position} {state}: {len(self._topics)} topics>"

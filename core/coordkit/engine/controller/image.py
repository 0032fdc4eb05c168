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
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from coordkit.engine import states
from coordkit.engine.controller.image_topics import (
    BrokerIndex,
    ImageTopic,
    LentImageTopics,
    TupleTable,
)
from coordkit.engine.controller.partition_map import (
    ABSENT,
    READABLE,
    UNKNOWN,
    UNREADABLE,
    PartitionInfo,
    TopicColumns,
)
from coordkit.engine.states import TP, LeaderIsr
from coordkit.errors import LayoutError, NoNodeError, StoreError
from coordkit.kafka import layout
from coordkit.store import MetadataStore, Stat, TreeEvent, TreeEventKind, tree

if TYPE_CHECKING:
    from coordkit.engine.controller.context import ControllerContext

log = logging.getLogger("coordkit.engine.controller")

#: What an image follows: the brokers' registrations and the topics with their partition states.
ROOT = "/brokers"

_BROKER_PREFIX = layout.BROKER_IDS + "/"
_TOPIC_PREFIX = layout.BROKER_TOPICS + "/"
#: ``(topic, mzxid)`` of a changed assignment node (mzxid None: deleted); ``(None, None)``: any.
AssignmentListener = Callable[[str | None, int | None], None]


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
        self._topics: dict[str, ImageTopic] = {}
        self._tuples = TupleTable()
        #: Bumped by each hand-over: a topic made in an earlier generation may be lent to a
        #: context and is copied before the image changes it (:meth:`_writable`).
        self._generation = 0
        #: Topics not :attr:`ImageTopic.regular` (kept at every change: a hand-over lends the rest
        #: without looking at each).
        self._irregular: set[str] = set()
        #: Topics whose assignment node may lack a topic id (the controller gives them one).
        self._without_ids: set[str] = set()
        #: By broker (-1: no leader), the topics whose census names it.
        self._naming = BrokerIndex()
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
            self._without_ids.discard(name)
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
            topic = self._own_topics()[name] = ImageTopic(
                name, event.stat.mzxid, self._generation, self._naming
            )
            self._set_assignment(name, topic, event.data, self._tuples, created=True)
        else:
            topic = self._writable(name, topic)
            topic.mzxid = event.stat.mzxid
            self._set_assignment(name, topic, event.data, self._tuples, created=False)
        self._classify(name, topic)
        if states.lacks_topic_id(event.data):
            self._without_ids.add(name)
        else:
            self._without_ids.discard(name)

    def _classify(self, name: str, topic: ImageTopic) -> None:
        if topic.regular:
            self._irregular.discard(name)
        else:
            self._irregular.add(name)

    def _writable(self, name: str, topic: ImageTopic) -> ImageTopic:
        """``topic`` (held as ``name``), copied first if a hand-over may have lent it."""
        if topic.generation == self._generation:
            return topic
        twin = self._own_topics()[name] = topic.copy(self._generation)
        return twin

    def _own_topics(self) -> dict[str, ImageTopic]:
        """The topic dict, copied first if a hand-over was lent it (a C-speed copy, once)."""
        if self._topics_lent:
            self._topics = dict(self._topics)
            self._topics_lent = False
        return self._topics

    # -- decoding --------------------------------------------------------------------------------

    @staticmethod
    def _set_assignment(
        name: str, topic: ImageTopic, data: bytes, tuples: TupleTable, *, created: bool
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
    def _put_state(topic: ImageTopic, tp: TP, data: bytes, stat: Stat, tuples: TupleTable) -> None:
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
            brokers, topics, tuples, naming, without_ids = self._read(store)
            with self._lock:
                if self._resync_at != target:
                    continue
                self._brokers = brokers
                self._without_ids = without_ids
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
    ) -> tuple[
        dict[str, tuple[bytes, int, int]], dict[str, ImageTopic], TupleTable, BrokerIndex, set[str]
    ]:
        def children(path: str) -> list[str]:
            return tree.children(store, path)

        tuples = TupleTable()  # a fresh table: contexts filled earlier keep the old one
        naming = BrokerIndex()
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
        topics: dict[str, ImageTopic] = {}
        without_ids: set[str] = set()
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
            topic = topics[name] = ImageTopic(name, result[1].mzxid, -1, naming)
            self._set_assignment(name, topic, result[0], tuples, created=True)
            if states.lacks_topic_id(result[0]):
                without_ids.add(name)
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
        return brokers, topics, tuples, naming, without_ids

    # -- the hand-over (controller's thread) --------------------------------------------------------

    def fill(self, context: ControllerContext) -> bool:
        """Fill ``context`` as :meth:`ControllerContext.load` would from the store; False (and
        ``context`` untouched) when the image is not current. Partitions whose state the image
        cannot vouch for (UNKNOWN: named by an assignment after their node may have appeared) are
        read from the store, as few as they are.

        Regular topics (every partition's state READABLE in the columns) are lent as they are:
        the image copies a topic before it next changes it, and the context's
        :class:`~.partition_map.PartitionMap` builds a topic's columns only when it needs them,
        so the hand-over copies nothing and does no Python work per lent topic
        (:class:`LentImageTopics`).
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
            context.without_ids = set(self._without_ids)
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
            lender = LentImageTopics(lent, table, self._naming.lend())
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

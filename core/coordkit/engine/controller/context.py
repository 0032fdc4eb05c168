"""What the controller knows of the cluster (Kafka's ``ControllerContext``), read from the store.

The context is a cache of the store, never a source of truth: every field is what the last read
returned or what one of the controller's own committed writes left. A pass that fails re-reads the
whole of it (:meth:`ControllerContext.load`), so nothing here can drift from the store for longer
than one failed pass.

Values the controller cannot read (not JSON, too deep, wrong fields, a partition key that is not a
number) are recorded in :attr:`ControllerContext.unreadable`, logged once, and left alone: the
broker, topic or partition they describe is ignored until the node changes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet

from coordkit.engine import states
from coordkit.engine.controller.assignment_map import AssignmentMap, AssignmentVersions, TopicSet
from coordkit.engine.controller.partition_map import (
    PartitionInfo,
    PartitionMap,
)
from coordkit.engine.invariants import Violation
from coordkit.engine.states import TP
from coordkit.errors import LayoutError, NoNodeError, StoreError
from coordkit.kafka import layout
from coordkit.kafka.model import BrokerInfo
from coordkit.store import MetadataStore, Stat, tree
from coordkit.store.paths import numeric_name
from coordkit.strategies.elections import ControllerImage

log = logging.getLogger("coordkit.engine.controller")


__all__ = ["ControllerContext", "PartitionInfo", "UnreadableNodes"]


class UnreadableNodes:
    """Nodes whose values cannot be decoded: each is logged once per value, then ignored."""

    def __init__(self, owner: str):
        self._owner = owner
        self._nodes: dict[str, str] = {}

    def record(self, path: str, reason: str) -> None:
        if self._nodes.get(path) != reason:
            log.warning("%s: ignoring unreadable %s: %s", self._owner, path, reason)
        self._nodes[path] = reason

    def clear(self, path: str) -> None:
        if self._nodes.pop(path, None) is not None:
            log.info("%s: %s is readable again", self._owner, path)

    def clear_below(self, prefix: str) -> None:
        for path in [p for p in self._nodes if p == prefix or p.startswith(prefix + "/")]:
            del self._nodes[path]

    def __contains__(self, path: object) -> bool:
        return path in self._nodes

    def snapshot(self) -> tuple[Violation, ...]:
        return tuple(Violation(p, f"unreadable ({r})") for p, r in sorted(self._nodes.items()))


class ControllerContext:
    """Brokers, topics and partition states of one controller term.

    :param read_batch: paths per bulk read.
    :param image: a standby's image (a :class:`~.image.MetadataImage`), handed over by a warm
        election:
        the term's first :meth:`load` fills the context from it instead of reading every node
        (later loads, after a failed pass or a reconnect, read the store). Filled from an image,
        :attr:`parts` and :attr:`topics` hold the image's columns and build a partition's object
        (a topic's dict) only when it is read (:mod:`.partition_map`).
    """

    def __init__(
        self,
        store: MetadataStore,
        *,
        read_batch: int,
        owner: str,
        image: ControllerImage | None = None,
    ):
        self.store = store
        self.read_batch = read_batch
        self.image = image
        #: Where the last :meth:`load` came from: ``"store"`` or ``"image"``.
        self.loaded_from: str | None = None
        self._owner = owner
        self.unreadable = UnreadableNodes(owner)
        #: ``(dead, born, bounced)`` of the last broker read.
        self.last_broker_change: tuple[set[int], set[int], set[int]] = (set(), set(), set())
        #: Registered brokers: id → (registration, czxid of the registration node).
        self.live: dict[int, tuple[BrokerInfo, int]] = {}
        self.topics = AssignmentMap()
        #: mzxid of each topic's assignment node as last read (watch events compare it).
        self.assignment_mzxid = AssignmentVersions()
        self.parts = PartitionMap()
        #: Partitions whose state node holds an unreadable value (left alone).
        self.unreadable_states: set[TP] = set()
        #: Topics whose ``partitions`` node is known to exist.
        self.partitions_nodes = TopicSet()
        #: Partitions whose ``partitions/P`` node exists without a state node.
        self.partition_nodes: set[TP] = set()
        #: Topics whose assignment node may lack a topic id (Kafka's ``processTopicIds`` gives
        #: them one: :mod:`.topic_ids`).
        self.without_ids: set[str] = set()
        #: Topics queued under ``/admin/delete_topics`` (no elections for them).
        self.deleting: set[str] = set()
        #: Brokers asked to shut down (kept until they deregister).
        self.shutting_down: set[int] = set()
        #: Snapshots other threads may read.
        self.known_brokers: frozenset[int] = frozenset()
        self.known_topics: AbstractSet[str] = frozenset()
        self.ignored_brokers: frozenset[str] = frozenset()
        self.ignored_topics: frozenset[str] = frozenset()

    # -- reading -------------------------------------------------------------------------------

    def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, Stat] | StoreError]:
        out: list[tuple[bytes, Stat] | StoreError] = []
        step = self.read_batch
        for start in range(0, len(paths), step):
            out.extend(self.store.get_many(paths[start : start + step]))
        return out

    def children(self, path: str) -> list[str]:
        return tree.children(self.store, path)

    def load(self) -> tuple[set[int], set[int], set[int]]:
        """Read everything again: topics (with every partition state), then brokers; returns
        :meth:`sync_brokers`'s ``(dead, born, bounced)`` against the previous read.

        Topics first: every broker registered before a loaded topic was created is then live for
        its first election (read first, a broker registering meanwhile would be missed and left
        out of the new partitions' ISRs for good). With an image (once a term), the image fills
        the context instead, unless it is not current.
        """
        image, self.image = self.image, None
        if image is not None:
            if image.fill(self):
                self.loaded_from = "image"
                dead, born, bounced = self.last_broker_change
                return dead, born, bounced
            log.warning("%s: the standby image is not current; reading the store", self._owner)
        self.loaded_from = "store"
        self.reset_topics()
        self.load_topics(self.children(layout.BROKER_TOPICS))
        return self.sync_brokers()

    def reset_topics(self) -> None:
        """Forget every topic and partition (before a full load)."""
        self.topics = AssignmentMap()
        self.parts = PartitionMap()
        self.unreadable_states = set()
        self.partitions_nodes = TopicSet()
        self.partition_nodes = set()
        self.known_topics = frozenset()
        self.ignored_topics = frozenset()
        self.assignment_mzxid = AssignmentVersions()
        self.without_ids = set()

    def sync_brokers(self) -> tuple[set[int], set[int], set[int]]:
        """Re-read ``/brokers/ids``; returns ``(dead, born, bounced)`` against the last read
        (bounced: registered again by a new session between two reads)."""
        names = self.children(layout.BROKER_IDS)
        ids: list[int] = []
        ignored: set[str] = set()
        for name in names:
            broker = numeric_name(name)
            if broker is None:
                self.unreadable.record(f"{layout.BROKER_IDS}/{name}", "not a broker id")
                ignored.add(name)
            else:
                ids.append(broker)
        paths = [layout.broker_path(b) for b in ids]
        return self._take_brokers(ids, ignored, self.get_many(paths))

    def take_brokers(self, read: Sequence[tuple[str, tuple[bytes, Stat]]]) -> None:
        """Take ``/brokers/ids`` as read elsewhere (an image): ``(child name, (data, stat))``;
        :attr:`last_broker_change` holds ``(dead, born, bounced)`` against the previous read."""
        ids: list[int] = []
        ignored: set[str] = set()
        results: list[tuple[bytes, Stat] | StoreError] = []
        for name, result in read:
            broker = numeric_name(name)
            if broker is None:
                self.unreadable.record(f"{layout.BROKER_IDS}/{name}", "not a broker id")
                ignored.add(name)
            else:
                ids.append(broker)
                results.append(result)
        self._take_brokers(ids, ignored, results)

    def _take_brokers(
        self,
        ids: list[int],
        ignored: set[str],
        results: Sequence[tuple[bytes, Stat] | StoreError],
    ) -> tuple[set[int], set[int], set[int]]:
        paths = [layout.broker_path(b) for b in ids]
        current: dict[int, tuple[BrokerInfo, int]] = {}
        for broker, path, result in zip(ids, paths, results, strict=True):
            if isinstance(result, NoNodeError):
                continue  # gone since the listing
            if isinstance(result, StoreError):
                raise result
            data, stat = result
            try:
                current[broker] = (layout.BROKER.decode(data, path), stat.czxid)
            except LayoutError as exc:
                self.unreadable.record(path, exc.detail)
                ignored.add(str(broker))
                continue
            self.unreadable.clear(path)
        previous = self.live
        dead = set(previous) - set(current)
        born = set(current) - set(previous)
        bounced = {b for b in set(previous) & set(current) if previous[b][1] != current[b][1]}
        self.live = current
        self.known_brokers = frozenset(current)
        self.ignored_brokers = frozenset(ignored)
        self.shutting_down -= dead | bounced
        self.last_broker_change = (dead, born, bounced)
        return dead, born, bounced

    def load_topics(self, topics: Iterable[str]) -> list[TP]:
        """Read assignments and states of ``topics`` not yet known; returns their partitions."""
        names = sorted(set(topics) - set(self.topics))
        if not names:
            return []
        added: list[TP] = []
        paths = [f"{layout.BROKER_TOPICS}/{t}" for t in names]
        ignored = set(self.ignored_topics)
        for topic, path, result in zip(names, paths, self.get_many(paths), strict=True):
            if isinstance(result, NoNodeError):
                continue
            if isinstance(result, StoreError):
                raise result
            try:
                assignment = states.decode_assignment(path, result[0])
            except LayoutError as exc:
                self.unreadable.record(path, exc.detail)
                ignored.add(topic)
                continue
            self.unreadable.clear(path)
            ignored.discard(topic)
            self.topics[topic] = assignment
            self.assignment_mzxid[topic] = result[1].mzxid
            if states.lacks_topic_id(result[0]):
                self.without_ids.add(topic)
            for partition, replicas in assignment.items():
                tp = (topic, partition)
                self.parts[tp] = PartitionInfo(replicas)
                added.append(tp)
        self.known_topics = frozenset(self.topics)
        self.ignored_topics = frozenset(ignored)
        self.refresh_states(added)
        return added

    def sync_topics(self) -> list[TP]:
        """Re-list ``/brokers/topics``: forget removed topics, load new ones (and retry the
        unreadable ones); returns the partitions added."""
        children = set(self.children(layout.BROKER_TOPICS))
        for topic in set(self.topics) - children:
            self.forget_topic(topic)  # removed behind the controller's back
        self.ignored_topics = frozenset(t for t in self.ignored_topics if t in children)
        return self.load_topics(children - set(self.topics))

    def sync_assignment(self, topic: str) -> list[TP]:
        """Re-read one topic's replica assignment; returns the partitions it gained (Kafka's
        partition modifications). A replica list changed outside a reassignment is ignored."""
        path = f"{layout.BROKER_TOPICS}/{topic}"
        if topic not in self.topics:
            if topic in self.ignored_topics:
                self.ignored_topics = self.ignored_topics - {topic}
                return self.load_topics([topic])
            return []
        try:
            data, stat = self.store.get(path)
        except NoNodeError:
            return []
        self.assignment_mzxid[topic] = stat.mzxid
        try:
            assignment = states.decode_assignment(path, data)
        except LayoutError as exc:
            self.unreadable.record(path, exc.detail)
            return []
        self.unreadable.clear(path)
        known = self.topics[topic]
        added: list[TP] = []
        for partition, replicas in assignment.items():
            if partition in known:
                if replicas != known[partition]:
                    log.warning(
                        "%s-%s: replica list changed to %s outside a reassignment; ignored",
                        topic,
                        partition,
                        list(replicas),
                    )
                continue
            known[partition] = replicas
            tp = (topic, partition)
            self.parts[tp] = PartitionInfo(replicas)
            added.append(tp)
        self.refresh_states(added)
        return added

    def refresh_states(self, tps: Sequence[TP]) -> None:
        """Re-read the state nodes of ``tps`` (a pipelined read per batch)."""
        paths = [states.state_path(tp) for tp in tps]
        for tp, path, result in zip(tps, paths, self.get_many(paths), strict=True):
            part = self.parts.get(tp)
            if part is None:
                continue
            if isinstance(result, NoNodeError):
                part.state = None
                self._readable(tp, path)
                continue
            if isinstance(result, StoreError):
                raise result
            data, stat = result
            try:
                part.state = states.decode_state(path, data, stat.version)
            except LayoutError as exc:
                part.state = None
                self.unreadable_states.add(tp)
                self.unreadable.record(path, exc.detail)
                self.partitions_nodes.add(tp[0])
                continue
            self._readable(tp, path)
            self.partitions_nodes.add(tp[0])

    def _readable(self, tp: TP, path: str) -> None:
        if tp in self.unreadable_states:
            self.unreadable_states.discard(tp)
            self.unreadable.clear(path)

    def forget_topic(self, topic: str) -> None:
        self.assignment_mzxid.pop(topic, None)
        partitions = self.topics.partitions(topic)
        self.topics.pop(topic, None)
        self.parts.forget_topic(topic, partitions)
        if self.unreadable_states or self.partition_nodes:
            for partition in partitions:
                tp = (topic, partition)
                self.unreadable_states.discard(tp)
                self.partition_nodes.discard(tp)
        self.partitions_nodes.discard(topic)
        self.without_ids.discard(topic)
        self.unreadable.clear_below(f"{layout.BROKER_TOPICS}/{topic}")
        self.known_topics = frozenset(self.topics)

    # -- liveness ------------------------------------------------------------------------------

    def live_ids(self, excluded: frozenset[int] = frozenset()) -> frozenset[int]:
        """Brokers that may hold leadership: registered, not shutting down, not ``excluded``."""
        return frozenset(self.live) - self.shutting_down - excluded

    def needing_attention(self, live: frozenset[int]) -> list[TP]:
        """Every partition a liveness pass may have to write: no state yet, a leader outside
        ``live``, or an ISR naming a broker outside it (vectorised over an image's columns)."""
        return self.parts.needing_attention(live)

    def actionable(self, tp: TP) -> bool:
        """Whether the controller may decide for ``tp`` (known, its state readable, its topic
        not queued for deletion)."""
        return tp in self.parts and tp not in self.unreadable_states and tp[0] not in self.deleting

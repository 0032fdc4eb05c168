"""What a ``coordkit serve`` process reads of the store about topics: deletions, topic ids and
where the brokers of other processes listen.

Leadership is not read here: the controller tells it, in-process through the engine's observers
and to brokers of other processes by LeaderAndIsr and UpdateMetadata over the wire
(:mod:`coordkit.serve.apis.inter_broker.controller_requests`), as Kafka's controller tells its brokers. What
this follower keeps reading every ``interval`` is the list of topics (a topic whose assignment
node is gone, or was created again with a new ``czxid``, is deleted: the model forgets it and
``deleted`` drops its served logs), their ids, and the registered brokers' addresses.

The follower is also an engine observer: a deletion by a controller in this process reaches it
at once (before that controller can elect a new topic of the same name), and under the lock that
a read of the store holds, so that a read made before the deletion cannot bring the deleted
topic back. A topic deleted and created again by another process's controller within one
interval may keep records produced to it here in between (they are dropped with the rest at the
next read).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection

from coordkit.engine.events import EngineObserver
from coordkit.engine.replication import ReplicationModel
from coordkit.engine.snapshot import registered_brokers
from coordkit.errors import LayoutError, StoreError
from coordkit.kafka import layout
from coordkit.kafka.model import TopicAssignment
from coordkit.serve.control_plane.connector import BrokerConnector
from coordkit.store import MetadataStore
from coordkit.store.tree import children

log = logging.getLogger("coordkit.serve")

#: Seconds between two reads of the store.
DEFAULT_INTERVAL = 0.2


class TopicsFollower(EngineObserver):
    """Follows topic deletions, topic ids and the brokers' addresses on ``store``.

    :param own: the broker ids this process runs (the others' addresses are followed).
    :param deleted: called with each topic found deleted (from the follower's thread).
    :param topic_ids: called with every topic's id (of the topics that have one) when they
        changed since the last read (from the follower's thread).
    """

    def __init__(
        self,
        store: MetadataStore,
        replication: ReplicationModel,
        own: Collection[int],
        deleted: Callable[[str], None],
        *,
        topic_ids: Callable[[dict[str, str]], None] | None = None,
        interval: float = DEFAULT_INTERVAL,
        connector: BrokerConnector | None = None,
    ) -> None:
        self.store = store
        self.replication = replication
        self.own = frozenset(own)
        self.deleted = deleted
        self.interval = interval
        self.topic_ids = topic_ids
        self.connector = connector or BrokerConnector()
        self._known_ids: dict[str, str] = {}
        #: Where each registered broker of another process listens (its followers here fetch
        #: from it), replaced whole at each read.
        self.broker_addresses: dict[int, tuple[str, int]] = {}
        #: Each topic seen, with the ``czxid`` of its assignment node (its incarnation).
        self._topics: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> TopicsFollower:
        self._thread = threading.Thread(target=self._run, name="coordkit-serve-follower",
                                        daemon=True)  # fmt: skip
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
            except StoreError as exc:
                log.debug("following the store: %s (trying again)", exc)
            except Exception:
                log.exception("following the store failed (trying again)")
            self._stop.wait(self.interval)

    def topic_deleted(self, topic: str) -> None:
        """A controller of this process deleted ``topic``."""
        with self._lock:
            self._topics.pop(topic, None)
            self.replication.topic_deleted(topic)
            self.deleted(topic)

    def _addresses(self, broker_ids: list[int]) -> dict[int, tuple[str, int]]:
        """Where brokers ``broker_ids`` listen: their registration's endpoint of the inter-broker
        listener, or its host and port."""
        paths = [layout.broker_path(b) for b in broker_ids]
        found: dict[int, tuple[str, int]] = {}
        for broker_id, path, result in zip(broker_ids, paths, self.store.get_many(paths),
                                           strict=True):  # fmt: skip
            if isinstance(result, StoreError):
                continue  # gone meanwhile
            try:
                info = layout.BROKER.decode(result[0], path)
            except LayoutError as exc:
                log.debug("no address for broker %s: %s", broker_id, exc)
                continue
            found[broker_id] = self.connector.address_of(info)
        return found

    def poll(self) -> None:
        """One read of the store: deleted topics, topic ids, the other brokers' addresses."""
        with self._lock:
            self._poll()

    def _poll(self) -> None:
        names = sorted(children(self.store, layout.BROKER_TOPICS))
        paths = [f"{layout.BROKER_TOPICS}/{name}" for name in names]
        assignments: dict[str, TopicAssignment] = {}
        incarnations: dict[str, int] = {}
        for name, path, found in zip(names, paths, self.store.get_many(paths), strict=True):
            if isinstance(found, StoreError):
                continue
            incarnations[name] = found[1].czxid
            try:
                assignments[name] = layout.TOPIC.decode(found[0], path)
            except LayoutError as exc:
                log.debug("not following %s: %s", path, exc)
        for name, czxid in self._topics.items():
            if incarnations.get(name) != czxid:
                self.replication.topic_deleted(name)
                self.deleted(name)
        self._topics = incarnations
        registered = registered_brokers(self.store)
        self.broker_addresses = self._addresses([b for b in registered if b not in self.own])
        ids = {name: a.topic_id for name, a in assignments.items() if a.topic_id is not None}
        if self.topic_ids is not None and ids != self._known_ids:
            self._known_ids = ids
            self.topic_ids(ids)

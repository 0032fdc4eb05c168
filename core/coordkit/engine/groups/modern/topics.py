"""The topics a consumer group coordinator assigns from: names, ids, partition counts and the racks
of each partition's replicas (Kafka's coordinator reads them from its metadata image).

Read from the store's topic nodes (``/brokers/topics/T``) and broker registrations, and kept for
:data:`REFRESH` seconds: a heartbeat reads the cache, so a thousand members heartbeating do not read
the store a thousand times; a topic created or grown is seen within the refresh interval (Kafka's
coordinator sees it when its metadata image moves; it then bumps the group epoch on the next
heartbeat, as here).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

from coordkit.engine.cluster_id import kafka_uuid
from coordkit.engine.groups.modern.group import SubscribedTopic
from coordkit.errors import LayoutError, NoNodeError, StoreError
from coordkit.kafka import layout
from coordkit.kafka.coordinators import OFFSETS_TOPIC
from coordkit.store import MetadataStore

log = logging.getLogger("coordkit.engine.groups")

#: Seconds a read of the topics is reused.
REFRESH = 0.5
#: Kafka's internal topics: a regular expression never subscribes to them.
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, "__transaction_state", "__share_group_state"})


class TopicsImage:
    """Topic metadata from ``store``, cached for ``refresh`` seconds (``monotonic`` times it)."""

    def __init__(
        self,
        store: MetadataStore,
        *,
        refresh: float = REFRESH,
        monotonic: Callable[[], float] = time.monotonic,
    ):
        self.store = store
        self.refresh = refresh
        self.monotonic = monotonic
        self._lock = threading.Lock()
        self._names: tuple[float, frozenset[str]] | None = None
        self._topics: dict[str, tuple[float, SubscribedTopic | None]] = {}
        #: The node bytes each topic was last decoded from: unchanged bytes are not decoded again
        #: (a topic of thousands of partitions costs milliseconds to decode).
        self._decoded: dict[str, tuple[bytes, SubscribedTopic | None]] = {}
        self._racks: tuple[float, dict[int, str]] | None = None

    def names(self) -> frozenset[str]:
        """Every topic (what a regular expression is matched against)."""
        now = self.monotonic()
        with self._lock:
            if self._names is not None and now - self._names[0] < self.refresh:
                return self._names[1]
        try:
            names = frozenset(self.store.children(layout.BROKER_TOPICS))
        except NoNodeError:
            names = frozenset()
        with self._lock:
            self._names = (now, names)
        return names

    def topics(self, names: Iterable[str]) -> dict[str, SubscribedTopic]:
        """The topics of ``names`` that exist (with an id)."""
        now = self.monotonic()
        wanted = sorted(set(names))
        out: dict[str, SubscribedTopic] = {}
        stale: list[str] = []
        with self._lock:
            for name in wanted:
                cached = self._topics.get(name)
                if cached is None or now - cached[0] >= self.refresh:
                    stale.append(name)
                elif cached[1] is not None:
                    out[name] = cached[1]
        if stale:
            paths = [layout.topic_path(n) for n in stale]
            for name, path, result in zip(stale, paths, self.store.get_many(paths), strict=True):
                topic = self._decode(name, path, result)
                with self._lock:
                    self._topics[name] = (now, topic)
                if topic is not None:
                    out[name] = topic
        return out

    def _decode(
        self, name: str, path: str, result: tuple[bytes, object] | StoreError
    ) -> SubscribedTopic | None:
        if isinstance(result, NoNodeError):
            return None
        if isinstance(result, StoreError):
            raise result
        data = bytes(result[0])
        with self._lock:
            previous = self._decoded.get(name)
        if previous is not None and previous[0] == data:
            return previous[1]
        topic = self._decode_node(name, path, data)
        with self._lock:
            self._decoded[name] = (data, topic)
        return topic

    def _decode_node(self, name: str, path: str, data: bytes) -> SubscribedTopic | None:
        try:
            assignment = layout.TOPIC.decode(data, path)
            topic_id = kafka_uuid(assignment.topic_id) if assignment.topic_id else None
        except (LayoutError, ValueError) as exc:
            log.warning("consumer groups leave out topic %r: %s", name, exc)
            return None
        if topic_id is None:
            return None  # the controller gives it an id; until then it is not assignable
        return SubscribedTopic(name, topic_id, len(assignment.partitions))

    def partition_racks(self, name: str) -> tuple[frozenset[str], ...] | None:
        """The racks of each partition's replicas, ``None`` when no broker has a rack."""
        racks = self._broker_racks()
        if not racks:
            return None
        try:
            data, _ = self.store.get(layout.topic_path(name))
            assignment = layout.TOPIC.decode(data, layout.topic_path(name))
        except (StoreError, LayoutError):
            return None
        return tuple(
            frozenset(racks[b] for b in assignment.partitions[p] if b in racks)
            for p in sorted(assignment.partitions)
        )

    def _broker_racks(self) -> dict[int, str]:
        now = self.monotonic()
        with self._lock:
            if self._racks is not None and now - self._racks[0] < self.refresh:
                return self._racks[1]
        racks: dict[int, str] = {}
        try:
            ids = self.store.children(layout.BROKER_IDS)
        except NoNodeError:
            ids = []
        paths = [f"{layout.BROKER_IDS}/{i}" for i in ids]
        for path, result in zip(paths, self.store.get_many(paths), strict=True):
            if isinstance(result, StoreError):
                continue
            try:
                broker = layout.BROKER.decode(result[0], path)
            except LayoutError:
                continue
            if broker.rack is not None:
                racks[int(path.rsplit("/", 1)[1])] = broker.rack
        with self._lock:
            self._racks = (now, racks)
        return racks

    def invalidate(self) -> None:
        with self._lock:
            self._names = None
            self._topics.clear()
            self._decoded.clear()
            self._racks = None

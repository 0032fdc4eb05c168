"""Topic ids and names as a served process knows them (the topic id maps of Kafka's metadata
cache), for the requests that name topics by id: Fetch 13+, Produce 13, DeleteTopics 6.

The ids live in the topics' assignment nodes (``topic_id``, Kafka 2.8+'s version 3). The server's
store follower hands every id over when they change (:mod:`.dataplane.follower`, every 0.2 s), a
topic deleted by this process's controller is forgotten at once, and an id a request names that
is not known here makes one read of the store before it is answered UNKNOWN_TOPIC_ID: a client
that learnt the id from a Metadata answer (read from the store) is not refused for the follower's
lag, as Kafka's broker would not refuse an id its metadata cache had.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterable, Mapping

from coordkit.engine.cluster_id import kafka_uuid
from coordkit.errors import LayoutError, StoreError
from coordkit.kafka import layout
from coordkit.store import MetadataStore
from coordkit.store.tree import children

log = logging.getLogger("coordkit.serve")

#: Kafka's ``Uuid.ZERO_UUID``: no topic id.
NO_TOPIC_ID = uuid.UUID(int=0)


def read_topic_ids(store: MetadataStore) -> dict[str, str]:
    """The id (Kafka's text form) of every topic in the store that has one."""
    names = children(store, layout.BROKER_TOPICS)
    paths = [layout.topic_path(name) for name in names]
    found: dict[str, str] = {}
    for name, path, result in zip(names, paths, store.get_many(paths), strict=True):
        if isinstance(result, StoreError):
            continue  # deleted since the listing
        try:
            topic_id = layout.TOPIC.decode(result[0], path).topic_id
        except LayoutError:
            continue  # the controller logs it
        if topic_id is not None:
            found[name] = topic_id
    return found


class TopicIds:
    """Topic name ↔ id, replaced whole at each update (readers on the event loop see one
    consistent pair of maps)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids: dict[str, uuid.UUID] = {}
        self._names: dict[uuid.UUID, str] = {}

    def update(self, topic_ids: Mapping[str, str]) -> None:
        """Every topic's id (Kafka's text form), as the store holds them now."""
        ids: dict[str, uuid.UUID] = {}
        for name, text in topic_ids.items():
            try:
                ids[name] = kafka_uuid(text)
            except ValueError as exc:
                log.warning("topic %r is served without its id: %s", name, exc)
        with self._lock:
            self._ids = ids
            self._names = {topic_id: name for name, topic_id in ids.items()}

    def add(self, name: str, text: str) -> None:
        """A topic this process just created."""
        with self._lock:
            ids = dict(self._ids)
            ids[name] = kafka_uuid(text)
            self._ids = ids
            self._names = {topic_id: topic for topic, topic_id in ids.items()}

    def forget(self, name: str) -> None:
        """A topic deleted (its id no longer names anything)."""
        with self._lock:
            if name not in self._ids:
                return
            ids = dict(self._ids)
            del ids[name]
            self._ids = ids
            self._names = {topic_id: topic for topic, topic_id in ids.items()}

    def refresh(self, store: MetadataStore) -> None:
        self.update(read_topic_ids(store))

    def id_of(self, name: str) -> uuid.UUID:
        """The topic's id; Kafka's zero id when it has none known."""
        return self._ids.get(name, NO_TOPIC_ID)

    def name_of(self, topic_id: uuid.UUID) -> str | None:
        return self._names.get(topic_id)

    def missing(self, topic_ids: Iterable[uuid.UUID]) -> bool:
        """Whether any (non-zero) id of ``topic_ids`` is unknown here."""
        names = self._names
        return any(topic_id.int and topic_id not in names for topic_id in topic_ids)

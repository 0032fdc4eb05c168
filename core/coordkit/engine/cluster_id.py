"""The cluster's id in ``/cluster/id``, made by the first broker that finds none, as Kafka's
broker does at start (``KafkaServer.getOrGenerateClusterId``); and Kafka's random UUIDs."""

from __future__ import annotations

import base64
import uuid

from coordkit.errors import NodeExistsError, NoNodeError
from coordkit.kafka import layout
from coordkit.kafka.model import ClusterId
from coordkit.store import MetadataStore


def new_kafka_uuid() -> str:
    """A random id as Kafka's ``Uuid.randomUuid().toString()``: a version 4 UUID in URL-safe
    base64 without padding (22 characters), never starting with ``-`` (Kafka draws again: such
    an id would read as an option on a command line) nor all zeros."""
    while True:
        raw = uuid.uuid4().bytes
        text = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
        if not text.startswith("-") and any(raw):
            return text


def kafka_uuid(text: str) -> uuid.UUID:
    """The UUID an id in Kafka's text form stands for (what the wire carries).

    :raises ValueError: ``text`` is not 16 bytes in URL-safe base64.
    """
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError):
        raise ValueError(f"{text!r} is not a Kafka id (URL-safe base64)") from None
    if len(raw) != 16:
        raise ValueError(f"{text!r} is not a Kafka id (16 bytes in URL-safe base64)")
    return uuid.UUID(bytes=raw)


def kafka_uuid_text(value: uuid.UUID) -> str:
    """Kafka's text form of an id the wire carries (the inverse of :func:`kafka_uuid`)."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


def read_cluster_id(store: MetadataStore) -> str | None:
    """The id in ``/cluster/id``, ``None`` when there is none yet.

    :raises LayoutError: the node holds something else than Kafka's cluster id JSON.
    """
    try:
        data, _ = store.get(layout.CLUSTER_ID)
    except NoNodeError:
        return None
    return layout.CLUSTER_ID_VALUE.decode(data, layout.CLUSTER_ID).id


def get_or_create_cluster_id(store: MetadataStore) -> str:
    """The cluster's id, written first if no broker has yet (the first writer wins a race).

    :raises LayoutError: ``/cluster/id`` holds something else than Kafka's cluster id JSON.
    """
    found = read_cluster_id(store)
    if found is not None:
        return found
    made = ClusterId(id=new_kafka_uuid())
    try:
        store.create(layout.CLUSTER_ID, layout.CLUSTER_ID_VALUE.encode(made), make_parents=True)
    except NodeExistsError:
        return get_or_create_cluster_id(store)
    return made.id

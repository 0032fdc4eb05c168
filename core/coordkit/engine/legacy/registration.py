"""Consumer ids, consumer threads, and ``/consumers/G/ids/C`` registration (seeds 001, 004).

A consumer registers an ephemeral ``/consumers/G/ids/C`` holding its subscription
(``{"version":1,"subscription":{"T":streams},"pattern":"static","timestamp":"<ms>"}``). Each stream
of a topic is a consumer thread ``C-0 .. C-(n-1)``; the group's assignors share out partitions over
these threads, ordered as Kafka's ``ConsumerThreadId`` compares them: by the text ``C-i`` (so
``C-10`` sorts before ``C-2``), which is Java ``String`` order.
"""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Mapping

import attrs

from coordkit.engine.legacy.errors import ConsumerIdInUseError
from coordkit.errors import NodeExistsError, NoNodeError, StoreError
from coordkit.kafka import layout
from coordkit.kafka.model import ConsumerRegistration, validate_topic_name
from coordkit.store import MetadataStore
from coordkit.strategies.assignment import java_string_key
from coordkit.support.clock import Clock


@attrs.frozen
class ConsumerThreadId:
    """One stream of a consumer: Kafka's ``ConsumerThreadId``, written ``consumerId-thread``."""

    consumer: str = attrs.field(validator=attrs.validators.min_len(1))
    thread: int = attrs.field(validator=[attrs.validators.instance_of(int), attrs.validators.ge(0)])

    def __str__(self) -> str:
        return f"{self.consumer}-{self.thread}"

    def sort_key(self) -> bytes:
        """Kafka compares thread ids by their text in Java ``String`` order."""
        return java_string_key(str(self))


def new_consumer_id(
    group_id: str, clock: Clock, *, consumer_id: str | None = None, host: str | None = None
) -> str:
    """Kafka's ``consumerIdString``: ``group_consumer.id``, or ``group_host-timestampMs-uuid8``
    where uuid8 is the first 8 hex digits of a random UUID's most significant bits."""
    layout.consumer_group_path(group_id)  # refuses empty ids and ids with '/'
    if consumer_id is None:
        # Java's Long.toHexString(uuid.getMostSignificantBits()).substring(0, 8).
        uuid8 = f"{uuid.uuid4().int >> 64:x}"[:8]
        consumer_id = f"{host or socket.gethostname()}-{clock.wall_ms()}-{uuid8}"
    return f"{group_id}_{consumer_id}"


def check_subscription(topic_count: Mapping[str, int]) -> dict[str, int]:
    """A static subscription: topic → stream count (>= 1), topics with legal names."""
    if not isinstance(topic_count, Mapping) or not topic_count:
        raise ValueError(
            f"a legacy consumer subscribes to at least one topic as {{topic: streams}}, "
            f"got {topic_count!r}"
        )
    out: dict[str, int] = {}
    for topic, streams in topic_count.items():
        validate_topic_name(topic)
        if not isinstance(streams, int) or isinstance(streams, bool) or streams < 1:
            raise ValueError(
                f"stream count of topic {topic!r} must be an integer >= 1, got {streams!r}"
            )
        out[topic] = streams
    return dict(sorted(out.items()))


def thread_ids_per_topic(
    consumer_id: str, topic_count: Mapping[str, int]
) -> dict[str, tuple[ConsumerThreadId, ...]]:
    """Kafka's ``getConsumerThreadIdsPerTopic``: streams ``C-0 .. C-(n-1)`` of every topic."""
    return {
        topic: tuple(ConsumerThreadId(consumer_id, i) for i in range(streams))
        for topic, streams in topic_count.items()
    }


def registration_for(topic_count: Mapping[str, int], clock: Clock) -> ConsumerRegistration:
    return ConsumerRegistration(subscription=dict(topic_count), timestamp=str(clock.wall_ms()))


def register(
    store: MetadataStore,
    group_id: str,
    consumer_id: str,
    registration: ConsumerRegistration,
    *,
    stale_wait_s: float = 0.1,
    stale_timeout_s: float = 30.0,
) -> None:
    """Create the ephemeral ``/consumers/G/ids/C`` (parents as needed).

    A node left by this consumer's own expired session may outlive the expiry briefly (Kafka's
    ``createEphemeralPathExpectConflictHandleZKBug`` waited for it): a node with the same
    subscription in another session is taken for that and waited out, up to ``stale_timeout_s``.

    :raises ConsumerIdInUseError: another consumer holds the id (another subscription, or a node
        that did not go away).
    """
    path = layout.consumer_registration_path(group_id, consumer_id)
    data = layout.CONSUMER_REGISTRATION.encode(registration)
    deadline = time.monotonic() + stale_timeout_s
    while True:
        try:
            store.create(path, data, ephemeral=True, make_parents=True)
            return
        except NodeExistsError:
            pass
        try:
            existing, stat = store.get(path)
        except NoNodeError:
            continue  # gone meanwhile: create again
        if stat.ephemeral_owner == store.session_id:
            return  # already ours (a retried create that had succeeded)
        found = layout.CONSUMER_REGISTRATION.decode(existing, path)
        if (found.subscription, found.pattern) != (registration.subscription, registration.pattern):
            raise ConsumerIdInUseError(
                f"{path}: consumer id {consumer_id!r} of group {group_id!r} is registered by "
                f"another session (session {stat.ephemeral_owner:#x}) with another subscription"
            )
        if time.monotonic() > deadline:
            raise ConsumerIdInUseError(
                f"{path}: consumer id {consumer_id!r} of group {group_id!r} is held by session "
                f"{stat.ephemeral_owner:#x}, which did not go away within {stale_timeout_s:.0f}s"
            )
        time.sleep(stale_wait_s)


def deregister(store: MetadataStore, group_id: str, consumer_id: str) -> None:
    try:
        store.delete(layout.consumer_registration_path(group_id, consumer_id))
    except NoNodeError:
        pass


def read_registrations(
    store: MetadataStore, group_id: str
) -> tuple[tuple[str, ...], dict[str, ConsumerRegistration]]:
    """The group's consumer ids (the children of ``/consumers/G/ids``, as read) and each one's
    registration; a consumer that left between the two reads is dropped."""
    ids_path = layout.consumer_ids_path(group_id)
    try:
        children = tuple(store.children(ids_path))
    except NoNodeError:
        return (), {}
    node_paths = [layout.consumer_registration_path(group_id, c) for c in children]
    out: dict[str, ConsumerRegistration] = {}
    for consumer, path, result in zip(
        children, node_paths, store.get_many(node_paths), strict=True
    ):
        if isinstance(result, NoNodeError):
            continue
        if isinstance(result, StoreError):
            raise result
        out[consumer] = layout.CONSUMER_REGISTRATION.decode(result[0], path)
    return children, out

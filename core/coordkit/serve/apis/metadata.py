"""Metadata: brokers from ``/brokers/ids``, the controller, and every requested topic's partitions
with leader, leader epoch, replicas and ISR from the partition states the engine wrote.

Everything is read from the store through the serving broker's own session (off the event loop),
so the answer is what the cluster's store holds, not what this process happens to know; only the
requested topics' partitions are read.

As Kafka answers: a topic named by id alone (v10+) is answered by name, or UNKNOWN_TOPIC_ID; a
missing topic whose name Kafka refuses is INVALID_TOPIC_EXCEPTION, auto-creation or not; a topic
created by this request is LEADER_NOT_AVAILABLE without partitions (a ZooKeeper-mode broker's
answer: it wrote the topic at once; a KRaft broker answers UNKNOWN_TOPIC_OR_PARTITION until it
learns of the topic).

Under an authorizer, as Kafka's ``KafkaApis.handleTopicMetadataRequest``: a topic the principal
may not Describe is left out of a listing of every topic, and answered TOPIC_AUTHORIZATION_FAILED
when named (by name: no id; by id: no name); a missing topic it may Describe but not Create
(on the cluster or the topic) is TOPIC_AUTHORIZATION_FAILED and not created. Asked for, a
topic's authorized operations (v8+) and the cluster's (v8 to v10) are what the authorizer allows
(Kafka's ``AuthHelper.authorizedOperations``; the cluster's 0 without Describe on it).
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from coordkit.engine.cluster_id import kafka_uuid
from coordkit.engine.snapshot import ClusterView, read_view
from coordkit.errors import CoordkitError, LayoutError, StoreError
from coordkit.kafka import layout
from coordkit.kafka.acls import AclOperation, ResourceType
from coordkit.kafka.model import NO_LEADER, BrokerInfo, validate_topic_name
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.authorization import (
    NO_AUTHORIZED_OPERATIONS,
    TOPIC_AUTHORIZATION_FAILED,
    allowed_names,
    authorized_operations,
    cluster_allowed,
    cluster_authorized_operations,
)
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext
from coordkit.serve.listeners.bound import as_listener_sees
from coordkit.store import MetadataStore
from coordkit.store.paths import numeric_name
from coordkit.store.tree import children

log = logging.getLogger("coordkit.serve")

Response = messages.MetadataResponse
Broker_ = nested(Response, "MetadataResponseBroker")
Topic_ = nested(Response, "MetadataResponseTopic")
Partition_ = nested(Response, "MetadataResponsePartition")
#: The topics Kafka marks internal in metadata.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
#: Kafka's ``Uuid.ZERO_UUID``: what a response carries for a topic with no id.
NO_TOPIC_ID = uuid.UUID(int=0)
#: Metadata v10+ may name a topic by id; v8+ may ask for its authorized operations, v8 to v10
#: for the cluster's.
TOPIC_ID_VERSION = 10
AUTHORIZED_OPERATIONS_VERSION = 8
LAST_CLUSTER_OPERATIONS_VERSION = 10


def read_brokers(store: MetadataStore) -> list[tuple[int, BrokerInfo]]:
    """Every readable broker registration, by id (an unreadable one is logged and left out)."""
    ids = sorted(
        b for c in children(store, layout.BROKER_IDS) if (b := numeric_name(c)) is not None
    )
    paths = [layout.broker_path(b) for b in ids]
    found = []
    for broker_id, path, result in zip(ids, paths, store.get_many(paths), strict=True):
        if isinstance(result, StoreError):
            continue  # gone meanwhile
        try:
            # Host and port: the endpoint of the listener the request came on, as Kafka answers.
            found.append((broker_id, as_listener_sees(layout.BROKER.decode(result[0], path))))
        except LayoutError as exc:
            log.warning("metadata without broker %s: %s", broker_id, exc)
    return found


async def node_endpoints(ctx: BrokerContext, leaders: set[int], endpoint: type) -> list[Any]:
    """The endpoints (``endpoint`` structs) of the registered brokers among ``leaders``:
    KIP-951's ``NodeEndpoints`` of Fetch 16+ and Produce 10+ (Kafka's ``getAliveBrokerNode``)."""
    wanted = leaders - {NO_LEADER}
    if not wanted:
        return []
    brokers = await ctx.blocking(lambda: read_brokers(ctx.broker.store))
    return [
        endpoint(node_id=b, host=info.host, port=info.port, rack=info.rack)
        for b, info in brokers
        if b in wanted
    ]


def requested_topics(request: Request) -> list[str] | None:
    """The topic names asked for; ``None`` for every topic (v0's empty list, v1+'s null)."""
    topics = request.body.topics
    if topics is None or (request.version == 0 and not topics):
        return None
    return [t.name for t in topics if t.name is not None]


def requested_topic_ids(request: Request) -> list[uuid.UUID]:
    """The topic ids asked for (v10+: a topic named by its id, its name null)."""
    topics = request.body.topics
    if request.version < TOPIC_ID_VERSION or topics is None:
        return []
    return [t.topic_id for t in topics if t.topic_id is not None and t.topic_id.int]


def valid_name(name: str) -> bool:
    try:
        validate_topic_name(name)
    except ValueError:
        return False
    return True


def _auto_create_allowed(ctx: BrokerContext, request: Request) -> bool:
    if not ctx.settings.auto_create_topics:
        return False
    return request.version < 4 or bool(request.body.allow_auto_topic_creation)


def _creatable(ctx: BrokerContext, described: set[str]) -> set[str]:
    """Which of the topics the principal may Describe it may also have auto-created: Create on
    the cluster, else on the topic (Kafka's KafkaApis)."""
    if cluster_allowed(ctx, AclOperation.CREATE):
        return described
    return allowed_names(ctx, AclOperation.CREATE, ResourceType.TOPIC, described)


def _gather(
    ctx: BrokerContext, request: Request, described: set[str]
) -> tuple[list[tuple[int, BrokerInfo]], ClusterView, set[str], set[str]]:
    """Brokers, the partition states, the topics created now and those the principal may not
    have created (store work, off the loop; ``described``: the named topics it may Describe)."""
    store = ctx.broker.store
    created: set[str] = set()
    refused: set[str] = set()
    names = requested_topics(request)
    if names and _auto_create_allowed(ctx, request):
        existing = set(children(store, layout.BROKER_TOPICS))
        missing = [name for name in names if name not in existing and name in described]
        creatable = _creatable(ctx, set(missing)) if missing else set()
        for name in missing:
            if name not in creatable:
                refused.add(name)
                continue
            if not valid_name(name):
                continue
            try:
                ctx.admin.create_topic(
                    name,
                    ctx.settings.default_partitions,
                    ctx.settings.default_replication_factor,
                    if_not_exists=True,
                )
                created.add(name)
                log.info("broker %s: created topic %r on a metadata request", ctx.broker_id, name)
            except (CoordkitError, ValueError) as exc:
                log.info("broker %s: topic %r not auto-created: %s", ctx.broker_id, name, exc)
    # Only the topics asked for are read (all of them when the request names them by id: the
    # ids are in the topics' nodes): Kafka answers from its metadata cache, and reading every
    # partition state for each client's refresh made Metadata most of a busy broker's work.
    wanted = None if names is None or requested_topic_ids(request) else names
    return read_brokers(store), read_view(store, wanted), created, refused


def _topic_id(view: ClusterView, name: str) -> uuid.UUID:
    """The topic's id from its node; Kafka's zero id (none known) for a topic without one."""
    text = view.topic_ids.get(name)
    if text is None:
        return NO_TOPIC_ID
    try:
        return kafka_uuid(text)
    except ValueError as exc:
        log.warning("metadata without the id of topic %r: %s", name, exc)
        return NO_TOPIC_ID


def _ids_asked(view: ClusterView, request: Request) -> tuple[list[str], list[Any]]:
    """The topics asked for by id: the names of those that exist, and the answers of those
    that do not (UNKNOWN_TOPIC_ID)."""
    by_id = {}
    for name in view.topic_ids:
        topic_id = _topic_id(view, name)
        if topic_id.int:
            by_id[topic_id] = name
    asked = requested_topic_ids(request)
    unknown = [
        Topic_(error_code=errors.UNKNOWN_TOPIC_ID, name=None, topic_id=topic_id,
               is_internal=False, partitions=[])
        for topic_id in asked
        if topic_id not in by_id
    ]  # fmt: skip
    return [by_id[topic_id] for topic_id in asked if topic_id in by_id], unknown


async def handle_metadata(ctx: BrokerContext, request: Request) -> Any:
    named = requested_topics(request) or []
    may_describe = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, named)
    brokers, view, created, refused = await ctx.blocking(
        lambda: _gather(ctx, request, may_describe)
    )
    live = {broker_id for broker_id, _ in brokers}
    by_topic: dict[str, list[Any]] = {}
    for p in view.partitions:
        leader = p.leader if p.leader in live else NO_LEADER
        by_topic.setdefault(p.topic, []).append(
            Partition_(
                error_code=errors.NONE if leader != NO_LEADER else errors.LEADER_NOT_AVAILABLE,
                partition_index=p.partition,
                leader_id=leader,
                leader_epoch=p.leader_epoch,
                replica_nodes=list(p.replicas),
                isr_nodes=list(p.isr),
                offline_replicas=[r for r in p.replicas if r not in live],
            )
        )
    for topic, partition in view.uninitialised:
        # Created, but the controller has not elected its leader yet.
        by_topic.setdefault(topic, []).append(
            Partition_(
                error_code=errors.LEADER_NOT_AVAILABLE,
                partition_index=partition,
                leader_id=NO_LEADER,
                leader_epoch=-1,
            )
        )
    names = requested_topics(request)
    unknown_ids: list[Any] = []
    if requested_topic_ids(request):
        # Kafka answers the topics named by id, and only them.
        names, unknown_ids = _ids_asked(view, request)
    topics = []
    for name in sorted(by_topic) if names is None else names:
        partitions = sorted(by_topic.get(name, []), key=lambda p: p.partition_index)
        if name in refused:
            # Kafka: Describe but not Create on a missing topic (zero id, as never created).
            topics.append(Topic_(error_code=TOPIC_AUTHORIZATION_FAILED, name=name,
                                 topic_id=NO_TOPIC_ID, is_internal=name in INTERNAL_TOPICS,
                                 partitions=[]))  # fmt: skip
            continue
        if name in created:
            code = errors.LEADER_NOT_AVAILABLE  # Kafka's answer while a new topic gets leaders
            partitions = []
        elif not partitions:
            code = (
                errors.UNKNOWN_TOPIC_OR_PARTITION
                if valid_name(name)
                else errors.INVALID_TOPIC_EXCEPTION
            )
        else:
            code = errors.NONE
        topics.append(
            Topic_(
                error_code=code,
                name=name,
                topic_id=_topic_id(view, name),
                is_internal=name in INTERNAL_TOPICS,
                partitions=partitions,
            )
        )
    # Kafka's KafkaApis: a topic the principal may not Describe is left out of a listing of
    # every topic, and answered TOPIC_AUTHORIZATION_FAILED (no partitions) when named: without
    # its id when named by name, without its name when named by id (ids are not secret).
    described = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                              [t.name for t in topics])  # fmt: skip
    if names is None:
        topics = [t for t in topics if t.name in described]
    by_id = bool(requested_topic_ids(request))
    asked_operations = request.version >= AUTHORIZED_OPERATIONS_VERSION
    wants_operations = asked_operations and request.body.include_topic_authorized_operations
    for topic in topics:
        if topic.name not in described:
            topic.error_code, topic.partitions, topic.is_internal = (
                TOPIC_AUTHORIZATION_FAILED, [], False)  # fmt: skip
            if by_id:
                topic.name = None
            else:
                topic.topic_id = NO_TOPIC_ID
        elif wants_operations and topic.error_code != TOPIC_AUTHORIZATION_FAILED:
            topic.topic_authorized_operations = authorized_operations(
                ctx, ResourceType.TOPIC, topic.name
            )
    topics = unknown_ids + topics
    response: Any = Response(
        throttle_time_ms=0,
        brokers=[
            Broker_(node_id=b, host=info.host, port=info.port, rack=info.rack)
            for b, info in brokers
        ],
        cluster_id=ctx.broker.cluster_id,
        controller_id=NO_LEADER if view.controller is None else view.controller,
        topics=topics,
    )
    if asked_operations and request.version <= LAST_CLUSTER_OPERATIONS_VERSION:
        response.cluster_authorized_operations = (
            cluster_authorized_operations(ctx)
            if request.body.include_cluster_authorized_operations
            else NO_AUTHORIZED_OPERATIONS
        )
    return response

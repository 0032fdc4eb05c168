"""Metadata: brokers from ``/brokers/ids``, the controller, and every requested topic's partitions
with leader, leader epoch, replicas and ISR from the partition states the engine wrote.

Everything is read from the store through the serving broker's own session (off the event loop),
so the answer is what the cluster's store holds, not what this process happens to know.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from coordkit import layout
from coordkit.engine.cluster_id import kafka_uuid
from coordkit.engine.snapshot import ClusterView, children, read_view
from coordkit.errors import CoordkitError, LayoutError, StoreError
from coordkit.model import NO_LEADER, BrokerInfo
from coordkit.paths import numeric_name
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext
from coordkit.store import MetadataStore

log = logging.getLogger("coordkit.serve")

Response = messages.MetadataResponse
Broker_ = nested(Response, "MetadataResponseBroker")
Topic_ = nested(Response, "MetadataResponseTopic")
Partition_ = nested(Response, "MetadataResponsePartition")
#: The topics Kafka marks internal in metadata.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
#: Kafka's ``Uuid.ZERO_UUID``: what a response carries for a topic with no id.
NO_TOPIC_ID = uuid.UUID(int=0)


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
            found.append((broker_id, layout.BROKER.decode(result[0], path)))
        except LayoutError as exc:
            log.warning("metadata without broker %s: %s", broker_id, exc)
    return found


def requested_topics(request: Request) -> list[str] | None:
    """The topic names asked for; ``None`` for every topic (v0's empty list, v1+'s null)."""
    topics = request.body.topics
    if topics is None or (request.version == 0 and not topics):
        return None
    return [t.name for t in topics if t.name is not None]


def _auto_create_allowed(ctx: BrokerContext, request: Request) -> bool:
    if not ctx.settings.auto_create_topics:
        return False
    return request.version < 4 or bool(request.body.allow_auto_topic_creation)


def _gather(
    ctx: BrokerContext, request: Request
) -> tuple[list[tuple[int, BrokerInfo]], ClusterView, set[str]]:
    """Brokers, the partition states and the topics created now (store work, off the loop)."""
    store = ctx.broker.store
    created: set[str] = set()
    names = requested_topics(request)
    if names and _auto_create_allowed(ctx, request):
        existing = set(children(store, layout.BROKER_TOPICS))
        for name in names:
            if name in existing:
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
    return read_brokers(store), read_view(store), created


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


async def handle_metadata(ctx: BrokerContext, request: Request) -> Any:
    brokers, view, created = await ctx.blocking(lambda: _gather(ctx, request))
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
    topics = []
    for name in sorted(by_topic) if names is None else names:
        partitions = sorted(by_topic.get(name, []), key=lambda p: p.partition_index)
        if name in created:
            code = errors.LEADER_NOT_AVAILABLE  # Kafka's answer while a new topic gets leaders
        elif not partitions:
            code = errors.UNKNOWN_TOPIC_OR_PARTITION
        else:
            code = errors.NONE
        topics.append(
            Topic_(
                error_code=code,
                name=name,
                topic_id=_topic_id(view, name),
                is_internal=name in INTERNAL_TOPICS,
                partitions=partitions if code != errors.UNKNOWN_TOPIC_OR_PARTITION else [],
            )
        )
    return Response(
        throttle_time_ms=0,
        brokers=[
            Broker_(node_id=b, host=info.host, port=info.port, rack=info.rack)
            for b, info in brokers
        ],
        cluster_id=ctx.broker.cluster_id,
        controller_id=NO_LEADER if view.controller is None else view.controller,
        topics=topics,
    )

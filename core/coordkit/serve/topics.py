"""CreateTopics and DeleteTopics through the engine's topic administration.

CreateTopics: the placement strategy the cluster runs places the replicas (or the request's own
assignment is checked and used), and the answer waits, up to the request's timeout, until the
controller has elected every new partition's leader — as Kafka's controller answers once the
topic is in its metadata.

DeleteTopics queues each topic in ``/admin/delete_topics`` and waits, up to the request's
timeout, until the controller has removed it; a topic still there then is REQUEST_TIMED_OUT
(its deletion goes on), as Kafka answers. The brokers drop a deleted topic's served logs when
they see it gone (see :mod:`coordkit.serve.follower`).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from coordkit import layout
from coordkit.engine.errors import TopicExistsError, UnknownTopicError
from coordkit.engine.states import TP, state_path
from coordkit.engine.topics import TopicAdmin
from coordkit.errors import CoordkitError, LayoutError, StoreError
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext
from coordkit.store import MetadataStore

log = logging.getLogger("coordkit.serve")

Response = messages.CreateTopicsResponse
Result = nested(Response, "CreatableTopicResult")
DeleteResponse = messages.DeleteTopicsResponse
DeleteResult = nested(DeleteResponse, "DeletableTopicResult")
#: How often an answer that waits for the controller looks at the store.
POLL_SECONDS = 0.02


def _create(ctx: BrokerContext, topic: Any, validate_only: bool) -> Any:
    """Create (or, validating only, place) one topic; its result entry."""
    partitions = (
        ctx.settings.default_partitions if topic.num_partitions == -1 else topic.num_partitions
    )
    factor = (
        ctx.settings.default_replication_factor
        if topic.replication_factor == -1
        else topic.replication_factor
    )
    assignment = {a.partition_index: list(a.broker_ids) for a in topic.assignments or []}
    result = Result(name=topic.name, num_partitions=partitions, replication_factor=factor)
    if assignment:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            result.error_code = errors.INVALID_REQUEST
            result.error_message = (
                "both an assignment and a partition count or replication factor were given"
            )
            return result
        result.num_partitions = len(assignment)
        result.replication_factor = len(next(iter(assignment.values())))
    config = {c.name: c.value for c in topic.configs or [] if c.value is not None}
    try:
        if validate_only:
            admin: TopicAdmin = ctx.admin
            if admin.store.exists(layout.topic_path(topic.name)) is not None:
                raise TopicExistsError(f"topic {topic.name!r} already exists")
            if not assignment:
                admin.placement.place(
                    admin.brokers(), partitions, factor, rng=admin.rng, topic=topic.name
                )
        else:
            ctx.admin.create_topic(
                topic.name,
                partitions,
                factor,
                config=config,
                assignment=assignment or None,
            )
    except (CoordkitError, ValueError) as exc:
        result.error_code = errors.topic_creation_error(exc)
        result.error_message = str(exc)
    return result


def wait_for_states(store: MetadataStore, tps: list[TP], timeout: float) -> None:
    """Until every partition of ``tps`` has a state (the controller elected its leader), or
    timeout."""
    paths = [state_path(tp) for tp in tps]
    deadline = time.monotonic() + timeout
    while paths and time.monotonic() < deadline:
        results = store.get_many(paths)
        paths = [p for p, r in zip(paths, results, strict=True) if isinstance(r, Exception)]
        if paths:
            time.sleep(POLL_SECONDS)


def _create_all(ctx: BrokerContext, request: Request) -> list[Any]:
    body = request.body
    results = []
    seen: set[str] = set()
    for topic in body.topics:
        if topic.name in seen:
            results.append(Result(name=topic.name, error_code=errors.INVALID_REQUEST,
                                  error_message="topic named twice in one request"))  # fmt: skip
            continue
        seen.add(topic.name)
        results.append(_create(ctx, topic, bool(body.validate_only)))
    if not body.validate_only:
        done = [(r.name, p) for r in results if r.error_code == errors.NONE
                for p in range(r.num_partitions)]  # fmt: skip
        wait_for_states(ctx.broker.store, done, max(body.timeout_ms, 0) / 1000)
    return results


async def handle_create_topics(ctx: BrokerContext, request: Request) -> Any:
    results = await ctx.blocking(lambda: _create_all(ctx, request))
    done = "would create" if request.body.validate_only else "created"
    for result in results:
        if result.error_code == errors.NONE:
            log.info("broker %s: %s topic %r (%s partitions, replication factor %s)", ctx.broker_id,
                     done, result.name, result.num_partitions, result.replication_factor)  # fmt: skip
    return Response(throttle_time_ms=0, topics=results)


def _queue_deletion(ctx: BrokerContext, name: str) -> Any:
    """Queue one topic for deletion; its result entry (NONE: queued)."""
    result = DeleteResult(name=name, error_code=errors.NONE)
    if not ctx.broker.config.delete_topic_enable:
        result.error_code = errors.TOPIC_DELETION_DISABLED
        result.error_message = "topic deletion is disabled (delete.topic.enable=false)"
        return result
    try:
        ctx.admin.delete_topic(name)
    except (UnknownTopicError, LayoutError) as exc:
        result.error_code = errors.UNKNOWN_TOPIC_OR_PARTITION
        result.error_message = str(exc)
    return result


def _wait_until_deleted(store: MetadataStore, names: list[str], timeout: float) -> set[str]:
    """Until no topic of ``names`` has its assignment or its deletion request left (the
    controller deleted it), or timeout; the topics still there."""
    paths = {name: (layout.topic_path(name), layout.delete_topic_path(name)) for name in names}
    deadline = time.monotonic() + timeout
    while True:
        listed = [path for name in sorted(paths) for path in paths[name]]
        found = dict(zip(listed, store.get_many(listed), strict=True))
        paths = {
            name: pair
            for name, pair in paths.items()
            if any(not isinstance(found[p], StoreError) for p in pair)
        }
        if not paths or time.monotonic() >= deadline:
            return set(paths)
        time.sleep(POLL_SECONDS)


def _delete_all(ctx: BrokerContext, request: Request) -> list[Any]:
    body = request.body
    results: list[Any] = []
    seen: set[str] = set()
    for name in body.topic_names or []:
        if name in seen:
            results.append(DeleteResult(name=name, error_code=errors.INVALID_REQUEST,
                                        error_message="topic named twice in one request"))  # fmt: skip
            continue
        seen.add(name)
        results.append(_queue_deletion(ctx, name))
    queued = [r for r in results if r.error_code == errors.NONE]
    if queued:
        timeout = max(body.timeout_ms, 0) / 1000
        left = _wait_until_deleted(ctx.broker.store, [r.name for r in queued], timeout)
        for result in queued:
            if result.name in left:
                result.error_code = errors.REQUEST_TIMED_OUT
                result.error_message = (
                    f"not deleted within {body.timeout_ms} ms; the deletion goes on"
                )
    return results


async def handle_delete_topics(ctx: BrokerContext, request: Request) -> Any:
    """DeleteTopics v0-5 (v6 may name topics by id, which the store does not keep)."""
    results = await ctx.blocking(lambda: _delete_all(ctx, request))
    for result in results:
        if result.error_code == errors.NONE:
            log.info("broker %s: deleted topic %r", ctx.broker_id, result.name)
    return DeleteResponse(throttle_time_ms=0, responses=results)

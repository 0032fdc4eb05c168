"""CreateTopics through the engine's topic administration: the placement strategy the cluster
runs places the replicas (or the request's own assignment is checked and used), and the answer
waits, up to the request's timeout, until the controller has elected every new partition's
leader — as Kafka's controller answers once the topic is in its metadata."""

from __future__ import annotations

import logging
import time
from typing import Any

from coordkit import layout
from coordkit.engine.errors import TopicExistsError
from coordkit.engine.states import state_path
from coordkit.engine.topics import TopicAdmin
from coordkit.errors import CoordkitError
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext
from coordkit.store import MetadataStore

log = logging.getLogger("coordkit.serve")

Response = messages.CreateTopicsResponse
Result = nested(Response, "CreatableTopicResult")
#: How often a CreateTopics answer looks for the new partitions' leaders.
_POLL_SECONDS = 0.02


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


def _wait_for_leaders(store: MetadataStore, created: list[Any], timeout: float) -> None:
    """Until every new partition has a state (the controller elected its leader), or timeout."""
    paths = [state_path((r.name, p)) for r in created for p in range(r.num_partitions)]
    deadline = time.monotonic() + timeout
    while paths and time.monotonic() < deadline:
        results = store.get_many(paths)
        paths = [p for p, r in zip(paths, results, strict=True) if isinstance(r, Exception)]
        if paths:
            time.sleep(_POLL_SECONDS)


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
        done = [r for r in results if r.error_code == errors.NONE]
        _wait_for_leaders(ctx.broker.store, done, max(body.timeout_ms, 0) / 1000)
    return results


async def handle_create_topics(ctx: BrokerContext, request: Request) -> Any:
    results = await ctx.blocking(lambda: _create_all(ctx, request))
    for result in results:
        if result.error_code == errors.NONE:
            log.info("broker %s: created topic %r (%s partitions, replication factor %s)",
                     ctx.broker_id, result.name, result.num_partitions, result.replication_factor)  # fmt: skip
    return Response(throttle_time_ms=0, topics=results)

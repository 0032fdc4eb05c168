"""CreatePartitions through the engine's topic administration: the placement strategy the cluster
runs places the new partitions' replicas given the topic's existing ones (or the request's own
assignment is checked and used), and the answer waits, up to the request's timeout, until the
controller has elected every new partition's leader, as CreateTopics does.

``validate_only`` runs every check (and the placement) and writes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from coordkit.engine.errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    UnknownTopicError,
)
from coordkit.engine.states import TP
from coordkit.errors import CoordkitError, LayoutError
from coordkit.kafka import layout
from coordkit.kafka.acls import AclOperation, ResourceType
from coordkit.kafka.model import TopicAssignment, validate_topic_name
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.apis.topics import wait_for_states
from coordkit.serve.authorization import TOPIC_AUTHORIZATION_FAILED, allowed
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext

log = logging.getLogger("coordkit.serve")

Response = messages.CreatePartitionsResponse
Result = nested(Response, "CreatePartitionsTopicResult")


class QueuedForDeletionError(CoordkitError):
    """The topic is being deleted (Kafka answers INVALID_TOPIC_EXCEPTION)."""


def _error_code(exc: Exception) -> int:
    if isinstance(exc, UnknownTopicError):
        return errors.UNKNOWN_TOPIC_OR_PARTITION
    if isinstance(exc, QueuedForDeletionError):
        return errors.INVALID_TOPIC_EXCEPTION
    if isinstance(exc, LayoutError):
        return errors.UNKNOWN_SERVER_ERROR  # the topic's assignment does not decode
    return errors.topic_creation_error(exc)


def _requested_assignment(
    ctx: BrokerContext, name: str, existing: TopicAssignment, count: int, lists: Sequence[Any]
) -> dict[int, list[int]]:
    """The request's replica lists for the new partitions, checked as Kafka checks them: one
    list per new partition, registered brokers only, no broker twice in a list (the replication
    factor is the engine's check)."""
    current = existing.partition_count
    if len(lists) != count - current:
        raise InvalidReplicaAssignmentError(
            f"topic {name!r}: increasing from {current} to {count} partitions needs "
            f"{count - current} replica assignments, got {len(lists)}"
        )
    registered = {b.id for b in ctx.admin.brokers()}
    placed: dict[int, list[int]] = {}
    for offset, entry in enumerate(lists):
        partition = current + offset
        replicas = list(entry.broker_ids)
        if not replicas:
            raise InvalidReplicaAssignmentError(f"{name}-{partition}: the replica list is empty")
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignmentError(
                f"{name}-{partition}: replicas {replicas} repeat a broker"
            )
        unknown = sorted(set(replicas) - registered)
        if unknown:
            raise InvalidReplicaAssignmentError(
                f"{name}-{partition}: brokers {unknown} are not registered "
                f"(registered: {sorted(registered)})"
            )
        placed[partition] = replicas
    return placed


def _check(ctx: BrokerContext, topic: Any) -> tuple[TopicAssignment, dict[int, list[int]] | None]:
    """The topic's assignment and the request's checked replica lists (``None``: placement's
    choice), or the refusal.

    :raises CoordkitError: an unknown topic or one being deleted, not more partitions, a bad
        assignment.
    """
    admin = ctx.admin
    try:
        validate_topic_name(topic.name)
    except ValueError as exc:
        raise UnknownTopicError(str(exc)) from None
    existing = admin.assignment(topic.name)
    if admin.store.exists(layout.delete_topic_path(topic.name)) is not None:
        raise QueuedForDeletionError(f"topic {topic.name!r} is queued for deletion")
    if topic.count <= existing.partition_count:
        raise InvalidPartitionsError(
            f"topic {topic.name!r} has {existing.partition_count} partitions; the number of "
            f"partitions can only be increased, got {topic.count}"
        )
    if topic.assignments is None:
        return existing, None
    return existing, _requested_assignment(
        ctx, topic.name, existing, topic.count, topic.assignments
    )


def _grow(ctx: BrokerContext, topic: Any, validate_only: bool) -> tuple[Any, list[TP]]:
    """Add one topic's partitions (or, validating only, check and place them); its result
    entry and the partitions added."""
    result = Result(name=topic.name, error_code=errors.NONE)
    if not allowed(ctx, AclOperation.ALTER, ResourceType.TOPIC, topic.name):
        # Kafka's KafkaApis: Alter on the topic.
        result.error_code = TOPIC_AUTHORIZATION_FAILED
        return result, []
    try:
        existing, assignment = _check(ctx, topic)
        count = existing.partition_count
        if validate_only:
            if assignment is None:
                admin = ctx.admin
                admin.placement.place(
                    admin.brokers(),
                    topic.count - count,
                    len(existing.partitions[0]),
                    existing=existing.partitions,
                    rng=admin.rng,
                    topic=topic.name,
                )
            return result, []
        grown = ctx.admin.add_partitions(topic.name, topic.count, assignment=assignment)
    except (CoordkitError, ValueError) as exc:
        result.error_code = _error_code(exc)
        result.error_message = str(exc)
        return result, []
    return result, [(topic.name, p) for p in sorted(grown.partitions) if p >= count]


def _grow_all(ctx: BrokerContext, request: Request) -> list[Any]:
    body = request.body
    results = []
    added: list[TP] = []
    seen: set[str] = set()
    for topic in body.topics:
        if topic.name in seen:
            results.append(Result(name=topic.name, error_code=errors.INVALID_REQUEST,
                                  error_message="topic named twice in one request"))  # fmt: skip
            continue
        seen.add(topic.name)
        result, new = _grow(ctx, topic, bool(body.validate_only))
        results.append(result)
        added.extend(new)
    wait_for_states(ctx.broker.store, added, max(body.timeout_ms, 0) / 1000)
    return results


async def handle_create_partitions(ctx: BrokerContext, request: Request) -> Any:
    results = await ctx.blocking(lambda: _grow_all(ctx, request))
    if not request.body.validate_only:
        for topic, result in zip(request.body.topics, results, strict=True):
            if result.error_code == errors.NONE:
                log.info("broker %s: topic %r now has %s partitions",
                         ctx.broker_id, topic.name, topic.count)  # fmt: skip
    return Response(throttle_time_ms=0, results=results)

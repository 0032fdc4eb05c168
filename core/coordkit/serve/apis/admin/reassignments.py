"""AlterPartitionReassignments and ListPartitionReassignments (KIP-455) on the engine's
reassignment.

The controller's logic is the engine's (:mod:`coordkit.engine.controller.reassignment`): a
reassignment is asked for by writing ``/admin/reassign_partitions``, as Kafka's ZooKeeper-mode
tools did (:meth:`TopicAdmin.reassign_partitions` when none runs; a running request gets the new
partitions merged in, at its node version, which the controller watches). Any broker takes the
request (a KRaft broker forwards it to its controller).

Every partition is checked first, as Kafka 4's ``ReplicationControlManager``
(``alterPartitionReassignment``, ``validateManualPartitionAssignment``) checks it, with its
messages: an unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION; an empty replica list, a
broker named twice or one not registered INVALID_REPLICA_ASSIGNMENT; with v1's
``allow_replication_factor_change`` false, a target of another length INVALID_REPLICATION_FACTOR;
a cancellation (replicas null) of a partition with no reassignment NO_REASSIGNMENT_IN_PROGRESS.
Only the partitions that pass are written. A cancellation moves the partition back to its
original replicas (the engine reassigns it to them), or drops it from the request when the
controller has not started it.

Listing: a partition is reassigning while the request names it or its topic node lists replicas
being added or removed; its replicas, adding and removing replicas are the topic node's (Kafka's
``RS``, ``AR``, ``RR``), or, before the controller started it, what they will be.

Under an authorizer, altering needs Alter on the cluster and listing Describe on it: else
CLUSTER_AUTHORIZATION_FAILED as Kafka's error response shapes it (top-level, and for each
partition named; a listing names the topics asked with no partitions' replicas), nothing written.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from coordkit.engine.errors import InvalidReplicaAssignmentError, UnknownTopicError
from coordkit.engine.states import TP
from coordkit.errors import BadVersionError, NodeExistsError, NoNodeError, StoreError
from coordkit.kafka.acls import AclOperation
from coordkit.kafka.layout import REASSIGN_PARTITIONS, decode_reassignment, encode_reassignment
from coordkit.kafka.model import TopicAssignment
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.authorization import (
    CLUSTER_AUTHORIZATION_FAILED,
    cluster_allowed,
    not_authorized_message,
)
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext

log = logging.getLogger("coordkit.serve")

AlterResponse = messages.AlterPartitionReassignmentsResponse
AlterTopic = nested(AlterResponse, "ReassignableTopicResponse")
AlterPartition = nested(AlterResponse, "ReassignablePartitionResponse")
ListResponse = messages.ListPartitionReassignmentsResponse
ListTopic = nested(ListResponse, "OngoingTopicReassignment")
ListPartition = nested(ListResponse, "OngoingPartitionReassignment")

ALTER_VERSIONS = (0, 1)
LIST_VERSIONS = (0, 0)
#: AlterPartitionReassignments v1+ may forbid a change of replication factor.
ALLOW_RF_CHANGE_VERSION = 1
#: Attempts at merging into a request the controller rewrites meanwhile.
MERGE_ATTEMPTS = 20

Outcome = tuple[int, str | None]


def _requested(ctx: BrokerContext) -> tuple[dict[TP, tuple[int, ...]], int | None]:
    """The running request's plan and node version (``{}, None``: none)."""
    try:
        data, stat = ctx.broker.store.get(REASSIGN_PARTITIONS)
    except NoNodeError:
        return {}, None
    return dict(decode_reassignment(data)), stat.version


def _assignments(ctx: BrokerContext, topics: set[str]) -> dict[str, TopicAssignment]:
    found = {}
    for topic in sorted(topics):
        try:
            found[topic] = ctx.admin.assignment(topic)
        except UnknownTopicError:
            continue
    return found


def _reassigning(assignment: TopicAssignment, partition: int) -> bool:
    return partition in assignment.adding or partition in assignment.removing


def _check(
    tp: TP,
    replicas: list[int] | None,
    assignment: TopicAssignment | None,
    registered: set[int],
    running: Mapping[TP, tuple[int, ...]],
    allow_rf_change: bool,
) -> Outcome | None:
    """Why ``tp``'s requested change is refused, or ``None``."""
    topic, partition = tp
    if assignment is None:
        return errors.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {topic}."
    current = assignment.partitions.get(partition)
    if current is None:
        return errors.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {topic}:{partition}."
    if replicas is None:
        if tp in running or _reassigning(assignment, partition):
            return None
        return errors.NO_REASSIGNMENT_IN_PROGRESS, None  # Kafka 4.4 gives no message
    if not replicas:
        return errors.INVALID_REPLICA_ASSIGNMENT, (
            "The manual partition assignment includes an empty replica list."
        )
    previous = None
    for broker in sorted(replicas):
        if broker not in registered:
            return errors.INVALID_REPLICA_ASSIGNMENT, (
                f"The manual partition assignment includes broker {broker}, but no such broker "
                "is registered."
            )
        if broker == previous:
            return errors.INVALID_REPLICA_ASSIGNMENT, (
                f"The manual partition assignment includes the broker {broker} more than once."
            )
        previous = broker
    original = assignment.original_replicas(partition)
    if not allow_rf_change and len(replicas) != len(original):
        return errors.INVALID_REPLICATION_FACTOR, (
            f"The replication factor is changed from {len(original)} to {len(replicas)}"
        )
    return None


def _target(
    tp: TP, replicas: list[int] | None, assignment: TopicAssignment
) -> tuple[int, ...] | None:
    """What the request node should say for ``tp`` (``None``: leave it out)."""
    if replicas is not None:
        return tuple(replicas)
    if _reassigning(assignment, tp[1]):
        return assignment.original_replicas(tp[1])  # cancelled: back where it was
    return None  # never started: dropped from the request


def _write(ctx: BrokerContext, changes: dict[TP, tuple[int, ...] | None]) -> None:
    """Merge ``changes`` into the request node (created when none runs)."""
    store = ctx.broker.store
    for _ in range(MERGE_ATTEMPTS):
        plan, version = _requested(ctx)
        for tp, target in changes.items():
            if target is None:
                plan.pop(tp, None)
            else:
                plan[tp] = target
        try:
            if version is None:
                if plan:
                    ctx.admin.reassign_partitions(plan)
            elif plan:
                store.set(REASSIGN_PARTITIONS, encode_reassignment(plan), version)
            else:
                store.delete(REASSIGN_PARTITIONS, version)
            return
        except (BadVersionError, NoNodeError):
            continue  # the controller rewrote the request meanwhile: merge again
        except InvalidReplicaAssignmentError as exc:
            if isinstance(exc.__context__, NodeExistsError):
                continue  # created meanwhile
            raise
    raise StoreError(f"{REASSIGN_PARTITIONS} kept changing; the reassignment was not written")


def _alter(ctx: BrokerContext, request: Request) -> list[Any]:
    body = request.body
    allow = body.allow_replication_factor_change if request.version >= 1 else True
    topics = {t.name for t in body.topics}
    assignments = _assignments(ctx, topics)
    registered = {b.id for b in ctx.admin.brokers()}
    running, _ = _requested(ctx)
    outcomes: dict[TP, Outcome] = {}
    changes: dict[TP, tuple[int, ...] | None] = {}
    for t in body.topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            assignment = assignments.get(t.name)
            refused = _check(tp, p.replicas, assignment, registered, running, allow)
            if refused is not None:
                outcomes[tp] = refused
                continue
            assert assignment is not None
            changes[tp] = _target(tp, p.replicas, assignment)
            outcomes[tp] = (errors.NONE, None)
    if changes:
        _write(ctx, changes)
    return [
        AlterTopic(
            name=t.name,
            partitions=[
                AlterPartition(
                    partition_index=p.partition_index,
                    error_code=outcomes[(t.name, p.partition_index)][0],
                    error_message=outcomes[(t.name, p.partition_index)][1],
                )
                for p in t.partitions
            ],
        )
        for t in body.topics
    ]


def _alter_refused(request: Request) -> Any:
    """Kafka's error response: the refusal top-level and for each partition named."""
    message = not_authorized_message(request.api.name)
    topics = [
        AlterTopic(name=t.name, partitions=[
            AlterPartition(partition_index=p.partition_index,
                           error_code=CLUSTER_AUTHORIZATION_FAILED, error_message=message)
            for p in t.partitions])
        for t in request.body.topics
    ]  # fmt: skip
    return AlterResponse(throttle_time_ms=0, error_code=CLUSTER_AUTHORIZATION_FAILED,
                         error_message=message, responses=topics)  # fmt: skip


async def handle_alter_partition_reassignments(ctx: BrokerContext, request: Request) -> Any:
    if not cluster_allowed(ctx, AclOperation.ALTER):
        return _alter_refused(request)
    try:
        responses = await ctx.blocking(lambda: _alter(ctx, request))
    except (StoreError, InvalidReplicaAssignmentError) as exc:
        log.warning("broker %s: AlterPartitionReassignments: %s", ctx.broker_id, exc)
        return AlterResponse(throttle_time_ms=0, error_code=errors.REQUEST_TIMED_OUT,
                             error_message=str(exc), responses=[])  # fmt: skip
    # v1 echoes whether the request allowed a change of replication factor, as Kafka's.
    allowed = request.body.allow_replication_factor_change if request.version >= 1 else True
    return AlterResponse(throttle_time_ms=0, error_code=errors.NONE, error_message=None,
                         allow_replication_factor_change=allowed, responses=responses)  # fmt: skip


def _ongoing(tp: TP, assignment: TopicAssignment, target: tuple[int, ...] | None) -> Any | None:
    partition = tp[1]
    current = assignment.partitions.get(partition)
    if current is None:
        return None
    if _reassigning(assignment, partition):
        return ListPartition(partition_index=partition, replicas=list(current),
                             adding_replicas=list(assignment.adding.get(partition, ())),
                             removing_replicas=list(assignment.removing.get(partition, ())))  # fmt: skip
    if target is None or tuple(target) == tuple(current):
        return None
    # Requested, not started yet: Kafka's RS = TRS then ORS - TRS, AR, RR.
    adding = [r for r in target if r not in current]
    removing = [r for r in current if r not in target]
    return ListPartition(partition_index=partition, replicas=[*target, *removing],
                         adding_replicas=adding, removing_replicas=removing)  # fmt: skip


def _list(ctx: BrokerContext, request: Request) -> list[Any]:
    running, _ = _requested(ctx)
    asked = request.body.topics
    if asked is None:
        topics = {t for t, _ in running} | set(ctx.admin.topics())
        wanted = None
    else:
        topics = {t.name for t in asked}
        wanted = {(t.name, p) for t in asked for p in t.partition_indexes}
    found: dict[str, list[Any]] = {}
    for topic, assignment in _assignments(ctx, topics).items():
        for partition in sorted(assignment.partitions):
            tp = (topic, partition)
            if wanted is not None and tp not in wanted:
                continue
            ongoing = _ongoing(tp, assignment, running.get(tp))
            if ongoing is not None:
                found.setdefault(topic, []).append(ongoing)
    return [ListTopic(name=topic, partitions=parts) for topic, parts in sorted(found.items())]


def _list_refused(request: Request) -> Any:
    """Kafka's error response: the refusal top-level, the topics asked with their partitions'
    indexes alone."""
    topics = [
        ListTopic(name=t.name, partitions=[ListPartition(partition_index=p)
                                           for p in t.partition_indexes])
        for t in request.body.topics or []
    ]  # fmt: skip
    return ListResponse(throttle_time_ms=0, error_code=CLUSTER_AUTHORIZATION_FAILED,
                        error_message=not_authorized_message(request.api.name),
                        topics=topics)  # fmt: skip


async def handle_list_partition_reassignments(ctx: BrokerContext, request: Request) -> Any:
    if not cluster_allowed(ctx, AclOperation.DESCRIBE):
        return _list_refused(request)
    topics = await ctx.blocking(lambda: _list(ctx, request))
    return ListResponse(throttle_time_ms=0, error_code=errors.NONE, error_message=None,
                        topics=topics)  # fmt: skip

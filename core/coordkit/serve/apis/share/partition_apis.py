"""ShareFetch and ShareAcknowledge (v1-2): the share-partition leader's apis (issue 37), as
Kafka's ``KafkaApis.handleShareFetchRequest`` / ``handleShareAcknowledgeRequest`` with its
``SharePartitionManager``, held to Kafka 4.4's answers.

A request names its group, member and share-session epoch (:mod:`~coordkit.serve.dataplane.
share.share_session`): 0 opens the member's session (a ShareFetch carrying acknowledgements
then: INVALID_REQUEST; ShareAcknowledge may not open one: INVALID_SHARE_SESSION_EPOCH); -1 closes
it (its acknowledgements applied, nothing fetched, the member's acquired records released); any
other must be the session's (SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH); a session
ends with the connection it was opened on (the member's records released). The coordinator is
not asked whether the member holds the partition (Kafka does not).

Acknowledgements come first and are stored before the answer (``AcknowledgeErrorCode`` per
partition, see :meth:`~coordkit.serve.dataplane.share.share_partition.SharePartition.acknowledge`).
Then the fetch: every partition of the session acquires whole batches from its first available
offset up to ``MaxRecords`` (ShareFetch waits up to ``MaxWaitMs`` while nothing could be
acquired, woken by appends and by releases), answered with the batches and the acquired ranges,
locked for the group's ``share.record.lock.duration.ms``. The answer opening a session lists its
every partition, later ones the partitions with records, an error or an acknowledgement; records
the request's own acknowledgements released go to a later fetch (Kafka's fetch does not wait for
their state write).

Refusals per partition: a topic id not known (UNKNOWN_TOPIC_ID), not the leader
(NOT_LEADER_OR_FOLLOWER, with the current leader), Read not allowed on the topic
(TOPIC_AUTHORIZATION_FAILED); for the request: Read not allowed on the group
(GROUP_AUTHORIZATION_FAILED), no group or member id (INVALID_REQUEST).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
import weakref
from collections.abc import Container, Iterable
from functools import partial
from typing import Any

import attrs

from coordkit.errors import LayoutError, StoreError
from coordkit.kafka.acls import AclOperation, ResourceType
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.apis.fetch import high_watermark
from coordkit.serve.apis.metadata import node_endpoints
from coordkit.serve.apis.share.offset_apis import SHARE_OFFSET_APIS
from coordkit.serve.apis.share.share_reads import (
    aborted_batches,
    group_share_settings,
    initial_offset,
    log_batches,
    reads_committed,
)
from coordkit.serve.authorization import (
    GROUP_AUTHORIZATION_FAILED,
    TOPIC_AUTHORIZATION_FAILED,
    allowed,
    allowed_names,
)
from coordkit.serve.classes import nested
from coordkit.serve.connection import on_close
from coordkit.serve.context import BrokerContext
from coordkit.serve.dataplane.log_transactions import last_stable_offset
from coordkit.serve.dataplane.share.in_flight import (
    AcknowledgementBatch,
    AcknowledgeType,
    batches_error,
)
from coordkit.serve.dataplane.share.partition_manager import (
    LoadedPartition,
    ShareKey,
    SharePartitionManager,
)
from coordkit.serve.dataplane.share.persister import StorePersister
from coordkit.serve.dataplane.share.share_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    SharePartitionKey,
    ShareSessionError,
)

ShareFetchResponse = messages.ShareFetchResponse
FetchTopic = nested(ShareFetchResponse, "ShareFetchableTopicResponse")
FetchPartition = nested(ShareFetchResponse, "PartitionData")
AcquiredRecords = nested(ShareFetchResponse, "AcquiredRecords")
FetchLeader = nested(ShareFetchResponse, "LeaderIdAndEpoch")
FetchEndpoint = nested(ShareFetchResponse, "NodeEndpoint")
ShareAcknowledgeResponse = messages.ShareAcknowledgeResponse
AckTopic = nested(ShareAcknowledgeResponse, "ShareAcknowledgeTopicResponse")
AckPartition = nested(ShareAcknowledgeResponse, "PartitionData")
AckLeader = nested(ShareAcknowledgeResponse, "LeaderIdAndEpoch")
AckEndpoint = nested(ShareAcknowledgeResponse, "NodeEndpoint")

log = logging.getLogger("coordkit.serve.share")

#: The first ShareAcknowledge version with ``AcquisitionLockTimeoutMs`` and renewals.
RENEW_VERSION = 2

_managers: weakref.WeakKeyDictionary[BrokerContext, SharePartitionManager] = (
    weakref.WeakKeyDictionary()
)


def share_partitions(ctx: BrokerContext) -> SharePartitionManager:
    """The broker's share-partition manager (made on first use, and told by the process's
    share-group coordinators when members leave and groups are deleted)."""
    manager = _managers.get(ctx)
    if manager is None:
        manager = _managers[ctx] = SharePartitionManager(
            StorePersister(ctx.broker.store), ctx.settings.share, ctx.blocking,
            leads=partial(_leads, ctx),
        )  # fmt: skip
        # Told by every share-group coordinator of the process: a group's coordinator may sit
        # on another of its brokers than the partition's leader.
        replicas = ctx.logs.replicas
        brokers = [c.broker for c in getattr(replicas, "contexts", {}).values()]
        for broker in {id(b): b for b in [ctx.broker, *brokers]}.values():
            listeners = getattr(broker.group_coordinator, "share_group_listeners", None)
            if listeners is not None:
                listeners.add(manager)
    return manager


def _leads(ctx: BrokerContext, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> bool:
    """Whether ``ctx``'s broker leads the partition in ``leader_epoch``."""
    name = ctx.topic_ids.name_of(topic_id)
    if name is None:
        return False
    found = ctx.leadership((name, partition))
    return found is not None and found == (ctx.broker_id, leader_epoch)


@attrs.define
class PartitionAnswer:
    """One partition's outcome: its error, its acknowledgement's error, what it acquired."""

    topic_id: uuid.UUID
    partition: int
    error: int = errors.NONE
    acknowledge_error: int | None = None
    leader: tuple[int, int] | None = None
    records: bytes = b""
    acquired: list[Any] = attrs.field(factory=list)


async def _partition(
    ctx: BrokerContext, manager: SharePartitionManager, group_id: str, topic: str,
    key: SharePartitionKey, answer: PartitionAnswer,
) -> LoadedPartition | None:  # fmt: skip
    """The share partition of ``key`` if this broker leads it (else ``answer`` says why not)."""
    tp = (topic, key[1])
    error, leadership = ctx.leader_error(tp)
    if error or leadership is None:
        answer.error = error or errors.UNKNOWN_TOPIC_OR_PARTITION
        answer.leader = leadership
        return None
    config, reset = group_share_settings(ctx, group_id)
    try:
        return await manager.load(
            (group_id, *key), leadership[1], lambda: initial_offset(ctx, tp, reset), config
        )
    except (StoreError, LayoutError) as exc:
        answer.error = errors.COORDINATOR_NOT_AVAILABLE
        _log_store_failure(ctx, group_id, key, exc)
        return None


def _log_store_failure(
    ctx: BrokerContext, group: str, key: SharePartitionKey, exc: Exception
) -> None:
    log.warning("broker %s: share partition %s of group %r not loaded: %s",
                ctx.broker_id, key, group, exc)  # fmt: skip


def _batches(partition: Any) -> list[AcknowledgementBatch]:
    return [
        AcknowledgementBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types))
        for b in partition.acknowledgement_batches or ()
    ]


async def _acknowledge(
    ctx: BrokerContext, manager: SharePartitionManager, group_id: str, member_id: str,
    names: dict[uuid.UUID, str], readable: set[str], topics: Iterable[Any], renew: bool,
    answers: dict[SharePartitionKey, PartitionAnswer],
) -> dict[SharePartitionKey, set[int]]:  # fmt: skip
    """Apply the acknowledgements of ``topics``' partitions (those that carry any); the offsets
    they released, by partition (every partition acknowledging is a key)."""
    released: dict[SharePartitionKey, set[int]] = {}
    for topic in topics:
        name = names.get(topic.topic_id)
        for partition in topic.partitions:
            batches = _batches(partition)
            if not batches:
                continue
            key = (topic.topic_id, partition.partition_index)
            answer = answers.setdefault(key, PartitionAnswer(*key))
            released.setdefault(key, set())
            if name is None:
                answer.acknowledge_error = errors.UNKNOWN_TOPIC_ID
            elif name not in readable:
                answer.acknowledge_error = TOPIC_AUTHORIZATION_FAILED
            elif batches_error(batches, renew_allowed=renew) is not None:
                answer.acknowledge_error = errors.INVALID_REQUEST
            else:
                probe = PartitionAnswer(*key)
                loaded = await _partition(ctx, manager, group_id, name, key, probe)
                if loaded is None:
                    answer.acknowledge_error, answer.leader = probe.error, probe.leader
                else:
                    share_key: ShareKey = (group_id, *key)
                    answer.acknowledge_error = await manager.acknowledge(
                        share_key, loaded, member_id, batches
                    )
                    if answer.acknowledge_error == errors.NONE:
                        released[key] = {
                            o for b in batches for o in range(b.first_offset, b.last_offset + 1)
                            if b.type_of(o) == AcknowledgeType.RELEASE
                        }  # fmt: skip
    return released


def _acquire(
    ctx: BrokerContext, manager: SharePartitionManager, loaded: LoadedPartition,
    share_key: ShareKey, topic: str, member_id: str, max_records: int, budget: int,
    held: Container[int], committed: bool,
) -> tuple[bytes, list[Any], bool]:  # fmt: skip
    """Acquire from the log for ``member_id``: the batches holding acquired offsets, the
    acquired ranges and whether records of aborted transactions were archived. ``committed``
    (the group's ``share.isolation.level`` is read_committed): read below the last stable
    offset, not the high watermark, and archive what aborted transactions wrote."""
    tp = (topic, share_key[2])
    partition_log = ctx.logs.get(tp)
    upto = high_watermark(ctx, tp, partition_log)
    if committed:
        upto = last_stable_offset(partition_log, upto)
    partition = loaded.partition
    if partition_log.log_start > partition.start_offset:
        partition.move_start_to(partition_log.log_start)
    if not partition.can_acquire():
        return b"", [], False
    batches = log_batches(partition_log, partition.next_fetch_offset(), upto, budget)
    aborted = {
        offset
        for batch in (aborted_batches(partition_log, batches) if committed else ())
        for offset in range(batch.first_offset, batch.last_offset + 1)
    }
    ranges = manager.acquire(share_key, loaded, member_id,
                             [(b.first_offset, b.last_offset) for b in batches], max_records,
                             held, aborted)  # fmt: skip
    if not ranges:
        return b"", [], bool(aborted)
    data = b"".join(
        b.data
        for b in batches
        if any(r.first_offset <= b.last_offset and b.first_offset <= r.last_offset for r in ranges)
    )
    acquired = [AcquiredRecords(first_offset=r.first_offset, last_offset=r.last_offset,
                                delivery_count=r.delivery_count) for r in ranges]  # fmt: skip
    return data, acquired, bool(aborted)


def _response_partition(answer: PartitionAnswer) -> Any:
    # Kafka fills the current leader in for NOT_LEADER_OR_FOLLOWER only (else its zeros).
    leader = FetchLeader(leader_id=0, leader_epoch=0)
    if answer.error == errors.NOT_LEADER_OR_FOLLOWER and answer.leader is not None:
        leader = FetchLeader(leader_id=answer.leader[0], leader_epoch=answer.leader[1])
    return FetchPartition(
        partition_index=answer.partition, error_code=answer.error,
        acknowledge_error_code=answer.acknowledge_error or errors.NONE, current_leader=leader,
        records=answer.records, acquired_records=answer.acquired,
    )  # fmt: skip


def _fetch_error(code: int, message: str | None = None) -> Any:
    return ShareFetchResponse(throttle_time_ms=0, error_code=code, error_message=message,
                              acquisition_lock_timeout_ms=0, responses=[], node_endpoints=[])  # fmt: skip


def _requested(topics: Iterable[Any]) -> list[SharePartitionKey]:
    return [(t.topic_id, p.partition_index) for t in topics for p in t.partitions]


async def handle_share_fetch(ctx: BrokerContext, request: Request) -> Any:
    body = request.body
    group_id, member_id, epoch = body.group_id, body.member_id, body.share_session_epoch
    if not allowed(ctx, AclOperation.READ, ResourceType.GROUP, group_id or ""):
        return _fetch_error(GROUP_AUTHORIZATION_FAILED)
    if not group_id or not member_id:
        return _fetch_error(errors.INVALID_REQUEST, "a share fetch names its group and member")
    manager = share_partitions(ctx)
    requested = _requested(body.topics)
    forgotten = [(t.topic_id, p) for t in body.forgotten_topics_data for p in t.partitions]
    has_acks = any(p.acknowledgement_batches for t in body.topics for p in t.partitions)
    session_key = (group_id, member_id)
    try:
        if epoch == FINAL_EPOCH:
            # Kafka 4.4 fetches nothing then, whatever partitions the request names.
            manager.sessions.close(session_key)
            session_partitions: list[SharePartitionKey] = []
        elif epoch == INITIAL_EPOCH:
            if has_acks:
                return _fetch_error(errors.INVALID_REQUEST,
                                    "acknowledgements in a share fetch opening a session")  # fmt: skip
            session = manager.sessions.open(session_key, requested)
            closing = on_close.get()
            if closing is not None:
                closing.append(partial(manager.connection_closed, session))
            session_partitions = list(session.partitions)
            await manager.revalidate([(group_id, *k) for k in session_partitions])
        else:
            session = manager.sessions.next(session_key, epoch)
            session.update(requested, forgotten)
            session_partitions = list(session.partitions)
    except ShareSessionError as exc:
        return _fetch_error(exc.code, str(exc))
    names = await ctx.topic_names({k[0] for k in [*requested, *session_partitions]})
    readable = allowed_names(ctx, AclOperation.READ, ResourceType.TOPIC, names.values())
    answers: dict[SharePartitionKey, PartitionAnswer] = {}
    renew = request.version >= RENEW_VERSION and bool(body.is_renew_ack)
    released = await _acknowledge(ctx, manager, group_id, member_id, names, readable,
                                  body.topics, renew, answers)  # fmt: skip
    lock_ms = group_share_settings(ctx, group_id)[0].record_lock_duration_ms
    if epoch == FINAL_EPOCH:
        manager.release_member(group_id, member_id)
    else:
        await _fetch(ctx, manager, request, group_id, member_id, session_partitions, names,
                     readable, answers, released)  # fmt: skip
    # Kafka 4.4 lists every partition of a new session, later the partitions with records, an
    # error or an acknowledgement only.
    include = set(session_partitions) if epoch == INITIAL_EPOCH else set()
    shown = [a for k, a in answers.items()
             if k in include or a.error or a.acquired or a.acknowledge_error is not None]  # fmt: skip
    topics: dict[uuid.UUID, list[Any]] = {}
    for answer in shown:
        topics.setdefault(answer.topic_id, []).append(_response_partition(answer))
    leaders = {a.leader[0] for a in shown if a.leader is not None and a.error}
    return ShareFetchResponse(
        throttle_time_ms=0, error_code=errors.NONE, acquisition_lock_timeout_ms=lock_ms,
        responses=[FetchTopic(topic_id=t, partitions=p) for t, p in topics.items()],
        node_endpoints=await node_endpoints(ctx, leaders, FetchEndpoint),
    )  # fmt: skip


async def _fetch(
    ctx: BrokerContext, manager: SharePartitionManager, request: Request, group_id: str,
    member_id: str, partitions: list[SharePartitionKey], names: dict[uuid.UUID, str],
    readable: set[str], answers: dict[SharePartitionKey, PartitionAnswer],
    released: dict[SharePartitionKey, set[int]],
) -> None:  # fmt: skip
    """Acquire for every partition of the session, waiting up to ``MaxWaitMs`` while nothing
    could be acquired — but not after acknowledgements (``released``: what they released,
    which this fetch does not acquire: Kafka's fetch does not wait for the acknowledgements'
    state write that makes them available)."""
    body = request.body
    deadline = time.monotonic() + max(body.max_wait_ms, 0) / 1000
    max_records = body.max_records if body.max_records > 0 else 500
    committed = reads_committed(ctx, group_id)
    while True:
        woken = [ctx.logs.changed(), manager.changed()]  # before reading: a change wakes us
        budget = body.max_bytes if body.max_bytes > 0 else 2**31 - 1
        found = 0
        skipped = False  # aborted records archived: what follows them is read at once
        for key in partitions:
            answer = answers.setdefault(key, PartitionAnswer(*key))
            name = names.get(key[0])
            if name is None:
                answer.error = errors.UNKNOWN_TOPIC_ID
                continue
            if name not in readable:
                answer.error = TOPIC_AUTHORIZATION_FAILED
                continue
            loaded = await _partition(ctx, manager, group_id, name, key, answer)
            if loaded is None:
                continue
            answer.error = errors.NONE
            data, acquired, archived = _acquire(
                ctx, manager, loaded, (group_id, *key), name, member_id, max_records - found,
                max(budget, 1), released.get(key, frozenset()), committed,
            )  # fmt: skip
            skipped = skipped or archived
            answer.records += data
            answer.acquired += acquired
            budget -= len(data)
            found += sum(a.last_offset - a.first_offset + 1 for a in acquired)
            if found >= max_records:
                break
        left = deadline - time.monotonic()
        failed = any(answers[k].error for k in partitions if k in answers)
        if found or failed or released or left <= 0:
            return
        if skipped:
            continue
        waits = [asyncio.ensure_future(event.wait()) for event in woken]
        try:
            await asyncio.wait(waits, timeout=left, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()


def _ack_error(code: int, message: str | None = None) -> Any:
    return ShareAcknowledgeResponse(throttle_time_ms=0, error_code=code, error_message=message,
                                    acquisition_lock_timeout_ms=0, responses=[],
                                    node_endpoints=[])  # fmt: skip


async def handle_share_acknowledge(ctx: BrokerContext, request: Request) -> Any:
    body = request.body
    group_id, member_id, epoch = body.group_id, body.member_id, body.share_session_epoch
    if not allowed(ctx, AclOperation.READ, ResourceType.GROUP, group_id or ""):
        return _ack_error(GROUP_AUTHORIZATION_FAILED)
    if not group_id or not member_id:
        return _ack_error(errors.INVALID_REQUEST, "a share acknowledgement names its group and "
                                                  "member")  # fmt: skip
    manager = share_partitions(ctx)
    session_key = (group_id, member_id)
    try:
        if epoch == INITIAL_EPOCH:
            raise ShareSessionError(errors.INVALID_SHARE_SESSION_EPOCH,
                                    "a share acknowledgement cannot open a share session")  # fmt: skip
        if epoch == FINAL_EPOCH:
            manager.sessions.close(session_key)
        else:
            manager.sessions.next(session_key, epoch)
    except ShareSessionError as exc:
        return _ack_error(exc.code, str(exc))
    names = await ctx.topic_names({t.topic_id for t in body.topics})
    readable = allowed_names(ctx, AclOperation.READ, ResourceType.TOPIC, names.values())
    answers: dict[SharePartitionKey, PartitionAnswer] = {}
    renew = request.version >= RENEW_VERSION and bool(body.is_renew_ack)
    await _acknowledge(ctx, manager, group_id, member_id, names, readable, body.topics, renew,
                       answers)  # fmt: skip
    if epoch == FINAL_EPOCH:
        manager.release_member(group_id, member_id)
    topics: dict[uuid.UUID, list[Any]] = {}
    leaders: set[int] = set()
    for answer in answers.values():
        code = answer.acknowledge_error or errors.NONE
        leader = AckLeader(leader_id=0, leader_epoch=0)
        if code == errors.NOT_LEADER_OR_FOLLOWER and answer.leader is not None:
            leader = AckLeader(leader_id=answer.leader[0], leader_epoch=answer.leader[1])
            leaders.add(answer.leader[0])
        topics.setdefault(answer.topic_id, []).append(
            AckPartition(partition_index=answer.partition, error_code=code, current_leader=leader)
        )
    lock_ms = group_share_settings(ctx, group_id)[0].record_lock_duration_ms
    return ShareAcknowledgeResponse(
        throttle_time_ms=0, error_code=errors.NONE, acquisition_lock_timeout_ms=lock_ms,
        responses=[AckTopic(topic_id=t, partitions=p) for t, p in topics.items()],
        node_endpoints=await node_endpoints(ctx, leaders, AckEndpoint),
    )  # fmt: skip


#: api name → (lowest version, highest version, handler).
SHARE_PARTITION_APIS: dict[str, tuple[int, int, Any]] = {
    "ShareFetch": (1, 2, handle_share_fetch),
    "ShareAcknowledge": (1, 2, handle_share_acknowledge),
    **SHARE_OFFSET_APIS,  # DescribeShareGroupOffsets, ...: see apis.share.offset_apis
}

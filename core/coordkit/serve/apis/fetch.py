"""Fetch (with long polling) and ListOffsets, served from the leader's in-memory logs.

Consumers read up to the high watermark (the smallest log end over the ISR): records only the
leader has are not visible yet. read_committed consumers (isolation level 1, Fetch 4+) read up
to the last stable offset (below the oldest transaction still open, see
:mod:`coordkit.serve.dataplane.log_transactions`) and get the aborted transactions overlapping
what they read, whose records they drop; every answer gives the last stable offset. ListOffsets'
latest offset is the high watermark, or the last stable offset for read_committed (v2+), which
also bounds what a timestamp finds.

A fetch answers at once when it has ``min_bytes`` or an error to report; otherwise it waits for
appends to this broker's logs and high watermark moves until it has, or ``max_wait_ms`` passed
(Kafka's delayed fetch). Only the leader serves a partition: any other broker answers
NOT_LEADER_OR_FOLLOWER.

Followers on brokers of this process copy in memory (:mod:`coordkit.serve.dataplane.replicas`); a follower
in another process fetches as Kafka's followers do (:mod:`coordkit.serve.dataplane.remote_replicas`), with
its broker id as the replica id: it reads up to the log end, not the high watermark, and its
fetch offset is its log end for the high watermark and the ISR (Kafka's
``Partition.updateFollowerFetchState``). A replica id that is not one of the partition's replicas
is read as a consumer's.

From Fetch 13 topics are named by id (an id this process does not know: UNKNOWN_TOPIC_ID for
each of its partitions, as Kafka's ``KafkaApis.handleFetchRequest``); from 15 a follower gives
its id in ``replica_state``; from 16 a refusal for another leader or a fenced epoch names the
current leader and its endpoint (KIP-951). Fetch sessions are not kept: every answer has session
id 0, which tells a client to send full fetches.

ListOffsets 8-11 add special timestamps of tiered storage, which coordkit does not have: the
earliest local offset (-4) is the log start, as on a Kafka broker without remote storage; the
latest tiered offset (-5) and the earliest pending upload (-6) are none (-1, with leader epoch
-1), as Kafka answers them for a topic that is not tiered.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from coordkit.engine.states import TP
from coordkit.kafka.acls import AclOperation, ResourceType
from coordkit.protocol import Request, messages
from coordkit.serve import errors
from coordkit.serve.apis.metadata import node_endpoints
from coordkit.serve.authorization import (
    TOPIC_AUTHORIZATION_FAILED,
    allowed_names,
    cluster_allowed,
)
from coordkit.serve.classes import nested
from coordkit.serve.context import BrokerContext
from coordkit.serve.dataplane.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, PartitionLog
from coordkit.serve.dataplane.log_transactions import (
    aborted_transactions,
    fetch_upper_bound,
    last_stable_offset,
)

FetchResponse = messages.FetchResponse
TopicData = nested(FetchResponse, "FetchableTopicResponse")
PartitionData = nested(FetchResponse, "PartitionData")
ListOffsetsResponse = messages.ListOffsetsResponse
OffsetsTopic = nested(ListOffsetsResponse, "ListOffsetsTopicResponse")
OffsetsPartition = nested(ListOffsetsResponse, "ListOffsetsPartitionResponse")
LeaderIdAndEpoch = nested(FetchResponse, "LeaderIdAndEpoch")
AbortedTransaction = nested(FetchResponse, "AbortedTransaction")
NodeEndpoint = nested(FetchResponse, "NodeEndpoint")
#: The first Fetch version whose refusals name the current leader (KIP-951, Kafka 3.7+): the
#: tagged field exists from v12, but Kafka fills it in from v16 only, so below that a client
#: refreshes its metadata.
CURRENT_LEADER_VERSION = 16
#: The first Fetch version naming topics by id (KIP-516), and the first whose follower gives its
#: id in ``replica_state`` (KIP-903).
TOPIC_ID_VERSION = 13
REPLICA_STATE_VERSION = 15
#: The refusals that name the current leader from Fetch 16 (Kafka's ``handleFetchRequest``).
LEADER_ERRORS = frozenset({errors.NOT_LEADER_OR_FOLLOWER, errors.FENCED_LEADER_EPOCH})
#: ListOffsets' timestamps of tiered storage (v8, v9, v11): the earliest local offset, the
#: latest tiered one and the earliest pending upload.
EARLIEST_LOCAL_TIMESTAMP = -4
#: ListOffsets' replica id of a consumer (Kafka's ``CONSUMER_REPLICA_ID``).
CONSUMER_REPLICA_ID = -1
LATEST_TIERED_TIMESTAMP = -5
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6
#: The first ListOffsets version with the leader epoch.
LEADER_EPOCH_VERSION = 4
#: Fetch's isolation levels.
READ_COMMITTED = 1
#: A request's current leader epoch when the client knows none (nothing to check).
NO_EPOCH = -1


def leader_epoch_error(requested: int, current: int) -> int:
    """Kafka's ``Partition.checkCurrentLeaderEpoch``: a client naming the leader epoch it
    knows is told when it is behind (FENCED_LEADER_EPOCH) or ahead of the leader
    (UNKNOWN_LEADER_EPOCH: this broker has not heard of the new epoch yet)."""
    if requested in (NO_EPOCH, current):
        return errors.NONE
    return errors.FENCED_LEADER_EPOCH if requested < current else errors.UNKNOWN_LEADER_EPOCH


def high_watermark(ctx: BrokerContext, tp: TP, partition_log: PartitionLog) -> int:
    """What consumers may read of ``tp`` on its leader ``ctx``: up to the high watermark (the
    log end when no replication runs, as for a log that is the only copy)."""
    replicas = ctx.logs.replicas
    if replicas is None:
        return partition_log.log_end
    return replicas.high_watermark(tp, partition_log)


def _follower(ctx: BrokerContext, request: Request, tp: TP) -> int | None:
    """The broker id of a follower of ``tp`` fetching from its leader, ``None`` for a
    consumer."""
    body = request.body
    replica_id = (
        body.replica_state.replica_id
        if request.version >= REPLICA_STATE_VERSION
        else body.replica_id
    )
    if replica_id < 0 or replica_id == ctx.broker_id:
        return None
    state = ctx.replication.log(tp)
    return replica_id if state is not None and replica_id in state.replicas else None


def _read(
    ctx: BrokerContext, request: Request, topic: str, partition: Any, budget: int, first: bool
) -> Any:
    """One partition's answer. Aborted transactions are listed for read_committed only, and
    null otherwise or with an error, as Kafka answers."""
    version = request.version
    tp = (topic, partition.partition)
    answer = PartitionData(partition_index=partition.partition, high_watermark=-1,
                           last_stable_offset=-1, log_start_offset=-1, records=b"",
                           aborted_transactions=None)  # fmt: skip
    error, leadership = ctx.leader_error(tp)
    if error == errors.UNKNOWN_TOPIC_OR_PARTITION:
        # Kafka's broker refuses a partition it has no metadata for before reading any log,
        # with an answer whose aborted transactions are an empty list rather than null.
        answer.error_code = error
        answer.aborted_transactions = []
        return answer
    if error:
        answer.error_code = error
        if leadership is not None and version >= CURRENT_LEADER_VERSION:
            leader, epoch = leadership
            answer.current_leader = LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch)
        return answer
    assert leadership is not None
    fenced = leader_epoch_error(partition.current_leader_epoch, leadership[1])
    if fenced:
        answer.error_code = fenced
        if fenced in LEADER_ERRORS and version >= CURRENT_LEADER_VERSION:
            leader, epoch = leadership
            answer.current_leader = LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch)
        return answer
    partition_log = ctx.logs.get(tp)
    hw = high_watermark(ctx, tp, partition_log)
    lso = last_stable_offset(partition_log, hw)
    answer.high_watermark, answer.last_stable_offset = hw, lso
    answer.log_start_offset = partition_log.log_start
    follower = _follower(ctx, request, tp)
    committed = request.version >= 4 and request.body.isolation_level == READ_COMMITTED
    try:
        answer.records = partition_log.read(
            partition.fetch_offset,
            min(budget, partition.partition_max_bytes),
            at_least_one=first,
            upto=None if follower is not None else lso if committed else hw,
        )
    except IndexError:
        # Kafka answers an offset out of range with no offsets at all.
        answer.error_code = errors.OFFSET_OUT_OF_RANGE
        answer.high_watermark = answer.last_stable_offset = answer.log_start_offset = -1
        answer.records = b""
        return answer
    if follower is not None and ctx.logs.replicas is not None:
        ctx.logs.replicas.follower_fetched(ctx, follower, tp, partition.fetch_offset)
    if committed:
        answer.aborted_transactions = []
        if answer.records:
            bound = fetch_upper_bound(partition_log, partition.fetch_offset, answer.records)
            answer.aborted_transactions = [
                AbortedTransaction(
                    producer_id=aborted.producer_id, first_offset=aborted.first_offset
                )
                for aborted in aborted_transactions(partition_log, partition.fetch_offset, bound)
            ]
    return answer


def _unknown_id(partition: Any) -> Any:
    """Kafka's ``FetchResponse.partitionResponse`` for a topic id it does not know."""
    return PartitionData(partition_index=partition.partition, error_code=errors.UNKNOWN_TOPIC_ID,
                         high_watermark=-1, last_stable_offset=-1, log_start_offset=-1,
                         records=b"", aborted_transactions=[])  # fmt: skip


def _read_all(
    ctx: BrokerContext, request: Request, names: dict[uuid.UUID, str], readable: set[str]
) -> tuple[list[Any], int, bool]:
    """Every partition's answer, the bytes found, and whether any partition has an error
    (``names``: the topics named by id, v13+; ``readable``: the topics the principal may read)."""
    body = request.body
    by_id = request.version >= TOPIC_ID_VERSION
    budget = body.max_bytes if request.version >= 3 else 2**31 - 1
    found = 0
    failed = False
    topics = []
    for topic in body.topics:
        name = names.get(topic.topic_id) if by_id else topic.topic
        answers = []
        for partition in topic.partitions:
            if name is None:
                answer = _unknown_id(partition)
            elif name not in readable:
                answer = _unknown_id(partition)
                answer.error_code = TOPIC_AUTHORIZATION_FAILED
            else:
                answer = _read(ctx, request, name, partition, max(budget - found, 0), found == 0)
            found += len(answer.records)
            failed = failed or answer.error_code != errors.NONE
            answers.append(answer)
        if by_id:
            topics.append(TopicData(topic_id=topic.topic_id, partitions=answers))
        else:
            topics.append(TopicData(topic=topic.topic, partitions=answers))
    return topics, found, failed


async def handle_fetch(ctx: BrokerContext, request: Request) -> Any:
    body = request.body
    names: dict[uuid.UUID, str] = {}
    if request.version >= TOPIC_ID_VERSION:
        names = await ctx.topic_names(t.topic_id for t in body.topics)
    # Kafka's KafkaApis: a consumer needs Read on each topic, a follower (a replica id)
    # ClusterAction on the cluster, else every partition is TOPIC_AUTHORIZATION_FAILED.
    by_id = request.version >= TOPIC_ID_VERSION
    named = [n for t in body.topics if (n := names.get(t.topic_id) if by_id else t.topic)]
    replica = body.replica_state.replica_id if request.version >= REPLICA_STATE_VERSION else (
        body.replica_id)  # fmt: skip
    if replica >= 0:
        readable = set(named) if cluster_allowed(ctx, AclOperation.CLUSTER_ACTION) else set()
    else:
        readable = allowed_names(ctx, AclOperation.READ, ResourceType.TOPIC, named)
    deadline = time.monotonic() + max(body.max_wait_ms, 0) / 1000
    while True:
        changed = ctx.logs.changed()  # before reading: an append after the read wakes us
        topics, found, failed = _read_all(ctx, request, names, readable)
        left = deadline - time.monotonic()
        if failed or found >= max(body.min_bytes, 1) or left <= 0:
            break
        try:
            await asyncio.wait_for(changed.wait(), left)
        except TimeoutError:
            topics, found, failed = _read_all(ctx, request, names, readable)
            break
    response: Any = FetchResponse(throttle_time_ms=0, error_code=errors.NONE, session_id=0,
                                  responses=topics)  # fmt: skip
    if failed and request.version >= CURRENT_LEADER_VERSION:
        leaders = {
            p.current_leader.leader_id
            for t in topics
            for p in t.partitions
            if p.error_code in LEADER_ERRORS and p.current_leader is not None
        }
        response.node_endpoints = await node_endpoints(ctx, leaders, NodeEndpoint)
    return response


def _offset(
    ctx: BrokerContext, version: int, topic: str, partition: Any, client: bool, committed: bool
) -> Any:
    """One partition's ListOffsets answer; ``client``: asked by a consumer (Kafka's replica id
    -1), not a follower or a debugging tool; ``committed``: with read_committed."""
    tp = (topic, partition.partition_index)
    answer = OffsetsPartition(partition_index=partition.partition_index, timestamp=-1, offset=-1)
    error, leadership = ctx.leader_error(tp)
    if error or leadership is None:
        answer.error_code = error
        return answer
    epoch = leadership[1]
    if version >= LEADER_EPOCH_VERSION:
        fenced = leader_epoch_error(partition.current_leader_epoch, epoch)
        if fenced:
            answer.error_code = fenced
            return answer
    partition_log = ctx.logs.get(tp)
    if partition.timestamp in (LATEST_TIERED_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP):
        # No tiered storage: no such offset (Kafka's answer for a topic that is not tiered).
        answer.leader_epoch = -1
        return answer
    timestamp = partition.timestamp
    if timestamp == EARLIEST_LOCAL_TIMESTAMP:
        timestamp = EARLIEST_TIMESTAMP  # every record is local
    hw = high_watermark(ctx, tp, partition_log)
    fetchable = last_stable_offset(partition_log, hw) if committed else hw
    answer.offset, answer.timestamp = partition_log.offset_for(timestamp, upto=fetchable)
    lagging = client and partition_log.epoch_start(epoch) > hw
    if lagging and (
        timestamp == LATEST_TIMESTAMP or (timestamp != EARLIEST_TIMESTAMP and answer.offset < 0)
    ):
        # A new leader whose high watermark still lags the start of its epoch (its followers
        # have not fetched yet): Kafka's Partition.fetchOffsetForTimestamp answers latest, and
        # a timestamp found nowhere below it, with OFFSET_NOT_AVAILABLE, not an offset that
        # would go back.
        answer.offset = -1
        answer.error_code = errors.OFFSET_NOT_AVAILABLE
        return answer
    if version >= LEADER_EPOCH_VERSION and answer.offset >= 0:
        answer.leader_epoch = epoch  # no record found: no epoch either
    return answer


async def handle_list_offsets(ctx: BrokerContext, request: Request) -> Any:
    client = request.body.replica_id == CONSUMER_REPLICA_ID
    committed = request.version >= 2 and request.body.isolation_level == READ_COMMITTED
    # Kafka's KafkaApis: Describe on each topic, or TOPIC_AUTHORIZATION_FAILED.
    described = allowed_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                              [t.name for t in request.body.topics])  # fmt: skip
    topics = [
        OffsetsTopic(
            name=t.name,
            partitions=[
                _offset(ctx, request.version, t.name, p, client, committed)
                if t.name in described
                else OffsetsPartition(partition_index=p.partition_index, timestamp=-1, offset=-1,
                                      error_code=TOPIC_AUTHORIZATION_FAILED)
                for p in t.partitions
            ],
        )
        for t in request.body.topics
    ]  # fmt: skip
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)

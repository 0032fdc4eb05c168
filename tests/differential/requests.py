"""Builders of the requests scenarios send, at the versions they declare (the highest both sides
support; Kafka 4 dropped some old versions).

Produce 13 and Fetch 13+ name topics by id only: their builders take a name, and
:func:`differential.harness.by_id` puts each name's id (as the side's metadata gives it) in the
request before it is sent; DeleteTopics' builder fills both v1-5's names and v6's topics.
OffsetCommit and OffsetFetch v10 name topics by id too (KIP-848): their builders take a topic
as a name (given ``ids``, the side's id of that name is filled in as well, so the request
means the same at v9 and v10) or as an id (a request naming an id no topic has)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from attrs import evolve

from coordkit.protocol import messages
from coordkit.protocol.records import RecordBatch, encode_batch, new_batch

#: The versions the scenarios use, api by api: the highest both Kafka 4.4 and coordkit serve
#: answer (test_scenarios.py checks them against both sides' ApiVersions).
API_VERSIONS = 5
METADATA = 13
CREATE_TOPICS = 7
DELETE_TOPICS = 6
CREATE_PARTITIONS = 3
PRODUCE = 13
FETCH = 18
LIST_OFFSETS = 11
OFFSET_FOR_LEADER_EPOCH = 4
INIT_PRODUCER_ID = 5
FIND_COORDINATOR = 5
JOIN_GROUP = 9
SYNC_GROUP = 5
HEARTBEAT = 4
LEAVE_GROUP = 5
OFFSET_COMMIT = 10
OFFSET_FETCH = 10
DESCRIBE_GROUPS = 6
LIST_GROUPS = 5

#: A topic in an OffsetCommit or OffsetFetch request: its name, or an id.
Topic = str | uuid.UUID
#: A side's id of a topic name (``Side.topic_id``).
TopicIds = Callable[[str], uuid.UUID]

#: The timestamps scenarios give their records (ms): a broker echoing one back (a duplicate's
#: append time, a record's timestamp) is compared as it is; any other time a broker answers is
#: its own clock's, and normalised.
SCRIPTED_TIMESTAMPS = range(1_700_000_000_000, 1_700_000_000_000 + 1_000_000)
#: The first of them, so that what brokers echo back is the same on both sides.
BASE_TIMESTAMP = SCRIPTED_TIMESTAMPS.start
#: Kafka's ``Uuid.ZERO_UUID``: no topic id.
NO_TOPIC_ID = uuid.UUID(int=0)
#: The error code the helpers wait for (Kafka's ``Errors``).
UNKNOWN_TOPIC_OR_PARTITION = 3
#: ListOffsets' special timestamps.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
#: The session and rebalance timeouts of the scenarios' members: long enough that no member
#: expires while a scenario runs.
SESSION_MS = 30_000
REBALANCE_MS = 30_000
CONSUMER = "consumer"
#: A member's protocol metadata: opaque to the coordinator (ConsumerProtocolSubscription v0
#: for topic ``t``, so that a coordinator reading it finds a subscription).
SUBSCRIPTION = bytes.fromhex("0000000000010001") + b"t" + bytes.fromhex("ffffffff")
ASSIGNMENT = bytes.fromhex("000000000000ffffffff")


def metadata(topics: Sequence[str] | None, *, auto_create: bool = False) -> Any:
    Request: Any = messages.MetadataRequest
    return Request(
        topics=None if topics is None else [Request.MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=auto_create,
        include_topic_authorized_operations=False,
    )


def create_topics(*topics: Any, validate_only: bool = False, timeout_ms: int = 30_000) -> Any:
    return messages.CreateTopicsRequest(
        topics=list(topics), timeout_ms=timeout_ms, validate_only=validate_only
    )


def creatable(
    name: str,
    partitions: int = 1,
    replication: int = 1,
    assignment: Mapping[int, Sequence[int]] | None = None,
    configs: Mapping[str, str] | None = None,
) -> Any:
    Request: Any = messages.CreateTopicsRequest
    return Request.CreatableTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=replication,
        assignments=[
            Request.CreatableReplicaAssignment(partition_index=p, broker_ids=list(ids))
            for p, ids in (assignment or {}).items()
        ],
        configs=[Request.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()],
    )


def delete_topics(*names: str, timeout_ms: int = 30_000) -> Any:
    """DeleteTopics of ``names`` (v1-5's ``topic_names``, v6's ``topics`` by name)."""
    Request: Any = messages.DeleteTopicsRequest
    return Request(
        topic_names=list(names),
        topics=[Request.DeleteTopicState(name=n, topic_id=NO_TOPIC_ID) for n in names],
        timeout_ms=timeout_ms,
    )


def delete_topics_by(*topics: tuple[str | None, uuid.UUID], timeout_ms: int = 30_000) -> Any:
    """DeleteTopics v6 of ``(name or None, id)`` pairs, as given (the zero id: none)."""
    Request: Any = messages.DeleteTopicsRequest
    return Request(
        topics=[Request.DeleteTopicState(name=n, topic_id=i) for n, i in topics],
        timeout_ms=timeout_ms,
    )


def create_partitions(
    name: str,
    count: int,
    assignments: Sequence[Sequence[int]] | None = None,
    *,
    validate_only: bool = False,
) -> Any:
    Request: Any = messages.CreatePartitionsRequest
    return Request(
        topics=[
            Request.CreatePartitionsTopic(
                name=name,
                count=count,
                assignments=None
                if assignments is None
                else [Request.CreatePartitionsAssignment(broker_ids=list(a)) for a in assignments],
            )
        ],
        timeout_ms=30_000,
        validate_only=validate_only,
    )


def batch(
    count: int = 1,
    *,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    value_size: int = 8,
    first_timestamp: int = BASE_TIMESTAMP,
    compression: str = "none",
    transactional: bool = False,
) -> RecordBatch:
    """``count`` records keyed ``k0``, ``k1``... with values of ``value_size`` bytes, the
    timestamps ``first_timestamp`` + i (the batch's ``max_timestamp`` is the last one)."""
    made = new_batch(
        [(b"k%d" % i, (b"v%d-" % i).ljust(value_size, b"x")) for i in range(count)],
        timestamp=first_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        compression=compression,
        is_transactional=transactional,
    )
    # new_batch stamps every record alike; distinct timestamps make ListOffsets by time mean
    # something.
    records = tuple(evolve(r, timestamp=first_timestamp + i) for i, r in enumerate(made.records))
    return evolve(made, records=records, max_timestamp=first_timestamp + count - 1)


def fetch(
    topic: str,
    partitions: Sequence[int] | int = 0,
    offset: int = 0,
    *,
    max_bytes: int = 1 << 20,
    partition_max_bytes: int = 1 << 20,
    isolation: int = 0,
    current_leader_epoch: int = -1,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
) -> Any:
    """A sessionless Fetch (session epoch -1) of ``topic``'s ``partitions`` from ``offset``;
    ``max_wait_ms`` 0: answered at once, with whatever is there."""
    Request: Any = messages.FetchRequest
    indexes = [partitions] if isinstance(partitions, int) else list(partitions)
    return Request(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=isolation,
        session_id=0,
        session_epoch=-1,
        topics=[
            Request.FetchTopic(
                topic=topic,
                partitions=[
                    Request.FetchPartition(
                        partition=p,
                        current_leader_epoch=current_leader_epoch,
                        fetch_offset=offset,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=partition_max_bytes,
                    )
                    for p in indexes
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


def offset_for_leader_epoch(
    topic: str, partition: int, leader_epoch: int, current_leader_epoch: int = -1
) -> Any:
    Request: Any = messages.OffsetForLeaderEpochRequest
    return Request(
        replica_id=-1,
        topics=[
            Request.OffsetForLeaderTopic(
                topic=topic,
                partitions=[
                    Request.OffsetForLeaderPartition(
                        partition=partition,
                        current_leader_epoch=current_leader_epoch,
                        leader_epoch=leader_epoch,
                    )
                ],
            )
        ],
    )


def init_producer_id(transactional_id: str | None = None) -> Any:
    return messages.InitProducerIdRequest(
        transactional_id=transactional_id,
        transaction_timeout_ms=60_000,
        producer_id=-1,
        producer_epoch=-1,
    )


def find_coordinator(*keys: str, key_type: int = 0) -> Any:
    return messages.FindCoordinatorRequest(key_type=key_type, coordinator_keys=list(keys))


def join_group(
    group: str,
    member_id: str = "",
    *,
    instance_id: str | None = None,
    protocol_type: str = CONSUMER,
    protocols: Sequence[tuple[str, bytes]] = (("range", SUBSCRIPTION),),
    session_ms: int = SESSION_MS,
    rebalance_ms: int = REBALANCE_MS,
) -> Any:
    Request: Any = messages.JoinGroupRequest
    return Request(
        group_id=group,
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        member_id=member_id,
        group_instance_id=instance_id,
        protocol_type=protocol_type,
        protocols=[Request.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols],
        reason=None,
    )


def sync_group(
    group: str,
    generation: int,
    member_id: str,
    assignments: Mapping[str, bytes] | None = None,
    *,
    instance_id: str | None = None,
    protocol_type: str | None = CONSUMER,
    protocol_name: str | None = "range",
) -> Any:
    Request: Any = messages.SyncGroupRequest
    return Request(
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=instance_id,
        protocol_type=protocol_type,
        protocol_name=protocol_name,
        assignments=[
            Request.SyncGroupRequestAssignment(member_id=m, assignment=a)
            for m, a in (assignments or {}).items()
        ],
    )


def heartbeat(group: str, generation: int, member_id: str, instance_id: str | None = None) -> Any:
    return messages.HeartbeatRequest(
        group_id=group, generation_id=generation, member_id=member_id, group_instance_id=instance_id
    )


def leave_group(group: str, *members: tuple[str, str | None]) -> Any:
    """LeaveGroup of ``(member id, group instance id)`` pairs."""
    Request: Any = messages.LeaveGroupRequest
    return Request(
        group_id=group,
        members=[
            Request.MemberIdentity(member_id=m, group_instance_id=i, reason=None)
            for m, i in members
        ],
    )


def named_topic(cls: Any, topic: Topic, ids: TopicIds | None, **fields: Any) -> Any:
    """An OffsetCommit or OffsetFetch request topic: a name (v2-9; with ``ids`` its id too, for
    v10) or an id (v10)."""
    if isinstance(topic, uuid.UUID):
        return cls(name="", topic_id=topic, **fields)
    return cls(name=topic, topic_id=NO_TOPIC_ID if ids is None else ids(topic), **fields)


def offset_commit(
    group: str,
    offsets: Mapping[tuple[Topic, int], int],
    *,
    generation: int = -1,
    member_id: str = "",
    instance_id: str | None = None,
    metadata: str = "",
    ids: TopicIds | None = None,
) -> Any:
    Request: Any = messages.OffsetCommitRequest
    topics: dict[Topic, list[Any]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(
            Request.OffsetCommitRequestPartition(
                partition_index=partition,
                committed_offset=offset,
                committed_leader_epoch=-1,
                committed_metadata=metadata,
            )
        )
    return Request(
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        group_instance_id=instance_id,
        topics=[
            named_topic(Request.OffsetCommitRequestTopic, t, ids, partitions=p)
            for t, p in topics.items()
        ],
    )


def offset_fetch_group(
    group: str,
    topics: Mapping[Topic, Sequence[int]] | None,
    ids: TopicIds | None,
    member_id: str | None = None,
    member_epoch: int = -1,
) -> Any:
    """One group of an OffsetFetch v8+: topic → partitions, or ``None`` for all."""
    Request: Any = messages.OffsetFetchRequest
    return Request.OffsetFetchRequestGroup(
        group_id=group,
        member_id=member_id,
        member_epoch=member_epoch,
        topics=None
        if topics is None
        else [
            named_topic(Request.OffsetFetchRequestTopics, t, ids, partition_indexes=list(p))
            for t, p in topics.items()
        ],
    )


def offset_fetch(
    groups: Mapping[str, Mapping[Topic, Sequence[int]] | None],
    *,
    require_stable: bool = False,
    ids: TopicIds | None = None,
) -> Any:
    """OffsetFetch of several groups: group → {topic: partitions}, or ``None`` for all."""
    return messages.OffsetFetchRequest(
        groups=[offset_fetch_group(g, topics, ids) for g, topics in groups.items()],
        require_stable=require_stable,
    )


def describe_groups(*groups: str) -> Any:
    return messages.DescribeGroupsRequest(groups=list(groups), include_authorized_operations=False)


def list_groups(states: Sequence[str] = (), types: Sequence[str] = ()) -> Any:
    return messages.ListGroupsRequest(states_filter=list(states), types_filter=list(types))


def list_offsets(topic: str, partition: int, timestamp: int, isolation: int = 0) -> Any:
    """ListOffsets of one partition at ``timestamp`` (or one of the special values)."""
    Request: Any = messages.ListOffsetsRequest
    return Request(
        replica_id=-1,
        isolation_level=isolation,
        timeout_ms=30_000,
        topics=[
            Request.ListOffsetsTopic(
                name=topic,
                partitions=[
                    Request.ListOffsetsPartition(
                        partition_index=partition, current_leader_epoch=-1, timestamp=timestamp
                    )
                ],
            )
        ],
    )


def produce(
    topic: str, partition: int, batch: RecordBatch | bytes, *, acks: int = -1,
    timeout_ms: int = 30_000,
) -> Any:  # fmt: skip
    """A Produce of one batch (or raw records bytes) to one partition."""
    Request: Any = messages.ProduceRequest
    data = batch if isinstance(batch, bytes) else encode_batch(batch)
    return Request(
        transactional_id=None,
        acks=acks,
        timeout_ms=timeout_ms,
        topic_data=[
            Request.TopicProduceData(
                name=topic,
                partition_data=[Request.PartitionProduceData(index=partition, records=data)],
            )
        ],
    )


# -- the consumer group protocol (KIP-848), appended for scenarios/consumer_groups.py -----------

#: ConsumerGroupHeartbeat v1 (the member id is the client's own, regexes); ConsumerGroupDescribe
#: v1 (the members' types).
CONSUMER_GROUP_HEARTBEAT = 1
CONSUMER_GROUP_DESCRIBE = 1


def consumer_group_heartbeat(
    group: str,
    member_id: str,
    member_epoch: int,
    *,
    instance_id: str | None = None,
    rack_id: str | None = None,
    rebalance_ms: int = -1,
    topics: Sequence[str] | None = None,
    regex: str | None = None,
    assignor: str | None = None,
    owned: Mapping[Any, Sequence[int]] | None = None,
) -> Any:
    """A ConsumerGroupHeartbeat; ``None`` (and ``rebalance_ms`` -1) is "unchanged since the last
    heartbeat", as the request defines it. ``owned``: topic id → partitions."""
    Request: Any = messages.ConsumerGroupHeartbeatRequest
    return Request(
        group_id=group,
        member_id=member_id,
        member_epoch=member_epoch,
        instance_id=instance_id,
        rack_id=rack_id,
        rebalance_timeout_ms=rebalance_ms,
        subscribed_topic_names=None if topics is None else list(topics),
        subscribed_topic_regex=regex,
        server_assignor=assignor,
        topic_partitions=None
        if owned is None
        else [
            Request.TopicPartitions(topic_id=t, partitions=sorted(p)) for t, p in owned.items() if p
        ],
    )


def consumer_group_describe(*groups: str) -> Any:
    return messages.ConsumerGroupDescribeRequest(
        group_ids=list(groups), include_authorized_operations=False
    )


def offset_fetch_member(
    group: str,
    topics: Mapping[Topic, Sequence[int]] | None,
    member_id: str | None,
    member_epoch: int,
    *,
    ids: TopicIds | None = None,
) -> Any:
    """OffsetFetch v9+ of one group as a member of the consumer protocol asks it: with its
    member id and epoch."""
    return messages.OffsetFetchRequest(
        groups=[offset_fetch_group(group, topics, ids, member_id, member_epoch)],
        require_stable=False,
    )

"""Scenarios of the admin apis (issue #35 item 2): DescribeCluster, DeleteRecords,
DescribeLogDirs, ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments,
DescribeProducers and DescribeTopicPartitions.

Broker ids inside these answers that the harness does not map (DescribeCluster's ``broker_id``,
a reassignment's replica lists) are mapped here to the broker's position, as the harness maps
``leader_id``; a log directory's path and its volume's sizes, which are each machine's own, are
recorded as whether they are given. Versions: the highest both sides serve.
"""

from __future__ import annotations

import re
from typing import Any

from coordkit.protocol import messages
from coordkit.testing.waiting import wait_for
from differential import requests as rq
from differential.harness import WAIT_SECONDS, Side, scenario

DESCRIBE_CLUSTER = 2
DELETE_RECORDS = 2
DESCRIBE_LOG_DIRS = 5
ELECT_LEADERS = 2
ALTER_REASSIGNMENTS = 1
LIST_REASSIGNMENTS = 0
DESCRIBE_PRODUCERS = 0
DESCRIBE_TOPIC_PARTITIONS = 0
#: A broker id neither cluster has.
NO_SUCH_BROKER = 99


def _topic(side: Side, partitions: int = 1, replication: int = 3) -> str:
    """The scenario's topic, placed alike on both sides (see ``Side.placement``)."""
    name = side.topic()
    side.create_topic(name, partitions, replication)
    return name


def _positions(side: Side, ids: list[int]) -> list[Any]:
    return [side.index_of(b) if b in side.broker_ids else f"unknown {b}" for b in ids]


# -- DescribeCluster ------------------------------------------------------------------------------


@scenario("admin.describe_cluster", versions={"DescribeCluster": DESCRIBE_CLUSTER})
def describe_cluster(side: Side) -> list[Any]:
    """DescribeCluster v2 for brokers (with the cluster's authorized operations), for
    controllers (a broker answers MISMATCHED_ENDPOINT_TYPE) and for an unknown endpoint type
    (UNSUPPORTED_ENDPOINT_TYPE). The controller id is left out: a KRaft broker names a random
    live broker; racks are ``metadata.brokers``' difference."""
    request = messages.DescribeClusterRequest
    found: list[Any] = []
    for endpoint in (1, 2, 5):
        answer = side.call(0, request(include_cluster_authorized_operations=True,
                                      endpoint_type=endpoint), DESCRIBE_CLUSTER)  # fmt: skip
        found.append({
            "error_code": answer.error_code,
            "endpoint_type": answer.endpoint_type,
            "brokers": sorted(_positions(side, [b.broker_id for b in answer.brokers])),
            "fenced": [b.is_fenced for b in answer.brokers],
            "cluster_authorized_operations": answer.cluster_authorized_operations,
            "controller_given": answer.controller_id in side.broker_ids,
        })  # fmt: skip
    return found


# -- DeleteRecords and DescribeLogDirs -------------------------------------------------------------


def _delete(side: Side, index: int, name: str, partition: int, offset: int) -> Any:
    request = messages.DeleteRecordsRequest
    body = request(topics=[request.DeleteRecordsTopic(name=name, partitions=[
        request.DeleteRecordsPartition(partition_index=partition, offset=offset)])],
        timeout_ms=30_000)  # fmt: skip
    return side.call(index, body, DELETE_RECORDS).topics[0].partitions[0]


@scenario("admin.delete_records", versions={"DeleteRecords": DELETE_RECORDS,
                                           "ListOffsets": rq.LIST_OFFSETS})  # fmt: skip
def delete_records(side: Side) -> list[Any]:
    """Three batches of two records, then DeleteRecords at the leader: up to 3 (the low
    watermark), past the high watermark (OFFSET_OUT_OF_RANGE), back to 2 (the log start stays),
    -1 (the high watermark), a partition the topic lacks, at a follower
    (NOT_LEADER_OR_FOLLOWER), and of a compacted topic (POLICY_VIOLATION); ListOffsets EARLIEST
    after."""
    name = _topic(side)
    for i in range(3):
        side.produce(name, 0, rq.batch(2, first_timestamp=rq.BASE_TIMESTAMP + 2 * i))
    leader = side.leader(name)
    follower = (leader + 1) % side.size
    found = [_delete(side, leader, name, 0, offset) for offset in (3, 100, 2, -1)]
    found.append(_delete(side, leader, name, 5, 0))
    found.append(_delete(side, follower, name, 0, 1))
    compacted = side.topic("compacted")
    side.create_topic(compacted, 1, 3, configs={"cleanup.policy": "compact"})
    side.produce(compacted, 0, rq.batch(2))
    found.append(_delete(side, side.leader(compacted), compacted, 0, 1))
    found.append(side.call(leader, rq.list_offsets(name, 0, rq.EARLIEST_TIMESTAMP),
                           rq.LIST_OFFSETS))  # fmt: skip
    return found


@scenario("admin.describe_log_dirs", versions={"DescribeLogDirs": DESCRIBE_LOG_DIRS})
def describe_log_dirs(side: Side) -> list[Any]:
    """DescribeLogDirs v5 for the scenario's topic (two batches written) at each broker: one
    directory, the partition's size and offset lag on every replica, none of them a future
    log; and for a topic no broker has (no topics)."""
    name = _topic(side)
    for i in range(2):
        side.produce(name, 0, rq.batch(3, first_timestamp=rq.BASE_TIMESTAMP + 3 * i))
    request = messages.DescribeLogDirsRequest
    found: list[Any] = []
    for asked in (name, side.topic("missing")):
        for index in range(side.size):
            topics = [request.DescribableLogDirTopic(topic=asked, partitions=[0])]

            def lagless(index: int = index, topics: Any = topics) -> Any:
                answer = side.call(index, request(topics=topics), DESCRIBE_LOG_DIRS)
                parts = [p for r in answer.results for t in r.topics for p in t.partitions]
                return answer if all(p.offset_lag == 0 for p in parts) else None

            # A follower's lag is 0 once it has fetched up to its leader's high watermark.
            answer = wait_for(lagless, WAIT_SECONDS, f"{side.name}: broker {index} caught up")
            found.append({
                "error_code": answer.error_code,
                "results": [{
                    "error_code": r.error_code,
                    "log_dir_given": bool(r.log_dir),
                    "volume_sizes_given": (r.total_bytes > 0, r.usable_bytes >= 0),
                    "is_cordoned": r.is_cordoned,
                    "topics": [(t.name == asked, [(p.partition_index, p.partition_size,
                                                   p.offset_lag, p.is_future_key)
                                                  for p in t.partitions]) for t in r.topics],
                } for r in answer.results],
            })  # fmt: skip
    return found


# -- ElectLeaders ---------------------------------------------------------------------------------


@scenario("admin.elect_leaders", versions={"ElectLeaders": ELECT_LEADERS},
          compare_messages=True)  # fmt: skip
def elect_leaders(side: Side) -> list[Any]:
    """ElectLeaders v2, preferred and unclean, for a topic led by its preferred replicas: not
    needed (ELECTION_NOT_NEEDED), a partition the topic lacks and a topic that does not exist
    (UNKNOWN_TOPIC_OR_PARTITION), with Kafka's messages."""
    name = _topic(side, partitions=2, replication=2)
    request = messages.ElectLeadersRequest
    found = []
    for kind in (0, 1):
        body = request(election_type=kind, timeout_ms=30_000, topic_partitions=[
            request.TopicPartitions(topic=name, partitions=[0, 1, 7]),
            request.TopicPartitions(topic=side.topic("missing"), partitions=[0])])  # fmt: skip
        found.append(side.call(side.size - 1, body, ELECT_LEADERS))
    return found


# -- reassignments --------------------------------------------------------------------------------


def _reassign(side: Side, name: str, partition: int, replicas: list[int] | None,
              topic: str | None = None, allow_rf_change: bool = True) -> Any:  # fmt: skip
    request = messages.AlterPartitionReassignmentsRequest
    body = request(timeout_ms=30_000, allow_replication_factor_change=allow_rf_change,
                   topics=[request.ReassignableTopic(
        name=topic or name, partitions=[request.ReassignablePartition(
            partition_index=partition, replicas=replicas)])])  # fmt: skip
    return side.call(0, body, ALTER_REASSIGNMENTS)


@scenario("admin.reassignment_refusals", versions={"AlterPartitionReassignments":
                                                   ALTER_REASSIGNMENTS},
          compare_messages=True)  # fmt: skip
def reassignment_refusals(side: Side) -> list[Any]:
    """AlterPartitionReassignments v1 refusals, with Kafka's messages: an empty replica list, a
    broker twice, a broker not registered, a partition the topic lacks, a topic that does not
    exist, a cancellation with no reassignment (NO_REASSIGNMENT_IN_PROGRESS), and a change of
    replication factor the request does not allow (v1)."""
    name = _topic(side, replication=2)
    b0, b1 = side.broker_id(0), side.broker_id(1)
    answers = [
        _reassign(side, name, 0, []),
        _reassign(side, name, 0, [b0, b0]),
        _reassign(side, name, 0, [b0, NO_SUCH_BROKER]),
        _reassign(side, name, 4, [b0, b1]),
        _reassign(side, name, 0, [b0, b1], topic=side.topic("missing")),
        _reassign(side, name, 0, None),
        _reassign(side, name, 0, [b0], allow_rf_change=False),
    ]
    for answer in answers:
        for partition in answer.responses[0].partitions:
            # A message naming a broker of the cluster names it by position.
            partition.error_message = partition.error_message and re.sub(
                r"broker (\d+)",
                lambda m: f"broker {_positions(side, [int(m.group(1))])[0]}",
                partition.error_message,
            )
    return answers


@scenario("admin.reassignment_moves_a_partition", versions={
    "AlterPartitionReassignments": ALTER_REASSIGNMENTS,
    "ListPartitionReassignments": LIST_REASSIGNMENTS})  # fmt: skip
def reassignment_moves_a_partition(side: Side) -> list[Any]:
    """A partition on brokers 0 and 1 with records moved to 2 and 1: accepted; once done,
    its replicas and ISR are the target, the new replica holds the records, and
    ListPartitionReassignments lists nothing for it (asked by name and for every topic)."""
    name = _topic(side, replication=2)
    side.produce(name, 0, rq.batch(4))
    target = [side.broker_id(2), side.broker_id(1)]
    found: list[Any] = [_reassign(side, name, 0, target)]

    def moved() -> Any:
        partition = side.metadata(0, [name]).topics[0].partitions[0]
        done = list(partition.replica_nodes) == target and sorted(partition.isr_nodes) == sorted(
            target
        )
        return partition if done else None

    partition = wait_for(moved, WAIT_SECONDS, f"{side.name}: {name}-0 moved")
    found.append(_positions(side, list(partition.replica_nodes)))
    found.append(side.helper_call(2, rq.list_offsets(name, 0, rq.LATEST_TIMESTAMP)).topics[0]
                 .partitions[0].offset if side.leader(name) == 2 else "not led by 2")  # fmt: skip
    listing = messages.ListPartitionReassignmentsRequest
    asked = [listing.ListPartitionReassignmentsTopics(name=name, partition_indexes=[0])]

    def settled() -> Any:
        answer = side.call(0, listing(timeout_ms=30_000, topics=asked), LIST_REASSIGNMENTS)
        return answer if not answer.topics else None

    found.append(wait_for(settled, WAIT_SECONDS, f"{side.name}: nothing listed"))
    every = side.call(0, listing(timeout_ms=30_000, topics=None), LIST_REASSIGNMENTS)
    found.append([t.name for t in every.topics if t.name.startswith(side.prefix)])
    return found


# -- DescribeProducers and DescribeTopicPartitions ---------------------------------------------------


@scenario("admin.describe_producers", versions={"DescribeProducers": DESCRIBE_PRODUCERS,
                                               "InitProducerId": rq.INIT_PRODUCER_ID})  # fmt: skip
def describe_producers(side: Side) -> list[Any]:
    """An idempotent producer's two batches (sequences 0-1 and 2-4), then DescribeProducers at
    the leader (its id, epoch, last sequence and last timestamp), at a follower (which answers
    from its own log), and for a partition the topic lacks."""
    name = _topic(side)
    pid = side.call(0, rq.init_producer_id(), rq.INIT_PRODUCER_ID)
    side.produce(
        name,
        0,
        rq.batch(
            2, producer_id=pid.producer_id, producer_epoch=pid.producer_epoch, base_sequence=0
        ),
    )
    side.produce(name, 0, rq.batch(3, producer_id=pid.producer_id,
                                   producer_epoch=pid.producer_epoch, base_sequence=2,
                                   first_timestamp=rq.BASE_TIMESTAMP + 10))  # fmt: skip
    request = messages.DescribeProducersRequest
    leader = side.leader(name)
    follower = (leader + 1) % side.size
    body = request(topics=[request.TopicRequest(name=name, partition_indexes=[0, 3])])

    def caught_up() -> Any:
        answer = side.call(follower, body, DESCRIBE_PRODUCERS)
        producers = answer.topics[0].partitions[0].active_producers
        return answer if producers and producers[0].last_sequence == 4 else None

    return [
        side.call(leader, body, DESCRIBE_PRODUCERS),
        wait_for(caught_up, WAIT_SECONDS, f"{side.name}: the follower's producer state"),
    ]


@scenario("admin.describe_topic_partitions", versions={
    "DescribeTopicPartitions": DESCRIBE_TOPIC_PARTITIONS})  # fmt: skip
def describe_topic_partitions(side: Side) -> list[Any]:
    """DescribeTopicPartitions for a topic of three partitions and a missing topic, two
    partitions a page: the first page and its cursor, the page from the cursor, a cursor
    naming a topic not asked for (INVALID_REQUEST), and a limit of 0 (one partition)."""
    name = _topic(side, partitions=3, replication=2)
    missing = side.topic("missing")
    request = messages.DescribeTopicPartitionsRequest
    topics = [request.TopicRequest(name=name), request.TopicRequest(name=missing)]
    found = [side.call(1, request(topics=topics, response_partition_limit=2),
                       DESCRIBE_TOPIC_PARTITIONS)]  # fmt: skip
    cursor = request.Cursor(topic_name=name, partition_index=2)
    found.append(side.call(1, request(topics=topics, response_partition_limit=2, cursor=cursor),
                           DESCRIBE_TOPIC_PARTITIONS))  # fmt: skip
    stray = request.Cursor(topic_name=side.topic("other"), partition_index=0)
    found.append(side.call(1, request(topics=topics, cursor=stray), DESCRIBE_TOPIC_PARTITIONS))
    found.append(side.call(1, request(topics=topics[:1], response_partition_limit=0),
                           DESCRIBE_TOPIC_PARTITIONS))  # fmt: skip
    return found


# -- DeleteGroups and OffsetDelete ----------------------------------------------------------------

DELETE_GROUPS = 3
OFFSET_DELETE = 0
GROUP_DELETION = {"DeleteGroups": DELETE_GROUPS, "OffsetCommit": rq.OFFSET_COMMIT,
                  "OffsetFetch": rq.OFFSET_FETCH, "JoinGroup": rq.JOIN_GROUP,
                  "SyncGroup": rq.SYNC_GROUP, "FindCoordinator": rq.FIND_COORDINATOR}  # fmt: skip
OFFSET_DELETION = {**GROUP_DELETION, "OffsetDelete": OFFSET_DELETE}


def _subscribing(topic: str) -> list[tuple[str, bytes]]:
    """A consumer's JoinGroup protocols subscribing to ``topic``."""
    from coordkit.protocol.consumer import encode_subscription

    return [("range", encode_subscription([topic]))]


def _delete_groups(side: Side, index: int, *groups: str) -> Any:
    return side.call(index, messages.DeleteGroupsRequest(groups_names=list(groups)),
                     DELETE_GROUPS)  # fmt: skip


@scenario("admin.delete_groups", versions=GROUP_DELETION, compare_messages=True)
def delete_groups(side: Side) -> list[Any]:
    """DeleteGroups v3, each group at its coordinator: a group known only by the offsets a
    consumer outside it committed (deleted, its offsets gone), a group that never existed
    (GROUP_ID_NOT_FOUND), a stable group of one member (NON_EMPTY_GROUP); the deleted group
    again (GROUP_ID_NOT_FOUND); and at a broker that is not its coordinator (NOT_COORDINATOR)."""
    from differential.scenarios.groups import stable_member

    name = _topic(side, partitions=2, replication=1)
    quiet, busy, never = side.group("quiet"), side.group("busy"), side.group("never")
    coordinator = side.coordinator(quiet)
    commit = rq.offset_commit(quiet, {(name, 0): 3, (name, 1): 4}, ids=side.topic_id)
    found: list[Any] = [side.call(coordinator, commit, rq.OFFSET_COMMIT)]
    member = stable_member(side, busy, protocols=_subscribing(name))
    found.append(_delete_groups(side, coordinator, quiet))
    found.append(_delete_groups(side, side.coordinator(never), never))
    found.append(member.call(messages.DeleteGroupsRequest(groups_names=[busy]), DELETE_GROUPS))
    found.append(_delete_groups(side, coordinator, quiet))
    fetch = rq.offset_fetch({quiet: {name: [0, 1]}}, ids=side.topic_id)
    found.append(side.call(coordinator, fetch, rq.OFFSET_FETCH))
    elsewhere = (coordinator + 1) % side.size
    found.append(_delete_groups(side, elsewhere, quiet))
    return found


def _offset_delete(side: Side, index: int, group: str, asked: dict[str, list[int]]) -> Any:
    request = messages.OffsetDeleteRequest
    body = request(group_id=group, topics=[
        request.OffsetDeleteRequestTopic(name=topic, partitions=[
            request.OffsetDeleteRequestPartition(partition_index=p) for p in partitions])
        for topic, partitions in asked.items()])  # fmt: skip
    return side.call(index, body, OFFSET_DELETE)


@scenario("admin.offset_delete", versions=OFFSET_DELETION)
def offset_delete(side: Side) -> list[Any]:
    """OffsetDelete v0: of an empty group's partition 0 (its offset goes, partition 1's stays),
    a partition the topic lacks and a topic that does not exist (UNKNOWN_TOPIC_OR_PARTITION); of
    a stable group subscribed to the topic (GROUP_SUBSCRIBED_TO_TOPIC) and of another topic (its
    offset goes); of a group that does not exist (GROUP_ID_NOT_FOUND)."""
    from differential.scenarios.groups import stable_member

    name = _topic(side, partitions=2, replication=1)
    other = side.topic("other")
    side.create_topic(other, 1, 1)
    quiet, busy = side.group("quiet"), side.group("busy")
    coordinator = side.coordinator(quiet)
    commit = rq.offset_commit(quiet, {(name, 0): 3, (name, 1): 4}, ids=side.topic_id)
    side.call(coordinator, commit, rq.OFFSET_COMMIT)
    found: list[Any] = [_offset_delete(side, coordinator, quiet,
                                       {name: [0, 7], side.topic("missing"): [0]})]  # fmt: skip
    fetch = rq.offset_fetch({quiet: {name: [0, 1]}}, ids=side.topic_id)
    found.append(side.call(coordinator, fetch, rq.OFFSET_FETCH))
    member = stable_member(side, busy, protocols=_subscribing(name))
    commit = rq.offset_commit(busy, {(name, 0): 1, (other, 0): 2}, ids=side.topic_id,
                              generation=member.generation, member_id=member.member_id)  # fmt: skip
    found.append(member.call(commit, rq.OFFSET_COMMIT))
    body_busy = {name: [0], other: [0]}
    request = messages.OffsetDeleteRequest
    found.append(member.call(request(group_id=busy, topics=[
        request.OffsetDeleteRequestTopic(name=t, partitions=[
            request.OffsetDeleteRequestPartition(partition_index=p) for p in ps])
        for t, ps in body_busy.items()]), OFFSET_DELETE))  # fmt: skip
    fetch = rq.offset_fetch({busy: {name: [0], other: [0]}}, ids=side.topic_id)
    found.append(member.call(fetch, rq.OFFSET_FETCH))
    never = side.group("never")
    found.append(_offset_delete(side, side.coordinator(never), never, {name: [0]}))
    return found


@scenario("admin.preferred_election_after_a_reorder", versions={
    "AlterPartitionReassignments": ALTER_REASSIGNMENTS, "ElectLeaders": ELECT_LEADERS})  # fmt: skip
def preferred_election_after_a_reorder(side: Side) -> list[Any]:
    """A partition on brokers 0 and 1 reassigned to 1 and 0 (a reorder: nothing to add, done
    at once, the leader stays 0); then a preferred election moves the leader to broker 1, and a
    second one is not needed."""
    name = _topic(side, replication=2)
    target = [side.broker_id(1), side.broker_id(0)]
    found: list[Any] = [_reassign(side, name, 0, target)]

    def reordered() -> Any:
        partition = side.metadata(0, [name]).topics[0].partitions[0]
        return partition if list(partition.replica_nodes) == target else None

    partition = wait_for(reordered, WAIT_SECONDS, f"{side.name}: {name}-0 reordered")
    found.append(_positions(side, [partition.leader_id]))
    request = messages.ElectLeadersRequest
    body = request(election_type=0, timeout_ms=30_000,
                   topic_partitions=[request.TopicPartitions(topic=name, partitions=[0])])  # fmt: skip
    found.append(side.call(2, body, ELECT_LEADERS))

    def led_by_1() -> Any:
        partition = side.metadata(0, [name]).topics[0].partitions[0]
        return partition if partition.leader_id == side.broker_id(1) else None

    found.append(wait_for(led_by_1, WAIT_SECONDS, f"{side.name}: {name}-0 led by broker 1"))
    found.append(side.call(2, body, ELECT_LEADERS))
    return found

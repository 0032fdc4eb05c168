"""The admin apis of issue #35 item 2 against ``coordkit serve`` in its own process, through
the raw protocol and real admin clients (kafka-python's and confluent-kafka's AdminClient):
DescribeCluster, DescribeLogDirs, DeleteRecords, ElectLeaders, Alter/ListPartitionReassignments,
DescribeProducers and DescribeTopicPartitions. What Kafka answers for the same requests is
compared by the differential (``tests/differential/scenarios/admin.py``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import kafka.errors
import pytest
from confluent_kafka import TopicCollection
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import NewTopic as CkNewTopic
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from coordkit.protocol import messages
from coordkit.testing.waiting import wait_for
from serve.conftest import RawClient, ServeFactory, ServeProcess

NONE = 0
OFFSET_OUT_OF_RANGE = 1
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
INVALID_REPLICA_ASSIGNMENT = 39
ELECTION_NOT_NEEDED = 84
NO_REASSIGNMENT_IN_PROGRESS = 85
MISMATCHED_ENDPOINT_TYPE = 114
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
GROUP_SUBSCRIBED_TO_TOPIC = 86
WAIT_SECONDS = 30


def _metadata(server: ServeProcess, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """Partition → (leader, replicas, ISR) as Metadata tells it."""
    client = RawClient(server.addresses[min(server.addresses)])
    try:
        request = messages.MetadataRequest(
            topics=[messages.MetadataRequest.MetadataRequestTopic(name=topic)],
            allow_auto_topic_creation=False,
        )
        found = client.call(request, 12).topics[0]
    finally:
        client.close()
    return {
        p.partition_index: (p.leader_id, list(p.replica_nodes), list(p.isr_nodes))
        for p in found.partitions
    }


def _produce(server: ServeProcess, topic: str, partition: int, count: int) -> None:
    producer = KafkaProducer(bootstrap_servers=server.bootstrap, acks="all",
                             enable_idempotence=True)  # fmt: skip
    try:
        for i in range(count):
            producer.send(topic, value=f"v{i}".encode(), partition=partition).get(WAIT_SECONDS)
    finally:
        producer.close(timeout=WAIT_SECONDS)


def _earliest(server: ServeProcess, topic: str, partition: int) -> int:
    consumer = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id=None)
    try:
        tp = TopicPartition(topic, partition)
        return int(consumer.beginning_offsets([tp])[tp])
    finally:
        consumer.close()


def _raw(server: ServeProcess, broker: int) -> RawClient:
    return RawClient(server.addresses[broker])


def test_describe_cluster_and_topic_partitions(serve: ServeFactory) -> None:
    server = serve(brokers=3)
    client = _raw(server, 0)
    try:
        answer = client.call(messages.DescribeClusterRequest(endpoint_type=1), 2)
        assert answer.error_code == NONE
        assert sorted((b.broker_id, b.port) for b in answer.brokers) == sorted(
            (b, int(a.rsplit(":", 1)[1])) for b, a in server.addresses.items()
        )
        assert answer.controller_id in server.addresses
        refused = client.call(messages.DescribeClusterRequest(endpoint_type=2), 2)
        assert refused.error_code == MISMATCHED_ENDPOINT_TYPE
        assert refused.brokers == []
    finally:
        client.close()
    # confluent-kafka's describe_cluster (DescribeCluster) and describe_topics
    # (DescribeTopicPartitions, cursor paging through a small partition limit of its own).
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    described = admin.describe_cluster().result(WAIT_SECONDS)
    assert sorted(n.id for n in described.nodes) == sorted(server.addresses)
    admin.create_topics([CkNewTopic("paged", 5, 2)])["paged"].result(WAIT_SECONDS)
    wait_for(lambda: len(_metadata(server, "paged")) == 5, WAIT_SECONDS, "paged's leaders")
    topics = admin.describe_topics(TopicCollection(["paged"]))["paged"].result(WAIT_SECONDS)
    assert [p.id for p in topics.partitions] == [0, 1, 2, 3, 4]
    assert all(len(p.replicas) == 2 for p in topics.partitions)
    # Paging by hand: two partitions a page.
    client = _raw(server, 1)
    try:
        request = messages.DescribeTopicPartitionsRequest
        topic = request.TopicRequest(name="paged")
        first = client.call(request(topics=[topic], response_partition_limit=2), 0)
        assert [p.partition_index for p in first.topics[0].partitions] == [0, 1]
        assert (first.next_cursor.topic_name, first.next_cursor.partition_index) == ("paged", 2)
        cursor = request.Cursor(topic_name="paged", partition_index=2)
        second = client.call(request(topics=[topic], response_partition_limit=2,
                                     cursor=cursor), 0)  # fmt: skip
        assert [p.partition_index for p in second.topics[0].partitions] == [2, 3]
    finally:
        client.close()


def test_delete_records_and_log_dirs(
    serve: ServeFactory, admin_for: Callable[[ServeProcess], KafkaAdminClient]
) -> None:
    server = serve(brokers=2)
    admin = admin_for(server)
    admin.create_topics([NewTopic("trim", replica_assignments={0: [0, 1]})])
    wait_for(lambda: bool(_metadata(server, "trim")), WAIT_SECONDS, "trim's leader")
    _produce(server, "trim", 0, 10)
    # confluent-kafka's delete_records: the low watermark is where the log starts now.
    confluent = AdminClient({"bootstrap.servers": server.bootstrap})
    result = confluent.delete_records([CkTopicPartition("trim", 0, 4)])
    deleted = result[CkTopicPartition("trim", 0, 4)].result(WAIT_SECONDS)
    assert deleted.low_watermark == 4
    assert _earliest(server, "trim", 0) == 4
    client = _raw(server, 0)
    try:
        request = messages.DeleteRecordsRequest

        def delete(partition: int, offset: int) -> tuple[int, int]:
            body = request(topics=[request.DeleteRecordsTopic(name="trim", partitions=[
                request.DeleteRecordsPartition(partition_index=partition, offset=offset)])],
                timeout_ms=5000)  # fmt: skip
            answer = client.call(body, 2).topics[0].partitions[0]
            return answer.error_code, answer.low_watermark

        assert delete(0, 11) == (OFFSET_OUT_OF_RANGE, -1)  # past the high watermark
        assert delete(0, 2) == (NONE, 4)  # never back
        assert delete(1, 0) == (UNKNOWN_TOPIC_OR_PARTITION, -1)
        assert delete(0, -1) == (NONE, 10)  # -1: the high watermark
    finally:
        client.close()
    # The follower learns the log start from its leader's Fetch answers.
    leader = _metadata(server, "trim")[0][0]
    follower = 1 - leader

    def log_dirs(broker: int) -> list[tuple[str, int, int]]:
        raw = _raw(server, broker)
        try:
            answer = raw.call(messages.DescribeLogDirsRequest(topics=None), 4)
        finally:
            raw.close()
        assert answer.error_code == NONE
        assert len(answer.results) == 1
        return [(t.name, p.partition_index, p.offset_lag)
                for t in answer.results[0].topics for p in t.partitions]  # fmt: skip

    assert ("trim", 0, 0) in log_dirs(leader)
    assert ("trim", 0, 0) in log_dirs(follower)
    # kafka-python's describe_log_dirs reaches every broker.
    assert admin.describe_log_dirs() is not None


def test_describe_producers(
    serve: ServeFactory, admin_for: Callable[[ServeProcess], KafkaAdminClient]
) -> None:
    server = serve(brokers=1)
    admin = admin_for(server)
    admin.create_topics([NewTopic("idem", 1, 1)])
    wait_for(lambda: bool(_metadata(server, "idem")), WAIT_SECONDS, "idem's leader")
    _produce(server, "idem", 0, 3)
    client = _raw(server, 0)
    try:
        request = messages.DescribeProducersRequest
        answer = client.call(
            request(topics=[request.TopicRequest(name="idem", partition_indexes=[0, 7])]), 0
        )
    finally:
        client.close()
    found, missing = answer.topics[0].partitions
    assert found.error_code == NONE
    assert [(p.producer_epoch, p.last_sequence) for p in found.active_producers] == [(0, 2)]
    assert missing.error_code == UNKNOWN_TOPIC_OR_PARTITION


def test_elections_and_reassignments(
    serve: ServeFactory, admin_for: Callable[[ServeProcess], KafkaAdminClient]
) -> None:
    server = serve(brokers=3)
    admin = admin_for(server)
    admin.create_topics([NewTopic("moved", replica_assignments={0: [0, 1], 1: [1, 2]})])
    wait_for(lambda: len(_metadata(server, "moved")) == 2, WAIT_SECONDS, "moved's leaders")
    client = _raw(server, 2)
    try:
        elect = messages.ElectLeadersRequest
        answer = client.call(elect(election_type=0, timeout_ms=10_000, topic_partitions=[
            elect.TopicPartitions(topic="moved", partitions=[0, 5])]), 2)  # fmt: skip
        results = {r.partition_id: r.error_code for r in answer.replica_election_results[0]
                   .partition_result}  # fmt: skip
        assert results == {0: ELECTION_NOT_NEEDED, 5: UNKNOWN_TOPIC_OR_PARTITION}

        alter = messages.AlterPartitionReassignmentsRequest

        def reassign(partition: int, replicas: list[int] | None) -> int:
            body = alter(timeout_ms=10_000, topics=[alter.ReassignableTopic(name="moved",
                partitions=[alter.ReassignablePartition(partition_index=partition,
                                                        replicas=replicas)])])  # fmt: skip
            answer = client.call(body, 0)
            return int(answer.responses[0].partitions[0].error_code)

        assert reassign(0, [0, 0]) == INVALID_REPLICA_ASSIGNMENT
        assert reassign(0, [0, 7]) == INVALID_REPLICA_ASSIGNMENT
        assert reassign(0, None) == NO_REASSIGNMENT_IN_PROGRESS
        assert reassign(0, [2, 1]) == NONE
    finally:
        client.close()
    wait_for(lambda: _metadata(server, "moved")[0][1] == [2, 1], WAIT_SECONDS,
             "moved-0 on brokers 2 and 1")  # fmt: skip
    # Done: kafka-python's list_partition_reassignments finds nothing running.
    assert not admin.list_partition_reassignments()
    # A reorder (nothing to add) completes at once and leaves the leader (1) where it was; a
    # preferred election (kafka-python's elect_leaders, sent to the controller) moves it to 2.
    admin.alter_partition_reassignments({TopicPartition("moved", 1): [2, 1]})
    wait_for(lambda: _metadata(server, "moved")[1][1] == [2, 1], WAIT_SECONDS, "moved-1 reordered")
    assert _metadata(server, "moved")[1][0] == 1
    answer = admin.elect_leaders(0, {"moved": [1]}, timeout_ms=10_000)
    codes = [p.error_code for r in answer.replica_election_results for p in r.partition_result]
    assert codes == [NONE]
    assert _metadata(server, "moved")[1][0] == 2


def _commit(server: ServeProcess, group: str, topic: str, offsets: dict[int, int]) -> None:
    """A consumer of ``group`` outside any membership commits ``offsets`` of ``topic``."""
    from kafka.structs import OffsetAndMetadata

    consumer = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id=group,
                             enable_auto_commit=False)  # fmt: skip
    try:
        consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1)
                         for p, o in offsets.items()})  # fmt: skip
    finally:
        consumer.close(autocommit=False)


def test_delete_groups_and_offsets(
    serve: ServeFactory, admin_for: Callable[[ServeProcess], KafkaAdminClient]
) -> None:
    from kafka.errors import GroupIdNotFoundError

    server = serve(brokers=2)
    admin = admin_for(server)
    admin.create_topics([NewTopic("offs", 2, 1)])
    wait_for(lambda: len(_metadata(server, "offs")) == 2, WAIT_SECONDS, "offs' leaders")
    _commit(server, "quiet", "offs", {0: 5, 1: 7})
    # OffsetDelete of partition 0 and of a partition the topic lacks.
    answer = admin.delete_group_offsets(
        "quiet", [TopicPartition("offs", 0), TopicPartition("offs", 9)]
    )
    assert {tp.partition: e.errno for tp, e in answer.items()} == {
        0: NONE,
        9: UNKNOWN_TOPIC_OR_PARTITION,
    }
    left = admin.list_group_offsets("quiet")["quiet"]
    assert {tp.partition: o.offset for tp, o in left.items()} == {1: 7}
    # A group with a member subscribed: its topic's offsets stay, and it is not deleted.
    member = KafkaConsumer("offs", bootstrap_servers=server.bootstrap, group_id="busy",
                           session_timeout_ms=6000, heartbeat_interval_ms=500)  # fmt: skip
    try:
        wait_for(lambda: member.poll(100) is not None and bool(member.assignment()),
                 WAIT_SECONDS, "busy's member assigned")  # fmt: skip
        member.commit()
        subscribed = admin.delete_group_offsets("busy", [TopicPartition("offs", 0)])
        assert [e.errno for e in subscribed.values()] == [GROUP_SUBSCRIBED_TO_TOPIC]
        # confluent-kafka's delete_consumer_groups: NON_EMPTY_GROUP.
        confluent = AdminClient({"bootstrap.servers": server.bootstrap})
        future = confluent.delete_consumer_groups(["busy"])["busy"]
        with pytest.raises(Exception, match="NON_EMPTY_GROUP"):
            future.result(WAIT_SECONDS)
        # kafka-python's delete_groups (DeleteGroups) likewise.
        assert _errnos(admin.delete_groups(["busy"])) == {"busy": NON_EMPTY_GROUP}
    finally:
        member.close()
    # Emptied (the member left): deleted with its offsets; a second deletion finds nothing.
    assert _errnos(admin.delete_groups(["busy", "quiet"])) == {"busy": NONE, "quiet": NONE}
    assert admin.list_group_offsets("quiet")["quiet"] == {}
    assert _errnos(admin.delete_groups(["quiet"])) == {"quiet": GROUP_ID_NOT_FOUND}
    # OffsetDelete of a group that no longer exists: the request's error.
    with pytest.raises(GroupIdNotFoundError):
        admin.delete_group_offsets("quiet", [TopicPartition("offs", 1)])


def _errnos(results: dict[str, str]) -> dict[str, int]:
    """kafka-python's delete_groups answer (group → ``OK`` or its error's class name): group →
    error code."""
    return {
        group: NONE if error == "OK" else int(getattr(kafka.errors, error).errno)
        for group, error in results.items()
    }


def test_log_dirs_of_a_data_dir(
    serve: ServeFactory, admin_for: Callable[[ServeProcess], KafkaAdminClient], tmp_path: Path
) -> None:
    """With ``--data-dir`` each broker names its own log directory (absolute), its volume's
    sizes, and each partition's size on disk, an empty one's too."""
    server = serve("--data-dir", str(tmp_path), brokers=1)
    admin = admin_for(server)
    admin.create_topics([NewTopic("ondisk", 1, 1), NewTopic("empty", 1, 1)])
    wait_for(lambda: bool(_metadata(server, "ondisk")), WAIT_SECONDS, "ondisk's leader")
    wait_for(lambda: bool(_metadata(server, "empty")), WAIT_SECONDS, "empty's leader")
    _produce(server, "ondisk", 0, 5)
    client = _raw(server, 0)
    try:
        answer = client.call(messages.DescribeLogDirsRequest(topics=None), 4)
    finally:
        client.close()
    (result,) = answer.results
    assert Path(result.log_dir).is_absolute()
    assert Path(result.log_dir).is_relative_to(tmp_path.resolve())
    assert result.total_bytes > 0
    assert result.usable_bytes >= 0
    sizes = {t.name: [p.partition_size for p in t.partitions] for t in result.topics}
    assert sizes["ondisk"][0] > 0
    # A replica without records has its log too, as a Kafka broker has from its first leadership.
    assert sizes["empty"] == [0]


def test_a_replica_moved_away_by_a_reassignment_is_deleted(
    serve: ServeFactory, admin_for: Callable[[ServeProcess], KafkaAdminClient], tmp_path: Path
) -> None:
    """A finished reassignment's removed replica stops and its log goes, files and all, as
    Kafka's controller has it deleted (StopReplica with ``deletePartition``): DescribeLogDirs of
    the broker it left no longer names it."""
    server = serve("--data-dir", str(tmp_path), brokers=3)
    admin = admin_for(server)
    admin.create_topics([NewTopic("leaving", replica_assignments={0: [0, 1]})])
    wait_for(lambda: bool(_metadata(server, "leaving")), WAIT_SECONDS, "leaving's leader")
    _produce(server, "leaving", 0, 5)

    def held_by(broker: int) -> bool:
        client = _raw(server, broker)
        try:
            answer = client.call(messages.DescribeLogDirsRequest(topics=None), 4)
        finally:
            client.close()
        return any(t.name == "leaving" for r in answer.results for t in r.topics)

    wait_for(lambda: held_by(0) and held_by(1), WAIT_SECONDS, "both replicas' logs")
    admin.alter_partition_reassignments({TopicPartition("leaving", 0): [1, 2]})
    wait_for(lambda: _metadata(server, "leaving")[0][1] == [1, 2], WAIT_SECONDS,
             "leaving-0 on brokers 1 and 2")  # fmt: skip
    wait_for(lambda: not held_by(0), WAIT_SECONDS, "broker 0's replica deleted")
    assert held_by(1)
    assert held_by(2)
    assert not (tmp_path / "broker-0" / "leaving-0").exists()
    assert (tmp_path / "broker-2" / "leaving-0").exists()
    assert _earliest(server, "leaving", 0) == 0

"""Topic administration over Kafka's protocol against ``coordkit serve`` in its own process:
kafka-python's and confluent-kafka's admin clients create topics, grow them (CreatePartitions)
and delete them (DeleteTopics); refusals get Kafka's error codes and write nothing."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import (
    InvalidPartitionsError,
    InvalidReplicationAssignmentError,
    UnknownTopicOrPartitionError,
)

from coordkit.protocol import messages
from serve.conftest import RawClient, ServeFactory, ServeProcess

Connect = Callable[[str], RawClient]
NONE = 0
REQUEST_TIMED_OUT = 7
INVALID_REQUEST = 42
#: Seconds a test waits for what the cluster does on its own.
WAIT_SECONDS = 30


def _partitions(server: ServeProcess, topic: str) -> dict[int, int]:
    """Partition → leader of ``topic`` as Metadata (v12, from broker 0) tells it, ``{}`` when
    the topic is unknown."""
    client = RawClient(server.addresses[min(server.addresses)])
    try:
        request = messages.MetadataRequest(
            topics=[messages.MetadataRequest.MetadataRequestTopic(name=topic)],
            allow_auto_topic_creation=False,
        )
        found = client.call(request, 12).topics[0]
    finally:
        client.close()
    if found.error_code != NONE:
        return {}
    return {p.partition_index: p.leader_id for p in found.partitions}


def _end_offset(server: ServeProcess, topic: str, partition: int) -> int:
    consumer = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id=None)
    try:
        tp = TopicPartition(topic, partition)
        return int(consumer.end_offsets([tp])[tp])
    finally:
        consumer.close()


def _produce(server: ServeProcess, topic: str, partition: int, count: int) -> None:
    producer = KafkaProducer(bootstrap_servers=server.bootstrap, acks=1)
    try:
        futures = [
            producer.send(topic, value=f"v{i}".encode(), partition=partition) for i in range(count)
        ]
        for future in futures:
            future.get(timeout=WAIT_SECONDS)
    finally:
        producer.close(timeout=WAIT_SECONDS)


def test_kafka_python_grows_and_deletes_a_topic(
    serve: ServeFactory, admin_for: Callable[[ServeProcess], KafkaAdminClient]
) -> None:
    server = serve(brokers=3)
    admin = admin_for(server)
    admin.create_topics([NewTopic("grow", 2, 2)])
    admin.create_partitions({"grow": 5})
    # The answer came after the new partitions' leaders were elected.
    leaders = _partitions(server, "grow")
    assert sorted(leaders) == [0, 1, 2, 3, 4]
    assert all(leader in server.addresses for leader in leaders.values())
    # A new partition takes records.
    _produce(server, "grow", 4, 3)
    assert _end_offset(server, "grow", 4) == 3

    response = admin.delete_topics(["grow"])
    assert [(t["name"], t["error_code"]) for t in response["topics"]] == [("grow", NONE)]
    # Deleted when the answer came: Metadata no longer knows it.
    assert _partitions(server, "grow") == {}
    assert "grow" not in admin.list_topics()


def test_a_topic_created_again_after_deletion_starts_empty(
    serve: ServeFactory, admin_for: Callable[[ServeProcess], KafkaAdminClient]
) -> None:
    server = serve(brokers=2)
    admin = admin_for(server)
    # Both incarnations on broker 1, so that the same broker's served log would be reused.
    admin.create_topics([NewTopic("again", replica_assignments={0: [1]})])
    _produce(server, "again", 0, 5)
    assert _end_offset(server, "again", 0) == 5
    admin.delete_topics(["again"])
    admin.create_topics([NewTopic("again", replica_assignments={0: [1]})])
    assert _partitions(server, "again") == {0: 1}
    assert _end_offset(server, "again", 0) == 0


def test_refusals_write_nothing(
    serve: ServeFactory, admin_for: Callable[[ServeProcess], KafkaAdminClient]
) -> None:
    server = serve(brokers=2)
    admin = admin_for(server)
    admin.create_topics([NewTopic("kept", 3, 1)])
    before = _partitions(server, "kept")

    with pytest.raises(UnknownTopicOrPartitionError):
        admin.delete_topics(["missing"])
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.create_partitions({"missing": 4})
    with pytest.raises(InvalidPartitionsError):
        admin.create_partitions({"kept": 2})  # fewer
    with pytest.raises(InvalidPartitionsError):
        admin.create_partitions({"kept": 3})  # as many
    with pytest.raises(InvalidReplicationAssignmentError):
        admin.create_partitions({"kept": {"count": 4, "assignments": [[7]]}})  # no broker 7
    with pytest.raises(InvalidReplicationAssignmentError):
        admin.create_partitions({"kept": {"count": 5, "assignments": [[0]]}})  # one list of two
    # validate_only: a valid increase is accepted, and nothing is written.
    result = admin.create_partitions({"kept": 6}, validate_only=True)
    assert [(r.name, r.error_code) for r in result.results] == [("kept", NONE)]
    with pytest.raises(InvalidPartitionsError):
        admin.create_partitions({"kept": 1}, validate_only=True)
    time.sleep(0.5)  # what a controller would have done by now
    assert _partitions(server, "kept") == before


def test_an_assignment_given_is_used(
    serve: ServeFactory, admin_for: Callable[[ServeProcess], KafkaAdminClient]
) -> None:
    server = serve(brokers=3)
    admin = admin_for(server)
    admin.create_topics([NewTopic("placed", replica_assignments={0: [0]})])
    admin.create_partitions({"placed": {"count": 3, "assignments": [[2], [1]]}})
    assert _partitions(server, "placed") == {0: 0, 1: 2, 2: 1}


def test_delete_topics_over_the_wire(
    serve: ServeFactory,
    admin_for: Callable[[ServeProcess], KafkaAdminClient],
    raw_client: Connect,
) -> None:
    server = serve(brokers=1)
    admin = admin_for(server)
    admin.create_topics([NewTopic("slow", 1, 1), NewTopic("twice", 1, 1)])
    client = raw_client(server.addresses[0])
    request = messages.ApiVersionsRequest(
        client_software_name="coordkit-tests", client_software_version="1.0"
    )  # v3+ needs both (Kafka refuses the request without them)
    versions = client.call(request, 3)
    ranges = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
    # DeleteTopics v1 (Kafka 4 removed v0) up to v6 (topics by name or id), CreatePartitions v0-3.
    assert (ranges[20], ranges[37]) == ((1, 6), (0, 3))

    # A timeout of 0: queued, answered at once as Kafka does (REQUEST_TIMED_OUT), deleted later.
    request = messages.DeleteTopicsRequest(topic_names=["slow"], timeout_ms=0)
    (result,) = client.call(request, 5).responses
    assert (result.name, result.error_code) == ("slow", REQUEST_TIMED_OUT)
    deadline = time.monotonic() + WAIT_SECONDS
    while _partitions(server, "slow") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _partitions(server, "slow") == {}

    # A topic named twice is refused once and not deleted (as Kafka 4's controller answers), an
    # unknown one named; v1 has no message.
    request = messages.DeleteTopicsRequest(topic_names=["twice", "twice", "nope"], timeout_ms=5000)
    answers = [(r.name, r.error_code) for r in client.call(request, 1).responses]
    assert answers == [("nope", 3), ("twice", INVALID_REQUEST)]
    assert _partitions(server, "twice") != {}


def test_confluent_kafka_admin(serve: ServeFactory) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewPartitions
    from confluent_kafka.admin import NewTopic as ConfluentTopic

    server = serve(brokers=3)
    admin = AdminClient({"bootstrap.servers": server.bootstrap})

    def wait(futures: dict[str, Any]) -> None:
        for future in futures.values():
            future.result(timeout=WAIT_SECONDS)

    wait(admin.create_topics([ConfluentTopic("ck", num_partitions=1, replication_factor=2)]))
    wait(admin.create_partitions([NewPartitions("ck", 4)]))
    assert sorted(_partitions(server, "ck")) == [0, 1, 2, 3]
    with pytest.raises(KafkaException, match="INVALID_PARTITIONS"):
        wait(admin.create_partitions([NewPartitions("ck", 2)]))
    wait(admin.delete_topics(["ck"], operation_timeout=WAIT_SECONDS))
    assert _partitions(server, "ck") == {}
    with pytest.raises(KafkaException, match="UNKNOWN_TOPIC_OR_PART"):
        wait(admin.delete_topics(["ck"], operation_timeout=WAIT_SECONDS))


def test_a_validate_only_creation_creates_nothing_and_says_so(
    serve: ServeFactory, admin_for: Callable[[ServeProcess], KafkaAdminClient]
) -> None:
    server = serve(brokers=1)
    admin = admin_for(server)
    admin.create_topics([NewTopic("dry", 2, 1)], validate_only=True)
    assert _partitions(server, "dry") == {}
    _status, _out, err = server.stop()
    assert "would create topic 'dry'" in err
    assert "created topic 'dry'" not in err

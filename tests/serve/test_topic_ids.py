"""Topics named by id (Metadata 13, Produce 13, Fetch 18, DeleteTopics 6) on ``coordkit serve``,
for a topic an old tool wrote without an id: the controller gives it one, the brokers serve it
by that id at once, librdkafka reads and writes it by id, and once it is deleted its id names
nothing on any broker (tests/differential/scenarios/topic_ids.py holds the answers to Kafka's)."""

from __future__ import annotations

import time
import uuid
from typing import Any

from coordkit.engine.cluster_id import kafka_uuid
from coordkit.kafka import layout
from coordkit.protocol import messages
from coordkit.protocol.records import decode_batches, encode_batch, new_batch
from serve.conftest import RawClient
from serve.inprocess import InProcessFactory, InProcessServer, in_process_fixture  # noqa: F401
from serve.test_leader_epoch import _placed, _wait_moved
from serve.test_replication import _state

WAIT_SECONDS = 30
NONE = 0
UNKNOWN_TOPIC_ID = 100
NOT_LEADER_OR_FOLLOWER = 6
FENCED_LEADER_EPOCH = 74
#: As a tool older than Kafka 2.8 wrote a topic: version 1, no id; one partition on broker 0.
LEGACY_NODE = b'{"version":1,"partitions":{"0":[0]}}'
NO_SUCH_ID = uuid.UUID(int=0x0123456789ABCDEF0123456789ABCDEF)


def wait_for(check: Any, what: str) -> Any:
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def metadata(client: RawClient, name: str) -> Any:
    Request: Any = messages.MetadataRequest
    request = Request(topics=[Request.MetadataRequestTopic(name=name)],
                      allow_auto_topic_creation=False)  # fmt: skip
    return client.call(request, 13)


def produce(client: RawClient, topic_id: uuid.UUID, *values: bytes) -> Any:
    Request: Any = messages.ProduceRequest
    records = encode_batch(new_batch([(b"k", v) for v in values]))
    data = Request.TopicProduceData(
        topic_id=topic_id,
        partition_data=[Request.PartitionProduceData(index=0, records=records)],
    )
    return client.call(Request(acks=-1, timeout_ms=10_000, topic_data=[data]), 13)


def fetch(client: RawClient, topic_id: uuid.UUID, current_leader_epoch: int = -1) -> Any:
    Request: Any = messages.FetchRequest
    partition = Request.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20,
                                       current_leader_epoch=current_leader_epoch)  # fmt: skip
    request = Request(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                      topics=[Request.FetchTopic(topic_id=topic_id, partitions=[partition])])  # fmt: skip
    return client.call(request, 18)


def legacy_topic(server: InProcessServer, name: str) -> uuid.UUID:
    """Write ``name`` as an old tool did; the id the controller gives it, once it has a leader."""
    store = server.server.cluster.admin_store
    store.create(layout.topic_path(name), LEGACY_NODE)

    def given() -> str | None:
        return layout.TOPIC.decode(store.get(layout.topic_path(name))[0]).topic_id

    return kafka_uuid(wait_for(given, f"an id for {name}"))


def test_a_topic_written_without_an_id_is_served_by_the_id_the_controller_gives(
    in_process: InProcessFactory,
) -> None:
    server = in_process(brokers=2)
    client = RawClient(server.address(0))
    other = RawClient(server.address(1))
    try:
        topic_id = legacy_topic(server, "legacy")
        found = wait_for(
            lambda: (
                (t := metadata(client, "legacy").topics[0]).partitions
                and t.partitions[0].leader_id == 0
                and t
            ),
            "a leader for legacy",
        )
        assert (found.error_code, found.topic_id) == (NONE, topic_id)
        # Served by id at once (a broker that has not heard of the id yet reads the store).
        produced = produce(client, topic_id, b"a", b"b")
        assert produced.responses[0].topic_id == topic_id
        assert produced.responses[0].partition_responses[0].error_code == NONE
        answer = fetch(client, topic_id)
        assert answer.responses[0].topic_id == topic_id
        read = answer.responses[0].partitions[0]
        assert (read.error_code, read.high_watermark) == (NONE, 2)
        values = [r.value for b in decode_batches(bytes(read.records)) for r in b.records]
        assert values == [b"a", b"b"]
        # An id no topic has: UNKNOWN_TOPIC_ID, under that id.
        unknown = fetch(client, NO_SUCH_ID).responses[0]
        assert (unknown.topic_id, unknown.partitions[0].error_code) == (
            NO_SUCH_ID,
            UNKNOWN_TOPIC_ID,
        )
        refused = produce(client, NO_SUCH_ID, b"x").responses[0]
        assert refused.partition_responses[0].error_code == UNKNOWN_TOPIC_ID
        # Deleted by id (DeleteTopics 6): its id names nothing any more, on either broker.
        Delete: Any = messages.DeleteTopicsRequest
        request = Delete(topics=[Delete.DeleteTopicState(name=None, topic_id=topic_id)],
                         timeout_ms=10_000)  # fmt: skip
        result = client.call(request, 6).responses[0]
        assert (result.error_code, result.name, result.topic_id) == (NONE, "legacy", topic_id)
        for broker in (client, other):
            gone = fetch(broker, topic_id).responses[0].partitions[0]
            assert gone.error_code == UNKNOWN_TOPIC_ID
    finally:
        client.close()
        other.close()


def test_librdkafka_reads_and_writes_a_topic_written_without_an_id(
    in_process: InProcessFactory,
) -> None:
    from confluent_kafka import Consumer, Producer

    server = in_process(brokers=1)
    legacy_topic(server, "old-orders")
    producer = Producer({"bootstrap.servers": server.bootstrap})
    for i in range(20):
        producer.produce("old-orders", value=f"o{i}".encode())
    assert producer.flush(WAIT_SECONDS) == 0
    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "old",
                         "auto.offset.reset": "earliest"})  # fmt: skip
    consumer.subscribe(["old-orders"])
    read: list[str] = []
    deadline = time.monotonic() + WAIT_SECONDS
    try:
        while len(read) < 20 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                read.append(message.value().decode())
    finally:
        consumer.close()
    assert read == [f"o{i}" for i in range(20)]


def test_a_refusal_names_the_new_leader_and_its_endpoint(in_process: InProcessFactory) -> None:
    """KIP-951 (Fetch 16+, Produce 10+): after a failover, a fetch with the old leader epoch
    is FENCED_LEADER_EPOCH and one from a broker without a replica NOT_LEADER_OR_FOLLOWER, each
    naming the new leader, its epoch and where it listens (the differential compares the
    second with Kafka; a failover is not played there)."""
    server = in_process(brokers=3)
    tp = _placed(server, "moving", [0, 1])
    first = _state(server, tp).leader_epoch
    server.server.stop_broker(0)
    _wait_moved(server, tp)
    second = _state(server, tp).leader_epoch
    leader, outsider = RawClient(server.address(1)), RawClient(server.address(2))
    try:
        topic_id = metadata(leader, "moving").topics[0].topic_id
        host, port = server.address(1).rsplit(":", 1)
        for client, epoch, code in ((leader, first, FENCED_LEADER_EPOCH),
                                    (outsider, -1, NOT_LEADER_OR_FOLLOWER)):  # fmt: skip
            answer = fetch(client, topic_id, current_leader_epoch=epoch)
            refused = answer.responses[0].partitions[0]
            assert refused.error_code == code
            current = refused.current_leader
            assert (current.leader_id, current.leader_epoch) == (1, second)
            assert [(e.node_id, e.host, e.port) for e in answer.node_endpoints] == [
                (1, host, int(port))
            ]
        produced = produce(outsider, topic_id, b"x")
        refused = produced.responses[0].partition_responses[0]
        assert refused.error_code == NOT_LEADER_OR_FOLLOWER
        assert (refused.current_leader.leader_id, refused.current_leader.leader_epoch) == (
            1,
            second,
        )
        assert [e.node_id for e in produced.node_endpoints] == [1]
    finally:
        leader.close()
        outsider.close()

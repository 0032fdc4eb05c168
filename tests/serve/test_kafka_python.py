"""kafka-python (a client nobody here wrote) against ``coordkit serve`` in its own process: topics
created through the admin client, keyed records produced with acks=1 and consumed back."""

from __future__ import annotations

import collections
import signal

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError

from serve.conftest import ServeFactory

RECORDS = 100
PARTITIONS = 3


def _create(bootstrap: str, topic: str, partitions: int, factor: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
    try:
        admin.create_topics([NewTopic(topic, partitions, factor)])
    finally:
        admin.close()


def test_produce_and_consume_keyed_records(serve: ServeFactory) -> None:
    server = serve(brokers=3)
    _create(server.bootstrap, "orders", PARTITIONS, 2)
    producer = KafkaProducer(bootstrap_servers=server.bootstrap, acks=1, linger_ms=5)
    sent = [
        producer.send("orders", key=f"customer-{i % 17}".encode(), value=f"order-{i}".encode())
        for i in range(RECORDS)
    ]
    producer.flush(timeout=30)
    acked = {f"order-{i}": future.get(timeout=30) for i, future in enumerate(sent)}
    producer.close(timeout=30)

    consumer = KafkaConsumer(
        bootstrap_servers=server.bootstrap,
        group_id=None,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=5_000,
    )
    consumer.assign([TopicPartition("orders", p) for p in range(PARTITIONS)])
    consumed = list(consumer)
    consumer.close()

    assert sorted(r.value.decode() for r in consumed) == sorted(acked)
    for record in consumed:
        metadata = acked[record.value.decode()]
        # The offset the leader acknowledged is where the record is read back.
        assert (record.partition, record.offset) == (metadata.partition, metadata.offset)
        assert record.key == f"customer-{int(record.value.decode()[6:]) % 17}".encode()
    # Offsets per partition are dense from 0, in the order each leader appended.
    by_partition = collections.defaultdict(list)
    for record in consumed:
        by_partition[record.partition].append(record.offset)
    for offsets in by_partition.values():
        assert offsets == list(range(len(offsets)))
    # One key, one partition (kafka-python's murmur2 partitioner), and more than one in use.
    partitions_of_key = collections.defaultdict(set)
    for record in consumed:
        partitions_of_key[record.key].add(record.partition)
    assert all(len(p) == 1 for p in partitions_of_key.values())
    assert len(by_partition) > 1


def test_an_existing_topic_is_refused(serve: ServeFactory) -> None:
    server = serve(brokers=1)
    _create(server.bootstrap, "once", 1, 1)
    with pytest.raises(TopicAlreadyExistsError):
        _create(server.bootstrap, "once", 1, 1)


def test_ctrl_c_stops_cleanly(serve: ServeFactory) -> None:
    server = serve(brokers=2)
    status, out, err = server.stop(signal.SIGINT)
    assert status == 0, err
    assert out.strip().endswith("stopped")
    assert "Traceback" not in err


def test_sigterm_stops_cleanly(serve: ServeFactory) -> None:
    server = serve(brokers=1)
    status, _out, err = server.stop(signal.SIGTERM)
    assert status == 0, err
    assert "Traceback" not in err

"""Real clients' producers against ``coordkit serve`` (in its own process): kafka-python's default
producer (idempotent, acks=all), librdkafka's and aiokafka's idempotent producers, keyed records
to a topic of 3 partitions with replication factor 3 on 3 brokers, read back exactly by a
consumer."""

from __future__ import annotations

import asyncio
import collections
import time

import aiokafka
import confluent_kafka
import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from serve.conftest import ServeFactory

RECORDS = 1_000
PARTITIONS = 3


def _create(bootstrap: str, topic: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 3)])
    finally:
        admin.close()


def _consume(bootstrap: str, topic: str, expected: int) -> list[tuple[int, int, bytes, bytes]]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=3_000,
    )
    consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    got: list[tuple[int, int, bytes, bytes]] = []
    deadline = time.monotonic() + 60
    while len(got) < expected and time.monotonic() < deadline:
        got.extend((r.partition, r.offset, r.key, r.value) for r in consumer)
    # Nothing more comes: exactly what was produced.
    got.extend((r.partition, r.offset, r.key, r.value) for r in consumer)
    consumer.close()
    return got


def _check(
    consumed: list[tuple[int, int, bytes, bytes]], acked: dict[bytes, tuple[int, int]]
) -> None:
    assert len(consumed) == len(acked) == RECORDS
    assert {value: (p, o) for p, o, _, value in consumed} == acked
    by_partition = collections.defaultdict(list)
    for partition, offset, key, value in consumed:
        by_partition[partition].append(offset)
        assert key == f"key-{int(value.decode().split('-')[1]) % 31}".encode()
    assert len(by_partition) == PARTITIONS
    for offsets in by_partition.values():
        assert offsets == list(range(len(offsets)))


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_kafka_python_default_producer(serve: ServeFactory, compression: str | None) -> None:
    server = serve(brokers=3)
    _create(server.bootstrap, "keyed")
    # Defaults: enable_idempotence=True, acks=all (InitProducerId, sequence numbers).
    producer = KafkaProducer(bootstrap_servers=server.bootstrap, compression_type=compression)
    assert producer.config["enable_idempotence"]
    assert producer.config["acks"] == -1
    futures = [
        (f"value-{i}".encode(), producer.send("keyed", key=f"key-{i % 31}".encode(),
                                              value=f"value-{i}".encode()))
        for i in range(RECORDS)
    ]  # fmt: skip
    producer.flush(timeout=60)
    acked = {value: (f.get(30).partition, f.get(30).offset) for value, f in futures}
    producer.close(timeout=30)
    _check(_consume(server.bootstrap, "keyed", RECORDS), acked)


def test_librdkafka_idempotent_producer(serve: ServeFactory) -> None:
    server = serve(brokers=3)
    _create(server.bootstrap, "keyed")
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": server.bootstrap, "enable.idempotence": True, "acks": "all",
         "linger.ms": 5, "compression.type": "gzip"}
    )  # fmt: skip
    acked: dict[bytes, tuple[int, int]] = {}
    failures: list[str] = []

    def delivered(err: object, msg: object) -> None:
        if err is not None:
            failures.append(str(err))
        else:
            acked[msg.value()] = (msg.partition(), msg.offset())  # type: ignore[attr-defined]

    for i in range(RECORDS):
        producer.produce("keyed", key=f"key-{i % 31}".encode(), value=f"value-{i}".encode(),
                         on_delivery=delivered)  # fmt: skip
        producer.poll(0)
    assert producer.flush(60) == 0
    assert failures == []
    _check(_consume(server.bootstrap, "keyed", RECORDS), acked)


def test_aiokafka_idempotent_producer(serve: ServeFactory) -> None:
    server = serve(brokers=3)
    _create(server.bootstrap, "keyed")

    async def produce() -> dict[bytes, tuple[int, int]]:
        producer = aiokafka.AIOKafkaProducer(
            bootstrap_servers=server.bootstrap, enable_idempotence=True, acks="all"
        )
        await producer.start()
        try:
            sent = [
                (value, await producer.send("keyed", key=f"key-{i % 31}".encode(), value=value))
                for i in range(RECORDS)
                for value in [f"value-{i}".encode()]
            ]
            acked = {}
            for value, future in sent:
                metadata = await future
                acked[value] = (metadata.partition, metadata.offset)
            return acked
        finally:
            await producer.stop()

    acked = asyncio.run(produce())
    _check(_consume(server.bootstrap, "keyed", RECORDS), acked)

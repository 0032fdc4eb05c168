"""Transactions across ``coordkit serve --broker-id`` processes (issue 38): three processes, one
broker each, on a shared store; the transaction coordinator of one process sends its markers over
the wire (WriteTxnMarkers v1 through the inter-broker connector) to partition leaders in the
others, and to the group coordinator of the offsets committed with the transaction. A
consume-transform-produce loop over partitions led by all three puts every input record exactly
once in the output and commits the group's offsets with its transactions."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from coordkit.testing.backends import NOT_APPLICABLE, Capability, capabilities_of
from harness.backends import Backend
from serve import test_multiprocess
from serve.test_multiprocess import StartBroker

#: The processes' fixture (one ``coordkit serve --broker-id N`` each).
start_broker = test_multiprocess.start_broker

BROKERS = (1, 2, 3)
RECORDS = 45
TIMEOUT = 30
CONFIGS = ("--config", "transaction.state.log.num.partitions=5",
           "--config", "offsets.topic.num.partitions=5")  # fmt: skip


def test_markers_reach_leaders_in_other_processes(backend: Backend,
                                                  start_broker: StartBroker) -> None:  # fmt: skip
    if Capability.SHARED_ACROSS_PROCESSES not in capabilities_of(backend):
        pytest.skip(f"{NOT_APPLICABLE}: {backend.name} is not shared across processes")
    url = backend.new_url()
    processes = [start_broker(url, b, *CONFIGS) for b in BROKERS]
    bootstrap = ",".join(a for p in processes for a in p.addresses.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, 3, 3) for t in ("input", "output")]).values():
        future.result(TIMEOUT)
    inputs = [f"record-{n:03d}".encode() for n in range(RECORDS)]
    seed = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for n, value in enumerate(inputs):
        seed.produce("input", value=value, partition=n % 3)
    seed.flush(TIMEOUT)

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "copiers",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})  # fmt: skip
    consumer.subscribe(["input"])
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "across"})
    producer.init_transactions(TIMEOUT)
    copied = rounds = 0
    deadline = time.monotonic() + 90
    while copied < RECORDS and time.monotonic() < deadline:
        batch = [m for m in consumer.consume(9, 1.0) if m.error() is None]
        if not batch:
            continue
        producer.begin_transaction()
        for message in batch:
            producer.produce("output", value=message.value().upper(), partition=message.partition())
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(), TIMEOUT)  # fmt: skip
        rounds += 1
        if rounds % 3 == 0:
            producer.abort_transaction(TIMEOUT)
            for tp in consumer.committed(consumer.assignment(), TIMEOUT):
                consumer.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))
            continue
        producer.commit_transaction(TIMEOUT)
        copied += len(batch)
    consumer.close()
    assert copied == RECORDS

    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                       "auto.offset.reset": "earliest", "isolation.level": "read_committed"})  # fmt: skip
    reader.subscribe(["output"])
    output: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline and len(output) < RECORDS:
        message = reader.poll(0.2)
        if message is not None and message.error() is None:
            output.append(message.value())
    time.sleep(2)
    extra = reader.poll(1.0)
    reader.close()
    assert extra is None or extra.error() is not None
    assert sorted(output) == sorted(value.upper() for value in inputs)
    check = Consumer({"bootstrap.servers": bootstrap, "group.id": "copiers"})
    committed = check.committed([TopicPartition("input", p) for p in range(3)], TIMEOUT)
    check.close()
    assert [tp.offset for tp in committed] == [RECORDS // 3] * 3

"""kafka-python's transactions (3.x: ``transactional_id``, ``send_offsets_to_transaction``) and
its read_committed consumer against ``coordkit serve`` (issue 38): a consume-transform-produce
loop with every other transaction aborted puts every input record exactly once in the output, and
the group's committed offsets are the committed transactions'."""

from __future__ import annotations

import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from coordkit.serve.context import ServeSettings
from coordkit.testing.waiting import wait_for
from serve.inprocess import InProcessFactory
from serve.test_replication import _state

SETTINGS = ServeSettings(transaction_state_num_partitions=5)
RECORDS = 30
TIMEOUT = 30


def test_kafka_python_copies_exactly_once(in_process: InProcessFactory) -> None:
    server = in_process(brokers=3, settings=SETTINGS)
    for topic in ("input", "output"):
        server.server.cluster.create_topic(topic, 1, 3)
    wait_for(lambda: all(_state(server, (t, 0)) for t in ("input", "output")), TIMEOUT, "leaders")
    inputs = [f"record-{n:03d}".encode() for n in range(RECORDS)]
    seed = KafkaProducer(bootstrap_servers=server.bootstrap, acks="all")
    for value in inputs:
        seed.send("input", value)
    seed.flush(TIMEOUT)
    seed.close()

    producer = KafkaProducer(bootstrap_servers=server.bootstrap, transactional_id="kp-copy")
    producer.init_transactions()
    consumer = KafkaConsumer("input", bootstrap_servers=server.bootstrap, group_id="kp-copiers",
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             isolation_level="read_committed", max_poll_records=4)  # fmt: skip
    tp = TopicPartition("input", 0)
    copied = rounds = 0
    deadline = time.monotonic() + 60
    while copied < RECORDS and time.monotonic() < deadline:
        batch = consumer.poll(timeout_ms=500).get(tp, [])
        if not batch:
            continue
        producer.begin_transaction()
        for record in batch:
            producer.send("output", record.value.upper())
        offsets = {tp: OffsetAndMetadata(batch[-1].offset + 1, "", -1)}
        producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
        rounds += 1
        if rounds % 2 == 0:
            producer.abort_transaction()
            committed = consumer.committed(tp)
            consumer.seek(tp, committed or 0)
            continue
        producer.commit_transaction()
        copied += len(batch)
    consumer.close()
    producer.close()
    assert copied == RECORDS

    reader = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id=None,
                           auto_offset_reset="earliest", isolation_level="read_committed",
                           consumer_timeout_ms=3_000)  # fmt: skip
    reader.assign([TopicPartition("output", 0)])
    output = [record.value for record in reader]
    reader.close()
    assert sorted(output) == sorted(value.upper() for value in inputs)
    check = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id="kp-copiers")
    assert check.committed(tp) == RECORDS
    check.close()

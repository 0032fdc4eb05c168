"""confluent-kafka's (librdkafka's) transactional producer and read_committed consumer against
``coordkit serve`` (issue 38): a consume-transform-produce loop puts every input record exactly
once into the output, with the consumed offsets committed inside each transaction; aborted
transactions are never read; a second producer of the same ``transactional.id`` fences the first
(a zombie); a transaction left open past its ``transaction.timeout.ms`` is aborted by the
coordinator and its producer fenced."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from coordkit.serve.context import ServeSettings
from serve.inprocess import InProcessFactory, InProcessServer
from serve.test_replication import _state

SETTINGS = ServeSettings(
    transaction_state_num_partitions=5, transaction_abort_timed_out_cleanup_interval_ms=200
)
TIMEOUT = 30


@pytest.fixture
def server(in_process: InProcessFactory) -> InProcessServer:
    started = in_process(brokers=3, settings=SETTINGS)
    for topic in ("input", "output"):
        started.server.cluster.create_topic(topic, 3, 3)
    deadline = time.monotonic() + TIMEOUT
    while not all(_state(started, (t, p)) for t in ("input", "output") for p in range(3)):
        assert time.monotonic() < deadline, "no leaders"
        time.sleep(0.05)
    return started


def _producer(server: InProcessServer, transactional_id: str, **extra: Any) -> Producer:
    producer = Producer({"bootstrap.servers": server.bootstrap,
                         "transactional.id": transactional_id, **extra})  # fmt: skip
    producer.init_transactions(TIMEOUT)
    return producer


def _consumer(server: InProcessServer, group: str, isolation: str = "read_committed") -> Consumer:
    return Consumer({"bootstrap.servers": server.bootstrap, "group.id": group,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "isolation.level": isolation})  # fmt: skip


def _read_all(
    server: InProcessServer, topic: str, expected: int, *, quiet: float = 2.0
) -> list[bytes]:
    """Every value a read_committed consumer of a new group finds in ``topic``: at least
    ``expected`` records, and then nothing more for ``quiet`` seconds."""
    consumer = _consumer(server, f"reader-{time.monotonic_ns()}")
    consumer.subscribe([topic])
    found: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT
    last = time.monotonic()
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                found.append(message.value())
                last = time.monotonic()
            elif len(found) >= expected and time.monotonic() - last > quiet:
                break
    finally:
        consumer.close()
    return found


def test_consume_transform_produce_is_exactly_once(server: InProcessServer) -> None:
    inputs = [f"record-{n:03d}".encode() for n in range(60)]
    seed = Producer({"bootstrap.servers": server.bootstrap, "acks": "all"})
    for value in inputs:
        seed.produce("input", value=value)
    seed.flush(TIMEOUT)

    consumer = _consumer(server, "transformers")
    consumer.subscribe(["input"])
    producer = _producer(server, "transformer-1")
    processed = 0
    round_ = 0
    deadline = time.monotonic() + 60
    while processed < len(inputs) and time.monotonic() < deadline:
        batch = consumer.consume(10, 1.0)
        batch = [m for m in batch if m.error() is None]
        if not batch:
            continue
        producer.begin_transaction()
        for message in batch:
            producer.produce("output", value=message.value().upper())
        positions = consumer.position(consumer.assignment())
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(),
                                             TIMEOUT)  # fmt: skip
        round_ += 1
        if round_ % 3 == 0:
            # Every third transaction is aborted: its records never reach a read_committed
            # reader, and the consumer goes back to the offsets committed before it.
            producer.abort_transaction(TIMEOUT)
            committed = consumer.committed(consumer.assignment(), TIMEOUT)
            for tp in committed:
                consumer.seek(TopicPartition(tp.topic, tp.partition,
                                             tp.offset if tp.offset >= 0 else 0))  # fmt: skip
            continue
        producer.commit_transaction(TIMEOUT)
        processed += len(batch)
    consumer.close()
    assert processed == len(inputs)
    output = _read_all(server, "output", len(inputs))
    assert sorted(output) == sorted(value.upper() for value in inputs)
    # The group's offsets are the transactions' commits: a new member resumes at the end.
    check = _consumer(server, "transformers")
    committed = check.committed([TopicPartition("input", p) for p in range(3)], TIMEOUT)
    ends = [check.get_watermark_offsets(TopicPartition("input", p), TIMEOUT)[1] for p in range(3)]
    check.close()
    # A partition the seed's sticky partitioner left empty has no committed offset (-1001).
    assert [tp.offset if end else max(tp.offset, 0) for tp, end in zip(committed, ends, strict=True)
            ] == ends  # fmt: skip


def test_aborted_records_are_never_read_committed(server: InProcessServer) -> None:
    producer = _producer(server, "aborter")
    producer.begin_transaction()
    for n in range(10):
        producer.produce("output", value=f"aborted-{n}".encode(), partition=n % 3)
    producer.flush(TIMEOUT)
    producer.abort_transaction(TIMEOUT)
    producer.begin_transaction()
    for n in range(5):
        producer.produce("output", value=f"kept-{n}".encode(), partition=n % 3)
    producer.commit_transaction(TIMEOUT)
    assert sorted(_read_all(server, "output", 5)) == [f"kept-{n}".encode() for n in range(5)]
    uncommitted = _consumer(server, "everything", isolation="read_uncommitted")
    uncommitted.subscribe(["output"])
    seen = []
    deadline = time.monotonic() + TIMEOUT
    while len(seen) < 15 and time.monotonic() < deadline:
        message = uncommitted.poll(0.2)
        if message is not None and message.error() is None:
            seen.append(message.value())
    uncommitted.close()
    assert len(seen) == 15  # read_uncommitted reads the aborted records too


def test_a_new_producer_fences_the_zombie(server: InProcessServer) -> None:
    zombie = _producer(server, "shared-id")
    zombie.begin_transaction()
    zombie.produce("output", value=b"zombie", partition=0)
    zombie.flush(TIMEOUT)
    # The new instance's InitProducerId aborts the zombie's open transaction and bumps the epoch.
    successor = _producer(server, "shared-id")
    successor.begin_transaction()
    successor.produce("output", value=b"successor", partition=0)
    successor.commit_transaction(TIMEOUT)
    zombie.produce("output", value=b"late", partition=0)
    with pytest.raises(KafkaException) as caught:
        zombie.commit_transaction(TIMEOUT)
    error: KafkaError = caught.value.args[0]
    assert error.fatal() or error.code() == KafkaError._FENCED
    assert _read_all(server, "output", 1) == [b"successor"]


def test_a_transaction_open_past_its_timeout_is_aborted(server: InProcessServer) -> None:
    producer = _producer(server, "slow", **{"transaction.timeout.ms": 1000})
    producer.begin_transaction()
    producer.produce("output", value=b"too late", partition=1)
    producer.flush(TIMEOUT)
    time.sleep(3)  # the coordinator's sweep (every 200 ms here) aborts it past 1 s
    with pytest.raises(KafkaException):
        producer.commit_transaction(TIMEOUT)
    assert _read_all(server, "output", 0) == []

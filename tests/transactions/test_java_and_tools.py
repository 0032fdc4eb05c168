"""Kafka's Java clients and ``kafka-transactions`` (Kafka 4.4's jars) against ``coordkit serve``
(issue 38): a Java consume-transform-produce loop (``TransactionalCopy.java``: KafkaProducer with a
``transactional.id``, sendOffsetsToTransaction, every third transaction aborted; a read_committed
KafkaConsumer) puts every input record exactly once in the output; ``kafka-transactions`` lists
and describes its transactional id, describes the partition's producers, finds a transaction left
open and aborts it (DescribeProducers, then WriteTxnMarkers to the partition's leader), after
which the last stable offset moves past it.

A missing JDK or jar cache fails the test naming the install (never a skip)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from coordkit.protocol import messages
from coordkit.protocol.records import encode_batch, new_batch
from coordkit.serve.context import ServeSettings
from coordkit.testing.servers.kafka_tools import (
    JVM_OPTIONS,
    KAFKA_KRAFT_VERSION,
    compile_java,
    kafka_tool,
    log4j_option,
    require_java,
    write_log_config,
)
from coordkit.testing.waiting import wait_for
from serve.conftest import RawClient
from serve.inprocess import InProcessFactory, InProcessServer
from serve.test_replication import _state

HERE = Path(__file__).parent
JAVA_SOURCE = HERE / "TransactionalCopy.java"
JAVA_CLASS = "TransactionalCopy"
SETTINGS = ServeSettings(transaction_state_num_partitions=5)
RECORDS = 40
TIMEOUT = 30
WAIT_SECONDS = 60


def java_classpath() -> str:
    """The program's classes (compiled once against Kafka 4.4's jars, cached) and the jars."""
    return compile_java(JAVA_SOURCE, JAVA_CLASS)


@pytest.fixture
def server(in_process: InProcessFactory) -> InProcessServer:
    started = in_process(brokers=3, settings=SETTINGS)
    for topic in ("input", "output"):
        started.server.cluster.create_topic(topic, 3, 3)
    wait_for(lambda: all(_state(started, (t, p)) for t in ("input", "output") for p in range(3)),
             TIMEOUT, "leaders")  # fmt: skip
    return started


def _read_committed(server: InProcessServer, topic: str, expected: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": f"r{time.time_ns()}",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})  # fmt: skip
    consumer.subscribe([topic])
    found: list[bytes] = []
    deadline, last = time.monotonic() + TIMEOUT, time.monotonic()
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                found.append(message.value())
                last = time.monotonic()
            elif len(found) >= expected and time.monotonic() - last > 2:
                break
    finally:
        consumer.close()
    return found


def _tool(server: InProcessServer, *args: str) -> str:
    done = kafka_tool(KAFKA_KRAFT_VERSION, "kafka-transactions", "--bootstrap-server",
                      server.bootstrap, *args)  # fmt: skip
    assert done.returncode == 0, f"kafka-transactions {' '.join(args)}:\n{done.stdout}{done.stderr}"
    return done.stdout


def test_java_clients_copy_exactly_once(server: InProcessServer, tmp_path: Path) -> None:
    inputs = [f"record-{n:03d}".encode() for n in range(RECORDS)]
    seed = Producer({"bootstrap.servers": server.bootstrap, "acks": "all"})
    for value in inputs:
        seed.produce("input", value=value)
    seed.flush(TIMEOUT)
    config = write_log_config(KAFKA_KRAFT_VERSION, tmp_path / "log4j2.properties",
                              log_file=None, level="warn")  # fmt: skip
    done = subprocess.run(
        [require_java(), "-Xmx128m", *JVM_OPTIONS, log4j_option(KAFKA_KRAFT_VERSION, config),
         "-cp", java_classpath(), JAVA_CLASS, server.bootstrap, "java-copy", "java-copiers",
         "input", "output", str(RECORDS)],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"copied {RECORDS}" in done.stdout, done.stdout + done.stderr
    assert "aborted 0" not in done.stdout, "no transaction was aborted"
    output = _read_committed(server, "output", RECORDS)
    assert sorted(output) == sorted(value.upper() for value in inputs)

    listed = _tool(server, "list")
    assert any(line.split()[:1] == ["java-copy"] for line in listed.splitlines()), listed
    described = _tool(server, "describe", "--transactional-id", "java-copy")
    assert "CompleteCommit" in described or "CompleteAbort" in described, described


def _open_transaction(server: InProcessServer, transactional_id: str) -> tuple[int, int]:
    """A transaction left open on ``output``-0 by raw requests: (producer id, first offset)."""
    client = RawClient(server.address(0))
    try:
        Find = messages.FindCoordinatorRequest
        found = wait_for(
            lambda: (a := client.call(Find(key_type=1, coordinator_keys=[transactional_id]), 4)
                     .coordinators[0]).error_code == 0 and a,
            WAIT_SECONDS, "a coordinator")  # fmt: skip
        coordinator = RawClient(server.address(found.node_id))
        request = messages.InitProducerIdRequest(transactional_id=transactional_id,
                                                 transaction_timeout_ms=900_000)  # fmt: skip
        init = wait_for(lambda: (a := coordinator.call(request, 4)).error_code == 0 and a,
                        WAIT_SECONDS, "a producer id")  # fmt: skip
        Add = messages.AddPartitionsToTxnRequest
        coordinator.call(Add(
            v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=init.producer_id,
            v3_and_below_producer_epoch=init.producer_epoch,
            v3_and_below_topics=[Add.AddPartitionsToTxnTopic(name="output", partitions=[0])]), 3)  # fmt: skip
        coordinator.close()
        leader = RawClient(server.address(_state(server, ("output", 0)).leader))
        Produce = messages.ProduceRequest
        batch = encode_batch(new_batch([(None, b"hanging")], producer_id=init.producer_id,
                                       producer_epoch=init.producer_epoch, base_sequence=0,
                                       is_transactional=True))  # fmt: skip
        data = Produce.TopicProduceData(
            name="output", partition_data=[Produce.PartitionProduceData(index=0, records=batch)]
        )
        answer = leader.call(Produce(transactional_id=transactional_id, acks=-1, timeout_ms=10_000,
                                     topic_data=[data]), 9)  # fmt: skip
        leader.close()
        result = answer.responses[0].partition_responses[0]
        assert result.error_code == 0
        return int(init.producer_id), int(result.base_offset)
    finally:
        client.close()


def _last_stable_offset(server: InProcessServer) -> int:
    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "lso",
                         "isolation.level": "read_committed"})  # fmt: skip
    try:
        return int(consumer.get_watermark_offsets(TopicPartition("output", 0), TIMEOUT)[1])
    finally:
        consumer.close()


def test_kafka_transactions_finds_and_aborts_a_hanging_transaction(server: InProcessServer) -> None:
    producer_id, start = _open_transaction(server, "hanging")
    listed = _tool(server, "list")
    assert any(line.split()[:1] == ["hanging"] and "Ongoing" in line
               for line in listed.splitlines()), listed  # fmt: skip
    producers = _tool(server, "describe-producers", "--topic", "output", "--partition", "0")
    assert str(producer_id) in producers, producers
    assert str(start) in producers, producers
    assert _last_stable_offset(server) == start
    _tool(server, "abort", "--topic", "output", "--partition", "0", "--start-offset", str(start))
    wait_for(lambda: _last_stable_offset(server) > start, WAIT_SECONDS,
             "the last stable offset past the aborted transaction")  # fmt: skip
    assert _read_committed(server, "output", 0) == []

"""A Kafka Streams application with exactly-once processing against ``coordkit serve`` (issue 38:
Kafka Streams' exactly-once mode could not run against it): ``StreamsWordCount.java`` (Kafka
4.4's Streams, ``exactly_once_v2``) counts words through a repartition topic and a RocksDB store
with its changelog, on memory, ZooKeeper and Redis.

The first instance is halted (the JVM stopped at once, as by a crash) when half the records are
counted on the output, with more in flight: its open transaction is left for the next instance,
which takes the same state directory and so the same transactional id, fences it (InitProducerId
aborts the transaction) and goes on. Every count on the output, read read_committed, is then
exact: no record counted twice, none lost. Streams creates its internal topics itself
(CreateTopics with their configs), commits offsets in its transactions (TxnOffsetCommit with the
group's member and generation) and reads the changelog back (ListOffsets, Fetch).

Not the default run: ``tox -e py311-transactions``. A missing JDK or jar cache fails the test
naming the install (never a skip)."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from coordkit.testing.servers.kafka_tools import (
    JVM_OPTIONS,
    KAFKA_KRAFT_VERSION,
    compile_java,
    log4j_option,
    require_java,
    write_log_config,
)
from serve.inprocess import InProcessFactory, InProcessServer

HERE = Path(__file__).parent
JAVA_SOURCE = HERE / "StreamsWordCount.java"
JAVA_CLASS = "StreamsWordCount"
WORDS = 5
RECORDS = 400
TIMEOUT = 30
#: A Streams instance's heap (RocksDB keeps its blocks off the heap).
JAVA_HEAP = "256m"
RUN_SECONDS = 300


def _create_topics(server: InProcessServer) -> None:
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    topics = [NewTopic(name, 3, 3) for name in ("words", "counts")]
    for future in admin.create_topics(topics).values():
        future.result(TIMEOUT)


def _produce_words(server: InProcessServer) -> None:
    producer = Producer({"bootstrap.servers": server.bootstrap, "acks": "all",
                         "enable.idempotence": True})  # fmt: skip
    for n in range(RECORDS):
        producer.produce("words", key=f"k{n % 7}", value=f"w{n % WORDS}")
    assert producer.flush(TIMEOUT) == 0


def _run(server: InProcessServer, state: Path, total: int, ending: str, logs: Path) -> str:
    """One application instance until ``total`` counts are on the output: its stdout."""
    config = write_log_config(KAFKA_KRAFT_VERSION, logs / f"log4j2-{ending}.properties",
                              log_file=logs / f"streams-{ending}.log", level="info")  # fmt: skip
    done = subprocess.run(
        [require_java(), f"-Xmx{JAVA_HEAP}", *JVM_OPTIONS, log4j_option(KAFKA_KRAFT_VERSION, config),
         "-cp", compile_java(JAVA_SOURCE, JAVA_CLASS), JAVA_CLASS, server.bootstrap, str(state),
         str(total), ending],
        capture_output=True, text=True, timeout=RUN_SECONDS, check=False,
    )  # fmt: skip
    assert done.returncode == 0, (
        f"the {ending} instance ended with {done.returncode}:\n{done.stdout}\n{done.stderr}\n"
        f"(its log: {logs / f'streams-{ending}.log'})"
    )
    assert "RUNNING" in done.stdout, done.stdout
    return done.stdout


def _latest_counts(server: InProcessServer) -> dict[str, int]:
    """Each word's latest count on ``counts``, read_committed from the start."""
    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": f"c{uuid.uuid4()}",
                         "isolation.level": "read_committed", "enable.partition.eof": True})  # fmt: skip
    consumer.assign([TopicPartition("counts", p, 0) for p in range(3)])
    latest: dict[str, int] = {}
    at_end: set[int] = set()
    try:
        while at_end != {0, 1, 2}:
            message = consumer.poll(TIMEOUT)
            assert message is not None, f"nothing more on counts after {latest}"
            if message.error() is not None:
                at_end.add(message.partition())
                continue
            latest[message.key().decode()] = int(message.value().decode())
    finally:
        consumer.close()
    return latest


def test_a_streams_application_counts_exactly_once_across_a_crash(
    in_process: InProcessFactory, tmp_path: Path
) -> None:
    server = in_process(brokers=3)
    _create_topics(server)
    _produce_words(server)
    state = tmp_path / "state"
    halted = _run(server, state, RECORDS // 2, "halt", tmp_path)
    assert "counts " in halted, halted
    closed = _run(server, state, RECORDS, "close", tmp_path)
    expected = {f"w{n}": RECORDS // WORDS for n in range(WORDS)}
    # The application's own read_committed view, and a consumer's of every record on the output.
    assert f"counts {expected}".replace("'", "").replace(": ", "=") in closed, closed
    assert _latest_counts(server) == expected

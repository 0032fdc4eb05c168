"""The client side of :mod:`serve.workers`: run as ``python clients.py consume|produce
SETTINGS-JSON``, one real client (kafka-python, aiokafka or librdkafka through confluent-kafka)
in a process of its own, printing what it does one line at a time (see :mod:`serve.workers` for
the lines). Only the standard library and the client are imported here."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

#: Short sessions so that a killed member is noticed in seconds, and metadata refreshed often
#: so that moved leaders are found at once.
SESSION_MS = 3_000
HEARTBEAT_MS = 500
MAX_POLL_MS = 10_000
METADATA_MAX_AGE_MS = 1_000
#: Seconds a client may take to flush or close.
STOP_SECONDS = 60

_print_lock = threading.Lock()


def _say(*words: object) -> None:
    line = " ".join(str(w) for w in words) + "\n"
    with _print_lock:  # one write per line: a process killed meanwhile leaves no half line
        sys.stdout.write(line)
        sys.stdout.flush()


def _error(exc: object) -> str:
    """An error on one line: its type and message."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}:{text}" if text else type(exc).__name__


class _Book:
    """A member's partitions and the offsets it read but has not committed yet."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.owned: set[int] = set()
        self.pending: dict[int, int] = {}
        #: partition → the offset after the last record read since it was assigned.
        self.position: dict[int, int] = {}

    def assign(self, partitions: Any) -> None:
        self.owned |= set(partitions)
        self._show()

    def revoke(self, partitions: Any) -> None:
        for partition in partitions:
            self.owned.discard(partition)
            self.pending.pop(partition, None)
            self.position.pop(partition, None)
        self._show()

    def _show(self) -> None:
        _say("assigned", *(f"{self.topic}:{p}" for p in sorted(self.owned)))

    def read(self, partition: int, offset: int, value: bytes) -> None:
        _say("record", partition, offset, value.decode())
        self.pending[partition] = self.position[partition] = offset + 1

    def to_commit(self) -> dict[int, int]:
        return {p: n for p, n in self.pending.items() if p in self.owned}

    def committed(self, offsets: dict[int, int]) -> None:
        for partition, offset in offsets.items():
            if self.pending.get(partition) == offset:
                del self.pending[partition]
        if offsets:
            _say("committed", *(f"{p}:{n}" for p, n in sorted(offsets.items())))

    def failed(self, exc: object) -> None:
        _say("commit-failed", _error(exc))


def _consume_kafka_python(conf: dict[str, Any], book: _Book, stop: threading.Event) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            book.revoke(tp.partition for tp in revoked)

        def on_partitions_assigned(self, assigned: Any) -> None:
            book.assign(tp.partition for tp in assigned)

    consumer = KafkaConsumer(**_member_settings(conf), reconnect_backoff_max_ms=1_000)
    consumer.subscribe([book.topic], listener=Listener())

    def commit() -> None:
        offsets = book.to_commit()
        if offsets:
            try:
                consumer.commit(
                    {TopicPartition(book.topic, p): OffsetAndMetadata(n, "", -1)
                     for p, n in offsets.items()}
                )  # fmt: skip
            except Exception as exc:
                book.failed(exc)
            else:
                book.committed(offsets)

    while not stop.is_set():
        for records in consumer.poll(200).values():
            for r in records:
                book.read(r.partition, r.offset, r.value)
        commit()
    commit()
    consumer.close()


def _member_settings(conf: dict[str, Any]) -> dict[str, Any]:
    """What kafka-python's and aiokafka's group members are given alike."""
    return {
        "bootstrap_servers": conf["bootstrap"],
        "group_id": conf["group"],
        "client_id": conf["name"],
        "auto_offset_reset": "earliest",
        "enable_auto_commit": False,
        "session_timeout_ms": SESSION_MS,
        "heartbeat_interval_ms": HEARTBEAT_MS,
        "max_poll_interval_ms": MAX_POLL_MS,
        "metadata_max_age_ms": METADATA_MAX_AGE_MS,
        "retry_backoff_ms": 100,
    }


async def _consume_aiokafka(conf: dict[str, Any], book: _Book, stop: threading.Event) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        async def on_partitions_revoked(self, revoked: Any) -> None:
            book.revoke(tp.partition for tp in revoked)

        async def on_partitions_assigned(self, assigned: Any) -> None:
            book.assign(tp.partition for tp in assigned)

    consumer = AIOKafkaConsumer(**_member_settings(conf))
    consumer.subscribe([book.topic], listener=Listener())
    await consumer.start()

    async def commit() -> None:
        offsets = book.to_commit()
        if offsets:
            try:
                await consumer.commit(
                    {TopicPartition(book.topic, p): n for p, n in offsets.items()}
                )
            except Exception as exc:
                book.failed(exc)
            else:
                book.committed(offsets)

    try:
        while not stop.is_set():
            batch = await consumer.getmany(timeout_ms=200)
            for records in batch.values():
                for r in records:
                    book.read(r.partition, r.offset, r.value)
            await commit()
        await commit()
    finally:
        await consumer.stop()


def _consume_confluent(conf: dict[str, Any], book: _Book, stop: threading.Event) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    settings = {
        "bootstrap.servers": conf["bootstrap"], "group.id": conf["group"],
        "client.id": conf["name"], "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": HEARTBEAT_MS,
        "max.poll.interval.ms": MAX_POLL_MS,
        "topic.metadata.refresh.interval.ms": METADATA_MAX_AGE_MS,
        "retry.backoff.ms": 100, "reconnect.backoff.max.ms": 1_000,
        "partition.assignment.strategy": conf["assignors"] or "range,roundrobin",
    }  # fmt: skip
    if os.environ.get("COORDKIT_TEST_RDKAFKA_DEBUG"):  # librdkafka's debug contexts, to stderr
        settings["debug"] = os.environ["COORDKIT_TEST_RDKAFKA_DEBUG"]
    consumer = Consumer(settings)

    # Eager protocols: everything is revoked, then everything assigned; cooperative-sticky:
    # only what moves. confluent-kafka assigns (or incrementally assigns) after the callback.
    def on_assign(_consumer: Any, parts: Any) -> None:
        book.assign(p.partition for p in parts)

    def on_revoke(_consumer: Any, parts: Any) -> None:
        book.revoke(p.partition for p in parts)

    consumer.subscribe([book.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)

    def commit() -> None:
        offsets = book.to_commit()
        if not offsets:
            return
        try:
            answer = consumer.commit(
                offsets=[TopicPartition(book.topic, p, n) for p, n in offsets.items()],
                asynchronous=False,
            )
        except KafkaException as exc:
            book.failed(exc)
            return
        done = {tp.partition: tp.offset for tp in answer if tp.error is None}
        for tp in answer:
            if tp.error is not None:
                book.failed(tp.error)
        book.committed(done)

    while not stop.is_set():
        sought: set[int] = set()
        records: list[Any] = consumer.consume(100, 0.2)
        for r in records:
            partition, offset = r.partition(), r.offset()
            if r.error() is not None or partition in sought:
                continue
            expected = book.position.get(partition, offset)
            if offset > expected:
                # librdkafka (2.16) skipped records it had fetched: when a metadata update
                # comes while it validates its position after a leader epoch bump (KIP-320),
                # it compares the answer with the position it fetched up to since, sees a
                # truncation that is not there and seeks, dropping the records not handed over
                # yet. Offsets are dense here (no compaction, no transactions): read them again.
                _say("refetch", partition, expected, offset)
                try:
                    consumer.seek(TopicPartition(book.topic, partition, expected))
                except KafkaException as exc:  # left to the test, which sees the skip
                    _say("refetch-failed", _error(exc))
                else:
                    sought.add(partition)
                    continue
            book.read(partition, offset, r.value())
        commit()
    commit()
    consumer.close()


def _produce_kafka_python(conf: dict[str, Any], stop: threading.Event) -> int:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=conf["bootstrap"], acks="all", linger_ms=5, retry_backoff_ms=100,
        request_timeout_ms=10_000, delivery_timeout_ms=30_000, max_block_ms=10_000,
        metadata_max_age_ms=METADATA_MAX_AGE_MS, reconnect_backoff_max_ms=1_000,
    )  # fmt: skip
    sent = 0
    for key, value in _records(conf, stop):
        try:
            future = producer.send(conf["topic"], key=key, value=value.encode())
        except Exception as exc:
            _say("failed", value, _error(exc))
        else:
            future.add_callback(lambda md, v=value: _say("acked", v, md.partition, md.offset))
            future.add_errback(lambda exc, v=value: _say("failed", v, _error(exc)))
        sent += 1
        stop.wait(conf["pace"])
    producer.flush(timeout=STOP_SECONDS)
    producer.close(timeout=STOP_SECONDS)
    return sent


async def _produce_aiokafka(conf: dict[str, Any], stop: threading.Event) -> int:
    import asyncio

    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(
        bootstrap_servers=conf["bootstrap"], acks="all", linger_ms=5, retry_backoff_ms=100,
        request_timeout_ms=15_000, metadata_max_age_ms=METADATA_MAX_AGE_MS,
    )  # fmt: skip
    await producer.start()

    def report(value: str, future: Any) -> None:
        if future.cancelled():
            _say("failed", value, "cancelled")
        elif future.exception() is not None:
            _say("failed", value, _error(future.exception()))
        else:
            md = future.result()
            _say("acked", value, md.partition, md.offset)

    sent = 0
    try:
        for key, value in _records(conf, stop):
            try:
                future = await producer.send(conf["topic"], key=key, value=value.encode())
            except Exception as exc:
                _say("failed", value, _error(exc))
            else:
                future.add_done_callback(lambda f, v=value: report(v, f))
            sent += 1
            await asyncio.sleep(conf["pace"])
        await producer.flush()
    finally:
        await producer.stop()
    return sent


def _produce_confluent(conf: dict[str, Any], stop: threading.Event) -> int:
    from confluent_kafka import Producer

    producer = Producer({
        "bootstrap.servers": conf["bootstrap"], "acks": "all", "linger.ms": 5,
        "message.timeout.ms": 30_000, "request.timeout.ms": 10_000, "retry.backoff.ms": 100,
        "topic.metadata.refresh.interval.ms": METADATA_MAX_AGE_MS,
        "reconnect.backoff.max.ms": 1_000,
    })  # fmt: skip

    def report(err: Any, msg: Any) -> None:
        value = msg.value().decode()
        if err is not None:
            _say("failed", value, _error(err))
        else:
            _say("acked", value, msg.partition(), msg.offset())

    sent = 0
    for key, value in _records(conf, stop):
        while True:
            try:
                producer.produce(conf["topic"], key=key, value=value.encode(), on_delivery=report)
                break
            except BufferError:  # the local queue is full: serve deliveries, then again
                producer.poll(0.1)
        sent += 1
        producer.poll(0)  # serves the deliveries that came meanwhile
        stop.wait(conf["pace"])
    left = producer.flush(STOP_SECONDS)
    if left:
        _say("failed", "-", f"{left} records still queued after the flush")
    return sent


def _records(conf: dict[str, Any], stop: threading.Event) -> Iterator[tuple[bytes, str]]:
    """``(key, value)`` of record ``i`` = 0, 1, ...: ``count`` of them (0: until SIGTERM); values
    are ``<prefix><i>``, unique across the producers of a test. The caller keeps the pace."""
    i = 0
    while not stop.is_set() and (conf["count"] == 0 or i < conf["count"]):
        yield f"key-{i % 29}".encode(), f"{conf['prefix']}{i}"
        i += 1


def _main(role: str, conf: dict[str, Any]) -> None:
    import asyncio
    import logging

    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    client = conf["client"]
    if role == "consume":
        book = _Book(conf["topic"])
        if client == "kafka-python":
            _consume_kafka_python(conf, book, stop)
        elif client == "aiokafka":
            asyncio.run(_consume_aiokafka(conf, book, stop))
        else:
            _consume_confluent(conf, book, stop)
        _say("closed")
    else:
        if client == "kafka-python":
            sent = _produce_kafka_python(conf, stop)
        elif client == "aiokafka":
            sent = asyncio.run(_produce_aiokafka(conf, stop))
        else:
            sent = _produce_confluent(conf, stop)
        _say("flushed", sent)


if __name__ == "__main__":
    _main(sys.argv[1], json.loads(sys.argv[2]))

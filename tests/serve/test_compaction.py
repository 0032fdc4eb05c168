"""Compacted topics served (#35 item 3): a topic created by kafka-python's admin client with
``cleanup.policy=compact``, many updates of each key produced by kafka-python, every broker's
cleaner run on its own replica, then a consumer reading from the start sees exactly the latest
value of every key at the offset it was acknowledged at; tombstones stay until
``delete.retention.ms`` and go after it; a record without key is refused as Kafka refuses it.
(The cleaner on a log and its files: test_log_cleaner.py. The same records on Kafka 4.4:
tests/differential/scenarios/compaction.py.)"""

from __future__ import annotations

from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import InvalidRecordError

from coordkit.protocol.records import decode_batches
from coordkit.serve.broker_config import parse_broker_configs
from coordkit.testing.waiting import wait_for
from serve.inprocess import InProcessFactory, InProcessServer, in_process_fixture  # noqa: F401

TOPIC = "profiles"
KEYS = 20
ROUNDS = 12
DELETED = (b"key-03", b"key-11")
#: Segments of a few dozen batches, so that most of the log is in inactive segments.
CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": "2000",
    "min.cleanable.dirty.ratio": "0.01",
}


def _produce(
    bootstrap: str, rounds: range, *, tombstones: bool = False, skip: tuple[bytes, ...] = ()
) -> dict[bytes, tuple[int, bytes | None]]:
    """``rounds`` updates of every key but ``skip`` (then tombstones of DELETED): each key's
    last ``(offset, value)`` as acknowledged."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    sent: list[tuple[bytes, bytes | None, Any]] = []
    for round_ in rounds:
        for k in range(KEYS):
            key, value = f"key-{k:02d}".encode(), f"value-{round_:02d}-{k:02d}".encode()
            if key in skip:
                continue
            sent.append((key, value, producer.send(TOPIC, key=key, value=value)))
        producer.flush(timeout=30)
    if tombstones:
        sent += [(key, None, producer.send(TOPIC, key=key, value=None)) for key in DELETED]
    producer.flush(timeout=30)
    latest = {key: (future.get(timeout=30).offset, value) for key, value, future in sent}
    producer.close(timeout=30)
    return latest


def _consume(bootstrap: str) -> list[tuple[int, bytes, bytes | None]]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=3_000)  # fmt: skip
    consumer.assign([TopicPartition(TOPIC, 0)])
    read = [(r.offset, r.key, r.value) for r in consumer]
    consumer.close()
    return read


def _clean_every_broker(server: InProcessServer) -> int:
    """Each broker's log cleaner, one pass (once every replica has the leader's records)."""

    def ends() -> set[tuple[int, int]]:
        logs = [server.context(b).logs.find((TOPIC, 0)) for b in range(3)]
        return {
            (log.log_end, server.replicas.high_watermark((TOPIC, 0), log)) for log in logs if log
        }

    wait_for(lambda: len(ends()) == 1, 30, "every replica to have the leader's records")
    cleaned: int = server.on_loop(lambda: sum(m.clean_logs() for m in server.server.log_managers))
    return cleaned


def _replicas(server: InProcessServer) -> list[list[tuple[int, bytes | None, bytes | None]]]:
    """Each broker's records of the partition, in offset order."""

    def read() -> list[list[tuple[int, bytes | None, bytes | None]]]:
        found = []
        for broker in range(3):
            log = server.context(broker).logs.get((TOPIC, 0))
            data = log.read(log.log_start, 1 << 30)
            found.append(
                [(r.offset, r.key, r.value) for b in decode_batches(data) for r in b.records]
            )
        return found

    replicas: list[list[tuple[int, bytes | None, bytes | None]]] = server.on_loop(read)
    return replicas


def test_a_consumer_from_the_start_sees_the_latest_value_of_every_key(
    in_process: InProcessFactory,
) -> None:
    server = in_process(brokers=3)
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=30_000)
    admin.create_topics(
        [NewTopic(TOPIC, 1, 3, topic_configs={**CONFIGS, "delete.retention.ms": "0"})]
    )
    admin.close()
    latest = _produce(server.bootstrap, range(ROUNDS), tombstones=True)
    # Two rounds more, so that the tombstones are out of the active segment.
    latest.update(_produce(server.bootstrap, range(ROUNDS, ROUNDS + 2), skip=DELETED))
    produced = (ROUNDS + 2) * KEYS
    assert _clean_every_broker(server) == 3  # each broker cleaned its own replica

    read = _consume(server.bootstrap)
    assert len(read) < produced / 2
    by_key: dict[bytes, tuple[int, bytes | None]] = {}
    for offset, key, value in read:
        by_key[key] = (offset, value)
    # Every key once, at its latest offset, with its latest value; the tombstones still there.
    assert by_key == latest
    # Below the active segment (never cleaned), each key once.
    active_base = server.on_loop(lambda: server.context(0).logs.get((TOPIC, 0)).active.base_offset)
    cleaned = [key for offset, key, _value in read if offset < active_base]
    assert len(cleaned) == len(set(cleaned))
    assert active_base > produced / 2
    # Every replica was cleaned by its own broker to the same records.
    leader, *followers = _replicas(server)
    assert all(replica == leader for replica in followers)

    # More updates; the next cleaning is past the tombstones' delete horizon (0 ms): gone.
    later = _produce(server.bootstrap, range(ROUNDS + 2, 2 * ROUNDS), skip=DELETED)
    _clean_every_broker(server)
    read = _consume(server.bootstrap)
    assert {key: (offset, value) for offset, key, value in read} == later
    assert not any(key in DELETED for _o, key, _v in read)


def test_a_tombstone_stays_before_delete_retention_ms(in_process: InProcessFactory) -> None:
    server = in_process(brokers=3)
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=30_000)
    admin.create_topics([NewTopic(TOPIC, 1, 3, topic_configs=CONFIGS)])  # a day's retention
    admin.close()
    first = _produce(server.bootstrap, range(ROUNDS), tombstones=True)
    _produce(server.bootstrap, range(ROUNDS, ROUNDS + 2), skip=DELETED)
    _clean_every_broker(server)
    later = _produce(server.bootstrap, range(ROUNDS + 2, 2 * ROUNDS), skip=DELETED)
    _clean_every_broker(server)
    read = {key: (offset, value) for offset, key, value in _consume(server.bootstrap)}
    for key in DELETED:
        assert read[key] == first[key]  # the tombstone, at its offset
        assert read[key][1] is None
    assert {k: v for k, v in read.items() if k not in DELETED} == {
        k: v for k, v in later.items() if k not in DELETED
    }


def test_a_record_without_key_is_refused(in_process: InProcessFactory) -> None:
    server = in_process(brokers=1)
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=30_000)
    admin.create_topics([NewTopic(TOPIC, 1, 1, topic_configs=CONFIGS)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=server.bootstrap, acks=1, retries=0)
    with pytest.raises(InvalidRecordError):
        producer.send(TOPIC, value=b"no key").get(timeout=30)
    assert producer.send(TOPIC, key=b"k", value=b"v").get(timeout=30).offset == 0
    producer.close(timeout=30)


def test_each_broker_cleans_every_log_cleaner_backoff_ms(in_process: InProcessFactory) -> None:
    """No pass asked for: the brokers' log managers clean at ``log.cleaner.backoff.ms``."""
    settings = parse_broker_configs(["log.cleaner.backoff.ms=100"]).serve_settings()
    server = in_process(brokers=3, settings=settings)
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=30_000)
    admin.create_topics([NewTopic(TOPIC, 1, 3, topic_configs=CONFIGS)])
    admin.close()
    latest = _produce(server.bootstrap, range(ROUNDS))

    def cleaned() -> bool:
        return all(len(replica) < ROUNDS * KEYS / 2 for replica in _replicas(server))

    wait_for(cleaned, 30, "every replica's cleaner to clean the topic")
    assert {key: (offset, value) for offset, key, value in _consume(server.bootstrap)} == latest

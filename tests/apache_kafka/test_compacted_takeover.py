"""A compacted log coordkit's cleaner cleaned, taken over by Kafka 3.9 (#35 item 3): a
``coordkit serve --broker-id 1 --data-dir DIR`` process gets a topic with
``cleanup.policy=compact``, many updates of each key and a tombstone, and cleans it (its batches
with gaps between their offsets, emptied batches, a delete horizon, Kafka's ``.cleaned``/``.swap``
swaps, ``cleaner-offset-checkpoint``); then a Kafka 3.9 broker of the same id, on the same chroot
and directory, serves exactly the records coordkit served, at their offsets, and its own cleaner
goes on from coordkit's checkpoint: more updates written to Kafka are cleaned by Kafka, and a
consumer from the start sees each key's latest value. Run by py311-mixed with the mixed clusters
(marked slow: out of the default run's budget)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from coordkit.serve.dataplane import kafka_files
from coordkit.testing.servers import KafkaCluster, StandaloneZooKeeper
from coordkit.testing.waiting import wait_for
from serve.conftest import ServeProcess

pytestmark = pytest.mark.slow

CHROOT = "/compacted"
TOPIC = "profiles"
KEYS = 10
ROUNDS = 10
DELETED = b"key-03"
CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": "1500",
    "min.cleanable.dirty.ratio": "0.01",
}
WAIT_SECONDS = 60

Records = list[tuple[int, bytes, bytes | None]]


Latest = dict[bytes, tuple[int, bytes | None]]


def _produce(bootstrap: str, rounds: range, *, tombstone: bool = False) -> Latest:
    """Updates of every key (``DELETED`` only until its tombstone): each key's last
    ``(offset, value)`` as acknowledged."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    sent = []
    for round_ in rounds:
        for k in range(KEYS):
            key = f"key-{k:02d}".encode()
            if key == DELETED and not tombstone and round_ >= ROUNDS:
                continue
            value = f"value-{round_:02d}-{k:02d}".encode()
            sent.append((key, value, producer.send(TOPIC, key=key, value=value)))
        producer.flush(timeout=30)
    if tombstone:
        sent.append((DELETED, None, producer.send(TOPIC, key=DELETED, value=None)))
    producer.flush(timeout=30)
    latest = {key: (future.get(timeout=30).offset, value) for key, value, future in sent}
    producer.close(timeout=30)
    return latest


def _read_all(bootstrap: str) -> Records:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=3_000)  # fmt: skip
    try:
        consumer.assign([TopicPartition(TOPIC, 0)])
        return [(r.offset, r.key, r.value) for r in consumer]
    finally:
        consumer.close()


def _latest(records: Records) -> Latest:
    return {key: (offset, value) for offset, key, value in records}


def test_kafka_serves_and_cleans_on_what_coordkits_cleaner_left(
    zookeeper: StandaloneZooKeeper, tmp_path: Path
) -> None:
    url = f"zookeeper://{zookeeper.hosts}{CHROOT}"
    data_dir = tmp_path / "logs"
    server = ServeProcess(["--store", url, "--port", "0", "--data-dir", str(data_dir),
                           "--broker-id", "1", "--config", "log.cleaner.backoff.ms=100"])  # fmt: skip
    try:
        admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=30_000)
        admin.create_topics([NewTopic(TOPIC, 1, 1, topic_configs=CONFIGS)])
        admin.close()
        latest = _produce(server.bootstrap, range(ROUNDS), tombstone=True)
        # Two rounds more, so that the tombstone is cleaned too (out of the active segment).
        latest.update(_produce(server.bootstrap, range(ROUNDS, ROUNDS + 2)))
        written = (ROUNDS + 2) * KEYS
        wait_for(lambda: len(_read_all(server.bootstrap)) < written / 2, WAIT_SECONDS,
                 "coordkit's cleaner to clean the topic")  # fmt: skip
        served = _read_all(server.bootstrap)
        assert _latest(served) == latest
        assert latest[DELETED][1] is None
    finally:
        status, _out, err = server.stop()
        assert status == 0, err
    broker_dir = data_dir / "broker-1"
    checkpoint = (broker_dir / kafka_files.CLEANER_OFFSETS).read_text()
    assert re.search(rf"^{TOPIC} 0 [1-9][0-9]*$", checkpoint, re.MULTILINE), checkpoint

    kafka = KafkaCluster(zookeeper=zookeeper.hosts, chroot=CHROOT, broker_ids=(1,),
                         log_dirs={1: broker_dir},
                         properties={"log.cleaner.backoff.ms": "500"})  # fmt: skip
    with kafka:
        wait_for(lambda: _read_all(kafka.bootstrap) == served, WAIT_SECONDS,
                 "Kafka 3.9 to serve the records coordkit served, at their offsets")  # fmt: skip
        later = _produce(kafka.bootstrap, range(ROUNDS + 2, 2 * ROUNDS + 2))
        rewritten = ROUNDS * (KEYS - 1)
        expected = {**latest, **later}

        def cleaned_by_kafka() -> bool:
            found = _read_all(kafka.bootstrap)
            return _latest(found) == expected and len(found) < len(served) + rewritten / 2

        wait_for(cleaned_by_kafka, WAIT_SECONDS, "Kafka's cleaner to clean the updates")
        complaints = [line for line in kafka.node(1).log_since_start().splitlines()
                      if re.match(r"^\[[^]]+\] ERROR ", line) and TOPIC in line]  # fmt: skip
        assert complaints == []

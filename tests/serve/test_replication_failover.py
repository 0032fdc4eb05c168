"""A broker that leads partitions crashes while kafka-python's default producer (idempotent,
acks=all) writes: leaders move, the producer carries on, and every acknowledged record is read
back, once. And a follower of a new leader cuts what that leader does not have."""

from __future__ import annotations

import threading
import time
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from coordkit.engine.states import TP
from coordkit.testing.waiting import wait_for
from serve.inprocess import InProcessFactory, in_process_fixture  # noqa: F401
from serve.test_replication import (
    ListOffsets,
    _fetch,
    _latest,
    _produce,
    _replica_bytes,
    _state,
    _topic,
    _values,
)

RECORDS = 2_000
PARTITIONS = 3


def _leaders(server: Any) -> dict[TP, int]:
    return {("failover", p): _state(server, ("failover", p)).leader for p in range(PARTITIONS)}


def test_a_leader_crash_loses_no_acknowledged_record(in_process: InProcessFactory) -> None:
    server = in_process(brokers=3)
    _topic(server, "failover", PARTITIONS, 3)
    producer = KafkaProducer(bootstrap_servers=server.bootstrap, linger_ms=2,
                             request_timeout_ms=10_000, retry_backoff_ms=50)  # fmt: skip
    acked: dict[bytes, tuple[int, int]] = {}
    failed: list[BaseException] = []
    lock = threading.Lock()

    def on_ack(value: bytes) -> Any:
        def record(metadata: Any) -> None:
            with lock:
                acked[value] = (metadata.partition, metadata.offset)

        return record

    def send_all() -> None:
        for i in range(RECORDS):
            value = f"value-{i}".encode()
            future = producer.send("failover", key=f"key-{i % 29}".encode(), value=value)
            future.add_callback(on_ack(value)).add_errback(failed.append)
            time.sleep(0.001)

    sender = threading.Thread(target=send_all)
    sender.start()
    wait_for(lambda: len(acked) >= RECORDS // 4, 60, "a quarter of the records acknowledged")
    victim = _leaders(server)[("failover", 0)]
    before = len(acked)
    server.server.stop_broker(victim)
    sender.join(120)
    producer.flush(timeout=60)
    producer.close(timeout=30)
    assert failed == []
    assert before < RECORDS
    assert len(acked) == RECORDS
    # The partitions the victim led have new leaders among the survivors.
    assert all(leader != victim for leader in _leaders(server).values())

    survivors = ",".join(server.address(b) for b in range(3) if b != victim)
    consumer = KafkaConsumer(bootstrap_servers=survivors, group_id=None,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=3_000)  # fmt: skip
    consumer.assign([TopicPartition("failover", p) for p in range(PARTITIONS)])
    consumed = [(r.value, (r.partition, r.offset)) for r in consumer]
    consumer.close()
    # Every acknowledged record, where it was acknowledged, and nothing twice.
    assert len(consumed) == len(dict(consumed)) == RECORDS
    assert dict(consumed) == acked


def test_a_follower_cuts_what_the_new_leader_does_not_have(
    in_process: InProcessFactory, raw_client: Any
) -> None:
    server = in_process(brokers=3)
    # Replicas in election order: broker 0 leads, broker 1 is next in line, broker 2 last.
    server.server.cluster.create_topic("cut", 1, 3, assignment={0: [0, 1, 2]})
    tp = ("cut", 0)
    wait_for(lambda: _state(server, tp) is not None, 30, "a leader")
    assert _state(server, tp).leader == 0
    old = raw_client(server.address(0))
    assert _produce(old, tp, b"committed").error_code == 0  # acks=all: on every replica
    server.replicas.pause(1)
    assert _produce(old, tp, b"only on 0 and 2", acks=1).error_code == 0
    wait_for(lambda: _replica_bytes(server, tp, 2)[0] == 2, 10, "broker 2 to copy it")
    assert _replica_bytes(server, tp, 1)[0] == 1
    server.server.stop_broker(0)
    wait_for(lambda: _state(server, tp).leader == 1, 30, "broker 1 to lead")
    server.replicas.resume(1)
    new = raw_client(server.address(1))
    answer = _produce(new, tp, b"after failover")
    assert (answer.error_code, answer.base_offset) == (0, 1)
    # Broker 2 cut the record the new leader never had (acks=1: never promised) and copied on.
    assert _replica_bytes(server, tp, 2) == _replica_bytes(server, tp, 1)
    assert _values(_fetch(new, tp).records) == [b"committed", b"after failover"]


def test_a_new_leader_behind_its_epoch_start_answers_offset_not_available(
    in_process: InProcessFactory, raw_client: Any
) -> None:
    """A new leader whose high watermark lags the start of its epoch (a follower still in its
    ISR has not copied what it has) answers a consumer's ListOffsets LATEST with
    OFFSET_NOT_AVAILABLE, as Kafka's ``Partition.fetchOffsetForTimestamp``: the offset it would
    give could be below what the old leader told (the high watermark going back); once the
    follower has copied, the answer is the new high watermark."""
    server = in_process(brokers=3)
    server.server.cluster.create_topic("lag", 1, 3, assignment={0: [0, 1, 2]})
    tp = ("lag", 0)
    wait_for(lambda: _state(server, tp) is not None, 30, "a leader")
    old = raw_client(server.address(0))
    assert _produce(old, tp, b"committed").error_code == 0  # acks=all: on every replica
    server.replicas.pause(2)
    assert _produce(old, tp, b"not yet on 2", acks=1).error_code == 0
    wait_for(lambda: _replica_bytes(server, tp, 1)[0] == 2, 10, "broker 1 to copy it")
    server.server.stop_broker(0)
    wait_for(lambda: _state(server, tp).leader == 1, 30, "broker 1 to lead")
    new = raw_client(server.address(1))
    request = ListOffsets(replica_id=-1, topics=[ListOffsets.ListOffsetsTopic(
        name=tp[0], partitions=[ListOffsets.ListOffsetsPartition(partition_index=0,
                                                                timestamp=-1)])])  # fmt: skip
    answer = new.call(request, 7).topics[0].partitions[0]
    assert (answer.error_code, answer.offset) == (78, -1)  # OFFSET_NOT_AVAILABLE
    server.replicas.resume(2)
    wait_for(lambda: _latest(new, tp) == 2, 30, "the new leader's high watermark to reach 2")

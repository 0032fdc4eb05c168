"""Share consumption beside Kafka 4.4 (issue 37): ``python tests/benchmarks/run.py share_fetch
[--quick]``.

One ``coordkit serve`` broker (memory store) and one Kafka 4.4 KRaft node, side by side in one
run: a topic of three partitions holding N records of 100 bytes, then one confluent-kafka
``ShareConsumer`` (explicit acknowledgements, every record accepted, committed after each poll)
reads them all. Reported per side: records/s from the first poll to the last record, the
deliveries past the first (none expected), and coordkit's figure over Kafka's. A figure, never
an assertion.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from coordkit.testing.servers import KafkaCluster
from coordkit.testing.servers.ports import free_port

HERE = Path(__file__).parent
TOPIC = "bench-share"
GROUP = "bench-share"
PARTITIONS = 3
KAFKA_PROPERTIES = {
    "offsets.topic.replication.factor": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
}


def prepare(bootstrap: str, records: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(60)
    earliest = ConfigResource(ResourceType.GROUP, GROUP, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest",
                    incremental_operation=AlterConfigOpType.SET)])  # fmt: skip
    for future in admin.incremental_alter_configs([earliest]).values():
        future.result(60)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all"})
    value = b"x" * 100
    for i in range(records):
        producer.produce(TOPIC, value=value, partition=i % PARTITIONS)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0


def consume(bootstrap: str, records: int) -> dict[str, float]:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                              "share.acknowledgement.mode": "explicit", "log_level": 3})  # fmt: skip
    consumer.subscribe([TOPIC])
    seen: set[tuple[int, int]] = set()
    redelivered = 0
    started: float | None = None
    deadline = time.monotonic() + 600
    while len(seen) < records and time.monotonic() < deadline:
        got = 0
        for message in consumer.poll(1.0):
            if message.error() is not None:
                continue
            started = started or time.perf_counter()
            got += 1
            redelivered += (message.delivery_count() or 1) > 1
            seen.add((message.partition(), message.offset()))
            consumer.acknowledge(message, AcknowledgeType.ACCEPT)
        if got:
            consumer.commit_sync()
    ended = time.perf_counter()
    consumer.close()
    seconds = ended - (started or ended)
    return {"records": len(seen), "seconds": round(seconds, 2),
            "records_per_s": round(len(seen) / seconds, 1) if seconds else 0.0,
            "redelivered": redelivered}  # fmt: skip


def run_coordkit(records: int) -> dict[str, float]:
    import subprocess

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-c", "from coordkit.cli import main; main()", "serve", "--store",
         "memory://bench-share", "--brokers", "1", "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        for line in server.stdout:
            if line.startswith("store "):
                break
        bootstrap = f"127.0.0.1:{port}"
        prepare(bootstrap, records)
        return consume(bootstrap, records)
    finally:
        server.terminate()
        server.wait(60)


def run_kafka(records: int) -> dict[str, float]:
    cluster = KafkaCluster(broker_ids=(1,), properties=KAFKA_PROPERTIES).start()
    try:
        prepare(cluster.bootstrap, records)
        return consume(cluster.bootstrap, records)
    finally:
        cluster.close()


def main(argv: list[str]) -> None:
    records = 5_000 if "--quick" in argv else 50_000
    mine = run_coordkit(records)
    theirs = run_kafka(records)
    ratio = mine["records_per_s"] / theirs["records_per_s"] if theirs["records_per_s"] else 0.0
    print(f"{'side':10} {'records':>8} {'seconds':>8} {'records/s':>10} {'redelivered':>11}")
    for side, found in (("coordkit", mine), ("kafka 4.4", theirs)):
        print(f"{side:10} {found['records']:>8} {found['seconds']:>8} "
              f"{found['records_per_s']:>10} {found['redelivered']:>11}")  # fmt: skip
    print(f"coordkit / kafka: {ratio:.2f}")
    print(json.dumps({"benchmark": "share_fetch", "records": records, "coordkit": mine,
                      "kafka": theirs, "ratio": round(ratio, 3)}))  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])

"""Throughput and latency: records/s, MB/s and latency percentiles through librdkafka, and Kafka's
own perf-test tools as a second load generator, against either side's cluster of three brokers.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from coordkit.testing.servers import KAFKA_KRAFT_VERSION, kafka_tool
from vs_kafka.clusters import create_topic

PARTITIONS = 6
#: Seconds a perf tool may run.
PERF_TIMEOUT = 600
#: A case's figures: name → value.
Figures = dict[str, float]


# -- measurements ----------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def produce(bootstrap: str, topic: str, records: int, size: int, acks: str,
            config: Mapping[str, Any] | None = None) -> dict[str, float]:  # fmt: skip
    """``config``: more librdkafka settings (a secured listener's)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                         "enable.idempotence": acks == "all", **(config or {})})  # fmt: skip
    latencies: list[float] = []
    failed = 0

    def delivered(error: Any, _message: Any, sent: float = 0.0) -> None:
        nonlocal failed
        if error is not None:
            failed += 1
        latencies.append((time.perf_counter() - sent) * 1000)

    value = b"x" * size
    started = time.perf_counter()
    for i in range(records):
        sent = time.perf_counter()
        while True:
            try:
                producer.produce(topic, value=value, key=str(i).encode(),
                                 on_delivery=lambda e, m, s=sent: delivered(e, m, s))  # fmt: skip
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    producer.flush(120)
    elapsed = time.perf_counter() - started
    return {"rec/s": records / elapsed, "MB/s": records * size / elapsed / 1e6,
            "p50 ms": percentile(latencies, 0.5), "p99 ms": percentile(latencies, 0.99),
            "failed": failed}  # fmt: skip


def consume(bootstrap: str, topic: str, records: int, partitions: int,
            config: Mapping[str, Any] | None = None) -> dict[str, float]:  # fmt: skip
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}",
                         "enable.auto.commit": False, "fetch.max.bytes": 52428800,
                         **(config or {})})  # fmt: skip
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = size = 0
    started = time.perf_counter()
    deadline = started + 300
    while got < records and time.perf_counter() < deadline:
        for message in consumer.consume(1000, 1.0):
            if message.error() is None:
                got += 1
                size += len(message.value())
    elapsed = time.perf_counter() - started
    consumer.close()
    return {"rec/s": got / elapsed, "MB/s": size / elapsed / 1e6, "read": got}


def paced_latency(bootstrap: str, topic: str, rate: float, seconds: float) -> dict[str, float]:
    from confluent_kafka import Consumer, Producer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"e2e-{topic}",
                         "fetch.wait.max.ms": 100})  # fmt: skip
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    latencies: list[float] = []
    total = int(rate * seconds)

    def read() -> None:
        deadline = time.perf_counter() + seconds + 30
        while len(latencies) < total and time.perf_counter() < deadline:
            for message in consumer.consume(500, 0.2):
                if message.error() is None:
                    sent = float(message.value().split(b":", 1)[0])
                    latencies.append((time.time() - sent) * 1000)

    reader = threading.Thread(target=read)
    reader.start()
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    started = time.perf_counter()
    for i in range(total):
        delay = started + i / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        producer.produce(topic, value=f"{time.time()}:{i}".encode())
        producer.poll(0)
    producer.flush(60)
    reader.join()
    consumer.close()
    return {"p50 ms": percentile(latencies, 0.5), "p99 ms": percentile(latencies, 0.99),
            "read": len(latencies)}  # fmt: skip


_PRODUCER_PERF = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th"
)


def producer_perf(bootstrap: str, topic: str, records: int) -> dict[str, float]:
    done = kafka_tool(
        KAFKA_KRAFT_VERSION, "kafka-producer-perf-test", "--topic", topic,
        "--num-records", str(records), "--record-size", "1024", "--throughput", "-1",
        "--producer-props", f"bootstrap.servers={bootstrap}", "acks=all", timeout=PERF_TIMEOUT,
    )  # fmt: skip
    found = _PRODUCER_PERF.findall(done.stdout)
    if not found:
        return {"error": 1.0}
    _sent, rate, mb, _avg, _max, p50, _p95, p99 = found[-1]
    return {"rec/s": float(rate), "MB/s": float(mb), "p50 ms": float(p50), "p99 ms": float(p99)}


def consumer_perf(bootstrap: str, topic: str, records: int) -> dict[str, float]:
    done = kafka_tool(
        KAFKA_KRAFT_VERSION, "kafka-consumer-perf-test", "--bootstrap-server", bootstrap,
        "--topic", topic, "--messages", str(records), "--timeout", "60000", timeout=PERF_TIMEOUT,
    )  # fmt: skip
    rows = [line for line in done.stdout.splitlines() if line[:2].isdigit()]
    if not rows:
        return {"error": 1.0}
    # start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, ...
    fields = [f.strip() for f in rows[-1].split(",")]
    return {"MB/s": float(fields[3]), "rec/s": float(fields[5])}


# -- the cases on one cluster --------------------------------------------------------------------

#: The cases of this module, as ``--case`` names them.
CASES = ("produce", "consume", "latency", "perf")
Case = Callable[[str, Callable[[], Figures]], None]


def run(bootstrap: str, cases: list[str], records: int, rate: float, seconds: float,
        case: Case) -> None:  # fmt: skip
    """The throughput ``cases`` on the cluster at ``bootstrap``; ``case(name, measure)`` runs
    and records each figure set."""
    if {"produce", "consume", "perf"} & set(cases):
        for acks in ("1", "all"):
            for size in (100, 1024):
                topic = f"p-{acks}-{size}"
                create_topic(bootstrap, topic, PARTITIONS)
                if "produce" in cases or "consume" in cases:
                    case(f"produce acks={acks} {size}B",
                         lambda t=topic, s=size, a=acks: produce(bootstrap, t, records, s, a))  # type: ignore[misc]  # fmt: skip
        if "consume" in cases:
            case("consume 1024B", lambda: consume(bootstrap, "p-all-1024", records, PARTITIONS))
    if "latency" in cases:
        create_topic(bootstrap, "paced", PARTITIONS)
        case(f"e2e at {rate:g}/s", lambda: paced_latency(bootstrap, "paced", rate, seconds))
    if "perf" in cases:
        create_topic(bootstrap, "perf", PARTITIONS)
        case("producer-perf-test 1024B acks=all", lambda: producer_perf(bootstrap, "perf", records))
        case("consumer-perf-test", lambda: consumer_perf(bootstrap, "perf", records))

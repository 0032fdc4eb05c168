"""Transactions (issue 38): librdkafka's transactional producer against either side, the same
workload: ``TRANSACTIONS`` transactions of ``RECORDS_PER_TRANSACTION`` records of 100 bytes to a
topic of 3 partitions (replication factor 3), each begun, filled, flushed and committed in turn
(``commit ms``: ``commit_transaction``'s time, the EndTxn round trip; the markers follow it), then
a read_committed consumer reading every record back (``read_committed rec/s``)."""

from __future__ import annotations

import time
from collections.abc import Callable

from vs_kafka.clusters import create_topic
from vs_kafka.throughput import percentile

CASES = ("transactions",)
PARTITIONS = 3
TRANSACTIONS = 200
RECORDS_PER_TRANSACTION = 50
VALUE = b"x" * 100
TIMEOUT = 60
Figures = dict[str, float]


def transactional_produce(bootstrap: str, topic: str, transactions: int) -> Figures:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{topic}",
                         "linger.ms": 5})  # fmt: skip
    producer.init_transactions(TIMEOUT)
    commits: list[float] = []
    started = time.perf_counter()
    for _ in range(transactions):
        producer.begin_transaction()
        for n in range(RECORDS_PER_TRANSACTION):
            producer.produce(topic, value=VALUE, partition=n % PARTITIONS)
        producer.flush(TIMEOUT)
        before = time.perf_counter()
        producer.commit_transaction(TIMEOUT)
        commits.append((time.perf_counter() - before) * 1000)
    elapsed = time.perf_counter() - started
    records = transactions * RECORDS_PER_TRANSACTION
    return {"transactions/s": transactions / elapsed, "records/s": records / elapsed,
            "commit p50 ms": percentile(commits, 0.5),
            "commit p99 ms": percentile(commits, 0.99)}  # fmt: skip


def read_committed(bootstrap: str, topic: str, expected: int) -> Figures:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{topic}",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                         "enable.auto.commit": False})  # fmt: skip
    consumer.subscribe([topic])
    seen = 0
    first = None
    deadline = time.monotonic() + 120
    while seen < expected and time.monotonic() < deadline:
        batch = consumer.consume(1000, 1.0)
        good = [m for m in batch if m.error() is None]
        if good and first is None:
            first = time.perf_counter()
        seen += len(good)
    elapsed = time.perf_counter() - (first or time.perf_counter())
    consumer.close()
    return {"read_committed rec/s": seen / elapsed if elapsed else float("nan"),
            "records read": float(seen)}  # fmt: skip


def run(bootstrap: str, cases: list[str], quick: bool,
        case: Callable[[str, Callable[[], Figures]], None]) -> None:  # fmt: skip
    if "transactions" not in cases:
        return
    transactions = TRANSACTIONS // 4 if quick else TRANSACTIONS
    create_topic(bootstrap, "transactional", PARTITIONS)
    case("transactions produce", lambda: transactional_produce(bootstrap, "transactional",
                                                               transactions))  # fmt: skip
    expected = transactions * RECORDS_PER_TRANSACTION
    case("transactions read_committed", lambda: read_committed(bootstrap, "transactional",
                                                               expected))  # fmt: skip

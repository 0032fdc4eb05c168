"""Transactions (issue 38): the same transactional workload on three ``coordkit serve --broker-id N``
processes sharing a real store (ZooKeeper, then Redis: one row each) and on three Kafka 4.4 KRaft
nodes (:func:`vs_kafka.processes.process_cluster`, the clusters of the ``processes-*`` cases, each
broker with its log directory).

Both sides run with the same layout and settings: topics of 3 partitions, replication factor 3,
``min.insync.replicas=2``; ``__transaction_state`` of 5 partitions, replication factor 3, min ISR 2
(:data:`vs_kafka.clusters.SHARED_CONFIG`); the same client, librdkafka's transactional producer
(``linger.ms=5``, acks=all as every transactional producer), 100-byte records. Two loops, each with
1, 10 and 100 records per transaction (:data:`BATCHES`), ``TRANSACTIONS`` transactions a run after
a warm-up of each loop (``WARM_UP`` transactions of 10 records: Kafka's JIT compiles the
coordinator's and the group coordinator's paths, and both sides' connections are open):

* ``txn produce N/txn`` — begin, produce N records (spread over the partitions), flush, commit;
* ``txn c-t-p N/txn`` — consume-transform-produce: a read_committed consumer of a group takes up
  to N records of an input topic (written beforehand), the producer begins, copies them to the
  output topic (the same partition), ``send_offsets_to_transaction`` with the consumer's next
  offsets (AddOffsetsToTxn + TxnOffsetCommit), flushes, commits; the output is read back
  read_committed afterwards (``output records``: every input record exactly once).

Figures: ``commits/s`` and ``records/s`` over the loop; ``commit p50/p99 ms`` (``commit_transaction``
after the flush: the EndTxn round trip, the markers follow it) and ``txn p50/p99 ms`` (from begin to
the commit's answer). Kafka runs once; its figures stand beside each coordkit store's row.
"""

from __future__ import annotations

import argparse
import functools
import time
from collections.abc import Callable
from pathlib import Path

from vs_kafka import failover
from vs_kafka.clusters import SHARED_STORES, bootstrap_of, create_topic
from vs_kafka.processes import process_cluster
from vs_kafka.throughput import percentile

CASES = ("transactions",)
PARTITIONS = 3
#: The topics' config on both sides (Kafka's default is 1; 2 is what a replicated topic runs).
TOPIC_CONFIG = {"min.insync.replicas": "2"}
#: Records per transaction.
BATCHES = (1, 10, 100)
TRANSACTIONS = 200
WARM_UP = 100
VALUE = b"x" * 100
TIMEOUT = 60
#: Seconds a loop may run before it gives up (its figures then count what it did).
LOOP_TIMEOUT = 600.0
PRODUCER = {"linger.ms": 5, **failover.QUIET}
Figures = dict[str, float]
Case = Callable[[str, Callable[[], Figures]], None]


def _rates(
    commits: list[float], transactions: list[float], records: int, elapsed: float
) -> Figures:
    return {"commits/s": len(commits) / elapsed if elapsed else float("nan"),
            "records/s": records / elapsed if elapsed else float("nan"),
            "commit p50 ms": percentile(commits, 0.5), "commit p99 ms": percentile(commits, 0.99),
            "txn p50 ms": percentile(transactions, 0.5),
            "txn p99 ms": percentile(transactions, 0.99)}  # fmt: skip


def produce_loop(bootstrap: str, topic: str, per_transaction: int, transactions: int) -> Figures:
    """``transactions`` transactions of ``per_transaction`` records, one after the other."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"produce-{topic}",
                         **PRODUCER})  # fmt: skip
    producer.init_transactions(TIMEOUT)
    commits: list[float] = []
    whole: list[float] = []
    sent = 0
    started = time.perf_counter()
    for _ in range(transactions):
        begun = time.perf_counter()
        producer.begin_transaction()
        for n in range(per_transaction):
            producer.produce(topic, value=VALUE, partition=(sent + n) % PARTITIONS)
        sent += per_transaction
        producer.flush(TIMEOUT)
        flushed = time.perf_counter()
        producer.commit_transaction(TIMEOUT)
        done = time.perf_counter()
        commits.append((done - flushed) * 1000)
        whole.append((done - begun) * 1000)
        if done - started > LOOP_TIMEOUT:
            break
    return _rates(commits, whole, sent, time.perf_counter() - started)


def seed(bootstrap: str, topic: str, records: int) -> None:
    """``records`` records into ``topic`` (not transactional: the loop's input)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "enable.idempotence": True, **failover.QUIET})  # fmt: skip
    for n in range(records):
        while True:
            try:
                producer.produce(topic, value=VALUE, partition=n % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(TIMEOUT):
        raise SystemExit(f"{topic}: records of the input not acknowledged in {TIMEOUT} s")


def copy_loop(
    bootstrap: str, source: str, target: str, per_transaction: int, records: int
) -> Figures:
    """Copy ``records`` records from ``source`` to ``target``, at most ``per_transaction`` a
    transaction, each with the consumer's offsets; measured from the first batch consumed (the
    group's join is not part of it)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"copy-{source}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed", **failover.QUIET})  # fmt: skip
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"copy-{source}",
                         **PRODUCER})  # fmt: skip
    producer.init_transactions(TIMEOUT)
    consumer.subscribe([source])
    commits: list[float] = []
    whole: list[float] = []
    copied = 0
    started: float | None = None
    deadline = time.monotonic() + LOOP_TIMEOUT
    while copied < records and time.monotonic() < deadline:
        batch = [m for m in consumer.consume(per_transaction, 1.0) if m.error() is None]
        if not batch:
            continue
        begun = time.perf_counter()
        started = started or begun
        producer.begin_transaction()
        following: dict[int, int] = {}
        for message in batch:
            partition, offset = message.partition() or 0, message.offset() or 0
            producer.produce(target, value=message.value(), partition=partition)
            following[partition] = offset + 1
        offsets = [TopicPartition(source, p, o) for p, o in following.items()]
        producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), TIMEOUT)
        producer.flush(TIMEOUT)
        flushed = time.perf_counter()
        producer.commit_transaction(TIMEOUT)
        done = time.perf_counter()
        commits.append((done - flushed) * 1000)
        whole.append((done - begun) * 1000)
        copied += len(batch)
    elapsed = time.perf_counter() - (started or time.perf_counter())
    consumer.close()
    return {**_rates(commits, whole, copied, elapsed), "records copied": float(copied),
            "output records": float(count_committed(bootstrap, target, copied))}  # fmt: skip


def count_committed(bootstrap: str, topic: str, expected: int) -> int:
    """Records a read_committed consumer reads from ``topic`` (waiting for ``expected``, then
    a second more for any beyond)."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"count-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed", **failover.QUIET})  # fmt: skip
    consumer.subscribe([topic])
    seen = 0
    quiet_until = None
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        got = sum(m.error() is None for m in consumer.consume(1000, 0.5))
        seen += got
        if seen >= expected:
            quiet_until = quiet_until or time.monotonic() + 1.0
            if time.monotonic() > quiet_until:
                break
    consumer.close()
    return seen


def measure_all(bootstrap: str, transactions: int) -> dict[str, Figures]:
    """Every loop at every batch size on one cluster, after the warm-up."""
    topics = ["txn-warm-up", "txn-warm-up-input", "txn-warm-up-output"]
    for n in BATCHES:
        topics += [f"txn-produce-{n}", f"txn-input-{n}", f"txn-output-{n}"]
    for topic in topics:
        create_topic(bootstrap, topic, PARTITIONS, config=TOPIC_CONFIG)
    produce_loop(bootstrap, "txn-warm-up", 10, WARM_UP)
    seed(bootstrap, "txn-warm-up-input", 10 * WARM_UP)
    copy_loop(bootstrap, "txn-warm-up-input", "txn-warm-up-output", 10, 10 * WARM_UP)
    found: dict[str, Figures] = {}
    for n in BATCHES:
        found[f"txn produce {n}/txn"] = _reported(
            f"produce {n}/txn",
            functools.partial(produce_loop, bootstrap, f"txn-produce-{n}", n, transactions),
        )
    for n in BATCHES:
        seed(bootstrap, f"txn-input-{n}", n * transactions)
        found[f"txn c-t-p {n}/txn"] = _reported(
            f"c-t-p {n}/txn",
            functools.partial(
                copy_loop, bootstrap, f"txn-input-{n}", f"txn-output-{n}", n, n * transactions
            ),
        )
    return found


def _reported(name: str, loop: Callable[[], Figures]) -> Figures:
    """``loop``'s figures, printed at once; a loop the client failed is reported as failed (the
    other loops still run), with the client's error."""
    from confluent_kafka import KafkaException

    try:
        figures = loop()
    except KafkaException as exc:
        print(f"    {name}: failed: {exc}", flush=True)
        return {"failed": 1.0}
    shown = ", ".join(f"{k} {v:,.1f}" for k, v in figures.items())
    print(f"    {name}: {shown}", flush=True)
    return figures


def run(args: argparse.Namespace, side: str, log_dir: Path, case: Case) -> None:
    """On coordkit, the loops on each shared store's cluster; on Kafka, once, its figures
    registered beside each store's row."""
    if "transactions" not in args.case:
        return
    transactions = TRANSACTIONS // 4 if args.quick else TRANSACTIONS
    stores = SHARED_STORES if side == "coordkit" else (None,)
    for store in stores:
        with process_cluster(side, args.kafka_heap, args.failure_timeout, log_dir,
                             store or "zookeeper") as cluster:  # fmt: skip
            print(f"  {side}{f' on {store}' if store else ''}: transactions, 3 processes",
                  flush=True)  # fmt: skip
            found = measure_all(bootstrap_of(cluster), transactions)
        for row in SHARED_STORES if store is None else (store,):
            for name, figures in found.items():
                case(f"{name} ({row})", functools.partial(dict, figures))

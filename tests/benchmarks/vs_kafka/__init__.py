"""``coordkit serve`` beside Apache Kafka 4 on this machine (issue #31): the same clients, the same
workloads, one run; every figure printed for both with the ratio coordkit / Kafka.

Both clusters have 3 brokers and every topic replication factor 3: Kafka as three KRaft nodes
(broker and controller each, ``--kafka-heap``, jars from ``bash kafka-dist/fetch.sh``), coordkit as
``coordkit serve --brokers 3`` in one process on the memory store (records never touch the store).
The two run one after the other, never at once, so neither slows the other.

* ``produce``: librdkafka (confluent-kafka) sends ``--records`` records as fast as it can, acks=1
  and acks=all, 100 B and 1 KiB values, 6 partitions: records/s, MB/s, and the p50/p99 of the
  time from ``produce()`` to the delivery report.
* ``consume``: a librdkafka consumer reads the 1 KiB acks=all topic back from the start: MB/s.
* ``latency``: records paced at ``--rate``/s for ``--seconds``; p50/p99 of send → consumed.
* ``perf``: Kafka's own ``kafka-producer-perf-test`` and ``kafka-consumer-perf-test`` (from the
  fetched jars) as a second load generator against both.
* ``groups``: librdkafka consumers (``range``, eager; ``cooperative-sticky``) joining one group
  from cold, 10 and 50 members on 60 partitions: seconds until every partition is assigned and
  the group answers Stable; then one member more: seconds until the group is Stable again with
  every partition assigned.

    python tests/benchmarks/run.py vs_kafka [--case=produce|consume|latency|perf|groups ...]
        [--records=N] [--rate=N] [--seconds=N] [--kafka-heap=1g]

Group settings are the same on both sides (``group.initial.rebalance.delay.ms=0``, Kafka's
session bounds); nothing here is a timed assertion.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from coordkit.testing.servers import KAFKA_KRAFT_VERSION, KafkaCluster, kafka_tool

PARTITIONS = 6
GROUP_PARTITIONS = 60
SIDES = ("coordkit", "kafka")
#: Broker settings both sides run with (Kafka's names; coordkit serve takes them as --config).
SHARED_CONFIG = {"group.initial.rebalance.delay.ms": "0"}
#: Seconds a perf tool may run.
PERF_TIMEOUT = 600


# -- the two clusters ------------------------------------------------------------------------------


class CoordkitServe:
    """``coordkit serve --brokers 3`` in its own process, on free ports."""

    def __init__(self) -> None:
        configs = [word for k, v in SHARED_CONFIG.items() for word in ("--config", f"{k}={v}")]
        self.process = subprocess.Popen(
            [sys.executable, "-c", "from coordkit.cli import main; main()", "serve",
             "--store", "memory://bench-vs-kafka", "--brokers", "3", "--port", "0", *configs],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )  # fmt: skip
        self.addresses: list[str] = []
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("broker "):
                self.addresses.append(line.split()[-1])
            elif line.startswith("store "):
                break
        if len(self.addresses) != 3:
            raise SystemExit("coordkit serve did not start")

    @property
    def bootstrap(self) -> str:
        return ",".join(self.addresses)

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()


@contextlib.contextmanager
def cluster(side: str, heap: str) -> Iterator[str]:
    """The bootstrap servers of a fresh cluster of ``side``, closed afterwards."""
    if side == "kafka":
        with KafkaCluster(broker_ids=(1, 2, 3), heap=heap, properties=SHARED_CONFIG) as kafka:
            yield kafka.bootstrap
    else:
        serve = CoordkitServe()
        try:
            yield serve.bootstrap
        finally:
            serve.close()


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 3)]).values():
        future.result(60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        topic = admin.list_topics(name, timeout=10).topics.get(name)
        if (
            topic
            and len(topic.partitions) == partitions
            and all(p.leader >= 0 and len(p.isrs) == 3 for p in topic.partitions.values())
        ):
            return
        time.sleep(0.1)
    raise SystemExit(f"{name}: no leaders with full ISRs after 60 s")


# -- measurements ----------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def produce(bootstrap: str, topic: str, records: int, size: int, acks: str) -> dict[str, float]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                         "enable.idempotence": acks == "all"})  # fmt: skip
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


def consume(bootstrap: str, topic: str, records: int, partitions: int) -> dict[str, float]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}",
                         "enable.auto.commit": False, "fetch.max.bytes": 52428800})  # fmt: skip
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


def group_stable(bootstrap: str, topic: str, members: int, strategy: str) -> dict[str, float]:
    """Seconds until ``members`` consumers share every partition and the group is Stable; then
    one more joins: seconds until that holds again."""
    from confluent_kafka import Consumer, ConsumerGroupState
    from confluent_kafka.admin import AdminClient

    group = f"g-{strategy}-{members}-{time.monotonic_ns()}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    consumers: list[Any] = []
    owned: dict[int, set[int]] = {}
    stop = threading.Event()
    lock = threading.Lock()

    def start_member(index: int) -> None:
        def on_assign(consumer: Any, partitions: list[Any]) -> None:
            with lock:
                if strategy == "cooperative-sticky":
                    owned.setdefault(index, set()).update(p.partition for p in partitions)
                else:
                    owned[index] = {p.partition for p in partitions}

        def on_revoke(consumer: Any, partitions: list[Any]) -> None:
            with lock:
                owned.setdefault(index, set()).difference_update(p.partition for p in partitions)

        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                             "partition.assignment.strategy": strategy,
                             "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000})  # fmt: skip
        consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        consumers.append(consumer)

        def poll() -> None:
            while not stop.is_set():
                consumer.poll(0.1)

        threading.Thread(target=poll, daemon=True).start()

    def settled() -> bool:
        # Every member (there are fewer than partitions) owns some, no partition twice.
        with lock:
            counts = [len(p) for p in owned.values()]
            covered = set().union(*owned.values()) if owned else set()
        if len(counts) != len(consumers) or not all(counts):
            return False
        if len(covered) != GROUP_PARTITIONS or sum(counts) != GROUP_PARTITIONS:
            return False
        (described,) = admin.describe_consumer_groups([group]).values()
        return bool(described.result(10).state == ConsumerGroupState.STABLE)

    def wait(started: float) -> float:
        while time.perf_counter() - started < 180:
            if settled():
                return time.perf_counter() - started
            time.sleep(0.05)
        return float("nan")

    try:
        started = time.perf_counter()
        for index in range(members):
            start_member(index)
        cold = wait(started)
        started = time.perf_counter()
        start_member(members)
        joined = wait(started)
    finally:
        stop.set()
        for consumer in consumers:
            with contextlib.suppress(Exception):
                consumer.close()
    return {"cold s": cold, "join s": joined}


# -- the run ---------------------------------------------------------------------------------------


def measure(args: argparse.Namespace, side: str) -> dict[str, dict[str, float]]:
    figures: dict[str, dict[str, float]] = {}

    def case(name: str, run: Callable[[], dict[str, float]]) -> None:
        print(f"  {side}: {name} ...", flush=True)
        figures[name] = run()

    with cluster(side, args.kafka_heap) as bootstrap:
        if {"produce", "consume", "perf"} & set(args.case):
            for acks in ("1", "all"):
                for size in (100, 1024):
                    topic = f"p-{acks}-{size}"
                    create_topic(bootstrap, topic, PARTITIONS)
                    if "produce" in args.case or "consume" in args.case:
                        case(f"produce acks={acks} {size}B",
                             lambda t=topic, s=size, a=acks: produce(bootstrap, t, args.records, s, a))  # fmt: skip
            if "consume" in args.case:
                case("consume 1024B", lambda: consume(bootstrap, "p-all-1024", args.records,
                                                       PARTITIONS))  # fmt: skip
        if "latency" in args.case:
            create_topic(bootstrap, "paced", PARTITIONS)
            case(f"e2e at {args.rate:g}/s",
                 lambda: paced_latency(bootstrap, "paced", args.rate, args.seconds))  # fmt: skip
        if "perf" in args.case:
            create_topic(bootstrap, "perf", PARTITIONS)
            case("producer-perf-test 1024B acks=all",
                 lambda: producer_perf(bootstrap, "perf", args.records))  # fmt: skip
            case("consumer-perf-test", lambda: consumer_perf(bootstrap, "perf", args.records))
        if "groups" in args.case:
            create_topic(bootstrap, "grouped", GROUP_PARTITIONS)
            for strategy in ("range", "cooperative-sticky"):
                for members in (10, 50):
                    case(f"group {strategy} x{members}",
                         lambda m=members, s=strategy: group_stable(bootstrap, "grouped", m, s))  # fmt: skip
    return figures


def report(results: dict[str, dict[str, dict[str, float]]]) -> None:
    print(f"\n{'case':<36} {'figure':<8} {'coordkit':>11} {'kafka':>11} {'ratio':>7}")
    for name, ours in results["coordkit"].items():
        theirs = results["kafka"].get(name, {})
        for figure, value in ours.items():
            peer = theirs.get(figure, float("nan"))
            ratio = value / peer if peer else float("nan")
            print(f"{name:<36} {figure:<8} {value:>11.2f} {peer:>11.2f} {ratio:>7.2f}")
    print(json.dumps({"benchmark": "vs_kafka", "results": results}, sort_keys=True))


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="run.py vs_kafka")
    parser.add_argument("--case", action="append",
                        choices=["produce", "consume", "latency", "perf", "groups"])  # fmt: skip
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--kafka-heap", default="1g")
    parser.add_argument("--quick", action="store_true", help="20,000 records, 3 s paced")
    args = parser.parse_args(argv)
    args.case = args.case or ["produce", "consume", "latency", "perf", "groups"]
    if args.quick:
        args.records, args.seconds = 20_000, 3.0
    print(f"load average at start: {os.getloadavg()}", flush=True)
    results = {side: measure(args, side) for side in SIDES}
    report(results)


if __name__ == "__main__":
    main(sys.argv[1:])

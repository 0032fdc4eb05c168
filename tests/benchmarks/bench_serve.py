"""``coordkit serve`` with real clients (issue 17): records through replicated partitions.

``coordkit serve`` runs 3 brokers in a child process (its own interpreter, so the clients do not
share its GIL); topics have replication factor 3.

* ``throughput``: kafka-python (default producer: idempotent, acks=all) and confluent-kafka
  (librdkafka, enable.idempotence, acks=all) side by side, on 1 and 12 partitions: each produces
  ``--records`` records of 100 bytes as fast as it can while a consumer of the same library reads
  them; ``rec/s`` is records over the time from the first send to the last record consumed;
  ``p50``/``p99`` are end-to-end latencies (send → consumed, the send time travels in the value);
  ``paced`` rows send ``--rate`` records/s instead, which shows latency without queueing.
* ``failover``: kafka-python's default producer sends ``--rate`` keyed records/s to 3 partitions;
  after 3 s the broker leading partition 0 is crashed (listener closed, session ended without a
  controlled shutdown). ``pause s`` is the longest time without an acknowledged record on a
  partition the crashed broker led (client-visible); ``lost`` counts acknowledged records a
  consumer does not read back afterwards (must be 0). On memory, ZooKeeper and Redis.

    python tests/benchmarks/run.py serve [--quick] [--backend=memory|zookeeper|redis ...]
        [--records=N] [--rate=N] [--case=throughput|failover ...]

(run.py takes every word without a leading dash for a benchmark area: give values with ``=``.)
Throughput runs on the memory store only: records never touch the store.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

VALUE_BYTES = 100
HEADER = (
    f"{'case':<10} {'backend':<9} {'client':<15} {'parts':>5} {'mode':<6} {'records':>8} "
    f"{'rec/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'pause s':>8} {'lost':>5} {'failed':>6}"
)


@attrs.frozen
class Result:
    case: str
    backend: str
    client: str
    partitions: int
    mode: str
    records: int
    rate: float = 0.0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    pause_s: float = 0.0
    lost: int = 0
    failed: int = 0

    def row(self) -> str:
        return (
            f"{self.case:<10} {self.backend:<9} {self.client:<15} {self.partitions:>5} "
            f"{self.mode:<6} {self.records:>8} {self.rate:>9.0f} {self.p50_ms:>8.1f} "
            f"{self.p99_ms:>8.1f} {self.pause_s:>8.2f} {self.lost:>5} {self.failed:>6}"
        )

    def json(self) -> str:
        return json.dumps(attrs.asdict(self), sort_keys=True)


# -- the server, in a child process -------------------------------------------------------------


def child(store_url: str, brokers: int) -> None:
    """The child: serve, print the addresses, then obey one command a line on stdin."""
    import asyncio
    import logging

    from coordkit.serve import KafkaServer

    logging.basicConfig(level=logging.WARNING)
    server = KafkaServer(store_url, list(range(brokers)), port=0)
    server.start_brokers()
    ready = threading.Event()
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(ready.set)), daemon=True)
    thread.start()
    ready.wait(60)
    print(json.dumps({str(b): str(a) for b, a in server.addresses.items()}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        if command[0] == "leader":
            state = server.cluster.replication.log((command[1], command[2]))
            print(json.dumps(-1 if state is None else state.leader), flush=True)
        elif command[0] == "crash":
            server.stop_broker(command[1])
            print(json.dumps("ok"), flush=True)
        elif command[0] == "create":
            server.cluster.create_topic(command[1], command[2], command[3])
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                states = [
                    server.cluster.replication.log((command[1], p)) for p in range(command[2])
                ]
                if all(
                    s is not None and s.leader >= 0 and len(s.isr) == command[3] for s in states
                ):
                    break
                time.sleep(0.02)
            print(json.dumps("ok"), flush=True)
        else:
            break
    server.stop()
    thread.join(30)
    server.close()


class ServerProcess:
    def __init__(self, store_url: str, brokers: int = 3) -> None:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--child", store_url, str(brokers)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        self.addresses = {int(b): a for b, a in self._read().items()}

    def _read(self) -> Any:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit("coordkit serve (child) stopped")
        return json.loads(line)

    def ask(self, *command: object) -> Any:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        return self._read()

    @property
    def bootstrap(self) -> str:
        return ",".join(self.addresses.values())

    def close(self) -> None:
        with contextlib.suppress(OSError):
            assert self.process.stdin is not None
            self.process.stdin.write(json.dumps(["quit"]) + "\n")
            self.process.stdin.close()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()


@contextlib.contextmanager
def serving(store_url: str) -> Iterator[ServerProcess]:
    server = ServerProcess(store_url)
    try:
        yield server
    finally:
        server.close()


# -- clients -------------------------------------------------------------------------------------


def _value(i: int) -> bytes:
    stamp = f"{time.time_ns()}:{i}:".encode()
    return stamp + b"x" * (VALUE_BYTES - len(stamp))


def _latency_ms(value: bytes, now_ns: int) -> float:
    return (now_ns - int(value.split(b":", 1)[0])) / 1e6


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _pace(start: float, i: int, rate: float | None) -> None:
    if rate:
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)


def kafka_python_run(bootstrap: str, topic: str, partitions: int, records: int,
                     rate: float | None) -> tuple[float, list[float]]:  # fmt: skip
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    latencies: list[float] = []
    done = threading.Event()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             fetch_max_wait_ms=100)  # fmt: skip
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    consumer.poll(timeout_ms=200)  # connected and positioned before the clock starts

    def consume() -> None:
        while len(latencies) < records:
            for batch in consumer.poll(timeout_ms=200).values():
                now = time.time_ns()
                latencies.extend(_latency_ms(r.value, now) for r in batch)
        done.set()

    reader = threading.Thread(target=consume, daemon=True)
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    producer.send(topic, b"warm-up", partition=0).get(30)  # not counted: InitProducerId, metadata
    for tp, end in consumer.end_offsets(list(consumer.assignment())).items():
        consumer.seek(tp, end)
    reader.start()
    started = time.perf_counter()
    for i in range(records):
        _pace(started, i, rate)
        producer.send(topic, key=str(i).encode(), value=_value(i))
    producer.flush(120)
    done.wait(120)
    elapsed = time.perf_counter() - started
    producer.close(30)
    consumer.close()
    return elapsed, latencies


def confluent_run(bootstrap: str, topic: str, partitions: int, records: int,
                  rate: float | None) -> tuple[float, list[float]]:  # fmt: skip
    import confluent_kafka

    latencies: list[float] = []
    done = threading.Event()
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                                         "enable.idempotence": True, "acks": "all",
                                         "socket.nagle.disable": True})  # fmt: skip
    producer.produce(topic, b"warm-up", partition=0)
    producer.flush(30)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench",
                                         "enable.auto.commit": False, "fetch.wait.max.ms": 100,
                                         "enable.partition.eof": False,
                                         "socket.nagle.disable": True})  # fmt: skip
    watermarks = [consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), 10)
                  for p in range(partitions)]  # fmt: skip
    consumer.assign([confluent_kafka.TopicPartition(topic, p, high)
                     for p, (_, high) in enumerate(watermarks)])  # fmt: skip

    def consume() -> None:
        while len(latencies) < records:
            # poll, not consume(n, timeout): that one waits for n messages or the timeout.
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                latencies.append(_latency_ms(message.value(), time.time_ns()))
        done.set()

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    time.sleep(0.5)  # the consumer's first fetch is in flight
    started = time.perf_counter()
    for i in range(records):
        _pace(started, i, rate)
        while True:
            try:
                producer.produce(topic, key=str(i).encode(), value=_value(i))
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    producer.flush(120)
    done.wait(120)
    elapsed = time.perf_counter() - started
    consumer.close()
    return elapsed, latencies


RUNS = {"kafka-python": kafka_python_run, "confluent-kafka": confluent_run}


def throughput(server: ServerProcess, client: str, partitions: int, records: int,
               rate: float | None) -> Result:  # fmt: skip
    topic = f"t-{client}-{partitions}-{'paced' if rate else 'max'}"
    server.ask("create", topic, partitions, 3)
    elapsed, latencies = RUNS[client](server.bootstrap, topic, partitions, records, rate)
    return Result("throughput", "memory", client, partitions, "paced" if rate else "max",
                  len(latencies), len(latencies) / elapsed, _percentile(latencies, 0.5),
                  _percentile(latencies, 0.99))  # fmt: skip


def failover(server: ServerProcess, backend: str, rate: float) -> Result:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic, partitions = "failover", 3
    server.ask("create", topic, partitions, 3)
    victim = server.ask("leader", topic, 0)
    led = {p for p in range(partitions) if server.ask("leader", topic, p) == victim}
    producer = KafkaProducer(bootstrap_servers=server.bootstrap, linger_ms=2,
                             request_timeout_ms=10_000, retry_backoff_ms=50)  # fmt: skip
    acked: dict[bytes, tuple[int, int]] = {}
    acked_at: dict[int, list[float]] = {p: [] for p in range(partitions)}
    lock = threading.Lock()
    failures: list[BaseException] = []

    def on_ack(value: bytes) -> Any:
        def record(metadata: Any) -> None:
            with lock:
                acked[value] = (metadata.partition, metadata.offset)
                acked_at[metadata.partition].append(time.perf_counter())

        return record

    started = time.perf_counter()
    crashed_at = None
    i = 0
    while time.perf_counter() - started < 13:
        if crashed_at is None and time.perf_counter() - started >= 3:
            crashed_at = time.perf_counter()
            server.ask("crash", victim)
        value = f"{i}:".encode().ljust(VALUE_BYTES, b"x")
        future = producer.send(topic, key=str(i).encode(), value=value)
        future.add_callback(on_ack(value)).add_errback(failures.append)
        i += 1
        _pace(started, i, rate)
    producer.flush(60)
    producer.close(30)
    if failures:
        print(f"  {len(failures)} sends failed, first: {failures[0]!r}", file=sys.stderr)
    pause = 0.0
    for partition in led:
        stamps = [crashed_at or started, *sorted(acked_at[partition])]
        pause = max(pause, max((b - a for a, b in itertools.pairwise(stamps)),
                               default=0.0))  # fmt: skip
    survivors = ",".join(a for b, a in server.addresses.items() if b != victim)
    consumer = KafkaConsumer(bootstrap_servers=survivors, group_id=None,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=3_000)  # fmt: skip
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    consumed = {r.value: (r.partition, r.offset) for r in consumer}
    consumer.close()
    lost = sum(1 for value, where in acked.items() if consumed.get(value) != where)
    return Result("failover", backend, "kafka-python", partitions, "paced", len(acked),
                  pause_s=pause, lost=lost, failed=len(failures))  # fmt: skip


def main(argv: list[str]) -> None:
    from bench_engine import backend_env

    parser = argparse.ArgumentParser(prog="bench_serve", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer records, memory only")
    parser.add_argument("--backend", action="append", choices=["memory", "zookeeper", "redis"])
    parser.add_argument("--records", type=int)
    parser.add_argument("--rate", type=float, default=1_000.0)
    parser.add_argument("--case", action="append", choices=["throughput", "failover"])
    args = parser.parse_args(argv)
    records = args.records or (5_000 if args.quick else 50_000)
    backends = args.backend or (["memory"] if args.quick else ["memory", "zookeeper", "redis"])
    cases = args.case or ["throughput", "failover"]
    results: list[Result] = []
    print(HEADER, flush=True)
    if "throughput" in cases:
        with backend_env("memory") as env, serving(env.new_url()) as server:
            for partitions in (1, 12):
                for client in RUNS:
                    for rate in (None, args.rate):
                        paced = min(records, int(args.rate * 5)) if rate else records
                        result = throughput(server, client, partitions, paced, rate)
                        results.append(result)
                        print(result.row(), flush=True)
    if "failover" in cases:
        for backend in backends:
            with backend_env(backend) as env, serving(env.new_url()) as server:
                result = failover(server, backend, args.rate)
                results.append(result)
                print(result.row(), flush=True)
    print()
    for result in results:
        print(result.json())


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "--child":
    child(sys.argv[2], int(sys.argv[3]))

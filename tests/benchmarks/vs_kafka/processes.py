"""Issue #34's targets: three ``coordkit serve --broker-id N`` processes (one broker each, on one
private ZooKeeper, each with its log directory: ``--data-dir``) beside three Kafka 4.4 KRaft
nodes (combined broker+controller), replication factor 3 everywhere:

* ``processes-produce`` — ``--records`` records of ``--record-size`` bytes, acks=all, from
  ``--producers`` threads with a librdkafka producer each (the settings of
  :func:`vs_kafka.throughput.produce`: linger.ms=5, idempotent) into a topic of 6 partitions:
  records/s, and the p50/p99 of each record's time from ``produce()`` to its acknowledgement
  (at full speed mostly the wait in the producer's queue, so it follows the throughput: a side
  slower than the producers' own pace queues what the other answers at once), and the p99 of
  the produce requests' round trips to the brokers (``request p99 ms``: librdkafka's statistics,
  each second's p99 weighted by its requests: the brokers' latency at full speed, without the
  queue), after a warm-up of as many records
  (at most 20,000) into another topic; then ``--rate`` records/s for ``--seconds`` from one
  producer (linger.ms=0): p50/p99 acknowledgement latency of a cluster that is not saturated;
* ``processes-failover`` — :func:`vs_kafka.failover.leader_killed_runs` on these clusters: a steady
  acks=all producer on the partitions one broker leads (never the controller's), that broker's
  process SIGKILLed; seconds until the first record produced after the kill is acknowledged on
  any of its partitions (``first ack s``) and on every one (``all acked s``, the max over them),
  ``--failover-runs`` times at random moments (``--seed``): medians, worst cases and the share
  within 2 s.
  Both include noticing the death (``--failure-timeout``: the store session on coordkit; the
  broker session on Kafka, with the heartbeat a third of it);
* ``processes-catch-up`` — a topic of 6 partitions; one broker (not the controller) stopped
  cleanly (Ctrl-C / SIGTERM: each side's controlled shutdown); ``--catch-up-records`` records of
  100 bytes written (acks=all) without it; it is started again on its log directory: seconds
  from its process start until it answers Metadata (``start s``) and until it is back in the ISR
  of every partition (``in ISR s``, as Metadata from a live broker reports the ISR; ``ISR after
  start s``: the difference, the catching up once it serves); the size of
  its segment files of the topic when it starts and once in every ISR, beside the other brokers'
  (``MB at start``, ``MB in ISR``, ``leaders' MB``: it did copy what it missed).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from vs_kafka import failover
from vs_kafka.clusters import (
    BrokerProcesses,
    KafkaNodes,
    ServeProcesses,
    bootstrap_of,
    create_topic,
    serve_command,
)
from vs_kafka.throughput import percentile

CASES = ("processes-produce", "processes-failover", "processes-catch-up")
PARTITIONS = 6
CATCH_UP_RECORD_SIZE = 100
#: Records the produce case writes before it measures (at most ``--records``).
WARM_UP_RECORDS = 20_000
#: Seconds the restarted broker may take to rejoin every ISR before ``in ISR s`` is nan.
CATCH_UP_TIMEOUT = 600.0
#: Seconds a produce run may take to flush.
FLUSH_TIMEOUT = 600.0
Figures = dict[str, float]
Case = Callable[[str, Callable[[], Figures]], None]


# -- the clusters ------------------------------------------------------------------------------------


class DataDirServeProcesses(ServeProcesses):
    """:class:`ServeProcesses` whose brokers keep their logs in ``data_dir`` (broker N's in
    ``data_dir/broker-N``), so that a restarted broker catches up from where it stopped as a
    Kafka broker does from its log directory."""

    def __init__(self, failure_timeout: float, log_dir: Path, store: str = "zookeeper") -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir = log_dir / "data"
        super().__init__(failure_timeout, log_dir, store)

    def spawn(self, broker_id: int) -> None:
        log = (self.log_dir / f"coordkit-{broker_id}.log").open("a")
        command = serve_command(
            "--store", self.url, "--broker-id", str(broker_id), "--port", "0",
            "--data-dir", str(self.data_dir),
        )  # fmt: skip
        self.processes[broker_id] = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=log, text=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )  # fmt: skip
        log.close()


def topic_log_bytes(cluster: BrokerProcesses, broker: int, topic: str) -> int:
    """The size of the segment files of ``topic``'s replicas in ``broker``'s log directory (the
    check that a broker in the ISR again holds the records its leaders do)."""
    if isinstance(cluster, DataDirServeProcesses):
        root = cluster.data_dir / f"broker-{broker}"
    elif isinstance(cluster, KafkaNodes):
        root = cluster.cluster.node(broker).data_dir
    else:
        raise TypeError(f"no log directory known for {cluster!r}")
    return sum(f.stat().st_size for f in root.glob(f"{topic}-*/*.log"))


@contextlib.contextmanager
def process_cluster(
    side: str, heap: str, failure_timeout: float, log_dir: Path, store: str = "zookeeper"
) -> Iterator[BrokerProcesses]:
    """Three brokers of ``side``, a process each (coordkit's on the shared ``store``)."""
    cluster: BrokerProcesses = (
        KafkaNodes(heap, failure_timeout)
        if side == "kafka"
        else DataDirServeProcesses(failure_timeout, log_dir / f"{side}-{store}", store)
    )
    try:
        yield cluster
    finally:
        cluster.close()


# -- measurements ------------------------------------------------------------------------------------


def produce(
    bootstrap: str, topic: str, records: int, size: int, producers: int, label: str
) -> Figures:
    """``records`` records of ``size`` bytes, acks=all, split over ``producers`` threads each
    with a producer of its own; progress printed every tenth of the records acknowledged."""
    from confluent_kafka import Producer

    latencies: list[float] = []
    failed = [0]
    acked = [0]
    lock = threading.Lock()
    step = max(1, records // 10)
    #: (requests, their p99 in ms) of each broker in each statistics window: the brokers' own
    #: answer time at full speed, without the wait in the producer's queue.
    round_trips: list[tuple[int, float]] = []

    def statistics(text: str) -> None:
        for broker in json.loads(text).get("brokers", {}).values():
            rtt = broker.get("rtt", {})
            if broker.get("nodeid", -1) >= 0 and rtt.get("cnt", 0) > 0:
                with lock:
                    round_trips.append((rtt["cnt"], rtt["p99"] / 1000))

    def delivered(error: Any, sent: float) -> None:
        latency = (time.perf_counter() - sent) * 1000
        with lock:
            latencies.append(latency)
            if error is not None:
                failed[0] += 1
            acked[0] += 1
            if acked[0] % step == 0:
                print(f"    {label}: {acked[0]:,} of {records:,} acknowledged", flush=True)

    def run(count: int, first: int) -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                             "enable.idempotence": True, "statistics.interval.ms": 1000,
                             "stats_cb": statistics, **failover.QUIET})  # fmt: skip
        value = b"x" * size
        for i in range(first, first + count):
            sent = time.perf_counter()
            while True:
                try:
                    producer.produce(topic, value=value, key=str(i).encode(),
                                     on_delivery=lambda e, _m, s=sent: delivered(e, s))  # type: ignore[misc]  # fmt: skip
                    break
                except BufferError:
                    producer.poll(0.01)
            producer.poll(0)
        producer.flush(FLUSH_TIMEOUT)

    shares = [records // producers + (i < records % producers) for i in range(producers)]
    firsts = [sum(shares[:i]) for i in range(producers)]
    threads = [
        threading.Thread(target=run, args=(n, f)) for n, f in zip(shares, firsts, strict=True)
    ]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    requests = sum(count for count, _ in round_trips)
    request_p99 = (sum(count * p99 for count, p99 in round_trips) / requests if requests
                   else math.nan)  # fmt: skip
    return {"rec/s": records / elapsed, "MB/s": records * size / elapsed / 1e6,
            "p50 ms": percentile(latencies, 0.5), "p99 ms": percentile(latencies, 0.99),
            "request p99 ms": request_p99,
            "failed": float(failed[0]), "unacked": float(records - acked[0])}  # fmt: skip


def paced(bootstrap: str, topic: str, rate: float, seconds: float, size: int) -> Figures:
    """``rate`` records a second for ``seconds`` (acks=all, one producer, linger.ms=0): each
    record's time from ``produce()`` to its acknowledgement, on a cluster that is not saturated."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                         "enable.idempotence": True, **failover.QUIET})  # fmt: skip
    latencies: list[float] = []
    failed = 0

    def delivered(error: Any, sent: float) -> None:
        nonlocal failed
        failed += error is not None
        latencies.append((time.perf_counter() - sent) * 1000)

    value = b"x" * size
    total = int(rate * seconds)
    started = time.perf_counter()
    for i in range(total):
        delay = started + i / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        sent = time.perf_counter()
        producer.produce(topic, value=value, key=str(i).encode(),
                         on_delivery=lambda e, _m, s=sent: delivered(e, s))  # type: ignore[misc]  # fmt: skip
        producer.poll(0)
    producer.flush(FLUSH_TIMEOUT)
    return {"p50 ms": percentile(latencies, 0.5), "p99 ms": percentile(latencies, 0.99),
            "acked": float(len(latencies) - failed)}  # fmt: skip


def warm_up(bootstrap: str, records: int, size: int, producers: int) -> None:
    """Records into a topic of their own first, so that neither side is measured cold (Kafka's
    JIT compiles its hot paths in the first seconds)."""
    create_topic(bootstrap, "processes-warm-up", PARTITIONS)
    produce(bootstrap, "processes-warm-up", records, size, producers, "warm-up")


def processes_produce(cluster: BrokerProcesses, args: argparse.Namespace) -> Figures:
    bootstrap = bootstrap_of(cluster)
    create_topic(bootstrap, "processes-produce", PARTITIONS)
    return produce(bootstrap, "processes-produce", args.records, args.record_size,
                   args.producers, "produce")  # fmt: skip


def processes_paced(cluster: BrokerProcesses, args: argparse.Namespace) -> Figures:
    bootstrap = bootstrap_of(cluster)
    create_topic(bootstrap, "processes-paced", PARTITIONS)
    return paced(bootstrap, "processes-paced", args.rate, args.seconds, args.record_size)


def isrs_holding(bootstrap: str, topic: str, broker: int) -> int | None:
    """How many partitions of ``topic`` have ``broker`` in their ISR (None: no answer)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, **failover.QUIET})
    try:
        found = admin.list_topics(topic, timeout=5).topics[topic]
    except Exception:  # a broker just restarting: ask again
        return None
    if len(found.partitions) != PARTITIONS:
        return None
    return sum(broker in p.isrs for p in found.partitions.values())


def _wait(check: Callable[[], bool], started: float, timeout: float) -> float:
    """Seconds from ``started`` until ``check()`` holds (nan after ``timeout``)."""
    while time.perf_counter() - started < timeout:
        if check():
            return time.perf_counter() - started
        time.sleep(0.05)
    return float("nan")


def catch_up(cluster: BrokerProcesses, args: argparse.Namespace) -> Figures:
    topic = "processes-catch-up"
    bootstrap = bootstrap_of(cluster)
    create_topic(bootstrap, topic, PARTITIONS)
    controller = cluster.controller()
    victim = max(b for b in cluster.live() if b != controller)
    cluster.stop(victim)
    # The measure means something only if the stopped broker left every ISR first.
    left = _wait(lambda: isrs_holding(bootstrap_of(cluster), topic, victim) == 0,
                 time.perf_counter(), 60.0)  # fmt: skip
    if math.isnan(left):
        raise SystemExit(f"catch-up: broker {victim} still in an ISR 60 s after it stopped")
    print(f"    catch-up: broker {victim} stopped; writing {args.catch_up_records:,} records",
          flush=True)  # fmt: skip
    written = produce(bootstrap_of(cluster), topic, args.catch_up_records,
                      CATCH_UP_RECORD_SIZE, args.producers, "catch-up write")  # fmt: skip
    print(f"    catch-up: written at {written['rec/s']:,.0f} rec/s; starting broker {victim}",
          flush=True)  # fmt: skip
    behind = topic_log_bytes(cluster, victim, topic)
    started = time.perf_counter()
    cluster.start(victim)  # returns once it answers Metadata listing itself
    serving = time.perf_counter() - started
    others = bootstrap_of(cluster)
    in_isr = _wait(lambda: isrs_holding(others, topic, victim) == PARTITIONS, started,
                   CATCH_UP_TIMEOUT)  # fmt: skip
    leaders_bytes = max(topic_log_bytes(cluster, b, topic) for b in cluster.live() if b != victim)
    return {"records": float(args.catch_up_records), "write rec/s": written["rec/s"],
            "start s": serving, "in ISR s": in_isr, "ISR after start s": in_isr - serving,
            "MB at start": behind / 1e6, "MB in ISR": topic_log_bytes(cluster, victim, topic) / 1e6,
            "leaders' MB": leaders_bytes / 1e6}  # fmt: skip


def keep_logs(log_dir: Path, name: str) -> None:
    """Copy the brokers' logs out of the run's temporary directory when records failed: the
    figure alone does not say why."""
    kept = Path(tempfile.mkdtemp(prefix="vs-kafka-kept-"))
    for log in log_dir.glob("*.log"):
        shutil.copy(log, kept / log.name)
    print(f"    {name}: records failed; the brokers' logs are kept in {kept}", flush=True)


def run(args: argparse.Namespace, side: str, log_dir: Path, case: Case) -> None:
    """The cases of this module that ``args.case`` names, on a fresh cluster of ``side``."""
    wanted = [c for c in CASES if c in args.case]
    if not wanted:
        return

    def shown(name: str, measure: Callable[[], Figures]) -> None:
        def measured() -> Figures:
            figures = measure()
            print(f"    {side}: {name}: {figures}", flush=True)
            if figures.get("failed") and isinstance(cluster, DataDirServeProcesses):
                keep_logs(cluster.log_dir, name)
            return figures

        case(name, measured)

    with process_cluster(side, args.kafka_heap, args.failure_timeout, log_dir) as cluster:
        if "processes-produce" in wanted:
            warm_up(bootstrap_of(cluster), min(args.records, WARM_UP_RECORDS), args.record_size,
                    args.producers)  # fmt: skip
            shown(f"3 processes produce {args.record_size}B acks=all",
                 lambda: processes_produce(cluster, args))  # fmt: skip
            shown(f"3 processes paced {args.rate:g}/s acks=all",
                  lambda: processes_paced(cluster, args))  # fmt: skip
        if "processes-failover" in wanted:
            shown("3 processes leader killed",
                  lambda: failover.leader_killed_runs(cluster, args.failover_runs, args.seed))  # fmt: skip
        if "processes-catch-up" in wanted:
            shown("3 processes catch-up", lambda: catch_up(cluster, args))

"""Producer partitioner benchmarks: ``python tests/benchmarks/run.py partitioners [--quick]``.

Cases:

* **murmur2**: hashing 16-byte keys, ours against kafka-python's ``kafka.partitioner.default
  .murmur2`` (both pure Python), keys per second;
* **partition**: one partitioner call per record (plus the producer's callbacks), records per
  second: ``murmur2`` keyed, ``round-robin``, ``sticky`` and ``uniform-sticky`` null-key, and
  kafka-python's ``DefaultPartitioner`` keyed for reference;
* **producer**: the engine's producer end to end without a store (fixed metadata, in-memory logs):
  partition, batch, deliver, resolve futures; records per second per partitioner;
* **skew**: the lab's ``producer-skew`` workload with its defaults over five seeds: mean partition
  skew, broker skew and records per batch per partitioner.

Best of several runs is reported for timings. ``--quick`` shrinks every case tenfold.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable, Sequence

from coordkit.engine.producer import FixedMetadata, Producer, ProducerConfig
from coordkit.engine.states import TP
from coordkit.plugins import get_plugin_manager
from coordkit.strategies.partitioning import (
    ClusterMetadata,
    PartitionerOptions,
    ProducerRecord,
    murmur2,
)

PARTITIONS = 64
BROKERS = 8


def best_of(runs: int, work: Callable[[], None]) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times)


def emit(case: str, name: str, count: int, seconds: float) -> None:
    rate = count / seconds if seconds else float("inf")
    print(f"{case:<10} {name:<34} {count:>9,} {seconds:>8.3f}s {rate:>14,.0f}/s", flush=True)
    print(
        json.dumps(
            {
                "bench": "partitioners",
                "case": case,
                "name": name,
                "count": count,
                "seconds": round(seconds, 4),
                "per_second": round(rate),
            }
        ),
        flush=True,
    )


def bench_murmur2(keys: list[bytes], runs: int) -> None:
    emit(
        "murmur2", "coordkit murmur2", len(keys), best_of(runs, lambda: [murmur2(k) for k in keys])
    )
    try:
        from kafka.partitioner.default import murmur2 as kafka_murmur2
    except ImportError:
        print("murmur2    kafka-python not installed (dependency group 'bench')")
        return
    # Same function: kafka-python returns the unsigned 32-bit value.
    assert all((kafka_murmur2(k) & 0xFFFFFFFF) == (murmur2(k) & 0xFFFFFFFF) for k in keys[:1000])
    seconds = best_of(runs, lambda: [kafka_murmur2(k) for k in keys])
    emit("murmur2", "kafka-python murmur2", len(keys), seconds)


def bench_partition(keys: list[bytes], runs: int) -> None:
    manager = get_plugin_manager()
    cluster = ClusterMetadata({"t": [p % BROKERS for p in range(PARTITIONS)]})
    keyed = [ProducerRecord("t", b"v" * 100, key=k) for k in keys]
    null = [ProducerRecord("t", b"v" * 100)] * len(keys)
    for name, records in (
        ("murmur2", keyed),
        ("round-robin", null),
        ("sticky", null),
        ("uniform-sticky", null),
    ):
        label = f"{name} ({'keyed' if records is keyed else 'null key'})"

        def work(name: str = name, records: list[ProducerRecord] = records) -> None:
            partitioner = manager.partitioner(name)(PartitionerOptions(seed=1))
            partition, on_append = partitioner.partition, partitioner.on_append
            for record in records:
                on_append(record, partition(record, cluster), cluster, True)

        emit("partition", label, len(records), best_of(runs, work))
    try:
        from kafka.partitioner.default import DefaultPartitioner
    except ImportError:
        return
    every = set(range(PARTITIONS))

    class _KafkaCluster:
        """The three calls kafka-python's partitioner makes of its ClusterMetadata."""

        def topics(self) -> set[str]:
            return {"t"}

        def partitions_for_topic(self, topic: str) -> set[int]:
            return every

        def available_partitions_for_topic(self, topic: str) -> set[int]:
            return every

    kafka_cluster = _KafkaCluster()

    def kafka_work() -> None:
        partitioner = DefaultPartitioner()
        for key in keys:
            partitioner.partition("t", key, key, None, None, kafka_cluster)

    emit("partition", "kafka-python DefaultPartitioner", len(keys), best_of(runs, kafka_work))


class _Logs:
    def __init__(self) -> None:
        self.offsets: dict[TP, int] = {}

    def reachable(self, broker_id: int) -> bool:
        return True

    def append(self, broker_id: int, tp: TP, records: int) -> int:
        offset = self.offsets.get(tp, 0)
        self.offsets[tp] = offset + records
        return offset


def bench_producer(keys: list[bytes], runs: int) -> None:
    leaders = {"t": [p % BROKERS for p in range(PARTITIONS)]}
    keyed = [ProducerRecord("t", b"v" * 100, key=k) for k in keys]
    null = [ProducerRecord("t", b"v" * 100)] * len(keys)
    for name, records in (
        ("murmur2", keyed),
        ("round-robin", null),
        ("sticky", null),
        ("uniform-sticky", null),
    ):
        label = f"{name} ({'keyed' if records is keyed else 'null key'})"

        def work(name: str = name, records: list[ProducerRecord] = records) -> None:
            config = ProducerConfig(partitioner=name, seed=1)
            producer = Producer(FixedMetadata(leaders), _Logs(), config)
            for record in records:
                producer.send(record)
            producer.flush()

        emit("producer", label, len(records), best_of(runs, work))


def bench_skew(seeds: int, records: int) -> None:
    manager = get_plugin_manager()
    workload = manager.workload("producer-skew")
    metrics = [manager.metric(n) for n in ("partition-skew", "broker-skew", "records-per-batch")]
    print(f"{'skew':<10} {'partitioner':<16} {'partition':>10} {'broker':>8} {'per batch':>10}")
    for strategy in workload.strategies(manager):
        values: dict[str, list[float]] = {m.name: [] for m in metrics}
        for seed in range(1, seeds + 1):
            for step in workload.simulate({"records": records}, seed, strategy, manager):
                for metric in metrics:
                    value = metric.compute(step)
                    if value is not None:
                        values[metric.name].append(value)
        means = {k: statistics.mean(v) for k, v in values.items()}
        print(
            f"{'skew':<10} {strategy:<16} {means['partition-skew']:>10.2f} "
            f"{means['broker-skew']:>8.2f} {means['records-per-batch']:>10.2f}",
            flush=True,
        )
        print(json.dumps({"bench": "partitioners", "case": "skew", "name": strategy, **means}))


def main(flags: Sequence[str]) -> None:
    quick = "--quick" in flags
    scale = 10 if quick else 1
    count = 200_000 // scale
    runs = 3
    keys = [os.urandom(16) for _ in range(count)]
    print(f"{'case':<10} {'name':<34} {'records':>9} {'best':>9} {'rate':>16}")
    bench_murmur2(keys, runs)
    bench_partition(keys, runs)
    bench_producer(keys[: count // 2], runs)
    bench_skew(5 if not quick else 2, 3000 // (2 if quick else 1))


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])

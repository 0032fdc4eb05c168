"""Producer partitioners, registered through ``coordkit_register_partitioners``, and the lab's
``producer-skew`` workload with its metrics.

* ``explicit`` — the record names its partition (an error when it does not);
* ``murmur2`` — Kafka's DefaultPartitioner up to 2.3: murmur2 for keys, a counter for null keys;
* ``round-robin`` — Kafka's RoundRobinPartitioner: a per-topic counter for every record;
* ``sticky`` — Kafka 2.4+ (KIP-480): null keys stick to a partition until a new batch;
* ``uniform-sticky`` — Kafka 3.3+ (KIP-794): switch after ``batch.size`` bytes, adaptively
  weighted by queue sizes.

Every partitioner honours an explicit partition, and all but ``round-robin`` (and ``explicit``)
place keyed records with ``toPositive(murmur2(key)) % numPartitions``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from coordkit import hookimpl
from coordkit_partitioners.base import Factory, PartitionerBase
from coordkit_partitioners.explicit import ExplicitPartitioner
from coordkit_partitioners.murmur2 import Murmur2Partitioner
from coordkit_partitioners.roundrobin import RoundRobinPartitioner
from coordkit_partitioners.sticky import StickyPartitioner
from coordkit_partitioners.uniform_sticky import UniformStickyPartitioner

__all__ = [
    "FACTORIES",
    "ExplicitPartitioner",
    "Factory",
    "Murmur2Partitioner",
    "PartitionerBase",
    "RoundRobinPartitioner",
    "StickyPartitioner",
    "UniformStickyPartitioner",
]

FACTORIES = (
    Factory(
        "explicit",
        "the record's own partition; records without one are an error",
        ExplicitPartitioner,
    ),
    Factory(
        "murmur2",
        "Kafka <= 2.3 default: murmur2(key) % partitions; null keys round-robin",
        Murmur2Partitioner,
    ),
    Factory(
        "round-robin",
        "Kafka's RoundRobinPartitioner: per-topic counter over available partitions, keys ignored",
        RoundRobinPartitioner,
    ),
    Factory(
        "sticky",
        "Kafka 2.4+ default (KIP-480): null keys stick to a partition until a new batch",
        StickyPartitioner,
    ),
    Factory(
        "uniform-sticky",
        "Kafka 3.3+ built-in (KIP-794): switch after batch.size bytes, weighted by queue sizes",
        UniformStickyPartitioner,
    ),
)


@hookimpl
def coordkit_register_partitioners(register: Callable[[Any], None]) -> None:
    for factory in FACTORIES:
        register(factory)


@hookimpl
def coordkit_register_workloads(register: Callable[[Any], None]) -> None:
    from coordkit_partitioners.lab import PRODUCER_SKEW

    register(PRODUCER_SKEW)


@hookimpl
def coordkit_register_metrics(register: Callable[[Any], None]) -> None:
    from coordkit_partitioners.lab import PRODUCER_METRICS

    for metric in PRODUCER_METRICS:
        register(metric)

"""The placement metrics (kind ``placement``), one number per step of ``broker-scaling``.

Balance is over the live brokers after the step: *skew* is the most loaded broker over the mean
(1.0 is perfect), the standard deviation the spread (population). Leaders are preferred leaders
(each partition's first replica): where leadership goes after a preferred-replica election, and
what a placement decides. Movement counts each replica a plan adds to a broker that did not hold
it, once (its data is copied there); the initial placement moves nothing and has no movement
values.
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Sequence

from coordkit.lab import FunctionMetric
from coordkit_placements.lab.workload import PLACEMENT_KIND, PlacementStep

PlacementMetric = functools.partial(
    FunctionMetric, kinds=(PLACEMENT_KIND,), step_type=PlacementStep
)


def skew(counts: Sequence[int]) -> float | None:
    """Max over mean (``None`` when there is nothing to spread)."""
    total = sum(counts)
    if not counts or total == 0:
        return None
    return max(counts) * len(counts) / total


def spread(counts: Sequence[int]) -> float | None:
    return statistics.pstdev(counts) if counts else None


def _replica_skew(step: PlacementStep) -> float | None:
    return skew(step.replicas_per_broker)


def _replica_stddev(step: PlacementStep) -> float | None:
    return spread(step.replicas_per_broker)


def _leader_skew(step: PlacementStep) -> float | None:
    return skew(step.leaders_per_broker)


def _leader_stddev(step: PlacementStep) -> float | None:
    return spread(step.leaders_per_broker)


def _single_rack(step: PlacementStep) -> float | None:
    return None if step.single_rack is None else float(step.single_rack)


def _stranded(step: PlacementStep) -> float | None:
    return float(step.stranded)


def _moved(step: PlacementStep) -> float | None:
    return float(step.replicas_moved) if step.index else None


def _data_moved(step: PlacementStep) -> float | None:
    return step.gb_moved if step.index else None


def _reassignment_seconds(step: PlacementStep) -> float | None:
    return step.reassignment_seconds if step.index else None


def _unavailable_seconds(step: PlacementStep) -> float | None:
    return step.unavailable_seconds if step.index else None


PLACEMENT_METRICS = (
    PlacementMetric(
        "broker-replica-skew",
        "replicas on the most loaded live broker over the mean (1 = perfectly even)",
        "max/mean",
        "lower",
        _replica_skew,
        headline="Which keeps brokers balanced (replicas)?",
    ),
    PlacementMetric(
        "broker-replica-stddev",
        "standard deviation of the replicas per live broker",
        "replicas",
        "lower",
        _replica_stddev,
    ),
    PlacementMetric(
        "broker-leader-skew",
        "preferred leaders (first replicas) on the busiest live broker over the mean",
        "max/mean",
        "lower",
        _leader_skew,
        headline="Which spreads leadership evenly?",
    ),
    PlacementMetric(
        "broker-leader-stddev",
        "standard deviation of the preferred leaders per live broker",
        "partitions",
        "lower",
        _leader_stddev,
    ),
    PlacementMetric(
        "single-rack-partitions",
        "partitions with every replica on one rack (lost with that rack; none without racks "
        "or with one replica)",
        "partitions",
        "lower",
        _single_rack,
        headline="Which keeps replicas on distinct racks?",
    ),
    PlacementMetric(
        "stranded-partitions",
        "partitions with no live replica left (every replica on a lost rack): offline, and no "
        "plan can move them",
        "partitions",
        "lower",
        _stranded,
    ),
    PlacementMetric(
        "replicas-moved",
        "replicas the change's plan adds to brokers that did not hold them",
        "replicas",
        "lower",
        _moved,
    ),
    PlacementMetric(
        "data-moved",
        "data the change's plan copies: each new replica's partition size",
        "GB",
        "lower",
        _data_moved,
        headline="Which moves the least data?",
    ),
    PlacementMetric(
        "reassignment-seconds",
        "time the engine took to carry the change's plan out (0 for an empty plan)",
        "s",
        "lower",
        _reassignment_seconds,
    ),
    PlacementMetric(
        "reassignment-unavailable-seconds",
        "partition-seconds without a live leader in the engine, from the change until its "
        "reassignment completed",
        "partition-seconds",
        "lower",
        _unavailable_seconds,
    ),
)

"""Assignor benchmarks: ``python tests/benchmarks/run.py assignors [--quick]``.

Cases:

* **kafka-scale**: Kafka's large assignor test, 500 topics x 2,000 partitions (1,000,000) and 2,000
  members with identical subscriptions, for ``range`` and ``roundrobin`` (targets: 0.7 s each, peak
  memory under 2 GiB), side by side with kafka-python's RangePartitionAssignor and
  RoundRobinPartitionAssignor (target: at least 5x faster); ``uniform`` and ``weighted-sticky`` for
  reference.
* **jmh-grid**: the corners of Kafka's JMH assignor grid, 100 and 10,000 members, 10 partitions per
  member, 10 and 1,000 topics, for ``range``, ``roundrobin`` and ``uniform``, plus ``uniform`` with
  heterogeneous subscriptions.
* **10k/1k**: 10,000 partitions over 1,000 members, every assignor of this module and kafka-python.
* **zipf**: ``weighted-sticky`` against the count-based assignors under Zipf-skewed loads (time and
  max/mean load).

Each timing is one ``assign()`` call from public input (a ``GroupSubscription`` built beforehand)
to public result (a ``GroupAssignment``); kafka-python's inputs are built outside the timing too.
Best and median of several runs are reported. ``--quick`` shrinks the big cases tenfold and skips
kafka-python at the 1,000,000 scale.
"""

from __future__ import annotations

import gc
import json
import resource
import statistics
import time
import tracemalloc
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from coordkit.plugins import get_plugin_manager
from coordkit.strategies.assignment import (
    GroupAssignment,
    GroupSubscription,
    MemberSubscription,
    TopicMetadata,
)
from coordkit.strategies.assignment_io import member_loads

TARGET_SECONDS = {"range": 0.7, "roundrobin": 0.7}
TARGET_SPEEDUP = 5.0
MEMORY_LIMIT_MIB = 2048


class Case(NamedTuple):
    name: str
    assignor: str
    topics: int
    partitions: int
    members: int


class KafkaPythonMember(NamedTuple):
    """What kafka-python's assignors read from a JoinGroup response member."""

    member_id: str
    group_instance_id: str | None
    metadata: Any


class KafkaPythonCluster:
    """The one ClusterMetadata method kafka-python's range and round-robin assignors call."""

    def __init__(self, partitions: dict[str, int]):
        self._partitions = {t: set(range(n)) for t, n in partitions.items()}

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return self._partitions.get(topic)


def identical_group(topics: int, partitions_per_topic: int, members: int) -> GroupSubscription:
    names = [f"topic-{t:04}" for t in range(topics)]
    return GroupSubscription(
        dict.fromkeys(names, partitions_per_topic),
        {f"consumer-{m:05}": MemberSubscription(names) for m in range(members)},
    )


def heterogeneous_group(topics: int, partitions_per_topic: int, members: int) -> GroupSubscription:
    """Half the members subscribe to every topic, the other half to the first half of the topics."""
    names = [f"topic-{t:04}" for t in range(topics)]
    half = names[: max(1, topics // 2)]
    return GroupSubscription(
        dict.fromkeys(names, partitions_per_topic),
        {f"consumer-{m:05}": MemberSubscription(names if m % 2 else half) for m in range(members)},
    )


def zipf_group(
    topics: int, partitions_per_topic: int, members: int, exponent: float = 0.9
) -> GroupSubscription:
    rng = np.random.default_rng(42)
    loads = 1000.0 / np.arange(1, topics * partitions_per_topic + 1) ** exponent
    rng.shuffle(loads)
    names = [f"topic-{t:04}" for t in range(topics)]
    metadata = {
        name: TopicMetadata(
            partitions_per_topic,
            loads=loads[i * partitions_per_topic : (i + 1) * partitions_per_topic],
        )
        for i, name in enumerate(names)
    }
    return GroupSubscription(
        metadata, {f"consumer-{m:05}": MemberSubscription(names) for m in range(members)}
    )


def time_calls(call: Callable[[], object], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        gc.collect()
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return times


def peak_mib(call: Callable[[], object]) -> float:
    """Peak memory allocated during one call (tracemalloc sees Python and numpy allocations)."""
    gc.collect()
    tracemalloc.start()
    try:
        call()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak / 2**20


def process_peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def kafka_python_inputs(
    group: GroupSubscription,
) -> tuple[KafkaPythonCluster, list[KafkaPythonMember]]:
    from kafka.coordinator.assignors.range import RangePartitionAssignor

    cluster = KafkaPythonCluster({t: m.partitions for t, m in group.topics.items()})
    members = [
        KafkaPythonMember(m, s.instance_id, RangePartitionAssignor.metadata(list(s.topics)))
        for m, s in group.members.items()
    ]
    return cluster, members


def kafka_python_assignor(name: str) -> Any:
    if name == "range":
        from kafka.coordinator.assignors.range import RangePartitionAssignor

        return RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    return RoundRobinPartitionAssignor


def check_same_as_kafka_python(ours: GroupAssignment, theirs: dict[str, Any]) -> bool:
    """Both implement Kafka's rules, so the assignments must be identical.

    kafka-python lists a topic with no partitions for a member as ``(topic, [])``; ignore those.
    """
    for member, assignment in theirs.items():
        expected = {t: sorted(ps) for t, ps in assignment.assignment if ps}
        if ours.by_topic(member) != expected:
            return False
    return True


class Report:
    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def add(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        print(json.dumps({"bench": "assignors", **row}), flush=True)

    def table(self) -> None:
        columns = [
            ("case", "case", "{}"),
            ("assignor", "assignor", "{}"),
            ("partitions", "partitions", "{:,}"),
            ("members", "members", "{:,}"),
            ("topics", "topics", "{:,}"),
            ("best_s", "best s", "{:.4f}"),
            ("median_s", "median s", "{:.4f}"),
            ("target_s", "target s", "{}"),
            ("peak_mib", "peak MiB", "{:.0f}"),
            ("kafka_python_s", "kafka-python s", "{:.3f}"),
            ("speedup", "speedup", "{:.1f}x"),
            ("load_max_mean", "load max/mean", "{:.3f}"),
            ("load_max_mean_bound", "best possible", "{:.3f}"),
        ]
        header = [title for _, title, _ in columns]
        lines = [header]
        for row in self.rows:
            lines.append(
                [
                    fmt.format(row[key]) if row.get(key) is not None else ""
                    for key, _, fmt in columns
                ]
            )
        widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
        print()
        for n, line in enumerate(lines):
            print("  ".join(cell.rjust(w) for cell, w in zip(line, widths, strict=True)))
            if n == 0:
                print("  ".join("-" * w for w in widths))


def run_case(
    report: Report,
    case: Case,
    group: GroupSubscription,
    repeats: int,
    *,
    kafka_python: bool = False,
    memory: bool = False,
    loads: bool = False,
) -> GroupAssignment:
    assignor = get_plugin_manager().assignor(case.assignor)
    result = assignor.assign(group)  # warm-up, and the result to check
    times = time_calls(lambda: assignor.assign(group), repeats)
    row: dict[str, Any] = {
        "case": case.name,
        "assignor": case.assignor,
        "partitions": case.partitions,
        "members": case.members,
        "topics": case.topics,
        "best_s": min(times),
        "median_s": statistics.median(times),
        "target_s": TARGET_SECONDS.get(case.assignor) if case.name == "kafka-scale" else None,
    }
    if memory:
        row["peak_mib"] = peak_mib(lambda: assignor.assign(group))
        row["process_peak_mib"] = process_peak_mib()
        row["memory_limit_mib"] = MEMORY_LIMIT_MIB
    if loads:
        values = list(member_loads(group, result).values())
        mean = sum(values) / len(values)
        row["load_max_mean"] = max(values) / mean
        # No assignment beats max(mean, heaviest partition) / mean.
        heaviest = max(max(m.loads or (1.0,)) for m in group.topics.values())
        row["load_max_mean_bound"] = max(mean, heaviest) / mean
    if kafka_python:
        cluster, members = kafka_python_inputs(group)
        theirs_assignor = kafka_python_assignor(case.assignor)
        theirs = theirs_assignor.assign(cluster, members)
        kp_times = time_calls(lambda: theirs_assignor.assign(cluster, members), 2)
        row["kafka_python_s"] = min(kp_times)
        row["speedup"] = min(kp_times) / min(times)
        row["target_speedup"] = TARGET_SPEEDUP
        row["same_result_as_kafka_python"] = check_same_as_kafka_python(result, theirs)
        del cluster, members, theirs
    report.add(row)
    return result


def main(flags: Sequence[str]) -> None:
    quick = "--quick" in flags
    report = Report()
    scale = 10 if quick else 1

    # Kafka's large test: 500 topics x 2,000 partitions, 2,000 members, identical subscriptions.
    topics, per_topic, members = 500 // scale, 2000, 2000 // scale
    group = identical_group(topics, per_topic, members)
    partitions = topics * per_topic
    for name in ("range", "roundrobin"):
        run_case(
            report,
            Case("kafka-scale", name, topics, partitions, members),
            group,
            3 if quick else 5,
            memory=True,
            kafka_python=not quick,  # kafka-python's round-robin alone takes ~15 s at full scale
        )
    for name in ("uniform", "weighted-sticky"):
        run_case(report, Case("kafka-scale", name, topics, partitions, members), group, 3)
    del group

    # JMH grid corners: 10 partitions per member.
    grid = [(100, 10), (100, 1000), (10_000, 10), (10_000, 1000)]
    if quick:
        grid = [(100, 10), (100, 1000), (1000, 10), (1000, 1000)]
    for grid_members, grid_topics in grid:
        total = 10 * grid_members
        per = max(1, total // grid_topics)
        group = identical_group(grid_topics, per, grid_members)
        for name in ("range", "roundrobin", "uniform"):
            run_case(
                report,
                Case("jmh-grid", name, grid_topics, grid_topics * per, grid_members),
                group,
                5,
            )
        hetero = heterogeneous_group(grid_topics, per, grid_members)
        run_case(
            report,
            Case("jmh-grid-hetero", "uniform", grid_topics, grid_topics * per, grid_members),
            hetero,
            3,
        )

    # 10,000 partitions over 1,000 members.
    group = identical_group(100, 100, 1000)
    for name in ("range", "roundrobin"):
        run_case(report, Case("10k/1k", name, 100, 10_000, 1000), group, 7, kafka_python=True)
    for name in ("range-ceil", "uniform", "weighted-sticky"):
        run_case(report, Case("10k/1k", name, 100, 10_000, 1000), group, 7)

    # Zipf-skewed loads: weighted-sticky against the count-based assignors.
    # Loads 1000 / rank^0.8: the heaviest partition stays below the mean share, so a balanced
    # assignment exists and the count-based assignors' imbalance shows.
    zipf_topics, zipf_per, zipf_members = (10, 1000, 20) if not quick else (10, 100, 10)
    group = zipf_group(zipf_topics, zipf_per, zipf_members, exponent=0.8)
    for name in ("weighted-sticky", "range", "roundrobin", "uniform"):
        run_case(
            report,
            Case("zipf", name, zipf_topics, zipf_topics * zipf_per, zipf_members),
            group,
            3,
            loads=True,
        )

    report.table()
    print(f"\nprocess peak RSS: {process_peak_mib():.0f} MiB")

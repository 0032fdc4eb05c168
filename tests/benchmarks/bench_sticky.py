"""Benchmarks for the ``sticky`` and ``cooperative-sticky`` assignors at Kafka's scale.

``python tests/benchmarks/run.py sticky [--quick]``

Kafka's large tests (``AbstractStickyAssignorTest``): 500 topics x 2,000 partitions (1,000,000)
and 2,000 members subscribed to every topic; the same with the last member subscribed to one topic
only (the general assignment); each run fresh and with every member but one reporting what it owns.
Extra cases (no target): one member joins a group that owns everything (partitions move; the
cooperative assignor withholds them); half of a heterogeneous group joins at once (500,000 moves);
rack-aware assignment (KIP-881) on Kafka's rack-aware test size (50 topics), fresh and with owned
partitions that ignore racks. And kafka-python's sticky assignor side by side on 10,000 partitions
/ 1,000 members (target: 100x faster).

Every case runs in its own interpreter so its peak RSS (``ru_maxrss``: input and assignment) is its
own. Timing covers one ``assign()`` call, GroupSubscription in, GroupAssignment out; the table shows
the best and median wall time of the repeats and the CPU time of the best one (the machine may be
shared). Targets are reported, never asserted.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from coordkit.strategies.assignment import (
    GroupAssignment,
    GroupSubscription,
    MemberSubscription,
    TopicMetadata,
)

# name -> (assignor, scenario, full size, quick size, target seconds or None)
# size: (topics, partitions per topic, members)
CASES: dict[str, tuple[str, str, tuple[int, int, int], tuple[int, int, int], float | None]] = {
    "identical-fresh": ("sticky", "identical-fresh", (500, 2000, 2000), (50, 200, 200), 0.3),
    "identical-owned": ("sticky", "identical-owned", (500, 2000, 2000), (50, 200, 200), 1.6),
    "general-fresh": ("sticky", "general-fresh", (500, 2000, 2000), (50, 200, 200), 4.0),
    "general-owned": ("sticky", "general-owned", (500, 2000, 2000), (50, 200, 200), 4.0),
    "coop-identical-fresh": (
        "cooperative-sticky",
        "identical-fresh",
        (500, 2000, 2000),
        (50, 200, 200),
        0.3,
    ),
    "coop-identical-owned": (
        "cooperative-sticky",
        "identical-owned",
        (500, 2000, 2000),
        (50, 200, 200),
        1.6,
    ),
    "coop-general-fresh": (
        "cooperative-sticky",
        "general-fresh",
        (500, 2000, 2000),
        (50, 200, 200),
        4.0,
    ),
    "coop-general-owned": (
        "cooperative-sticky",
        "general-owned",
        (500, 2000, 2000),
        (50, 200, 200),
        4.0,
    ),
    "identical-one-joins": (
        "sticky",
        "identical-one-joins",
        (500, 2000, 2000),
        (50, 200, 200),
        None,
    ),
    "coop-identical-one-joins": (
        "cooperative-sticky",
        "identical-one-joins",
        (500, 2000, 2000),
        (50, 200, 200),
        None,
    ),
    "general-half-joins": ("sticky", "general-half-joins", (500, 2000, 2000), (50, 200, 200), None),
    "rack-identical-fresh": (
        "sticky",
        "rack-identical-fresh",
        (50, 2000, 2000),
        (10, 200, 200),
        None,
    ),
    "rack-general-fresh": ("sticky", "rack-general-fresh", (50, 2000, 2000), (10, 200, 200), None),
    "rack-identical-misaligned": (
        "sticky",
        "rack-identical-misaligned",
        (50, 2000, 2000),
        (10, 200, 200),
        None,
    ),
}
KAFKA_PYTHON_SIZE = {False: (10, 1000, 1000), True: (10, 200, 200)}
RACKS = ("a", "b", "c")


def _topics(count: int) -> list[str]:
    return [f"t{i:03d}" for i in range(count)]


def _members(count: int) -> list[str]:
    return [f"consumer-{i:04d}" for i in range(count)]


def build_group(scenario: str, size: tuple[int, int, int]) -> GroupSubscription:
    """The input of the timed call (building it, including a first assignment, is not timed).

    Also the coordkit side of ``bench_kafka_java`` (its Java harness builds the same groups).
    """
    from coordkit_assignors.sticky import StickyAssignor

    topic_count, partitions, member_count = size
    topics = _topics(topic_count)
    names = _members(member_count)
    general = "general" in scenario
    racked = scenario.startswith("rack")

    def subscription(i: int) -> list[str]:
        return topics[:1] if general and i == member_count - 1 else topics

    if racked:
        # replicas on two of three racks, members spread over the three racks
        metas: dict[str, Any] = {
            t: TopicMetadata(
                partitions,
                replica_racks=[(RACKS[p % 3], RACKS[(p + 1) % 3]) for p in range(partitions)],
            )
            for t in topics
        }
    else:
        metas = dict.fromkeys(topics, partitions)
    rack_of = {n: RACKS[i % 3] if racked else None for i, n in enumerate(names)}
    if scenario.endswith("fresh"):
        return GroupSubscription(
            metas,
            {n: MemberSubscription(subscription(i), rack=rack_of[n]) for i, n in enumerate(names)},
        )
    if scenario.endswith("one-joins"):
        # Everyone owns a fresh assignment, then one more member joins: partitions must move.
        first = StickyAssignor().assign(
            GroupSubscription(metas, {n: MemberSubscription(topics) for n in names})
        )
        members = {n: MemberSubscription(topics, owned=first.owned(n), generation=1) for n in names}
        members["consumer-new"] = MemberSubscription(topics)
        return GroupSubscription(metas, members)
    if scenario.endswith("leaves"):
        # Everyone owned a fresh assignment; the last member left: only its partitions move.
        first = StickyAssignor().assign(
            GroupSubscription(metas, {n: MemberSubscription(topics) for n in names})
        )
        return GroupSubscription(
            metas,
            {n: MemberSubscription(topics, owned=first.owned(n), generation=1) for n in names[:-1]},
        )
    if scenario.endswith("half-joins"):
        # Half the members held everything; the other half joins now.
        old = {n: MemberSubscription(subscription(i)) for i, n in enumerate(names) if i % 2 == 0}
        first = StickyAssignor().assign(GroupSubscription(metas, old))
        return GroupSubscription(
            metas,
            {
                n: MemberSubscription(
                    subscription(i), owned=first.owned(n) if n in old else {}, generation=1
                )
                for i, n in enumerate(names)
            },
        )
    # "owned": every member but the first reports what a fresh assignment gave it (generation 1);
    # "misaligned": what a fresh assignment that ignored racks gave it
    fresh = GroupSubscription(
        metas,
        {
            n: MemberSubscription(
                subscription(i), rack=None if scenario.endswith("misaligned") else rack_of[n]
            )
            for i, n in enumerate(names)
        },
    )
    first = StickyAssignor().assign(fresh)
    return GroupSubscription(
        metas,
        {
            n: MemberSubscription(subscription(i), rack=rack_of[n])
            if i == 0
            else MemberSubscription(
                subscription(i), owned=first.owned(n), generation=1, rack=rack_of[n]
            )
            for i, n in enumerate(names)
        },
    )


def _timed(call: Callable[[], Any], repeats: int) -> tuple[list[float], float, Any]:
    walls: list[float] = []
    best_cpu, result = float("inf"), None
    for _ in range(repeats):
        result = None  # freeing the previous result is not part of the next call
        started, started_cpu = time.perf_counter(), time.process_time()
        result = call()
        wall, cpu = time.perf_counter() - started, time.process_time() - started_cpu
        if not walls or wall < min(walls):
            best_cpu = cpu
        walls.append(wall)
    return walls, best_cpu, result


def _summary(result: GroupAssignment) -> dict[str, int]:
    counts = result.counts()
    withheld = sum(len(result.withheld_indices(m)) for m in result)
    return {
        "min_count": min(counts.values()),
        "max_count": max(counts.values()),
        "withheld": withheld,
    }


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_case(name: str, quick: bool) -> dict[str, Any]:
    """Runs in a child interpreter: one case, one JSON line."""
    from coordkit.plugins import get_plugin_manager

    assignor_name, scenario, full, small, target = CASES[name]
    size = small if quick else full
    group = build_group(scenario, size)
    assignor = get_plugin_manager().assignors.get(assignor_name)
    rss_before = _peak_rss_mib()
    repeats = 3 if scenario != "general-half-joins" or quick else 1
    walls, cpu, result = _timed(lambda: assignor.assign(group), repeats)
    return {
        "bench": "sticky",
        "case": name,
        "assignor": assignor_name,
        "partitions": size[0] * size[1],
        "members": size[2],
        "wall_best_s": round(min(walls), 4),
        "wall_median_s": round(statistics.median(walls), 4),
        "cpu_best_s": round(cpu, 4),
        "repeats": repeats,
        "peak_rss_mib": round(_peak_rss_mib(), 1),
        "peak_rss_before_assign_mib": round(rss_before, 1),
        "target_s": None if quick else target,
        **_summary(result),
    }


def run_kafka_python(quick: bool) -> dict[str, Any]:
    """Ours and kafka-python's StickyPartitionAssignor on the same fresh group, side by side."""
    from types import SimpleNamespace

    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

    from coordkit_assignors.sticky import StickyAssignor

    topic_count, partitions, member_count = KAFKA_PYTHON_SIZE[quick]
    topics = _topics(topic_count)
    names = _members(member_count)
    group = GroupSubscription(
        dict.fromkeys(topics, partitions), {n: MemberSubscription(topics) for n in names}
    )
    ours_walls, ours_cpu, ours = _timed(lambda: StickyAssignor().assign(group), 5)

    class Cluster:
        def topics(self) -> set[str]:
            return set(topics)

        def partitions_for_topic(self, topic: str) -> set[int] | None:
            return set(range(partitions)) if topic in topics else None

    members = [
        SimpleNamespace(member_id=n, metadata=ConsumerProtocolSubscription(0, topics, b""))
        for n in names
    ]
    theirs_walls, theirs_cpu, theirs = _timed(
        lambda: StickyPartitionAssignor().assign(Cluster(), members), 1
    )
    their_counts = [len(a.partitions()) if hasattr(a, "partitions") else 0 for a in theirs.values()]
    return {
        "bench": "sticky",
        "case": "vs-kafka-python",
        "assignor": "sticky",
        "partitions": topic_count * partitions,
        "members": member_count,
        "wall_best_s": round(min(ours_walls), 4),
        "wall_median_s": round(statistics.median(ours_walls), 4),
        "cpu_best_s": round(ours_cpu, 4),
        "kafka_python_wall_s": round(theirs_walls[0], 3),
        "kafka_python_cpu_s": round(theirs_cpu, 3),
        "speedup_wall_best": round(theirs_walls[0] / min(ours_walls), 1),
        "speedup_cpu": round(theirs_cpu / ours_cpu, 1),
        "kafka_python_counts": [min(their_counts), max(their_counts)] if their_counts else None,
        "peak_rss_mib": round(_peak_rss_mib(), 1),
        "target_speedup": None if quick else 100,
        **_summary(ours),
    }


def _child(args: list[str]) -> dict[str, Any]:
    env = dict(os.environ)
    proc = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, env=env, check=False
    )
    if proc.returncode != 0:
        error = proc.stderr.strip().splitlines()[-1:] or ["failed"]
        if "No module named 'kafka'" in error[0]:
            error = ["kafka-python is not installed: pip install 'coordkit[bench]'"]
        return {
            "bench": "sticky",
            "case": "vs-kafka-python" if args[0] == "--kafka-python" else args[1],
            "error": error,
        }
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def _verdict(row: dict[str, Any]) -> str:
    if "error" in row:
        return "ERROR"
    if row.get("target_s"):
        return "ok" if row["wall_best_s"] <= row["target_s"] else "OVER"
    if row.get("target_speedup"):
        return "ok" if row["speedup_wall_best"] >= row["target_speedup"] else "UNDER"
    return "-"


def main(flags: list[str]) -> None:
    quick = "--quick" in flags
    rows = []
    for name in CASES:
        rows.append(_child(["--case", name, *(["--quick"] if quick else [])]))
    rows.append(_child(["--kafka-python", "-", *(["--quick"] if quick else [])]))
    header = (
        f"{'case':24} {'assignor':19} {'parts':>9} {'members':>7} {'best s':>8} {'median s':>8} "
        f"{'cpu s':>7} {'RSS MiB':>8} {'target':>8} {'':6}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        if "error" in row:
            print(f"{row['case']:24} ERROR {row['error']}")
            continue
        target = (
            f"{row['target_s']}s"
            if row.get("target_s")
            else f"x{row['target_speedup']}"
            if row.get("target_speedup")
            else "-"
        )
        print(
            f"{row['case']:24} {row['assignor']:19} {row['partitions']:>9,} {row['members']:>7,} "
            f"{row['wall_best_s']:>8.3f} {row['wall_median_s']:>8.3f} {row['cpu_best_s']:>7.3f} "
            f"{row['peak_rss_mib']:>8.0f} {target:>8} {_verdict(row):6}"
        )
        if row["case"] == "vs-kafka-python":
            print(
                f"{'':24} kafka-python        {'':>9} {'':>7} {row['kafka_python_wall_s']:>8.3f} {'':>8} "
                f"{row['kafka_python_cpu_s']:>7.3f}   speedup x{row['speedup_wall_best']} (cpu x{row['speedup_cpu']})"
            )
    for row in rows:
        print(json.dumps(row, sort_keys=True))


if __name__ == "__main__":
    arguments = sys.argv[1:]
    quick_mode = "--quick" in arguments
    if arguments[0] == "--case":
        print(json.dumps(run_case(arguments[1], quick_mode)))
    elif arguments[0] == "--kafka-python":
        print(json.dumps(run_kafka_python(quick_mode)))
    else:
        main(arguments)

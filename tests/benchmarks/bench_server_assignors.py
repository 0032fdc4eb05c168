"""coordkit's server-side ``uniform`` and ``range`` side by side with Kafka 4.4's own (the group
coordinator's ``UniformAssignor`` and ``RangeAssignor`` from the fetched jars, in one JVM driven by
tests/harness/kafka_server_assignors).

``python tests/benchmarks/run.py server_assignors [--quick] [--rounds=N]``

Cases (topics × partitions per topic, members): ``uniform`` at 1,000,000 partitions (500 × 2,000)
and 2,000 members, fresh and with a current target after one member left; ``range`` fresh at the
same size; ``--quick``: 100 × 1,000 partitions and 500 members. Both sides get the same group (the
JVM reads it once; timing excludes building it) and their results are checked equal first.
Timing: one ``assign`` call, group in, target out; the two sides interleave one round each (the
machine may be shared) after two warm-up calls each; the table shows the best round and the
median. ``ratio`` is Kafka's best over coordkit's (above 1: coordkit is faster).
"""

from __future__ import annotations

import os
import statistics
import time
import uuid

from coordkit.plugins import get_plugin_manager
from coordkit.strategies.target_assignment import (
    GroupSpec,
    MemberSpec,
    TopicDescriber,
    TopicDescription,
)
from harness.kafka_server_assignors import KafkaServerAssignors

FULL = (500, 2000, 2000)
QUICK = (100, 1000, 500)
CASES = (("uniform", "fresh"), ("uniform", "one-left"), ("range", "fresh"))


def build(size: tuple[int, int, int], scenario: str) -> tuple[GroupSpec, TopicDescriber]:
    topic_count, partitions, member_count = size
    topics = TopicDescriber(
        TopicDescription(uuid.UUID(int=(7919 * (t + 1)) << 64 | t), f"t{t:03d}", partitions)
        for t in range(topic_count)
    )
    ids = list(topics.topics)
    group = GroupSpec({f"consumer-{m:04d}": MemberSpec(ids) for m in range(member_count)})
    if scenario == "one-left":
        previous = get_plugin_manager().server_assignor("uniform").assign(group, topics)
        group = group.with_assignment(previous)
        leaving = next(iter(group.members))
        group = GroupSpec({m: s for m, s in group.members.items() if m != leaving})
    return group, topics


def main(flags: list[str]) -> None:
    quick = "--quick" in flags
    rounds = next((int(f.split("=", 1)[1]) for f in flags if f.startswith("--rounds=")), 5)
    size = QUICK if quick else FULL
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    print(f"{'case':<20}{'partitions':>11}{'members':>9}{'coordkit ms':>13}{'kafka ms':>10}"
          f"{'median ck/kf':>16}{'ratio':>8}")  # fmt: skip
    with KafkaServerAssignors(jvm_options=("-Xms4g", "-Xmx4g")) as kafka:
        for name, scenario in CASES:
            group, topics = build(size, scenario)
            assignor = get_plugin_manager().server_assignor(name)
            kafka.load(group, topics)
            java_times: list[float] = []
            ours: list[float] = []
            for _ in range(2):  # warm-up (the JVM's JIT)
                kafka.time(name, 1)
                assignor.assign(group, topics)
            same = kafka.assign(name, group, topics) == assignor.assign(group, topics)
            kafka.load(group, topics)
            for _ in range(rounds):
                java_times.append(kafka.time(name, 1)[0] / 1e6)
                started = time.perf_counter()
                assignor.assign(group, topics)
                ours.append((time.perf_counter() - started) * 1e3)
            partitions = size[0] * size[1]
            print(
                f"{name + ' ' + scenario:<20}{partitions:>11,}{len(group.members):>9,}"
                f"{min(ours):>13.1f}{min(java_times):>10.1f}"
                f"{statistics.median(ours):>8.0f}/{statistics.median(java_times):<7.0f}"
                f"{min(java_times) / min(ours):>8.2f}" + ("" if same else "  RESULTS DIFFER"),
                flush=True,
            )

"""coordkit's assignors side by side with Kafka's Java assignors on the same groups.

``python tests/benchmarks/run.py kafka_java [--quick] [--rounds=N] [--budget=S] [--case=NAME,...]``

The Kafka side is Kafka's own ``RangeAssignor``, ``RoundRobinAssignor``, ``StickyAssignor`` and
``CooperativeStickyAssignor``, and the group coordinator's ``UniformAssignor`` (KIP-848), compiled
from Kafka's source (3.8.0 by default) by ``tests/benchmarks/kafka_java/build.sh KAFKA_SOURCE``,
running in one JVM that this benchmark drives line by line
(``kafka_java/src/.../KafkaAssignorBench.java``). Both sides build the same groups (topics
``t000``..., members ``consumer-0000``...; see ``bench_sticky.build_group``), and every case
compares an order-free checksum of the two assignments: coordkit must give Kafka's answer (except
``uniform``, which hands out the larger quotas differently by design: ``same`` shows ``n/a``).

Timing, both sides: one ``assign`` call, group in, assignment out, inputs built beforehand. Kafka:
``ConsumerPartitionAssignor.assign(Cluster, GroupSubscription)`` (``kafka ms``) and the assignor's
``assignPartitions(partitionsPerTopic, subscriptions)`` without the metadata lookup (``core ms``);
``UniformAssignor.assign(GroupSpec, SubscribedTopicDescriber)`` for both figures of ``uniform``;
logging is slf4j's no-op logger (Kafka's sticky assignor logs the whole assignment at INFO). The
JVM runs with a fixed 4 GiB heap and is warmed up on each case first. The machine may be shared, so
the two sides run interleaved, one call each per round (``--rounds``, default 9; five times as many
for cases under 0.1 s, fewer when Kafka's rounds would take over ``--budget`` seconds, default 60),
and the table shows the best of the rounds (the JSON lines the medians too). ``ratio`` is Kafka's
best over coordkit's best (above 1: coordkit is faster), ``ratio core`` the same against Kafka's
core time.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from coordkit.plugins import get_plugin_manager
from coordkit.strategies.assignment import GroupAssignment, GroupSubscription, java_string_key

HERE = Path(__file__).parent
HARNESS = HERE / "kafka_java"
CLASSPATH_FILE = HARNESS / "build" / "classpath"
MAIN_CLASS = "org.apache.kafka.clients.consumer.KafkaAssignorBench"
JVM_OPTIONS = ("-Xms4g", "-Xmx4g")


class Case(NamedTuple):
    name: str
    assignor: str
    #: the Java harness's scenario: fresh, owned, leaves, joins, general-fresh, general-owned
    scenario: str
    #: (topics, partitions per topic, members)
    size: tuple[int, int, int]


MILLION = (500, 2000, 2000)  # Kafka's large sticky test: 1,000,000 partitions, 2,000 members
TEN_THOUSAND = (100, 100, 1000)
GENERAL = (500, 200, 2000)  # Kafka's large test with unequal subscriptions: 100,000 partitions
CASES = (
    Case("range", "range", "fresh", MILLION),
    Case("roundrobin", "roundrobin", "fresh", MILLION),
    Case("sticky-fresh", "sticky", "fresh", MILLION),
    Case("coop-fresh", "cooperative-sticky", "fresh", MILLION),
    Case("sticky-owned", "sticky", "owned", MILLION),
    Case("coop-owned", "cooperative-sticky", "owned", MILLION),
    Case("sticky-leaves", "sticky", "leaves", MILLION),
    Case("coop-leaves", "cooperative-sticky", "leaves", MILLION),
    Case("sticky-joins", "sticky", "joins", MILLION),
    Case("coop-joins", "cooperative-sticky", "joins", MILLION),
    Case("sticky-10k-fresh", "sticky", "fresh", TEN_THOUSAND),
    Case("sticky-10k-leaves", "sticky", "leaves", TEN_THOUSAND),
    Case("coop-10k-leaves", "cooperative-sticky", "leaves", TEN_THOUSAND),
    Case("general-fresh", "sticky", "general-fresh", GENERAL),
    Case("general-owned", "sticky", "general-owned", GENERAL),
    Case("coop-general-owned", "cooperative-sticky", "general-owned", GENERAL),
    Case("uniform", "uniform", "fresh", MILLION),
    Case("uniform-leaves", "uniform", "leaves", MILLION),
)
#: assignors whose answers are Kafka's by design (coordkit's uniform chooses its larger quotas)
SAME_AS_KAFKA = {"range", "roundrobin", "sticky", "cooperative-sticky"}
#: bench_sticky's scenario names for the Java harness's
PYTHON_SCENARIO = {
    "fresh": "identical-fresh",
    "owned": "identical-owned",
    "leaves": "identical-leaves",
    "joins": "identical-one-joins",
    "general-fresh": "general-fresh",
    "general-owned": "general-owned",
}


def _load_bench_sticky() -> Any:
    spec = importlib.util.spec_from_file_location("bench_sticky_groups", HERE / "bench_sticky.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _splitmix64(z: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    mixed: npt.NDArray[np.uint64] = z ^ (z >> np.uint64(31))
    return mixed


def checksum(group: GroupSubscription, result: GroupAssignment) -> str:
    """The Java harness's digest: sum of splitmix64(member rank << 32 | global index) mod 2^64."""
    ranks = {m: i for i, m in enumerate(sorted(group.members, key=java_string_key))}
    total = 0
    with np.errstate(over="ignore"):
        for member in result:
            indices = np.asarray(result.indices(member), dtype=np.uint64)
            keys = (np.uint64(ranks[member]) << np.uint64(32)) | indices
            total += int(_splitmix64(keys).sum(dtype=np.uint64))
    return str(total % 2**64)


class KafkaJava:
    """The harness JVM, driven one command per line."""

    def __init__(self, classpath: str):
        self.process = subprocess.Popen(
            ["java", *JVM_OPTIONS, "-cp", classpath, MAIN_CLASS],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # slf4j's "no binding" notice
            text=True,
        )

    def ask(self, command: str) -> dict[str, Any]:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the Kafka harness JVM exited (command: {command})")
        reply: dict[str, Any] = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"Kafka harness: {reply['error']} (command: {command})")
        return reply

    def close(self) -> None:
        try:
            self.ask_quit()
        finally:
            self.process.wait(timeout=30)

    def ask_quit(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write("quit\n")
        self.process.stdin.flush()


def _uptime() -> str:
    load = os.getloadavg()
    return f"load average {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f} ({os.cpu_count()} cpus)"


def _scaled(size: tuple[int, int, int], quick: bool) -> tuple[int, int, int]:
    topics, per_topic, members = size
    return (max(1, topics // 10), per_topic, max(1, members // 10)) if quick else size


def run_case(
    java: KafkaJava, bench_sticky: Any, case: Case, quick: bool, rounds: int, budget_s: float
) -> dict[str, Any]:
    size = _scaled(case.size, quick)
    group = bench_sticky.build_group(PYTHON_SCENARIO[case.scenario], size)
    assignor = get_plugin_manager().assignors.get(case.assignor)
    java.ask(f"prepare {case.name} {case.assignor} {case.scenario} {' '.join(map(str, size))}")

    def ours() -> tuple[float, GroupAssignment]:
        started = time.perf_counter()
        result = assignor.assign(group)
        return (time.perf_counter() - started) * 1000, result

    # Warm-up: the JIT compiles Kafka's code (a slow call warms it up by itself).
    started = time.perf_counter()
    warm = java.ask(f"run {case.name} 1")
    java_round = time.perf_counter() - started
    if java_round < 2:
        java.ask(f"run {case.name} 3")
    ours()
    # Slow cases get fewer rounds (at least three), fast ones more: short calls are the noisiest.
    rounds = max(3, min(rounds * (5 if java_round < 0.1 else 1), int(budget_s / java_round)))
    ours_ms: list[float] = []
    kafka_ms: list[float] = []
    core_ms: list[float] = []
    result: GroupAssignment | None = None
    reply = warm
    for _ in range(rounds):
        reply = java.ask(f"run {case.name} 1")
        kafka_ms += reply["ms"]
        core_ms += reply["core_ms"]
        elapsed, result = ours()
        ours_ms.append(elapsed)
    assert result is not None
    counts = result.counts().values()
    same = checksum(group, result) == reply["checksum"]
    return {
        "bench": "kafka_java",
        "case": case.name,
        "assignor": case.assignor,
        "scenario": case.scenario,
        "partitions": size[0] * size[1],
        "members": len(group.members),
        "rounds": rounds,
        "coordkit_ms_best": round(min(ours_ms), 2),
        "coordkit_ms_median": round(statistics.median(ours_ms), 2),
        "kafka_ms_best": round(min(kafka_ms), 2),
        "kafka_ms_median": round(statistics.median(kafka_ms), 2),
        "kafka_core_ms_best": round(min(core_ms), 2),
        "ratio": round(min(kafka_ms) / min(ours_ms), 2),
        "ratio_core": round(min(core_ms) / min(ours_ms), 2),
        "same_result": same if case.assignor in SAME_AS_KAFKA else None,
        "counts": [min(counts), max(counts)],
        "kafka_counts": [reply["min_count"], reply["max_count"]],
    }


def _same(same: bool | None) -> str:
    return "n/a" if same is None else "yes" if same else "NO"


def _flag(flags: Sequence[str], name: str) -> str | None:
    for flag in flags:
        if flag.startswith(f"--{name}="):
            return flag.split("=", 1)[1]
    return None


def main(flags: Sequence[str]) -> None:
    quick = "--quick" in flags
    rounds = int(_flag(flags, "rounds") or (5 if quick else 9))
    budget_s = float(_flag(flags, "budget") or 60)
    wanted = _flag(flags, "case")
    cases = list(CASES)
    if wanted:
        names = wanted.split(",")
        unknown = sorted(set(names) - {c.name for c in CASES})
        if unknown:
            print(
                f"--case: unknown case(s) {', '.join(unknown)}; "
                f"known: {', '.join(c.name for c in CASES)}",
                file=sys.stderr,
            )
            raise SystemExit(2)
        cases = [c for c in CASES if c.name in names]
    if not CLASSPATH_FILE.exists() or shutil.which("java") is None:
        print(
            "kafka_java: the Kafka harness is not built; run "
            "tests/benchmarks/kafka_java/build.sh /path/to/kafka-source-checkout "
            "(needs a JDK and git; builds Kafka 3.8.0's assignors)",
            file=sys.stderr,
        )
        raise SystemExit(2)
    kafka_rev = (HARNESS / "build" / "kafka-rev").read_text().split()
    print(f"Kafka {kafka_rev[-1]} ({kafka_rev[0][:12]}), JVM {' '.join(JVM_OPTIONS)}")
    print(f"before: {_uptime()}", flush=True)
    bench_sticky = _load_bench_sticky()
    java = KafkaJava(CLASSPATH_FILE.read_text().strip())
    rows = []
    try:
        for case in cases:
            row = run_case(java, bench_sticky, case, quick, rounds, budget_s)
            rows.append(row)
            print(json.dumps(row, sort_keys=True), flush=True)
    finally:
        java.close()
    print(f"after: {_uptime()}")
    header = (
        f"{'case':19} {'assignor':19} {'partitions':>10} {'members':>7} {'coordkit ms':>11} "
        f"{'kafka ms':>9} {'core ms':>8} {'ratio':>6} {'ratio core':>10} {'same':>5}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        print(
            f"{row['case']:19} {row['assignor']:19} {row['partitions']:>10,} {row['members']:>7,} "
            f"{row['coordkit_ms_best']:>11.1f} {row['kafka_ms_best']:>9.1f} "
            f"{row['kafka_core_ms_best']:>8.1f} {row['ratio']:>6.2f} {row['ratio_core']:>10.2f} "
            f"{_same(row['same_result']):>5}"
        )
    behind = [r["case"] for r in rows if r["ratio"] < 1 or r["ratio_core"] < 1]
    print(f"behind Kafka: {', '.join(behind) if behind else 'none'}")

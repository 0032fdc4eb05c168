"""Consumer groups: librdkafka consumers of one classic group, eager ``range`` or
``cooperative-sticky``, sharing the partitions of one topic.

Per strategy and size, seconds until the group is Stable with every partition owned by exactly one
member and every member owning some:

* ``cold s`` — the members start at once in a new group: the median of :data:`COLD_STARTS`
  groups, each new (``cold s max`` the slowest). One cold start is a coin toss on both sides:
  members whose JoinGroup misses the first round wait for their next heartbeat (1 s) to learn of
  the second, so single figures land near 0.2, 1 or 2 s;
* ``join s`` — then one member more starts;
* ``kill s`` — then one more member, in a process of its own, starts (not timed) and its process
  is SIGKILLed: it never leaves, so the coordinator notices it only when its session
  (``session.timeout.ms``, 10 s on both sides) runs out, and the others rebalance without it.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vs_kafka.clusters import create_topic

GROUP_PARTITIONS = 60
MEMBER_COUNTS = (10, 50)
STRATEGIES = ("range", "cooperative-sticky")
MEMBER_CONFIG = {"session.timeout.ms": 10000, "heartbeat.interval.ms": 1000}
#: New groups started cold per strategy and size (the median is reported).
COLD_STARTS = 5
#: Seconds a group may take to settle before the figure is reported as nan.
SETTLE_TIMEOUT = 180.0
MEMBER_SCRIPT = Path(__file__).with_name("member_process.py")
Figures = dict[str, float]


class GroupWatch:
    """What each member of one group owns, as its rebalance callbacks tell it."""

    def __init__(self, bootstrap: str, topic: str, strategy: str) -> None:
        from confluent_kafka.admin import AdminClient

        self.bootstrap = bootstrap
        self.topic = topic
        self.strategy = strategy
        self.group = f"g-{strategy}-{time.monotonic_ns()}"
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.owned: dict[int, set[int]] = {}
        self.live: set[int] = set()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.consumers: list[Any] = []
        self.threads: list[threading.Thread] = []
        self.processes: dict[int, subprocess.Popen[str]] = {}
        self.indexes = itertools.count()

    def assigned(self, index: int, partitions: list[int]) -> None:
        with self.lock:
            if self.strategy == "cooperative-sticky":  # incremental: an addition
                self.owned.setdefault(index, set()).update(partitions)
            else:
                self.owned[index] = set(partitions)

    def revoked(self, index: int, partitions: list[int]) -> None:
        with self.lock:
            self.owned.setdefault(index, set()).difference_update(partitions)

    def start_thread_member(self) -> None:
        from confluent_kafka import Consumer

        index = next(self.indexes)
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                             "partition.assignment.strategy": self.strategy, **MEMBER_CONFIG})  # fmt: skip
        consumer.subscribe(
            [self.topic],
            on_assign=lambda _c, ps: self.assigned(index, [p.partition for p in ps]),
            on_revoke=lambda _c, ps: self.revoked(index, [p.partition for p in ps]),
        )
        self.consumers.append(consumer)
        with self.lock:
            self.live.add(index)

        def poll() -> None:
            while not self.stop.is_set():
                consumer.poll(0.1)

        thread = threading.Thread(target=poll, daemon=True)
        thread.start()
        self.threads.append(thread)

    def start_process_member(self) -> int:
        index = next(self.indexes)
        process = subprocess.Popen(
            [sys.executable, str(MEMBER_SCRIPT), self.bootstrap, self.group, self.topic,
             self.strategy], stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.processes[index] = process
        with self.lock:
            self.live.add(index)

        def read() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                with contextlib.suppress(ValueError):
                    change = json.loads(line)
                    if "assigned" in change:
                        self.assigned(index, change["assigned"])
                    if "revoked" in change:
                        self.revoked(index, change["revoked"])

        threading.Thread(target=read, daemon=True).start()
        return index

    def kill_process_member(self, index: int) -> None:
        self.processes[index].kill()
        self.processes[index].wait()
        with self.lock:
            self.live.discard(index)
            self.owned.pop(index, None)

    def settled(self) -> bool:
        """Every live member owns some partition, no partition twice, the group Stable."""
        from confluent_kafka import ConsumerGroupState

        with self.lock:
            counts = [len(self.owned.get(i, ())) for i in self.live]
            covered = set().union(*(self.owned.get(i, set()) for i in self.live))
        if not all(counts) or len(covered) != GROUP_PARTITIONS or sum(counts) != GROUP_PARTITIONS:
            return False
        (described,) = self.admin.describe_consumer_groups([self.group]).values()
        return bool(described.result(10).state == ConsumerGroupState.STABLE)

    def seconds_until_settled(self, started: float) -> float:
        while time.perf_counter() - started < SETTLE_TIMEOUT:
            if self.settled():
                return time.perf_counter() - started
            time.sleep(0.05)
        return float("nan")

    def close(self) -> None:
        self.stop.set()
        for process in self.processes.values():
            process.kill()
            process.wait()
        for thread in self.threads:
            thread.join(5)
        for consumer in self.consumers:
            with contextlib.suppress(Exception):
                consumer.close()


def cold_start(bootstrap: str, topic: str, members: int, strategy: str) -> float:
    """Seconds until a new group of ``members`` started at once is Stable (its members then
    close)."""
    watch = GroupWatch(bootstrap, topic, strategy)
    try:
        started = time.perf_counter()
        for _ in range(members):
            watch.start_thread_member()
        return watch.seconds_until_settled(started)
    finally:
        watch.close()


def group_times(bootstrap: str, topic: str, members: int, strategy: str) -> Figures:
    """Cold starts of ``members``, then one joining, one killed (see the module's docstring)."""
    colds = [cold_start(bootstrap, topic, members, strategy) for _ in range(COLD_STARTS - 1)]
    watch = GroupWatch(bootstrap, topic, strategy)
    try:
        started = time.perf_counter()
        for _ in range(members):
            watch.start_thread_member()
        colds.append(watch.seconds_until_settled(started))
        started = time.perf_counter()
        watch.start_thread_member()
        joined = watch.seconds_until_settled(started)
        victim = watch.start_process_member()
        watch.seconds_until_settled(time.perf_counter())
        started = time.perf_counter()
        watch.kill_process_member(victim)
        killed = watch.seconds_until_settled(started)
    finally:
        watch.close()
    return {
        "cold s": statistics.median(colds), "cold s max": max(colds),
        "join s": joined, "kill s": killed,
    }  # fmt: skip


CASES = ("groups",)


def run(bootstrap: str, case: Callable[[str, Callable[[], Figures]], None]) -> None:
    create_topic(bootstrap, "grouped", GROUP_PARTITIONS)
    for strategy in STRATEGIES:
        for members in MEMBER_COUNTS:
            case(f"group {strategy} x{members}",
                 lambda m=members, s=strategy: group_times(bootstrap, "grouped", m, s))  # type: ignore[misc]  # fmt: skip

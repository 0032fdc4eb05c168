"""Consumer-group benchmarks (issue 7 targets): a member crash in a big group, eager versus
cooperative, per store backend.

A group of 100 consumers over 10,000 partitions (10 topics × 1,000) reaches a stable assignment;
then one consumer crashes (no commit, no LeaveGroup). Reported, from the group history:

* ``crash→stable``: from the crash until every partition is owned again by the survivors of the
  new generation (the crash is only noticed at the session timeout, which this includes);
* ``notice→stable``: from the coordinator noticing (the session timeout firing) until then;
* ``coord s``: the coordinator's own view, from noticing until the last round's assignment was
  stored;
* ``rounds``: join rounds (eager: 1; cooperative: 2 when partitions had to move);
* ``unavail``: distinct partitions without an owner at some point, and ``part·s`` the
  partition-seconds without an owner, from the crash until stable (eager: everything is revoked
  for the rebalance; cooperative: only the crashed member's partitions, until re-assigned).

    python tests/benchmarks/run.py groups [--quick] [--backend=memory|zookeeper|redis ...]
        [--assignor=range|sticky|cooperative-sticky ...] [--consumers=N] [--partitions=N]
        [--session-timeout=S]

(run.py takes every word without a leading dash for a benchmark area: give values with ``=``.)
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import attrs
from bench_engine import backend_env

from coordkit.engine import Cluster, EngineConfig
from coordkit.engine.groups import Consumer
from coordkit.kafka.model import TopicPartition

GROUP = "bench"
TOPICS = 10


@attrs.frozen
class Result:
    backend: str
    assignor: str
    consumers: int
    partitions: int
    setup_seconds: float
    crash_to_stable: float
    notice_to_stable: float
    coordinator_seconds: float
    rounds: int
    unavailable_partitions: int
    unavailable_partition_seconds: float
    notice_unavailable_partition_seconds: float

    def row(self) -> str:
        return (
            f"{self.backend:<9} {self.assignor:<18} {self.consumers:>5} {self.partitions:>7,} "
            f"{self.crash_to_stable:>12.3f} {self.notice_to_stable:>13.3f} "
            f"{self.coordinator_seconds:>8.3f} {self.rounds:>6} {self.unavailable_partitions:>7,} "
            f"{self.unavailable_partition_seconds:>9.1f} {self.setup_seconds:>7.1f}"
        )

    def json(self) -> str:
        return json.dumps({"bench": "groups", **attrs.asdict(self)})


HEADER = (
    f"{'backend':<9} {'assignor':<18} {'cons':>5} {'parts':>7} {'crash→stable':>12} "
    f"{'notice→stable':>13} {'coord s':>8} {'rounds':>6} {'unavail':>7} {'part·s':>9} {'setup':>7}"
)


def _wait(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.01)


def _stable(cluster: Cluster, consumers: list[Consumer], expected: int) -> bool:
    if not cluster.group_stable(GROUP):
        return False
    return sum(len(c.assignment()) for c in consumers) == expected


def crash_one(
    env: Any, assignor: str, consumers: int, partitions: int, session_timeout: float
) -> Result:
    started = time.monotonic()
    config = EngineConfig(
        group_initial_rebalance_delay=1.0,
        offsets_topic_num_partitions=50,
        auto_leader_rebalance=False,
    )
    cluster = Cluster(env.opener(), 3, config=config, seed=7).start()
    try:
        cluster.wait_settled(timeout=300)
        per_topic = partitions // TOPICS
        topics = [f"t{n}" for n in range(TOPICS)]
        for topic in topics:
            cluster.create_topic(topic, per_topic, 1)
        _wait(
            lambda: cluster.settled() and not cluster.view().uninitialised,
            600,
            "topics to be ready",
        )
        members = [
            cluster.start_consumer(
                GROUP,
                topics,
                assignors=(assignor,),
                session_timeout=session_timeout,
                heartbeat_interval=session_timeout / 10,
                rebalance_timeout=60.0,
            )
            for _ in range(consumers)
        ]
        total = per_topic * TOPICS
        _wait(lambda: _stable(cluster, members, total), 600, "the group to be stable")
        setup = time.monotonic() - started
        history = cluster.group_history
        assert history is not None
        history.check()

        victim = members[len(members) // 2]
        survivors = [c for c in members if c is not victim]
        known = len(history.rebalances(GROUP))
        crashed_at = cluster.clock.monotonic()
        victim.crash()
        _wait(lambda: _stable(cluster, survivors, total), 600, "the group to be stable again")
        history.check()
        history.check_owned(GROUP, [TopicPartition(t, p) for t in topics for p in range(per_topic)])
        record = history.rebalances(GROUP)[known]
        stable_at = history.fully_owned_at(GROUP, after=crashed_at) or cluster.clock.monotonic()
        lost = history.unavailability(GROUP, start=crashed_at, end=stable_at)
        after_notice = history.unavailability(GROUP, start=record.started, end=stable_at)
        return Result(
            backend=env.name,
            assignor=assignor,
            consumers=consumers,
            partitions=total,
            setup_seconds=setup,
            crash_to_stable=stable_at - crashed_at,
            notice_to_stable=stable_at - record.started,
            coordinator_seconds=record.duration,
            rounds=record.rounds,
            unavailable_partitions=lost.partitions,
            unavailable_partition_seconds=lost.partition_seconds,
            notice_unavailable_partition_seconds=after_notice.partition_seconds,
        )
    finally:
        cluster.close()


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench_groups", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="20 consumers, 1,000 partitions")
    parser.add_argument("--backend", action="append", choices=["memory", "zookeeper", "redis"])
    parser.add_argument(
        "--assignor", action="append", choices=["range", "sticky", "cooperative-sticky"]
    )
    parser.add_argument("--consumers", type=int)
    parser.add_argument("--partitions", type=int)
    parser.add_argument("--session-timeout", type=float, default=3.0)
    args = parser.parse_args(argv)
    consumers = args.consumers or (20 if args.quick else 100)
    partitions = args.partitions or (1_000 if args.quick else 10_000)
    backends = args.backend or (["memory"] if args.quick else ["memory", "zookeeper", "redis"])
    assignors = args.assignor or ["range", "cooperative-sticky"]
    results: list[Result] = []
    print(HEADER, flush=True)
    for backend in backends:
        with backend_env(backend) as env:
            for assignor in assignors:
                result = crash_one(env, assignor, consumers, partitions, args.session_timeout)
                results.append(result)
                print(result.row(), flush=True)
    print()
    for result in results:
        print(result.json())

"""Partition reassignment benchmark (issue 14): move every replica of 10,000 partitions through
``/admin/reassign_partitions``, with a controller failover halfway, per store backend.

A 4-broker cluster holds topics of 1,000 partitions, replication factor 2, on brokers 0-2;
records are produced and acknowledged first. The plan moves each partition to two brokers among
0-3 that are not both its current ones (the rendezvous placement's choice over four brokers, so
the new broker takes its share), executed with ``reassignment_max_moving`` partitions in flight.
When half the plan is done the controller broker is killed and restarted; the new controller
resumes from the store. Reported: seconds until every partition is at its target and the request
is gone, replicas moved, store operations, leader changes, partition-seconds without a live leader
and the longest single window, and acknowledged records lost (must be 0).

    python tests/benchmarks/run.py reassignment [--backend=memory|zookeeper|redis ...]
        [--partitions=N] [--max-moving=N] [--no-failover]
"""

from __future__ import annotations

import argparse
import json
import time

from bench_engine import backend_env

from coordkit.engine import Cluster, EngineConfig
from coordkit.errors import NoNodeError
from coordkit.kafka import layout
from coordkit.plugins import get_plugin_manager
from coordkit.strategies.placement import ClusterLayout, brokers_from, moved_replicas

TOPIC_SIZE = 1000
HEADER = (
    f"{'backend':<9} {'parts':>7} {'moved':>7} {'failover':>8} {'seconds':>8} {'leaders':>8} "
    f"{'offline':>8} {'part-s':>8} {'longest':>8} {'trips':>7} {'writes':>8} {'lost':>5}"
)


def _wait(predicate: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise SystemExit(f"benchmark: timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def _remaining(cluster: Cluster) -> int:
    try:
        data, _ = cluster.admin_store.get(layout.REASSIGN_PARTITIONS)
    except NoNodeError:
        return 0
    return len(layout.decode_reassignment(data))


def run(env_name: str, partitions: int, max_moving: int, failover: bool) -> dict[str, object]:
    config = EngineConfig(
        auto_leader_rebalance=False,
        reassignment_max_moving=max_moving,
        replica_fetch_wait_max=0.1,
    )
    with backend_env(env_name) as env:
        cluster = Cluster(env.opener(), [0, 1, 2], config=config, record_history=True, seed=1)
        cluster.start()
        try:
            for t, first in enumerate(range(0, partitions, TOPIC_SIZE)):
                count = min(TOPIC_SIZE, partitions - first)
                cluster.create_topic(f"r{t}", count, 2)
            _wait(lambda: cluster.settled() and cluster.converged(), 1800, "topics to settle")
            cluster.start_broker(3)
            _wait(lambda: not cluster.replication.offline(), 600, "every partition led")
            produced = cluster.produce(5)
            _wait(
                lambda: cluster.replication.totals().acked == produced, 600, "records acknowledged"
            )
            acked = produced
            view = cluster.view()
            current = {}
            for p in view.partitions:
                current.setdefault(p.topic, {})[p.partition] = p.replicas
            layout_ = ClusterLayout(tuple(brokers_from([0, 1, 2, 3])), current)
            plan = get_plugin_manager().placement("rendezvous").rebalance(layout_)
            moved = moved_replicas(layout_, plan)
            windows_before, seconds_before = cluster.replication.unavailability()
            leaders_before = cluster.history.leader_changes() if cluster.history else 0
            ops_before = cluster.op_counts()
            started = time.perf_counter()
            cluster.admin.reassign_partitions(plan)
            if failover:
                _wait(lambda: _remaining(cluster) <= len(plan) // 2, 1800, "half the plan")
                victim = cluster.view().controller
                if victim is not None:
                    cluster.kill(victim)
                    cluster.restart(victim)
            _wait(
                lambda: (
                    _remaining(cluster) == 0
                    and cluster.settled()
                    and cluster.converged()
                    and not cluster.converged().under_replicated
                ),
                3600,
                "the reassignment to complete",
            )
            seconds = time.perf_counter() - started
            ops = cluster.op_counts() - ops_before
            windows, offline_seconds = cluster.replication.unavailability()
            totals = cluster.replication.totals()
            status = cluster.admin.reassignment_status(plan)
            if set(status.values()) != {"completed"}:
                raise SystemExit(f"not completed: {sorted(set(status.values()))}")
            problems = cluster.history.violations() if cluster.history else []
            if problems:
                raise SystemExit(f"history violations: {problems[:5]}")
            return {
                "bench": "reassignment",
                "backend": env_name,
                "partitions": partitions,
                "planned_partitions": len(plan),
                "replicas_moved": moved,
                "failover": failover,
                "seconds": round(seconds, 3),
                "leader_changes": (cluster.history.leader_changes() if cluster.history else 0)
                - leaders_before,
                "offline_windows": windows - windows_before,
                "offline_partition_seconds": round(offline_seconds - seconds_before, 3),
                "longest_offline_seconds": round(cluster.replication.longest_offline(), 3),
                "round_trips": ops.round_trips,
                "writes": ops.writes,
                "acked": acked,
                "acked_lost": totals.acked_lost,
            }
        finally:
            cluster.close()


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench_reassignment", description=__doc__.split("\n")[0])
    parser.add_argument("--backend", action="append", choices=["memory", "zookeeper", "redis"])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--max-moving", type=int, default=500)
    parser.add_argument("--no-failover", action="store_true")
    args = parser.parse_args(argv)
    print(HEADER, flush=True)
    for backend in args.backend or ["memory", "zookeeper", "redis"]:
        r = run(backend, args.partitions, args.max_moving, not args.no_failover)
        print(
            f"{r['backend']:<9} {r['partitions']:>7,} {r['replicas_moved']:>7,} "
            f"{'yes' if r['failover'] else 'no':>8} {r['seconds']:>8.2f} {r['leader_changes']:>8,} "
            f"{r['offline_windows']:>8,} {r['offline_partition_seconds']:>8.2f} "
            f"{r['longest_offline_seconds']:>8.3f} {r['round_trips']:>7,} {r['writes']:>8,} "
            f"{r['acked_lost']:>5}",
            flush=True,
        )
        print(json.dumps(r), flush=True)

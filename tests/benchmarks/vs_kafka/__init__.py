"""``coordkit serve`` beside Apache Kafka 4 on this machine (issue #31, item 3): the same clients,
the same workloads, one run; every figure printed for both sides with the ratio coordkit / Kafka.

    python tests/benchmarks/run.py vs_kafka [--quick] [--case=CASE ...] [--records=N] [--rate=N]
        [--seconds=N] [--kafka-heap=512m] [--failure-timeout=6] [--memory-partitions=N]
        [--connections=N] [--producers=N] [--record-size=N] [--catch-up-records=N]
        [--failover-runs=N] [--seed=N]

Every cluster has 3 brokers and every topic replication factor 3 unless said otherwise. Kafka is
three combined broker+controller KRaft nodes (jars from ``bash kafka-dist/fetch.sh``, ``-Xms`` and
``-Xmx`` set by ``--kafka-heap``) with the JVM options of Kafka's own start scripts (G1 and the full
JIT: ``PRODUCTION_JVM_OPTIONS``), not the quick ones the tests start Kafka with. coordkit runs in
two forms (:mod:`vs_kafka.clusters`):

* the cases that kill nothing (``produce``, ``consume``, ``latency``, ``perf``: see
  :mod:`vs_kafka.throughput`; ``groups``: :mod:`vs_kafka.groups`) run on ``coordkit serve
  --brokers 3`` in one process on the memory store (records never touch the store);
  ``consumer-protocol`` (KIP-848 groups, :mod:`vs_kafka.consumer_protocol`) too;
* the cases that kill or restart a broker (``failover``: :mod:`vs_kafka.failover`; ``footprint``,
  broker start and memory: :mod:`vs_kafka.footprint`) run on ``coordkit serve --broker-id N``
  processes on one private ZooKeeper: the memory store lives inside one process, so brokers that
  die one at a time need a store shared across processes, and ZooKeeper is the one Kafka itself
  used. A dead process is noticed after ``--failure-timeout`` seconds on both sides (coordkit's
  store session; Kafka's broker session and controller quorum fetch timeout);
* transactions (``transactions``: :mod:`vs_kafka.transactions`): librdkafka's transactional
  producer in a produce-only loop and in a consume-transform-produce loop, 1, 10 and 100 records
  a transaction, on three ``coordkit serve --broker-id N`` processes sharing ZooKeeper, then
  Redis (a row each), beside three Kafka nodes;
* the cost of TLS and SASL (``security``: :mod:`vs_kafka.security`): produce and consume on
  PLAINTEXT, SSL and SASL_SSL/SCRAM listeners of the one-process form, each beside its side's
  PLAINTEXT figure (``÷ PLAINTEXT``); ``security-inter-broker`` (:mod:`vs_kafka.inter_broker`):
  processes-produce's workload on three processes whose inter-broker listener is PLAINTEXT, SSL,
  then SASL_SSL/SCRAM;
* issue #34's targets (``processes-produce``, ``processes-failover``, ``processes-catch-up``:
  :mod:`vs_kafka.processes`) run on such processes too, each broker with its log directory
  (``--data-dir``), as Kafka's.

The sides run one after the other, never at once, so neither slows the other; the load average
is printed at the start and the end (the machine may be shared). Group settings are the same on
both sides (``group.initial.rebalance.delay.ms=0``, 5 offsets partitions, the consumers' 10 s
sessions). Nothing here is a timed assertion.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from vs_kafka import (
    consumer_protocol,
    failover,
    footprint,
    groups,
    inter_broker,
    processes,
    security,
    throughput,
    transactions,
)
from vs_kafka.clusters import BROKER_IDS, SIDES, broker_processes, one_cluster

#: Every case family, by the name ``--case`` takes.
CASES = (
    *throughput.CASES,
    *groups.CASES,
    *consumer_protocol.CASES,
    *failover.CASES,
    *footprint.CASES,
    *processes.CASES,
    *security.CASES,
    *transactions.CASES,
    *inter_broker.CASES,
)
Figures = dict[str, float]
Results = dict[str, dict[str, Figures]]
_HEAP = re.compile(r"[1-9][0-9]*[mMgG]")


def measure(args: argparse.Namespace, side: str, log_dir: Path) -> dict[str, Figures]:
    figures: dict[str, Figures] = {}

    def case(name: str, run: Callable[[], Figures]) -> None:
        print(f"  {side}: {name} ...", flush=True)
        figures[name] = run()

    one_process = [
        c for c in args.case if c in (*throughput.CASES, *groups.CASES, *consumer_protocol.CASES)
    ]
    if one_process:
        with one_cluster(side, args.kafka_heap) as bootstrap:
            throughput.run(bootstrap, args.case, args.records, args.rate, args.seconds, case)
            if "groups" in args.case:
                groups.run(bootstrap, case)
            if "consumer-protocol" in args.case:
                consumer_protocol.run(bootstrap, case)
    if {"failover", "footprint"} & set(args.case):
        with broker_processes(side, args.kafka_heap, args.failure_timeout, log_dir) as cluster:
            if "failover" in args.case:
                failover.run(cluster, case)
                for broker in sorted(set(BROKER_IDS) - set(cluster.live())):
                    cluster.start(broker)  # the killed controller, for the next cases
            if "footprint" in args.case:
                footprint.run(cluster, args.memory_partitions, args.connections, case)
    processes.run(args, side, log_dir, case)
    transactions.run(args, side, log_dir, case)
    if "security" in args.case:
        security.run(side, args.kafka_heap, args.records, case)
    inter_broker.run(args, side, case)
    return figures


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def report(results: Results, args: argparse.Namespace, load_at_start: str) -> None:
    """The table (case, figure, coordkit, Kafka, coordkit / Kafka) and a JSON line."""
    print(f"\nvs_kafka: cases {','.join(args.case)}; records {args.records}; "
          f"failure timeout {args.failure_timeout:g} s; Kafka heap {args.kafka_heap}")  # fmt: skip
    if set(processes.CASES) & set(args.case):
        print(f"processes-*: {args.producers} producer threads, {args.record_size} B records, "
              f"{args.catch_up_records} records written without the stopped broker; "
              f"{args.failover_runs} kills at random moments (seed {args.seed})")  # fmt: skip
    print(f"command: {' '.join(sys.argv)}")
    print(f"load average (1, 5, 15 min) at start: {load_at_start}; at end: {load()}")
    print(f"{'case':<36} {'figure':<30} {'coordkit':>11} {'kafka':>11} {'ratio':>7}")
    print("-" * 99)
    names = list(dict.fromkeys([*results["coordkit"], *results["kafka"]]))
    for name in names:
        ours = results["coordkit"].get(name, {})
        theirs = results["kafka"].get(name, {})
        for figure in dict.fromkeys([*ours, *theirs]):
            mine = ours.get(figure, math.nan)
            peer = theirs.get(figure, math.nan)
            ratio = mine / peer if peer and not math.isnan(peer) else math.nan
            print(f"{name:<36} {figure:<30} {mine:>11.2f} {peer:>11.2f} {ratio:>7.2f}")
    print(json.dumps({"benchmark": "vs_kafka", "load_at_start": load_at_start,
                      "load_at_end": load(), "results": results}, sort_keys=True))  # fmt: skip


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """One line and exit status 2 (argparse would print its usage first)."""
        print(f"{self.prog}: {message}", file=sys.stderr)
        raise SystemExit(2)


def _positive(kind: type[int] | type[float]) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not value > 0 or math.isinf(value):
            raise argparse.ArgumentTypeError(f"{text!r}: give a positive number")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its message
    return parse


def _heap(text: str) -> str:
    if not _HEAP.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r}: give a JVM size such as 512m or 1g")
    return text


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = _Parser(prog="run.py vs_kafka")
    parser.add_argument("--case", action="append", choices=CASES)
    parser.add_argument("--records", type=_positive(int), default=200_000)
    parser.add_argument("--rate", type=_positive(float), default=1000.0)
    parser.add_argument("--seconds", type=_positive(float), default=10.0)
    parser.add_argument("--kafka-heap", type=_heap, default="512m")
    parser.add_argument("--failure-timeout", type=_positive(float), default=6.0,
                        help="seconds until either side notices a killed process")  # fmt: skip
    parser.add_argument("--memory-partitions", type=_positive(int), default=1000)
    parser.add_argument("--connections", type=_positive(int), default=500)
    parser.add_argument("--producers", type=_positive(int), default=2,
                        help="producer threads of the processes-* cases")  # fmt: skip
    parser.add_argument("--record-size", type=_positive(int), default=1024,
                        help="bytes a record of processes-produce")  # fmt: skip
    parser.add_argument("--catch-up-records", type=_positive(int), default=1_000_000,
                        help="records processes-catch-up writes while a broker is down")  # fmt: skip
    parser.add_argument("--failover-runs", type=_positive(int), default=5,
                        help="kills of processes-failover, each at a random moment")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of processes-failover's random moments")  # fmt: skip
    parser.add_argument("--quick", action="store_true",
                        help="20,000 records (catch-up too), 3 s paced, 300 partitions, "
                             "200 connections")  # fmt: skip
    args = parser.parse_args(argv)
    args.case = list(dict.fromkeys(args.case or CASES))
    if args.quick:
        args.records, args.seconds, args.catch_up_records = 20_000, 3.0, 20_000
        args.memory_partitions, args.connections = 300, 200
    return args


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    load_at_start = load()
    print(f"load average at start: {load_at_start}", flush=True)
    with tempfile.TemporaryDirectory(prefix="vs-kafka-") as logs:
        results: Results = {side: measure(args, side, Path(logs)) for side in SIDES}
    report(results, args, load_at_start)

"""The legacy ZooKeeper consumer's rebalance at scale (issue 7 target), per store backend.

A group of 100 legacy consumers (one stream per topic) over 10 topics x 1,000 partitions is
started and left to settle; then one member crashes (its session is closed). Measured from the
crash until every surviving consumer is idle and the owner nodes hold the new range assignment
over the survivors' threads:

* seconds to the stable new ownership;
* rebalances, attempts, owner-node conflicts and failed rebalances over all consumers (Kafka's
  defaults ``rebalance.backoff.ms=2000``, ``rebalance.max.retries=4`` unless overridden);
* store operations of the consumers' sessions, in total and per consumer: round trips, nodes read,
  nodes written, watch deliveries. Every consumer watches ``/consumers/G/ids``, so one crash wakes
  all of them and each re-reads the whole group and rewrites its ownership: the herd effect the
  group coordinator removed;
* sessions of live consumers that expired (``lost``: each is a false failure that triggers another
  rebalance; it should be 0) from the start of the run, and the worst gap between two heartbeats of
  any consumer's session (``hb gap``, seconds, where the store measures it: Redis and ZooKeeper;
  an idle session is renewed every tenth of the timeout, so it should stay well under a third).

    python tests/benchmarks/run.py legacy [--quick] [--backend=memory|zookeeper|redis ...]
        [--consumers=N] [--topics=N] [--partitions=N] [--backoff-ms=MS] [--max-retries=N]

(run.py takes every word without a leading dash for a benchmark area: give values with ``=``.)
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import attrs
from bench_engine import backend_env

from coordkit.engine import OpCounts
from coordkit.engine.legacy import (
    AssignmentContext,
    LegacyConsumer,
    LegacyConsumerConfig,
    OwnershipHistory,
    assign_threads,
    read_group,
)
from coordkit.engine.legacy.registration import registration_for
from coordkit.kafka import layout
from coordkit.kafka.model import BrokerInfo, TopicAssignment, TopicPartition
from coordkit.plugins import get_plugin_manager
from coordkit.store import MetadataStore, SessionState

GROUP = "legacy-bench"
TIMEOUT_S = 600.0


@attrs.frozen
class Result:
    backend: str
    consumers: int
    partitions: int
    seconds: float
    rebalances: int
    attempts: int
    conflicts: int
    failures: int
    ops: OpCounts
    max_per_consumer: OpCounts
    setup_seconds: float
    lost_sessions: int
    worst_heartbeat_gap: float | None

    @property
    def survivors(self) -> int:
        return self.consumers - 1

    def row(self) -> str:
        per = self.survivors
        return (
            f"{self.backend:<9} {self.consumers:>5} {self.partitions:>7,} {self.seconds:>8.3f} "
            f"{self.rebalances:>6,} {self.attempts:>6,} {self.conflicts:>7,} {self.failures:>5,} "
            f"{self.ops.round_trips:>7,} {self.ops.reads:>8,} {self.ops.writes:>8,} "
            f"{self.ops.watch_events:>6,} {self.ops.reads / per:>7.0f} {self.ops.writes / per:>7.0f} "
            f"{self.ops.watch_events / per:>6.1f} {self.setup_seconds:>7.1f} "
            f"{self.lost_sessions:>4} {_gap(self.worst_heartbeat_gap):>6}"
        )

    def json(self) -> str:
        return json.dumps(
            {
                "bench": "legacy",
                "backend": self.backend,
                "consumers": self.consumers,
                "partitions": self.partitions,
                "seconds": round(self.seconds, 4),
                "rebalances": self.rebalances,
                "attempts": self.attempts,
                "conflicts": self.conflicts,
                "failed_rebalances": self.failures,
                "store_ops": self.ops.as_dict(),
                "store_ops_per_consumer_max": self.max_per_consumer.as_dict(),
                "setup_seconds": round(self.setup_seconds, 2),
                "lost_sessions": self.lost_sessions,
                "worst_heartbeat_gap_s": (
                    None if self.worst_heartbeat_gap is None else round(self.worst_heartbeat_gap, 3)
                ),
            }
        )


def _gap(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.2f}"


HEADER = (
    f"{'backend':<9} {'cons':>5} {'parts':>7} {'seconds':>8} {'rebal':>6} {'tries':>6} "
    f"{'confl':>7} {'fail':>5} {'trips':>7} {'reads':>8} {'writes':>8} {'events':>6} "
    f"{'rd/cons':>7} {'wr/cons':>7} {'ev/con':>6} {'setup s':>7} {'lost':>4} {'hb gap':>6}"
)


class SessionWatch:
    """Counts the sessions of live stores that were lost, and reads their worst heartbeat gap."""

    def __init__(self) -> None:
        self.stores: list[MetadataStore] = []
        self._lost = 0
        self._lock = threading.Lock()

    def add(self, store: MetadataStore) -> MetadataStore:
        self.stores.append(store)
        store.add_listener(self._changed)
        return store

    def _changed(self, state: SessionState) -> None:
        if state is SessionState.LOST:
            with self._lock:
                self._lost += 1

    @property
    def lost(self) -> int:
        with self._lock:
            return self._lost

    def worst_gap(self, stores: list[MetadataStore]) -> float | None:
        gaps = [getattr(store, "worst_heartbeat_gap", None) for store in stores]
        measured = [gap for gap in gaps if gap is not None]
        return max(measured) if measured else None


# -- store backends ----------------------------------------------------------------------------------


@contextlib.contextmanager
def backend_url(name: str, session_timeout_s: float) -> Iterator[str]:
    """A fresh namespace on a private server of backend ``name``, sessions timing out after
    ``session_timeout_s`` (every backend reads the ``session_timeout`` URL parameter)."""
    with backend_env(name) as env:
        url = env.new_url()
        yield f"{url}{'&' if '?' in url else '?'}session_timeout={session_timeout_s:g}"


# -- the run -----------------------------------------------------------------------------------------


def _wait(predicate: Callable[[], bool], what: str, poll_s: float = 0.005) -> None:
    deadline = time.perf_counter() + TIMEOUT_S
    while not predicate():
        if time.perf_counter() > deadline:
            raise SystemExit(f"timed out after {TIMEOUT_S:.0f}s waiting for {what}")
        time.sleep(poll_s)


def _expected(
    consumers: list[LegacyConsumer], partitions: dict[str, int]
) -> dict[TopicPartition, str]:
    """The range assignment over the consumers' threads, from the assignor itself (the tests check
    it against an independent model of Kafka's)."""
    registrations = {c.consumer_id: registration_for(c.topic_count, c.clock) for c in consumers}
    context = AssignmentContext.from_registrations(GROUP, registrations, partitions)
    assignor = get_plugin_manager().assignor("range")
    return {tp: str(thread) for tp, thread in assign_threads(context, assignor).items()}


def _stable(consumers: list[LegacyConsumer], expected: dict[TopicPartition, str]) -> bool:
    if not all(c.idle for c in consumers):
        return False
    believed: dict[TopicPartition, str] = {}
    for consumer in consumers:
        believed.update(consumer.owned())
    return believed == expected


def run_once(
    backend: str,
    consumers_n: int,
    topics: int,
    per_topic: int,
    config: LegacyConsumerConfig,
    session_timeout_s: float,
) -> Result:
    with backend_url(backend, session_timeout_s) as url:
        manager = get_plugin_manager()

        def open_store() -> MetadataStore:
            return manager.store_for(url)

        started = time.perf_counter()
        admin = open_store()
        info = BrokerInfo(host="localhost", port=9092, timestamp=str(int(time.time() * 1000)))
        admin.create(
            layout.broker_path(1), layout.BROKER.encode(info), ephemeral=True, make_parents=True
        )
        partitions = {f"events-{t:03d}": per_topic for t in range(topics)}
        for topic, count in partitions.items():
            assignment = TopicAssignment(partitions={p: (1,) for p in range(count)})
            admin.create(
                layout.topic_path(topic), layout.TOPIC.encode(assignment), make_parents=True
            )

        history = OwnershipHistory()
        subscription = dict.fromkeys(partitions, 1)
        sessions = SessionWatch()
        consumers = [
            LegacyConsumer(
                sessions.add(open_store()), GROUP, subscription, config=config, history=history
            )
            for _ in range(consumers_n)
        ]
        try:
            # Register everyone first so the first rebalances already see the whole group.
            for consumer in consumers:
                consumer.register()
            for consumer in consumers:
                consumer.start(wait=False)
            everyone = _expected(consumers, partitions)
            _wait(lambda: _stable(consumers, everyone), "the group to settle")
            setup = time.perf_counter() - started

            victim = consumers[len(consumers) // 2]
            survivors = [c for c in consumers if c is not victim]
            surviving_stores = [
                store
                for c, store in zip(consumers, sessions.stores, strict=True)
                if c is not victim
            ]
            expected = _expected(survivors, partitions)
            before = {c.consumer_id: c.store.counts for c in survivors}
            logs_before = {c.consumer_id: c.rebalances.records for c in survivors}
            gc.collect()
            t0 = time.perf_counter()
            victim.crash()
            _wait(lambda: _stable(survivors, expected), "the survivors to settle")
            seconds = time.perf_counter() - t0

            deltas = [c.store.counts - before[c.consumer_id] for c in survivors]
            new_records = [
                r
                for c in survivors
                for r in c.rebalances.records[len(logs_before[c.consumer_id]) :]
            ]
            view = read_group(admin, GROUP)
            if dict(view.owners) != expected:
                raise SystemExit("the owner nodes do not hold the expected assignment")
            violations = history.violations()
            if violations:
                raise SystemExit(f"double ownership: {violations[:3]}")
            total = OpCounts()
            for delta in deltas:
                total = total + delta
            heaviest = max(deltas, key=lambda d: d.operations)
            return Result(
                backend,
                consumers_n,
                sum(partitions.values()),
                seconds,
                len(new_records),
                sum(r.attempts for r in new_records),
                sum(r.conflicts for r in new_records),
                sum(not r.succeeded for r in new_records),
                total,
                heaviest,
                setup,
                sessions.lost,
                sessions.worst_gap(surviving_stores),
            )
        finally:
            # All at once: closed one by one, each departure would rebalance all the others.
            with ThreadPoolExecutor(max_workers=len(consumers)) as pool:
                list(pool.map(LegacyConsumer.close, consumers))
            admin.close()


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(
        prog="bench_legacy_consumer", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="20 consumers, 1,000 partitions")
    parser.add_argument("--backend", action="append", choices=["memory", "zookeeper", "redis"])
    parser.add_argument("--consumers", type=int)
    parser.add_argument("--topics", type=int)
    parser.add_argument("--partitions", type=int, help="partitions per topic")
    parser.add_argument("--backoff-ms", type=int, default=2000, help="rebalance.backoff.ms")
    parser.add_argument("--max-retries", type=int, default=4, help="rebalance.max.retries")
    parser.add_argument(
        "--session-timeout",
        type=float,
        default=30.0,
        help="store session timeout in seconds (default 30; with 3, sessions must hold while 100 "
        "clients in one Python process share one GIL: see the lost and hb gap columns)",
    )
    args = parser.parse_args(argv)
    consumers = args.consumers or (20 if args.quick else 100)
    topics = args.topics or 10
    per_topic = args.partitions or (100 if args.quick else 1_000)
    config = LegacyConsumerConfig(
        rebalance_backoff_ms=args.backoff_ms,
        rebalance_max_retries=args.max_retries,
        auto_commit_enable=False,
        host="bench",
    )
    print(
        f"legacy consumer rebalance after one crash: {consumers} consumers, {topics} topics x "
        f"{per_topic:,} partitions, backoff {args.backoff_ms} ms, {args.max_retries} attempts, "
        f"session timeout {args.session_timeout:g} s",
        flush=True,
    )
    print(HEADER, flush=True)
    for backend in args.backend or ["memory", "zookeeper", "redis"]:
        result = run_once(backend, consumers, topics, per_topic, config, args.session_timeout)
        print(result.row(), flush=True)
        print(result.json(), flush=True)
        gc.collect()

"""Control-plane engine benchmarks (issue 6 targets), per store backend and controller strategy.

* controlled shutdown of a broker leading 10,000 partitions (target: under 1 s on loopback
  ZooKeeper; Kafka 1.1.0 needed 3 s, down from 6.5 minutes): from the broker's request until the
  controller has moved every leader and persisted the states;
* controller failover with 100,000 partitions (target: under 5 s): from the controller broker's
  crash until the new controller has loaded every broker, topic and partition state, re-elected
  the failed broker's partitions, dropped it from the ISRs and persisted it all.

Store operations of every broker session are counted (round trips, nodes read, ops written, multis,
watch deliveries) and, for failover, the candidates woken: the ``kafka`` strategy wakes every broker,
``latch`` only the next in line.

    python tests/benchmarks/run.py engine [--quick] [--backend=memory|zookeeper|redis ...]
        [--strategy=kafka|latch ...] [--case=shutdown|failover ...] [--brokers=N]

(run.py takes every word without a leading dash for a benchmark area: give values with ``=``.)
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import itertools
import json
import os
import threading
import time
from collections.abc import Callable, Iterator

import attrs

from coordkit.engine import Cluster, EngineConfig, EngineObserver, OpCounts
from coordkit.engine.controllership import read_controller
from coordkit.kafka import layout
from coordkit.plugins import get_plugin_manager
from coordkit.store import MetadataStore

TOPIC_SIZE = 1000


@attrs.frozen
class Result:
    case: str
    backend: str
    strategy: str
    partitions: int
    seconds: float
    controller_seconds: float | None
    moved: int
    ops: OpCounts
    wakeups: int
    setup_seconds: float
    settled_seconds: float  # until the controller had nothing left to do (ISR clean-up included)

    def row(self) -> str:
        ctrl = "-" if self.controller_seconds is None else f"{self.controller_seconds:.3f}"
        return (
            f"{self.case:<9} {self.backend:<9} {self.strategy:<6} {self.partitions:>8,} "
            f"{self.seconds:>8.3f} {ctrl:>8} {self.settled_seconds:>8.3f} {self.moved:>8,} "
            f"{self.ops.round_trips:>7,} "
            f"{self.ops.reads:>8,} {self.ops.writes:>8,} {self.ops.multis:>6,} "
            f"{self.ops.watch_events:>6,} {self.wakeups:>7,} {self.setup_seconds:>7.1f}"
        )

    def json(self) -> str:
        return json.dumps(
            {
                "bench": "engine",
                "case": self.case,
                "backend": self.backend,
                "strategy": self.strategy,
                "partitions": self.partitions,
                "seconds": round(self.seconds, 4),
                "controller_seconds": None
                if self.controller_seconds is None
                else round(self.controller_seconds, 4),
                "settled_seconds": round(self.settled_seconds, 4),
                "partitions_moved": self.moved,
                "store_ops": self.ops.as_dict(),
                "candidates_woken": self.wakeups,
                "setup_seconds": round(self.setup_seconds, 2),
            }
        )


HEADER = (
    f"{'case':<9} {'backend':<9} {'strat':<6} {'parts':>8} {'seconds':>8} {'ctrl s':>8} "
    f"{'settled':>8} "
    f"{'moved':>8} {'trips':>7} {'reads':>8} {'writes':>8} {'multis':>6} {'events':>6} "
    f"{'woken':>7} {'setup s':>7}"
)


# -- store backends ----------------------------------------------------------------------------


class _Env:
    """Hands out fresh namespaces on one backend; sessions are opened directly (no test proxies)."""

    _ids = itertools.count(1)

    def __init__(
        self,
        name: str,
        new_url: Callable[[int], str],
        close: Callable[[], None],
        settle: Callable[[], object] = lambda: None,
    ):
        self.name = name
        self._new_url = new_url
        self.close = close
        #: Bring the server to a steady state before a measured case (ZooKeeper: a full
        #: collection of its heap, so that the setup's garbage is not collected in the case).
        self.settle = settle

    def new_url(self) -> str:
        """The URL of a fresh namespace."""
        return self._new_url(next(self._ids))

    def opener(self) -> Callable[[], MetadataStore]:
        url = self.new_url()
        manager = get_plugin_manager()
        return lambda: manager.store_for(url)


@contextlib.contextmanager
def backend_env(name: str) -> Iterator[_Env]:
    run = f"{os.getpid()}-{int(time.time())}"
    if name == "memory":
        from coordkit_memory.server import MemoryServer

        names: list[str] = []

        def memory_url(n: int) -> str:
            names.append(f"bench-{run}-{n}")
            return f"memory://{names[-1]}"

        def forget() -> None:
            for server in names:
                MemoryServer.discard(server)

        yield _Env(name, memory_url, forget)
        forget()
    elif name == "zookeeper":
        from harness.zookeeper import StandaloneZooKeeper

        server = StandaloneZooKeeper().start()
        try:
            yield _Env(name, lambda n: f"zookeeper://{server.hosts}/bench-{run}/c{n}", server.close)
        finally:
            server.close()
    elif name == "redis":
        from harness.redis_server import RedisServer

        redis = RedisServer().start()
        try:
            yield _Env(name, lambda n: redis.url(prefix=f"bench-{run}-{n}"), redis.close)
        finally:
            redis.close()
    else:
        raise SystemExit(f"unknown backend {name!r}: memory, zookeeper or redis")


# -- helpers -----------------------------------------------------------------------------------


class _Ready(EngineObserver):
    """Notes when a controller of a later epoch is ready."""

    def __init__(self) -> None:
        self.after_epoch = 0
        self.event = threading.Event()
        self.at = 0.0
        self.seconds = 0.0

    def controller_ready(self, broker_id: int, epoch: int, seconds: float) -> None:
        if epoch > self.after_epoch:
            self.at = time.perf_counter()
            self.seconds = seconds
            self.event.set()


def _start(env: _Env, strategy: str, brokers: int, ready: _Ready | None = None) -> Cluster:
    config = EngineConfig(
        controller_election=strategy,
        auto_leader_rebalance=False,
        controlled_shutdown_timeout=600,
    )
    observers = [ready] if ready is not None else []
    cluster = Cluster(
        env.opener(), brokers, config=config, record_history=False, observers=observers, seed=1
    )
    cluster.start()
    _wait(lambda: cluster.controller_broker() is not None, 60, "a controller")
    return cluster


def _wait(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"benchmark: timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def _controller_id(cluster: Cluster) -> int:
    current = read_controller(cluster.admin_store)
    assert current is not None
    return current[0].broker_id


def _initialised(cluster: Cluster, total: int, timeout: float = 1800) -> None:
    def done() -> bool:
        holder = cluster.controller_broker()
        if holder is None or holder.controller is None:
            return False
        try:
            states = holder.controller.leaders().result(timeout=120)
        except Exception:
            return False
        return len(states) == total and all(s is not None for s in states.values())

    _wait(done, timeout, f"{total:,} partitions to get leaders")


def _wakeups(cluster: Cluster) -> int:
    return sum(getattr(b._candidate, "wakeups", 0) for b in cluster.brokers.values() if b.alive)


# -- cases -------------------------------------------------------------------------------------


def controlled_shutdown(env: _Env, strategy: str, partitions: int, brokers: int) -> Result:
    cluster = _start(env, strategy, brokers)
    try:
        started = time.perf_counter()
        controller = _controller_id(cluster)
        victim = next(b for b in cluster.broker_ids if b != controller)
        others = [b for b in cluster.broker_ids if b != victim]
        for t, first in enumerate(range(0, partitions, TOPIC_SIZE)):
            count = min(TOPIC_SIZE, partitions - first)
            assignment = {
                p: [victim, others[p % len(others)], others[(p + 1) % len(others)]]
                for p in range(count)
            }
            cluster.create_topic(f"cs{t}", count, 3, assignment=assignment)
        _initialised(cluster, partitions)
        setup = time.perf_counter() - started
        before = cluster.op_counts()
        t0 = time.perf_counter()
        remaining = cluster.broker(victim).controlled_shutdown(timeout=600)
        seconds = time.perf_counter() - t0
        ops = cluster.op_counts() - before
        if remaining:
            raise SystemExit(f"controlled shutdown left {len(remaining)} partitions on {victim}")
        holder = cluster.controller_broker()
        assert holder is not None
        assert holder.controller is not None
        states = holder.controller.leaders().result(timeout=120)
        moved = sum(1 for s in states.values() if s is not None and s.leader != victim)
        if moved != partitions:
            raise SystemExit(f"only {moved:,} of {partitions:,} leaders moved")
        return Result(
            "shutdown", env.name, strategy, partitions, seconds, None, moved, ops, 0, setup, seconds
        )
    finally:
        cluster.close()


def failover(env: _Env, strategy: str, partitions: int, brokers: int) -> Result:
    ready = _Ready()
    cluster = _start(env, strategy, brokers, ready)
    try:
        started = time.perf_counter()
        for t, first in enumerate(range(0, partitions, TOPIC_SIZE)):
            count = min(TOPIC_SIZE, partitions - first)
            cluster.create_topic(f"fo{t}", count, 2)
        _initialised(cluster, partitions)
        setup = time.perf_counter() - started
        victim = _controller_id(cluster)
        holder = cluster.broker(victim)
        assert holder.controller is not None
        led = sum(
            1
            for s in holder.controller.leaders().result(timeout=120).values()
            if s is not None and s.leader == victim
        )
        data, _ = cluster.admin_store.get(layout.CONTROLLER_EPOCH)
        ready.after_epoch = int(data)
        ready.event.clear()
        wakeups_before = _wakeups(cluster)
        before = cluster.op_counts()
        gc.collect()
        t0 = time.perf_counter()
        cluster.kill(victim)
        if not ready.event.wait(timeout=1800):
            raise SystemExit("no controller took over")
        seconds = ready.at - t0
        # Then the dead broker leaves the ISRs of the partitions it followed.
        _wait(cluster.settled, 1800, "the ISR clean-up")
        settled = time.perf_counter() - t0
        ops = cluster.op_counts() - before
        woken = _wakeups(cluster) - wakeups_before
        new = cluster.controller_broker()
        assert new is not None
        assert new.controller is not None
        states = new.controller.leaders().result(timeout=120)
        still = sum(1 for s in states.values() if s is not None and s.leader == victim)
        if still:
            raise SystemExit(f"{still:,} partitions still name the dead broker as leader")
        return Result(
            "failover",
            env.name,
            strategy,
            partitions,
            seconds,
            ready.seconds,
            led,
            ops,
            woken,
            setup,
            settled,
        )
    finally:
        cluster.close()


CASES = {"shutdown": controlled_shutdown, "failover": failover}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench_engine", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1,000 / 10,000 partitions")
    parser.add_argument("--backend", action="append", choices=["memory", "zookeeper", "redis"])
    parser.add_argument("--strategy", action="append", choices=["kafka", "latch"])
    parser.add_argument("--case", action="append", choices=sorted(CASES))
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--shutdown-partitions", type=int)
    parser.add_argument("--failover-partitions", type=int)
    args = parser.parse_args(argv)
    sizes = {
        "shutdown": args.shutdown_partitions or (1_000 if args.quick else 10_000),
        "failover": args.failover_partitions or (10_000 if args.quick else 100_000),
    }
    print(HEADER, flush=True)
    for backend in args.backend or ["memory"]:
        for case in args.case or ["shutdown", "failover"]:
            for strategy in args.strategy or ["kafka", "latch"]:
                # A fresh server per run: one run's 300,000 nodes must not slow the next.
                with backend_env(backend) as env:
                    result = CASES[case](env, strategy, sizes[case], args.brokers)
                print(result.row(), flush=True)
                print(result.json(), flush=True)
                gc.collect()

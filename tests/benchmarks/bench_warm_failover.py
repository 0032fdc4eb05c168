"""Controller failover, cold (``kafka``: the new controller bulk-reads every partition state) versus
warm (``warm-standby``: it fills its context from the image its candidate kept current through the
change feed), at growing partition counts (issue 16).

KRaft's claim is about dedicated controllers, so the cluster is laid out to keep the work of a
failover fixed while the cluster grows: the first controller broker holds no replica (topics are
created with assignments that leave it out), one broker ``X`` holds only the 1,000 partitions of
topic ``crash`` (leading them), and the other brokers hold everything else (RF 2, round robin).

* ``controller``: the dedicated controller is killed. ``ready`` runs from the kill until the new
  controller's first pass is done (every affected partition led again: none here, as with KRaft's
  dedicated controllers); ``idle`` until it has nothing left to do. ``load``/``elect``/``persist``
  split its first pass.
* ``broker``: right after, broker ``X`` crashes and the new controller handles it: ``ready`` runs
  until its 1,000 partitions are led again, ``idle`` until the controller has nothing left to do.
  ``X`` is the highest broker id, so a latch-queued election (``warm-standby``, ``latch``) does not
  make it the new controller; where a cold race did, the case is ``broker+ctl`` (both failed).

* ``shutdown``: then the data broker leading the most partitions (with the default 5 brokers,
  about a third of them; it follows as many) shuts down in a controlled way: ``ready`` runs until
  its controlled-shutdown request is answered (leadership moved, it left every ISR).

``--case=shared`` is the earlier layout (every broker holds replicas; the killed controller leads
1/``brokers`` of all partitions, so the re-election writes grow with the cluster).

Setup is measured too: ``create`` (the admin writes the topics' assignments in bulk), ``init``
(the first controller elects every partition's first leader). With ``--existing`` the cluster is
written in bulk before any broker starts (assignments and first leaders' states, as a restart
finds them): ``create`` is that bulk write, ``init`` the start (a controller's cold load, every
standby's image read) — electing 2,000,000 first leaders one pass at a time would take most of
the run. Memory: bytes per partition of a
standby's image and of a controller (image plus a context filled from it), and of a cold
controller's context, with tracemalloc on a separate read of the same store (``--no-memory``
skips it). ZooKeeper is started with the heap ``--zk-heap`` (default grows with the partitions;
the table says what it gave).

    python tests/benchmarks/run.py warm_failover [--quick] [--backend=memory|zookeeper|redis ...]
        [--partitions=N ...] [--brokers=N] [--strategy=kafka|latch|warm-standby ...]
        [--case=dedicated|shared] [--zk-heap=SIZE] [--no-memory] [--processes [--log-dir=DIR]]

``--processes`` runs every broker in a process of its own (``process_failover.py``): standbys
apply the feed on their own interpreters and a crash ends a process, as in a real cluster.

Redis runs on a private ``redis-server`` (not durable: setup writes millions of keys).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import logging
import os
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_engine import TOPIC_SIZE, Result, _controller_id, _Env, _Ready, _wait, failover

from coordkit.engine import Cluster, EngineConfig, EngineObserver, states
from coordkit.engine.controller.context import ControllerContext
from coordkit.engine.controller.image import ROOT, MetadataImage
from coordkit.engine.events import StateChange
from coordkit.errors import ConnectionLossError, NodeExistsError
from coordkit.kafka import layout
from coordkit.kafka.model import TopicAssignment
from coordkit.plugins import get_plugin_manager
from coordkit.store import Create, MetadataStore, Op, SessionState, TreeEvent, TreeEventKind
from coordkit.testing.servers.zookeeper_server import (
    COLLECTORS,
    StandaloneZooKeeper,
    ZooKeeperUnavailableError,
)

#: Ops per multi when ``--existing`` writes the cluster in bulk.
EXISTING_BATCH = 1_000
EXISTING_RETRIES = 8
CRASH_TOPIC = "crash"
CRASH_PARTITIONS = 1_000

HEADER = (
    f"{'backend':<9} {'strategy':<12} {'case':<10} {'parts':>9} {'ready s':>8} {'idle s':>8} "
    f"{'load':>7} {'elect':>7} {'persist':>7} {'moved':>6} {'reads':>8} {'writes':>7} "
    f"{'create s':>8} {'init s':>8}"
)


# -- backends ------------------------------------------------------------------------------------


def zk_heap_for(partitions: int) -> str:
    """Heap for a ZooKeeper holding ``partitions`` (two znodes each): 5 KiB a partition plus
    512 MiB. Measured live after a full collection: 377 MiB at 200,000 partitions (1.9 KiB each),
    growing by about 150 MiB under the controller's writes (the server keeps its last 500
    committed multis for followers); with serial GC's old generation at 2/3 of the heap, a heap of
    1.5x the live size collected in full every second, 300 ms each (the 200,000-partition
    controlled shutdown took 5.0 s, 2.1 s with this heap)."""
    return f"{partitions * 5 // 1024 + 512}m"


def _session(timeout: float | None, sep: str = "?") -> str:
    return "" if timeout is None else f"{sep}session_timeout={timeout:g}"


@contextlib.contextmanager
def backend(
    name: str,
    heap: str,
    session_timeout: float | None = None,
    collector: str = "g1",
    fixed_heap: bool = True,
) -> Iterator[_Env]:
    """A fresh server for one run (the memory store's namespaces are discarded afterwards)."""
    run = f"{os.getpid()}-{int(time.time())}"
    if name == "memory":
        from coordkit_memory.server import MemoryServer

        names: list[str] = []

        def memory_url(n: int) -> str:
            names.append(f"warm-{run}-{n}")
            return f"memory://{names[-1]}"

        def forget() -> None:
            for server in names:
                MemoryServer.discard(server)

        try:
            yield _Env(name, memory_url, forget)
        finally:
            forget()
    elif name == "zookeeper":
        from coordkit.testing.servers.zookeeper_server import StandaloneZooKeeper

        # snapCount: no snapshot of a multi-GB tree every 100,000 transactions during setup.
        server = StandaloneZooKeeper(
            heap=heap,
            collector=collector,
            fixed_heap=fixed_heap,
            extra_config={"snapCount": "5000000"},
        ).start()
        try:
            yield _Env(
                name,
                lambda n: f"zookeeper://{server.hosts}/warm-{run}/c{n}{_session(session_timeout)}",
                server.close,
                settle=lambda: _collect_garbage(server),
            )
            _server_memory("zookeeper", lambda: _zookeeper_memory(server))
        finally:
            server.close()
    elif name == "redis":
        from coordkit.testing.servers.redis_server import RedisServer

        # Not durable (as ZooKeeper's snapshots are put off above): setup writes millions of keys.
        redis = RedisServer().start()
        try:
            yield _Env(
                name,
                lambda n: redis.url(prefix=f"warm-{run}-{n}") + _session(session_timeout, "&"),
                redis.close,
            )
            _server_memory("redis", lambda: _redis_memory(redis.url()))
        finally:
            redis.close()
    else:
        raise SystemExit(f"unknown backend {name!r}: memory, zookeeper or redis")


def _collect_garbage(server: StandaloneZooKeeper) -> None:
    """The server's heap collected before a measured case; said so (or why not: a JRE has no
    jcmd)."""
    try:
        seconds = server.server.collect_garbage()
    except ZooKeeperUnavailableError as exc:
        print(f"# ZooKeeper's heap not collected before the case: {exc}", flush=True)
        return
    print(f"# ZooKeeper's heap collected before the case ({seconds:.1f}s)", flush=True)


def _server_memory(name: str, measure: Callable[[], str]) -> None:
    """Print what the store's server holds at the end of a run (where the fixtures' memory
    settings come from)."""
    try:
        print(f"# {name} server at the end of the run: {measure()}", flush=True)
    except Exception as exc:  # a figure, never a reason to fail the run
        print(f"# {name} server memory: not measured ({exc})", flush=True)


def _zookeeper_memory(server: object) -> str:
    from coordkit.testing.servers.zookeeper_server import four_letter

    host, port = server.hosts.split(",")[0].rsplit(":", 1)  # type: ignore[attr-defined]
    figures = dict(
        line.split("\t", 1)
        for line in four_letter(host, int(port), "mntr").splitlines()
        if "\t" in line
    )
    return (
        f"{int(figures.get('zk_znode_count', 0)):,} znodes, "
        f"{int(figures.get('zk_approximate_data_size', 0)) / 2**20:,.0f} MiB of data "
        f"(heap -Xmx{server.server.heap})"  # type: ignore[attr-defined]
    )


def _redis_memory(url: str) -> str:
    import redis as redis_py

    from coordkit.store.urls import StoreURL

    host, port = StoreURL.parse(url).hosts[0]
    client = redis_py.Redis(host=host, port=port or 6379)
    try:
        info = client.info("memory")
        keys = client.dbsize()
    finally:
        client.close()
    return (
        f"{keys:,} keys, used_memory {info['used_memory'] / 2**20:,.0f} MiB "
        f"(peak {info['used_memory_peak'] / 2**20:,.0f} MiB; no maxmemory: unlimited)"
    )


# -- observing -----------------------------------------------------------------------------------


class _Moves(EngineObserver):
    """Counts partitions of one topic led again by a broker other than a dead one."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.dead: int | None = None
        self.moved: set[int] = set()
        self.done = threading.Event()
        self.at = 0.0

    def partition_states_changed(self, changes: Sequence[StateChange]) -> None:
        if self.dead is None:
            return
        with self.lock:
            for change in changes:
                current = change.current
                if (
                    change.tp[0] == CRASH_TOPIC
                    and current is not None
                    and current.leader not in (self.dead, -1)
                ):
                    self.moved.add(change.tp[1])
            if len(self.moved) >= CRASH_PARTITIONS and not self.done.is_set():
                self.at = time.perf_counter()
                self.done.set()


class _Phases(logging.Handler):
    """Captures the new controller's phase split from the line it logs when ready."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.phases: dict[str, float] = {}
        self._logger = logging.getLogger("coordkit.engine.controller")
        self._level = self._logger.level

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args
        if "ready in" in str(record.msg) and isinstance(args, tuple) and len(args) >= 7:
            self.phases = {"load": args[3], "elect": args[5], "persist": args[6]}

    def __enter__(self) -> _Phases:
        self._logger.addHandler(self)
        self._logger.setLevel(logging.INFO)
        return self

    def __exit__(self, *exc: object) -> None:
        self._logger.removeHandler(self)
        self._logger.setLevel(self._level)


def _wait_idle(cluster: Cluster, after_epoch: int, timeout: float = 1800) -> float:
    """Polls (5 ms) until a controller of a later epoch is idle; returns when it was seen idle."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        holder = cluster.controller_broker()
        controller = None if holder is None else holder.controller
        if controller is not None and controller.epoch > after_epoch and controller.idle():
            return time.perf_counter()
        time.sleep(0.005)
    raise SystemExit(f"benchmark: no idle controller after {timeout}s")


# -- the dedicated-controller cases ---------------------------------------------------------------


def _layout(
    brokers: Sequence[int],
    partitions: int,
    controller: int,
    crash: int,
    topic_size: int = TOPIC_SIZE,
) -> Iterator[tuple[str, dict[int, list[int]]]]:
    """The topics' assignments, leaving ``controller`` out and ``crash`` only in topic ``crash``;
    the other partitions in topics of ``topic_size``."""
    data = [b for b in brokers if b not in (controller, crash)]
    if len(data) < 2:
        raise SystemExit("the dedicated layout needs --brokers=4 or more")
    yield CRASH_TOPIC, {p: [crash, data[p % len(data)]] for p in range(CRASH_PARTITIONS)}
    rest = partitions - CRASH_PARTITIONS
    for t, first in enumerate(range(0, rest, topic_size)):
        count = min(topic_size, rest - first)
        yield (
            f"fo{t}",
            {
                p: [data[(first + p) % len(data)], data[(first + p + 1) % len(data)]]
                for p in range(count)
            },
        )


def _create(
    cluster: Cluster, partitions: int, controller: int, crash: int, topic_size: int
) -> float:
    """The topics through the admin: the controller then elects every first leader."""
    started = time.perf_counter()
    for topic, assignment in _layout(cluster.broker_ids, partitions, controller, crash, topic_size):
        cluster.create_topic(topic, len(assignment), 2, assignment=assignment)
    return time.perf_counter() - started


def _write_existing(
    store: MetadataStore, layout_: Iterator[tuple[str, dict[int, list[int]]]]
) -> float:
    """An existing cluster, written in bulk before any broker starts (as a restart finds it):
    each topic's assignment and every partition's state (leader: the first replica, ISR: all of
    them, written by controller epoch 0)."""
    started = time.perf_counter()
    for root in layout.PERSISTENT_ROOTS:
        store.ensure_path(root)
    ops: list[Op] = []

    def flush() -> None:
        if not ops:
            return
        for attempt in range(EXISTING_RETRIES):
            try:
                store.commit(ops)
                break
            except ConnectionLossError:
                # The outcome is unknown: a multi is all or nothing, so its first create tells.
                time.sleep(min(2.0**attempt, 10.0))
                _wait(lambda: store.state is SessionState.CONNECTED, 120, "the admin session")
            except NodeExistsError as exc:
                if exc.op_index == 0:
                    break  # the lost attempt had been applied
                raise
        else:
            raise SystemExit(f"bulk write failed {EXISTING_RETRIES} times: ZooKeeper overloaded?")
        ops.clear()

    written = 0
    shown = started
    for topic, assignment in layout_:
        if time.perf_counter() - shown > 30:  # minutes at millions of partitions: say so
            shown = time.perf_counter()
            rate = written / (shown - started)
            print(
                f"# bulk write: {written:,} partitions in {shown - started:.0f}s ({rate:,.0f}/s)",
                flush=True,
            )
        written += len(assignment)
        data = layout.TOPIC.encode(TopicAssignment(partitions=assignment))
        ops += [Create(layout.topic_path(topic), data), Create(layout.partitions_path(topic))]
        for partition, replicas in assignment.items():
            ops.append(Create(f"{layout.partitions_path(topic)}/{partition}"))
            ops.append(
                Create(
                    states.state_path((topic, partition)),
                    states.encode_state(replicas[0], 0, tuple(replicas), 0),
                )
            )
            if len(ops) >= EXISTING_BATCH:
                flush()
    flush()
    return time.perf_counter() - started


def _settle(cluster: Cluster, partitions: int, timeout: float = 3600) -> None:
    _wait(lambda: bool(cluster.settled()), timeout, "the first leaders")
    holder = cluster.controller_broker()
    assert holder is not None
    assert holder.controller is not None
    states = holder.controller.leaders().result(timeout=600)
    led = sum(1 for s in states.values() if s is not None and s.leader >= 0)
    if led != partitions:
        raise SystemExit(f"only {led:,} of {partitions:,} partitions got a leader")


def _epoch(cluster: Cluster) -> int:
    data, _ = cluster.admin_store.get(layout.CONTROLLER_EPOCH)
    return int(data)


def _images_current(cluster: Cluster) -> bool:
    """Whether every live warm-standby candidate's image is current (cold strategies: True)."""
    for broker_id in cluster.live_brokers():
        image = getattr(cluster.broker(broker_id)._candidate, "image", None)
        if image is not None and not image.current:
            return False
    return True


def dedicated(
    env: _Env,
    strategy: str,
    partitions: int,
    brokers: int,
    memory: bool,
    *,
    existing: bool = False,
    topic_size: int = TOPIC_SIZE,
) -> tuple[list[dict[str, object]], dict[str, float] | None]:
    ready = _Ready()
    moves = _Moves()
    config = EngineConfig(
        controller_election=strategy, auto_leader_rebalance=False, controlled_shutdown_timeout=600
    )
    url = env.opener()
    cluster = Cluster(
        url, brokers, config=config, record_history=False, observers=[ready, moves], seed=1
    )
    rows: list[dict[str, object]] = []
    try:
        if existing:
            # The first broker to start is expected to win the first election (the check below
            # says so if it did not); it and the last broker are left out of the bulk layout.
            controller, crash = cluster.broker_ids[0], cluster.broker_ids[-1]
            admin = cluster.open_session()
            try:
                created = _write_existing(
                    admin, _layout(cluster.broker_ids, partitions, controller, crash, topic_size)
                )
            finally:
                admin.close()
            t0 = time.perf_counter()
            cluster.start()
            # A warm winner reads its whole image before it acts: minutes at 2,000,000.
            _wait(lambda: cluster.controller_broker() is not None, 3600, "a controller")
            if _controller_id(cluster) != controller:
                raise SystemExit(
                    f"broker {_controller_id(cluster)} won the first election, not {controller}: "
                    "run again"
                )
        else:
            cluster.start()
            _wait(lambda: cluster.controller_broker() is not None, 60, "a controller")
            controller = _controller_id(cluster)
            # The highest id: latch-queued elections (warm-standby, latch) hand over to the next
            # candidate in line, the lowest id, so the crash case stays a broker crash.
            crash = max(b for b in cluster.broker_ids if b != controller)
            created = _create(cluster, partitions, controller, crash, topic_size)
            t0 = time.perf_counter()
        _settle(cluster, partitions)
        if existing:
            _wait(lambda: _images_current(cluster), 3600, "every standby's image")
        init = time.perf_counter() - t0
        setup = {"create_seconds": round(created, 2), "init_seconds": round(init, 2)}

        # Case 1: the dedicated controller dies.
        epoch = ready.after_epoch = _epoch(cluster)
        ready.event.clear()
        before = cluster.op_counts()
        gc.collect()
        with _Phases() as captured:
            t0 = time.perf_counter()
            cluster.kill(controller)
            killed = time.perf_counter()
            if not ready.event.wait(timeout=1800):
                raise SystemExit("no controller took over")
            idle = _wait_idle(cluster, epoch) - t0
        # Where the time went: the killed broker's own teardown in this process (a real crash
        # costs nothing: another process dies), the hand-over (kill to the new controller's
        # term), the new controller's term until ready (its pass: load, elect, persist).
        captured.phases.update(
            kill=round(killed - t0, 4),
            handover=round(ready.at - t0 - ready.seconds, 4),
            term=round(ready.seconds, 4),
        )
        ops = cluster.op_counts() - before
        rows.append(
            {
                "case": "controller",
                "ready_seconds": round(ready.at - t0, 4),
                "idle_seconds": round(idle, 4),
                "phases": captured.phases,
                "moved": 0,
                "reads": ops.reads,
                "writes": ops.writes,
                **setup,
            }
        )
        _wait(lambda: bool(cluster.settled()), 600, "the new controller to settle")

        # Case 2: right after, broker X (the 1,000 partitions of topic crash) dies.
        epoch = _epoch(cluster)
        # A cold election is a race: X may have won it, then the case loses the controller too.
        case = "broker" if _controller_id(cluster) != crash else "broker+ctl"
        before = cluster.op_counts()
        gc.collect()
        with moves.lock:
            moves.dead = crash
            moves.moved = set()
        t0 = time.perf_counter()
        cluster.kill(crash)
        if not moves.done.wait(timeout=1800):
            raise SystemExit(f"only {len(moves.moved)} of {CRASH_PARTITIONS} partitions moved")
        idle = _wait_idle(cluster, epoch - 1) - t0
        ops = cluster.op_counts() - before
        rows.append(
            {
                "case": case,
                "ready_seconds": round(moves.at - t0, 4),
                "idle_seconds": round(idle, 4),
                "phases": {},
                "moved": len(moves.moved),
                "reads": ops.reads,
                "writes": ops.writes,
                **setup,
            }
        )
        _wait(lambda: bool(cluster.settled()), 600, "the controller to settle after the crash")

        # Case 3: a data broker (not the controller) shuts down in a controlled way: it leads
        # about 1/(brokers - 2) of all partitions and follows as many.
        env.settle()
        rows.append(_controlled_shutdown(cluster, setup))
        sizes = _bytes_per_partition(cluster.admin_store, partitions) if memory else None
        return rows, sizes
    finally:
        cluster.close()


def _controlled_shutdown(cluster: Cluster, setup: dict[str, float]) -> dict[str, object]:
    holder = cluster.controller_broker()
    assert holder is not None
    assert holder.controller is not None
    states = holder.controller.leaders().result(timeout=600)
    candidates = [b for b in cluster.live_brokers() if b != holder.broker_id]
    led = {b: 0 for b in candidates}
    followed = dict(led)
    for state in states.values():
        if state is None:
            continue
        for broker in state.isr:
            if broker == state.leader and broker in led:
                led[broker] += 1
            elif broker in followed:
                followed[broker] += 1
    broker = max(candidates, key=lambda b: led[b])
    before = cluster.op_counts()
    gc.collect()
    t0 = time.perf_counter()
    remaining = cluster.broker(broker).controlled_shutdown()
    done = time.perf_counter() - t0
    ops = cluster.op_counts() - before
    return {
        "case": "shutdown",
        "ready_seconds": round(done, 4),
        "idle_seconds": round(done, 4),
        "phases": {"led": led[broker], "followed": followed[broker], "still_led": len(remaining)},
        "moved": led[broker] - len(remaining),
        "reads": ops.reads,
        "writes": ops.writes,
        **setup,
    }


# -- memory ----------------------------------------------------------------------------------------


def _traced(build: Callable[[], object]) -> tuple[object, int]:
    gc.collect()
    base = tracemalloc.get_traced_memory()[0]
    built = build()
    gc.collect()
    return built, tracemalloc.get_traced_memory()[0] - base


def _bytes_per_partition(store: MetadataStore, partitions: int) -> dict[str, float]:
    """Bytes per partition (tracemalloc) of a standby's image, of a warm controller's context
    filled from it (a controller holds both), and of a cold controller's context."""
    tracemalloc.start()
    try:

        def image() -> MetadataImage:
            read = MetadataImage()
            read.apply(TreeEvent(TreeEventKind.RESYNC, ROOT, 0))
            read.sync(store)
            return read

        held: list[object] = []

        def warm() -> ControllerContext:
            standby = held[0]
            assert isinstance(standby, MetadataImage)
            context = ControllerContext(store, read_batch=10_000, owner="bench", image=standby)
            context.load()
            assert context.loaded_from == "image"
            return context

        standby, image_bytes = _traced(image)
        held.append(standby)
        warm_context, warm_bytes = _traced(warm)
        del warm_context, standby
        held.clear()
        gc.collect()

        def cold() -> ControllerContext:
            context = ControllerContext(store, read_batch=10_000, owner="bench")
            context.load()
            return context

        cold_context, cold_bytes = _traced(cold)
        del cold_context
    finally:
        tracemalloc.stop()
    return {
        "standby_image": image_bytes / partitions,
        "warm_controller": (image_bytes + warm_bytes) / partitions,
        "warm_context_only": warm_bytes / partitions,
        "cold_controller": cold_bytes / partitions,
    }


# -- reporting ---------------------------------------------------------------------------------------


def _row(backend_name: str, strategy: str, partitions: int, row: dict[str, object]) -> str:
    phases = row["phases"]
    assert isinstance(phases, dict)
    return (
        f"{backend_name:<9} {strategy:<12} {row['case']!s:<10} {partitions:>9,} "
        f"{row['ready_seconds']:>8.3f} {row['idle_seconds']:>8.3f} "
        f"{phases.get('load', 0):>7.3f} {phases.get('elect', 0):>7.3f} "
        f"{phases.get('persist', 0):>7.3f} {row['moved']:>6,} {row['reads']:>8,} "
        f"{row['writes']:>7,} {row['create_seconds']:>8.1f} {row['init_seconds']:>8.1f}"
    )


def _shared_row(result: Result, phases: dict[str, float]) -> dict[str, object]:
    return {
        "case": "shared",
        "ready_seconds": round(result.seconds, 4),
        "idle_seconds": round(result.settled_seconds, 4),
        "phases": phases,
        "moved": result.moved,
        "reads": result.ops.reads,
        "writes": result.ops.writes,
        "create_seconds": 0.0,
        "init_seconds": round(result.setup_seconds, 2),
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench_warm_failover", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="10,000 partitions")
    parser.add_argument("--backend", action="append", choices=["memory", "zookeeper", "redis"])
    parser.add_argument("--strategy", action="append", choices=["kafka", "latch", "warm-standby"])
    parser.add_argument("--case", choices=["dedicated", "shared"], default="dedicated")
    parser.add_argument("--partitions", type=int, action="append")
    parser.add_argument("--brokers", type=int, default=5)
    parser.add_argument(
        "--topic-size",
        type=int,
        default=TOPIC_SIZE,
        help=f"partitions per topic beside topic crash (default {TOPIC_SIZE:,}; 1 is "
        "KAFKA-5642's case of single-partition topics, where per-topic costs show)",
    )
    parser.add_argument("--zk-heap", help="ZooKeeper's -Xmx (default: grows with --partitions)")
    parser.add_argument(
        "--zk-gc",
        choices=sorted(COLLECTORS),
        default="g1",
        help="ZooKeeper's garbage collector (default g1: serial stops a heap of GiBs for seconds)",
    )
    parser.add_argument(
        "--zk-growing-heap",
        action="store_true",
        help="start ZooKeeper's heap at 32 MiB and let it grow (default: fixed, -Xms = -Xmx, as "
        "production servers run; a heap that grows or shrinks costs the server in the cases)",
    )
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument(
        "--session-timeout",
        type=float,
        help="the brokers' store session timeout in seconds (the store's default unless given); "
        "at millions of partitions in one process, threads starved for seconds expire sessions",
    )
    parser.add_argument(
        "--existing",
        action="store_true",
        help="write the cluster (assignments and first leaders) in bulk before the brokers start, "
        "instead of creating topics for the controller to elect (what makes 2,000,000 practical)",
    )
    parser.add_argument(
        "--processes",
        action="store_true",
        help="every broker in a process of its own (process_failover.py; ZooKeeper and Redis, "
        "the dedicated layout written in bulk; the benchmark delivers the controlled-shutdown "
        "request to the controller's process)",
    )
    parser.add_argument(
        "--log-dir",
        type=Path,
        default=Path("warm-failover-logs"),
        help="with --processes, where each broker process's stderr goes",
    )
    args = parser.parse_args(argv)
    sizes = args.partitions or ([10_000] if args.quick else [100_000, 500_000])
    if args.processes and ("memory" in (args.backend or ["memory"]) or args.case == "shared"):
        raise SystemExit(
            "--processes: the memory store lives in one process and the shared layout has no "
            "dedicated controller; give --backend=zookeeper or --backend=redis"
        )
    if min(sizes) <= CRASH_PARTITIONS and args.case == "dedicated":
        raise SystemExit(f"--partitions must exceed the {CRASH_PARTITIONS:,} of topic crash")
    get_plugin_manager()
    print(HEADER, flush=True)
    for backend_name in args.backend or ["memory", "zookeeper"]:
        for partitions in sizes:
            heap = args.zk_heap or zk_heap_for(partitions)
            if backend_name == "zookeeper":
                mode = "growing from 32 MiB" if args.zk_growing_heap else "fixed, -Xms = -Xmx"
                print(
                    f"# ZooKeeper heap {heap} ({mode}; {args.zk_gc} collector) for "
                    f"{partitions:,} partitions",
                    flush=True,
                )
            for strategy in args.strategy or ["kafka", "warm-standby"]:
                sizes_seen: dict[str, float] | None = None
                with backend(
                    backend_name,
                    heap,
                    args.session_timeout,
                    args.zk_gc,
                    fixed_heap=not args.zk_growing_heap,
                ) as env:
                    if args.processes:
                        from process_failover import dedicated as in_processes

                        url = env.new_url()
                        rows = in_processes(
                            url,
                            strategy,
                            partitions,
                            args.brokers,
                            args.log_dir / env.name,
                            topic_size=args.topic_size,
                            settle=env.settle,
                        )
                    elif args.case == "shared":
                        with _Phases() as captured:
                            result = failover(env, strategy, partitions, args.brokers)
                        rows = [_shared_row(result, captured.phases)]
                    else:
                        memory = not args.no_memory and strategy == "warm-standby"
                        rows, sizes_seen = dedicated(
                            env,
                            strategy,
                            partitions,
                            args.brokers,
                            memory,
                            existing=args.existing,
                            topic_size=args.topic_size,
                        )
                for row in rows:
                    print(_row(backend_name, strategy, partitions, row), flush=True)
                    line = {
                        "bench": "warm_failover",
                        "backend": backend_name,
                        "strategy": strategy,
                        "partitions": partitions,
                        "topic_size": args.topic_size,
                        "brokers": args.brokers,
                        **row,
                    }
                    if backend_name == "zookeeper":
                        line["zookeeper_heap"] = heap
                    print(json.dumps(line), flush=True)
                if sizes_seen is not None:
                    print(
                        f"memory    {backend_name:<9} {partitions:>9,} partitions (bytes/partition, "
                        "tracemalloc): "
                        + ", ".join(f"{k} {v:,.0f}" for k, v in sizes_seen.items()),
                        flush=True,
                    )
                    print(
                        json.dumps(
                            {
                                "bench": "warm_failover",
                                "case": "memory",
                                "backend": backend_name,
                                "partitions": partitions,
                                **{
                                    f"{k}_bytes_per_partition": round(v, 1)
                                    for k, v in sizes_seen.items()
                                },
                            }
                        ),
                        flush=True,
                    )
                gc.collect()

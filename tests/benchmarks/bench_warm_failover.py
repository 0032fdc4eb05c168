"""Controller failover, cold (``kafka``: the new controller bulk-reads every partition state) versus
warm (``warm-standby``: it fills its context from the image its candidate kept current through the
change feed), at growing partition counts (issue 16).

Each run: a fresh server, a cluster of ``--brokers`` brokers, topics of 1,000 partitions (RF 2);
then the controller broker is killed. ``seconds`` runs from the kill until the new controller has
re-elected every partition the dead broker led and persisted the states (its ready event: every
affected partition led again); ``ctrl s`` is the controller's own part (from its start), split
into ``load`` (bulk read, or fill from the image), ``elect`` and ``persist``; ``settled`` adds the
ISR clean-up. Memory: bytes per partition of a standby's image and of a cold controller context,
measured with tracemalloc on a separate read of the same store (``--no-memory`` skips it).

    python tests/benchmarks/run.py warm_failover [--quick] [--backend=memory|zookeeper ...]
        [--partitions=N ...] [--brokers=N] [--strategy=kafka|warm-standby ...] [--no-memory]

Redis is refused by ``warm-standby`` until its store declares ``ordered_change_feed``.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import sys
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_engine import Result, backend_env, failover

from coordkit.engine.controller.context import ControllerContext
from coordkit.engine.controller.image import ROOT, MetadataImage
from coordkit.store import MetadataStore, TreeEvent, TreeEventKind

HEADER = (
    f"{'backend':<9} {'strategy':<12} {'parts':>9} {'seconds':>8} {'ctrl s':>7} {'load':>7} "
    f"{'elect':>7} {'persist':>7} {'settled':>8} {'moved':>8} {'reads':>9} {'setup s':>8}"
)


def _bytes_per_partition(store: MetadataStore, partitions: int) -> tuple[float, float]:
    """(image, cold context) bytes per partition, traced allocations of a read of ``store``."""
    gc.collect()
    tracemalloc.start()
    try:
        image = MetadataImage()
        image.apply(TreeEvent(TreeEventKind.RESYNC, ROOT, 0))
        base = tracemalloc.get_traced_memory()[0]
        image.sync(store)
        gc.collect()
        image_bytes = tracemalloc.get_traced_memory()[0] - base
        del image
        gc.collect()
        base = tracemalloc.get_traced_memory()[0]
        context = ControllerContext(store, read_batch=10_000, owner="bench")
        context.load()
        gc.collect()
        context_bytes = tracemalloc.get_traced_memory()[0] - base
        del context
    finally:
        tracemalloc.stop()
    return image_bytes / partitions, context_bytes / partitions


def _memory(env_name: str, partitions: int, brokers: int) -> tuple[float, float]:
    """Set up a cluster as the failover case does and measure a read of its store."""
    from bench_engine import TOPIC_SIZE, _initialised, _start

    with backend_env(env_name) as env:
        cluster = _start(env, "kafka", brokers)
        try:
            for t, first in enumerate(range(0, partitions, TOPIC_SIZE)):
                cluster.create_topic(f"fo{t}", min(TOPIC_SIZE, partitions - first), 2)
            _initialised(cluster, partitions)
            return _bytes_per_partition(cluster.admin_store, partitions)
        finally:
            cluster.close()


def _row(result: Result, phases: dict[str, float]) -> str:
    ctrl = result.controller_seconds or 0.0
    return (
        f"{result.backend:<9} {result.strategy:<12} {result.partitions:>9,} "
        f"{result.seconds:>8.3f} {ctrl:>7.3f} {phases.get('load', 0):>7.3f} "
        f"{phases.get('elect', 0):>7.3f} {phases.get('persist', 0):>7.3f} "
        f"{result.settled_seconds:>8.3f} {result.moved:>8,} {result.ops.reads:>9,} "
        f"{result.setup_seconds:>8.1f}"
    )


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


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench_warm_failover", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="10,000 partitions")
    parser.add_argument("--backend", action="append", choices=["memory", "zookeeper", "redis"])
    parser.add_argument("--strategy", action="append", choices=["kafka", "latch", "warm-standby"])
    parser.add_argument("--partitions", type=int, action="append")
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--no-memory", action="store_true")
    args = parser.parse_args(argv)
    sizes = args.partitions or ([10_000] if args.quick else [100_000, 500_000])
    print(HEADER, flush=True)
    for backend in args.backend or ["memory", "zookeeper"]:
        for partitions in sizes:
            for strategy in args.strategy or ["kafka", "warm-standby"]:
                with backend_env(backend) as env, _Phases() as captured:
                    result = failover(env, strategy, partitions, args.brokers)
                print(_row(result, captured.phases), flush=True)
                line = json.loads(result.json())
                line.update(bench="warm_failover", phases=captured.phases)
                print(json.dumps(line), flush=True)
                gc.collect()
            if not args.no_memory:
                image, context = _memory(backend, partitions, args.brokers)
                print(
                    f"memory    {backend:<9} {partitions:>9,} partitions: image "
                    f"{image:,.0f} B/partition, cold controller context {context:,.0f} B/partition",
                    flush=True,
                )
                print(
                    json.dumps(
                        {
                            "bench": "warm_failover",
                            "case": "memory",
                            "backend": backend,
                            "partitions": partitions,
                            "image_bytes_per_partition": round(image, 1),
                            "context_bytes_per_partition": round(context, 1),
                        }
                    ),
                    flush=True,
                )

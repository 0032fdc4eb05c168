"""ZooKeeper store benchmarks: ``python tests/benchmarks/run.py zookeeper [--quick]``.

Everything runs against one private standalone ZooKeeper (the test harness's server: Debian's
``zookeeper.jar``, default ``forceSync=yes``, so every write is fsynced) on loopback, from one
process. The machine's load average is printed with the figures: the server and the client share
its CPUs with whatever else runs.

**Single operations**, the store next to stock kazoo (a plain ``KazooClient``, no coordkit code in
its path) doing the same request on the same kind of node, so the ratio is the store's overhead;
``own`` is kazoo's API called on the store's own client (its batching connection handler), so
store/own is the cost of the store's wrapper alone:

* ``create``: ``store.create`` vs ``KazooClient.create``; ``get``: ``store.get`` vs
  ``KazooClient.get``; ``set``: ``store.set`` vs ``KazooClient.set``;
* ``transaction``: ``store.commit([Check, SetData])`` vs kazoo's ``transaction()`` with
  ``check`` + ``set_data``.

Many short rounds rotate the three to cancel drift; the ratio is of the medians (``best`` is the
ratio of the fastest rounds). Target: store/stock kazoo at most 1.2x.

**Bulk**: 100,000 partition-state nodes ``/brokers/topics/T/partitions/P/state`` holding Kafka's
JSON (``coordkit.kafka.layout.PARTITION_STATE``), 100 topics x 1,000 partitions: ``apply()`` of the
creates (the parents, 100,202 more nodes, created beforehand with ``apply()`` and timed
separately), ``apply()`` of a ``SetData`` per node (a leader change), the same sets as the controller
writes them (version-checked, in multis of ``write_batch_ops``, ``write_concurrency`` in flight: the
server CPU per write bounds a controlled shutdown's), ``get_many()`` of all; next to
stock kazoo doing the same updates and reads with ``set_async``/``get_async`` (all in flight, then
collected); and the controller's multis encoded beforehand and sent down a plain socket
(``bench_zookeeper_ceiling``: the server alone, no client cost). Each phase reports wall time and the
CPU used by this process and by the server.
Target: the 100,000 partition-state writes under 10 s. ``--quick`` divides the counts by ten.
"""

from __future__ import annotations

import json
import os
import statistics
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench_zookeeper_ceiling import encode_multis, server_ceiling
from cpu_time import process_cpu
from kazoo.client import KazooClient

from coordkit.engine import EngineConfig
from coordkit.kafka import layout
from coordkit.kafka.model import PartitionState, TopicAssignment
from coordkit.plugins import get_plugin_manager
from coordkit.store import Check, Create, MetadataStore, SetData
from harness.zookeeper import StandaloneZooKeeper

TARGET_RATIO = 1.2
TARGET_BULK_SECONDS = 10.0
REPLICAS = (1, 2, 3)


def report(case: str, **figures: Any) -> None:
    print(json.dumps({"bench": "zookeeper", "case": case, **figures}), flush=True)


def state_value(leader: int, epoch: int) -> bytes:
    return layout.PARTITION_STATE.encode(
        PartitionState(leader=leader, leader_epoch=epoch, isr=REPLICAS, controller_epoch=1)
    )


def server_cpu(server: StandaloneZooKeeper) -> float:
    """CPU seconds the server's JVM has used so far (user + system)."""
    process = server.server.process
    return 0.0 if process is None else process_cpu(process.pid)


class Phase:
    """Wall time, this process's CPU and the server's CPU over a ``with`` block."""

    def __init__(self, server: StandaloneZooKeeper):
        self.server = server
        self.wall = self.client_cpu = self.server_cpu = 0.0
        self._started = (0.0, 0.0, 0.0)

    def __enter__(self) -> Phase:
        self._started = (time.perf_counter(), time.process_time(), server_cpu(self.server))
        return self

    def __exit__(self, *exc: object) -> None:
        wall, client, srv = self._started
        self.wall = time.perf_counter() - wall
        self.client_cpu = time.process_time() - client
        self.server_cpu = server_cpu(self.server) - srv

    def figures(self, name: str) -> dict[str, float]:
        return {
            f"{name}_s": self.wall,
            f"{name}_client_cpu_s": self.client_cpu,
            f"{name}_server_cpu_s": self.server_cpu,
        }


def per_op(run: Callable[[int], Any], start: int, count: int) -> tuple[float, float]:
    """Wall seconds and this process's CPU seconds per ``run(i)``, ``i`` in ``start .. start+count``."""
    began, cpu = time.perf_counter(), time.process_time()
    for i in range(start, start + count):
        run(i)
    return (time.perf_counter() - began) / count, (time.process_time() - cpu) / count


class SingleOps:
    """The store, stock kazoo, and kazoo's API on the store's own connection (``own``), side by
    side on the same server: store/stock is the target ratio, store/own the wrapper alone."""

    def __init__(self, store: MetadataStore, raw: KazooClient, count: int, rounds: int):
        self.store = store
        self.raw = raw
        self.own: Any = store.client  # type: ignore[attr-defined]
        self.count = count
        self.rounds = rounds
        self.value = state_value(1, 0)

    def compare(self, case: str, **ops: Callable[[int], Any]) -> dict[str, float]:
        times: dict[str, list[float]] = {name: [] for name in ops}
        cpu: dict[str, list[float]] = {name: [] for name in ops}
        order = list(ops.items())
        for round_ in range(self.rounds):
            start = round_ * self.count
            # Rotate who goes first so no one always runs on a warmer server.
            shift = round_ % len(order)
            for name, op in order[shift:] + order[:shift]:
                wall, used = per_op(op, start, self.count)
                times[name].append(wall)
                cpu[name].append(used)
        figures = {f"{name}_us": statistics.median(t) * 1e6 for name, t in times.items()}
        figures.update({f"{name}_cpu_us": statistics.median(c) * 1e6 for name, c in cpu.items()})
        figures["ratio"] = figures["store_us"] / figures["raw_us"]
        figures["best_ratio"] = min(times["store"]) / min(times["raw"])
        figures["wrapper_ratio"] = figures["store_us"] / figures["own_us"]
        # Client CPU per op does not wait on a busy server: the steadier measure of overhead.
        figures["cpu_ratio"] = figures["store_cpu_us"] / figures["raw_cpu_us"]
        report(case, count=self.count, rounds=self.rounds, **figures)
        return figures

    def run(self) -> dict[str, dict[str, float]]:
        store, raw, own, value = self.store, self.raw, self.own, self.value
        out = {
            "create": self.compare(
                "create",
                store=lambda i: store.create(f"/n{i}", value),
                raw=lambda i: raw.create(f"/n{i}", value),
                own=lambda i: own.create(f"/k{i}", value),
            ),
            "get": self.compare(
                "get",
                store=lambda i: store.get(f"/n{i}"),
                raw=lambda i: raw.get(f"/n{i}"),
                own=lambda i: own.get(f"/k{i}"),
            ),
            "set": self.compare(
                "set",
                store=lambda i: store.set(f"/n{i}", value),
                raw=lambda i: raw.set(f"/n{i}", value),
                own=lambda i: own.set(f"/k{i}", value),
            ),
        }

        def store_txn(i: int) -> Any:
            return store.commit([Check(f"/n{i}", 1), SetData(f"/n{i}", value, 1)])

        def kazoo_txn(client: KazooClient, path: str) -> Any:
            txn = client.transaction()
            txn.check(path, 1)
            txn.set_data(path, value, 1)
            results = txn.commit()
            if any(isinstance(r, Exception) for r in results):
                raise RuntimeError(f"kazoo transaction failed: {results}")
            return results

        out["transaction"] = self.compare(
            "transaction",
            store=store_txn,
            raw=lambda i: kazoo_txn(raw, f"/n{i}"),
            own=lambda i: kazoo_txn(own, f"/k{i}"),
        )
        return out


def bulk(
    server: StandaloneZooKeeper,
    store: MetadataStore,
    raw: KazooClient,
    topics: int,
    partitions: int,
    chroot: str,
    getdata_store: MetadataStore | None = None,
) -> dict[str, Any]:
    names = [f"topic-{t:04d}" for t in range(topics)]
    assignment = layout.TOPIC.encode(TopicAssignment({p: REPLICAS for p in range(partitions)}))
    states = [layout.partition_state_path(t, p) for t in names for p in range(partitions)]
    nodes = len(states)
    figures: dict[str, Any] = {"nodes": nodes}

    parents: list[Create] = [Create(layout.BROKERS), Create(layout.BROKER_TOPICS)]
    for topic in names:
        parents.append(Create(layout.topic_path(topic), assignment))
        parents.append(Create(layout.partitions_path(topic)))
        parents.extend(Create(layout.partition_path(topic, p)) for p in range(partitions))
    figures["parents"] = len(parents)
    with Phase(server) as phase:
        made = store.apply(parents)
    figures.update(phase.figures("parents"))
    failed = [r for r in made if isinstance(r, Exception)]
    if failed:
        raise RuntimeError(f"{len(failed)} parent creates failed, first: {failed[0]}")

    creates = [Create(path, state_value(1 + i % 3, 0)) for i, path in enumerate(states)]
    with Phase(server) as phase:
        created = store.apply(creates)
    figures.update(phase.figures("create"))

    updates = [SetData(path, state_value(1 + (i + 1) % 3, 1), 0) for i, path in enumerate(states)]
    with Phase(server) as phase:
        updated = store.apply(updates)
    figures.update(phase.figures("set"))

    # The controller's shape: version-checked sets in multis of EngineConfig.write_batch_ops,
    # write_concurrency of them in flight (what a controlled shutdown's state writes cost).
    config = EngineConfig()
    moves = [SetData(path, state_value(1 + (i + 2) % 3, 2), 1) for i, path in enumerate(states)]
    batches = [
        moves[i : i + config.write_batch_ops] for i in range(0, nodes, config.write_batch_ops)
    ]
    with Phase(server) as phase, ThreadPoolExecutor(config.write_concurrency) as pool:
        committed = [r for batch in pool.map(store.commit, batches) for r in batch]
    figures.update(phase.figures("multi_set"))
    if len(committed) != nodes:
        raise RuntimeError(f"{nodes - len(committed)} multi sets missing")

    with Phase(server) as phase:
        read = store.get_many(states)
    figures.update(phase.figures("get_many"))
    if getdata_store is not None:  # the same read without multiRead: one getData per node
        with Phase(server) as phase:
            getdata_store.get_many(states)
        figures.update(phase.figures("get_many_getdata"))
    errors = sum(isinstance(r, Exception) for r in (*created, *updated, *read))
    if errors:
        raise RuntimeError(f"{errors} bulk operations failed")

    # Stock kazoo: the same updates and reads, all in flight at once, then collected.
    values = [state_value(1 + i % 3, 3) for i in range(nodes)]
    with Phase(server) as phase:
        pending = [
            raw.set_async(path, value, 2) for path, value in zip(states, values, strict=True)
        ]
        for result in pending:
            result.get()
    figures.update(phase.figures("raw_set"))
    with Phase(server) as phase:
        pending = [raw.get_async(path) for path in states]
        for result in pending:
            result.get()
    figures.update(phase.figures("raw_get"))

    # The server alone: the controller's multis encoded beforehand, sent down a plain socket.
    host, port = server.hosts.rsplit(":", 1)
    prefix = chroot.encode()
    size = config.write_batch_ops
    ops = [(prefix + path.encode(), state_value(1 + i % 3, 4), 3) for i, path in enumerate(states)]
    multis = encode_multis(ops, size)
    with Phase(server) as phase:
        server_ceiling(host, int(port), multis)
    figures.update(phase.figures("ceiling"))
    report("bulk", **figures)
    return figures


def open_raw(hosts: str, chroot: str) -> KazooClient:
    # Create the chroot first, as the store does for its own.
    setup = KazooClient(hosts=hosts)
    setup.start()
    setup.ensure_path(chroot)
    setup.stop()
    setup.close()
    raw = KazooClient(hosts=hosts + chroot)
    raw.start()
    return raw


def close_raw(raw: KazooClient) -> None:
    raw.stop()
    raw.close()


def main(flags: list[str]) -> None:
    quick = "--quick" in flags
    # Many short alternating rounds: the machine's load drifts less within a pair.
    count, rounds = (100, 8) if quick else (250, 24)
    topics, partitions = (10, 1000) if quick else (100, 1000)
    run = uuid.uuid4().hex[:6]
    server = StandaloneZooKeeper().start()
    try:
        store = get_plugin_manager().store_for(f"zookeeper://{server.hosts}/bench-{run}/store")
        raw = open_raw(server.hosts, f"/bench-{run}/raw")
        try:
            print(
                f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; "
                f"ZooKeeper standalone on {server.hosts} (forceSync=yes); "
                f"{count} ops x {rounds} rounds per case; "
                f"store batched_io={store.batched_io}"  # type: ignore[attr-defined]
            )
            single = SingleOps(store, raw, count, rounds).run()
        finally:
            store.close()
            close_raw(raw)
        bulk_store = get_plugin_manager().store_for(f"zookeeper://{server.hosts}/bench-{run}/bulk")
        bulk_raw = open_raw(server.hosts, f"/bench-{run}/bulk")
        getdata_store = get_plugin_manager().store_for(
            f"zookeeper://{server.hosts}/bench-{run}/bulk", multi_read=False
        )
        try:
            figures = bulk(
                server,
                bulk_store,
                bulk_raw,
                topics,
                partitions,
                f"/bench-{run}/bulk",
                getdata_store,
            )
        finally:
            getdata_store.close()
            bulk_store.close()
            close_raw(bulk_raw)
    finally:
        server.close()

    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    print(
        f"{'case':<12} {'store us/op':>12} {'kazoo us/op':>12} {'ratio':>7} {'best':>6}  "
        f"{'own us/op':>10} {'wrapper':>8}  {'client CPU us/op store/kazoo':>29}"
    )
    for case in ("create", "get", "set", "transaction"):
        f = single[case]
        mark = "ok" if f["ratio"] <= TARGET_RATIO else "OVER"
        print(
            f"{case:<12} {f['store_us']:>12.1f} {f['raw_us']:>12.1f} {f['ratio']:>6.2f}x "
            f"{f['best_ratio']:>5.2f}x  {f['own_us']:>10.1f} {f['wrapper_ratio']:>7.2f}x  "
            f"{f['store_cpu_us']:>9.1f} / {f['raw_cpu_us']:>6.1f} = {f['cpu_ratio']:.2f}x   {mark}"
        )
    print(f"target: ratio (median wall time, store / stock kazoo) <= {TARGET_RATIO}x")
    nodes = figures["nodes"]
    within = figures["create_s"] < TARGET_BULK_SECONDS and figures["set_s"] < TARGET_BULK_SECONDS
    print(
        f"bulk, {nodes:,} partition states ({'ok' if within else 'OVER'}: "
        f"target < {TARGET_BULK_SECONDS:.0f} s for the creates and for the sets)"
    )
    print(f"{'phase':<30} {'wall s':>8} {'ops/s':>9} {'client CPU s':>13} {'server CPU s':>13}")
    rows = [
        ("parents: store.apply create", "parents", figures["parents"]),
        ("states: store.apply create", "create", nodes),
        ("states: store.apply set", "set", nodes),
        ("states: multi set (controller)", "multi_set", nodes),
        ("states: store.get_many", "get_many", nodes),
        ("states: get_many, no multiRead", "get_many_getdata", nodes),
        ("states: stock kazoo set_async", "raw_set", nodes),
        ("states: stock kazoo get_async", "raw_get", nodes),
        ("states: multi set, server alone", "ceiling", nodes),
    ]
    for label, key, ops in rows:
        wall = figures[f"{key}_s"]
        print(
            f"{label:<30} {wall:>8.2f} {ops / wall:>9,.0f} "
            f"{figures[f'{key}_client_cpu_s']:>13.2f} {figures[f'{key}_server_cpu_s']:>13.2f}"
        )

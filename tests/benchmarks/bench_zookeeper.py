"""ZooKeeper store benchmarks: ``python tests/benchmarks/run.py zookeeper [--quick]``.

Everything runs against one private standalone ZooKeeper (the test harness's server: Debian's
``zookeeper.jar``, default ``forceSync=yes``, so every write is fsynced) on loopback, from one
process.

**Single operations**, the store next to stock kazoo (a plain ``KazooClient``, no coordkit code in
its path) doing the same request on the same kind of node, so the ratio is the store's overhead:

* ``create``: ``store.create`` vs ``KazooClient.create``; ``get``: ``store.get`` vs
  ``KazooClient.get``; ``set``: ``store.set`` vs ``KazooClient.set``;
* ``transaction``: ``store.commit([Check, SetData])`` vs kazoo's ``transaction()`` with
  ``check`` + ``set_data``.

Rounds alternate store and raw kazoo to cancel drift; the figures are medians. Target: store/raw at
most 1.2x.

**Bulk**: 100,000 partition-state nodes ``/brokers/topics/T/partitions/P/state`` holding Kafka's
JSON (``coordkit.layout.PARTITION_STATE``), 100 topics x 1,000 partitions: ``apply()`` of the
creates (the parents, 100,100 more nodes, created beforehand with ``apply()`` and timed
separately), ``apply()`` of a ``SetData`` per node (a leader change), ``get_many()`` of all; next to
stock kazoo doing the same updates and reads with ``set_async``/``get_async`` (thousands in
flight, then collected). Target: the 100,000 partition-state writes under 10 s. ``--quick`` divides
the counts by ten.
"""

from __future__ import annotations

import json
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient

from coordkit import layout
from coordkit.model import PartitionState, TopicAssignment
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


def per_op(run: Callable[[int], Any], start: int, count: int) -> float:
    """Seconds per operation for ``run(i)``, ``i`` in ``start .. start+count``."""
    began = time.perf_counter()
    for i in range(start, start + count):
        run(i)
    return (time.perf_counter() - began) / count


class SingleOps:
    """Store and raw kazoo side by side, each in its own chroot of the same server."""

    def __init__(self, store: MetadataStore, raw: KazooClient, count: int, rounds: int):
        self.store = store
        self.raw = raw
        self.count = count
        self.rounds = rounds
        self.value = state_value(1, 0)

    def compare(
        self, case: str, store_op: Callable[[int], Any], raw_op: Callable[[int], Any]
    ) -> dict[str, float]:
        store_times: list[float] = []
        raw_times: list[float] = []
        for round_ in range(self.rounds):
            start = round_ * self.count
            # Alternate who goes first so neither always runs on a warmer server.
            pairs = [(store_times, store_op), (raw_times, raw_op)]
            for times, op in pairs if round_ % 2 == 0 else reversed(pairs):
                times.append(per_op(op, start, self.count))
        store_us = statistics.median(store_times) * 1e6
        raw_us = statistics.median(raw_times) * 1e6
        figures = {"store_us": store_us, "raw_us": raw_us, "ratio": store_us / raw_us}
        report(case, count=self.count, rounds=self.rounds, **figures)
        return figures

    def run(self) -> dict[str, dict[str, float]]:
        store, raw, value = self.store, self.raw, self.value
        out = {
            "create": self.compare(
                "create",
                lambda i: store.create(f"/n{i}", value),
                lambda i: raw.create(f"/n{i}", value),
            ),
            "get": self.compare("get", lambda i: store.get(f"/n{i}"), lambda i: raw.get(f"/n{i}")),
            "set": self.compare(
                "set", lambda i: store.set(f"/n{i}", value), lambda i: raw.set(f"/n{i}", value)
            ),
        }

        def store_txn(i: int) -> Any:
            return store.commit([Check(f"/n{i}", 1), SetData(f"/n{i}", value, 1)])

        def raw_txn(i: int) -> Any:
            txn = raw.transaction()
            txn.check(f"/n{i}", 1)
            txn.set_data(f"/n{i}", value, 1)
            results = txn.commit()
            if any(isinstance(r, Exception) for r in results):
                raise RuntimeError(f"raw kazoo transaction failed: {results}")
            return results

        out["transaction"] = self.compare("transaction", store_txn, raw_txn)
        return out


def bulk(store: MetadataStore, raw: KazooClient, topics: int, partitions: int) -> dict[str, Any]:
    names = [f"topic-{t:04d}" for t in range(topics)]
    assignment = layout.TOPIC.encode(TopicAssignment({p: REPLICAS for p in range(partitions)}))
    states = [layout.partition_state_path(t, p) for t in names for p in range(partitions)]
    nodes = len(states)

    parents: list[Create] = [Create(layout.BROKERS), Create(layout.BROKER_TOPICS)]
    for topic in names:
        parents.append(Create(layout.topic_path(topic), assignment))
        parents.append(Create(layout.partitions_path(topic)))
        parents.extend(Create(layout.partition_path(topic, p)) for p in range(partitions))
    began = time.perf_counter()
    made = store.apply(parents)
    parents_s = time.perf_counter() - began
    failed = [r for r in made if isinstance(r, Exception)]
    if failed:
        raise RuntimeError(f"{len(failed)} parent creates failed, first: {failed[0]}")

    creates = [Create(path, state_value(1 + i % 3, 0)) for i, path in enumerate(states)]
    began = time.perf_counter()
    created = store.apply(creates)
    create_s = time.perf_counter() - began

    updates = [SetData(path, state_value(1 + (i + 1) % 3, 1), 0) for i, path in enumerate(states)]
    began = time.perf_counter()
    updated = store.apply(updates)
    set_s = time.perf_counter() - began

    began = time.perf_counter()
    read = store.get_many(states)
    get_many_s = time.perf_counter() - began
    errors = sum(isinstance(r, Exception) for r in (*created, *updated, *read))
    if errors:
        raise RuntimeError(f"{errors} bulk operations failed")

    # Stock kazoo: the same updates and reads, all in flight at once, then collected.
    values = [state_value(1 + (i + 2) % 3, 2) for i in range(nodes)]
    began = time.perf_counter()
    pending = [raw.set_async(path, value, 1) for path, value in zip(states, values, strict=True)]
    for result in pending:
        result.get()
    raw_set_s = time.perf_counter() - began
    began = time.perf_counter()
    pending = [raw.get_async(path) for path in states]
    for result in pending:
        result.get()
    raw_get_s = time.perf_counter() - began

    figures = {
        "nodes": nodes,
        "parents": len(parents),
        "parents_s": parents_s,
        "create_s": create_s,
        "set_s": set_s,
        "get_many_s": get_many_s,
        "raw_set_s": raw_set_s,
        "raw_get_s": raw_get_s,
    }
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


def main(flags: list[str]) -> None:
    quick = "--quick" in flags
    count, rounds = (300, 4) if quick else (2000, 6)
    topics, partitions = (10, 1000) if quick else (100, 1000)
    run = uuid.uuid4().hex[:6]
    server = StandaloneZooKeeper().start()
    try:
        store = get_plugin_manager().store_for(f"zookeeper://{server.hosts}/bench-{run}/store")
        raw = open_raw(server.hosts, f"/bench-{run}/raw")
        try:
            print(
                f"ZooKeeper standalone on {server.hosts} (forceSync=yes); "
                f"{count} ops x {rounds} rounds per case; store batched_io={store.batched_io}"  # type: ignore[attr-defined]
            )
            single = SingleOps(store, raw, count, rounds).run()
            bulk_store = get_plugin_manager().store_for(
                f"zookeeper://{server.hosts}/bench-{run}/bulk"
            )
            bulk_raw = open_raw(server.hosts, f"/bench-{run}/bulk")
            try:
                figures = bulk(bulk_store, bulk_raw, topics, partitions)
            finally:
                bulk_store.close()
                bulk_raw.stop()
                bulk_raw.close()
        finally:
            store.close()
            raw.stop()
            raw.close()
    finally:
        server.close()

    print(
        f"{'case':<12} {'store us/op':>12} {'kazoo us/op':>12} {'ratio':>7}  target <= {TARGET_RATIO}x"
    )
    for case in ("create", "get", "set", "transaction"):
        f = single[case]
        mark = "ok" if f["ratio"] <= TARGET_RATIO else "OVER"
        print(f"{case:<12} {f['store_us']:>12.1f} {f['raw_us']:>12.1f} {f['ratio']:>6.2f}x  {mark}")
    nodes = figures["nodes"]
    mark = (
        "ok"
        if figures["create_s"] < TARGET_BULK_SECONDS and figures["set_s"] < TARGET_BULK_SECONDS
        else "OVER"
    )
    print(
        f"bulk {nodes:,} partition states via apply(): create {figures['create_s']:.2f} s "
        f"({nodes / figures['create_s']:,.0f}/s), set {figures['set_s']:.2f} s "
        f"({nodes / figures['set_s']:,.0f}/s) ({mark}, target < {TARGET_BULK_SECONDS:.0f} s); "
        f"get_many {figures['get_many_s']:.2f} s ({nodes / figures['get_many_s']:,.0f}/s); "
        f"parents ({figures['parents']:,} nodes) {figures['parents_s']:.2f} s"
    )
    print(
        f"stock kazoo, same {nodes:,} nodes, *_async all in flight: set {figures['raw_set_s']:.2f} s "
        f"({nodes / figures['raw_set_s']:,.0f}/s), get {figures['raw_get_s']:.2f} s "
        f"({nodes / figures['raw_get_s']:,.0f}/s)"
    )

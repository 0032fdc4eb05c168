"""Redis store benchmarks: ``python tests/benchmarks/run.py redis [--quick] [--durable]``.

Everything runs against one private ``redis-server`` on loopback (``--durable``: with
``appendonly yes`` + ``appendfsync always``), single-threaded, in one process.

**Single operations**, the store next to the raw redis-py call that does the same server work, so
the ratio is the store's client-side overhead (validation, encoding, reply decoding, session
checks) and nothing else:

* ``create``, ``set``, ``transaction`` (check + set, all or nothing): the store call versus a raw
  ``EVALSHA`` of the very same ops script with the same arguments (``Redis.execute_command``);
* ``get``: ``store.get`` versus a raw ``HGETALL`` of the node's hash;
* ``exists``: ``store.exists`` versus a raw ``EVALSHA`` of the same stat script.

For scale, ``plain HSET`` / ``plain HGETALL`` time a bare hash write / read without any of
ZooKeeper's semantics (no versions, parents, sessions or change stream): the price of emulation.

Raw and store run in alternating chunks of operations (200 per chunk, 30 chunks each; with
``--quick`` 100 and 8); the ratio is the median of the ratios of adjacent chunks, which see the same
machine load, and the microseconds are the best chunk's. Target: store/raw at most 1.2x.

**Bulk**: 100,000 partition-state nodes ``/brokers/topics/T/partitions/P/state`` holding Kafka's
JSON (``coordkit.kafka.layout.PARTITION_STATE``), 100 topics x 1,000 partitions: ``apply()`` of the
creates (parents created beforehand, timed separately), ``apply()`` of a ``SetData`` for each,
``get_many()`` of all. Next to each, the same server work through plain redis-py: one
``pipeline(transaction=False)`` of the same ops-script calls in the same 1,000-op batches (for
reads, a pipeline of ``HGETALL``s). Target: the 100,000 partition-state writes under 3 s.
``--quick`` uses 500 ops per single-op case and 10,000 partition states.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import redis

from coordkit.kafka import layout
from coordkit.kafka.model import PartitionState
from coordkit.plugins import get_plugin_manager
from coordkit.store import Check, Create, MetadataStore, SetData
from coordkit_redis.keys import KeySpace
from coordkit_redis.scripts import SCRIPTS
from harness.redis_server import RedisServer

TARGET_RATIO = 1.2
TARGET_BULK_SECONDS = 3.0
PREFIX = "bench"


def timed(run: Callable[[int], Any], count: int) -> float:
    """Seconds per operation for ``run(i)`` over ``count`` operations."""
    started = time.perf_counter()
    for i in range(count):
        run(i)
    return (time.perf_counter() - started) / count


def report(case: str, **figures: Any) -> None:
    print(json.dumps({"bench": "redis", "case": case, **figures}), flush=True)


class SingleOps:
    def __init__(self, store: MetadataStore, raw: Any, count: int, rounds: int):
        self.store = store
        self.raw = raw
        self.count = count
        self.rounds = rounds
        self.keys = KeySpace(PREFIX)
        self.head = ("EVALSHA", SCRIPTS.ops.sha, 1, self.keys.zxid, self.keys.base, "10000")
        self.value = b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2]}'
        self.round = 0

    def session(self) -> str:
        return str(self.store.session_id)

    def compare(
        self, case: str, store_op: Callable[[int], Any], raw_op: Callable[[int], Any]
    ) -> dict[str, float]:
        store_times: list[float] = []
        raw_times: list[float] = []
        for r in range(self.rounds):
            self.round = r
            pair = [(raw_times, raw_op), (store_times, store_op)]
            for times, op in pair if r % 2 == 0 else reversed(pair):
                times.append(timed(op, self.count))
        # Adjacent chunks see the same machine load: the ratio is the median of the paired ratios.
        ratios = [st / rt for st, rt in zip(store_times, raw_times, strict=True)]
        store_us = min(store_times) * 1e6
        raw_us = min(raw_times) * 1e6
        figures = {
            "store_us": round(store_us, 1),
            "raw_us": round(raw_us, 1),
            "ratio": round(statistics.median(ratios), 3),
            "store_median_us": round(statistics.median(store_times) * 1e6, 1),
            "raw_median_us": round(statistics.median(raw_times) * 1e6, 1),
            "store_ops_s": round(1e6 / store_us),
            "raw_ops_s": round(1e6 / raw_us),
        }
        report(case, **figures)
        return figures

    def run(self) -> dict[str, dict[str, float]]:
        store, raw, value, head = self.store, self.raw, self.value, self.head
        for parent in ("/s", "/r"):
            store.create(parent, b"")
        results: dict[str, dict[str, float]] = {}

        def store_create(i: int) -> None:
            store.create(f"/s/{self.round}-{i}", value)

        def raw_create(i: int) -> None:
            raw.execute_command(*head, self.session(), "e", "c", f"/r/{self.round}-{i}", value, "")

        results["create"] = self.compare("create", store_create, raw_create)
        store.create("/s/n", value)
        store.create("/r/n", value)

        def store_set(i: int) -> None:
            store.set("/s/n", value)

        def raw_set(i: int) -> None:
            raw.execute_command(*head, self.session(), "e", "s", "/r/n", value, "-1")

        results["set"] = self.compare("set", store_set, raw_set)
        results["get"] = self.compare(
            "get",
            lambda i: store.get("/s/n"),
            lambda i: raw.execute_command("HGETALL", self.keys.node("/r/n")),
        )
        stat_head = ("EVALSHA", SCRIPTS.stat.sha, 1, self.keys.zxid, self.keys.base, "10000")
        raw.execute_command("SCRIPT", "LOAD", SCRIPTS.stat.source)
        results["exists"] = self.compare(
            "exists",
            lambda i: store.exists("/s/n"),
            lambda i: raw.execute_command(*stat_head, "/r/n"),
        )

        def store_transaction(i: int) -> None:
            store.commit([Check("/s/n", -1), SetData("/s/n", value)])

        def raw_transaction(i: int) -> None:
            raw.execute_command(
                *head, self.session(), "m", "k", "/r/n", b"", "-1", "s", "/r/n", value, "-1"
            )

        results["transaction"] = self.compare("transaction", store_transaction, raw_transaction)
        plain = self.keys.base + "plain"
        plain_write = timed(lambda i: raw.hset(plain, mapping={"d": value, "v": i}), self.count)
        plain_read = timed(lambda i: raw.execute_command("HGETALL", plain), self.count)
        report("plain", hset_us=round(plain_write * 1e6, 1), hgetall_us=round(plain_read * 1e6, 1))
        results["plain"] = {"hset_us": plain_write * 1e6, "hgetall_us": plain_read * 1e6}
        return results


def partition_parents(root: str, topics: int, partitions: int) -> list[Create]:
    ops = [Create(root, b"")]
    for t in range(topics):
        ops.append(Create(f"{root}/topic-{t}", b""))
        ops.append(Create(f"{root}/topic-{t}/partitions", b""))
        ops += [Create(f"{root}/topic-{t}/partitions/{p}", b"") for p in range(partitions)]
    return ops


def state_paths(root: str, topics: int, partitions: int) -> list[str]:
    return [
        f"{root}/topic-{t}/partitions/{p}/state" for t in range(topics) for p in range(partitions)
    ]


def server_seconds(raw: Any) -> float:
    """CPU seconds the server has spent in EVALSHA so far (INFO commandstats)."""
    stats = raw.info("commandstats").get("cmdstat_evalsha", {})
    return float(stats.get("usec", 0)) / 1e6


def raw_batches(raw: Any, session: str, words: list[tuple[str, str, bytes, str]]) -> float:
    """The store's server work through a plain redis-py pipeline: the same ops script, the same
    1,000-op batches, one ``pipeline(transaction=False).execute()``. Returns seconds."""
    keys = KeySpace(PREFIX)
    started = time.perf_counter()
    pipe = raw.pipeline(transaction=False)
    for start in range(0, len(words), 1000):
        args: list[Any] = [session, "e"]
        for op in words[start : start + 1000]:
            args.extend(op)
        pipe.execute_command("EVALSHA", SCRIPTS.ops.sha, 1, keys.zxid, keys.base, "2000", *args)
    replies = pipe.execute()
    elapsed = time.perf_counter() - started
    assert all(b"\nE" not in r and not r.startswith((b"E", b"!")) for r in replies), (
        "raw ops failed"
    )
    return elapsed


def bulk(store: MetadataStore, raw: Any, topics: int, partitions: int) -> dict[str, float]:
    """Partition states under /brokers/topics through the store, under /raw/topics through the
    raw pipeline of the same script batches."""
    state = layout.PARTITION_STATE.encode(
        PartitionState(leader=1, leader_epoch=0, isr=(1, 2, 3), controller_epoch=1)
    )
    total = topics * partitions
    store.create("/brokers", b"")
    started = time.perf_counter()
    made = store.apply(partition_parents("/brokers/topics", topics, partitions))
    parents_s = time.perf_counter() - started
    made += store.apply(partition_parents("/raw", topics, partitions))
    assert all(isinstance(r, str) for r in made), "creating the parents failed"
    paths = state_paths("/brokers/topics", topics, partitions)
    raw_paths = state_paths("/raw", topics, partitions)
    session = str(store.session_id)

    busy = server_seconds(raw)
    started = time.perf_counter()
    created = store.apply([Create(path, state) for path in paths])
    create_s = time.perf_counter() - started
    create_server_s = server_seconds(raw) - busy
    assert all(isinstance(r, str) for r in created), "creating the states failed"
    raw_create_s = raw_batches(raw, session, [("c", path, state, "") for path in raw_paths])

    busy = server_seconds(raw)
    started = time.perf_counter()
    updated = store.apply([SetData(path, state) for path in paths])
    set_s = time.perf_counter() - started
    set_server_s = server_seconds(raw) - busy
    assert all(r.version == 1 for r in updated), "updating the states failed"
    raw_set_s = raw_batches(raw, session, [("s", path, state, "-1") for path in raw_paths])

    started = time.perf_counter()
    read = store.get_many(paths)
    get_s = time.perf_counter() - started
    assert all(isinstance(r, tuple) and r[0] == state for r in read), "reading the states failed"
    keys = KeySpace(PREFIX)
    started = time.perf_counter()
    pipe = raw.pipeline(transaction=False)
    for path in raw_paths:
        pipe.execute_command("HGETALL", keys.node(path))
    pipe.execute()
    raw_get_s = time.perf_counter() - started

    figures = {
        "nodes": total,
        "parents_s": round(parents_s, 3),
        "create_s": round(create_s, 3),
        "create_server_s": round(create_server_s, 3),
        "raw_create_s": round(raw_create_s, 3),
        "set_s": round(set_s, 3),
        "set_server_s": round(set_server_s, 3),
        "raw_set_s": round(raw_set_s, 3),
        "get_many_s": round(get_s, 3),
        "raw_hgetall_pipeline_s": round(raw_get_s, 3),
        "create_nodes_s": round(total / create_s),
        "set_nodes_s": round(total / set_s),
        "get_nodes_s": round(total / get_s),
    }
    report("bulk-partition-states", **figures)
    return figures


def main(flags: list[str]) -> None:
    quick = "--quick" in flags
    durable = "--durable" in flags
    count, rounds = (100, 8) if quick else (200, 30)
    topics, partitions = (10, 1000) if quick else (100, 1000)
    with RedisServer(durable=durable) as server:
        store = get_plugin_manager().store_for(server.url(prefix=PREFIX))
        # The raw client gets the store's own connection settings (RESP2, no retries, timeouts).
        raw = redis.Redis(**store.config.connection_kwargs())  # type: ignore[attr-defined]
        try:
            print(
                f"redis-server on {server.host}:{server.port} "
                f"({'appendonly yes, appendfsync always' if durable else 'no persistence'}); "
                f"{rounds} chunks of {count} ops per case"
            )
            single = SingleOps(store, raw, count, rounds).run()
            figures = bulk(store, raw, topics, partitions)
        finally:
            store.close()
            raw.close()
    print(
        f"{'case':<12} {'store us/op':>12} {'raw us/op':>10} {'ratio':>7}  target <= {TARGET_RATIO}x"
    )
    for case in ("create", "set", "get", "exists", "transaction"):
        f = single[case]
        mark = "ok" if f["ratio"] <= TARGET_RATIO else "OVER"
        print(f"{case:<12} {f['store_us']:>12.1f} {f['raw_us']:>10.1f} {f['ratio']:>6.2f}x  {mark}")
    plain = single["plain"]
    print(
        f"plain HSET {plain['hset_us']:.1f} us, plain HGETALL {plain['hgetall_us']:.1f} us (no ZooKeeper semantics)"
    )
    nodes = figures["nodes"]
    within = max(figures["create_s"], figures["set_s"]) < TARGET_BULK_SECONDS
    print(
        f"bulk, {nodes:,} partition states ({'ok' if within else 'OVER'}: target < {TARGET_BULK_SECONDS:.0f} s)"
    )
    print(
        f"{'':<10} {'store s':>8} {'raw s':>8}  (raw: the same ops-script batches in one redis-py pipeline)"
    )
    for name, store_key, raw_key in (
        ("create", "create_s", "raw_create_s"),
        ("set", "set_s", "raw_set_s"),
        ("read", "get_many_s", "raw_hgetall_pipeline_s"),
    ):
        print(f"{name:<10} {figures[store_key]:>8.2f} {figures[raw_key]:>8.2f}")
    print(
        f"(server time in the scripts: create {figures['create_server_s']:.2f} s, "
        f"set {figures['set_server_s']:.2f} s; read: get_many() against a pipeline of HGETALLs; "
        f"parents: {figures['parents_s']:.2f} s)"
    )

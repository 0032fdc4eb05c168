"""Rough figures for the README: single writes, bulk writes, reads, a watch and a change feed
across processes, a feed's delivery rate, and the CPU an idle client costs.

``python benchmarks/bench_sqlite.py [DIRECTORY]`` (default: a temporary directory; the disk's
fsync time dominates every write)."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from coordkit.plugins import open_store
from coordkit.store import Create, DataEvent, TreeEvent

CHILD = r"""
import sys
from coordkit.plugins import open_store
with open_store(sys.argv[1]) as store:
    for line in sys.stdin:
        store.set("/w", line.strip().encode())
"""


def rate(label: str, count: int, action: object) -> None:
    start = time.perf_counter()
    action()  # type: ignore[operator]
    took = time.perf_counter() - start
    print(f"{label:<42} {count / took:>10,.0f}/s  ({took * 1000 / count:.3f} ms each)")


def main() -> None:
    directory = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="coordkit-bench-")
    url = f"sqlite://{os.path.join(directory, 'bench.db')}"
    with open_store(url) as store:
        store.create("/b", b"")
        n = 200
        rate(
            "create (one transaction each)",
            n,
            lambda: [store.create(f"/b/{i}", b"x" * 100) for i in range(n)],
        )
        rate(
            "set (one transaction each)",
            n,
            lambda: [store.set(f"/b/{i}", b"y" * 100) for i in range(n)],
        )
        rate("get", 20 * n, lambda: [store.get(f"/b/{i % n}") for i in range(20 * n)])
        rate(
            "apply: creates, 500 per transaction",
            5000,
            lambda: store.apply([Create(f"/b/a{i}", b"z" * 100) for i in range(5000)]),
        )
        rate(
            "get_many: 1000 paths per read",
            5000,
            lambda: [
                store.get_many([f"/b/a{i}" for i in range(j, j + 1000)])
                for j in range(0, 5000, 1000)
            ],
        )
        rate(
            "commit: 10 creates per transaction",
            100 * 10,
            lambda: [store.commit([Create(f"/b/c{j}-{i}") for i in range(10)]) for j in range(100)],
        )

        store.create("/f", b"")
        fed: list[TreeEvent] = []
        feed = store.watch_tree("/f", fed.append)
        start = time.perf_counter()
        store.apply([Create(f"/f/{i}", b"z" * 100) for i in range(5000)])
        feed.flush(60)
        took = time.perf_counter() - start
        print(
            f"{'watch_tree: 5000 creates by apply, delivered':<42} {5000 / took:>10,.0f}/s  "
            f"({len(fed) - 1} events, the write included)"
        )
        feed.cancel()

        store.create("/w", b"start")
        seen: dict[bytes, float] = {}
        fed_at: dict[bytes, float] = {}
        arrived = threading.Event()

        def watch(event: DataEvent) -> None:
            if event.data is not None:
                seen[event.data] = time.perf_counter()
                arrived.set()

        def follow(event: TreeEvent) -> None:
            if event.data is not None:
                fed_at[event.data] = time.perf_counter()

        store.watch_data("/w", watch)
        store.watch_tree("/w", follow)
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, url], stdin=subprocess.PIPE, text=True
        )
        assert child.stdin is not None
        latencies = []
        feed_latencies = []
        for i in range(-1, 50):  # -1: the other process starting up, not measured
            arrived.clear()
            value = f"v{i}"
            sent = time.perf_counter()
            child.stdin.write(value + "\n")
            child.stdin.flush()
            while value.encode() not in seen or value.encode() not in fed_at:
                arrived.wait(0.01)
            if i >= 0:
                latencies.append((seen[value.encode()] - sent) * 1000)
                feed_latencies.append((fed_at[value.encode()] - sent) * 1000)
        child.stdin.close()
        child.wait()
        for label, found in (("watch", latencies), ("watch_tree", feed_latencies)):
            found.sort()
            print(
                f"{label + ': a set in another process, delivered':<42} median "
                f"{statistics.median(found):.1f} ms, 90th percentile "
                f"{found[int(len(found) * 0.9)]:.1f} ms (the other process's commit included)"
            )

        before = time.process_time()
        time.sleep(5)
        print(
            f"{'CPU of this process, idle, one client open':<42} {(time.process_time() - before) / 5 * 100:.1f}%"
        )


if __name__ == "__main__":
    main()

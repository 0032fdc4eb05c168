"""The ZooKeeper server's own ceiling for the controller's write shape, with no client cost:
``python tests/benchmarks/run.py zookeeper_ceiling [--writes=N] [--rounds=R] [--quick]``.

A controller's state writes are version-checked ``setData`` ops in multis of ``write_batch_ops``.
Here every multi is encoded (jute, by hand) before the clock starts, then all are sent down one
plain socket while a second thread reads the replies, checking only that each multi succeeded:
the wall time is what the server takes, the floor under any client's figure on this machine.

The encoding follows ZooKeeper's ``zookeeper.jute``: a ``ConnectRequest`` to open a session, then
per multi a ``RequestHeader`` (xid, type 14), for each op a ``MultiHeader`` (type 5, done false,
err -1) and a ``SetDataRequest`` (path, data, version), and a closing ``MultiHeader`` (-1, true,
-1); a reply is a ``ReplyHeader`` (xid, zxid, err) and a ``MultiResponse`` whose first header
names an op type (5) on success and -1 (an error result) on failure.

As an area of its own it writes ``--writes`` states (default 1,333,334: a controlled shutdown of
a broker leading a third of 2,000,000 partitions and following a third, each a state write) as
two version-checked writes to each of ``writes / 2`` nodes, in multis of ``write_batch_ops``, for
``--rounds`` rounds (the JVM warms up); ``--quick`` divides the writes by ten. The nodes are
created beforehand through the store (not timed). ``bench_zookeeper`` runs the same phase on its
100,000 states.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import struct
import threading
import time
import uuid
from collections.abc import Sequence

MULTI = 14
SET_DATA = 5
CLOSE_SESSION = -11
_INT = struct.Struct(">i")
_OP_HEADER = struct.Struct(">ibi")
_END = _OP_HEADER.pack(-1, 1, -1)


def _string(value: bytes) -> bytes:
    return _INT.pack(len(value)) + value


def encode_multi_set(xid: int, ops: Sequence[tuple[bytes, bytes, int]]) -> bytes:
    """One framed multi of ``setData(path, data, version)`` ops (paths absolute, no chroot)."""
    parts = [_INT.pack(xid), _INT.pack(MULTI)]
    for path, data, version in ops:
        parts.append(_OP_HEADER.pack(SET_DATA, 0, -1))
        parts.append(_string(path))
        parts.append(_string(data))
        parts.append(_INT.pack(version))
    parts.append(_END)
    body = b"".join(parts)
    return _INT.pack(len(body)) + body


def encode_multis(ops: Sequence[tuple[bytes, bytes, int]], size: int) -> list[bytes]:
    """``ops`` in order, as framed multis of ``size`` ops each (xids 1..n)."""
    return [
        encode_multi_set(n + 1, ops[start : start + size])
        for n, start in enumerate(range(0, len(ops), size))
    ]


def _connect(host: str, port: int, timeout_ms: int = 30_000) -> socket.socket:
    sock = socket.create_connection((host, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    request = struct.pack(">iqiq", 0, 0, timeout_ms, 0) + _string(bytes(16)) + b"\x00"
    sock.sendall(_INT.pack(len(request)) + request)
    _read_frame(sock)  # ConnectResponse: the session is open
    return sock


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    chunks: list[bytes] = []
    while size:
        chunk = sock.recv(min(size, 1 << 20))
        if not chunk:
            raise ConnectionError("ZooKeeper closed the connection")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _read_frame(sock: socket.socket) -> bytes:
    (size,) = _INT.unpack(_read_exactly(sock, 4))
    return _read_exactly(sock, size)


def server_ceiling(host: str, port: int, multis: Sequence[bytes]) -> float:
    """Send pre-encoded ``multis`` (from :func:`encode_multi_set`, xids 1..n) down one session
    at once; seconds until the last reply. Raises if any multi failed."""
    sock = _connect(host, port)
    failures: list[str] = []

    def read_replies() -> None:
        try:
            for expected in range(1, len(multis) + 1):
                frame = _read_frame(sock)
                xid, _zxid, err = struct.unpack_from(">iqi", frame)
                (first_type,) = _INT.unpack_from(frame, 16)
                if xid != expected or err != 0 or first_type != SET_DATA:
                    failures.append(f"multi {xid}: err {err}, first result type {first_type}")
        except (OSError, struct.error) as exc:  # a reply missing is a failure, not a figure
            failures.append(f"reading the replies: {exc}")

    try:
        reader = threading.Thread(target=read_replies)
        started = time.perf_counter()
        reader.start()
        for multi in multis:
            sock.sendall(multi)
        reader.join()
        seconds = time.perf_counter() - started
        close = _INT.pack(len(multis) + 1) + _INT.pack(CLOSE_SESSION)
        sock.sendall(_INT.pack(len(close)) + close)
    finally:
        sock.close()
    if failures:
        raise RuntimeError(f"{len(failures)} of {len(multis)} multis failed, first: {failures[0]}")
    return seconds


def _positive(text: str) -> int:
    value = int(text.replace(",", "").replace("_", ""))
    if value < 1:
        raise argparse.ArgumentTypeError(f"a positive whole number, got {text!r}")
    return value


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(
        prog="bench_zookeeper_ceiling", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--writes", type=_positive, default=1_333_334)
    parser.add_argument("--rounds", type=_positive, default=3)
    parser.add_argument("--quick", action="store_true", help="a tenth of the writes")
    args = parser.parse_args(argv)
    # Imported here: the helpers above serve bench_zookeeper without the harness.
    from bench_zookeeper import Phase, state_value

    from coordkit.engine import EngineConfig
    from coordkit.plugins import get_plugin_manager
    from coordkit.store import Create
    from harness.zookeeper import StandaloneZooKeeper

    nodes = max(1, args.writes // (10 if args.quick else 1) // 2)
    size = EngineConfig().write_batch_ops
    chroot = f"/ceiling-{uuid.uuid4().hex[:6]}"
    server = StandaloneZooKeeper(heap="4g").start()
    try:
        paths = [f"/t{n // 1000:04d}/p{n % 1000}/state" for n in range(nodes)]
        store = get_plugin_manager().store_for(f"zookeeper://{server.hosts}{chroot}")
        try:
            began = time.perf_counter()
            parents = sorted({p.rsplit("/", 2)[0] for p in paths})
            store.apply([Create(t) for t in parents])
            store.apply([Create(p.rsplit("/", 1)[0]) for p in paths])
            store.apply([Create(p, state_value(1, 0)) for p in paths])
            print(f"# {nodes:,} state nodes created in {time.perf_counter() - began:.1f}s")
        finally:
            store.close()
        host, port = server.hosts.rsplit(":", 1)
        prefix = chroot.encode()
        full = [prefix + p.encode() for p in paths]
        print(
            f"{'round':>5} {'writes':>10} {'wall s':>8} {'writes/s':>10} {'server CPU s':>13} "
            f"{'client CPU s':>13} {'load':>5}"
        )
        for round_ in range(args.rounds):
            ops = [  # every node's first write, then every node's second
                (path, state_value(1 + (n + version) % 3, version + 1), version)
                for version in (2 * round_, 2 * round_ + 1)
                for n, path in enumerate(full)
            ]
            multis = encode_multis(ops, size)
            load = os.getloadavg()[0]
            with Phase(server) as phase:
                server_ceiling(host, int(port), multis)
            done = 2 * nodes
            print(
                f"{round_ + 1:>5} {done:>10,} {phase.wall:>8.2f} {done / phase.wall:>10,.0f} "
                f"{phase.server_cpu:>13.2f} {phase.client_cpu:>13.2f} {load:>5.2f}",
                flush=True,
            )
            print(
                json.dumps(
                    {
                        "bench": "zookeeper_ceiling",
                        "round": round_ + 1,
                        "writes": done,
                        "batch_ops": size,
                        "load": load,
                        **phase.figures("ceiling"),
                    }
                )
            )
    finally:
        server.close()

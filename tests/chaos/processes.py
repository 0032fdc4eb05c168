"""Three ``coordkit serve --broker-id N`` processes on one store, each reaching the store through
a TCP proxy of its own and each other broker through a proxy of that pair
(:mod:`chaos.peer_routes`), and the faults a process-chaos schedule inflicts on them.

* kill -9 a process, then start it again with the same broker id, port and log directory (the
  store refuses the id until the dead process's session expires: the start is retried);
* SIGSTOP a process past the store's session timeout, then SIGCONT;
* cut a process off from the store (its proxy drops every connection and refuses new ones);
* cut two brokers apart (both pairs' proxies: fetches and the controller's requests between them).

Each process's output is drained by a thread (a full pipe would block the broker) and its last
lines kept for a failure report.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from chaos import peer_routes
from chaos.peer_routes import ROUTES_VARIABLE
from coordkit.store.urls import StoreURL
from coordkit.testing.servers.ports import free_port
from harness.faults import continue_process, suspend_process
from harness.proxy import TCPProxy
from harness.zookeeper import with_hosts
from serve.conftest import SHORT_SESSIONS, STOP_SECONDS, PortTakenError

#: What each process runs: the test's connection routes (:mod:`chaos.peer_routes`), loaded from
#: its file (``tests/chaos`` is not put on the broker's path), then ``coordkit``'s command line.
_LAUNCH = (
    "import importlib.util as u; "
    f"s = u.spec_from_file_location('coordkit_chaos_peer_routes', {peer_routes.__file__!r}); "
    "m = u.module_from_spec(s); s.loader.exec_module(m); m.install(); "
    "from coordkit.cli import main; main()"
)

BROKERS = (1, 2, 3)
#: Lines of each process's output kept for a failure report.
KEPT_LINES = 120
#: Broker configs of every process: followers fetch often and leave the ISR quickly, so that a
#: schedule's faults move ISRs within its seconds.
SERVE_CONFIGS = (
    "replica.lag.time.max.ms=3000",
    "replica.fetch.wait.max.ms=100",
    "leader.imbalance.check.interval.seconds=2",
    "offsets.topic.replication.factor=3",
)


class BrokerProcess:
    """One broker id's process (the current one: a restart replaces it) and its store proxy."""

    def __init__(
        self, broker_id: int, store_url: str, data_dir: Path, moved: Callable[[int], None]
    ) -> None:
        self.broker_id = broker_id
        self.moved = moved
        parsed = StoreURL.parse(store_url)
        self.proxies = [TCPProxy(host, port or 0) for host, port in parsed.hosts]
        self.url = with_hosts(parsed, ",".join(p.address for p in self.proxies))
        self.data_dir = data_dir
        self.routes_file = data_dir.with_name(f"{data_dir.name}-routes.json")
        #: Chosen before the first start, so that routes to it exist before any connection.
        self.port = free_port()
        self.address = ""
        self.process: subprocess.Popen[str] | None = None
        self.output: collections.deque[str] = collections.deque(maxlen=KEPT_LINES)
        self.paused = False

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        """Start the process on :attr:`port` (another free one when it was taken meanwhile, and
        ``moved`` is called to route the other brokers' connections there)."""
        for attempt in range(5):
            try:
                self._spawn()
                return
            except PortTakenError:
                if attempt == 4:
                    raise
                self.port = free_port()
                self.moved(self.broker_id)

    def _spawn(self) -> None:
        args = ["serve", "--store", self.url, "--broker-id", str(self.broker_id),
                "--data-dir", str(self.data_dir), "--port", str(self.port), *SHORT_SESSIONS]  # fmt: skip
        for config in SERVE_CONFIGS:
            args += ["--config", config]
        env = dict(os.environ, PYTHONUNBUFFERED="1", **{ROUTES_VARIABLE: str(self.routes_file)})
        process = subprocess.Popen([sys.executable, "-c", _LAUNCH, *args], env=env, text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        assert process.stdout is not None
        assert process.stderr is not None
        for line in process.stdout:  # "broker N ... HOST:PORT" lines, then "store ..."
            if line.startswith("broker "):
                self.address = line.split()[-1]
            elif line.startswith("store "):
                break
        else:
            process.wait(STOP_SECONDS)
            error = process.stderr.read()
            failure = PortTakenError if "Address already in use" in error else AssertionError
            raise failure(f"broker {self.broker_id}'s process did not start: {error}")
        self.process = process
        self.output.append(f"[started at {self.address}, pid {process.pid}]")
        for stream in (process.stdout, process.stderr):
            threading.Thread(target=self._drain, args=(stream,), daemon=True).start()

    def _drain(self, stream: IO[str] | None) -> None:
        if stream is None:
            return
        with contextlib.suppress(ValueError, OSError):
            for line in stream:
                self.output.append(line.rstrip())

    def kill(self) -> None:
        assert self.process is not None
        if self.paused:
            self.resume()
        self.process.kill()
        self.process.wait(STOP_SECONDS)
        self.output.append("[killed -9]")

    def pause(self) -> None:
        assert self.process is not None
        suspend_process(self.process)
        self.paused = True

    def resume(self) -> None:
        if self.process is not None and self.paused:
            continue_process(self.process)
        self.paused = False

    def cut_store(self) -> None:
        for proxy in self.proxies:
            proxy.cut()

    def restore_store(self) -> None:
        for proxy in self.proxies:
            proxy.restore()

    def close(self) -> None:
        self.resume()
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(STOP_SECONDS)
        for proxy in self.proxies:
            proxy.close()


class ProcessCluster:
    """:data:`BROKERS`, one process each, on ``store_url`` (a fresh namespace); each process's
    connections to another broker go through a proxy of that ordered pair (:meth:`cut_peers`)."""

    def __init__(self, store_url: str, data_root: Path) -> None:
        self.brokers = {
            b: BrokerProcess(b, store_url, data_root / f"broker-{b}-process", self._route)
            for b in BROKERS
        }
        #: (from, to) -> the proxy ``from``'s process reaches ``to``'s listener through.
        self.peer_proxies: dict[tuple[int, int], TCPProxy] = {}
        self.cut_pairs: set[tuple[int, int]] = set()
        self._routes_lock = threading.Lock()
        for broker in BROKERS:
            self._route(broker)

    def _route(self, to: int) -> None:
        """(Re)make the proxies to broker ``to``'s port and rewrite every process's routes."""
        with self._routes_lock:
            port = self.brokers[to].port
            for source in BROKERS:
                if source == to:
                    continue
                old = self.peer_proxies.get((source, to))
                if old is not None and old.target[1] == port:
                    continue
                if old is not None:
                    old.close()
                proxy = self.peer_proxies[(source, to)] = TCPProxy("127.0.0.1", port)
                if (source, to) in self.cut_pairs:
                    proxy.cut()
            for source, broker in self.brokers.items():
                routes = {
                    f"127.0.0.1:{self.brokers[to].port}": proxy.address
                    for (frm, to), proxy in self.peer_proxies.items()
                    if frm == source
                }
                broker.data_dir.parent.mkdir(parents=True, exist_ok=True)
                partial = broker.routes_file.with_suffix(".tmp")
                partial.write_text(json.dumps(routes))
                partial.replace(broker.routes_file)  # a reader never sees half a file

    def cut_peers(self, a: int, b: int) -> str:
        """Cut ``a`` and ``b`` apart both ways (clients and the store still reach both); says how
        many connections between them were open (the proof that they went through the proxies)."""
        with self._routes_lock:
            dropped = []
            for pair in ((a, b), (b, a)):
                self.cut_pairs.add(pair)
                proxy = self.peer_proxies[pair]
                dropped.append(f"{len(proxy._pairs)} from {pair[0]} to {pair[1]}")
                proxy.cut()
        return f"dropped connections: {', '.join(dropped)}"

    def restore_peers(self, a: int, b: int) -> None:
        with self._routes_lock:
            for pair in ((a, b), (b, a)):
                self.cut_pairs.discard(pair)
                self.peer_proxies[pair].restore()

    def start(self) -> ProcessCluster:
        """Start every process at once (each takes seconds to import and register)."""
        with concurrent.futures.ThreadPoolExecutor(len(self.brokers)) as pool:
            for started in [pool.submit(b.start) for b in self.brokers.values()]:
                started.result()
        return self

    def addresses(self) -> dict[int, str]:
        return {b: p.address for b, p in self.brokers.items() if p.address}

    @property
    def bootstrap(self) -> str:
        return ",".join(self.addresses().values())

    def restart(self, broker_id: int, deadline: float) -> str:
        """Start ``broker_id`` again; retried while the store still holds the dead process's
        registration (until its session expires), up to ``deadline``."""
        broker = self.brokers[broker_id]
        tries = 0
        while True:
            tries += 1
            try:
                broker.start()
                return f"restarted broker {broker_id} at {broker.address} (try {tries})"
            except AssertionError as exc:
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"broker {broker_id} could not start again: {exc}"
                    ) from None
                time.sleep(0.5)

    def heal(self) -> None:
        """SIGCONT every paused process and restore every store proxy (the runner restarts the
        dead ones)."""
        for broker in self.brokers.values():
            broker.resume()
            broker.restore_store()
        for a, b in list(self.cut_pairs):
            self.restore_peers(a, b)

    def log_dirs(self) -> dict[int, Path]:
        """Each broker's log directory (``--data-dir`` puts broker N's in ``broker-N``)."""
        return {b: p.data_dir / f"broker-{b}" for b, p in self.brokers.items()}

    def output(self) -> list[str]:
        lines = []
        for b, broker in self.brokers.items():
            lines.append(f"broker {b} process output (last {KEPT_LINES} lines):")
            lines.extend(f"    {line}" for line in broker.output)
        return lines

    def close(self) -> None:
        for broker in self.brokers.values():
            broker.close()
        for proxy in self.peer_proxies.values():
            proxy.close()

"""Three ``coordkit serve --broker-id N`` processes on one store, each reaching the store through
a TCP proxy of its own, and the faults a process-chaos schedule inflicts on them.

* kill -9 a process, then start it again with the same broker id, port and log directory (the
  store refuses the id until the dead process's session expires: the start is retried);
* SIGSTOP a process past the store's session timeout, then SIGCONT;
* cut a process off from the store (its proxy drops every connection and refuses new ones).

Each process's output is drained by a thread (a full pipe would block the broker) and its last
lines kept for a failure report.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import IO

from coordkit.store.urls import StoreURL
from harness.faults import continue_process, suspend_process
from harness.proxy import TCPProxy
from harness.zookeeper import with_hosts
from serve.conftest import STOP_SECONDS, PortTakenError, ServeProcess

BROKERS = (1, 2, 3)
#: Lines of each process's output kept for a failure report.
KEPT_LINES = 40
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

    def __init__(self, broker_id: int, store_url: str, data_dir: Path) -> None:
        self.broker_id = broker_id
        parsed = StoreURL.parse(store_url)
        self.proxies = [TCPProxy(host, port or 0) for host, port in parsed.hosts]
        self.url = with_hosts(parsed, ",".join(p.address for p in self.proxies))
        self.data_dir = data_dir
        self.port = 0
        self.address = ""
        self.process: subprocess.Popen[str] | None = None
        self.output: collections.deque[str] = collections.deque(maxlen=KEPT_LINES)
        self.paused = False

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        """Start the process (same port as before when it is still free)."""
        args = ["--store", self.url, "--broker-id", str(self.broker_id),
                "--data-dir", str(self.data_dir)]  # fmt: skip
        for config in SERVE_CONFIGS:
            args += ["--config", config]
        try:
            server = ServeProcess([*args, "--port", str(self.port)])
        except PortTakenError:
            server = ServeProcess([*args, "--port", "0"])
        self.process = server.process
        self.address = server.addresses[self.broker_id]
        self.port = int(self.address.rsplit(":", 1)[1])
        self.output.append(f"[started at {self.address}, pid {server.process.pid}]")
        for stream in (server.process.stdout, server.process.stderr):
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
    """:data:`BROKERS`, one process each, on ``store_url`` (a fresh namespace)."""

    def __init__(self, store_url: str, data_root: Path) -> None:
        self.brokers = {
            b: BrokerProcess(b, store_url, data_root / f"broker-{b}-process") for b in BROKERS
        }

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

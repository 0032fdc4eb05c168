"""``bench_warm_failover --processes``: the dedicated-controller cases with every broker in a process
of its own (``failover_broker.py``), as a real cluster runs them.

In one process the standbys' feeds, the killed broker's teardown and the controller share one
interpreter; here a standby applies the feed on its own core time and a crash ends a broker's
store session at once (as a crashed broker's session expiring) and freezes its process, killed
once the case is measured (its exit, on a machine of its own in a real cluster, does not take one
of these two cores during the failover), so a failover costs what it costs the new controller.
ZooKeeper and Redis only: the memory store lives in one process.

Times are ``time.monotonic()`` read in each process (CLOCK_MONOTONIC: one clock per machine).
``COORDKIT_BENCH_PYSPY=DIR`` runs each broker under ``py-spy record`` (folded stacks in DIR).
In the controlled-shutdown case the benchmark delivers the data broker's request to the
controller's process (the engine carries it only between brokers of one process; Kafka's brokers
send it over the wire): ``ready`` is the controller's answer, leadership moved and the broker out
of every ISR.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench_engine import TOPIC_SIZE
from bench_warm_failover import CRASH_PARTITIONS, _layout, _write_existing
from cpu_time import every_process, spent_by_role

from coordkit.engine.controllership import read_controller
from coordkit.plugins import get_plugin_manager

HERE = Path(__file__).parent
#: Brokers print where they are; a run waits at most this long for one step (2,000,000 partitions
#: on ZooKeeper take minutes to read into every standby).
STEP_TIMEOUT = float(os.environ.get("COORDKIT_BENCH_STEP_TIMEOUT", "3600"))


class BrokerProcess:
    """One ``failover_broker.py`` child: its events (parsed JSON lines) and its commands."""

    def __init__(self, url: str, broker_id: int, strategy: str, crash: int, log_dir: Path):
        self.broker_id = broker_id
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        self._stderr = open(log_dir / f"broker-{broker_id}.log", "wb")  # noqa: SIM115
        script = HERE / "failover_broker.py"
        command = [sys.executable, str(script), url, str(broker_id), strategy, str(crash)]
        profile = os.environ.get("COORDKIT_BENCH_PYSPY")
        if profile:  # a folded-stack profile of each broker (py-spy record, written at exit)
            out = Path(profile) / f"broker-{broker_id}.txt"
            spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy"
            # Not pausing the broker at each sample: blocking sampling of five brokers at once
            # loaded the two cores to 20 and stalled a 2,000,000-partition start.
            sampler = [spy, "record", "--nonblocking", "-r", "100", "-f", "raw", "-o", str(out)]
            command = [*sampler, "--", *command]
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with contextlib.suppress(ValueError):
                self.events.put(json.loads(line))
        self.events.put({"event": "exited", "at": time.monotonic()})

    def send(self, command: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()

    def wait_for(
        self, match: Callable[[dict[str, Any]], bool], what: str, timeout: float = STEP_TIMEOUT
    ) -> dict[str, Any]:
        """The first event (seen before or arriving) that ``match`` accepts."""
        for event in self.seen:
            if match(event):
                return event
        deadline = time.monotonic() + timeout
        while True:
            try:
                event = self.events.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise SystemExit(
                    f"benchmark: broker {self.broker_id} did not report {what} in {timeout:g}s"
                ) from None
            self.seen.append(event)
            if match(event):
                return event
            if event["event"] == "exited":
                raise SystemExit(
                    f"benchmark: broker {self.broker_id} exited before {what} (its log: "
                    f"{self._stderr.name})"
                )

    def drain(self) -> None:
        while True:
            try:
                self.seen.append(self.events.get_nowait())
            except queue.Empty:
                return

    def reap(self) -> None:
        """Kill a broker that crashed (stopped since, see ``failover_broker.py``)."""
        self.process.kill()
        self.process.wait()

    def close(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(OSError):
                self.send("exit")
            try:
                # py-spy writes a large broker's profile after it exits: give it time.
                self.process.wait(timeout=300 if os.environ.get("COORDKIT_BENCH_PYSPY") else 30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._stderr.close()


def _first(
    processes: dict[int, BrokerProcess],
    match: Callable[[dict[str, Any]], bool],
    what: str,
    timeout: float = STEP_TIMEOUT,
) -> tuple[int, dict[str, Any]]:
    """The broker that first reports an event ``match`` accepts (polled across all of them)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = []
        for broker_id, process in processes.items():
            process.drain()
            found += [(e["at"], broker_id, e) for e in process.seen if match(e)]
        if found:
            _at, broker_id, event = min(found, key=lambda f: f[0])
            return broker_id, event
        time.sleep(0.005)
    last = {
        b: [{k: v for k, v in e.items() if k != "at"} for e in p.seen[-4:]]
        for b, p in processes.items()
    }
    raise SystemExit(f"benchmark: no broker reported {what} in {timeout:g}s; last events: {last}")


def _image_current(process: BrokerProcess, since: float) -> None:
    if any(e["event"] == "image" and e["current"] for e in process.seen):
        return
    event = process.wait_for(lambda e: e["event"] == "image" and e["current"], "its image")
    _progress(
        f"broker {process.broker_id}'s image is current, {event.get('gc_tracked') or 0:,} objects "
        "tracked by its garbage collector",
        since,
    )


def _progress(what: str, since: float) -> None:
    print(f"# {what} ({time.monotonic() - since:.1f}s)", flush=True)


@contextlib.contextmanager
def _brokers() -> Iterator[dict[int, BrokerProcess]]:
    processes: dict[int, BrokerProcess] = {}
    try:
        yield processes
    finally:
        for process in processes.values():
            process.close()


def dedicated(
    url: str,
    strategy: str,
    partitions: int,
    brokers: int,
    log_dir: Path,
    *,
    topic_size: int = TOPIC_SIZE,
    settle: Callable[[], object] = lambda: None,
) -> list[dict[str, object]]:
    """Write the dedicated layout in bulk, start the brokers (the dedicated controller first),
    then crash the controller, then broker ``X``, then (after ``settle``: the server's garbage
    collected) shut one down."""
    ids = list(range(brokers))
    controller, crash = ids[0], ids[-1]
    admin = get_plugin_manager().store_for(url)
    try:
        created = _write_existing(admin, _layout(ids, partitions, controller, crash, topic_size))
    finally:
        admin.close()
    rows: list[dict[str, object]] = []
    log_dir.mkdir(parents=True, exist_ok=True)
    with _brokers() as processes:
        t0 = time.monotonic()
        # Every broker registered before the dedicated controller campaigns alone: its first pass
        # finds the layout as written (every leader live), then the others enter the election.
        for broker_id in ids:
            processes[broker_id] = BrokerProcess(url, broker_id, strategy, crash, log_dir)
        for process in processes.values():
            process.wait_for(lambda e: e["event"] == "started", "its registration")
        _progress(f"{brokers} brokers registered", t0)
        processes[controller].send("campaign")
        first = processes[controller].wait_for(lambda e: e["event"] == "ready", "its first term")
        _progress(f"broker {controller} is the controller", t0)
        # X last: a latch queues candidates in the order they enter, and X must not be next in
        # line (its crash is the second case). A standby's image is current once it has queued.
        for broker_id in ids[1:]:
            if broker_id == crash and strategy == "warm-standby":
                for other in (b for b in ids[1:] if b != crash):
                    _image_current(processes[other], t0)
            processes[broker_id].send("campaign")
        if strategy == "warm-standby":
            for process in processes.values():
                _image_current(process, t0)
        processes[controller].wait_for(lambda e: e["event"] == "idle", "an idle controller")
        init = time.monotonic() - t0
        setup = {"create_seconds": round(created, 2), "init_seconds": round(init, 2)}
        epoch = int(first["epoch"])

        # Case 1: the dedicated controller crashes.
        survivors = {b: p for b, p in processes.items() if b != controller}
        t0 = time.monotonic()
        processes[controller].send("crash")
        winner, ready = _first(
            survivors,
            lambda e: e["event"] == "ready" and e["epoch"] > epoch,
            "a new controller's first pass",
        )
        new_epoch = int(ready["epoch"])
        elected = survivors[winner].wait_for(
            lambda e: e["event"] == "elected" and e["epoch"] == new_epoch, "its election"
        )
        idle = survivors[winner].wait_for(
            lambda e: e["event"] == "idle" and e["epoch"] == new_epoch, "an idle controller"
        )
        processes[controller].reap()
        rows.append(
            {
                "case": "controller",
                "ready_seconds": round(ready["at"] - t0, 4),
                "idle_seconds": round(idle["at"] - t0, 4),
                # elected: from the crash until the winner learnt it won (the election itself).
                "phases": {
                    **ready["phases"],
                    "elected": round(elected["at"] - t0, 4),
                    "term": round(ready["seconds"], 4),
                },
                "moved": 0,
                "reads": ready["reads"],
                "writes": ready["writes"],
                **setup,
            }
        )

        # Case 2: broker X (every partition of topic crash leads there) crashes.
        case = "broker" if winner != crash else "broker+ctl"
        rest = {b: p for b, p in survivors.items() if b != crash}
        t0 = time.monotonic()
        survivors[crash].send("crash")
        _led_by, moved = _first(
            rest,
            lambda e: e["event"] == "crash-led" and e["count"] >= CRASH_PARTITIONS
            and e["at"] > t0,
            f"the {CRASH_PARTITIONS:,} partitions of topic crash led again",
        )  # fmt: skip
        idle = _first(
            rest,
            lambda e: e["event"] == "idle" and e["at"] >= moved["at"],
            "an idle controller after the crash",
        )[1]
        survivors[crash].reap()
        rows.append(
            {
                "case": case,
                "ready_seconds": round(moved["at"] - t0, 4),
                "idle_seconds": round(max(idle["at"], moved["at"]) - t0, 4),
                "phases": {},
                "moved": moved["count"],
                "reads": 0,
                "writes": 0,
                **setup,
            }
        )
        settle()
        rows.append(_controlled_shutdown(url, rest, setup))
    return rows


def _sample_shutdown(processes: dict[str, BrokerProcess]) -> list[subprocess.Popen[bytes]]:
    """With ``COORDKIT_BENCH_PYSPY_SHUTDOWN=DIR``, folded-stack profiles of the given processes
    during the controlled shutdown only (``DIR/shutdown-ROLE.txt``): the thread holding the GIL
    at each sample, so a profile is where the process's Python time goes (a thread waiting for
    the GIL is not counted as busy)."""
    out = os.environ.get("COORDKIT_BENCH_PYSPY_SHUTDOWN")
    if not out:
        return []
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy"
    samplers = []
    for role, process in processes.items():
        path = str(Path(out) / f"shutdown-{role}.txt")
        command = [spy, "record", "--nonblocking", "--gil", "-r", "250", "-f", "raw", "-o", path]
        command += ["-p", str(process.process.pid)]
        samplers.append(
            subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        )
    time.sleep(1.0)  # attached before the request goes
    return samplers


def _controlled_shutdown(
    url: str, processes: dict[int, BrokerProcess], setup: dict[str, float]
) -> dict[str, object]:
    """Case 3: a data broker (not the controller) shuts down in a controlled way; it leads about
    1/(brokers - 2) of all partitions and follows as many."""
    admin = get_plugin_manager().store_for(url)
    try:
        found = read_controller(admin)
    finally:
        admin.close()
    if found is None or found[0].broker_id not in processes:
        raise SystemExit(f"benchmark: no controller among brokers {sorted(processes)}")
    holder = processes[found[0].broker_id]
    target = min(b for b in processes if b != holder.broker_id)
    roles = {
        p.process.pid: "controller" if p is holder else "target" if b == target else "standbys"
        for b, p in processes.items()
    }
    standby = next((p for b, p in processes.items() if p is not holder and b != target), None)
    sampled = {"controller": holder} | ({"standby": standby} if standby is not None else {})
    # Counted first (a copy of every state in the controller's process), outside the window.
    asked = time.monotonic()
    holder.send(f"count {target}")
    counted = holder.wait_for(
        lambda e: e["event"] == "counted" and e["at"] >= asked,
        f"its count of broker {target}'s partitions",
    )
    if "error" in counted:
        raise SystemExit(f"benchmark: {counted['error']}")
    samplers = _sample_shutdown(sampled)
    cpu_before = every_process()
    sent = time.monotonic()
    holder.send(f"shutdown {target}")
    answer = holder.wait_for(
        lambda e: e["event"] == "shut-down" and e["at"] >= sent,
        f"its answer to broker {target}'s controlled shutdown",
    )
    for sampler in samplers:
        sampler.send_signal(signal.SIGINT)  # py-spy writes its profile on SIGINT
    for sampler in samplers:
        sampler.wait(timeout=120)
    # Where the machine's time went, to the controller's idle (the other brokers' feeds may
    # still be reading what it wrote).
    cpu = spent_by_role(cpu_before, every_process(), roles)
    _progress(f"CPU seconds during the controlled shutdown, by process: {cpu}", sent)
    if "error" in answer:
        raise SystemExit(f"benchmark: {answer['error']}")
    return {
        "case": "shutdown",
        "ready_seconds": round(answer["seconds"], 4),
        "idle_seconds": round(answer["idle"], 4),
        "phases": {
            "led": answer["led"],
            "followed": answer["followed"],
            "still_led": answer["still_led"],
        },
        "cpu_seconds": cpu,
        "moved": answer["led"] - answer["still_led"],
        "reads": answer["reads"],
        "writes": answer["writes"],
        **setup,
    }

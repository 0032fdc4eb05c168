"""Real Kafka clients (kafka-python, aiokafka, librdkafka through confluent-kafka), each in a
process of its own, for the tests of ``coordkit serve``: group members (consumers) and producers.

:mod:`serve.workers.clients` is the client, run as a script; this module starts it
(:class:`Member`, :class:`Producer`) and reads what it prints, one line per event:

* a member prints ``assigned <topic>:<partition> ...`` whenever what it owns changes, ``record
  <partition> <offset> <value>`` for every record, ``committed <partition>:<next offset> ...``
  after every successful synchronous commit (of the offsets it read and owns), ``commit-failed
  <error>`` when a commit fails (a rebalance meanwhile: not fatal, those records may be read
  again), ``refetch <partition> <expected offset> <offset got>`` when librdkafka skipped records
  and it seeks back (see :func:`serve.workers.clients._consume_confluent`), and ``closed`` once
  it committed and left the group on SIGTERM;
* a producer (acks=all, keyed records with unique values) prints ``acked <value> <partition>
  <offset>`` for every acknowledged record and ``failed <value> <error>`` for a delivery that
  failed after the client's own retries; it stops on SIGTERM (or after ``count`` records),
  flushes, and prints ``flushed <records sent>``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from serve.workers.clients import STOP_SECONDS

TOPIC = "orders"
PARTITIONS = 6
#: Seconds any one wait on the clients may take.
WAIT = 90
#: Lines of a worker's stderr kept for a failure message.
STDERR_LINES = 40
CLIENT_SCRIPT = Path(__file__).with_name("clients.py")


class ProcessOutput:
    """Both pipes of a process read as they come, each by a thread of its own (a chatty client
    never blocks on a full pipe, and no one else may read them: a line would go to one reader or
    the other). Standard output keeps whole lines only, not the half line of a killed process."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self._lock = threading.Lock()
        self._out: list[str] = []
        self._err: list[str] = []
        self._readers = [
            threading.Thread(target=self._read, args=(process.stdout, self._out, True)),
            threading.Thread(target=self._read, args=(process.stderr, self._err, False)),
        ]
        for reader in self._readers:
            reader.daemon = True
            reader.start()

    def _read(self, pipe: Any, into: list[str], whole: bool) -> None:
        for line in pipe:
            if not whole or line.endswith("\n"):
                with self._lock:
                    into.append(line.rstrip("\n"))

    def stdout(self) -> list[str]:
        with self._lock:
            return list(self._out)

    def stderr(self) -> list[str]:
        with self._lock:
            return list(self._err)

    def join(self, timeout: float) -> None:
        """Wait (each pipe up to ``timeout``) for everything a process that ended printed."""
        for reader in self._readers:
            reader.join(timeout)


class Worker:
    """A client worker process; what it printed is collected as it comes."""

    def __init__(self, role: str, name: str, conf: dict[str, Any]) -> None:
        self.name = name
        self.process = subprocess.Popen(
            [sys.executable, str(CLIENT_SCRIPT), role, json.dumps(conf)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )
        self._asked = False
        self._killed = False
        self.output = ProcessOutput(self.process)

    def lines(self, first_word: str | None = None) -> list[list[str]]:
        """The lines printed so far (split in words); those starting with ``first_word``."""
        words = [line.split() for line in self.output.stdout()]
        return [w for w in words if w and (first_word is None or w[0] == first_word)]

    def tail(self) -> str:
        """The last lines of its stdout and stderr, for a failure message."""
        out, err = self.output.stdout()[-5:], self.output.stderr()[-STDERR_LINES:]
        status = self.process.poll()
        state = "running" if status is None else f"exited {status}"
        return "\n".join([f"--- {self.name} ({state}); last stdout:", *out, "stderr:", *err])

    def save(self, directory: Path) -> None:
        """Write everything it printed to ``directory/<name>.out`` and ``.err``."""
        out, err = self.output.stdout(), self.output.stderr()
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"{self.name}.out").write_text("".join(f"{line}\n" for line in out))
        (directory / f"{self.name}.err").write_text("".join(f"{line}\n" for line in err))

    def ask_to_stop(self) -> None:
        """SIGTERM, once: a second one could end it while it exits (Python restores the default
        handlers on its way out)."""
        if not self._asked and self.process.poll() is None:
            self._asked = True
            self.process.send_signal(signal.SIGTERM)

    def terminate(self) -> int:
        """SIGTERM, and its exit status once it is gone and its output read."""
        self.ask_to_stop()
        try:
            status = self.process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.name} did not stop on SIGTERM\n{self.tail()}") from None
        self.output.join(10)
        return status

    def kill(self) -> None:
        """SIGKILL: no goodbye, no last commit."""
        self._killed = True
        self.process.kill()
        self.process.wait(STOP_SECONDS)

    @property
    def crashed(self) -> bool:
        """It exited with an error that nobody asked for."""
        status = self.process.poll()
        return status not in (None, 0) and not (self._asked or self._killed)

    def reap(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(STOP_SECONDS)


class Member(Worker):
    """A group member (consumer) of ``client`` (``kafka-python``, ``aiokafka``, ``confluent``);
    ``assignors`` sets librdkafka's ``partition.assignment.strategy``."""

    def __init__(
        self, client: str, bootstrap: str, group: str, name: str, assignors: str = ""
    ) -> None:
        conf = {"client": client, "bootstrap": bootstrap, "group": group, "name": name,
                "topic": TOPIC, "assignors": assignors}  # fmt: skip
        super().__init__("consume", name, conf)

    def owned(self) -> set[int]:
        """The partitions it owns now (as it last said)."""
        assigned = self.lines("assigned")
        return {int(w.rsplit(":", 1)[1]) for w in assigned[-1][1:]} if assigned else set()

    def records(self) -> list[tuple[int, int, str]]:
        """``(partition, offset, value)`` of every record it read, in order."""
        return [(int(w[1]), int(w[2]), w[3]) for w in self.lines("record")]

    def read(self) -> list[str]:
        return [value for _, _, value in self.records()]

    @property
    def closed(self) -> bool:
        return bool(self.lines("closed"))

    def stop(self) -> None:
        """SIGTERM: the member commits, leaves the group and exits."""
        status = self.terminate()
        assert (status, self.closed) == (0, True), f"{self.name} did not close\n{self.tail()}"


class Producer(Worker):
    """A producer of ``client``: ``count`` records (0: until SIGTERM), one every ``pace`` s,
    valued ``<prefix><i>``."""

    def __init__(
        self, client: str, bootstrap: str, name: str, *, prefix: str, count: int = 0, pace: float
    ) -> None:
        conf = {"client": client, "bootstrap": bootstrap, "topic": TOPIC, "prefix": prefix,
                "count": count, "pace": pace}  # fmt: skip
        super().__init__("produce", name, conf)

    def acked(self) -> dict[str, tuple[int, int]]:
        """value → (partition, offset) of every acknowledged record, in the order acknowledged."""
        return {w[1]: (int(w[2]), int(w[3])) for w in self.lines("acked")}

    def failed(self) -> list[str]:
        return [w[1] for w in self.lines("failed")]

    @property
    def flushed(self) -> bool:
        return bool(self.lines("flushed"))

    def stop(self) -> None:
        """SIGTERM: it stops sending, flushes what it sent, and exits."""
        status = self.terminate()
        assert (status, self.flushed) == (0, True), f"{self.name} did not flush\n{self.tail()}"


class Workers:
    """The workers a test started: started here, reaped at its end, shown when a wait fails."""

    def __init__(self, log_dir: Path) -> None:
        self.started: list[Worker] = []
        #: Where each worker's whole output is written at the end of the test.
        self.log_dir = log_dir

    def member(
        self, client: str, bootstrap: str, group: str, name: str, assignors: str = ""
    ) -> Member:
        member = Member(client, bootstrap, group, name, assignors)
        self.started.append(member)
        return member

    def producer(self, client: str, bootstrap: str, name: str, **options: Any) -> Producer:
        producer = Producer(client, bootstrap, name, **options)
        self.started.append(producer)
        return producer

    def tails(self) -> str:
        shown = "\n".join(worker.tail() for worker in self.started)
        return f"{shown}\n(whole outputs in {self.log_dir})"

    def wait_for(
        self,
        predicate: Callable[[], Any],
        what: str,
        timeout: float = WAIT,
        explain: Callable[[], str] | None = None,
    ) -> Any:
        """:func:`coordkit.testing.waiting.wait_for`, failing with ``explain()`` and every
        worker's last output."""
        from coordkit.testing.waiting import wait_for

        def done() -> Any:
            if any(worker.crashed for worker in self.started):
                raise AssertionError(f"a worker failed while waiting for {what}")
            return predicate()

        try:
            return wait_for(done, timeout, what)
        except AssertionError as exc:
            why = "" if explain is None else f"\n{explain()}"
            raise AssertionError(f"{exc}{why}\n{self.tails()}") from None

    def reap(self) -> None:
        for worker in self.started:
            worker.reap()
            worker.save(self.log_dir)


@pytest.fixture(name="workers")
def workers_fixture(tmp_path: Path) -> Iterator[Workers]:
    workers = Workers(tmp_path / "workers")
    yield workers
    workers.reap()


@pytest.fixture(name="members")
def members_fixture(workers: Workers) -> Callable[..., Member]:
    """Starts a :class:`Member`: ``members(client, bootstrap, group, name, assignors="")``."""
    return workers.member


def split(group: list[Member]) -> bool:
    """The members' assignments are disjoint, non-empty and cover every partition."""
    owned = [m.owned() for m in group]
    return (
        all(owned)
        and sum(len(o) for o in owned) == PARTITIONS
        and set().union(*owned) == set(range(PARTITIONS))
    )


def read_all(group: list[Member], values: set[str]) -> bool:
    seen: set[str] = set()
    for member in group:
        seen.update(member.read())
    return values <= seen

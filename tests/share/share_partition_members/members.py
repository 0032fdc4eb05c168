"""Launch share-group members (``confluent``: ``share_member.py``; ``java``: ``ShareMember.java``,
compiled once with javac against the fetched Kafka 4.4 jars and cached under ``.cache/``) and read
the JSON lines they print. A missing JDK, jar cache or confluent-kafka fails the test naming the
install (never a skip)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from coordkit.testing.servers.kafka_tools import (
    JVM_OPTIONS,
    KAFKA_KRAFT_VERSION,
    compile_java,
    log4j_option,
    require_java,
    write_log_config,
)

HERE = Path(__file__).parent
JAVA_SOURCE = HERE / "ShareMember.java"
JAVA_CLASS = "ShareMember"
PYTHON_SCRIPT = HERE / "share_member.py"
CLIENTS = ("confluent", "java")
JAVA_HEAP = "96m"
STOP_SECONDS = 30


def java_classpath() -> str:
    """The program's classes (compiled once against Kafka 4.4's jars, cached) and the jars."""
    return compile_java(JAVA_SOURCE, JAVA_CLASS)


class ShareMember:
    """One member process; :attr:`events` are the JSON objects it printed, in order."""

    def __init__(
        self, client: str, bootstrap: str, group: str, topic: str, policy: str, log_dir: Path
    ) -> None:
        self.client = client
        self.policy = policy
        if client == "java":
            log_dir.mkdir(parents=True, exist_ok=True)
            config = write_log_config(KAFKA_KRAFT_VERSION, log_dir / "share-member.log4j2",
                                      log_file=None, level="error")  # fmt: skip
            command = [require_java(), f"-Xmx{JAVA_HEAP}", *JVM_OPTIONS,
                       log4j_option(KAFKA_KRAFT_VERSION, config), "-cp", java_classpath(),
                       JAVA_CLASS, bootstrap, group, topic, policy]  # fmt: skip
        else:
            command = [sys.executable, str(PYTHON_SCRIPT), bootstrap, group, topic, policy]
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )  # fmt: skip
        self.events: list[dict[str, Any]] = []
        self.stderr: list[str] = []
        self._lock = threading.Lock()
        for stream, sink in ((self.process.stdout, self._event), (self.process.stderr,
                                                                  self.stderr.append)):  # fmt: skip
            threading.Thread(target=self._read, args=(stream, sink), daemon=True).start()

    def _read(self, stream: Any, sink: Callable[[str], None]) -> None:
        for line in stream:
            sink(line.rstrip("\n"))

    def _event(self, line: str) -> None:
        try:
            event = json.loads(line)
        except ValueError:
            event = {"event": "text", "text": line}
        with self._lock:
            self.events.append(event)

    def records(self) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self.events if e.get("event") == "record"]

    def saw(self, event: str) -> bool:
        with self._lock:
            return any(e.get("event") == event for e in self.events)

    def tail(self) -> str:
        with self._lock:
            shown = [json.dumps(e) for e in self.events[-10:]]
        return "\n".join([*shown, *self.stderr[-20:]])

    def kill(self) -> None:
        """SIGKILL: no acknowledgement, no leaving; its locks run out on the broker."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(STOP_SECONDS)

    def stop(self) -> int:
        """SIGTERM: it commits what it acknowledged and closes (leaves the group)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(STOP_SECONDS)


class Members:
    """The members a test starts (all stopped at its end)."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.started: list[ShareMember] = []

    def start(
        self, client: str, bootstrap: str, group: str, topic: str, policy: str
    ) -> ShareMember:
        member = ShareMember(client, bootstrap, group, topic, policy, self.log_dir)
        self.started.append(member)
        return member

    def wait(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                shown = "\n".join(f"-- {m.client}/{m.policy}:\n{m.tail()}" for m in self.started)
                raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{shown}")
            time.sleep(0.1)

    def close(self) -> None:
        for member in self.started:
            if member.process.poll() is None:
                member.stop()

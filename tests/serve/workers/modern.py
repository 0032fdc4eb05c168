"""Consumer-protocol (KIP-848) group members in processes of their own, for
``tests/serve/test_consumer_protocol_clients.py``: librdkafka through confluent-kafka
(``consumer_protocol.py``) and Kafka's own Java consumer (``ConsumerProtocolMember.java``, compiled
once with javac against the fetched Kafka 4.x jars and cached under ``.cache/``). Both print the
lines ``consumer_protocol.py`` describes; :class:`ModernMember` reads them.

A missing JDK, jar cache or confluent-kafka fails the test naming the install (never a skip)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from coordkit.testing.servers.kafka_tools import (
    JVM_OPTIONS,
    KAFKA_KRAFT_VERSION,
    compile_java,
    log4j_option,
    require_java,
    write_log_config,
)
from serve.workers import TOPIC, Member, ProcessOutput, Workers

HERE = Path(__file__).parent
JAVA_SOURCE = HERE / "ConsumerProtocolMember.java"
JAVA_CLASS = "ConsumerProtocolMember"
PYTHON_SCRIPT = HERE / "consumer_protocol.py"
CLIENTS = ("confluent", "java")
#: A Java member's heap: one consumer of a small topic.
JAVA_HEAP = "96m"
#: The JVM ends on SIGTERM with 128 + 15 once its shutdown hook (commit, close) finished.
JAVA_SIGTERM_STATUS = 143


def java_classpath() -> str:
    """The program's classes (compiled once against Kafka 4.4's jars, cached) and the jars."""
    return compile_java(JAVA_SOURCE, JAVA_CLASS)


def require(client: str) -> None:
    """Fail now, naming the install, when ``client`` cannot run here."""
    if client == "java":
        java_classpath()
    elif importlib.util.find_spec("confluent_kafka") is None:
        pytest.fail("confluent-kafka is not installed: `pip install -e . --group test`")


class ModernMember(Member):
    """A consumer-protocol member of ``client`` (``confluent`` or ``java``); ``instance`` is its
    ``group.instance.id`` (static membership), ``assignor`` its ``group.remote.assignor``."""

    def __init__(
        self,
        client: str,
        bootstrap: str,
        group: str,
        name: str,
        log_dir: Path,
        instance: str = "",
        assignor: str = "",
    ) -> None:
        self.name = name
        self.client = client
        if client == "java":
            log_dir.mkdir(parents=True, exist_ok=True)
            config = write_log_config(KAFKA_KRAFT_VERSION, log_dir / f"{name}.log4j2.properties",
                                      log_file=None, level="warn")  # fmt: skip
            command = [require_java(), f"-Xmx{JAVA_HEAP}", *JVM_OPTIONS,
                       log4j_option(KAFKA_KRAFT_VERSION, config), "-cp", java_classpath(),
                       JAVA_CLASS, bootstrap, group, name, TOPIC, instance or "-",
                       assignor or "-"]  # fmt: skip
        else:
            conf = {"bootstrap": bootstrap, "group": group, "name": name, "topic": TOPIC,
                    "instance": instance, "assignor": assignor,
                    "debug": os.environ.get("COORDKIT_TEST_RDKAFKA_DEBUG", "")}  # fmt: skip
            command = [sys.executable, str(PYTHON_SCRIPT), json.dumps(conf)]
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
        )
        self._asked = False
        self._killed = False
        #: Wall-clock seconds of the SIGKILL, if it was killed.
        self.killed_at: float | None = None
        self.output = ProcessOutput(self.process)

    def owned(self) -> set[int]:
        assigned = self.lines("assigned")
        return {int(w.rsplit(":", 1)[1]) for w in assigned[-1][2:]} if assigned else set()

    def ownerships(self) -> list[tuple[float, set[int]]]:
        """``(wall-clock seconds, partitions owned from then on)`` per ``assigned`` line."""
        return [
            (int(w[1]) / 1000, {int(x.rsplit(":", 1)[1]) for x in w[2:]})
            for w in self.lines("assigned")
        ]

    @property
    def crashed(self) -> bool:
        status = self.process.poll()
        ended = status not in (None, 0, JAVA_SIGTERM_STATUS) or (
            status == JAVA_SIGTERM_STATUS and not self.closed
        )
        return ended and not (self._asked or self._killed)

    def kill(self) -> None:
        self.killed_at = time.time()
        super().kill()

    def stop(self) -> None:
        """SIGTERM: the member commits, leaves the group and exits."""
        status = self.terminate()
        ok = (0, JAVA_SIGTERM_STATUS) if self.client == "java" else (0,)
        assert status in ok, f"{self.name} exited {status}\n{self.tail()}"
        assert self.closed, f"{self.name} did not close\n{self.tail()}"


def start_member(
    workers: Workers, client: str, bootstrap: str, group: str, name: str, **options: str
) -> ModernMember:
    """A :class:`ModernMember` that ``workers`` reaps and shows when a wait fails."""
    member = ModernMember(client, bootstrap, group, name, workers.log_dir, **options)
    workers.started.append(member)
    return member

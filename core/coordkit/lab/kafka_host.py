"""A lab workload's reference brokers: a real Apache Kafka 4.4 cluster in KRaft mode, run the way
:mod:`.serve_host` runs coordkit's, for the ``...@kafka`` strategies of the workloads that start
real clients (``real-clients``, ``share-groups``).

Run as ``python -m coordkit.lab.kafka_host BROKERS TOPIC PARTITIONS RF DIRECTORY [KEY=VALUE ...]``
(broker configs by Kafka's names, what the workload gives coordkit's brokers too, as Kafka takes
them). It starts one KRaft controller (``process.roles=controller``, never crashed: it stands where
coordkit's store stands) and ``BROKERS`` broker JVMs (ids 0..), creates the topic, prints
``broker <id> <host:port>`` per broker, then ``ready``; on stdin, ``stop-broker <id>`` SIGKILLs
that broker's JVM (``stopped <id>`` when it is gone). End of stdin (the workload closed it, or
died) kills every JVM; started through ``setpriv --pdeathsig`` where there is one, they die with
this process too. Kafka 4.4 serves share groups as formatted (its ``share.version`` feature at 1).

The jars are the ones ``bash kafka-dist/fetch.sh`` puts in ``.cache/kafka/4.4.0`` (or
``$COORDKIT_KAFKA_HOME/4.4.0``); :func:`require_kafka` names the fix when they or Java are
missing. The brokers get Kafka's defaults but for the configs given, the internal topics' sizes
(one or two partitions, replicated as the topic) and small JVMs (``-Xmx`` :data:`BROKER_HEAP`,
the serial collector, the quick compiler only: two shared cores).
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

from coordkit.errors import MissingDependencyError

KAFKA_VERSION = "4.4.0"
HOME_VARIABLE = "COORDKIT_KAFKA_HOME"
FETCH_HINT = "bash kafka-dist/fetch.sh"
BROKER_HEAP = "256m"
CONTROLLER_HEAP = "192m"
JVM_OPTIONS = ("-Xms32m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")
CONTROLLER_ID = 1000
#: Seconds the cluster may take to list every broker, and the topic to get its leaders.
READY_SECONDS = 180.0


def kafka_lib(what: str) -> Path:
    """The fetched jars of Kafka :data:`KAFKA_VERSION`, found as the test fixtures find them;
    ``what`` (``the real-clients strategies on Kafka``) names who needs them in the error."""
    configured = os.environ.get(HOME_VARIABLE)
    if configured:
        home = Path(configured) / KAFKA_VERSION
    else:
        starts = [Path.cwd(), Path(__file__).resolve().parent]
        roots = [
            folder
            for start in starts
            for folder in (start, *start.parents)
            if (folder / "kafka-dist" / "fetch.sh").is_file()
        ]
        if not roots:
            raise MissingDependencyError(
                f"{what}: Apache Kafka {KAFKA_VERSION}'s jars are needed, and no folder holds "
                f"kafka-dist/fetch.sh up from {Path.cwd()}; run the lab from coordkit's project "
                f"folder after {FETCH_HINT}, or set {HOME_VARIABLE}"
            )
        home = roots[0] / ".cache" / "kafka" / KAFKA_VERSION
    if not (home / "lib.manifest").is_file():  # written last by fetch.sh: the jars are complete
        raise MissingDependencyError(
            f"{what}: Apache Kafka {KAFKA_VERSION}'s jars are needed "
            f"({home / 'lib.manifest'} is missing); run: {FETCH_HINT}"
        )
    return home / "lib"


def require_kafka(what: str = "the lab's Kafka brokers") -> tuple[str, Path]:
    """Java and the jars, or one line naming what to install."""
    java = shutil.which("java")
    if java is None:
        raise MissingDependencyError(
            f"{what}: Java 17+ is needed: apt-get install openjdk-17-jdk-headless"
        )
    return java, kafka_lib(what)


def _say(*words: object) -> None:
    print(*words, flush=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _cluster_id() -> str:
    """A cluster id as Kafka's storage tool takes one: a UUID's 16 bytes in URL-safe base64, no
    padding, not starting with '-' (it would read as an option)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def internal_topics(brokers: int, factor: int) -> dict[str, str]:
    """The internal topics small, replicated as the workload's topic: a JVM per partition
    would not start them on two cores in time."""
    replicas = str(min(factor, brokers))
    return {
        "transaction.state.log.num.partitions": "2",
        "transaction.state.log.replication.factor": replicas,
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.num.partitions": "2",
        "share.coordinator.state.topic.replication.factor": replicas,
        "share.coordinator.state.topic.min.isr": "1",
        "auto.create.topics.enable": "false",
    }


class KafkaNodes:
    """The controller and brokers: their configuration, storage and JVMs."""

    def __init__(self, brokers: int, settings: Mapping[str, str], directory: Path) -> None:
        self.java, self.lib = require_kafka()
        self.directory = directory
        self.ports = {node: _free_port() for node in [CONTROLLER_ID, *range(brokers)]}
        self.processes: dict[int, subprocess.Popen[bytes]] = {}
        self.cluster_id = _cluster_id()
        common = {
            "controller.quorum.voters": f"{CONTROLLER_ID}@127.0.0.1:{self.ports[CONTROLLER_ID]}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "background.threads": "2",
            "num.recovery.threads.per.data.dir": "1",
            "log.cleaner.dedupe.buffer.size": str(8 << 20),  # 128 MiB by default: the heap
        }
        self.properties: dict[int, dict[str, str]] = {
            CONTROLLER_ID: {
                **common,
                "process.roles": "controller",
                "listeners": f"CONTROLLER://127.0.0.1:{self.ports[CONTROLLER_ID]}",
            }
        }
        for broker in range(brokers):
            address = f"PLAINTEXT://127.0.0.1:{self.ports[broker]}"
            self.properties[broker] = {
                **common,
                "process.roles": "broker",
                "listeners": address,
                "advertised.listeners": address,
                "inter.broker.listener.name": "PLAINTEXT",
                **settings,
            }
        for node, properties in self.properties.items():
            folder = directory / f"node{node}"
            (folder / "data").mkdir(parents=True, exist_ok=True)
            properties.update({"node.id": str(node), "log.dirs": str(folder / "data")})
            (folder / "server.properties").write_text(
                "".join(f"{k}={v}\n" for k, v in properties.items())
            )
            (folder / "log4j2.properties").write_text(_LOG_CONFIG.format(log=folder / "server.log"))

    def _config(self, node: int) -> Path:
        return self.directory / f"node{node}" / "server.properties"

    def address(self, broker: int) -> str:
        return f"127.0.0.1:{self.ports[broker]}"

    def _java(self, node: int, heap: str, *args: str) -> list[str]:
        folder = self.directory / f"node{node}"
        return [
            self.java,
            f"-Xmx{heap}",
            *JVM_OPTIONS,
            f"-Dlog4j2.configurationFile={folder / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={folder}",
            "-cp",
            str(self.lib / "*"),
            *args,
        ]

    def format(self) -> None:
        """Kafka's storage tool on every node, at once (each is a JVM start)."""
        tools = {
            node: subprocess.Popen(
                self._java(
                    node,
                    "128m",
                    "kafka.tools.StorageTool",
                    "format",
                    "--cluster-id",
                    self.cluster_id,
                    "--config",
                    str(self._config(node)),
                ),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            for node in self.properties
        }
        for node, tool in tools.items():
            output, _ = tool.communicate(timeout=READY_SECONDS)
            if tool.returncode != 0:
                raise RuntimeError(
                    f"Kafka's storage tool could not format node {node}: "
                    f"{output.decode(errors='replace')[-1500:]}"
                )

    def start(self) -> None:
        prefix = [setpriv, "--pdeathsig", "KILL"] if (setpriv := shutil.which("setpriv")) else []
        for node in self.properties:
            heap = CONTROLLER_HEAP if node == CONTROLLER_ID else BROKER_HEAP
            folder = self.directory / f"node{node}"
            with (folder / "console.log").open("ab") as console:
                self.processes[node] = subprocess.Popen(
                    [*prefix, *self._java(node, heap, "kafka.Kafka", str(self._config(node)))],
                    stdin=subprocess.DEVNULL,
                    stdout=console,
                    stderr=subprocess.STDOUT,
                )

    def check_running(self) -> None:
        for node, process in self.processes.items():
            if process.poll() is not None:
                raise RuntimeError(
                    f"Kafka node {node} exited with status {process.returncode}: "
                    f"{self.log_tail(node)}"
                )

    def log_tail(self, node: int) -> str:
        folder = self.directory / f"node{node}"
        text = "".join(
            (folder / name).read_text(errors="replace")
            for name in ("server.log", "console.log")
            if (folder / name).exists()
        )
        return text[-1500:] or "(no log)"

    def kill(self, node: int) -> None:
        process = self.processes[node]
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
        process.wait(60)

    def kill_all(self) -> None:
        for node in self.processes:
            try:
                self.kill(node)
            except (OSError, subprocess.TimeoutExpired):
                pass


_LOG_CONFIG = """status = warn
appender.out.type = File
appender.out.fileName = {log}
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = out
logger.request.name = kafka.request.logger
logger.request.level = warn
logger.state.name = state.change.logger
logger.state.level = warn
"""


def _wait_ready(nodes: KafkaNodes, brokers: int, topic: str, partitions: int, factor: int) -> None:
    """Every broker registered, the topic created and each partition led with a full ISR."""
    # NewTopic is confluent-kafka's documented import, though its stubs do not re-export it (the
    # type env, without confluent-kafka, sees no error to ignore).
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined,unused-ignore]

    admin = AdminClient({"bootstrap.servers": ",".join(nodes.address(b) for b in range(brokers))})
    deadline = time.monotonic() + READY_SECONDS
    created = False
    while True:
        nodes.check_running()
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"Kafka {KAFKA_VERSION} was not ready in {READY_SECONDS:.0f} s: "
                f"{nodes.log_tail(CONTROLLER_ID)}"
            )
        try:
            metadata = admin.list_topics(timeout=5)
        except Exception:  # not listening yet
            time.sleep(0.5)
            continue
        if len(metadata.brokers) < brokers:
            time.sleep(0.5)
            continue
        if not created:
            admin.create_topics([NewTopic(topic, partitions, factor)])[topic].result(timeout=60)
            created = True
            continue
        found = metadata.topics.get(topic)
        if found is not None and found.error is None and len(found.partitions) == partitions:
            led = [p for p in found.partitions.values() if p.leader >= 0 and len(p.isrs) == factor]
            if len(led) == partitions:
                return
        time.sleep(0.5)


def main(argv: list[str]) -> None:
    brokers, topic, partitions, factor = int(argv[0]), argv[1], int(argv[2]), int(argv[3])
    directory = Path(argv[4])
    configs = dict(word.split("=", 1) for word in argv[5:])
    nodes = KafkaNodes(brokers, {**internal_topics(brokers, factor), **configs}, directory)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # as end of stdin: the JVMs go first
    try:
        nodes.format()
        nodes.start()
        _wait_ready(nodes, brokers, topic, partitions, factor)
        for broker in range(brokers):
            _say("broker", broker, nodes.address(broker))
        _say("ready")
        for line in sys.stdin:
            words = line.split()
            if words[:1] == ["stop-broker"] and len(words) == 2:
                nodes.kill(int(words[1]))
                _say("stopped", words[1])
    finally:
        nodes.kill_all()


if __name__ == "__main__":
    main(sys.argv[1:])

"""Private Apache Kafka clusters: for tests that take real Kafka as the oracle.

Two kinds, from the jars ``bash kafka-dist/fetch.sh`` fetched (:mod:`.kafka_tools`):

* ZooKeeper mode (Kafka 3.9): brokers on a chroot of a given ZooKeeper (one of the kit's private
  servers); each cluster gets its own chroot, which Kafka creates itself;
* KRaft (Kafka 4): combined broker+controller nodes with a static controller quorum, their
  storage formatted with Kafka's storage tool before the first start.

Every node is a JVM on free loopback ports with a small serial heap, its data and its log
(``server.log``, log4j at INFO; standard output and error in ``console.log``) in the cluster's
temporary directory. A cluster is ready when every running node answers a Metadata request (sent
over a raw socket with coordkit's codec: no Kafka client is imported) listing every running
node. A node that exits, or a cluster not ready in time, raises :class:`KafkaStartError` with the
tail of the nodes' logs. Nodes are killed and the directory removed by ``close()`` and, as a last
resort, at interpreter exit.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import itertools
import os
import random
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Self

from coordkit.testing.servers.kafka_metadata import ClusterMetadata, fetch_metadata
from coordkit.testing.servers.kafka_tools import (
    JVM_OPTIONS,
    KAFKA_KRAFT_VERSION,
    KAFKA_ZOOKEEPER_MODE_VERSION,
    classpath,
    kafka_tool,
    log4j_option,
    major_version,
    require_java,
    write_log_config,
)
from coordkit.testing.servers.ports import free_port

DEFAULT_HEAP = "320m"
_HEAP = re.compile(r"[1-9][0-9]*[kKmMgG]")
START_TIMEOUT = 120.0
#: How long a SIGTERM'd node may take over its controlled shutdown before it is SIGKILLed.
STOP_TIMEOUT = 30.0
#: Fresh ports are tried this many times when another process takes one before a node binds it.
PORT_ATTEMPTS = 3
#: Kill the JVMs if the test process dies without cleaning up (as the ZooKeeper fixture does).
SETPRIV = shutil.which("setpriv")
_PORT_CLASH = "Address already in use"
#: A ZooKeeper-mode broker restarted before its killed self's ZooKeeper session expired exits
#: with this; it is started again until the stale registration is gone.
_STALE_REGISTRATION = "node already exists and owner"

_live: set[KafkaNode] = set()
_live_lock = threading.Lock()
_cluster_numbers = itertools.count(1)


class KafkaStartError(RuntimeError):
    """A Kafka node exited while starting, or the cluster was not ready in time (the message holds
    the tail of the nodes' logs)."""


class KafkaNode:
    """One Kafka JVM: a ZooKeeper-mode broker, or a combined broker+controller KRaft node. Its
    ports and ``server.properties`` come from its :class:`KafkaCluster`."""

    def __init__(
        self,
        version: str,
        node_id: int,
        workdir: Path,
        heap: str,
        log_dir: Path | None = None,
        jvm_options: Sequence[str] = JVM_OPTIONS,
    ):
        self.version = version
        self.jvm_options = tuple(jvm_options)
        self.node_id = node_id
        self.workdir = workdir
        self.heap = heap
        self.host = "127.0.0.1"
        self.port = 0
        self.controller_port: int | None = None
        #: ``log.dirs``: the node's own (emptied at each cluster start) unless given.
        self.data_dir = log_dir or workdir / "data"
        self.owns_data_dir = log_dir is None
        self.config_path = workdir / "server.properties"
        self.log_path = workdir / "server.log"
        self.console_path = workdir / "console.log"
        self.process: subprocess.Popen[bytes] | None = None
        #: Set when the node was stopped or killed on purpose: its exit is no failure.
        self.stopped = False
        self._console: IO[bytes] | None = None
        #: Where this run's part of the (appended) log and console starts.
        self._log_offsets: tuple[int, int] = (0, 0)
        workdir.mkdir(parents=True, exist_ok=True)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.running and self.process is not None else None

    @property
    def failed(self) -> bool:
        """It exited, and not because it was stopped or killed."""
        return self.process is not None and not self.running and not self.stopped

    def write_config(self, properties: Mapping[str, str]) -> None:
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))

    def start(self) -> None:
        if self.running:
            return
        java = require_java()
        log_config = write_log_config(
            self.version, self.workdir / "log4j.properties", log_file=self.log_path, level="info"
        )
        command = [
            java,
            # The test options start small; the production ones reserve the heap as Kafka's do.
            "-Xms32m" if self.jvm_options == JVM_OPTIONS else f"-Xms{self.heap}",
            f"-Xmx{self.heap}",
            *self.jvm_options,
            log4j_option(self.version, log_config),
            f"-Dkafka.logs.dir={self.workdir}",
            "-cp",
            classpath(self.version),
            "kafka.Kafka",
            str(self.config_path),
        ]
        if SETPRIV is not None:
            command = [SETPRIV, "--pdeathsig", "KILL", *command]
        self._log_offsets = (_size(self.log_path), _size(self.console_path))
        self.stopped = False
        self._console = self.console_path.open("ab")
        self.process = subprocess.Popen(
            command,
            stdout=self._console,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        with _live_lock:
            _live.add(self)

    def kill(self) -> None:
        """SIGKILL (no controlled shutdown, nothing flushed), as a crash would."""
        self._terminate(signal.SIGKILL)

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM (Kafka's controlled shutdown); SIGKILL if it has not exited in ``timeout``."""
        self._terminate(signal.SIGTERM, timeout)

    def _terminate(self, sig: signal.Signals, timeout: float = STOP_TIMEOUT) -> None:
        process = self.process
        self.stopped = True
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, sig)
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=30)
        if self._console is not None:
            self._console.close()
            self._console = None
        with _live_lock:
            _live.discard(self)

    def metadata(self, timeout: float = 5.0) -> ClusterMetadata | None:
        return fetch_metadata(self.host, self.port, timeout) if self.running else None

    def log_since_start(self) -> str:
        """What the node's latest run wrote to its log and console (where a JVM error lands)."""
        texts = []
        for path, offset in zip((self.log_path, self.console_path), self._log_offsets, strict=True):
            with contextlib.suppress(OSError), path.open("rb") as file:
                file.seek(offset)
                texts.append(file.read().decode(errors="replace"))
        return "\n".join(texts)

    def log_tail(self, lines: int = 40) -> str:
        if self.process is None:
            state = "not started"
        elif self.running:
            state = f"pid {self.process.pid}"
        else:
            state = f"exited with {self.process.returncode}"
        tails = [f"== Kafka {self.version} node {self.node_id} on {self.address} ({state}) =="]
        for path in (self.log_path, self.console_path):
            with contextlib.suppress(OSError):
                text = path.read_text(errors="replace").splitlines()
                if text:
                    tails.append(f"-- {path}")
                    tails.extend(text[-lines:])
        return "\n".join(tails)


class KafkaCluster:
    """A cluster of Kafka nodes on loopback, in its own temporary directory.

    :param zookeeper: a ZooKeeper connect string (``host:port,...``): the nodes are brokers in
        ZooKeeper mode (Kafka 3.9) on ``chroot``; ``None``: KRaft combined nodes.
    :param chroot: the cluster's ZooKeeper chroot (``/kafka-<pid>-<n>``, new per cluster, unless
        given); Kafka creates it.
    :param version: the Kafka release (fetched by ``bash kafka-dist/fetch.sh``);
        :data:`KAFKA_ZOOKEEPER_MODE_VERSION` with a ZooKeeper, :data:`KAFKA_KRAFT_VERSION` without.
    :param broker_ids: the nodes' ``broker.id`` / ``node.id``.
    :param racks: ``broker.rack`` of some nodes, by id.
    :param properties: broker properties over the fixture's (all nodes).
    :param log_dirs: ``log.dirs`` of some nodes, by id: directories the caller owns, used as
        they are (a log directory another broker wrote, coordkit's included) and left in place
        by :meth:`start` and :meth:`close`; the other nodes get empty ones of their own.
    :param heap: each node's ``-Xmx``.
    :param jvm_options: each node's JVM options: the quick ones of the tests by default,
        :data:`~coordkit.testing.servers.kafka_tools.PRODUCTION_JVM_OPTIONS` to measure Kafka.
    :param seed: seeds the KRaft cluster id.
    :param other_brokers: ids of brokers of another kind in the same cluster (``coordkit serve``
        processes on the same chroot): the Kafka nodes are ready when their Metadata lists these
        too.
    """

    def __init__(
        self,
        *,
        zookeeper: str | None = None,
        chroot: str | None = None,
        version: str | None = None,
        broker_ids: Sequence[int] = (1, 2, 3),
        racks: Mapping[int, str] | None = None,
        properties: Mapping[str, str] | None = None,
        log_dirs: Mapping[int, Path] | None = None,
        heap: str = DEFAULT_HEAP,
        seed: int = 0,
        jvm_options: Sequence[str] = JVM_OPTIONS,
        other_brokers: Iterable[int] = (),
    ):
        default_version = KAFKA_ZOOKEEPER_MODE_VERSION if zookeeper else KAFKA_KRAFT_VERSION
        self.version = version or default_version
        if zookeeper is not None and major_version(self.version) >= 4:
            raise ValueError(
                f"Kafka {self.version} has no ZooKeeper mode: give version "
                f"{KAFKA_ZOOKEEPER_MODE_VERSION}, or no zookeeper for KRaft"
            )
        if not broker_ids or len(set(broker_ids)) != len(broker_ids):
            raise ValueError(f"broker_ids {list(broker_ids)}: give distinct ids, at least one")
        if zookeeper is not None and "/" in zookeeper:
            raise ValueError(f"zookeeper {zookeeper!r}: give host:port,... and the chroot apart")
        if chroot is not None and (zookeeper is None or not chroot.startswith("/")):
            raise ValueError(f"chroot {chroot!r}: a path from /, for a cluster on a zookeeper")
        if log_dirs is not None and set(log_dirs) - set(broker_ids):
            raise ValueError(f"log_dirs {sorted(log_dirs)}: not every id is a broker's")
        if not _HEAP.fullmatch(heap):
            raise ValueError(f"Kafka heap {heap!r}: give a JVM size such as 320m or 1g")
        number = next(_cluster_numbers)
        self.chroot = (chroot or f"/kafka-{os.getpid()}-{number}") if zookeeper else None
        self.zookeeper = zookeeper
        self.racks = dict(racks or {})
        self.other_brokers = frozenset(other_brokers)
        self.properties = dict(properties or {})
        self.cluster_id = _kafka_uuid(random.Random(seed))
        require_java()
        classpath(self.version)  # a missing jar cache fails here, naming `bash kafka-dist/fetch.sh`
        self.root = Path(tempfile.mkdtemp(prefix=f"coordkit-kafka-{number}-"))
        _cleanups.append(self)
        given = dict(log_dirs or {})
        self.nodes = {
            node_id: KafkaNode(
                self.version,
                node_id,
                self.root / f"node{node_id}",
                heap,
                given.get(node_id),
                jvm_options,
            )
            for node_id in broker_ids
        }

    @property
    def kraft(self) -> bool:
        return self.zookeeper is None

    @property
    def bootstrap(self) -> str:
        """``host:port,...`` of every node (running or not), for clients and tools."""
        return ",".join(node.address for node in self.nodes.values())

    def node(self, node_id: int) -> KafkaNode:
        try:
            return self.nodes[node_id]
        except KeyError:
            raise ValueError(f"no Kafka node {node_id}; nodes: {sorted(self.nodes)}") from None

    # -- configuration
    def _assign_ports(self) -> None:
        for node in self.nodes.values():
            node.port = free_port()
            node.controller_port = free_port() if self.kraft else None

    def _node_properties(self, node: KafkaNode) -> dict[str, str]:
        size = len(self.nodes)
        replicas, min_isr = str(min(3, size)), str(min(2, size))
        listener = f"PLAINTEXT://{node.address}"
        properties = {
            "listeners": listener,
            "advertised.listeners": listener,
            "log.dirs": str(node.data_dir),
            "num.partitions": "1",
            "offsets.topic.num.partitions": "5",
            "offsets.topic.replication.factor": replicas,
            "transaction.state.log.num.partitions": "5",
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": min_isr,
            "group.initial.rebalance.delay.ms": "0",
            # Few threads and a small cleaner buffer (128 MiB by default, on a 320 MiB heap).
            "num.network.threads": "2",
            "num.io.threads": "2",
            "background.threads": "2",
            "num.recovery.threads.per.data.dir": "1",
            "log.cleaner.dedupe.buffer.size": str(8 * 1024 * 1024),
        }
        if self.kraft:
            voters = ",".join(
                f"{n.node_id}@{n.host}:{n.controller_port}" for n in self.nodes.values()
            )
            properties.update(
                {
                    "process.roles": "broker,controller",
                    "node.id": str(node.node_id),
                    "controller.quorum.voters": voters,
                    "controller.listener.names": "CONTROLLER",
                    "listeners": f"{listener},CONTROLLER://{node.host}:{node.controller_port}",
                    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                    "inter.broker.listener.name": "PLAINTEXT",
                }
            )
        else:
            properties.update(
                {
                    "broker.id": str(node.node_id),
                    "zookeeper.connect": f"{self.zookeeper}{self.chroot}",
                    # A killed broker leaves the cluster once its session expires (18 s by default).
                    "zookeeper.session.timeout.ms": "6000",
                }
            )
        if major_version(self.version) >= 4:
            properties.update(
                {
                    "share.coordinator.state.topic.num.partitions": "5",
                    "share.coordinator.state.topic.replication.factor": replicas,
                    "share.coordinator.state.topic.min.isr": min_isr,
                }
            )
        if node.node_id in self.racks:
            properties["broker.rack"] = self.racks[node.node_id]
        properties.update(self.properties)
        return properties

    def _prepare(self) -> None:
        """Write every node's configuration; format the KRaft nodes' storage."""
        for node in self.nodes.values():
            if node.owns_data_dir:
                shutil.rmtree(node.data_dir, ignore_errors=True)
            node.write_config(self._node_properties(node))
            if self.kraft:
                formatted = kafka_tool(
                    self.version,
                    "kafka-storage",
                    "format",
                    "--cluster-id",
                    self.cluster_id,
                    "--config",
                    str(node.config_path),
                )
                if formatted.returncode != 0:
                    raise KafkaStartError(
                        f"Kafka {self.version}'s storage tool could not format node "
                        f"{node.node_id} ({node.config_path}): {formatted.stdout}{formatted.stderr}"
                    )

    # -- lifecycle
    def start(self, timeout: float = START_TIMEOUT) -> Self:
        """Start every node on fresh ports and wait until the cluster is ready."""
        for attempt in range(1, PORT_ATTEMPTS + 1):
            self._assign_ports()
            self._prepare()
            for node in self.nodes.values():
                node.start()
            try:
                self.wait_ready(timeout)
                return self
            except KafkaStartError:
                clash = any(_PORT_CLASH in n.log_since_start() for n in self.nodes.values())
                if not clash or attempt == PORT_ATTEMPTS:
                    raise
                # Another process took a port between its choice and the bind: new ports.
                for node in self.nodes.values():
                    node.kill()
                    node.log_path.unlink(missing_ok=True)
                    node.console_path.unlink(missing_ok=True)
        raise AssertionError("unreachable")

    def wait_ready(self, timeout: float = START_TIMEOUT) -> ClusterMetadata:
        """Wait until every running node answers Metadata listing exactly the running nodes
        (after a kill, until the others have noticed); returns the last answer."""
        deadline = time.monotonic() + timeout
        while True:
            failed = [n for n in self.nodes.values() if n.failed]
            stale = [n for n in failed if _STALE_REGISTRATION in n.log_since_start()]
            for node in stale:
                node.start()  # its killed self's ZooKeeper session may have expired by now
            failed = [n for n in failed if n not in stale]
            if failed:
                raise KafkaStartError(
                    f"a Kafka node exited (nodes {sorted(n.node_id for n in failed)}):\n"
                    f"{self.log_tail(nodes=failed)}"
                )
            running = {n.node_id for n in self.nodes.values() if n.running}
            answers = [self.nodes[node_id].metadata() for node_id in sorted(running)]
            expected = running | self.other_brokers
            if running and all(a is not None and set(a.brokers) == expected for a in answers):
                last = answers[-1]
                assert last is not None
                return last
            if time.monotonic() > deadline:
                raise KafkaStartError(
                    f"Kafka {self.version} cluster not ready after {timeout}s (running nodes "
                    f"{sorted(running)}; each node's Metadata lists: "
                    f"{[sorted(a.brokers) if a else None for a in answers]}):\n{self.log_tail()}"
                )
            time.sleep(0.2)

    def metadata(self) -> ClusterMetadata:
        """The Metadata of the first running node that answers."""
        for node in self.nodes.values():
            answer = node.metadata()
            if answer is not None:
                return answer
        raise KafkaStartError(f"no Kafka node answers Metadata:\n{self.log_tail()}")

    def kill(self, node_id: int) -> None:
        """SIGKILL one node (a crash, for failure tests)."""
        self.node(node_id).kill()

    def stop(self, node_id: int, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM one node (controlled shutdown), SIGKILL after ``timeout``."""
        self.node(node_id).stop(timeout)

    def restart(
        self, node_id: int, *, graceful: bool = True, timeout: float = START_TIMEOUT
    ) -> ClusterMetadata:
        """Stop (``graceful``) or kill one node, start it again with the same id, ports and data,
        and wait until the cluster is ready."""
        node = self.node(node_id)
        if graceful:
            node.stop()
        else:
            node.kill()
        node.start()
        return self.wait_ready(timeout)

    def tool(
        self, tool: str, *args: str, input: str | None = None, check: bool = False
    ) -> subprocess.CompletedProcess[str]:
        """Run one of Kafka's command-line tools of this cluster's version (see ``kafka_tool``)."""
        return kafka_tool(self.version, tool, *args, input=input, check=check)

    def log_tail(self, lines: int = 40, nodes: Iterable[KafkaNode] | None = None) -> str:
        """The tail of each node's log, for a failure report."""
        return "\n".join(node.log_tail(lines) for node in nodes or self.nodes.values())

    def close(self) -> None:
        """Kill every node (the data is thrown away, so no shutdown is waited for); remove the
        directory."""
        for node in getattr(self, "nodes", {}).values():
            node.kill()
        shutil.rmtree(self.root, ignore_errors=True)
        with contextlib.suppress(ValueError):
            _cleanups.remove(self)

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.close()  # __exit__ does not run when __enter__ fails
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = "KRaft" if self.kraft else f"ZooKeeper {self.zookeeper}{self.chroot}"
        return f"<KafkaCluster {self.version} {mode} nodes={sorted(self.nodes)}>"


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def _kafka_uuid(rng: random.Random) -> str:
    """A cluster id as Kafka writes one: 16 random bytes in URL-safe base64, no padding, not
    starting with '-' (it would read as a command-line option)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.UUID(int=rng.getrandbits(128)).bytes).decode()
        if not text.startswith("-"):
            return text.rstrip("=")


_cleanups: list[KafkaCluster] = []


@atexit.register
def _cleanup_at_exit() -> None:
    # Last resort when a fixture's finalizer never ran (interrupted run): no JVM outlives us.
    with _live_lock:
        live = list(_live)
    for node in live:
        with contextlib.suppress(Exception):
            node.kill()
    for cluster in list(_cleanups):
        with contextlib.suppress(Exception):
            cluster.close()

"""Private ZooKeeper servers: for the kit's users, coordkit's tests and its benchmarks.

Every server is a ``QuorumPeerMain`` JVM from Debian's ``zookeeper`` package, on free loopback
ports, with its data in a temporary directory. A server is ready when the ``srvr`` four-letter
command answers with ``Mode:``. Servers are killed and their directories removed by ``close()``,
by the fixtures' finalizers and, as a last resort, at interpreter exit.

Timings are small on purpose (``tickTime`` 200 ms, minimum session timeout 400 ms) so that tests of
session expiry and leader election finish quickly.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Self

import attrs

from coordkit.testing.servers.ports import free_port
from coordkit.testing.servers.zookeeper_sasl import sasl_server_options, write_server_jaas
from coordkit.testing.waiting import wait_for

JAVA_DIR = Path("/usr/share/java")
ZOOKEEPER_JAR = JAVA_DIR / "zookeeper.jar"
#: Debian's zookeeper.jar names its dependencies in its manifest's Class-Path; only a logging
#: binding is added, so server warnings land in the server's log file instead of nowhere.
LOG_BINDING_JAR = JAVA_DIR / "slf4j-simple.jar"
#: The Netty server (needed for TLS) uses jars zookeeper.jar's manifest does not list.
NETTY_JARS = ("netty-codec.jar", "netty-resolver.jar", "netty-transport-native-unix-common.jar")
INSTALL_HINT = (
    "apt-get install zookeeper (Debian's package; it brings Java and /usr/share/java/zookeeper.jar)"
)

#: Kill the JVM if the test process dies without cleaning up (SIGKILL, a crashed runner). The
#: signal follows the *thread* that started the server, so start servers from long-lived threads.
SETPRIV = shutil.which("setpriv")

TICK_MS = 200
#: Garbage collectors a server may run with (``collector``), as JVM options.
COLLECTORS = {"serial": "-XX:+UseSerialGC", "parallel": "-XX:+UseParallelGC", "g1": "-XX:+UseG1GC"}
#: The JVM's -Xmx unless a server is given ``heap`` (benchmarks of millions of znodes ask for more).
DEFAULT_HEAP = "512m"
_HEAP = re.compile(r"[1-9][0-9]*[kKmMgG]")
START_TIMEOUT = 60.0

_live: set[ZooKeeperServer] = set()
_live_lock = threading.Lock()


class ZooKeeperUnavailableError(RuntimeError):
    """Java or ZooKeeper is not installed: the test fails (it never skips) naming the install."""


def require_zookeeper() -> tuple[str, str]:
    """The java binary and the server class path, or a failure naming ``apt-get install zookeeper``."""
    java = shutil.which("java")
    if java is None:
        raise ZooKeeperUnavailableError(f"java is not installed; run: {INSTALL_HINT}")
    if not ZOOKEEPER_JAR.is_file():
        raise ZooKeeperUnavailableError(f"{ZOOKEEPER_JAR} is missing; run: {INSTALL_HINT}")
    classpath = [str(ZOOKEEPER_JAR)]
    if LOG_BINDING_JAR.is_file():
        classpath.append(str(LOG_BINDING_JAR))
    return java, os.pathsep.join(classpath)


@attrs.frozen
class TLSFiles:
    """PEM files for a TLS-enabled server: its key and certificate, the CA that signed them, a
    client certificate from the same CA, and an unrelated CA that trusts nothing here."""

    ca: Path
    server_pem: Path
    client_cert: Path
    client_key: Path
    other_ca: Path


def make_tls_files(directory: Path) -> TLSFiles:
    """A throw-away CA, server and client certificates (valid two days) made with ``openssl``."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise ZooKeeperUnavailableError("openssl is not installed; run: apt-get install openssl")
    directory.mkdir(parents=True, exist_ok=True)

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], cwd=directory, check=True, capture_output=True)

    def new_ca(name: str) -> None:
        run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
            "-keyout", f"{name}.key", "-out", f"{name}.pem")  # fmt: skip

    def signed(name: str, subject: str, extensions: str | None) -> None:
        run("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={subject}",
            "-keyout", f"{name}.key", "-out", f"{name}.csr")  # fmt: skip
        extra = ["-extfile", f"{name}.ext"] if extensions else []
        if extensions:
            (directory / f"{name}.ext").write_text(extensions + "\n")
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-out", f"{name}.crt", *extra)  # fmt: skip

    new_ca("ca")
    new_ca("other-ca")
    signed("server", "localhost", "subjectAltName=IP:127.0.0.1,DNS:localhost")
    signed("client", "coordkit-test-client", None)
    # ZooKeeper's PEM key store: the private key followed by its certificate.
    server_pem = directory / "server-keystore.pem"
    server_pem.write_text(
        (directory / "server.key").read_text() + (directory / "server.crt").read_text()
    )
    return TLSFiles(
        ca=directory / "ca.pem",
        server_pem=server_pem,
        client_cert=directory / "client.crt",
        client_key=directory / "client.key",
        other_ca=directory / "other-ca.pem",
    )


def four_letter(host: str, port: int, command: str = "srvr", timeout: float = 2.0) -> str:
    """Send a four-letter admin command; returns the reply ('' if the server is not answering)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(command.encode())
            chunks = []
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
            return b"".join(chunks).decode("utf-8", "replace")
    except OSError:
        return ""


class ZooKeeperServer:
    """One ZooKeeper server process (standalone, or one member of an ensemble).

    :param peers: for an ensemble member, ``{server_id: (peer_port, election_port, client_port)}``
        of every member (including this one); ``None`` for a standalone server.
    :param heap: the JVM's maximum heap (``-Xmx``), :data:`DEFAULT_HEAP` unless given; a
        2,000,000-partition cluster (4,000,000 znodes) needs a few GiB.
    :param collector: the JVM's garbage collector, a key of :data:`COLLECTORS`: ``serial`` (the
        tests' small servers: one thread, least memory) unless given; a heap of GiBs under
        millions of writes wants ``g1`` (serial collected a 10 GiB heap in full for 3.6 s, in the
        middle of a benchmark's controlled shutdown).
    :param fixed_heap: start with the whole heap (``-Xms`` = ``-Xmx``), as production servers are
        run; otherwise the heap starts at 32 MiB and grows. A benchmark wants it fixed: a heap
        that grows, or shrinks after the full collection a benchmark runs before a case, costs
        the server page faults and resizing in the measured window (1.5–2 CPU-s of a 2,000,000
        partition controlled shutdown's 10).
    """

    def __init__(
        self,
        workdir: Path,
        *,
        server_id: int = 1,
        client_port: int | None = None,
        peers: dict[int, tuple[int, int, int]] | None = None,
        extra_config: dict[str, str] | None = None,
        jvm_options: tuple[str, ...] = (),
        tls: TLSFiles | None = None,
        heap: str = DEFAULT_HEAP,
        collector: str = "serial",
        fixed_heap: bool = False,
    ):
        self.java, self.classpath = require_zookeeper()
        self.tls = tls
        self.secure_port = free_port() if tls else None
        if tls:
            self.classpath = os.pathsep.join(
                [
                    self.classpath,
                    *(str(JAVA_DIR / jar) for jar in NETTY_JARS if (JAVA_DIR / jar).is_file()),
                ]
            )
        self.workdir = workdir
        self.server_id = server_id
        self.host = "127.0.0.1"
        self.peers = peers
        self.client_port = peers[server_id][2] if peers else (client_port or free_port())
        self.extra_config = dict(extra_config or {})
        self.jvm_options = jvm_options
        if not _HEAP.fullmatch(heap):
            raise ValueError(f"ZooKeeper heap {heap!r}: give a JVM size such as 512m or 4g")
        self.heap = heap
        self.fixed_heap = fixed_heap
        if collector not in COLLECTORS:
            raise ValueError(
                f"ZooKeeper collector {collector!r}: one of {', '.join(sorted(COLLECTORS))}"
            )
        self.collector = collector
        self.data_dir = workdir / "data"
        self.config_path = workdir / "zoo.cfg"
        self.log_path = workdir / "server.log"
        self.process: subprocess.Popen[bytes] | None = None
        self._log: Any = None
        workdir.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(exist_ok=True)
        self._write_config()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.client_port}"

    @property
    def secure_address(self) -> str:
        if self.secure_port is None:
            raise ValueError("this server has no TLS port")
        return f"{self.host}:{self.secure_port}"

    def _write_config(self) -> None:
        config = {
            "tickTime": str(TICK_MS),
            "initLimit": "25",
            "syncLimit": "10",
            "dataDir": str(self.data_dir),
            "clientPort": str(self.client_port),
            "clientPortAddress": self.host,
            "maxClientCnxns": "0",
            "minSessionTimeout": str(2 * TICK_MS),
            "maxSessionTimeout": "120000",
            "4lw.commands.whitelist": "*",
            "admin.enableServer": "false",
            "autopurge.purgeInterval": "0",
        }
        if self.tls:
            # Plain clientPort stays for the `srvr` readiness probe; clients use the secure port.
            config.update(
                {
                    "secureClientPort": str(self.secure_port),
                    "secureClientPortAddress": self.host,
                    "serverCnxnFactory": "org.apache.zookeeper.server.NettyServerCnxnFactory",
                    "ssl.keyStore.location": str(self.tls.server_pem),
                    "ssl.keyStore.type": "PEM",
                    "ssl.trustStore.location": str(self.tls.ca),
                    "ssl.trustStore.type": "PEM",
                    "ssl.clientAuth": "need",
                }
            )
        if self.peers:
            config["standaloneEnabled"] = "false"
            config["cnxTimeout"] = "1000"
            for sid, (peer, election, _client) in sorted(self.peers.items()):
                config[f"server.{sid}"] = f"{self.host}:{peer}:{election}"
            (self.data_dir / "myid").write_text(f"{self.server_id}\n")
        config.update(self.extra_config)
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in config.items()))

    # -- lifecycle
    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, *, wait: bool = True, timeout: float = START_TIMEOUT) -> None:
        if self.running:
            return
        self._log = self.log_path.open("ab")
        command = [
            self.java,
            f"-Xms{self.heap}" if self.fixed_heap else "-Xms32m",
            f"-Xmx{self.heap}",
            COLLECTORS[self.collector],
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-Dzookeeper.admin.enableServer=false",
            *self.jvm_options,
            "-cp",
            self.classpath,
            "org.apache.zookeeper.server.quorum.QuorumPeerMain",
            str(self.config_path),
        ]
        if SETPRIV is not None:
            command = [SETPRIV, "--pdeathsig", "KILL", *command]
        self.process = subprocess.Popen(
            command,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        with _live_lock:
            _live.add(self)
        if wait:
            self.wait_serving(timeout)

    def wait_serving(self, timeout: float = START_TIMEOUT) -> str:
        """Wait until ``srvr`` answers with ``Mode:``; returns the mode (standalone/leader/follower)."""
        deadline = time.monotonic() + timeout
        while True:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(
                    f"ZooKeeper server {self.server_id} on port {self.client_port} exited with "
                    f"{self.process.returncode}:\n{self.log_tail()}"
                )
            mode = self.mode()
            if mode:
                return mode
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"ZooKeeper server {self.server_id} on port {self.client_port} not serving after "
                    f"{timeout}s:\n{self.log_tail()}"
                )
            time.sleep(0.05)

    def mode(self) -> str | None:
        for line in four_letter(self.host, self.client_port, "srvr").splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
        return None

    def kill(self) -> None:
        """SIGKILL the server (no clean shutdown), as a crash would."""
        self._terminate(signal.SIGKILL)

    def stop(self) -> None:
        """SIGTERM the server and wait for it to exit."""
        self._terminate(signal.SIGTERM)

    def pause(self) -> None:
        """SIGSTOP the server: connections stay open but nothing answers (a hung server)."""
        if self.process is not None:
            self.process.send_signal(signal.SIGSTOP)
            # The signal is delivered asynchronously: return once the process is really stopped.
            wait_for(lambda: self._process_state() == "T", 10.0, "server stopped by SIGSTOP")

    def _process_state(self) -> str:
        assert self.process is not None
        with open(f"/proc/{self.process.pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]

    def resume(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGCONT)

    def restart(self, *, wait: bool = True) -> None:
        self.kill()
        self.start(wait=wait)

    def _terminate(self, sig: signal.Signals) -> None:
        process = self.process
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(sig)
                process.send_signal(signal.SIGCONT)  # a paused server must still die
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=15)
        self.process = None
        if self._log is not None:
            self._log.close()
            self._log = None
        with _live_lock:
            _live.discard(self)

    def collect_garbage(self) -> float:
        """A full collection of the server's heap now (``jcmd PID GC.run``); the seconds it took.
        Benchmarks call it before a measured case, as they collect Python's garbage, so that what
        a setup of millions of writes left behind is not collected inside the measurement."""
        if self.process is None or self.process.poll() is not None:
            raise RuntimeError(f"ZooKeeper server {self.server_id} is not running")
        jcmd = Path(self.java).resolve().parent / "jcmd"
        if not jcmd.is_file():
            raise ZooKeeperUnavailableError(f"{jcmd} is missing (a JDK's tool, next to java)")
        started = time.monotonic()
        subprocess.run(
            [str(jcmd), str(self.process.pid), "GC.run"],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=300,
        )
        return time.monotonic() - started

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no server log)"

    def close(self) -> None:
        self.kill()


class StandaloneZooKeeper:
    """A standalone server in its own temporary directory (removed on close).

    :param tls: also serve TLS on ``server.secure_port``, requiring client certificates, with
        throw-away certificates in ``tls_files``.
    :param sasl_users: also take SASL DIGEST-MD5 logins of these users (name: password), as
        :mod:`coordkit.testing.servers.zookeeper_sasl` sets up; the ``Server`` JAAS file is
        ``sasl_jaas``.
    """

    def __init__(
        self,
        *,
        tls: bool = False,
        sasl_users: Mapping[str, str] | None = None,
        **server_options: Any,
    ):
        require_zookeeper()
        self.root = Path(tempfile.mkdtemp(prefix="coordkit-zk-"))
        _register_cleanup(self)
        self.tls_files = make_tls_files(self.root / "tls") if tls else None
        self.sasl_jaas: Path | None = None
        if sasl_users:
            self.sasl_jaas = write_server_jaas(self.root / "sasl" / "server-jaas.conf", sasl_users)
            lines, jvm = sasl_server_options(self.sasl_jaas)
            server_options["extra_config"] = {**lines, **server_options.get("extra_config", {})}
            server_options["jvm_options"] = (*jvm, *server_options.get("jvm_options", ()))
        self.server = ZooKeeperServer(self.root / "server", tls=self.tls_files, **server_options)

    @property
    def hosts(self) -> str:
        return self.server.address

    def start(self) -> Self:
        self.server.start()
        return self

    def close(self) -> None:
        server = getattr(self, "server", None)
        if server is not None:
            server.close()
        shutil.rmtree(self.root, ignore_errors=True)


class ZooKeeperEnsemble:
    """A ``size``-member quorum ensemble on loopback, each member in its own directory."""

    def __init__(self, size: int = 3):
        require_zookeeper()
        self.root = Path(tempfile.mkdtemp(prefix="coordkit-zk-ensemble-"))
        ports = {sid: (free_port(), free_port(), free_port()) for sid in range(1, size + 1)}
        self.servers = [
            ZooKeeperServer(self.root / f"server{sid}", server_id=sid, peers=ports)
            for sid in sorted(ports)
        ]
        _register_cleanup(self)

    @property
    def hosts(self) -> str:
        return ",".join(s.address for s in self.servers)

    def start(self, timeout: float = START_TIMEOUT) -> Self:
        for server in self.servers:
            server.start(wait=False)
        for server in self.servers:
            server.wait_serving(timeout)
        return self

    def leader(self) -> ZooKeeperServer:
        leaders = [s for s in self.servers if s.running and s.mode() == "leader"]
        if len(leaders) != 1:
            raise AssertionError(f"expected one leader, found {len(leaders)}")
        return leaders[0]

    def followers(self) -> list[ZooKeeperServer]:
        return [s for s in self.servers if s.running and s.mode() == "follower"]

    def serving(self) -> list[ZooKeeperServer]:
        return [s for s in self.servers if s.running and s.mode() is not None]

    def close(self) -> None:
        for server in self.servers:
            server.close()
        shutil.rmtree(self.root, ignore_errors=True)


_cleanups: list[Any] = []


def _register_cleanup(owner: Any) -> None:
    _cleanups.append(owner)


@atexit.register
def _cleanup_at_exit() -> None:
    # Last resort when a fixture's finalizer never ran (interrupted run): no JVM outlives us.
    with _live_lock:
        live = list(_live)
    for server in live:
        with contextlib.suppress(Exception):
            server.kill()
    for owner in _cleanups:
        with contextlib.suppress(Exception):
            owner.close()


@contextlib.contextmanager
def standalone(**server_options: Any) -> Iterator[StandaloneZooKeeper]:
    server = StandaloneZooKeeper(**server_options).start()
    try:
        yield server
    finally:
        server.close()


@contextlib.contextmanager
def ensemble(size: int = 3) -> Iterator[ZooKeeperEnsemble]:
    group = ZooKeeperEnsemble(size)
    try:
        yield group.start()
    finally:
        group.close()

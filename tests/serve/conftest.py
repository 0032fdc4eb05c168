"""``coordkit serve`` in a subprocess on the store under test (``--backend``), on free ports, and a
minimal raw Kafka client for what kafka-python does not let a test send."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from coordkit.protocol import KafkaCodec
from coordkit.testing.servers.ports import free_port
from harness.backends import Backend

if TYPE_CHECKING:
    from kafka.admin import KafkaAdminClient

#: Seconds a server may take to print its addresses, and to stop.
STARTUP_SECONDS = 60
STOP_SECONDS = 30


class PortTakenError(AssertionError):
    """``coordkit serve`` could not listen: a port found free was taken before it bound it."""


#: The serve tests' consumers keep sessions of a few seconds so that a crash is noticed quickly;
#: their servers lower Kafka's 6 s floor for it (a test of the floor itself passes
#: ``short_sessions=False``).
SHORT_SESSIONS = ("--config", "group.min.session.timeout.ms=100")


class ServeProcess:
    """A running ``coordkit serve``: its process and the broker addresses it printed."""

    def __init__(self, args: list[str], *, short_sessions: bool = True) -> None:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        if short_sessions:
            args = [*SHORT_SESSIONS, *args]
        self.process = subprocess.Popen(
            [sys.executable, "-c", "from coordkit.cli import main; main()", "serve", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.addresses: dict[int, str] = {}
        self.banner = ""
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("broker "):
                words = line.split()
                self.addresses[int(words[1])] = words[-1]
            elif line.startswith("store "):
                self.banner = line
                return
        self.process.wait(STOP_SECONDS)
        error = self.process.stderr.read()  # type: ignore[union-attr]
        failure = PortTakenError if "Address already in use" in error else AssertionError
        raise failure(f"coordkit serve did not start: {error}")

    @property
    def bootstrap(self) -> str:
        return ",".join(self.addresses.values())

    def stop(self, signum: int = signal.SIGINT) -> tuple[int, str, str]:
        """Send ``signum`` (Ctrl-C by default); the exit status and the rest of its output."""
        if self.process.poll() is None:
            self.process.send_signal(signum)
        out, err = self.process.communicate(timeout=STOP_SECONDS)
        return self.process.returncode, out, err


def consecutive_free_ports(count: int) -> int:
    """A port P with P..P+count-1 free right now (another process may still take one)."""
    for _ in range(100):
        base = free_port()
        if base + count - 1 > 65_535:
            continue
        if all(_free(base + i) for i in range(1, count)):
            return base
    raise AssertionError(f"no {count} consecutive free ports on 127.0.0.1")


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


ServeFactory = Callable[..., ServeProcess]


@pytest.fixture
def serve(backend: Backend) -> Iterator[ServeFactory]:
    """Starts ``coordkit serve --store <the backend's URL> --port <free ports> ARGS...``."""
    started: list[ServeProcess] = []

    def start(*args: str, brokers: int = 3, short_sessions: bool = True) -> ServeProcess:
        # Ports found free may be taken before the server binds them (another lane's servers,
        # an outgoing connection's ephemeral port): then new ones, a few times.
        attempts = 0
        while True:
            attempts += 1
            port = str(consecutive_free_ports(brokers))
            command = ["--store", backend.new_url(), "--brokers", str(brokers), "--port", port]
            try:
                server = ServeProcess([*command, *args], short_sessions=short_sessions)
            except PortTakenError:
                if attempts < 5:
                    continue
                raise
            started.append(server)
            return server

    yield start
    for server in started:
        if server.process.poll() is None:
            server.process.kill()
            server.process.communicate(timeout=STOP_SECONDS)


class RawClient:
    """One connection speaking Kafka's protocol through :mod:`coordkit.protocol`."""

    def __init__(self, address: str) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.codec = KafkaCodec()
        self._correlation = 0

    def send(self, body: Any, version: int) -> int:
        self._correlation += 1
        self.sock.sendall(
            self.codec.encode_request(body, version=version, correlation_id=self._correlation)
        )
        return self._correlation

    def receive(self, api: str, version: int) -> tuple[int, Any]:
        size = int.from_bytes(self._exactly(4), "big", signed=True)
        return self.codec.decode_response(api, version, self._exactly(size))

    def call(self, body: Any, version: int) -> Any:
        correlation = self.send(body, version)
        got, response = self.receive(type(body).KAFKA_NAME.removesuffix("Request"), version)
        assert got == correlation
        return response

    def _exactly(self, count: int) -> bytes:
        data = bytearray()
        while len(data) < count:
            chunk = self.sock.recv(count - len(data))
            if not chunk:
                raise ConnectionError("the server closed the connection")
            data += chunk
        return bytes(data)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def raw_client() -> Iterator[Callable[[str], RawClient]]:
    clients: list[RawClient] = []

    def connect(address: str) -> RawClient:
        client = RawClient(address)
        clients.append(client)
        return client

    yield connect
    for client in clients:
        client.close()


@pytest.fixture
def admin_for() -> Iterator[Callable[[ServeProcess], KafkaAdminClient]]:
    """kafka-python admin clients of a served cluster, closed after the test."""
    opened: list[KafkaAdminClient] = []

    def connect(server: ServeProcess) -> KafkaAdminClient:
        from kafka.admin import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=30_000)
        opened.append(admin)
        return admin

    yield connect
    for admin in opened:
        admin.close()

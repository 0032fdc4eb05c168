"""Private ``redis-server`` processes: for the kit's users, coordkit's tests and its benchmarks.

Each :class:`RedisServer` runs on a free loopback port in its own temporary directory, configured
entirely on the command line (no config file). It is ready when ``PING`` answers (over a raw
socket, TLS included: this module needs no Redis client), can be killed and restarted on the same
port and directory (the AOF survives), and is cleaned up even when a test fails (context manager,
plus an ``atexit`` guard for anything left running).
"""

from __future__ import annotations

import atexit
import contextlib
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Self
from urllib.parse import quote

from coordkit.testing.servers.ports import free_port

INSTALL_HINT = "apt-get install redis-server"
STARTUP_TIMEOUT = 20.0

_running: set[RedisServer] = set()
_running_lock = threading.Lock()


class RedisServerMissingError(RuntimeError):
    """``redis-server`` is not installed: tests fail (never skip) with the install command."""


def redis_server_binary() -> str:
    path = shutil.which("redis-server")
    if path is None:
        raise RedisServerMissingError(
            f"redis-server is not on PATH; the Redis store tests need it: {INSTALL_HINT}"
        )
    return path


@contextlib.contextmanager
def _raw_connection(
    host: str, port: int, timeout: float, ca_file: str | None = None
) -> Iterator[socket.socket]:
    """A socket to the server; wrapped in TLS (verified against ``ca_file``) when one is given."""
    sock: socket.socket = socket.create_connection((host, port), timeout=timeout)
    try:
        if ca_file is not None:
            context = ssl.create_default_context(cafile=ca_file)
            context.check_hostname = False
            sock = context.wrap_socket(sock)
        yield sock
    finally:
        sock.close()


class RedisServer:
    """One private ``redis-server`` process.

    :param durable: ``appendonly yes`` + ``appendfsync always`` (every acknowledged write is on disk).
    :param password: ``requirepass`` (the ``default`` user's password).
    :param acl_users: extra ``user`` directives, e.g. ``["reader on >pw ~* +@read"]``.
    :param tls: serve TLS only (``port 0``, ``tls-port``) with a throwaway CA and server cert made
        by ``openssl``; :attr:`tls_files` holds their paths.
    :param extra_args: further ``--option value`` words.
    """

    def __init__(
        self,
        *,
        durable: bool = False,
        password: str | None = None,
        acl_users: Sequence[str] = (),
        tls: bool = False,
        extra_args: Sequence[str] = (),
    ):
        self.binary = redis_server_binary()
        self.durable = durable
        self.password = password
        self.acl_users = list(acl_users)
        self.tls = tls
        self.extra_args = list(extra_args)
        self.host = "127.0.0.1"
        self.port = 0
        self.directory = Path(tempfile.mkdtemp(prefix="coordkit-redis-"))
        self.tls_files: dict[str, str] = {}
        self.process: subprocess.Popen[bytes] | None = None
        self._log = self.directory / "redis.log"
        if tls:
            try:
                self.tls_files = make_tls_files(self.directory / "tls")
            except BaseException:
                shutil.rmtree(self.directory, ignore_errors=True)
                raise

    # -- lifecycle
    def start(self) -> Self:
        """Start on a free port (or restart on the previous one, keeping the data directory)."""
        if self.process is not None and self.process.poll() is None:
            return self
        attempts = 1 if self.port else 5
        last_error = ""
        for _ in range(attempts):
            port = self.port or free_port()
            self.process = subprocess.Popen(
                self._command(port),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.STDOUT,
                cwd=self.directory,
                start_new_session=True,
            )
            with _running_lock:
                _running.add(self)
            try:
                self._wait_ready(port)
            except RuntimeError as exc:
                last_error = str(exc)
                self._terminate(signal.SIGKILL)
                if "Address already in use" in last_error and not self.port:
                    continue  # another process took the port between probing and binding
                raise
            self.port = port
            return self
        raise RuntimeError(f"redis-server could not bind a free port: {last_error}")

    def _command(self, port: int) -> list[str]:
        args = [
            self.binary,
            "--bind", self.host,
            "--dir", str(self.directory),
            "--logfile", str(self._log),
            "--save", "",
            "--daemonize", "no",
            "--protected-mode", "no",
        ]  # fmt: skip
        if self.durable:
            args += ["--appendonly", "yes", "--appendfsync", "always"]
        else:
            args += ["--appendonly", "no"]
        if self.tls:
            args += [
                "--port", "0",
                "--tls-port", str(port),
                "--tls-cert-file", self.tls_files["server_cert"],
                "--tls-key-file", self.tls_files["server_key"],
                "--tls-ca-cert-file", self.tls_files["ca_cert"],
                "--tls-auth-clients", "no",
            ]  # fmt: skip
        else:
            args += ["--port", str(port)]
        if self.password is not None:
            args += ["--requirepass", self.password]
        for user in self.acl_users:
            args += ["--user", *user.split()]  # one word per argument, as in a config file
        return args + self.extra_args

    def _wait_ready(self, port: int) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"redis-server exited with {self.process.returncode} on port {port}: {self.log_tail()}"
                )
            if self._pings(port):
                return
            time.sleep(0.02)
        raise RuntimeError(f"redis-server on port {port} did not answer PING in {STARTUP_TIMEOUT}s")

    def _pings(self, port: int) -> bool:
        """True once the server answers PING (NOAUTH also proves it is serving)."""
        ca_file = self.tls_files["ca_cert"] if self.tls else None
        try:
            with _raw_connection(self.host, port, 1.0, ca_file) as sock:
                sock.sendall(b"PING\r\n")
                reply = sock.recv(64)
        except OSError:
            return False
        return reply.startswith((b"+PONG", b"-NOAUTH"))

    def kill(self) -> None:
        """SIGKILL: no shutdown save, no flush beyond what ``appendfsync`` already did."""
        self._terminate(signal.SIGKILL)

    def stop(self) -> None:
        self._terminate(signal.SIGTERM)

    def restart(self) -> Self:
        """Kill and start again on the same port and data directory."""
        self.kill()
        return self.start()

    def _terminate(self, sig: signal.Signals) -> None:
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(sig)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        with _running_lock:
            _running.discard(self)

    def close(self) -> None:
        """Stop the server and remove its directory."""
        self.kill()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.close()  # __exit__ does not run when __enter__ fails
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- access
    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def url(
        self,
        *,
        prefix: str | None = None,
        db: int = 0,
        password: str | None = None,
        username: str | None = None,
        host: str | None = None,
        port: int | None = None,
        **params: Any,
    ) -> str:
        """A store URL for this server (``rediss://`` with the CA when it serves TLS)."""
        scheme = "rediss" if self.tls else "redis"
        auth = ""
        if username is not None or password is not None:
            auth = quote(username or "", safe="") + (
                ":" + quote(password, safe="") if password is not None else ""
            )
            auth += "@"
        query = dict(params)
        if prefix is not None:
            query["prefix"] = prefix
        if self.tls:
            query.setdefault("ssl_ca_certs", self.tls_files["ca_cert"])
        text = "&".join(f"{k}={v}" for k, v in query.items())
        address = f"{host or self.host}:{port or self.port}"
        return f"{scheme}://{auth}{address}/{db}" + (f"?{text}" if text else "")

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self._log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<RedisServer {self.host}:{self.port} {state} durable={self.durable}>"


def make_tls_files(directory: Path) -> dict[str, str]:
    """A throwaway CA and a server certificate for 127.0.0.1/localhost, made with ``openssl``."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise RuntimeError("openssl is not on PATH; the TLS tests need it: apt-get install openssl")
    directory.mkdir(parents=True, exist_ok=True)
    files = {
        "ca_key": directory / "ca.key",
        "ca_cert": directory / "ca.crt",
        "server_key": directory / "server.key",
        "server_csr": directory / "server.csr",
        "server_cert": directory / "server.crt",
        "ext": directory / "server.ext",
    }
    files["ext"].write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], check=True, capture_output=True, cwd=directory)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-subj", "/CN=coordkit-test-ca",
        "-keyout", str(files["ca_key"]), "-out", str(files["ca_cert"]))  # fmt: skip
    run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
        "-keyout", str(files["server_key"]), "-out", str(files["server_csr"]))  # fmt: skip
    run("x509", "-req", "-in", str(files["server_csr"]), "-CA", str(files["ca_cert"]),
        "-CAkey", str(files["ca_key"]), "-CAcreateserial", "-days", "2",
        "-extfile", str(files["ext"]), "-out", str(files["server_cert"]))  # fmt: skip
    return {name: str(path) for name, path in files.items()}


@atexit.register
def _kill_leftovers() -> None:
    with _running_lock:
        leftovers = list(_running)
    for server in leftovers:
        with contextlib.suppress(Exception):
            server.close()

"""Private ``redis-server`` processes for tests and benchmarks, and the contract-suite backend.

Each :class:`RedisServer` runs on a free loopback port in its own temporary directory, configured
entirely on the command line (no config file). It is ready when ``PING`` answers, can be killed and
restarted on the same port and directory (the AOF survives), and is cleaned up even when a test
fails (context manager, plus an ``atexit`` guard for anything left running).

:class:`RedisBackend` is the contract suite's backend: one server per test session, a fresh key
prefix per test, and one :class:`~harness.proxy.TCPProxy` per store so a test can cut a client off
without ending its session.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from coordkit.plugins import get_plugin_manager
from coordkit.store import MetadataStore, SessionState
from harness.proxy import TCPProxy

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


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def _raw_connection(host: str, port: int, timeout: float) -> Iterator[socket.socket]:
    sock = socket.create_connection((host, port), timeout=timeout)
    try:
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
    def start(self) -> RedisServer:
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
        if self.tls:
            client = self.client(port=port)
            try:
                client.ping()
                return True
            except Exception:
                return False
            finally:
                client.close()
        try:
            with _raw_connection(self.host, port, 1.0) as sock:
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

    def restart(self) -> RedisServer:
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

    def __enter__(self) -> RedisServer:
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

    def client(self, *, port: int | None = None, **kwargs: Any) -> Any:
        """A plain redis-py client (administrative access: the default user's password)."""
        import redis

        options: dict[str, Any] = {"socket_timeout": 10, "socket_connect_timeout": 5}
        if self.password is not None:
            options["password"] = self.password
        if self.tls:
            options.update(
                ssl=True, ssl_ca_certs=self.tls_files["ca_cert"], ssl_check_hostname=False
            )
        options.update(kwargs)
        return redis.Redis(host=self.host, port=port or self.port, **options)

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


# -- the contract suite's backend ----------------------------------------------------------------


class RedisBackend:
    """Contract backend: one private server per test session, one key prefix per test, one TCP
    proxy per store (connection loss without expiry)."""

    name = "redis"
    _ids = itertools.count(1)

    def __init__(self) -> None:
        self.server = RedisServer().__enter__()
        self._admin = self.server.client()
        self._proxies: dict[int, TCPProxy] = {}
        self._lock = threading.Lock()
        self._run = f"{os.getpid()}-{int(time.time())}"

    def new_url(self) -> str:
        return self.server.url(prefix=f"contract-{self._run}-{next(self._ids)}")

    def open(self, url: str, **options: Any) -> MetadataStore:
        proxy = TCPProxy(self.server.host, self.server.port)
        proxied = url.replace(f"{self.server.host}:{self.server.port}", proxy.address, 1)
        try:
            store = get_plugin_manager().store_for(proxied, **options)
        except BaseException:
            proxy.close()
            raise
        with self._lock:
            self._proxies[id(store)] = proxy

        def release(state: SessionState, key: int = id(store)) -> None:
            if state is SessionState.CLOSED:
                self._release(key)

        store.add_listener(release)
        return store

    def _release(self, key: int) -> None:
        """Close a closed store's proxy in the background (closing waits for its accept loop)."""
        with self._lock:
            proxy = self._proxies.pop(key, None)
        if proxy is not None:
            threading.Thread(target=proxy.close, name="close-proxy", daemon=True).start()

    def _proxy(self, store: MetadataStore) -> TCPProxy:
        with self._lock:
            return self._proxies[id(store)]

    def expire(self, store: MetadataStore) -> None:
        """End the session as a TTL expiry would: the session key goes, then a reaper runs."""
        from coordkit_redis import expire_session

        expire_session(self._admin, store.url.params.get("prefix", "coordkit"), store.session_id)

    def disconnect(self, store: MetadataStore) -> None:
        self._proxy(store).cut()

    def reconnect(self, store: MetadataStore) -> None:
        self._proxy(store).restore()

    def close(self) -> None:
        with self._lock:
            proxies = list(self._proxies.values())
            self._proxies.clear()
        closers = [threading.Thread(target=proxy.close, daemon=True) for proxy in proxies]
        for closer in closers:
            closer.start()
        for closer in closers:
            closer.join(timeout=10)
        self._admin.close()
        self.server.close()


def wait_state(store: MetadataStore, state: SessionState, timeout: float = 20.0) -> None:
    """Wait until ``store`` reaches ``state`` (bounded; raises AssertionError on timeout)."""
    from harness.waiting import wait_for

    wait_for(lambda: store.state is state, timeout, f"state {state.value}")

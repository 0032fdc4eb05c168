"""Redis for coordkit's tests: the kit's private ``redis-server`` (coordkit.testing.servers) with
a redis-py client for administrative access, and the contract suite's Redis backend.

:class:`RedisBackend` is the contract suite's backend: one server per test session, a fresh key
prefix per test, and one :class:`~harness.proxy.TCPProxy` per store so a test can cut a client off
without ending its session.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from typing import Any

from coordkit.plugins import get_plugin_manager
from coordkit.store import MetadataStore, SessionState
from coordkit.testing import StoreBackend
from coordkit.testing.servers import redis_server as kit
from coordkit.testing.servers.ports import free_port
from coordkit.testing.servers.redis_server import (
    INSTALL_HINT,
    RedisServerMissingError,
    make_tls_files,
    redis_server_binary,
)
from harness.proxy import TCPProxy

__all__ = [
    "INSTALL_HINT",
    "RedisBackend",
    "RedisServer",
    "RedisServerMissingError",
    "free_port",
    "make_tls_files",
    "redis_server_binary",
    "wait_state",
]


class RedisServer(kit.RedisServer):
    """The kit's server, plus a redis-py client for administrative access."""

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


# -- the contract suite's backend ----------------------------------------------------------------


class RedisBackend(StoreBackend):
    """Contract backend: one private server per test session, one key prefix per test, one TCP
    proxy per store (connection loss without expiry).

    :param durable: run the server with ``appendfsync always`` (the store suite does, so that its
        durability test applies; the engine tests keep the faster default).
    """

    name = "redis"
    _ids = itertools.count(1)

    def __init__(self, *, durable: bool = False) -> None:
        self.server = RedisServer(durable=durable).__enter__()
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

    def restart(self) -> None:
        """SIGKILL the server and start it on the same port and data directory."""
        self.server.restart()

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

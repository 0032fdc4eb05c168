"""ZooKeeper for coordkit's tests: the kit's private servers (coordkit.testing.servers), plus
what needs the kazoo client: faults inflicted on store clients (a proxy per store, server-side
session expiry) and the contract suite's ZooKeeper backend.
"""

from __future__ import annotations

import itertools
import threading
import uuid
from typing import Any
from urllib.parse import quote

from coordkit.plugins import get_plugin_manager
from coordkit.store import MetadataStore, SessionState
from coordkit.store.urls import StoreURL
from coordkit.testing import StoreBackend
from coordkit.testing.servers.ports import free_port
from coordkit.testing.servers.zookeeper_server import (
    INSTALL_HINT,
    START_TIMEOUT,
    TICK_MS,
    StandaloneZooKeeper,
    TLSFiles,
    ZooKeeperEnsemble,
    ZooKeeperServer,
    ZooKeeperUnavailableError,
    ensemble,
    four_letter,
    make_tls_files,
    require_zookeeper,
    standalone,
)
from harness.proxy import TCPProxy
from harness.waiting import wait_for

__all__ = [
    "INSTALL_HINT",
    "START_TIMEOUT",
    "TICK_MS",
    "ProxiedStores",
    "StandaloneZooKeeper",
    "TLSFiles",
    "ZooKeeperBackend",
    "ZooKeeperEnsemble",
    "ZooKeeperServer",
    "ZooKeeperUnavailableError",
    "close_session_elsewhere",
    "ensemble",
    "four_letter",
    "free_port",
    "kazoo_client_of",
    "make_tls_files",
    "require_zookeeper",
    "standalone",
    "with_hosts",
]


# -- faults inflicted on store clients -----------------------------------------------------------


def kazoo_client_of(store: MetadataStore) -> Any:
    return store.client  # type: ignore[attr-defined]


def close_session_elsewhere(
    hosts: str, session_id: int, password: bytes, timeout: float = 10.0
) -> None:
    """End a session on the server side: attach a second client to it, then close that client.

    The server deletes the session's ephemeral nodes at once; the session's original owner learns
    that its session expired when it next reaches the server.
    """
    from kazoo.client import KazooClient

    twin = KazooClient(hosts=hosts, client_id=(session_id, password), timeout=timeout)
    twin.start(timeout=timeout)
    try:
        if twin.client_id is None or twin.client_id[0] != session_id:
            raise AssertionError(
                f"could not attach to session {session_id:#x} (it had already expired)"
            )
    finally:
        twin.stop()
        twin.close()


class ProxiedStores:
    """Opens ZooKeeper stores through one :class:`TCPProxy` each, so a test can cut a client off
    without ending its session, and expire a session on the server side."""

    def __init__(self, server_hosts: str):
        self.server_hosts = server_hosts
        self._proxies: dict[int, TCPProxy] = {}
        self._lock = threading.Lock()

    def open(self, url: str, **options: Any) -> MetadataStore:
        parsed = StoreURL.parse(url)
        if len(parsed.hosts) != 1:
            raise ValueError("a proxied store needs a URL with exactly one host")
        host, port = parsed.hosts[0]
        proxy = TCPProxy(host, port or 2181)
        try:
            store = get_plugin_manager().store_for(with_hosts(parsed, proxy.address), **options)
        except BaseException:
            proxy.close()
            raise
        with self._lock:
            self._proxies[id(store)] = proxy

        def release(state: SessionState) -> None:
            if state is SessionState.CLOSED:
                with self._lock:
                    owned = self._proxies.pop(id(store), None)
                if owned is not None:
                    # Closing joins the proxy's threads: not on the store's event thread.
                    threading.Thread(target=owned.close, daemon=True).start()

        store.add_listener(release)
        return store

    def proxy(self, store: MetadataStore) -> TCPProxy:
        with self._lock:
            return self._proxies[id(store)]

    def disconnect(self, store: MetadataStore, timeout: float = 20.0) -> None:
        self.proxy(store).cut()
        wait_for(
            lambda: store.state is SessionState.SUSPENDED, timeout, "store SUSPENDED after the cut"
        )

    def reconnect(self, store: MetadataStore, timeout: float = 20.0) -> None:
        self.proxy(store).restore()
        wait_for(lambda: store.state is not SessionState.SUSPENDED, timeout, "store reconnected")

    def expire(self, store: MetadataStore, timeout: float = 20.0) -> None:
        """Expire ``store``'s session on the server and wait for its new session."""
        client_id = kazoo_client_of(store).client_id
        if client_id is None:
            raise AssertionError(f"{store!r} is not connected; cannot expire its session")
        session_id, password = client_id
        proxy = self.proxy(store)
        # Cut the owner off first so it cannot re-attach to the session before it is closed.
        proxy.cut()
        try:
            wait_for(lambda: store.state is not SessionState.CONNECTED, timeout, "owner cut off")
            close_session_elsewhere(self.server_hosts, session_id, password)
        finally:
            proxy.restore()
        wait_for(
            lambda: store.state is SessionState.CONNECTED and store.session_id != session_id,
            timeout,
            "a new session after expiry",
        )

    def close(self) -> None:
        with self._lock:
            proxies, self._proxies = list(self._proxies.values()), {}
        for proxy in proxies:
            proxy.close()


def with_hosts(url: StoreURL, hosts: str) -> str:
    """``url`` as text with its hosts replaced (credentials kept, for opening only)."""
    auth = ""
    if url.username is not None:
        auth = quote(url.username, safe="")
        if url.password is not None:
            auth += ":" + quote(url.password, safe="")
        auth += "@"
    query = "&".join(f"{k}={quote(v, safe='/')}" for k, v in url.query)
    return f"{url.scheme}://{auth}{hosts}{url.path}" + (f"?{query}" if query else "")


# -- the contract suite's backend ----------------------------------------------------------------


class ZooKeeperBackend(StoreBackend):
    """One private standalone server per test session (started on first use); each test gets a
    fresh chroot; every store goes through its own proxy for connection-loss faults."""

    name = "zookeeper"
    _ids = itertools.count(1)

    def __init__(self) -> None:
        self._server: StandaloneZooKeeper | None = None
        self._stores: ProxiedStores | None = None
        self._run = uuid.uuid4().hex[:8]
        self._lock = threading.Lock()

    def _ensure(self) -> ProxiedStores:
        with self._lock:
            if self._stores is None:
                self._server = StandaloneZooKeeper().start()
                self._stores = ProxiedStores(self._server.hosts)
            return self._stores

    @property
    def hosts(self) -> str:
        self._ensure()
        assert self._server is not None
        return self._server.hosts

    def new_url(self) -> str:
        return f"zookeeper://{self.hosts}/coordkit-contract-{self._run}/t{next(self._ids)}"

    def open(self, url: str, **options: Any) -> MetadataStore:
        return self._ensure().open(url, **options)

    def expire(self, store: MetadataStore) -> None:
        self._ensure().expire(store)

    def disconnect(self, store: MetadataStore) -> None:
        self._ensure().disconnect(store)

    def reconnect(self, store: MetadataStore) -> None:
        self._ensure().reconnect(store)

    def restart(self) -> None:
        """Kill the server (SIGKILL) and start it again on the same port and data."""
        self._ensure()
        assert self._server is not None
        self._server.server.restart()

    def close(self) -> None:
        with self._lock:
            stores, self._stores = self._stores, None
            server, self._server = self._server, None
        if stores is not None:
            stores.close()
        if server is not None:
            server.close()

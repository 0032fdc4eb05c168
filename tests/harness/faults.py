"""Fault injectors for whole-system tests: one object per store backend that serves fresh
namespaces on one long-lived server (or ensemble) and inflicts the store faults a chaos schedule
asks for.

Every injector offers the same operations, so a schedule never branches on the backend; what a
backend cannot do is simply absent from :attr:`StoreFaults.kinds`:

* :data:`CRASH` — ``kill -9`` the server (an ensemble's leader) and, on :meth:`~StoreFaults.recover`,
  start it again on the same port and data directory;
* :data:`PAUSE` — SIGSTOP the server (an ensemble's leader) until :meth:`~StoreFaults.resume`,
  typically for longer than the session timeout: a hung server, not a dead one;
* :data:`CUT` — drop one session's connections through its TCP proxies (refusing new ones) until
  :meth:`~StoreFaults.restore`: connection loss without expiry, unless the cut outlasts the session;
* :data:`EXPIRE` — end one session on the server side, as a timeout would.

:meth:`StoreFaults.heal` undoes whatever is still in effect. Faults that cannot apply right now (a
session that is not connected cannot be expired on the server) raise :class:`FaultNotApplicable`
so the caller can record the skip instead of failing.

The servers, proxies and process helpers are the harness's own (:mod:`harness.zookeeper`,
:mod:`harness.redis_server`, :mod:`harness.proxy`); this module only adds what spans them: proxies
for every host of a multi-host URL, and SIGSTOP for any child process.
"""

from __future__ import annotations

import abc
import contextlib
import itertools
import signal
import subprocess
import threading
import uuid
from typing import Any

from coordkit.plugins import get_plugin_manager
from coordkit.store import MetadataStore, SessionState
from coordkit.store.urls import StoreURL
from harness.proxy import TCPProxy
from harness.redis_server import RedisServer
from harness.waiting import wait_for
from harness.zookeeper import (
    StandaloneZooKeeper,
    ZooKeeperEnsemble,
    ZooKeeperServer,
    close_session_elsewhere,
    kazoo_client_of,
    with_hosts,
)

#: Backends :func:`open_faults` knows.
BACKENDS = ("memory", "zookeeper", "zk-ensemble", "redis")

CRASH = "crash"
PAUSE = "pause"
CUT = "cut"
EXPIRE = "expire"

#: How long a fault waits for the server or client to reach the state it needs.
FAULT_WAIT = 30.0


class FaultNotApplicable(Exception):
    """The fault cannot be inflicted now (e.g. expiring a session that is not connected)."""


# -- processes ----------------------------------------------------------------------------------


def process_state(process: subprocess.Popen[bytes]) -> str:
    """The one-letter state of a child process from ``/proc`` (``T``: stopped)."""
    with open(f"/proc/{process.pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0]


def suspend_process(process: subprocess.Popen[bytes]) -> None:
    """SIGSTOP ``process`` and return once it is really stopped (delivery is asynchronous)."""
    process.send_signal(signal.SIGSTOP)
    wait_for(lambda: process_state(process) == "T", 10.0, f"process {process.pid} stopped")


def continue_process(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGCONT)


# -- proxies for every host of a URL ------------------------------------------------------------


class StoreProxies:
    """Opens stores through one :class:`TCPProxy` per host of their URL, so one session can be cut
    off from every server of an ensemble at once (:class:`harness.zookeeper.ProxiedStores` does
    it for a single host). A store's proxies close when the store does."""

    def __init__(self) -> None:
        self._proxies: dict[int, list[TCPProxy]] = {}
        self._lock = threading.Lock()

    def open(self, url: str, **options: Any) -> MetadataStore:
        parsed = StoreURL.parse(url)
        proxies = [TCPProxy(host, port or 0) for host, port in parsed.hosts]
        try:
            store = get_plugin_manager().store_for(
                with_hosts(parsed, ",".join(p.address for p in proxies)), **options
            )
        except BaseException:
            for proxy in proxies:
                proxy.close()
            raise
        with self._lock:
            self._proxies[id(store)] = proxies

        def release(state: SessionState, key: int = id(store)) -> None:
            if state is SessionState.CLOSED:
                with self._lock:
                    owned = self._proxies.pop(key, [])
                # Closing joins each proxy's accept thread: not on the store's event thread.
                for proxy in owned:
                    threading.Thread(target=proxy.close, name="close-proxy", daemon=True).start()

        store.add_listener(release)
        return store

    def of(self, store: MetadataStore) -> list[TCPProxy]:
        with self._lock:
            try:
                return list(self._proxies[id(store)])
            except KeyError:
                raise FaultNotApplicable(f"{store!r} was not opened through a proxy") from None

    def cut(self, store: MetadataStore) -> None:
        for proxy in self.of(store):
            proxy.cut()

    def restore(self, store: MetadataStore) -> None:
        for proxy in self.of(store):
            proxy.restore()

    def restore_all(self) -> None:
        with self._lock:
            proxies = [p for owned in self._proxies.values() for p in owned]
        for proxy in proxies:
            proxy.restore()

    def close(self) -> None:
        with self._lock:
            proxies = [p for owned in self._proxies.values() for p in owned]
            self._proxies.clear()
        for proxy in proxies:
            proxy.close()


# -- the injectors ------------------------------------------------------------------------------


class StoreFaults(abc.ABC):
    """A store backend's server(s), fresh namespaces on them, and the faults they can suffer.

    :param session_timeout: seconds every store opened here asks for (short, so that a pause past
        it stays quick).
    """

    name: str
    kinds: tuple[str, ...]

    def __init__(self, session_timeout: float) -> None:
        self.session_timeout = session_timeout
        self._run = uuid.uuid4().hex[:6]
        self._ids = itertools.count(1)

    def _namespace(self) -> str:
        return f"chaos-{self._run}-{next(self._ids)}"

    @abc.abstractmethod
    def new_url(self) -> str:
        """A URL of a fresh, empty namespace (carrying the session timeout)."""

    @abc.abstractmethod
    def open(self, url: str) -> MetadataStore:
        """A session on ``url`` that :meth:`cut` and :meth:`expire` can reach."""

    def release(self, url: str) -> None:  # noqa: B027 - optional hook
        """Forget a namespace no longer used (frees in-process state where there is some)."""

    # server faults
    def crash(self) -> str:
        """``kill -9`` the server (an ensemble's leader); returns what was killed."""
        raise FaultNotApplicable(f"{self.name} has no server to crash")

    @abc.abstractmethod
    def recover(self) -> None:
        """Start what :meth:`crash` killed, on the same port and data directory."""

    def pause(self) -> str:
        """SIGSTOP the server (an ensemble's leader); returns what was paused."""
        raise FaultNotApplicable(f"{self.name} has no server to pause")

    @abc.abstractmethod
    def resume(self) -> None:
        """SIGCONT what :meth:`pause` stopped."""

    # session faults
    @abc.abstractmethod
    def cut(self, store: MetadataStore) -> None:
        """Drop ``store``'s connection and refuse new ones until :meth:`restore`."""

    @abc.abstractmethod
    def restore(self, store: MetadataStore) -> None: ...

    @abc.abstractmethod
    def expire(self, store: MetadataStore) -> None:
        """End ``store``'s session on the server side."""

    @abc.abstractmethod
    def heal(self) -> None:
        """Undo every fault still in effect and wait until the server serves again."""

    @abc.abstractmethod
    def close(self) -> None: ...


class MemoryStoreFaults(StoreFaults):
    """The in-process memory store: no server process, so only session faults (the client's
    simulated disconnect, and expiry by the in-process server)."""

    name = "memory"
    kinds = (CUT, EXPIRE)

    def __init__(self, session_timeout: float) -> None:
        super().__init__(session_timeout)
        self._cut: set[int] = set()
        self._stores: dict[int, MetadataStore] = {}
        self._lock = threading.Lock()

    def new_url(self) -> str:
        return f"memory://{self._namespace()}?session_timeout={self.session_timeout}"

    def open(self, url: str) -> MetadataStore:
        return get_plugin_manager().store_for(url)

    def release(self, url: str) -> None:
        from coordkit_memory.server import MemoryServer

        parsed = StoreURL.parse(url)
        MemoryServer.discard(parsed.host_string or parsed.path.strip("/"))

    def recover(self) -> None:
        pass  # nothing to crash

    def resume(self) -> None:
        pass  # nothing to pause

    def cut(self, store: MetadataStore) -> None:
        store.disconnect()  # type: ignore[attr-defined]
        with self._lock:
            self._cut.add(id(store))
            self._stores[id(store)] = store

    def restore(self, store: MetadataStore) -> None:
        with self._lock:
            self._cut.discard(id(store))
            self._stores.pop(id(store), None)
        if store.state is not SessionState.CLOSED:
            store.reconnect()  # type: ignore[attr-defined]

    def expire(self, store: MetadataStore) -> None:
        from coordkit.errors import SessionExpiredError

        try:
            store.server.expire_session(store.session_id)  # type: ignore[attr-defined]
        except SessionExpiredError as exc:
            raise FaultNotApplicable(str(exc)) from None

    def heal(self) -> None:
        with self._lock:
            stores = list(self._stores.values())
        for store in stores:
            self.restore(store)

    def close(self) -> None:
        self.heal()


class ZooKeeperStoreFaults(StoreFaults):
    """A standalone ZooKeeper server (``members=1``) or a quorum ensemble; every store goes
    through one proxy per member. On an ensemble, :meth:`crash` and :meth:`pause` hit the current
    leader, so the survivors must elect another while the clients fail over."""

    kinds = (CRASH, PAUSE, CUT, EXPIRE)

    def __init__(self, session_timeout: float, *, members: int = 1) -> None:
        super().__init__(session_timeout)
        self.name = "zookeeper" if members == 1 else "zk-ensemble"
        self._standalone: StandaloneZooKeeper | None = None
        self._ensemble: ZooKeeperEnsemble | None = None
        if members == 1:
            self._standalone = StandaloneZooKeeper().start()
            self.servers = [self._standalone.server]
            self.hosts = self._standalone.hosts
        else:
            self._ensemble = ZooKeeperEnsemble(members).start()
            self.servers = list(self._ensemble.servers)
            self.hosts = self._ensemble.hosts
        self.proxies = StoreProxies()
        self._killed: list[ZooKeeperServer] = []
        self._paused: list[ZooKeeperServer] = []

    def new_url(self) -> str:
        # A short connect timeout: kazoo waits that long on a server that accepts but never
        # answers (one still starting, or paused), and a schedule's steps must stay short.
        return (
            f"zookeeper://{self.hosts}/{self._namespace()}"
            f"?session_timeout={self.session_timeout}&connect_timeout=5"
        )

    def open(self, url: str) -> MetadataStore:
        return self.proxies.open(url)

    def _victim(self) -> ZooKeeperServer:
        if self._ensemble is None:
            return self.servers[0]
        found: list[ZooKeeperServer] = []

        def leader() -> bool:
            try:
                found.append(self._ensemble.leader())  # type: ignore[union-attr]
            except AssertionError:
                return False  # an election is under way
            return True

        wait_for(leader, FAULT_WAIT, "the ensemble to have a leader")
        return found[-1]

    def crash(self) -> str:
        victim = self._victim()
        victim.kill()
        self._killed.append(victim)
        return f"server {victim.server_id} ({victim.address})"

    def recover(self) -> None:
        while self._killed:
            self._killed.pop().start()

    def pause(self) -> str:
        victim = self._victim()
        victim.pause()
        self._paused.append(victim)
        return f"server {victim.server_id} ({victim.address})"

    def resume(self) -> None:
        while self._paused:
            self._paused.pop().resume()

    def cut(self, store: MetadataStore) -> None:
        self.proxies.cut(store)

    def restore(self, store: MetadataStore) -> None:
        self.proxies.restore(store)

    def expire(self, store: MetadataStore) -> None:
        """Close the session from a second client attached to it (the server then deletes its
        ephemerals at once), with the owner cut off meanwhile so it cannot re-attach first."""
        client_id = kazoo_client_of(store).client_id
        if client_id is None or store.state is not SessionState.CONNECTED:
            raise FaultNotApplicable(f"{store!r} is not connected; its session cannot be expired")
        session_id, password = client_id
        self.proxies.cut(store)
        try:
            wait_for(lambda: store.state is not SessionState.CONNECTED, FAULT_WAIT, "owner cut off")
            try:
                close_session_elsewhere(self.hosts, session_id, password)
            except AssertionError as exc:  # it had expired on its own meanwhile
                raise FaultNotApplicable(str(exc)) from None
        finally:
            self.proxies.restore(store)

    def heal(self) -> None:
        self.proxies.restore_all()
        self.resume()
        self.recover()
        for server in self.servers:
            if not server.running:
                server.start()
        for server in self.servers:
            server.wait_serving(FAULT_WAIT)
        if self._ensemble is not None:
            self._victim()  # a leader is elected again

    def close(self) -> None:
        self.proxies.close()
        if self._standalone is not None:
            self._standalone.close()
        if self._ensemble is not None:
            self._ensemble.close()


class RedisStoreFaults(StoreFaults):
    """A durable ``redis-server`` (``appendonly yes``, ``appendfsync always``) on a fixed port:
    a crash loses nothing acknowledged, and every store goes through its own proxy."""

    name = "redis"
    kinds = (CRASH, PAUSE, CUT, EXPIRE)

    def __init__(self, session_timeout: float) -> None:
        super().__init__(session_timeout)
        self.server = RedisServer(durable=True).__enter__()
        self.proxies = StoreProxies()
        self._admin = self.server.client(socket_timeout=5)
        self._paused = False

    def new_url(self) -> str:
        # Calls fail after socket_timeout on a hung server instead of the default 10 s.
        return self.server.url(
            prefix=self._namespace(),
            session_timeout=self.session_timeout,
            socket_timeout=2,
            connect_timeout=2,
        )

    def open(self, url: str) -> MetadataStore:
        return self.proxies.open(url)

    def crash(self) -> str:
        self.server.kill()
        return f"redis-server {self.server.host}:{self.server.port}"

    def recover(self) -> None:
        if not self.server.running:
            self.server.start()

    def pause(self) -> str:
        if self.server.process is None or not self.server.running:
            raise FaultNotApplicable("redis-server is not running")
        suspend_process(self.server.process)
        self._paused = True
        return f"redis-server {self.server.host}:{self.server.port}"

    def resume(self) -> None:
        if self._paused and self.server.process is not None:
            continue_process(self.server.process)
        self._paused = False

    def cut(self, store: MetadataStore) -> None:
        self.proxies.cut(store)

    def restore(self, store: MetadataStore) -> None:
        self.proxies.restore(store)

    def expire(self, store: MetadataStore) -> None:
        """Delete the session key, pass its deadline and run a reaper, as a TTL expiry would."""
        import redis

        from coordkit_redis import expire_session

        try:
            expire_session(
                self._admin, store.url.params.get("prefix", "coordkit"), store.session_id
            )
        except redis.RedisError as exc:
            raise FaultNotApplicable(f"could not reach redis-server: {exc}") from None

    def heal(self) -> None:
        self.proxies.restore_all()
        self.resume()
        self.recover()

    def close(self) -> None:
        self.resume()
        self.proxies.close()
        with contextlib.suppress(Exception):
            self._admin.close()
        self.server.close()


def open_faults(name: str, session_timeout: float) -> StoreFaults:
    """An injector by backend name: ``memory``, ``zookeeper`` (standalone), ``zk-ensemble`` (three
    members) or ``redis`` (durable)."""
    if name == "memory":
        return MemoryStoreFaults(session_timeout)
    if name == "zookeeper":
        return ZooKeeperStoreFaults(session_timeout)
    if name == "zk-ensemble":
        return ZooKeeperStoreFaults(session_timeout, members=3)
    if name == "redis":
        return RedisStoreFaults(session_timeout)
    raise ValueError(f"unknown backend {name!r}; known: {', '.join(BACKENDS)}")

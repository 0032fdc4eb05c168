"""Fault tests for the ZooKeeper store against real ZooKeeper servers.

Crashes and restarts, a 3-member ensemble losing one member and then its quorum, sessions expired
on the server, connections cut without expiry, a hung server, racing version-checked writes, and
the security properties (ACLs, credentials kept out of logs, oversized values, bad paths).
"""

from __future__ import annotations

import itertools
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from coordkit.plugins import get_plugin_manager
from coordkit.store import (
    MAX_DATA_SIZE,
    BadVersionError,
    Check,
    ChildrenEvent,
    ConnectionLossError,
    Create,
    DataEvent,
    DataTooLargeError,
    InvalidPathError,
    MetadataStore,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
    SessionState,
    SetData,
    StoreError,
    TreeEventKind,
)
from coordkit.testing.servers import zookeeper_server
from coordkit.testing.store.feeds import FeedRecorder
from harness import zookeeper as harness_zookeeper
from harness.waiting import wait_for
from harness.zookeeper import (
    ProxiedStores,
    StandaloneZooKeeper,
    ZooKeeperEnsemble,
    ZooKeeperServer,
    close_session_elsewhere,
)

_chroots = itertools.count(1)


def chroot() -> str:
    return f"/faults-{uuid.uuid4().hex[:6]}-{next(_chroots)}"


class Recorder:
    """Collects watch events or session states from the store's event thread."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self._lock = threading.Lock()

    def __call__(self, item: Any) -> None:
        with self._lock:
            self.items.append(item)

    def snapshot(self) -> list[Any]:
        with self._lock:
            return list(self.items)

    def last(self) -> Any:
        items = self.snapshot()
        return items[-1] if items else None


class Stores:
    """Opens stores (directly or through a proxy) and closes them all at teardown."""

    def __init__(self, hosts: str):
        self.hosts = hosts
        self.proxied = ProxiedStores(hosts.split(",", maxsplit=1)[0])
        self._opened: list[MetadataStore] = []

    def open(
        self, root: str, *, userinfo: str = "", hosts: str | None = None, **options: Any
    ) -> MetadataStore:
        url = f"zookeeper://{userinfo}{hosts or self.hosts}{root}"
        store = get_plugin_manager().store_for(url, **options)
        self._opened.append(store)
        return store

    def open_proxied(self, root: str, **options: Any) -> MetadataStore:
        store = self.proxied.open(f"zookeeper://{self.hosts.split(',')[0]}{root}", **options)
        self._opened.append(store)
        return store

    def close(self) -> None:
        for store in self._opened:
            store.close()
        self.proxied.close()


def retry_until_done(action: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
    """Run ``action`` until it stops failing for want of a connection or session (a reconnect or
    a leader election in progress); any other error fails the test."""
    outcome: list[Any] = []

    def attempt() -> bool:
        try:
            outcome.append(action())
        except (ConnectionLossError, SessionExpiredError):
            return False
        return True

    wait_for(attempt, timeout, what)
    return outcome[-1]


def create_once(store: MetadataStore, path: str, data: bytes) -> str:
    """Create ``path``; if a retried create finds it there already with ``data``, that is the
    earlier attempt, applied although its reply was lost with the connection."""
    try:
        return store.create(path, data)
    except NodeExistsError:
        if store.get(path)[0] != data:
            raise
        return path


# -- fixtures --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[StandaloneZooKeeper]:
    """One standalone server for the tests that do not kill it."""
    zk = StandaloneZooKeeper().start()
    yield zk
    zk.close()


@pytest.fixture
def stores(server: StandaloneZooKeeper) -> Iterator[Stores]:
    opened = Stores(server.hosts)
    yield opened
    opened.close()


@pytest.fixture
def own_server() -> Iterator[StandaloneZooKeeper]:
    """A server this test may kill, pause and restart."""
    zk = StandaloneZooKeeper().start()
    yield zk
    zk.close()


@pytest.fixture
def ensemble() -> Iterator[ZooKeeperEnsemble]:
    group = ZooKeeperEnsemble(3).start()
    yield group
    group.close()


# -- crashes and restarts --------------------------------------------------------------------------


def test_acknowledged_writes_survive_a_server_crash_and_restart(
    own_server: StandaloneZooKeeper,
) -> None:
    stores = Stores(own_server.hosts)
    try:
        root = chroot()
        # kazoo waits session_timeout / hosts for a handshake reply; a server that is still
        # starting may accept the connection and never answer it, so keep that wait short.
        store = stores.open(root, session_timeout=12)
        states = Recorder()
        store.add_listener(states)
        session = store.session_id
        store.create("/brokers/topics/t/partitions/0/state", b'{"leader":1}', make_parents=True)
        store.commit([Create("/controller_epoch", b"1"), SetData("/brokers/topics/t", b"assigned")])
        store.apply([Create(f"/bulk-{i}", str(i).encode()) for i in range(500)])
        store.create("/lease", b"", ephemeral=True)

        own_server.server.kill()
        wait_for(lambda: store.state is SessionState.SUSPENDED, what="client notices the crash")
        with pytest.raises(ConnectionLossError) as info:
            store.get("/controller_epoch")
        assert "not connected" in str(info.value)

        started = time.monotonic()
        own_server.server.start()
        serving = time.monotonic()
        wait_for(
            lambda: store.state is SessionState.CONNECTED, 45, "client reconnects after restart"
        )
        connected = time.monotonic()
        # ZooKeeper logs sessions too: one that reconnects within its timeout survives a restart.
        # (Failed once in CI's lane alone, not reproduced under load: the timeline says which
        # side was slow if it fails again.)
        assert store.session_id == session, (
            f"new session after the restart: server serving {serving - started:.2f}s after its "
            f"start, client connected {connected - serving:.2f}s later; states seen "
            f"{states.snapshot()}; server log:\n{own_server.server.log_tail()}"
        )
        assert SessionState.LOST not in states.snapshot()
        fresh = stores.open(root)
        assert fresh.get("/brokers/topics/t/partitions/0/state")[0] == b'{"leader":1}'
        assert fresh.get("/controller_epoch")[0] == b"1"
        assert fresh.get("/brokers/topics/t")[0] == b"assigned"
        assert [r[0] for r in fresh.get_many([f"/bulk-{i}" for i in range(500)])] == [  # type: ignore[index]
            str(i).encode() for i in range(500)
        ]
        assert fresh.exists("/lease").ephemeral_owner == session  # type: ignore[union-attr]
    finally:
        stores.close()


def test_a_hung_server_fails_calls_instead_of_blocking(own_server: StandaloneZooKeeper) -> None:
    stores = Stores(own_server.hosts)
    try:
        store = stores.open(chroot(), session_timeout=2)
        store.create("/n", b"v")
        own_server.server.pause()
        try:
            # The connection stays open but nothing answers: the client gives up on its own,
            # failing what is in flight, then refusing new calls until it reconnects.
            (in_flight,) = store.get_many(["/n"])
            assert isinstance(in_flight, ConnectionLossError)
            wait_for(
                lambda: store.state is SessionState.SUSPENDED,
                what="client drops the silent connection",
            )
            with pytest.raises(ConnectionLossError):
                store.get("/n")
        finally:
            own_server.server.resume()
        retry_until_done(lambda: store.get("/n"), "reads work again after the server resumes")
        assert store.get("/n")[0] == b"v"
    finally:
        stores.close()


# -- ensemble --------------------------------------------------------------------------------------


def test_ensemble_keeps_working_when_one_member_dies(ensemble: ZooKeeperEnsemble) -> None:
    stores = Stores(ensemble.hosts)
    try:
        root = chroot()
        store = stores.open(root, session_timeout=15)
        states = Recorder()
        store.add_listener(states)
        session = store.session_id
        store.create("/before", b"1")
        store.create("/eph", b"", ephemeral=True)

        leader = ensemble.leader()
        leader.kill()  # the hardest single loss: the survivors must elect a new leader
        retry_until_done(
            lambda: create_once(store, "/after", b"2"), "a write after losing the leader"
        )
        assert len(ensemble.serving()) == 2
        assert store.session_id == session
        assert SessionState.LOST not in states.snapshot()
        survivor = next(s for s in ensemble.servers if s is not leader)
        direct = stores.open(root, hosts=survivor.address)
        assert direct.get("/before")[0] == b"1"
        # A follower applies a commit a moment after the leader acknowledges it.
        wait_for(lambda: direct.exists("/after") is not None, what="write visible on a survivor")
        assert direct.get("/after")[0] == b"2"
        assert direct.exists("/eph").ephemeral_owner == session  # type: ignore[union-attr]

        leader.start()
        wait_for(lambda: len(ensemble.serving()) == 3, what="the old leader rejoins")
        rejoined = stores.open(root, hosts=leader.address)
        assert (
            retry_until_done(lambda: rejoined.get("/after")[0], "reading from the rejoined member")
            == b"2"
        )
    finally:
        stores.close()


def test_ensemble_without_quorum_fails_clearly_then_recovers(ensemble: ZooKeeperEnsemble) -> None:
    stores = Stores(ensemble.hosts)
    try:
        root = chroot()
        store = stores.open(root, session_timeout=30)
        store.create("/kept", b"acknowledged")
        survivor, *lost = ensemble.servers
        for member in lost:
            member.kill()
        # The lone survivor stops serving: the client is cut off and says so at once.
        wait_for(lambda: survivor.mode() is None, what="survivor stops serving without quorum")
        wait_for(lambda: store.state is SessionState.SUSPENDED, what="client SUSPENDED")
        for attempt in (lambda: store.create("/during", b""), lambda: store.get("/kept")):
            with pytest.raises(ConnectionLossError) as info:
                attempt()
            assert "not connected to ZooKeeper" in str(info.value)
        with pytest.raises(ConnectionLossError):
            store.apply([Create("/during", b"")])

        for member in lost:
            member.start(wait=False)
        for member in ensemble.servers:
            member.wait_serving()
        retry_until_done(
            lambda: create_once(store, "/after", b"back"), "writes after quorum returns", timeout=60
        )
        assert store.state is SessionState.CONNECTED
        assert store.get("/kept")[0] == b"acknowledged"
        assert store.exists("/during") is None
        other = stores.open(root)
        assert other.get("/after")[0] == b"back"
    finally:
        stores.close()


# -- sessions --------------------------------------------------------------------------------------


def test_session_expired_on_the_server_removes_ephemerals_for_everyone(stores: Stores) -> None:
    root = chroot()
    owner = stores.open_proxied(root)
    observer = stores.open(root)
    owner.create("/brokers/ids", b"", make_parents=True)
    owner.create("/brokers/ids/1", b"broker-1", ephemeral=True)
    owner.create("/config", b"v1")
    states, members, config = Recorder(), Recorder(), Recorder()
    owner.add_listener(states)
    observer.watch_children("/brokers/ids", members)
    owner.watch_data("/config", config)
    wait_for(
        lambda: members.last() is not None and members.last().children == ("1",), what="member seen"
    )
    old_session = owner.session_id

    stores.proxied.expire(owner)

    wait_for(lambda: members.last().children == (), what="observer sees the ephemeral go")
    assert observer.exists("/brokers/ids/1") is None
    # Listeners run on the store's event thread, a moment after the state changes.
    wait_for(lambda: states.last() is SessionState.CONNECTED, what="owner told CONNECTED again")
    seen = states.snapshot()
    assert SessionState.LOST in seen
    assert seen.index(SessionState.LOST) < len(seen) - 1
    assert owner.session_id != old_session
    assert owner.exists("/brokers/ids/1") is None
    # The new session works, owns what it creates, and the owner's watches still deliver.
    owner.create("/brokers/ids/1", b"broker-1-again", ephemeral=True)
    assert observer.exists("/brokers/ids/1").ephemeral_owner == owner.session_id  # type: ignore[union-attr]
    observer.set("/config", b"v2")
    wait_for(lambda: config.last().data == b"v2", what="watch delivers after expiry")


def test_session_times_out_while_cut_off(stores: Stores) -> None:
    root = chroot()
    owner = stores.open_proxied(root, session_timeout=1.0)
    observer = stores.open(root)
    states = Recorder()
    owner.add_listener(states)
    owner.create("/lease", b"", ephemeral=True)
    old_session = owner.session_id
    proxy = stores.proxied.proxy(owner)
    proxy.cut()
    try:
        # Nothing reaches the server: it expires the session on its own clock.
        wait_for(
            lambda: observer.exists("/lease") is None, what="server expires the silent session"
        )
    finally:
        proxy.restore()
    wait_for(
        lambda: owner.state is SessionState.CONNECTED and owner.session_id != old_session,
        what="new session",
    )
    wait_for(lambda: SessionState.LOST in states.snapshot(), what="owner told LOST")


def test_connection_loss_without_expiry_keeps_session_ephemerals_and_watches(
    stores: Stores,
) -> None:
    root = chroot()
    owner = stores.open_proxied(root, session_timeout=20)
    other = stores.open(root)
    owner.create("/members", b"")
    owner.create("/members/me", b"", ephemeral=True)
    owner.create("/state", b"before")
    states, data, children = Recorder(), Recorder(), Recorder()
    owner.add_listener(states)
    owner.watch_data("/state", data)
    owner.watch_children("/members", children)
    wait_for(lambda: data.snapshot() and children.snapshot(), what="initial watch state")
    session = owner.session_id

    stores.proxied.disconnect(owner)
    with pytest.raises(ConnectionLossError):
        owner.set("/state", b"from-owner")
    with pytest.raises(ConnectionLossError):
        owner.commit([Check("/state", 0)])
    other.set("/state", b"during")
    other.create("/members/other", b"")
    assert other.exists("/members/me").ephemeral_owner == session  # type: ignore[union-attr]
    stores.proxied.reconnect(owner)

    wait_for(lambda: states.last() is SessionState.CONNECTED, what="owner told CONNECTED again")
    assert owner.session_id == session
    assert states.snapshot() == [SessionState.SUSPENDED, SessionState.CONNECTED]
    wait_for(lambda: data.last().data == b"during", what="change made during the cut delivered")
    wait_for(
        lambda: children.last().children == ("me", "other"),
        what="child added during the cut delivered",
    )
    other.set("/state", b"after")
    wait_for(lambda: data.last().data == b"after", what="later change delivered")
    assert all(isinstance(e, DataEvent) for e in data.snapshot())
    assert all(isinstance(e, ChildrenEvent) for e in children.snapshot())
    versions = [e.stat.version for e in data.snapshot()]
    assert versions == sorted(set(versions))


def test_forced_expiry_of_an_unknown_session_is_reported(server: StandaloneZooKeeper) -> None:
    with pytest.raises(AssertionError, match="already expired"):
        close_session_elsewhere(server.hosts, 0x7ABC_0000_0000_0001, b"\0" * 16, timeout=3)


# -- races -----------------------------------------------------------------------------------------


def race_once(
    contenders: dict[str, MetadataStore], version: int, label: str, how: str
) -> dict[str, Any]:
    """Every contender writes ``/leader_and_isr`` at ``version`` at the same moment."""
    barrier = threading.Barrier(len(contenders))
    outcomes: dict[str, Any] = {}

    def write(name: str, store: MetadataStore) -> None:
        value = f"{name}-{label}".encode()
        barrier.wait()
        try:
            if how == "set":
                store.set("/leader_and_isr", value, version)
            else:
                store.commit(
                    [Check("/leader_and_isr", version), SetData("/leader_and_isr", value, version)]
                )
            outcomes[name] = "won"
        except BadVersionError as exc:
            outcomes[name] = exc

    threads = [threading.Thread(target=write, args=item) for item in contenders.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes


@pytest.mark.parametrize("how", ["set", "commit"])
def test_racing_version_checked_writes_exactly_one_wins(stores: Stores, how: str) -> None:
    root = chroot()
    contenders = {"a": stores.open(root), "b": stores.open(root)}
    contenders["a"].create("/leader_and_isr", b"start")
    for round_ in range(25):
        _, stat = contenders["a"].get("/leader_and_isr")
        outcomes = race_once(contenders, stat.version, str(round_), how)
        winners = [name for name, outcome in outcomes.items() if outcome == "won"]
        assert len(winners) == 1, outcomes
        (loser,) = (o for o in outcomes.values() if o != "won")
        assert isinstance(loser, BadVersionError)
        data, latest = contenders["b"].get("/leader_and_isr")
        assert data == f"{winners[0]}-{round_}".encode()
        assert latest.version == stat.version + 1


# -- security --------------------------------------------------------------------------------------


def test_nodes_created_with_credentials_refuse_other_clients(stores: Stores) -> None:
    root = chroot()
    alice = stores.open(root, userinfo="alice:wonderland@")
    alice.create("/config/topics/t", b'{"retention.ms":"1000"}', make_parents=True)
    anonymous = stores.open(root)
    mallory = stores.open(root, userinfo="mallory:guess@")
    for intruder in (anonymous, mallory):
        assert intruder.get("/config/topics/t")[0] == b'{"retention.ms":"1000"}'  # world may read
        for attempt in (
            lambda s=intruder: s.set("/config/topics/t", b"{}"),
            lambda s=intruder: s.delete("/config/topics/t"),
            lambda s=intruder: s.create("/config/topics/u", b""),
            lambda s=intruder: s.create("/intruder", b""),
        ):
            with pytest.raises(NoAuthError) as info:
                attempt()
            assert info.value.path is not None
            assert "not authorised" in str(info.value)
        results = intruder.apply([SetData("/config/topics/t", b"{}"), Create("/config/x", b"")])
        assert all(isinstance(r, NoAuthError) for r in results)
        with pytest.raises(NoAuthError) as committed:
            intruder.commit([Check("/config/topics/t", 0), SetData("/config/topics/t", b"{}")])
        assert committed.value.op_index == 1
    assert alice.get("/config/topics/t")[0] == b'{"retention.ms":"1000"}'
    alice.set("/config/topics/t", b'{"retention.ms":"2000"}')  # the owner still can
    # The same credentials in another session are the same owner.
    again = stores.open(root, userinfo="alice:wonderland@")
    again.delete("/config", recursive=True)
    assert alice.exists("/config") is None


def test_credentials_never_appear_in_repr_errors_or_logs(
    stores: Stores, caplog: pytest.LogCaptureFixture
) -> None:
    password = "Pa55-w0rd-xyzzy"
    root = chroot()
    caplog.set_level(1)  # everything, kazoo's per-request DEBUG and BLATHER lines included
    store = stores.proxied.open(f"zookeeper://carol:{password}@{stores.hosts}{root}")
    try:
        texts = [repr(store), str(store.url), repr(store.url), repr(store.config)]  # type: ignore[attr-defined]
        # The session password lets anyone take the session over: kazoo logs it, we must not.
        session_password = store.client.client_id[1].hex()  # type: ignore[attr-defined]
        store.create("/a", b"")
        for failing in (
            lambda: store.get("/missing"),
            lambda: store.create("/a", b""),
            lambda: store.commit([Create("/b", b""), Check("/a", 9)]),
        ):
            with pytest.raises(StoreError) as info:
                failing()
            texts += [str(info.value), repr(info.value)]
        # Reconnecting sends the credentials again: that is logged (redacted) too.
        stores.proxied.disconnect(store)
        with pytest.raises(ConnectionLossError) as lost:
            store.get("/a")
        texts.append(str(lost.value))
        stores.proxied.reconnect(store)
        retry_until_done(lambda: store.get("/a"), "reads after reconnecting")
    finally:
        store.close()
    texts += [record.getMessage() for record in caplog.records]
    auth_lines = [t for t in texts if "Auth(" in t]
    assert auth_lines, "kazoo's Auth packet log line was expected in the captured logs"
    assert all("auth='***'" in line for line in auth_lines)
    leaks = [t for t in texts if password in t or session_password in t]
    assert leaks == []
    assert any("carol:***@" in t for t in texts)


def test_oversized_values_and_invalid_paths_are_clear_errors(stores: Stores) -> None:
    store = stores.open(chroot())
    session = store.session_id
    with pytest.raises(DataTooLargeError) as too_big:
        store.create("/big", b"x" * (MAX_DATA_SIZE + 1))
    assert too_big.value.path == "/big"
    assert f"{MAX_DATA_SIZE + 1:,} bytes" in str(too_big.value)
    store.create("/big", b"x" * MAX_DATA_SIZE)
    # A multi-op larger than ZooKeeper's request limit is refused before it is sent.
    with pytest.raises(DataTooLargeError) as too_much:
        store.commit([SetData("/big", b"y" * 600_000), Create("/big2", b"z" * 600_000)])
    assert "request limit" in str(too_much.value)
    results = store.apply(
        [Create("/ok", b""), Create("/huge", b"h" * (MAX_DATA_SIZE + 1)), Create("no-slash")]
    )
    assert results[0] == "/ok"
    assert isinstance(results[1], DataTooLargeError)
    assert results[1].op_index == 1
    assert isinstance(results[2], InvalidPathError)
    assert results[2].path == "no-slash"
    for bad in ("relative", "/trailing/", "/double//slash", "/dot/./x", "/nul\x00"):
        with pytest.raises(InvalidPathError) as info:
            store.set(bad, b"")
        assert info.value.path == bad
    with pytest.raises(NoNodeError):
        store.get("/nothing")
    # Nothing above cost the session its connection.
    assert store.state is SessionState.CONNECTED
    assert store.session_id == session
    assert len(store.get("/big")[0]) == MAX_DATA_SIZE


# -- TLS -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls_server() -> Iterator[StandaloneZooKeeper]:
    """A server that speaks TLS on its secure port and requires a client certificate."""
    zk = StandaloneZooKeeper(tls=True).start()
    yield zk
    zk.close()


def tls_url(zk: StandaloneZooKeeper, root: str, *, ca: Any = None, client_cert: bool = True) -> str:
    files = zk.tls_files
    assert files is not None
    query = f"tls=true&ca={ca or files.ca}&check_hostname=true"
    if client_cert:
        query += f"&cert={files.client_cert}&key={files.client_key}"
    return f"zookeeper://{zk.server.secure_address}{root}?{query}"


def test_store_over_tls_with_a_client_certificate(tls_server: StandaloneZooKeeper) -> None:
    root = chroot()
    store = get_plugin_manager().store_for(tls_url(tls_server, root))
    plain = get_plugin_manager().store_for(f"zookeeper://{tls_server.hosts}{root}")
    try:
        seen = Recorder()
        store.create("/t", b"over tls")
        store.watch_data("/t", seen)
        results = store.apply([Create(f"/t/{i}", str(i).encode()) for i in range(2000)])
        assert results == [f"/t/{i}" for i in range(2000)]
        values = store.get_many([f"/t/{i}" for i in range(2000)])
        assert [v[0] for v in values] == [str(i).encode() for i in range(2000)]  # type: ignore[index]
        assert plain.get("/t")[0] == b"over tls"  # the same tree, seen over the plain port
        plain.set("/t", b"changed")
        wait_for(
            lambda: seen.last() is not None and seen.last().data == b"changed",
            what="watch over TLS",
        )
    finally:
        store.close()
        plain.close()


@pytest.mark.parametrize("problem", ["untrusted server certificate", "no client certificate"])
def test_tls_refuses_what_it_cannot_verify(tls_server: StandaloneZooKeeper, problem: str) -> None:
    files = tls_server.tls_files
    assert files is not None
    if problem == "untrusted server certificate":
        url = tls_url(tls_server, chroot(), ca=files.other_ca)
    else:
        url = tls_url(tls_server, chroot(), client_cert=False)
    with pytest.raises(ConnectionLossError, match="could not connect"):
        get_plugin_manager().store_for(url + "&connect_timeout=3")


# -- pipelining on kazoo's own connection handler --------------------------------------------------


def test_bulk_operations_on_kazoos_stock_connection_handler(stores: Stores) -> None:
    store = stores.open(chroot(), batched_io=False)
    assert store.batched_io is False  # type: ignore[attr-defined]
    store.create("/p", b"")
    results = store.apply(
        [Create(f"/p/{i}", str(i).encode()) for i in range(300)] + [Create("/p/0", b"")]
    )
    assert results[:300] == [f"/p/{i}" for i in range(300)]
    assert type(results[300]).__name__ == "NodeExistsError"
    values = store.get_many([f"/p/{i}" for i in range(300)])
    assert [v[0] for v in values] == [str(i).encode() for i in range(300)]  # type: ignore[index]
    store.delete("/p", recursive=True)
    assert store.exists("/p") is None


def test_bulk_reads_by_multiread_equal_pipelined_getdata(stores: Stores) -> None:
    """multiRead (ZooKeeper 3.6+) and one getData per path give the same data, stats and errors,
    across request boundaries, for missing nodes, empty data and invalid paths."""
    root = chroot()
    writer = stores.open(root)
    writer.create("/p", b"")
    count = 2500  # spans three multiRead requests
    writer.apply([Create(f"/p/{i}", (b"v%d" % i) * (i % 7)) for i in range(count)])
    writer.set("/p/5", b"changed")
    paths = [f"/p/{i}" for i in range(count)] + ["/p/missing", "not-absolute", "/p/7"]
    multi = stores.open(root, multi_read=True)
    single = stores.open(root, multi_read="false")
    probed = stores.open(root)  # auto: probes the server once
    by_multi, by_single, by_probe = (s.get_many(paths) for s in (multi, single, probed))
    assert probed._bulk_reads.multi_read_ok is True  # type: ignore[attr-defined]  # Debian's 3.8 has it
    for got in (by_multi, by_probe):
        assert got[:count] == by_single[:count]
        assert [type(r).__name__ for r in got[count:]] == [
            "NoNodeError",
            "InvalidPathError",
            "tuple",
        ]
        assert got[count].path == "/p/missing"  # type: ignore[union-attr]
        assert got[count].op_index == count  # type: ignore[union-attr]
    assert by_multi[5][0] == b"changed"  # type: ignore[index]
    assert by_multi[5][1].version == 1  # type: ignore[index]
    assert by_multi[0][0] == b""  # type: ignore[index]


def test_multi_read_parameter_is_checked(stores: Stores) -> None:
    from coordkit.errors import InvalidURLError

    with pytest.raises(InvalidURLError, match="multi_read='sometimes' is not a boolean"):
        get_plugin_manager().store_for(f"zookeeper://{stores.hosts}/x?multi_read=sometimes")


@pytest.mark.parametrize("missing", ["java", "zookeeper.jar"])
def test_missing_java_or_zookeeper_fails_naming_the_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, missing: str
) -> None:
    if missing == "java":
        monkeypatch.setattr(shutil, "which", lambda name: None)
    else:
        monkeypatch.setattr(zookeeper_server, "ZOOKEEPER_JAR", tmp_path / "zookeeper.jar")
    with pytest.raises(
        harness_zookeeper.ZooKeeperUnavailableError, match="apt-get install zookeeper"
    ):
        StandaloneZooKeeper()


def test_server_member_can_be_restarted_on_its_ports(own_server: StandaloneZooKeeper) -> None:
    member: ZooKeeperServer = own_server.server
    port = member.client_port
    member.kill()
    assert member.mode() is None
    member.start()
    assert (member.client_port, member.mode()) == (port, "standalone")


def test_a_feed_reads_notifications_in_runs_and_kazoos_own_watches_still_fire(
    stores: Stores,
) -> None:
    """A change feed's notifications are read off the connection's buffer in runs, past kazoo;
    the one a one-shot kazoo watch waits on goes through kazoo, which fires that watch. The feed
    hears of every change, in commit order, either way."""
    root = chroot()
    writer = stores.open(root)
    writer.create("/t", b"")
    writer.apply([Create(f"/t/{i}", b"") for i in range(50)])
    store = stores.open(root)
    seen = FeedRecorder()
    feed = store.watch_tree("/t", seen)
    connection = store.client._connection  # type: ignore[attr-defined]
    bulk = connection.notice_sink
    assert bulk is not None, "the batching handler's bulk reading is not in use"
    runs: list[int] = []

    def counted(notices: list[tuple[int, str]]) -> None:
        runs.append(len(notices))
        bulk(notices)

    connection.notice_sink = counted
    fired: list[bytes | None] = []
    watched = store.watch_data("/t/25", lambda e: fired.append(e.data))
    wait_for(lambda: fired == [b""], what="the one-shot watch's first delivery")
    writer.commit([SetData(f"/t/{i}", b"x") for i in range(50)])  # one transaction
    changed = [(TreeEventKind.CHANGED, f"/t/{i}") for i in range(50)]
    wait_for(lambda: seen.changes() == changed, what="the feed to hear all 50 changes in order")
    wait_for(lambda: fired == [b"", b"x"], what="kazoo's watch on /t/25 to fire")
    assert sum(runs) == 49  # all but /t/25's, which kazoo read
    assert max(runs) > 1, f"notifications were not read in runs: {runs}"
    assert all(e.data == b"x" for e in seen.events if e.kind is TreeEventKind.CHANGED)
    watched.cancel()
    feed.cancel()

"""Fault tests for the Redis store against private redis-server processes: server kills with and
without an fsync'd AOF, session expiry, connection loss, racing writers, and security (AUTH, ACL
users, TLS, secrets kept out of logs and errors, bad input)."""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest

from coordkit.errors import (
    AuthFailedError,
    BadVersionError,
    ConnectionLossError,
    DataTooLargeError,
    InvalidPathError,
    NoAuthError,
    NoNodeError,
    StoreClosedError,
    StoreError,
    UnsupportedError,
)
from coordkit.plugins import get_plugin_manager
from coordkit.store import (
    MAX_DATA_SIZE,
    Check,
    Create,
    MetadataStore,
    Op,
    SessionState,
    SetData,
    Stat,
)
from coordkit_redis import expire_session
from coordkit_redis.keys import KeySpace
from harness.proxy import TCPProxy
from harness.redis_server import RedisServer
from harness.waiting import wait_for

Opener = Callable[..., MetadataStore]


# -- fixtures ------------------------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[RedisServer]:
    """A server without persistence (the default redis-server setup of many deployments)."""
    with RedisServer() as instance:
        yield instance


@pytest.fixture
def durable_server() -> Iterator[RedisServer]:
    """appendonly yes + appendfsync always: every acknowledged write is on disk."""
    with RedisServer(durable=True) as instance:
        yield instance


@pytest.fixture
def open_store() -> Iterator[Opener]:
    """Open stores (optionally through a TCP proxy: ``proxy=TCPProxy``); all closed afterwards."""
    opened: list[MetadataStore] = []
    proxies: list[TCPProxy] = []

    def opener(url: str, *, via: TCPProxy | None = None, **options: Any) -> MetadataStore:
        if via is not None:
            host_port = url.split("://", 1)[1].rsplit("@", 1)[-1].split("/", 1)[0]
            url = url.replace(host_port, via.address, 1)
            proxies.append(via)
        store = get_plugin_manager().store_for(url, **options)
        opened.append(store)
        return store

    yield opener
    for store in opened:
        if store.state is not SessionState.CLOSED:
            store.close()
    for proxy in proxies:
        proxy.close()


class Recorder:
    def __init__(self) -> None:
        self.events: list[Any] = []
        self.lock = threading.Lock()

    def __call__(self, event: Any) -> None:
        with self.lock:
            self.events.append(event)

    def last(self) -> Any:
        with self.lock:
            return self.events[-1] if self.events else None


def snapshot(store: MetadataStore) -> dict[str, tuple[bytes, Stat]]:
    out: dict[str, tuple[bytes, Stat]] = {}
    stack = ["/"]
    while stack:
        path = stack.pop()
        out[path] = store.get(path)
        stack.extend(f"{path.rstrip('/')}/{name}" for name in store.children(path))
    return out


def states_of(store: MetadataStore) -> list[SessionState]:
    states: list[SessionState] = []
    store.add_listener(states.append)
    return states


# -- server kills --------------------------------------------------------------------------------


def test_acknowledged_writes_survive_a_kill_with_appendfsync_always(
    durable_server: RedisServer, open_store: Opener
) -> None:
    store = open_store(durable_server.url(prefix="kafka"), session_timeout=30)
    assert store.characteristics.durable
    store.require("durable", "linearizable_writes", "shared_across_processes")
    states = states_of(store)
    store.create("/brokers/ids/1", b'{"host":"b1"}', ephemeral=True, make_parents=True)
    store.create("/controller_epoch", b"1")
    store.commit([Check("/controller_epoch", 0), SetData("/controller_epoch", b"2", 0)])
    store.create("/brokers/topics/t/partitions", b"", make_parents=True)
    results = store.apply([Create(f"/brokers/topics/t/partitions/{p}", b"") for p in range(300)])
    assert all(isinstance(r, str) for r in results)
    session = store.session_id
    before = snapshot(store)

    durable_server.kill()
    wait_for(lambda: store.state is SessionState.SUSPENDED, what="SUSPENDED after the kill")
    with pytest.raises(ConnectionLossError):
        store.get("/controller_epoch")
    durable_server.start()
    # Listeners run in order on the event thread: once CONNECTED is delivered, so is any LOST.
    wait_for(lambda: states[-1:] == [SessionState.CONNECTED], what="CONNECTED after the restart")
    assert SessionState.LOST not in states
    assert store.session_id == session
    assert snapshot(store) == before
    assert store.exists("/brokers/ids/1").ephemeral_owner == session  # type: ignore[union-attr]
    # The restarted server knows no scripts: every write path must load them again.
    applied = store.apply([SetData(f"/brokers/topics/t/partitions/{p}", b"x") for p in range(3)])
    assert [r.version for r in applied] == [1, 1, 1]
    stat = store.commit([SetData("/controller_epoch", b"3", 1)])[0]
    assert stat.mzxid > max(s.mzxid for _, s in before.values())
    assert store.create("/after", b"") == "/after"


def test_a_kill_during_a_bulk_apply_keeps_every_acknowledged_op(
    durable_server: RedisServer, open_store: Opener
) -> None:
    store = open_store(durable_server.url(prefix="kafka"), session_timeout=30)
    store.create("/states", b"")
    paths = [f"/states/{i}" for i in range(30_000)]
    results: list[Any] = []
    worker = threading.Thread(
        target=lambda: results.extend(store.apply([Create(p, b"s") for p in paths]))
    )
    with durable_server.client() as admin:
        worker.start()
        wait_for(lambda: admin.scard("{kafka}:c:/states") > 2000, what="the apply under way")
    durable_server.kill()
    worker.join()
    assert len(results) == len(paths)
    acknowledged = [path for path, r in zip(paths, results, strict=True) if r == path]
    lost = [r for r in results if isinstance(r, ConnectionLossError)]
    assert acknowledged, "the kill came before any acknowledgement"
    assert lost, "the kill came after the last acknowledgement"
    assert len(acknowledged) + len(lost) == len(paths)
    assert all(e.path in paths and e.op_index is not None for e in lost)
    durable_server.start()
    wait_for(lambda: store.state is SessionState.CONNECTED, what="CONNECTED after the restart")
    stored = store.get_many(acknowledged)
    assert all(isinstance(r, tuple) and r[0] == b"s" for r in stored)


def test_a_server_without_fsync_is_declared_not_durable_and_a_kill_loses_data(
    server: RedisServer, open_store: Opener
) -> None:
    store = open_store(server.url(prefix="kafka"), session_timeout=30)
    traits = store.characteristics
    assert not traits.durable
    assert "appendfsync" in traits.notes
    with pytest.raises(UnsupportedError) as info:
        store.require("durable")
    assert "durable" in str(info.value)
    states = states_of(store)
    store.create("/brokers/ids/1", b"", ephemeral=True, make_parents=True)
    store.create("/config", b"c")
    seen = Recorder()
    store.watch_data("/config", seen)
    wait_for(lambda: seen.last() is not None and seen.last().data == b"c", what="initial")
    old_session = store.session_id

    server.restart()
    # The session key went with the data: LOST, then a fresh session on the empty server.
    wait_for(lambda: SessionState.LOST in states, what="LOST")
    wait_for(lambda: store.state is SessionState.CONNECTED, what="a new session")
    assert store.session_id != old_session
    assert store.exists("/config") is None
    assert store.exists("/brokers") is None
    assert store.children("/") == []
    wait_for(lambda: not seen.last().exists, what="the watcher sees the data is gone")
    store.create("/config", b"again")
    wait_for(lambda: seen.last().data == b"again", what="the watch still delivers")


# -- session expiry ------------------------------------------------------------------------------


def test_expiry_forced_on_the_server_removes_ephemerals_for_everyone(
    server: RedisServer, open_store: Opener
) -> None:
    url = server.url(prefix="kafka")
    owner, observer = open_store(url), open_store(url)
    owner_states = states_of(owner)
    observer.create("/brokers/ids", b"", make_parents=True)
    owner.create("/brokers/ids/1", b"", ephemeral=True)
    owner.create("/controller", b'{"brokerid":1}', ephemeral=True)
    members = Recorder()
    observer.watch_children("/brokers/ids", members)
    wait_for(
        lambda: members.last() is not None and members.last().children == ("1",), what="member"
    )
    old_session = owner.session_id

    with server.client() as admin:
        expire_session(admin, "kafka", old_session)

    assert observer.exists("/controller") is None
    wait_for(lambda: members.last().children == (), what="the observer sees the member leave")
    wait_for(lambda: SessionState.LOST in owner_states, what="the owner sees LOST")
    wait_for(lambda: owner.state is SessionState.CONNECTED, what="the owner reconnects")
    assert owner.session_id != old_session
    wait_for(
        lambda: owner_states[-2:] == [SessionState.LOST, SessionState.CONNECTED],
        what="listeners told LOST, then CONNECTED",
    )
    assert observer.state is SessionState.CONNECTED
    owner.create("/brokers/ids/1", b"", ephemeral=True)
    assert observer.exists("/brokers/ids/1").ephemeral_owner == owner.session_id  # type: ignore[union-attr]


def test_a_session_cut_off_past_its_timeout_is_reaped_by_another_client(
    server: RedisServer, open_store: Opener
) -> None:
    url = server.url(prefix="kafka")
    proxy = TCPProxy(server.host, server.port)
    owner = open_store(url, via=proxy, session_timeout=1.5)
    observer = open_store(url, session_timeout=1.5)
    owner_states = states_of(owner)
    owner.create("/brokers/ids/7", b"", ephemeral=True, make_parents=True)
    old_session = owner.session_id

    proxy.cut()
    wait_for(lambda: owner.state is SessionState.SUSPENDED, what="the owner is cut off")
    # Nobody renews the owner's key: its TTL runs out and the observer's heartbeat reaps it.
    wait_for(lambda: observer.exists("/brokers/ids/7") is None, what="the ephemeral is reaped")
    proxy.restore()
    wait_for(lambda: SessionState.LOST in owner_states, what="the owner sees LOST")
    wait_for(lambda: owner.state is SessionState.CONNECTED, what="the owner gets a new session")
    assert owner.session_id != old_session
    assert owner.exists("/brokers/ids/7") is None


# -- connection loss without expiry --------------------------------------------------------------


def test_connection_loss_keeps_the_session_and_watches_deliver_what_changed(
    server: RedisServer, open_store: Opener
) -> None:
    url = server.url(prefix="kafka")
    proxy = TCPProxy(server.host, server.port)
    owner = open_store(url, via=proxy)
    other = open_store(url)
    states = states_of(owner)
    owner.create("/brokers/ids/1", b"", ephemeral=True, make_parents=True)
    other.create("/state", b"before")
    other.create("/members", b"")
    data_seen, children_seen = Recorder(), Recorder()
    owner.watch_data("/state", data_seen)
    owner.watch_children("/members", children_seen)
    wait_for(lambda: data_seen.events and children_seen.events, what="initial states")
    session = owner.session_id

    proxy.cut()
    wait_for(lambda: owner.state is SessionState.SUSPENDED, what="SUSPENDED")
    with pytest.raises(ConnectionLossError):
        owner.create("/x", b"")
    with pytest.raises(ConnectionLossError):
        owner.get_many(["/state", "/members"])
    applied = owner.apply([Create("/x", b""), SetData("/state", b"mine")])
    assert [type(r) for r in applied] == [ConnectionLossError, ConnectionLossError]
    assert [(r.path, r.op_index) for r in applied] == [("/x", 0), ("/state", 1)]
    other.set("/state", b"during-1")
    other.set("/state", b"during-2")
    other.create("/members/m1", b"")
    other.create("/members/m2", b"")
    other.delete("/members/m1")
    assert other.exists("/brokers/ids/1").ephemeral_owner == session  # type: ignore[union-attr]
    proxy.restore()

    wait_for(lambda: states[-1:] == [SessionState.CONNECTED], what="CONNECTED delivered")
    assert SessionState.LOST not in states
    assert owner.session_id == session
    wait_for(lambda: data_seen.last().data == b"during-2", what="missed data change")
    wait_for(lambda: children_seen.last().children == ("m2",), what="missed membership change")
    assert other.exists("/brokers/ids/1").ephemeral_owner == session  # type: ignore[union-attr]
    other.set("/state", b"after")
    wait_for(lambda: data_seen.last().data == b"after", what="later change")
    versions = [e.stat.version for e in data_seen.events]
    assert versions == sorted(set(versions))


def test_watches_resync_when_the_stream_was_trimmed_past_their_revision(
    server: RedisServer, open_store: Opener
) -> None:
    url = server.url(prefix="kafka", stream_maxlen=5)
    proxy = TCPProxy(server.host, server.port)
    owner = open_store(url, via=proxy)
    other = open_store(url)
    other.create("/hot", b"0")
    other.create("/doomed", b"x")
    hot, doomed = Recorder(), Recorder()
    owner.watch_data("/hot", hot)
    owner.watch_data("/doomed", doomed)
    wait_for(lambda: hot.events and doomed.events, what="initial states")
    # /hot, /doomed and /noise are entries of "/": their events share that directory's shard.
    shard = KeySpace("kafka").shard_of("/")
    with server.client() as admin:
        seen_until = admin.xinfo_stream(shard)["last-generated-id"]

        proxy.cut()
        wait_for(lambda: owner.state is SessionState.SUSPENDED, what="SUSPENDED")
        # The changes the owner watches come first; the noise after them pushes them out.
        other.set("/hot", b"final")
        other.delete("/doomed")
        other.create("/noise", b"")
        for i in range(400):
            other.set("/noise", str(i).encode())
        oldest_kept = admin.xrange(shard, count=1)[0][0]  # (Redis 7 also has XINFO's)

    def revision(raw: bytes) -> tuple[int, ...]:
        return tuple(int(part) for part in raw.split(b"-"))

    assert revision(oldest_kept) > revision(seen_until), "the stream must be trimmed past the owner"
    proxy.restore()
    wait_for(lambda: hot.last().data == b"final", what="the latest value after a resync")
    wait_for(lambda: not doomed.last().exists, what="the deletion after a resync")
    other.set("/hot", b"later")
    wait_for(lambda: hot.last().data == b"later", what="the stream is followed again")


def test_calls_fail_instead_of_blocking_while_the_server_is_unreachable(
    server: RedisServer, open_store: Opener
) -> None:
    store = open_store(server.url(prefix="kafka"), socket_timeout=1, connect_timeout=1)
    store.create("/n", b"")
    assert server.process is not None
    os.kill(server.process.pid, signal.SIGSTOP)  # alive but silent: only timeouts end a call
    try:
        with pytest.raises(ConnectionLossError):
            store.set("/n", b"hang?")
        with pytest.raises(ConnectionLossError):
            store.get("/n")
    finally:
        os.kill(server.process.pid, signal.SIGCONT)
    wait_for(lambda: store.state is SessionState.CONNECTED, what="CONNECTED again")
    assert store.get("/n")[0] in (b"", b"hang?")  # a timed-out write's outcome is unknown


# -- racing writers ------------------------------------------------------------------------------


def race(*actions: Callable[[], Any]) -> list[Any]:
    """Run ``actions`` at the same moment on threads; each one's result or store error."""
    barrier = threading.Barrier(len(actions))
    outcomes: list[Any] = [None] * len(actions)

    def run(index: int) -> None:
        barrier.wait()
        try:
            outcomes[index] = actions[index]()
        except StoreError as exc:
            outcomes[index] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(actions))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def test_exactly_one_of_two_racing_version_checked_writes_wins(
    server: RedisServer, open_store: Opener
) -> None:
    url = server.url(prefix="kafka")
    first, second = open_store(url), open_store(url)
    first.create("/controller_epoch", b"0")
    for round_ in range(40):
        version = first.exists("/controller_epoch").version  # type: ignore[union-attr]
        writes: list[Callable[[], Any]] = []
        for name, store in (("first", first), ("second", second)):
            if round_ % 2:
                writes.append(partial(store.set, "/controller_epoch", name.encode(), version))
            else:
                multi: list[Op] = [
                    Check("/controller_epoch", version),
                    SetData("/controller_epoch", name.encode()),
                ]
                writes.append(partial(store.commit, multi))
        outcomes = race(*writes)
        won = [i for i, o in enumerate(outcomes) if not isinstance(o, StoreError)]
        assert len(won) == 1, outcomes
        assert isinstance(outcomes[1 - won[0]], BadVersionError), outcomes
        data, stat = first.get("/controller_epoch")
        assert data == (b"first", b"second")[won[0]]
        assert stat.version == version + 1


def test_exactly_one_of_two_racing_creates_wins(server: RedisServer, open_store: Opener) -> None:
    url = server.url(prefix="kafka")
    first, second = open_store(url), open_store(url)
    for round_ in range(40):
        path = f"/controller-{round_}"
        outcomes = race(
            partial(first.create, path, b"1", ephemeral=True),
            partial(second.create, path, b"2", ephemeral=True),
        )
        assert sorted(type(o).__name__ for o in outcomes) == ["NodeExistsError", "str"]
        winner = first if outcomes[0] == path else second
        assert first.exists(path).ephemeral_owner == winner.session_id  # type: ignore[union-attr]


def test_bulk_reads_of_large_values_come_back_whole(
    server: RedisServer, open_store: Opener
) -> None:
    store = open_store(server.url(prefix="kafka"))
    values = {f"/big-{i}": bytes([65 + i]) * MAX_DATA_SIZE for i in range(20)}
    assert all(isinstance(r, str) for r in store.apply([Create(p, v) for p, v in values.items()]))
    # 20 MB in one call: the server answers in bounded slices and the store asks for the rest.
    paths = [*values, "/missing", *values]
    results = store.get_many(paths)
    assert len(results) == len(paths)
    for path, result in zip(paths, results, strict=True):
        if path == "/missing":
            assert isinstance(result, NoNodeError)
        else:
            assert isinstance(result, tuple)
            assert result[0] == values[path]
            assert result[1].data_length == MAX_DATA_SIZE


# -- security ------------------------------------------------------------------------------------

PASSWORD = "pw-Zq8#not-in-logs"
ACL_USERS = [
    f"writer on >{PASSWORD} ~* &* +@all",
    f"reader on >{PASSWORD} ~* &* +@read +@connection +@scripting",
    f"tenant on >{PASSWORD} ~{{tenant-a}}:* &* +@all",
    f"noconfig on >{PASSWORD} ~* &* +@all -config",
]


@pytest.fixture
def secured_server() -> Iterator[RedisServer]:
    with RedisServer(durable=True, password=PASSWORD, acl_users=ACL_USERS) as instance:
        yield instance


def test_clients_without_valid_credentials_cannot_change_nodes(
    secured_server: RedisServer, open_store: Opener
) -> None:
    with pytest.raises(NoAuthError):
        open_store(secured_server.url(prefix="kafka"))
    with pytest.raises(AuthFailedError) as info:
        open_store(secured_server.url(prefix="kafka", password="wrong-guess"))
    assert "wrong-guess" not in str(info.value)
    with pytest.raises(AuthFailedError):
        open_store(secured_server.url(prefix="kafka", username="writer", password="wrong-guess"))
    store = open_store(secured_server.url(prefix="kafka", password=PASSWORD))
    store.create("/ok", b"1")
    with secured_server.client() as admin:
        assert admin.hget("{kafka}:n:/ok", "d") == b"1"
        # Nothing else got in: the only session is the authenticated one.
        assert admin.zcard("{kafka}:deadlines") == 1


def test_acl_users_get_exactly_what_their_permissions_allow(
    secured_server: RedisServer, open_store: Opener
) -> None:
    writer = open_store(secured_server.url(prefix="kafka", username="writer", password=PASSWORD))
    writer.create("/written", b"w")
    assert writer.characteristics.durable
    # Read-only user: opening a session is a write, so it is refused before anything changes.
    with pytest.raises(NoAuthError):
        open_store(secured_server.url(prefix="kafka", username="reader", password=PASSWORD))
    # A user confined to one key namespace can use that prefix and no other.
    tenant = open_store(secured_server.url(prefix="tenant-a", username="tenant", password=PASSWORD))
    tenant.create("/mine", b"")
    with pytest.raises(NoAuthError):
        open_store(secured_server.url(prefix="kafka", username="tenant", password=PASSWORD))
    assert writer.exists("/mine") is None
    assert writer.children("/") == ["written"]
    # A user that may not read the configuration cannot prove durability: declared not durable.
    limited = open_store(secured_server.url(prefix="kafka", username="noconfig", password=PASSWORD))
    assert not limited.characteristics.durable
    assert "CONFIG GET was refused" in limited.characteristics.notes
    with pytest.raises(UnsupportedError):
        limited.require("durable")


def test_credentials_never_appear_in_repr_errors_or_logs(
    secured_server: RedisServer, open_store: Opener, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    url = secured_server.url(prefix="kafka", username="writer", password=PASSWORD)
    proxy = TCPProxy(secured_server.host, secured_server.port)
    store = open_store(url, via=proxy)
    texts = [repr(store), str(store), repr(store.url), str(store.url), store.url.redacted()]
    texts.append(repr(store.config))  # type: ignore[attr-defined]
    store.create("/a", b"")
    proxy.cut()
    wait_for(lambda: store.state is SessionState.SUSPENDED, what="SUSPENDED")
    errors: list[BaseException] = []
    with pytest.raises(ConnectionLossError) as lost:
        store.get("/a")
    errors.append(lost.value)
    proxy.restore()
    wait_for(lambda: store.state is SessionState.CONNECTED, what="CONNECTED")
    for wrong in ("writer:nope", ":nope"):
        user, _, secret = wrong.partition(":")
        with pytest.raises(AuthFailedError) as failed:
            open_store(secured_server.url(prefix="kafka", username=user or None, password=secret))
        errors.append(failed.value)
    store.close()
    texts += [str(e) for e in errors] + [repr(e) for e in errors]
    texts += [repr(e.__cause__) for e in errors if e.__cause__ is not None]
    assert caplog.text, "the store should have logged something at DEBUG level"
    for text in [*texts, caplog.text]:
        assert PASSWORD not in text
        assert "nope" not in text


def test_tls_connections_verify_the_server_certificate(open_store: Opener) -> None:
    with RedisServer(tls=True) as tls_server:
        store = open_store(tls_server.url(prefix="kafka"))
        assert store.url.scheme == "rediss"
        store.create("/secure", b"yes")
        assert store.get("/secure")[0] == b"yes"
        bare = f"rediss://{tls_server.host}:{tls_server.port}/0?prefix=kafka"
        with pytest.raises(ConnectionLossError) as info:
            open_store(bare)  # the test CA is not trusted by default
        assert "certificate" in str(info.value).lower()
        unverified = open_store(bare + "&ssl_cert_reqs=none")
        assert unverified.get("/secure")[0] == b"yes"


def test_oversized_values_and_invalid_paths_are_clear_errors(
    server: RedisServer, open_store: Opener
) -> None:
    store = open_store(server.url(prefix="kafka"))
    big = b"x" * (MAX_DATA_SIZE + 1)
    with pytest.raises(DataTooLargeError) as info:
        store.create("/big", big)
    assert info.value.path == "/big"
    assert f"{MAX_DATA_SIZE:,}" in str(info.value)
    assert store.exists("/big") is None
    store.create("/big", b"small")
    with pytest.raises(DataTooLargeError):
        store.set("/big", big)
    with pytest.raises(DataTooLargeError) as multi:
        store.commit([SetData("/big", b"ok"), SetData("/big", big)])
    assert multi.value.op_index == 1
    assert store.get("/big") == (b"small", store.exists("/big"))
    results = store.apply([SetData("/big", b"fine"), Create("/huge", big), Create("bad", b"")])
    assert isinstance(results[0], Stat)
    assert isinstance(results[1], DataTooLargeError)
    assert results[1].op_index == 1
    assert isinstance(results[2], InvalidPathError)
    assert results[2].path == "bad"
    for path in ["", "no-slash", "/trailing/", "/a//b", "/a/../b", "/nul\x00", "/ctl\x1f"]:
        with pytest.raises(InvalidPathError) as bad:
            store.create(path, b"")
        assert bad.value.path == path
        with pytest.raises(InvalidPathError):
            store.get(path)
        with pytest.raises(InvalidPathError):
            store.watch_data(path, lambda event: None)
        got = store.get_many(["/big", path])
        assert isinstance(got[1], InvalidPathError)
        assert got[1].op_index == 1
    with pytest.raises(InvalidPathError) as in_multi:
        store.commit([Create("/fine", b""), Create("/x/", b"")])
    assert in_multi.value.op_index == 1
    assert store.exists("/fine") is None


def test_a_socket_closed_under_a_call_is_a_store_error(
    server: RedisServer, open_store: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    """redis-py raises ValueError reading a socket another thread closed (close(), or the session
    keeper dropping a failed connection): callers get ConnectionLossError, or StoreClosedError
    once the store is closed — never a bare ValueError."""
    store = open_store(server.url(prefix="closing"))
    store.create("/n", b"x")
    client: Any = store._client  # type: ignore[attr-defined]

    def closed_file(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("I/O operation on closed file.")

    monkeypatch.setattr(client, "execute_command", closed_file)
    with pytest.raises(ConnectionLossError, match="closed file") as lost:
        store.get("/n")
    assert lost.value.path == "/n"

    original = type(client).execute_command

    def closed_by_close(*args: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(client, "execute_command", original.__get__(client))
        store.close()  # ends the session through the real client
        raise ValueError("I/O operation on closed file.")

    wait_for(lambda: store.state is SessionState.CONNECTED, what="the session to come back")
    monkeypatch.setattr(client, "execute_command", closed_by_close)
    with pytest.raises(StoreClosedError):
        store.get("/n")

    def unrelated(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("a bug, not a connection")

    monkeypatch.setattr(client, "execute_command", unrelated)
    reopened = open_store(server.url(prefix="closing"))
    monkeypatch.setattr(reopened._client, "execute_command", unrelated)  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="a bug"):
        reopened.get("/n")

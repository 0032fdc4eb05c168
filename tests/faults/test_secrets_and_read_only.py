"""Issue 12 on real servers: credentials never leak (ZooKeeper's DEBUG log of the Auth packet,
Redis errors and logs), read-only commands never write (no chroot node, no key), and a server
that is not there is one line after a short connect timeout.

Private ZooKeeper and redis-server processes come from ``tests/harness`` (a missing binary fails
the run with the install command; nothing is skipped).
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from coordkit.errors import AuthFailedError, ConnectionLossError, NoNodeError, StoreError
from coordkit.plugins import open_store
from coordkit.store import Create, MetadataStore, ReadOnlyError, SessionState
from coordkit_zookeeper.security import secret_forms
from harness.kafka_tree import populate, run
from harness.redis_server import RedisServer
from harness.waiting import wait_for
from harness.zookeeper import StandaloneZooKeeper, free_port

READ_ONLY_COMMANDS = [
    ["tree", "--store", "{url}"],
    ["group", "describe", "--store", "{url}", "--group", "g"],
    ["cluster", "check", "--store", "{url}"],
]
COMMAND_IDS = ["tree", "group describe", "cluster check"]


@pytest.fixture(scope="module")
def zookeeper() -> Iterator[StandaloneZooKeeper]:
    server = StandaloneZooKeeper().start()
    yield server
    server.close()


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


@pytest.fixture
def kazoo(zookeeper: StandaloneZooKeeper) -> Iterator[Any]:
    """A plain kazoo client on the whole tree (no chroot), to see what the stores did."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=zookeeper.hosts)
    client.start(timeout=30)
    yield client
    client.stop()
    client.close()


def zookeeper_tree(client: Any) -> dict[str, tuple[bytes, Any]]:
    """Every node's data and full stat (a new child changes its parent's cversion and pzxid)."""
    out: dict[str, tuple[bytes, Any]] = {}
    stack = ["/"]
    while stack:
        path = stack.pop()
        out[path] = client.get(path)
        stack.extend(f"{path.rstrip('/')}/{name}" for name in client.get_children(path))
    return out


def redis_keys(server: RedisServer) -> dict[bytes, tuple[Any, int]]:
    """Every key's value and TTL. (Not DUMP: a large hash's fields come out in dict order, which
    reads may change by rehashing.)"""
    out: dict[bytes, tuple[Any, int]] = {}
    with server.client() as client:
        for key in client.keys("*"):
            kind = client.type(key)
            if kind == b"hash":
                value: Any = client.hgetall(key)
            elif kind == b"set":
                value = client.smembers(key)
            elif kind == b"zset":
                value = client.zrange(key, 0, -1, withscores=True)
            elif kind == b"stream":
                value = (client.xrange(key), client.xinfo_stream(key)["last-generated-id"])
            else:
                value = client.dump(key)
            out[key] = (kind, value), client.pttl(key)
    return out


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# -- read-only commands never write ---------------------------------------------------------------


@pytest.mark.parametrize("argv", READ_ONLY_COMMANDS, ids=COMMAND_IDS)
def test_read_only_commands_on_a_mistyped_chroot_leave_no_node_behind(
    capsys: pytest.CaptureFixture[str],
    zookeeper: StandaloneZooKeeper,
    kazoo: Any,
    argv: list[str],
) -> None:
    """``coordkit tree``, ``group describe`` and ``cluster check`` on a mistyped ZooKeeper chroot
    left that chroot behind as a persistent node. Now: one line naming it, nothing created."""
    chroot = f"/{unique('mistyped')}/kafka"
    url = f"zookeeper://{zookeeper.hosts}{chroot}"
    before = zookeeper_tree(kazoo)
    code, _out, err = run(capsys, *(a.format(url=url) for a in argv))
    assert code != 0
    (line,) = err.strip().splitlines()
    assert f"no such chroot {chroot} (nothing was created)" in line
    assert zookeeper_tree(kazoo) == before


@pytest.mark.parametrize("argv", READ_ONLY_COMMANDS, ids=COMMAND_IDS)
def test_read_only_commands_leave_a_zookeeper_tree_byte_for_byte_unchanged(
    capsys: pytest.CaptureFixture[str],
    zookeeper: StandaloneZooKeeper,
    kazoo: Any,
    argv: list[str],
) -> None:
    url = f"zookeeper://{zookeeper.hosts}/{unique('kafka')}"
    with open_store(url) as writer:
        populate(writer)
    before = zookeeper_tree(kazoo)
    code, out, err = run(capsys, *(a.format(url=url) for a in argv))
    assert code in (0, 1), err  # check reports the (dead) broker's violations with 1
    assert out
    assert zookeeper_tree(kazoo) == before


@pytest.mark.parametrize("argv", READ_ONLY_COMMANDS, ids=COMMAND_IDS)
def test_read_only_commands_on_a_fresh_redis_prefix_create_no_key(
    capsys: pytest.CaptureFixture[str], redis_server: RedisServer, argv: list[str]
) -> None:
    """On Redis a fresh prefix got the key ``{prefix}:n:/`` (and session keys) from a look."""
    prefix = unique("fresh")
    url = redis_server.url(prefix=prefix)
    before = redis_keys(redis_server)
    code, _out, err = run(capsys, *(a.format(url=url) for a in argv))
    assert code != 0
    (line,) = err.strip().splitlines()
    assert f"no store with prefix {prefix!r} (nothing was created)" in line
    assert redis_keys(redis_server) == before


@pytest.mark.parametrize("argv", READ_ONLY_COMMANDS, ids=COMMAND_IDS)
def test_read_only_commands_leave_a_redis_store_byte_for_byte_unchanged(
    capsys: pytest.CaptureFixture[str], redis_server: RedisServer, argv: list[str]
) -> None:
    url = redis_server.url(prefix=unique("kafka"))
    with open_store(url) as writer:
        populate(writer)
    before = redis_keys(redis_server)
    code, out, err = run(capsys, *(a.format(url=url) for a in argv))
    assert code in (0, 1), err
    assert out
    assert redis_keys(redis_server) == before


# -- the read-only store on real servers -----------------------------------------------------------


@pytest.fixture(params=["zookeeper", "redis"])
def backend_url(
    request: pytest.FixtureRequest, zookeeper: StandaloneZooKeeper, redis_server: RedisServer
) -> str:
    if request.param == "zookeeper":
        return f"zookeeper://{zookeeper.hosts}/{unique('ro')}"
    return redis_server.url(prefix=unique("ro"))


def test_a_read_only_store_reads_and_watches_and_refuses_every_write(backend_url: str) -> None:
    writer = open_store(backend_url)
    reader: MetadataStore | None = None
    try:
        writer.create("/a/b", b"1", make_parents=True)
        reader = open_store(backend_url, read_only=True)
        assert reader.read_only
        assert reader.get("/a/b")[0] == b"1"
        assert reader.children("/a") == ["b"]
        seen: list[bytes | None] = []
        lock = threading.Lock()

        def on_data(event: Any) -> None:
            with lock:
                seen.append(event.data)

        reader.watch_data("/a/b", on_data)
        writer.set("/a/b", b"2")
        wait_for(lambda: seen[-1:] == [b"2"], 20, "the read-only store's watch to see the change")
        refused: list[Callable[[MetadataStore], Any]] = [
            lambda s: s.create("/c", b""),
            lambda s: s.set("/a/b", b"3"),
            lambda s: s.delete("/a/b"),
            lambda s: s.delete("/a", recursive=True),
            lambda s: s.commit([Create("/d")]),
            lambda s: s.apply([Create("/e")]),
            lambda s: s.ensure_path("/f/g"),
        ]
        for write in refused:
            with pytest.raises(ReadOnlyError, match="read-only"):
                write(reader)
        assert writer.get("/a/b")[0] == b"2"
        assert writer.children("/") == ["a"]
    finally:
        if reader is not None:
            reader.close()
        writer.close()


def test_a_read_only_open_of_a_missing_root_is_a_no_node_error(backend_url: str) -> None:
    with pytest.raises(NoNodeError, match=r"\(nothing was created\)"):
        open_store(backend_url, read_only=True)
    with open_store(backend_url) as writer:  # ... and nothing half-made was left in the way
        assert writer.children("/") == []


def test_a_redis_user_without_write_permission_can_open_read_only(
    redis_server: RedisServer,
) -> None:
    """Opening a session is a write, so a read-only ACL user could not look at all before."""
    prefix = unique("acl")
    with open_store(redis_server.url(prefix=prefix)) as writer:
        writer.create("/seen", b"yes")
    password = "reader-Pw-1"
    with redis_server.client() as admin:
        admin.execute_command(
            "ACL", "SETUSER", "looker", "on", f">{password}", "~*", "&*", "+@read",
            "+@connection", "+@scripting", "-@write",
        )  # fmt: skip
    url = redis_server.url(prefix=prefix, username="looker", password=password)
    with open_store(url, read_only=True) as reader:
        assert reader.get("/seen")[0] == b"yes"


# -- credentials never leak ----------------------------------------------------------------------


def hidden(text: str, password: str) -> bool:
    return not any(form in text for form in secret_forms(password))


@pytest.mark.parametrize("escape", ["%5C", "%09", "%5C%5C%09%27%22"])
def test_credential_escaped_in_kazoos_auth_packet_log_is_redacted(
    zookeeper: StandaloneZooKeeper, caplog: pytest.LogCaptureFixture, escape: str
) -> None:
    """With DEBUG logging a ZooKeeper password holding ``%5C`` or ``%09`` appeared escaped in
    kazoo's Auth packet log line (``auth='alice:bs\\\\\\\\pw-...'``): redaction missed it."""
    token = uuid.uuid4().hex[:10]
    encoded = f"bs{escape}pw-{token}"
    password = f"bs{escape.replace('%5C', chr(92)).replace('%09', chr(9))}pw-{token}"
    password = password.replace("%27", "'").replace("%22", '"')
    caplog.set_level(1)  # kazoo's per-request BLATHER lines included
    url = f"zookeeper://alice:{encoded}@{zookeeper.hosts}/{unique('auth')}"
    texts: list[str] = []
    with open_store(url) as store:
        store.create("/a", b"")
        texts += [repr(store), str(store.url), repr(store.config)]  # type: ignore[attr-defined]
        with pytest.raises(StoreError) as info:
            store.get("/missing")
        texts.append(str(info.value))
    with open_store(url, read_only=True) as reader:
        assert reader.exists("/a") is not None
    auth_lines = [r.getMessage() for r in caplog.records if "Auth(" in r.getMessage()]
    assert len(auth_lines) >= 2, "kazoo's Auth packet log lines were expected"
    assert all("auth='***'" in line for line in auth_lines)
    texts += [r.getMessage() for r in caplog.records]
    assert [t for t in texts if not hidden(t, password) or token in t] == []
    assert any("alice:***@" in t for t in texts)


def test_credential_with_escapes_never_appears_in_redis_errors_or_logs(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The same password shapes on Redis: not in logs, errors, reprs; not after a wrong one."""
    token = uuid.uuid4().hex[:10]
    password = f"bs\\pw\t'-{token}"
    with redis_server.client() as admin:
        admin.execute_command("ACL", "SETUSER", "alice", "on", f">{password}", "~*", "&*", "+@all")
    caplog.set_level(logging.DEBUG)
    prefix = unique("secret")
    url = redis_server.url(prefix=prefix, username="alice", password=password)
    texts: list[str] = []
    with open_store(url) as store:
        store.create("/a", b"")
        texts += [repr(store), str(store.url), repr(store.config)]  # type: ignore[attr-defined]
    wrong = redis_server.url(prefix=prefix, username="alice", password=password + "x")
    with pytest.raises(AuthFailedError) as failed:
        open_store(wrong, read_only=True)
    texts += [str(failed.value), repr(failed.value), caplog.text]
    assert [t for t in texts if not hidden(t, password) or token in t] == []


# -- connect failures: one line, fast --------------------------------------------------------------


@pytest.mark.parametrize(
    ("scheme", "argv"),
    [
        ("zookeeper", ["group", "describe", "--group", "g"]),
        ("zookeeper", ["tree"]),
        ("redis", ["cluster", "check"]),
    ],
)
def test_connect_failures_are_one_line_after_a_short_stated_timeout(
    scheme: str, argv: list[str]
) -> None:
    """``coordkit group describe --store zookeeper://127.0.0.1:<closed port>/x`` waited 15 s and
    printed 20 × ``Connection dropped: socket connection error: Connection refused``."""
    port = free_port()  # bound once and released: nothing listens there
    store = {
        "zookeeper": f"zookeeper://127.0.0.1:{port}/x",
        "redis": f"redis://127.0.0.1:{port}/0",
    }[scheme]
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-c", "from coordkit.cli import main; main()", *argv, "--store", store],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    elapsed = time.monotonic() - started
    assert result.returncode != 0
    assert result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert "Connection dropped" not in line
    assert f"127.0.0.1:{port}" in line
    if scheme == "zookeeper":
        assert "within 5s (connect_timeout)" in line
        assert "Connection refused" in line
    assert elapsed < 15, f"took {elapsed:.1f}s"


def test_a_connect_timeout_error_names_the_last_attempt(caplog: pytest.LogCaptureFixture) -> None:
    """kazoo's per-attempt warnings are logged at DEBUG (kept out of a terminal at the default
    level), and the error says what the last attempt met."""
    caplog.set_level(logging.DEBUG)
    port = free_port()
    started = time.monotonic()
    with pytest.raises(ConnectionLossError) as info:
        open_store(f"zookeeper://127.0.0.1:{port}/x?connect_timeout=1", read_only=True)
    assert time.monotonic() - started < 5
    assert "within 1s (connect_timeout); last attempt:" in str(info.value)
    kazoo_records = [r for r in caplog.records if r.name.startswith("coordkit.zookeeper.kazoo")]
    assert kazoo_records
    assert all(r.levelno < logging.WARNING for r in kazoo_records)
    assert any("Connection refused" in r.getMessage() for r in kazoo_records)


def test_no_store_state_leaks_from_a_failed_read_only_open(zookeeper: StandaloneZooKeeper) -> None:
    """A failed read-only open leaves no client behind (its session is closed)."""
    url = f"zookeeper://{zookeeper.hosts}/{unique('absent')}"
    with pytest.raises(NoNodeError):
        open_store(url, read_only=True)
    with open_store(url) as store:  # the ordinary open still creates the chroot
        assert store.state is SessionState.CONNECTED
        assert store.children("/") == []

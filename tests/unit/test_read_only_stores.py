"""Issue 12: read-only stores, and the read-only commands on the memory store.

``open_store(url, read_only=True)`` creates nothing and refuses every write; ``coordkit tree``,
``coordkit group describe`` and ``coordkit cluster check`` open their store that way, so they
leave it exactly as they found it. (ZooKeeper and Redis: ``tests/faults/test_secrets_and_read_only``.)
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from coordkit import hookimpl
from coordkit.errors import InvalidURLError, UnsupportedError
from coordkit.kafka import layout
from coordkit.plugins import PluginManager, open_store
from coordkit.store import Check, Create, Delete, MetadataStore, ReadOnlyError, SetData
from coordkit_memory import MemoryServer, MemoryStore
from harness.kafka_tree import populate, run

READ_ONLY_COMMANDS = [
    ["tree", "--store", "{url}"],
    ["tree", "--store", "{url}", "--format", "json"],
    ["group", "describe", "--store", "{url}", "--group", "g"],
    ["cluster", "check", "--store", "{url}"],
]


def server_state(server: MemoryServer) -> tuple[Any, ...]:
    """Everything a write could change: every node's data and stat, the zxid counter."""
    nodes = {path: (node.data, node.stat()) for path, node in server._nodes.items()}
    return nodes, server._zxid


@pytest.fixture
def named() -> Iterator[str]:
    name = f"read-only-{uuid.uuid4().hex[:8]}"
    yield name
    MemoryServer.discard(name)


WRITES: list[tuple[str, Callable[[MetadataStore], Any]]] = [
    ("create", lambda s: s.create("/new", b"")),
    ("create with parents", lambda s: s.create("/a/b/c", b"", make_parents=True)),
    ("ephemeral create", lambda s: s.create("/eph", b"", ephemeral=True)),
    ("set", lambda s: s.set("/brokers/ids/0", b"x")),
    ("delete", lambda s: s.delete("/brokers/ids/0")),
    ("recursive delete", lambda s: s.delete("/brokers", recursive=True)),
    ("commit", lambda s: s.commit([Check("/brokers", 0), SetData("/brokers", b"x")])),
    ("transaction", lambda s: s.transaction().create("/tx").commit()),
    ("apply", lambda s: s.apply([Create("/p"), Delete("/brokers/ids/0")])),
    ("ensure_path", lambda s: s.ensure_path("/x/y")),
]


@pytest.mark.parametrize(("what", "write"), WRITES, ids=[w for w, _ in WRITES])
def test_every_write_on_a_read_only_memory_store_is_refused(
    named: str, what: str, write: Callable[[MetadataStore], Any]
) -> None:
    """Read-only stores refuse every write method with a clear error; nothing changes."""
    writer = open_store(f"memory://{named}")
    populate(writer)
    server = MemoryServer.existing(named)
    assert server is not None
    before = server_state(server)
    with open_store(f"memory://{named}", read_only=True) as reader:
        assert reader.read_only
        assert reader.get(layout.broker_path(0))[0].startswith(b"{")
        with pytest.raises(ReadOnlyError) as info:
            write(reader)
        assert "read-only" in str(info.value)
        assert f"memory://{named}" in str(info.value)
    writer.close()
    assert server_state(server) == before


def test_a_read_only_open_of_an_unknown_memory_name_creates_nothing(named: str) -> None:
    """Reading ``memory://NAME`` that no session opened shows an empty tree and registers no
    server: a later writer still starts from nothing of the reader's making."""
    with open_store(f"memory://{named}", read_only=True) as reader:
        assert reader.children("/") == []
    assert MemoryServer.existing(named) is None


def test_read_only_is_not_a_session_write(named: str) -> None:
    """Opening and closing a read-only session consumes no zxid (ZooKeeper-style counters stay
    where the last write left them)."""
    writer = open_store(f"memory://{named}")
    writer.create("/a", b"")
    server = MemoryServer.existing(named)
    assert server is not None
    zxid = server._zxid
    open_store(f"memory://{named}", read_only=True).close()
    assert server._zxid == zxid
    writer.close()


# -- read-only through the plugin manager ------------------------------------------------------


class OldStylePlugin:
    """A third-party store plugin written before ``read_only`` existed."""

    def __init__(self) -> None:
        self.opened: list[dict[str, Any]] = []

    @hookimpl
    def coordkit_register_stores(self, register: Callable[[str, Any], None]) -> None:
        def strict(url: Any, *, session_timeout: float = 1.0) -> Any:
            self.opened.append({"session_timeout": session_timeout})
            return ("store", url.scheme)

        register("strict", strict)


class IgnoringPlugin:
    """A plugin whose factory takes any option and ignores ``read_only``."""

    def __init__(self) -> None:
        self.closed = 0

    @hookimpl
    def coordkit_register_stores(self, register: Callable[[str, Any], None]) -> None:
        plugin = self

        class Store:
            read_only = False

            def close(self) -> None:
                plugin.closed += 1

        register("lax", lambda url, **options: Store())


def test_factories_that_predate_read_only_keep_working_and_refuse_it_clearly() -> None:
    """``read_only`` reaches a factory only when true: an old factory still opens stores, and a
    read-only open of its scheme is an UnsupportedError (a CoordkitError: exit status 2)."""
    manager = PluginManager(autoload=False)
    old = OldStylePlugin()
    manager.register(old, name="old-style")
    assert manager.store_for("strict://h/x", session_timeout=2.0) == ("store", "strict")
    assert old.opened == [{"session_timeout": 2.0}]
    with pytest.raises(UnsupportedError) as info:
        manager.store_for("strict://h/x", read_only=True)
    assert "'strict'" in str(info.value)
    assert "'old-style'" in str(info.value)
    assert "read-only" in str(info.value)
    assert old.opened == [{"session_timeout": 2.0}]  # never called with it


def test_a_factory_that_ignores_read_only_is_refused_and_its_store_closed() -> None:
    manager = PluginManager(autoload=False)
    lax = IgnoringPlugin()
    manager.register(lax, name="lax-plugin")
    with pytest.raises(UnsupportedError, match="does not report read_only"):
        manager.store_for("lax://h", read_only=True)
    assert lax.closed == 1


def test_built_in_factories_take_read_only() -> None:
    manager = PluginManager(autoload=False)
    with manager.store_for("memory://", read_only=True) as store:
        assert store.read_only
    with manager.store_for("memory://") as store:
        assert not store.read_only
    with pytest.raises(TypeError):
        manager.store_for("memory://", read_only="yes")


# -- the commands --------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", READ_ONLY_COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_read_only_commands_leave_a_memory_store_unchanged(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    named: str,
    argv: list[str],
) -> None:
    """``coordkit tree``, ``group describe`` and ``cluster check`` wrote to the store they looked
    at (a missing chroot or root was created); they now open it read-only and, on memory, change
    nothing at all."""
    url = f"memory://{named}"
    writer = open_store(url)
    populate(writer)
    server = MemoryServer.existing(named)
    assert server is not None
    before = server_state(server)
    sessions: list[bool] = []
    connect = MemoryStore.connect

    def recording(server_: MemoryServer, **options: Any) -> Any:
        sessions.append(options.get("read_only", False))
        return connect(server_, **options)

    monkeypatch.setattr(MemoryStore, "connect", recording)
    code, out, err = run(capsys, *(a.format(url=url) for a in argv))
    assert code in (0, 1), err  # check reports violations with 1
    assert out
    assert sessions == [True]  # one session, opened read-only
    assert server_state(server) == before
    writer.close()


@pytest.mark.parametrize("argv", READ_ONLY_COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_read_only_commands_on_an_unknown_memory_name_create_nothing(
    capsys: pytest.CaptureFixture[str], named: str, argv: list[str]
) -> None:
    """A mistyped ``memory://NAME`` is not left behind as a new (empty) store."""
    run(capsys, *(a.format(url=f"memory://{named}") for a in argv))
    assert MemoryServer.existing(named) is None


# -- bad URLs on the command line ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("store", "secret", "named"),
    [
        ("bob:Zq9sEcReT@127.0.0.1:2181/x", "Zq9sEcReT", "has no scheme"),
        ("zookeeper://bob:Zq9s/EcReT@127.0.0.1:2181/x", "Zq9s", "percent-encoded"),
        ("zookeeper://bob:Zq9s%zzEcReT@127.0.0.1:2181/x", "Zq9s", "percent-escape"),
        ("redis://:Zq9s%C3EcReT@127.0.0.1:6379/0", "Zq9s", "UTF-8"),
    ],
)
def test_bad_store_urls_on_the_command_line_never_echo_the_password(
    capsys: pytest.CaptureFixture[str], store: str, secret: str, named: str
) -> None:
    """``coordkit tree --store 'bob:Zq9sEcReT@127.0.0.1:2181/x'`` echoed the password (no scheme);
    an unencoded ``/`` in it gave ``port 'Zq9s' of host 'bob' is not a number``."""
    code, out, err = run(capsys, "tree", "--store", store)
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert named in err
    assert secret not in err
    assert "***@" in err


@pytest.mark.parametrize(
    "store",
    [
        "memory://n?session_timeout=abc",
        "memory://n?session_timeout=inf",
        "zookeeper://127.0.0.1:1/x?session_timeout=inf",
        "zookeeper://127.0.0.1:1/x?session_timeout=nan",
        "zookeeper://127.0.0.1:1/x?session_timeout=-1",
        "zookeeper://127.0.0.1:1/x?session_timeout=0",
        "zookeeper://127.0.0.1:1/x?session_timeout=1e400",
        "zookeeper://127.0.0.1:1/x?session_timeout=" + "9" * 5000,
        "redis://127.0.0.1:1/0?stream_maxlen=-5",
    ],
)
def test_bad_numbers_in_store_urls_are_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], store: str
) -> None:
    """``memory://n?session_timeout=abc`` was a traceback; ``zookeeper://...?session_timeout=inf``
    (``nan``, ``-1``, ``0``, ``1e400``, huge) too, or worse, accepted. Each is one line naming the
    parameter, its value and the accepted range, exit status 2, before any connection."""
    name, _, value = store.rpartition("?")[2].partition("=")
    code, out, err = run(capsys, "tree", "--store", store)
    assert code == 2
    assert out == ""
    (line,) = err.strip().splitlines()
    assert name in line
    assert value[:20] in line
    assert "accepted: " in line
    assert len(line) < 300


def test_open_store_refuses_bad_numbers_before_opening_anything(named: str) -> None:
    with pytest.raises(InvalidURLError, match="session_timeout='abc'"):
        open_store(f"memory://{named}?session_timeout=abc")
    assert MemoryServer.existing(named) is None

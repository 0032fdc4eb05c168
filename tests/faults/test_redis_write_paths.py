"""The Redis store's wire format and write paths, against redis-py and a private redis-server
(this file needs the redis extra, so it lives with the fault tests).

Plain creates and sets take a fast path in the ops script; everything else goes through the
transaction overlay. Both must write the same records, return the same stats and share one
sequence per parent."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordkit.plugins import get_plugin_manager
from coordkit.store import Create, MetadataStore, SetData
from coordkit_redis import codec
from harness.redis_server import RedisServer


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    with RedisServer() as instance:
        yield instance


@pytest.fixture
def store(server: RedisServer, request: pytest.FixtureRequest) -> Iterator[MetadataStore]:
    opened = get_plugin_manager().store_for(server.url(prefix=f"engine-{request.node.name}"))
    yield opened
    opened.close()


def test_fast_and_transactional_creates_write_the_same_records(
    server: RedisServer, store: MetadataStore
) -> None:
    store.create("/fast", b"")
    store.create("/multi", b"")
    store.create("/fast/x", b"value")  # fast path
    store.commit([Create("/multi/x", b"value")])  # overlay
    fast_data, fast = store.get("/fast/x")
    multi_data, multi = store.get("/multi/x")
    assert fast_data == multi_data == b"value"
    for stat in (fast, multi):
        assert stat.czxid == stat.mzxid == stat.pzxid
        assert (stat.version, stat.cversion, stat.num_children, stat.ephemeral_owner) == (
            0,
            0,
            0,
            0,
        )
    for parent, child in (("/fast", fast), ("/multi", multi)):
        parent_stat = store.exists(parent)
        assert parent_stat is not None
        assert (parent_stat.cversion, parent_stat.num_children, parent_stat.pzxid) == (
            1,
            1,
            child.czxid,
        )
        assert store.children(parent) == ["x"]
    prefix = store.config.prefix  # type: ignore[attr-defined]
    with server.client() as admin:
        fields = [set(admin.hgetall(f"{{{prefix}}}:n:{p}")) for p in ("/fast/x", "/multi/x")]
    assert fields[0] == fields[1]


def test_fast_and_transactional_sets_return_the_stored_stat(store: MetadataStore) -> None:
    store.create("/n", b"0")
    fast = store.set("/n", b"one", 0)
    assert fast == store.exists("/n")
    multi = store.commit([SetData("/n", b"two!", 1)])[0]
    assert multi == store.exists("/n")
    assert (fast.version, multi.version) == (1, 2)
    assert multi.data_length == 4
    assert multi.mzxid > fast.mzxid
    assert multi.czxid == fast.czxid


def test_both_paths_share_one_sequence_per_parent(store: MetadataStore) -> None:
    store.create("/q", b"")
    store.create("/q/plain", b"")  # fast path: a creation the sequence counts
    assert store.commit([Create("/q/job-", b"", sequential=True)]) == ["/q/job-0000000001"]
    store.delete("/q/plain")  # deletions bump cversion, not the sequence
    assert store.create("/q/job-", b"", sequential=True) == "/q/job-0000000002"
    assert store.apply([Create("/q/other", b"")]) == ["/q/other"]
    assert store.create("/q/job-", b"", ephemeral=True, sequential=True) == "/q/job-0000000004"
    stat = store.exists("/q")
    assert stat is not None
    assert (stat.cversion, stat.num_children) == (6, 4)


@given(args=st.lists(st.one_of(st.binary(max_size=40), st.text(max_size=20)), max_size=8))
def test_packed_commands_match_redis_py(args: list[bytes | str]) -> None:
    from redis.connection import Connection

    command: list[bytes | str] = ["EVALSHA", *args]  # redis-py splits a command name on spaces
    expected = Connection().pack_command(*command)  # type: ignore[no-untyped-call]
    assert codec.pack_command(command) == b"".join(expected)

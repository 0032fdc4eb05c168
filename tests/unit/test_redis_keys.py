"""The Redis store's pure parts: key names and hash tags, URL settings, op encoding and reply
decoding, change-stream revisions, and the lazy import of redis-py. No server needed."""

from __future__ import annotations

import sys
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordkit.errors import (
    BadVersionError,
    DataTooLargeError,
    InvalidPathError,
    InvalidURLError,
    MissingDependencyError,
    NodeExistsError,
    StoreError,
)
from coordkit.plugins import get_plugin_manager
from coordkit.store import MAX_DATA_SIZE, Check, Create, Delete, SetData, Stat, paths
from coordkit.store.urls import StoreURL
from coordkit.store.watches import EventThread, WatchHub
from coordkit_redis import codec
from coordkit_redis.changes import ChangeFeed, format_revision, parse_revision
from coordkit_redis.config import DEFAULT_SESSION_TIMEOUT, RedisConfig
from coordkit_redis.keys import KeySpace, check_prefix
from harness.waiting import wait_for

# -- keys ----------------------------------------------------------------------------------------


def hash_tag(key: str) -> str:
    """The part of a key Redis Cluster hashes: the text between the first '{' and the next '}',
    when not empty (the cluster specification's rule); otherwise the whole key."""
    start = key.find("{")
    end = key.find("}", start + 1)
    if start == -1 or end == -1 or end == start + 1:
        return key
    return key[start + 1 : end]


def test_every_key_of_a_store_hashes_to_the_same_cluster_slot() -> None:
    keys = KeySpace("kafka-prod")
    names = [
        keys.zxid,
        keys.shard(0),
        keys.shard_of("/brokers/topics/{weird}/partitions/0"),
        keys.expiries,
        keys.sequences,
        keys.deadlines,
        keys.node("/"),
        keys.node("/brokers/topics/{weird}/partitions/0/state"),
        keys.children("/brokers/ids"),
        keys.session(4503599627370497),
        keys.ephemerals(4503599627370497),
    ]
    assert {hash_tag(name) for name in names} == {"kafka-prod"}
    assert hash_tag(KeySpace("other").node("/")) == "other"
    assert keys.node("/a") != keys.children("/a")


@pytest.mark.parametrize("prefix", ["", "a{b", "b}", "with space", "tab\t", "x" * 201])
def test_prefixes_that_would_break_the_hash_tag_are_rejected(prefix: str) -> None:
    with pytest.raises(InvalidURLError) as info:
        check_prefix(prefix)
    assert repr(prefix) in str(info.value)


# -- URLs ----------------------------------------------------------------------------------------


def config_for(url: str, **options: object) -> RedisConfig:
    return RedisConfig.from_url(StoreURL.parse(url), dict(options))


def test_url_defaults() -> None:
    config = config_for("redis://cache.internal")
    assert (config.host, config.port, config.db) == ("cache.internal", 6379, 0)
    assert config.prefix == "coordkit"
    assert config.session_timeout == DEFAULT_SESSION_TIMEOUT
    assert not config.tls


def test_url_with_acl_user_database_and_parameters() -> None:
    config = config_for(
        "redis://app:s3cr%40t@10.0.0.5:6380/3?prefix=kafka&session_timeout=4.5&stream_maxlen=50"
    )
    assert (config.host, config.port, config.db) == ("10.0.0.5", 6380, 3)
    assert (config.username, config.password) == ("app", "s3cr@t")
    assert (config.prefix, config.session_timeout, config.stream_maxlen) == ("kafka", 4.5, 50)
    kwargs = config.connection_settings()
    assert kwargs["username"] == "app"
    assert kwargs["password"] == "s3cr@t"
    assert kwargs["db"] == 3
    assert "s3cr" not in repr(config)


def test_options_override_the_url() -> None:
    config = config_for("redis://h/0?session_timeout=9", session_timeout=2, prefix="other")
    assert (config.session_timeout, config.prefix) == (2.0, "other")
    with pytest.raises(TypeError) as info:
        config_for("redis://h/0", colour="blue")
    assert "colour" in str(info.value)


def test_tls_parameters_need_rediss() -> None:
    with pytest.raises(InvalidURLError) as info:
        config_for("redis://:pw@h/0?ssl_ca_certs=/ca.pem")
    assert "ssl_ca_certs" in str(info.value)
    assert "pw" not in str(info.value).replace("://:***@", "")
    config = config_for("rediss://h/0?ssl_ca_certs=/ca.pem&ssl_cert_reqs=required")
    kwargs = config.connection_settings()
    assert kwargs["ssl"] is True
    assert kwargs["ssl_ca_certs"] == "/ca.pem"
    assert kwargs["ssl_cert_reqs"] == "required"
    unverified = config_for("rediss://h/0?ssl_cert_reqs=none").connection_settings()
    assert unverified["ssl_check_hostname"] is False


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("redis://h/0?colour=blue", "colour"),
        ("redis://h/zero", "database number"),
        ("redis://h/0?session_timeout=soon", "session_timeout"),
        ("redis://h/0?session_timeout=0", "session_timeout"),
        ("redis://h/0?stream_maxlen=0", "stream_maxlen"),
        ("redis://h/0?prefix=a{b}", "prefix"),
        ("rediss://h/0?ssl_cert_reqs=maybe", "ssl_cert_reqs"),
        ("redis://h1:1,h2:2/0", "one host"),
    ],
)
def test_bad_urls_name_what_is_wrong_without_the_password(url: str, named: str) -> None:
    secret_url = url.replace("://", "://user:topsecret@", 1)
    with pytest.raises(InvalidURLError) as info:
        config_for(secret_url)
    assert named in str(info.value)
    assert "topsecret" not in str(info.value)


def test_both_schemes_are_registered() -> None:
    stores = get_plugin_manager().stores.items
    assert {"redis", "rediss"} <= set(stores)
    assert stores["redis"].plugin == stores["rediss"].plugin


def test_missing_redis_py_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from coordkit_redis import open_redis_store

    monkeypatch.setitem(sys.modules, "redis", None)  # import redis → ImportError
    with pytest.raises(MissingDependencyError) as info:
        open_redis_store(StoreURL.parse("redis://localhost/0"))
    assert "pip install coordkit[redis]" in str(info.value)


# -- paths and ops -------------------------------------------------------------------------------

PATH_TEXT = st.text(
    alphabet=st.sampled_from(list("/ab.-_:@=+,é\x00\x01\x1f\x7f\ud7ff\ue000\ufff0 ")), max_size=12
)


@given(path=PATH_TEXT, sequential=st.booleans())
def test_fast_path_check_agrees_with_the_reference_rules(path: str, sequential: bool) -> None:
    def outcome(check: object) -> object:
        try:
            return check(path, sequential=sequential)  # type: ignore[operator]
        except InvalidPathError as exc:
            return ("invalid", exc.path)

    assert outcome(codec.check_path) == outcome(paths.validate)


def test_ops_encode_to_script_words() -> None:
    assert codec.encode_op(Create("/q/job-", b"d", ephemeral=True, sequential=True)) == (
        "c",
        "/q/job-",
        b"d",
        "es",
    )
    assert codec.encode_op(SetData("/a", b"v", 3)) == ("s", "/a", b"v", "3")
    assert codec.encode_op(Delete("/a")) == ("d", "/a", b"", "-1")
    assert codec.encode_op(Check("/a", 0)) == ("k", "/a", b"", "0")
    assert codec.create_words("/a/b", b"", False, False, make_parents=True)[3] == "p"


def test_bad_ops_fail_before_anything_is_sent() -> None:
    with pytest.raises(DataTooLargeError) as info:
        codec.encode_op(SetData("/big", b"x" * (MAX_DATA_SIZE + 1)))
    assert info.value.path == "/big"
    with pytest.raises(InvalidPathError):
        codec.encode_op(Delete("/a/"))
    with pytest.raises(InvalidPathError):
        codec.encode_op(Create("/", b""))  # the root has no parent
    with pytest.raises(TypeError):
        codec.encode_op(("create", "/a"))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        codec.encode_op(SetData("/a", "text"))  # type: ignore[arg-type]


STATS = st.builds(
    Stat,
    *[st.integers(min_value=0, max_value=2**53) for _ in range(7)],
    st.just(0),
    st.integers(min_value=0, max_value=2**53),
    st.integers(min_value=0, max_value=MAX_DATA_SIZE),
    st.integers(min_value=0, max_value=10**6),
)


def stat_text(stat: Stat) -> bytes:
    fields = [
        stat.czxid,
        stat.mzxid,
        stat.pzxid,
        stat.ctime,
        stat.mtime,
        stat.version,
        stat.cversion,
        stat.ephemeral_owner,
        stat.data_length,
        stat.num_children,
    ]
    return ",".join(map(str, fields)).encode()


@given(nodes=st.lists(st.one_of(st.none(), st.tuples(st.binary(max_size=30), STATS)), max_size=6))
def test_bulk_read_replies_decode_node_by_node(nodes: list[tuple[bytes, Stat] | None]) -> None:
    expected: list[tuple[bytes, Stat] | None] = []
    blob = b"%d\n" % len(nodes)
    for node in nodes:
        if node is None:
            blob += b"-\n"
            expected.append(None)
            continue
        data, stat = node
        import attrs

        stat = attrs.evolve(stat, data_length=len(data))
        blob += stat_text(stat) + b"\n" + data
        expected.append((data, stat))
    assert codec.nodes_from_blob(blob + b"trailing bytes are ignored") == expected


def test_op_reply_lines_become_results_or_errors() -> None:
    assert codec.result_of(b"P/q/job-0000000007") == "/q/job-0000000007"
    stat = codec.result_of(b"S5,9,5,1700000000000,1700000000001,2,0,4503599627370497,3,0")
    assert isinstance(stat, Stat)
    assert (stat.version, stat.ephemeral_owner, stat.data_length) == (2, 4503599627370497, 3)
    assert codec.result_of(b"K") is None
    error = codec.result_of(b"ENODEEXISTS\t/a\tnode already exists", 4)
    assert isinstance(error, NodeExistsError)
    assert (error.path, error.op_index, error.message) == ("/a", 4, "node already exists")
    failed = codec.multi_error(b"!1\tBADVERSION\t/e\texpected version 0, node is at 2")
    assert isinstance(failed, BadVersionError)
    assert (failed.op_index, failed.path) == (1, "/e")
    odd = codec.result_of(b"?what")
    assert type(odd) is StoreError


# -- the change stream ---------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["0-0", "1700000000000-0", "1700000000000-42"])
def test_revisions_round_trip_and_order_like_stream_ids(text: str) -> None:
    assert format_revision(parse_revision(text)) == text
    assert parse_revision(text.encode()) == parse_revision(text)
    assert parse_revision("1700000000000-10") > parse_revision("1700000000000-9")


def test_the_feed_notifies_only_watched_paths_and_reports_expired_sessions() -> None:
    tree = {"/w": b"1", "/other": b"2"}
    reads: list[str] = []
    lock = threading.Lock()

    def read_data(path: str) -> tuple[bytes, Stat] | None:
        with lock:
            reads.append(path)
            data = tree.get(path)
        if data is None:
            return None
        return data, Stat(1, len(reads), 1, 0, 0, 0, 0, 0, 0, len(data), 0)

    events = EventThread("test-feed")
    hub = WatchHub(events, read_data, lambda path: None)
    expired: list[int] = []
    feed = ChangeFeed(KeySpace("t"), hub, expired.append)
    delivered: list[bytes | None] = []
    hub.add_data_watch("/w", lambda event: delivered.append(event.data))
    wait_for(lambda: delivered == [b"1"], what="initial state")
    tree["/w"] = b"changed"
    feed.dispatch(
        [
            (b"1700000000000-0", {b"z": b"3", b"e": b"D\n/other\nC\n/w"}),
            (b"1700000000000-1", {b"z": b"4", b"e": b"D\n/w/x\nD\n/w"}),
            (b"1700000000000-0", {b"z": b"4", b"e": b"X\n4503599627370497"}),  # expiries
        ]
    )
    wait_for(lambda: delivered == [b"1", b"changed"], what="the change")
    events.flush()
    assert "/other" not in reads
    assert expired == [4503599627370497]
    events.stop()


def test_a_missing_redis_server_fails_with_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from harness import redis_server

    monkeypatch.setattr("shutil.which", lambda name: None)
    with pytest.raises(redis_server.RedisServerMissingError) as info:
        redis_server.RedisServer()
    assert "apt-get install redis-server" in str(info.value)

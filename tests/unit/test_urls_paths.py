from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordkit.errors import InvalidPathError, InvalidURLError
from coordkit.store import paths
from coordkit.store.urls import StoreURL


def test_zookeeper_url_with_hosts_chroot_and_credentials() -> None:
    url = StoreURL.parse("zookeeper://alice:s3cr%40t@zk1:2181,zk2:2182,zk3/kafka?session_timeout=6")
    assert url.scheme == "zookeeper"
    assert url.hosts == (("zk1", 2181), ("zk2", 2182), ("zk3", None))
    assert url.path == "/kafka"
    assert (url.username, url.password) == ("alice", "s3cr@t")
    assert url.params == {"session_timeout": "6"}
    assert url.host_string == "zk1:2181,zk2:2182,zk3"


def test_secrets_never_show_in_repr_str_or_redacted() -> None:
    url = StoreURL.parse("redis://:hunter2@localhost:6379/0")
    for text in (repr(url), str(url), url.redacted()):
        assert "hunter2" not in text
    assert url.redacted() == "redis://:***@localhost:6379/0"


def test_memory_url_and_ipv6() -> None:
    assert StoreURL.parse("memory://").hosts == ()
    assert StoreURL.parse("memory://demo").host_string == "demo"
    assert StoreURL.parse("redis://[::1]:6380/2").hosts == (("::1", 6380),)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("localhost:2181", "no scheme"),
        ("zookeeper://host:notaport/x", "not a number"),
        ("zookeeper://host:70000", "out of range"),
        ("9bad://x", "not valid"),
    ],
)
def test_bad_urls_say_what_is_wrong(text: str, problem: str) -> None:
    with pytest.raises(InvalidURLError, match=problem):
        StoreURL.parse(text)


def test_bad_url_error_hides_password() -> None:
    with pytest.raises(InvalidURLError) as info:
        StoreURL.parse("zookeeper://bob:topsecret@host:bad/x")
    assert "topsecret" not in str(info.value)


def test_path_helpers() -> None:
    assert paths.parent("/a/b") == "/a"
    assert paths.parent("/a") == "/"
    assert paths.basename("/a/b") == "b"
    assert paths.join("/", "a", "b") == "/a/b"
    assert paths.ancestors("/a/b/c") == ["/a", "/a/b"]
    assert paths.sequential_name("/q/job-", 42) == "/q/job-0000000042"
    assert paths.validate("/q/", sequential=True) == "/q/"
    with pytest.raises(InvalidPathError):
        paths.parent("/")
    with pytest.raises(InvalidPathError, match=r"U\+E000"):
        paths.validate("/a\ue000")


_PIECES = ["/", "a", "b0", ".", "..", "\n", "x.y", "-", "é", "\x00", " ", "", "zk:1"]


@given(st.lists(st.lists(st.sampled_from(_PIECES), max_size=6).map("".join), max_size=6))
def test_all_plain_only_vouches_for_paths_validate_accepts(batch: list[str]) -> None:
    """One match over a batch says True only when every path is valid (and never when a path
    holds the newline that joins them); False is allowed for valid but unusual paths, which
    a writer then checks one by one."""

    def valid(path: str) -> bool:
        try:
            paths.validate(path)
        except InvalidPathError:
            return False
        return True

    if paths.all_plain(batch):
        assert all(valid(p) for p in batch)
    plain = [p for p in batch if paths._PLAIN.fullmatch(p)]
    assert paths.all_plain(plain)


def test_all_plain_refuses_a_path_hiding_two() -> None:
    assert paths.all_plain(["/a/b", "/c"])
    assert not paths.all_plain(["/a\n/c"])
    assert not paths.all_plain(["/a/..", "/c"])
    assert not paths.all_plain(["/a/.."])
    assert not paths.all_plain(["/a/..\n/b"])
    assert not paths.all_plain(["/a/"])
    assert paths.all_plain([])

from __future__ import annotations

import pytest

from coordkit import paths
from coordkit.errors import InvalidPathError, InvalidURLError
from coordkit.urls import StoreURL


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

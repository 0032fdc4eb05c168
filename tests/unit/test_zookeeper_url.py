"""The ZooKeeper store's URL parsing, ACLs, credential redaction and error mapping (no server)."""

from __future__ import annotations

import logging
import sys

import pytest
from kazoo import exceptions as kz
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.security import Permissions

from coordkit.errors import (
    AuthFailedError,
    BadVersionError,
    ConnectionLossError,
    InvalidURLError,
    MissingDependencyError,
    NoAuthError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
    StoreClosedError,
    StoreError,
)
from coordkit.plugins import get_plugin_manager
from coordkit.store import Check, Create, Delete, SetData
from coordkit.store.urls import StoreURL
from coordkit_zookeeper import open_zookeeper_store
from coordkit_zookeeper.config import ZooKeeperConfig
from coordkit_zookeeper.errors import first_failure, translate, translate_op
from coordkit_zookeeper.security import RedactingLogger, auth_data, node_acls


def config(url: str, **options: object) -> ZooKeeperConfig:
    return ZooKeeperConfig.from_url(StoreURL.parse(url), **options)


# -- URLs ------------------------------------------------------------------------------------------


def test_hosts_chroot_and_credentials() -> None:
    parsed = config("zookeeper://alice:s3cr%40t@zk1:2181,zk2:2182,zk3/kafka/prod?session_timeout=6")
    assert parsed.hosts == (("zk1", 2181), ("zk2", 2182), ("zk3", 2181))
    assert parsed.chroot == "/kafka/prod"
    assert parsed.host_string == "zk1:2181,zk2:2182,zk3:2181/kafka/prod"
    assert parsed.digest_credential == "alice:s3cr@t"
    assert parsed.session_timeout == 6.0
    assert parsed.request_timeout == 8.0  # the session timeout plus a margin
    assert parsed.tls is None


def test_no_chroot_and_ipv6_host() -> None:
    parsed = config("zookeeper://[::1]:2281")
    assert parsed.chroot == ""
    assert parsed.host_string == "[::1]:2281"
    assert config("zookeeper://h:1/").chroot == ""


def test_open_options_override_url_parameters() -> None:
    parsed = config("zookeeper://h:1/x?session_timeout=6", session_timeout=3, request_timeout=1.5)
    assert (parsed.session_timeout, parsed.request_timeout) == (3.0, 1.5)


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("zookeeper:///chroot", "no host"),
        ("zookeeper://h:1/x?sesion_timeout=3", "unknown parameter.*sesion_timeout"),
        ("zookeeper://h:1/x?session_timeout=soon", "session_timeout='soon' is not a number"),
        ("zookeeper://h:1/x?connect_timeout=0", "connect_timeout must be positive"),
        ("zookeeper://h:1/bad//chroot", "chroot '/bad//chroot' is not a valid node path"),
        ("zookeeper://alice@h:1/x", "needs both a user name and a password"),
        ("zookeeper://:pw@h:1/x", "needs both a user name and a password"),
        ("zookeeper://h:1/x?ca=/tmp/ca.pem", "ca given without tls=true"),
        ("zookeeper://h:1/x?tls=maybe", "tls='maybe' is not a boolean"),
        ("zookeeper://h:1/x?tls=true&cert=/c.pem", "needs both cert= and key="),
        (
            "zookeeper://h:1/x?tls=true&verify=false&check_hostname=true",
            "check_hostname=true needs verify=true",
        ),
    ],
)
def test_bad_urls_name_the_problem(url: str, problem: str) -> None:
    with pytest.raises(InvalidURLError, match=problem):
        config(url)


def test_bad_url_errors_never_show_the_password() -> None:
    with pytest.raises(InvalidURLError) as info:
        config("zookeeper://alice:topsecret@h:1/x?bogus=1")
    assert "topsecret" not in str(info.value)
    assert "alice:***@" in str(info.value)


def test_unknown_open_option_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="sesion_timeout"):
        config("zookeeper://h:1/x", sesion_timeout=3)


def test_tls_parameters() -> None:
    parsed = config(
        "zookeeper://h:2281/x?tls=true&ca=/etc/zk/ca.pem&cert=/etc/zk/c.pem&key=/etc/zk/c.key&check_hostname=yes",
        keyfile_password="k3y-pass",
    )
    tls = parsed.tls
    assert tls is not None
    assert (tls.ca, tls.cert, tls.key, tls.verify, tls.check_hostname) == (
        "/etc/zk/ca.pem",
        "/etc/zk/c.pem",
        "/etc/zk/c.key",
        True,
        True,
    )
    assert "k3y-pass" not in repr(tls)
    assert "k3y-pass" in parsed.secrets
    insecure = config("zookeeper://h:2281/x?tls=1&verify=false").tls
    assert insecure is not None
    assert not insecure.verify


def test_config_repr_hides_the_password() -> None:
    parsed = config("zookeeper://alice:hunter2@h:1/x")
    assert "hunter2" not in repr(parsed)
    assert set(parsed.secrets) == {"alice:hunter2", "hunter2"}


# -- authentication and ACLs -----------------------------------------------------------------------


def test_credentials_give_the_creator_all_and_world_read() -> None:
    parsed = config("zookeeper://alice:hunter2@h:1/x")
    assert auth_data(parsed) == [("digest", "alice:hunter2")]
    owner, world = node_acls(parsed)("/brokers/topics/t")
    # ZooKeeper's "auth" id: the server puts the session's identity (digest:alice:<hash>) there.
    assert (owner.id.scheme, owner.id.id) == ("auth", "")
    assert owner.perms == Permissions.ALL
    assert (world.id.scheme, world.id.id, world.perms) == ("world", "anyone", Permissions.READ)


def test_without_credentials_nodes_are_open() -> None:
    parsed = config("zookeeper://h:1/x")
    assert auth_data(parsed) == []
    (acl,) = node_acls(parsed)("/config/users/alice")
    assert (acl.id.scheme, acl.perms) == ("world", Permissions.ALL)


def test_redacting_logger_hides_secrets_in_formatted_messages(
    caplog: pytest.LogCaptureFixture,
) -> None:
    target = logging.getLogger("coordkit.test.redaction")
    adapter = RedactingLogger(target, ("alice:hunter2", "hunter2"))
    with caplog.at_level(1, logger="coordkit.test.redaction"):
        adapter.debug(
            "Sending request(xid=%s): %s",
            -4,
            "Auth(auth_type=0, scheme='digest', auth='alice:hunter2')",
        )
        adapter.log(5, "password %s again", "hunter2")
        adapter.warning("no secrets here: %d", 7)
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "Sending request(xid=-4): Auth(auth_type=0, scheme='digest', auth='***')",
        "password *** again",
        "no secrets here: 7",
    ]


# -- errors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (kz.NoNodeError, NoNodeError),
        (kz.NodeExistsError, NodeExistsError),
        (kz.BadVersionError, BadVersionError),
        (kz.NotEmptyError, NotEmptyError),
        (kz.NoChildrenForEphemeralsError, NoChildrenForEphemeralsError),
        (kz.NoAuthError, NoAuthError),
        (kz.AuthFailedError, AuthFailedError),
        (kz.SessionExpiredError, SessionExpiredError),
        (kz.ConnectionLoss, ConnectionLossError),
        (kz.OperationTimeoutError, ConnectionLossError),
        (KazooTimeoutError, ConnectionLossError),
        (kz.ConnectionClosedError, StoreClosedError),
        (kz.MarshallingError, StoreError),
    ],
)
def test_kazoo_errors_become_coordkit_errors(
    raised: type[Exception], expected: type[StoreError]
) -> None:
    error = translate(raised(), path="/a/b", action="set")
    assert type(error) is expected
    assert error.path == "/a/b"


def test_error_messages_name_what_failed() -> None:
    assert "parent /a does not exist" in str(
        translate(kz.NoNodeError(), path="/a/b", action="create")
    )
    assert "parent /q does not exist" in str(
        translate(kz.NoNodeError(), path="/q/", action="create", sequential=True)
    )
    assert "expected version 3" in str(translate_op(kz.BadVersionError(), SetData("/v", b"", 3)))
    assert "not authorised to delete" in str(translate_op(kz.NoAuthError(), Delete("/v")))
    assert "parent /e is ephemeral" in str(
        translate_op(kz.NoChildrenForEphemeralsError(), Create("/e/c"))
    )


def test_connection_errors_while_closing_mean_the_store_is_closed() -> None:
    assert (
        type(translate(kz.ConnectionLoss(), path=None, action="get", closing=True))
        is StoreClosedError
    )
    assert type(translate(kz.NoNodeError(), path="/x", action="get", closing=True)) is NoNodeError


def test_first_failure_skips_rollback_markers() -> None:
    results: list[object] = [kz.RolledBackError(), kz.BadVersionError(), kz.RuntimeInconsistency()]
    assert first_failure(results) == 1
    assert first_failure(["/a", True]) is None
    assert type(translate_op(results[1], Check("/c", 1))) is BadVersionError  # type: ignore[arg-type]


# -- plugin wiring ---------------------------------------------------------------------------------


def test_zookeeper_scheme_is_registered() -> None:
    assert "zookeeper" in get_plugin_manager().stores


def test_missing_kazoo_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "kazoo", None)  # import kazoo now raises ImportError
    with pytest.raises(MissingDependencyError, match=r"pip install coordkit\[zookeeper\]"):
        open_zookeeper_store(StoreURL.parse("zookeeper://127.0.0.1:1/x"))

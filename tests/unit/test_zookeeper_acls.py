"""The ZooKeeper store's node ACLs as Kafka's ``zookeeper.set.acl`` gives them, its SASL identity
from the URL or a JAAS file, and how those are refused (no server: tests/security has the
servers and Kafka beside them)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from kazoo.security import Permissions

from coordkit.cli import cli
from coordkit.errors import InvalidURLError, MissingDependencyError
from coordkit.serve.broker_config import BrokerConfigError, parse_broker_configs, store_url_for
from coordkit.store.urls import StoreURL
from coordkit.testing.servers.zookeeper_sasl import write_client_jaas, write_server_jaas
from coordkit_zookeeper import open_zookeeper_store
from coordkit_zookeeper.config import ZooKeeperConfig
from coordkit_zookeeper.jaas import JaasError, read_digest_login
from coordkit_zookeeper.security import (
    RedactingLogger,
    auth_data,
    default_acls,
    node_acls,
    sasl_options,
    sensitive_path,
)

SECRET = "Zq-s3cret-Zq"
WORLD_READ = ("world", "anyone", Permissions.READ)
CREATOR_ALL = ("auth", "", Permissions.ALL)
WORLD_ALL = ("world", "anyone", Permissions.ALL)


def config(url: str, **options: object) -> ZooKeeperConfig:
    return ZooKeeperConfig.from_url(StoreURL.parse(url), **options)


def shape(acls: list[Any]) -> list[tuple[str, str, int]]:
    return [(acl.id.scheme, acl.id.id, acl.perms) for acl in acls]


# -- Kafka's ZkData.defaultAcls -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/brokers/topics/t", [CREATOR_ALL, WORLD_READ]),
        ("/brokers/ids/1", [CREATOR_ALL, WORLD_READ]),
        ("/config/topics/t", [CREATOR_ALL, WORLD_READ]),
        ("/config/changes/config_change_0000000000", [CREATOR_ALL, WORLD_READ]),
        ("/kafka-acl/Topic/t", [CREATOR_ALL, WORLD_READ]),
        ("/controller", [CREATOR_ALL, WORLD_READ]),
        ("/config", [CREATOR_ALL, WORLD_READ]),
        # Kafka's SensitiveRootPaths, by a prefix test on the text.
        ("/config/users", [CREATOR_ALL]),
        ("/config/users/alice", [CREATOR_ALL]),
        ("/config/users/alice/clients/c", [CREATOR_ALL]),
        ("/config/brokers/1", [CREATOR_ALL]),
        ("/config/brokers/<default>", [CREATOR_ALL]),
        ("/delegation_token/tokens/abc", [CREATOR_ALL]),
        ("/delegation_token", [CREATOR_ALL, WORLD_READ]),
        ("/delegation_token/token_changes", [CREATOR_ALL, WORLD_READ]),
        # The old consumer path stays open (its children do not).
        ("/consumers", [WORLD_ALL]),
        ("/consumers/g", [CREATOR_ALL, WORLD_READ]),
    ],
)
def test_secure_acls_follow_kafkas_default_acls(
    path: str, expected: list[tuple[str, str, int]]
) -> None:
    assert shape(default_acls(True, path)) == expected
    assert shape(node_acls(config(f"zookeeper://u:{SECRET}@h:1/c?set_acl=true"))(path)) == expected


@pytest.mark.parametrize("path", ["/brokers/ids/1", "/config/users/alice", "/consumers"])
def test_without_set_acl_every_node_is_open(path: str) -> None:
    assert shape(default_acls(False, path)) == [WORLD_ALL]
    parsed = config(f"zookeeper://u:{SECRET}@h:1/c?set_acl=false")
    assert not parsed.set_acl
    assert shape(node_acls(parsed)(path)) == [WORLD_ALL]


def test_sensitive_paths_are_kafkas() -> None:
    assert sensitive_path("/config/users")
    assert sensitive_path("/config/usersX")  # Kafka's startsWith, kept as it is
    assert not sensitive_path("/config/topics/users")
    assert not sensitive_path("/brokers/topics/config")


# -- what the URL asks for ------------------------------------------------------------------------


def test_credentials_default_to_secure_acls_and_no_credentials_to_open() -> None:
    assert config(f"zookeeper://u:{SECRET}@h:1/c").set_acl
    assert not config("zookeeper://h:1/c").set_acl
    assert config(f"zookeeper://u:{SECRET}@h:1/c", set_acl=False).set_acl is False
    assert config(f"zookeeper://u:{SECRET}@h:1/c?set_acl=false", set_acl=True).set_acl


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("zookeeper://h:1/c?set_acl=true", "set_acl=true needs an authenticated identity"),
        ("zookeeper://h:1/c?set_acl=maybe", "set_acl='maybe' is not a boolean"),
        (f"zookeeper://u:{SECRET}@h:1/c?auth=kerberos", "auth='kerberos': give digest or sasl"),
        ("zookeeper://h:1/c?auth=sasl", "auth=sasl needs user:pass@"),
        ("zookeeper://h:1/c?jaas_section=Other", "jaas_section given without jaas=FILE"),
        (f"zookeeper://u:{SECRET}@h:1/c?jaas=/x", "user:pass@ or jaas=FILE, not both"),
        ("zookeeper://h:1/c?jaas=/no/such/file", "JAAS file '/no/such/file': cannot be read"),
    ],
)
def test_bad_security_parameters_are_refused_in_one_line(url: str, words: str) -> None:
    with pytest.raises(InvalidURLError) as info:
        config(url)
    message = str(info.value)
    assert words in message
    assert "\n" not in message
    assert SECRET not in message


def test_set_acl_true_without_credentials_is_refused_as_an_option_too() -> None:
    with pytest.raises(InvalidURLError, match="set_acl=true needs"):
        config("zookeeper://h:1/c", set_acl=True)


def test_digest_credentials_go_by_the_digest_scheme() -> None:
    parsed = config(f"zookeeper://kafka:{SECRET}@h:1/c")
    assert auth_data(parsed) == [("digest", f"kafka:{SECRET}")]
    assert sasl_options(parsed) is None


def test_auth_sasl_sends_the_url_credentials_by_sasl_digest_md5() -> None:
    parsed = config(f"zookeeper://kafka:{SECRET}@h:1/c?auth=sasl")
    assert auth_data(parsed) == []
    assert sasl_options(parsed) == {
        "mechanism": "DIGEST-MD5",
        "username": "kafka",
        "password": SECRET,
    }
    assert parsed.set_acl
    assert SECRET not in repr(parsed)
    assert any(SECRET in secret for secret in parsed.secrets)


# -- the JAAS file --------------------------------------------------------------------------------


def test_the_client_section_of_a_jaas_file_is_the_sasl_identity(tmp_path: Path) -> None:
    jaas = write_client_jaas(tmp_path / "jaas.conf", "kafka", SECRET)
    parsed = config(f"zookeeper://h:1/c?jaas={jaas}")
    assert sasl_options(parsed) == {
        "mechanism": "DIGEST-MD5",
        "username": "kafka",
        "password": SECRET,
    }
    assert parsed.set_acl
    assert SECRET not in repr(parsed)
    assert SECRET not in parsed.url.redacted()


def test_a_jaas_file_as_kafka_operators_write_it(tmp_path: Path) -> None:
    jaas = tmp_path / "kafka_server_jaas.conf"
    jaas.write_text(
        "// the brokers' listeners\n"
        "KafkaServer {\n"
        "  org.apache.kafka.common.security.plain.PlainLoginModule required\n"
        '  username="admin" password="admin-secret" user_admin="admin-secret";\n'
        "};\n"
        "/* ZooKeeper */\n"
        "Client{org.apache.zookeeper.server.auth.DigestLoginModule required "
        f'username=kafka password="{SECRET}";}};\n'
        "ZkOther {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
        '  username="other" password="a \\"quoted\\" one";\n};\n'
    )
    login = read_digest_login(str(jaas))
    assert (login.username, login.password) == ("kafka", SECRET)
    other = read_digest_login(str(jaas), "ZkOther")
    assert (other.username, other.password) == ("other", 'a "quoted" one')
    assert SECRET not in repr(login)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "no Client section"),
        ('Server { m required user_a="b"; };', "no Client section"),
        (
            "Client { com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true; };",
            "has no org.apache.zookeeper.server.auth.DigestLoginModule",
        ),
        (
            'Client { org.apache.zookeeper.server.auth.DigestLoginModule required username="a"; };',
            "gives no password",
        ),
        (f'Client {{ x required password="{SECRET}" ', "not JAAS syntax"),
        (f"{SECRET} {{ x required; }};", "no Client section"),
        (f"Client {{ {SECRET} required; }};", "has no org.apache.zookeeper.server.auth"),
        (f'Client {{ x required password="{SECRET} ; }};', "not JAAS syntax"),
    ],
)
def test_a_jaas_file_without_a_usable_client_section_is_refused(
    tmp_path: Path, text: str, words: str
) -> None:
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(text)
    with pytest.raises(JaasError) as info:
        read_digest_login(str(jaas))
    assert words in str(info.value)
    assert SECRET not in str(info.value)
    with pytest.raises(InvalidURLError) as url_info:
        config(f"zookeeper://h:1/c?jaas={jaas}")
    assert words in str(url_info.value)
    assert SECRET not in str(url_info.value)


def test_the_fixtures_server_jaas_lists_its_users(tmp_path: Path) -> None:
    jaas = write_server_jaas(tmp_path / "server.conf", {"kafka": SECRET, "coordkit": "x"})
    text = jaas.read_text()
    assert f'user_kafka="{SECRET}"' in text
    assert 'user_coordkit="x"' in text
    assert text.startswith("Server {")
    assert oct(jaas.stat().st_mode & 0o777) == "0o600"
    with pytest.raises(ValueError):
        write_client_jaas(tmp_path / "bad.conf", "kafka", 'a"b')


@pytest.mark.parametrize("command", ["tree", "serve"])
def test_no_secret_in_the_cli_refusal_of_a_bad_jaas_url(tmp_path: Path, command: str) -> None:
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(f'Client {{ org.example.Nope required password="{SECRET}"; }};')
    url = f"zookeeper://127.0.0.1:1/c?jaas={jaas}"
    args = ["tree", "--store", url, "/"] if command == "tree" else ["serve", "--port", "0"]
    result = CliRunner().invoke(cli, args, env={"COORDKIT_STORE": url})
    assert result.exit_code == 2
    assert SECRET not in result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith("error: ")
    assert "has no org.apache.zookeeper.server.auth.DigestLoginModule" in line


# -- coordkit serve --config zookeeper.set.acl ----------------------------------------------------


@pytest.mark.parametrize(
    ("url", "words", "expected"),
    [
        ("zookeeper://u:p@h:1/c", ["zookeeper.set.acl=true"], "zookeeper://u:p@h:1/c?set_acl=true"),
        (
            "zookeeper://u:p@h:1/c?session_timeout=5",
            ["zookeeper.set.acl=false"],
            "zookeeper://u:p@h:1/c?session_timeout=5&set_acl=false",
        ),
        (
            "zookeeper://h:1/c?set_acl=true",
            ["zookeeper.set.acl=true"],
            "zookeeper://h:1/c?set_acl=true",
        ),
        ("zookeeper://h:1/c", [], "zookeeper://h:1/c"),
        (
            "zookeeper://u:p@h:1/c?",
            ["zookeeper.set.acl=true"],
            "zookeeper://u:p@h:1/c?set_acl=true",
        ),
        (
            "zookeeper://u:p@h/c?set_acl=1",
            ["zookeeper.set.acl=true"],
            "zookeeper://u:p@h/c?set_acl=1",
        ),
        ("redis://h:1/0", ["zookeeper.set.acl=false"], "redis://h:1/0"),
    ],
)
def test_zookeeper_set_acl_becomes_the_store_urls_set_acl(
    url: str, words: list[str], expected: str
) -> None:
    assert store_url_for(url, parse_broker_configs(words)) == expected


@pytest.mark.parametrize(
    ("url", "word", "message"),
    [
        (
            f"redis://:{SECRET}@h:1/0",
            "zookeeper.set.acl=true",
            "--config zookeeper.set.acl=true: the store redis://:***@h:1/0 is not ZooKeeper",
        ),
        (
            f"zookeeper://u:{SECRET}@h:1/c?set_acl=false",
            "zookeeper.set.acl=true",
            "zookeeper.set.acl=true and the store URL's set_acl=false disagree",
        ),
        ("zookeeper://h:1/c", "zookeeper.set.acl=yes", "'yes' is not a boolean"),
    ],
)
def test_a_zookeeper_set_acl_that_cannot_apply_is_refused(
    url: str, word: str, message: str
) -> None:
    with pytest.raises(BrokerConfigError) as info:
        store_url_for(url, parse_broker_configs([word]))
    assert message in str(info.value)
    assert SECRET not in str(info.value)


# -- fuzzed: a JAAS file's password never reaches a message --------------------------------------

_JAAS_PIECES = st.sampled_from(
    [
        "Client",
        "Server",
        "{",
        "}",
        ";",
        "=",
        '"',
        "\\",
        "/*",
        "*/",
        "//",
        "\n",
        " ",
        "org.apache.zookeeper.server.auth.DigestLoginModule",
        "required",
        "username",
        "password",
        f'"{SECRET}"',
        SECRET,
        f"{SECRET[:5]}",
    ]
)


@settings(max_examples=150, deadline=None)
@given(pieces=st.lists(_JAAS_PIECES, max_size=30))
def test_a_jaas_file_of_any_shape_fails_in_one_line_without_the_password(
    tmp_path_factory: pytest.TempPathFactory, pieces: list[str]
) -> None:
    jaas = tmp_path_factory.mktemp("jaas") / "jaas.conf"
    jaas.write_text(" ".join(pieces))
    try:
        login = read_digest_login(str(jaas))
    except JaasError as exc:
        message = str(exc)
        assert "\n" not in message
        assert SECRET[:5] not in message
        return
    assert SECRET not in repr(login)


def test_the_kazoo_log_shows_no_sasl_token() -> None:
    """DIGEST-MD5's response is a hash of the password (an offline attack's input): kazoo's DEBUG
    line of each SASL packet keeps the request, not the token."""
    logger = RedactingLogger(logging.getLogger("coordkit.zookeeper.kazoo"), (SECRET,))
    token = 'qop=auth,realm="zk-sasl-md5",username="kafka",nonce="n",response=9a4a90ed8f3a'
    line = logger.redact(f"Sending request(xid=2): SASL(challenge=b'{token}')")
    assert line == "Sending request(xid=2): SASL(challenge=***)"


def test_sasl_without_pure_sasl_is_a_missing_dependency(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "puresasl" else find_spec(name, *a),
    )
    with pytest.raises(
        MissingDependencyError, match=r"pure-sasl library: pip install coordkit\[zookeeper\]"
    ):
        open_zookeeper_store(StoreURL.parse(f"zookeeper://kafka:{SECRET}@h:1/c?auth=sasl"))

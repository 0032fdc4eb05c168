"""Listeners, TLS and SASL on ``coordkit serve`` (#36 items 1-2): real clients over SASL_SSL
with SCRAM and PLAIN and over mutual TLS, producing and consuming in a group; the intruders of
the wire answered as Kafka's ``SaslServerAuthenticator`` answers them; every listener registered
and answered in Metadata; no secret in any output."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import struct
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramMechanism,
)

from coordkit.kafka import layout
from coordkit.protocol import KafkaCodec, messages
from coordkit.serve import KafkaServer
from coordkit.serve.listeners import parse_security_configs
from coordkit.serve.listeners.tls import certificate_principal
from serve.security_servers import (
    ALICE_PASSWORD,
    BOB_PASSWORD,
    SecureServe,
    client_config,
    create_scram_user,
    create_topic,
    make_pems,
    scram,
    security_args,
)
from serve.test_serve_cli import _serve

SASL_AUTHENTICATION_FAILED = 58
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34


@pytest.fixture(scope="module")
def pems(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_pems(tmp_path_factory.mktemp("pems"))


@pytest.fixture(scope="module")
def secure(pems: Path) -> Iterator[SecureServe]:
    server = SecureServe(["--config", "group.min.session.timeout.ms=100", *security_args(pems)])
    yield server
    server.stop()


def test_a_user_made_by_alter_user_scram_credentials_logs_in_over_sasl_ssl(
    secure: SecureServe, pems: Path
) -> None:
    create_scram_user(secure, pems, "bob", BOB_PASSWORD)
    admin = AdminClient(client_config(secure, "PLAINTEXT", pems))
    described = admin.describe_user_scram_credentials(["bob"])["bob"].result(30)
    infos = {(i.mechanism, i.iterations) for i in described.scram_credential_infos}
    assert infos == {(ScramMechanism.SCRAM_SHA_256, 4096), (ScramMechanism.SCRAM_SHA_512, 4096)}
    create_topic(secure, pems, "scram-topic")
    errors: list[str] = []
    config = client_config(secure, "SASL_SSL", pems, **scram("SCRAM-SHA-256", "bob", BOB_PASSWORD))
    producer = Producer({**config, "error_cb": lambda e: errors.append(str(e))})
    producer.produce("scram-topic", b"over SASL_SSL")
    assert producer.flush(30) == 0, errors
    assert errors == []


def test_a_client_certificate_names_the_principal_as_kafka(pems: Path) -> None:
    decoded = ssl._ssl._test_decode_cert(str(pems / "client.pem"))  # type: ignore[attr-defined]
    assert str(certificate_principal(decoded)) == "User:CN=client,OU=eng,O=example"
    assert str(certificate_principal(None)) == "User:ANONYMOUS"


class _Raw:
    """A connection speaking Kafka's frames, for what no client sends."""

    def __init__(self, address: str) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=20)
        self.codec = KafkaCodec()

    def call(self, body: Any, version: int) -> Any:
        self.sock.sendall(self.codec.encode_request(body, version=version, correlation_id=7))
        size = struct.unpack(">i", self._exactly(4))[0]
        api = type(body).KAFKA_NAME.removesuffix("Request")
        return self.codec.decode_response(api, version, self._exactly(size))[1]

    def closed(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except ConnectionError:
            return True

    def _exactly(self, count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = self.sock.recv(count - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data


def test_intruders_are_answered_as_kafka_answers_them(secure: SecureServe) -> None:
    address = secure.listeners["SASL_PLAINTEXT"]
    # A request other than ApiVersions or SaslHandshake before authenticating: closed.
    raw = _Raw(address)
    raw.sock.sendall(raw.codec.encode_request(messages.MetadataRequest(topics=None), version=12,
                                              correlation_id=1))  # fmt: skip
    assert raw.closed()
    # A mechanism the listener does not enable: UNSUPPORTED_SASL_MECHANISM, the enabled ones.
    raw = _Raw(address)
    answer = raw.call(messages.SaslHandshakeRequest(mechanism="GSSAPI"), 1)
    assert answer.error_code == UNSUPPORTED_SASL_MECHANISM
    assert answer.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert raw.closed()
    # A wrong password: SASL_AUTHENTICATION_FAILED with PlainSaslServer's message, closed.
    raw = _Raw(address)
    assert raw.call(messages.SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
    answer = raw.call(messages.SaslAuthenticateRequest(auth_bytes=b"\0alice\0wrong"), 2)
    assert answer.error_code == SASL_AUTHENTICATION_FAILED
    assert answer.error_message == "Authentication failed: Invalid username or password"
    assert raw.closed()
    # Authenticated (v0 handshake: raw tokens), then a handshake again: ILLEGAL_SASL_STATE.
    raw = _Raw(address)
    assert raw.call(messages.SaslHandshakeRequest(mechanism="PLAIN"), 0).error_code == 0
    token = f"\0alice\0{ALICE_PASSWORD}".encode()
    raw.sock.sendall(struct.pack(">i", len(token)) + token)
    assert raw._exactly(4) == b"\0\0\0\0"
    assert raw.call(messages.SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == (
        ILLEGAL_SASL_STATE
    )
    assert raw.call(messages.MetadataRequest(topics=None), 12).brokers
    # PLAINTEXT bytes to a TLS listener: the TLS handshake fails, the connection closes.
    raw = _Raw(secure.listeners["SASL_SSL"])
    raw.sock.sendall(raw.codec.encode_request(messages.ApiVersionsRequest(), version=0,
                                              correlation_id=1))  # fmt: skip
    assert raw.closed()


def test_a_wrong_scram_password_gets_kafkas_message(secure: SecureServe, pems: Path) -> None:
    errors: list[str] = []
    config = client_config(secure, "SASL_SSL", pems, **scram("SCRAM-SHA-256", "nobody", "nope"))
    producer = Producer({**config, "error_cb": lambda e: errors.append(str(e)),
                         "message.timeout.ms": 3000})  # fmt: skip
    producer.produce("scram-topic", b"x")
    producer.flush(10)
    assert any(
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism SCRAM-SHA-256" in e
        for e in errors
    ), errors


def test_metadata_answers_the_listener_the_client_came_on(secure: SecureServe, pems: Path) -> None:
    for protocol in ("PLAINTEXT", "SASL_SSL"):
        extra = scram("PLAIN", "alice", ALICE_PASSWORD) if protocol == "SASL_SSL" else {}
        brokers = (
            AdminClient(client_config(secure, protocol, pems, **extra))
            .list_topics(timeout=20)
            .brokers
        )
        assert [f"{b.host}:{b.port}" for b in brokers.values()] == [secure.listeners[protocol]]


def test_every_listener_is_registered_as_kafka_39_writes_it(pems: Path) -> None:
    words = [w for w in security_args(pems) if w != "--config"]
    security = parse_security_configs([tuple(w.split("=", 1)) for w in words], "127.0.0.1", 0)  # type: ignore[misc]
    server = KafkaServer(f"memory://security-{uuid.uuid4().hex}", [0, 1], port=0,
                         security=security)  # fmt: skip
    with server.running():
        thread = threading.Thread(target=lambda: asyncio.run(server.serve()))
        thread.start()
        try:
            for broker_id in (0, 1):
                data, _ = server.cluster.admin_store.get(layout.broker_path(broker_id))
                info = layout.BROKER.decode(data)
                names = [e.split("://")[0] for e in info.endpoints]
                assert names == ["PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL", "SSL"]
                plain = info.endpoints[0].split("://")[1]
                assert plain == f"127.0.0.1:{info.port}"
                assert layout.json.loads(data)["listener_security_protocol_map"] == {
                    name: name for name in names
                }
        finally:
            server.stop()
            thread.join(timeout=30)


def test_no_secret_appears_in_any_output(secure: SecureServe, pems: Path) -> None:
    out, err = secure.stop()
    assert "broker 0 listening on" in out
    for secret in (ALICE_PASSWORD, BOB_PASSWORD):
        assert secret not in out
        assert secret not in err


def test_a_bad_jaas_config_is_one_line_without_its_secret() -> None:
    name = "listener.name.sasl_plaintext.plain.sasl.jaas.config"
    result = _serve("--port", "0", "--config",
                    "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0", "--config",
                    "sasl.enabled.mechanisms=PLAIN", "--config",
                    f'{name}=Module required user_a="s3cr3t"')  # fmt: skip
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: --config {name}: not a JAAS config")
    assert "s3cr3t" not in result.stderr


def test_an_unauthenticated_listener_open_to_other_machines_is_warned_of() -> None:
    server = SecureServe(["--host", "0.0.0.0"])
    _, err = server.stop()
    assert "warning: a listener reachable from other machines does not authenticate" in err


def test_no_secret_reaches_the_log_at_any_level(
    pems: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """PLAIN and SCRAM logins, right and wrong, and a user's creation, with every logger at
    DEBUG: no password in any record."""
    from coordkit.serve.listeners.scram import new_credential, write_user_configs

    caplog.set_level(logging.DEBUG)
    words = [w for w in security_args(pems) if w != "--config"]
    security = parse_security_configs([tuple(w.split("=", 1)) for w in words], "127.0.0.1", 0)  # type: ignore[misc]
    server = KafkaServer(f"memory://secrets-{uuid.uuid4().hex}", [0], port=0, security=security)
    with server.running():
        credential = new_credential("SCRAM-SHA-256", BOB_PASSWORD).to_text()
        write_user_configs(server.cluster.admin_store, "bob", {"SCRAM-SHA-256": credential})
        thread = threading.Thread(target=lambda: asyncio.run(server.serve()))
        thread.start()
        try:
            sasl = next(b for b in server.bound if b.config.name == "SASL_PLAINTEXT")
            address = str(sasl.address(0))
            for password in (ALICE_PASSWORD, "not-" + ALICE_PASSWORD):
                raw = _Raw(address)
                raw.call(messages.SaslHandshakeRequest(mechanism="PLAIN"), 1)
                raw.call(messages.SaslAuthenticateRequest(
                    auth_bytes=f"\0alice\0{password}".encode()), 2)  # fmt: skip
            scram_client = {"bootstrap.servers": address, "security.protocol": "SASL_PLAINTEXT"}
            right = Producer({**scram_client, **scram("SCRAM-SHA-256", "bob", BOB_PASSWORD)})
            assert right.list_topics(timeout=20).brokers
            wrong = Producer(
                {**scram_client, **scram("SCRAM-SHA-256", "bob", "not-" + BOB_PASSWORD)}
            )
            with contextlib.suppress(KafkaException):
                wrong.list_topics(timeout=2)
        finally:
            server.stop()
            thread.join(timeout=30)
    assert any("closing the connection" in r.getMessage() for r in caplog.records)
    for secret in (ALICE_PASSWORD, BOB_PASSWORD):
        assert secret not in caplog.text


def test_a_user_made_by_coordkit_configs_logs_in(pems: Path) -> None:
    """``coordkit configs --entity-type users`` as kafka-configs: the user logs in with SCRAM,
    ``--describe`` shows the iterations only, the password is in no output, a bad credential is
    one line without it."""
    from click.testing import CliRunner

    from coordkit.cli import cli

    url = f"memory://configs-users-{uuid.uuid4().hex}"
    base = ["configs", "--store", url, "--entity-type", "users"]
    made = CliRunner().invoke(cli, [*base, "--entity-name", "erin", "--alter", "--add-config",
                                    f"SCRAM-SHA-512=[iterations=8192,password={BOB_PASSWORD}]"])  # fmt: skip
    assert (made.exit_code, made.output) == (0, "Completed updating config for user erin.\n")
    shown = CliRunner().invoke(cli, [*base, "--describe"])
    assert shown.output == (
        "SCRAM credential configs for user-principal 'erin' are SCRAM-SHA-512=iterations=8192\n"
    )
    bad = CliRunner().invoke(cli, [*base, "--entity-name", "erin", "--alter", "--add-config",
                                   f"SCRAM-SHA-512=[iterations=12,password={BOB_PASSWORD}]"])  # fmt: skip
    assert bad.exit_code == 2
    assert "iterations 12 is outside 4096-16384" in bad.output
    assert BOB_PASSWORD not in made.output + shown.output + bad.output
    words = ["listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
             "sasl.enabled.mechanisms=SCRAM-SHA-512"]  # fmt: skip
    security = parse_security_configs([tuple(w.split("=", 1)) for w in words], "127.0.0.1", 0)  # type: ignore[misc]
    server = KafkaServer(url, [0], port=0, security=security)
    with server.running():
        thread = threading.Thread(target=lambda: asyncio.run(server.serve()))
        thread.start()
        try:
            address = str(server.bound[1].address(0))
            client = {"bootstrap.servers": address, "security.protocol": "SASL_PLAINTEXT"}
            producer = Producer({**client, **scram("SCRAM-SHA-512", "erin", BOB_PASSWORD)})
            assert producer.list_topics(timeout=20).brokers
        finally:
            server.stop()
            thread.join(timeout=30)

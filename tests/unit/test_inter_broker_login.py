"""The client side of a broker's inter-broker connections (serve/control_plane/connector.py,
serve/listeners/sasl_client.py): its configs, the SASL exchange against coordkit's own server
side, the endpoint it picks. The exchange over the wire, with Kafka 3.9 brokers too, is
tests/security/test_inter_broker_security.py's (tox -e py311-security)."""

from __future__ import annotations

import ssl
from typing import Any

import pytest

from coordkit.protocol import messages
from coordkit.serve.control_plane.connector import BrokerConnector, broker_connector
from coordkit.serve.listeners.config import SecurityConfigError, parse_security_configs
from coordkit.serve.listeners.plain import authenticate_plain
from coordkit.serve.listeners.sasl_client import (
    SaslClientError,
    SaslCredentials,
    ScramClient,
    sasl_exchange,
)
from coordkit.serve.listeners.scram import ScramError, ScramServer, new_credential

PASSWORD = "broker-login-secret-5e1d"
SCRAM_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    f'username="broker" password="{PASSWORD}";'
)
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="broker" password="{PASSWORD}" user_broker="{PASSWORD}";'
)


def _configs(*words: str) -> Any:
    pairs = [w.split("=", 1) for w in words]
    return parse_security_configs([(k, v) for k, v in pairs], "127.0.0.1", 0)


SASL_PLAINTEXT_INTER_BROKER = (
    "listeners=SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
    "inter.broker.listener.name=SASL_PLAINTEXT",
    "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256",
)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_the_scram_client_logs_in_to_coordkits_scram_server(mechanism: str) -> None:
    credential = new_credential(mechanism, PASSWORD, 4096)
    client, server = ScramClient(mechanism, "bro,ker=1", PASSWORD), ScramServer(mechanism)
    first = client.first()
    user = ScramServer.username_of(first)
    assert user == "bro,ker=1"  # the RFC 5802 escapes undone by the server
    final = client.final(server.first(first, credential, user))
    client.verify(server.final(final))
    assert server.complete
    assert server.user == user


def test_a_wrong_password_is_refused_and_a_forged_server_signature_too() -> None:
    credential = new_credential("SCRAM-SHA-256", PASSWORD)
    client, server = ScramClient("SCRAM-SHA-256", "broker", "not-it"), ScramServer("SCRAM-SHA-256")
    first = client.first()
    final = client.final(server.first(first, credential, "broker"))
    with pytest.raises(ScramError):
        server.final(final)
    honest = ScramClient("SCRAM-SHA-256", "broker", PASSWORD)
    impostor = ScramServer("SCRAM-SHA-256")  # knows another password's keys
    first = honest.first()
    other = new_credential("SCRAM-SHA-256", "other")
    honest.final(impostor.first(first, other, "broker"))
    with pytest.raises(SaslClientError, match="signature does not match"):
        honest.verify(b"v=" + b"A" * 44)


def test_a_server_first_message_with_few_iterations_or_another_nonce_is_refused() -> None:
    client = ScramClient("SCRAM-SHA-256", "broker", PASSWORD)
    nonce = client.first().decode().rsplit("r=", 1)[1]
    with pytest.raises(SaslClientError, match="fewer than 4096"):
        client.final(f"r={nonce}x,s=c2FsdA==,i=1000".encode())
    with pytest.raises(SaslClientError, match="nonce"):
        client.final(b"r=someone-else,s=c2FsdA==,i=4096")


def _drive(credentials: SaslCredentials, answers: list[Any]) -> list[Any]:
    """The requests the exchange sends when answered ``answers`` in turn."""
    exchange = sasl_exchange(credentials)
    sent = [exchange.send(None)]
    for answer in answers:
        try:
            sent.append(exchange.send(answer))
        except StopIteration:
            break
    return [body for body, _version in sent]


def test_the_plain_exchange_is_one_handshake_and_one_token() -> None:
    ok = messages.SaslAuthenticateResponse(error_code=0, error_message="", auth_bytes=b"",
                                           session_lifetime_ms=0)  # fmt: skip
    sent = _drive(SaslCredentials("PLAIN", "broker", PASSWORD),
                  [messages.SaslHandshakeResponse(error_code=0, mechanisms=["PLAIN"]), ok])  # fmt: skip
    assert sent[0].mechanism == "PLAIN"
    assert authenticate_plain({"broker": PASSWORD}, sent[1].auth_bytes) == "broker"
    assert len(sent) == 2


def test_a_refused_mechanism_or_login_is_an_oserror_without_the_password() -> None:
    credentials = SaslCredentials("SCRAM-SHA-256", "broker", PASSWORD)
    with pytest.raises(OSError, match=r"refused .*PLAIN") as refused:
        _drive(credentials, [messages.SaslHandshakeResponse(error_code=33, mechanisms=["PLAIN"])])
    failed = messages.SaslAuthenticateResponse(
        error_code=58, error_message="Authentication failed during authentication due to "
        "invalid credentials with SASL mechanism SCRAM-SHA-256", auth_bytes=b"",
        session_lifetime_ms=0)  # fmt: skip
    with pytest.raises(OSError, match="invalid credentials") as failure:
        _drive(credentials, [messages.SaslHandshakeResponse(error_code=0, mechanisms=[]), failed])
    for exc in (refused.value, failure.value):
        assert PASSWORD not in str(exc)
    assert PASSWORD not in repr(credentials)


def test_a_sasl_inter_broker_listener_needs_a_mechanism_it_enables() -> None:
    with pytest.raises(SecurityConfigError, match=r"sasl\.mechanism\.inter\.broker\.protocol"):
        _configs(*SASL_PLAINTEXT_INTER_BROKER)
    with pytest.raises(
        SecurityConfigError, match=r"sasl\.mechanism\.inter\.broker\.protocol=GSSAPI"
    ):
        _configs(*SASL_PLAINTEXT_INTER_BROKER, "sasl.mechanism.inter.broker.protocol=GSSAPI")


@pytest.mark.parametrize(
    ("jaas", "shown"),
    [
        (None, "needs the brokers' own login"),
        ('org.apache.kafka.common.security.scram.ScramLoginModule required username="b";',
         "needs username and password"),
        (PLAIN_JAAS, "SCRAM-SHA-256 needs org.apache.kafka.common.security.scram.ScramLoginModule"),
    ],
)  # fmt: skip
def test_the_brokers_login_comes_from_the_listeners_jaas_config(
    jaas: str | None, shown: str
) -> None:
    words = [*SASL_PLAINTEXT_INTER_BROKER, "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-256",
             f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}"]  # fmt: skip
    if jaas is not None:
        words.append(f"listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config={jaas}")
    configs = _configs(*words)
    with pytest.raises(SecurityConfigError, match=shown) as refused:
        broker_connector(configs)
    assert PASSWORD not in str(refused.value)


def test_the_connector_logs_in_with_the_mechanisms_credentials() -> None:
    configs = _configs(
        *SASL_PLAINTEXT_INTER_BROKER, "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-256",
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}",
        f"listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config={SCRAM_JAAS}",
    )  # fmt: skip
    connector = broker_connector(configs)
    assert connector.listener == "SASL_PLAINTEXT"
    assert connector.tls is None
    assert connector.credentials == SaslCredentials("SCRAM-SHA-256", "broker", PASSWORD)
    assert PASSWORD not in repr(connector)


def test_the_peer_is_reached_on_its_inter_broker_listener() -> None:
    endpoints = ["PLAINTEXT://h1:9092", "SASL_SSL://[::1]:9094", "SSL://h3:9093"]
    assert BrokerConnector("SASL_SSL", "SASL_SSL").address(endpoints, "h1", 9092) == ("::1", 9094)
    assert BrokerConnector().address(endpoints, "h1", 9092) == ("h1", 9092)
    # An old registration without endpoints: its host and port.
    assert BrokerConnector("SSL", "SSL").address([], "h0", 9000) == ("h0", 9000)


def test_tls_to_a_peer_checks_its_host_name_unless_the_algorithm_is_empty() -> None:
    base = ("listeners=SSL://127.0.0.1:0", "inter.broker.listener.name=SSL")
    connector = broker_connector(_configs(*base))
    assert connector.tls is not None
    assert connector.tls.check_hostname
    assert connector.tls.verify_mode == ssl.CERT_REQUIRED
    unchecked = broker_connector(_configs(*base, "ssl.endpoint.identification.algorithm="))
    assert unchecked.tls is not None
    assert not unchecked.tls.check_hostname
    assert unchecked.tls.verify_mode == ssl.CERT_REQUIRED
    with pytest.raises(SecurityConfigError, match=r"ssl\.truststore\.location=/nonexistent"):
        broker_connector(_configs(*base, "ssl.truststore.location=/nonexistent/ca.pem"))


def test_a_peer_that_ends_the_login_is_logged_once_without_the_password(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import asyncio
    import socket
    import threading

    server = socket.create_server(("127.0.0.1", 0))
    address = server.getsockname()[:2]

    def serve() -> None:  # reads the handshake, then hangs up (as a broker refusing it does)
        for _ in range(3):
            conn, _ = server.accept()
            conn.recv(1024)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    connector = BrokerConnector("SASL_PLAINTEXT", "SASL_PLAINTEXT", None,
                                SaslCredentials("SCRAM-SHA-256", "broker", PASSWORD))  # fmt: skip
    with caplog.at_level("DEBUG", logger="coordkit.serve"):
        for _ in range(2):
            with pytest.raises(SaslClientError, match="closed the connection"):
                connector.connect(address, timeout=5)
        with pytest.raises(SaslClientError, match="closed the connection"):
            asyncio.run(connector.open(address, timeout=5))
    thread.join(timeout=5)
    server.close()
    refusals = [r for r in caplog.records if "refused" in r.getMessage()]
    assert len(refusals) == 1, [r.getMessage() for r in caplog.records]
    assert f"{address[0]}:{address[1]}" in refusals[0].getMessage()
    assert PASSWORD not in caplog.text

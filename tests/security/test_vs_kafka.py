"""The intruders of a SASL listener answered by ``coordkit serve`` as by Kafka 4.4 configured
the same way (a SASL_PLAINTEXT listener beside PLAINTEXT, PLAIN and SCRAM-SHA-256 enabled): the
same raw requests to both, the answers compared field by field; and KIP-368 re-authentication
the same way, on a second pair with ``connections.max.reauth.ms`` set."""

from __future__ import annotations

import base64
import socket
import struct
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from coordkit.protocol import KafkaCodec, messages
from security.sasl_kafka import SaslKafka
from serve.security_servers import ALICE_PASSWORD, PLAIN_JAAS, SecureServe

SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
MECHANISMS = "PLAIN,SCRAM-SHA-256"


@pytest.fixture(scope="module")
def kafka_sasl() -> Iterator[str]:
    cluster = SaslKafka(broker_ids=(1,), properties={
        "sasl.enabled.mechanisms": MECHANISMS,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
    })  # fmt: skip
    cluster.sasl_ports = {}
    with cluster:
        yield f"127.0.0.1:{cluster.sasl_ports[1]}"


@pytest.fixture(scope="module")
def coordkit_sasl() -> Iterator[str]:
    words = ["listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
             f"sasl.enabled.mechanisms={MECHANISMS}",
             f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}"]  # fmt: skip
    server = SecureServe([arg for word in words for arg in ("--config", word)])
    yield server.listeners["SASL_PLAINTEXT"]
    server.stop()


class _Wire:
    def __init__(self, address: str) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=20)
        self.codec = KafkaCodec()

    def call(self, body: Any, version: int) -> dict[str, Any]:
        self.sock.sendall(self.codec.encode_request(body, version=version, correlation_id=3))
        try:
            size = struct.unpack(">i", self._exactly(4))[0]
        except ConnectionError:
            return {"closed": True}
        api = type(body).KAFKA_NAME.removesuffix("Request")
        response = self.codec.decode_response(api, version, self._exactly(size))[1]
        return {k: v for k, v in response.to_dict().items() if k != "auth_bytes"}

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


def _metadata_first(wire: _Wire) -> list[Any]:
    return [wire.call(messages.MetadataRequest(topics=None), 12), wire.closed()]


def _unsupported_mechanism(wire: _Wire) -> list[Any]:
    return [wire.call(messages.SaslHandshakeRequest(mechanism="GSSAPI"), 1), wire.closed()]


def _wrong_plain_password(wire: _Wire) -> list[Any]:
    return [
        wire.call(messages.SaslHandshakeRequest(mechanism="PLAIN"), 1),
        wire.call(messages.SaslAuthenticateRequest(auth_bytes=b"\0alice\0wrong"), 2),
        wire.closed(),
    ]


def _unknown_scram_user(wire: _Wire) -> list[Any]:
    nonce = base64.b64encode(b"0123456789abcdef").decode()
    first = f"n,,n=nobody,r={nonce}".encode()
    return [
        wire.call(messages.SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1),
        wire.call(messages.SaslAuthenticateRequest(auth_bytes=first), 2),
        wire.closed(),
    ]


def _another_request_while_authenticating(wire: _Wire) -> list[Any]:
    return [
        wire.call(messages.SaslHandshakeRequest(mechanism="PLAIN"), 1),
        wire.call(messages.MetadataRequest(topics=None), 12),
        wire.closed(),
    ]


def _sasl_again_after_authenticating(wire: _Wire) -> list[Any]:
    return [
        wire.call(messages.ApiVersionsRequest(), 0)["error_code"],
        wire.call(messages.SaslHandshakeRequest(mechanism="PLAIN"), 1),
        wire.call(messages.SaslAuthenticateRequest(
            auth_bytes=f"\0alice\0{ALICE_PASSWORD}".encode()), 2),
        wire.call(messages.SaslHandshakeRequest(mechanism="PLAIN"), 1),
        wire.call(messages.SaslAuthenticateRequest(auth_bytes=b"x"), 2),
    ]  # fmt: skip


@pytest.mark.parametrize(
    "case",
    [_metadata_first, _unsupported_mechanism, _wrong_plain_password, _unknown_scram_user,
     _another_request_while_authenticating, _sasl_again_after_authenticating],
    ids=lambda case: case.__name__.strip("_"),
)  # fmt: skip
def test_a_sasl_listener_answers_as_kafka(
    kafka_sasl: str, coordkit_sasl: str, case: Callable[[_Wire], list[Any]]
) -> None:
    assert case(_Wire(coordkit_sasl)) == case(_Wire(kafka_sasl))


# -- KIP-368 re-authentication (connections.max.reauth.ms) -------------------------------------

#: Short enough to wait out in a test; long enough for a re-authentication well inside it.
REAUTH_MS = 2500
CAROL_PASSWORD = "carol-secret-2b8d"
REAUTH_JAAS = PLAIN_JAAS.removesuffix(";") + f' user_carol="{CAROL_PASSWORD}";'


@pytest.fixture(scope="module")
def kafka_reauth() -> Iterator[str]:
    cluster = SaslKafka(broker_ids=(1,), properties={
        "sasl.enabled.mechanisms": MECHANISMS,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": REAUTH_JAAS,
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
        "connections.max.reauth.ms": str(REAUTH_MS),
    })  # fmt: skip
    cluster.sasl_ports = {}
    with cluster:
        yield f"127.0.0.1:{cluster.sasl_ports[1]}"


@pytest.fixture(scope="module")
def coordkit_reauth() -> Iterator[str]:
    words = ["listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
             f"sasl.enabled.mechanisms={MECHANISMS}",
             f"listener.name.sasl_plaintext.plain.sasl.jaas.config={REAUTH_JAAS}",
             f"connections.max.reauth.ms={REAUTH_MS}"]  # fmt: skip
    server = SecureServe([arg for word in words for arg in ("--config", word)])
    yield server.listeners["SASL_PLAINTEXT"]
    out, err = server.stop()
    assert CAROL_PASSWORD not in out + err


def _login(wire: _Wire, user: str = "alice", password: str = ALICE_PASSWORD) -> list[Any]:
    return [
        wire.call(messages.SaslHandshakeRequest(mechanism="PLAIN"), 1),
        wire.call(messages.SaslAuthenticateRequest(
            auth_bytes=f"\0{user}\0{password}".encode()), 2),
    ]  # fmt: skip


def _metadata_answered(wire: _Wire) -> bool:
    answer = wire.call(messages.MetadataRequest(topics=[]), 12)
    return "closed" not in answer and bool(answer["brokers"])


def _session_lifetime(wire: _Wire) -> list[Any]:
    return _login(wire)


def _reauthenticated_as_the_same_principal(wire: _Wire) -> list[Any]:
    return [*_login(wire), *_login(wire), _metadata_answered(wire)]


def _reauthenticated_as_another_principal(wire: _Wire) -> list[Any]:
    return [*_login(wire), *_login(wire, "carol", CAROL_PASSWORD), wire.closed()]


def _reauthenticated_with_a_wrong_password(wire: _Wire) -> list[Any]:
    return [*_login(wire), *_login(wire, "alice", "wrong"), wire.closed()]


def _reauthenticated_with_another_mechanism(wire: _Wire) -> list[Any]:
    nonce = base64.b64encode(b"0123456789abcdef").decode()
    return [
        *_login(wire),
        wire.call(messages.SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1),
        wire.call(messages.SaslAuthenticateRequest(auth_bytes=f"n,,n=alice,r={nonce}".encode()), 2),
    ]


def _reauthenticated_twice_within_a_second(wire: _Wire) -> list[Any]:
    return [*_login(wire), *_login(wire), *_login(wire), _metadata_answered(wire)]


def _session_over(wire: _Wire) -> list[Any]:
    first = _login(wire)
    time.sleep(REAUTH_MS / 1000 + 0.5)
    return [*first, wire.call(messages.MetadataRequest(topics=[]), 12)]


def _reauthenticated_in_time(wire: _Wire) -> list[Any]:
    first = _login(wire)
    time.sleep(REAUTH_MS / 1000 * 0.6)
    again = _login(wire)
    time.sleep(REAUTH_MS / 1000 * 0.6)  # past the first session's end, inside the second's
    return [*first, *again, _metadata_answered(wire)]


@pytest.mark.parametrize(
    "case",
    [_session_lifetime, _reauthenticated_as_the_same_principal,
     _reauthenticated_as_another_principal, _reauthenticated_with_a_wrong_password,
     _reauthenticated_with_another_mechanism, _reauthenticated_twice_within_a_second,
     _session_over, _reauthenticated_in_time],
    ids=lambda case: case.__name__.strip("_"),
)  # fmt: skip
def test_reauthentication_as_kafka(
    kafka_reauth: str, coordkit_reauth: str, case: Callable[[_Wire], list[Any]]
) -> None:
    """KIP-368 with ``connections.max.reauth.ms`` set: the session lifetime answered, a
    re-authentication mid-connection (same principal: accepted; another principal, a wrong
    password or another mechanism: refused and closed; a second within a second: not begun),
    and a session over without one: the connection closed at the next request."""
    found = case(_Wire(coordkit_reauth))
    assert found == case(_Wire(kafka_reauth))


def test_the_reauthentication_cases_show_what_they_compare(coordkit_reauth: str) -> None:
    """The comparison above cannot pass emptily: a lifetime is answered, a re-authentication
    keeps the connection, another principal is refused, a session over closes."""
    assert _session_lifetime(_Wire(coordkit_reauth))[1]["session_lifetime_ms"] == REAUTH_MS
    assert _reauthenticated_as_the_same_principal(_Wire(coordkit_reauth))[-1] is True
    refused = _reauthenticated_as_another_principal(_Wire(coordkit_reauth))
    assert refused[3]["error_code"] == 58
    assert refused[-1] is True
    assert _session_over(_Wire(coordkit_reauth))[-1] == {"closed": True}
    assert _reauthenticated_in_time(_Wire(coordkit_reauth))[-1] is True

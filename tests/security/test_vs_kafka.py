"""The intruders of a SASL listener answered by ``coordkit serve`` as by Kafka 4.4 configured
the same way (a SASL_PLAINTEXT listener beside PLAINTEXT, PLAIN and SCRAM-SHA-256 enabled): the
same raw requests to both, the answers compared field by field."""

from __future__ import annotations

import base64
import socket
import struct
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from coordkit.protocol import KafkaCodec, messages
from coordkit.testing.servers.kafka_server import KafkaCluster, KafkaNode
from coordkit.testing.servers.ports import free_port
from serve.security_servers import ALICE_PASSWORD, PLAIN_JAAS, SecureServe

SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
MECHANISMS = "PLAIN,SCRAM-SHA-256"


class _SaslKafka(KafkaCluster):
    """Kafka's fixture with a SASL_PLAINTEXT listener beside its PLAINTEXT one."""

    sasl_ports: dict[int, int]

    def _node_properties(self, node: KafkaNode) -> dict[str, str]:
        properties = super()._node_properties(node)
        port = self.sasl_ports.setdefault(node.node_id, free_port())
        sasl = f"SASL_PLAINTEXT://127.0.0.1:{port}"
        properties["listeners"] += f",{sasl}"
        properties["advertised.listeners"] += f",{sasl}"
        properties["listener.security.protocol.map"] += ",SASL_PLAINTEXT:SASL_PLAINTEXT"
        return properties


@pytest.fixture(scope="module")
def kafka_sasl() -> Iterator[str]:
    cluster = _SaslKafka(broker_ids=(1,), properties={
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

"""Kafka nodes (KRaft, Kafka 4.4) with a SASL_PLAINTEXT listener beside their PLAINTEXT one, and a
raw client that logs in to such a listener with SASL/PLAIN, for the tests that compare coordkit
serve's SASL listeners with Kafka's."""

from __future__ import annotations

import socket
import struct
from typing import Any

from coordkit.protocol import KafkaCodec, messages
from coordkit.testing.servers.kafka_server import KafkaCluster, KafkaNode
from coordkit.testing.servers.ports import free_port


class SaslKafka(KafkaCluster):
    """Kafka's fixture with a SASL_PLAINTEXT listener beside its PLAINTEXT one (each node's port
    in :attr:`sasl_ports`)."""

    sasl_ports: dict[int, int]

    def _node_properties(self, node: KafkaNode) -> dict[str, str]:
        properties = super()._node_properties(node)
        port = self.sasl_ports.setdefault(node.node_id, free_port())
        sasl = f"SASL_PLAINTEXT://127.0.0.1:{port}"
        properties["listeners"] += f",{sasl}"
        properties["advertised.listeners"] += f",{sasl}"
        properties["listener.security.protocol.map"] += ",SASL_PLAINTEXT:SASL_PLAINTEXT"
        return properties


class PlainClient:
    """One connection to ``address`` logged in as ``user`` with SASL/PLAIN, speaking raw
    requests (:meth:`call` decodes the answer)."""

    def __init__(self, address: str, user: str, password: str) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.codec = KafkaCodec()
        assert self.call(messages.SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        token = f"\0{user}\0{password}".encode()
        done = self.call(messages.SaslAuthenticateRequest(auth_bytes=token), 2)
        assert done.error_code == 0, done.error_message

    def call(self, body: Any, version: int) -> Any:
        self.sock.sendall(self.codec.encode_request(body, version=version, correlation_id=1))
        size = struct.unpack(">i", self._exactly(4))[0]
        api = type(body).KAFKA_NAME.removesuffix("Request")
        return self.codec.decode_response(api, version, self._exactly(size))[1]

    def close(self) -> None:
        self.sock.close()

    def _exactly(self, count: int) -> bytes:
        data = bytearray()
        while len(data) < count:
            chunk = self.sock.recv(count - len(data))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            data += chunk
        return bytes(data)
